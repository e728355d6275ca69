"""Prescient in a process whose h5py is a pip wheel (its own libhdf5, loaded privately).

What it takes, tested for real with the pinned wheel of requirements.txt:
- the ordinary plugin (linked against the system's libhdf5) cannot serve such a process: it
  brings a second HDF5 into it, which knows none of the wheel's ids;
- the plugin in plugins-wheel/ (vol/loaded_hdf5) binds the connector to the wheel's own
  libhdf5 with environment settings only, and then every read is exact, cached reads are
  served, forked readers work, and a schedule prefetches.
"""

import glob
import itertools
import json
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
READS = os.path.join(HERE, "wheeltest_reads.py")
SAMPLES, EPOCHS, SEED = 600, 2, 9
IMAGE_ROW_BYTES = 16 * 64 * 4
_ids = itertools.count()


def clean_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HDF5_", "PRESCIENT_", "LD_PRELOAD", "PYTHON"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def connector_env(plugin_dir, tmp_path, extra=None):
    env = clean_env()
    env.update({"HDF5_PLUGIN_PATH": plugin_dir, "HDF5_VOL_CONNECTOR": "prescient",
                "PRESCIENT_CACHE_SIZE": "128MiB",
                "PRESCIENT_MIN_DATASET_BYTES": "0",  # the small test datasets stand for large ones
                "PRESCIENT_NODE_ID": f"wtest-{os.getpid()}-{next(_ids)}",
                "PRESCIENT_STATS": str(tmp_path / "stats-%p.json")})
    env.update(extra or {})
    return env


def run(args, env, cwd, check=True):
    proc = subprocess.run(list(map(str, args)), env=env, cwd=str(cwd), capture_output=True,
                          text=True, timeout=300)
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args))} failed (exit {proc.returncode}):\n"
                    f"{proc.stderr[-3000:]}", pytrace=False)
    return proc


def stats(directory):
    out = []
    for path in glob.glob(os.path.join(str(directory), "stats-*.json")):
        with open(path) as f:
            out.append(json.load(f))
    return out


def total(values, key):
    return sum(v.get(key, 0) for v in values)


@pytest.fixture(scope="module")
def data(tmp_path_factory, wheel_python):
    root = tmp_path_factory.mktemp("wheel")
    path = root / "samples.h5"
    run([wheel_python, READS, path, "--make", SAMPLES], clean_env(), root)
    native = root / "native.json"
    run([wheel_python, READS, path, native, "--epochs", EPOCHS, "--seed", SEED], clean_env(), root)
    with open(native) as f:
        return path, json.load(f)


def test_the_venv_is_a_real_wheel(data):
    _, native = data
    assert native["h5py"] == "3.13.0"
    assert native["hdf5"].startswith("1.14.")
    # The wheel's own, renamed libhdf5, not the system's.
    assert "/h5py.libs/libhdf5-" in native["libhdf5"], native["libhdf5"]
    assert native["connector"] == "native"


def test_the_linked_plugin_cannot_serve_a_wheel_process(wheel_python, build_dir, data, tmp_path):
    """The README's reason for plugins-wheel/: the ordinary plugin loads a second libhdf5."""
    path, _ = data
    proc = run([wheel_python, READS, path, tmp_path / "out.json"],
               connector_env(os.path.join(build_dir, "plugins"), tmp_path), tmp_path, check=False)
    assert proc.returncode != 0, "the linked plugin served a wheel process: update README.md"
    # The second library reports itself: the system's HDF5 answers calls with the wheel's ids.
    assert "not a property list" in proc.stderr or "HDF5 (1.14.5)" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.parametrize("fork", [False, True], ids=["one-process", "forked-reader"])
def test_wheel_plugin_serves_exact_reads(wheel_python, build_dir, data, tmp_path, fork):
    path, native = data
    out = tmp_path / "out.json"
    run([wheel_python, READS, path, out, "--epochs", EPOCHS, "--seed", SEED,
         *(["--fork"] if fork else [])],
        connector_env(os.path.join(build_dir, "plugins-wheel"), tmp_path), tmp_path)
    with open(out) as f:
        got = json.load(f)
    assert got["connector"] == "prescient", "HDF5 did not load the connector"
    assert got["libhdf5"] == native["libhdf5"], "a second libhdf5 came into the process"
    assert (got["child_epochs"] if fork else got["epochs"]) == native["epochs"], \
        "reads through the wheel plugin differ from the wheel's native reads"
    s = stats(tmp_path)
    assert s, "no statistics file: the connector did not run"
    reads = total(s, "reads")
    assert reads == 3 * SAMPLES * EPOCHS
    assert total(s, "reads_served") == reads, "not every whole-sample read was served"
    assert total(s, "rows_hit") >= 3 * SAMPLES * (EPOCHS - 1), "the second epoch was not cached"


def test_wheel_plugin_follows_a_schedule(wheel_python, build_dir, data, tmp_path):
    path, native = data
    schedule = tmp_path / "numpy.sched"
    run([os.path.join(build_dir, "scheduler", "tool", "prescient-schedule"), "generate",
         "--source", "numpy", "--samples", SAMPLES, "--epochs", EPOCHS, "--seed", SEED,
         "--dataset", f"{path}:images", "--row-bytes", IMAGE_ROW_BYTES, "--quiet",
         "--output", schedule], clean_env(), tmp_path)
    out = tmp_path / "out.json"
    run([wheel_python, READS, path, out, "--epochs", EPOCHS, "--seed", SEED],
        connector_env(os.path.join(build_dir, "plugins-wheel"), tmp_path,
                      {"PRESCIENT_SCHEDULE": str(schedule)}), tmp_path)
    with open(out) as f:
        assert json.load(f)["epochs"] == native["epochs"]
    s = stats(tmp_path)
    assert total(s, "schedule_mismatches") == 0
    assert total(s, "schedule_matches") > 0
    assert total(s, "rows_prefetched") > 0, "the schedule's prefetch loaded nothing"


RECORD_READS = """
import sys, h5py
sys.path.insert(0, sys.argv[2])
from prescient import _plugin
f = h5py.File(sys.argv[1], "r")  # HDF5 loads (and binds) the connector
recorder = _plugin.find_recorder()
assert recorder is not None, "no recorder found in the wheel process"
assert recorder.begin()
f["images"][5]
f["images"][[7, 9]]
sys.stdout.write(recorder.end().decode())
"""


def test_wheel_plugin_offers_the_followers_read_recorder(wheel_python, build_dir, data, tmp_path):
    # The bound connector lives in an anonymous memory file; the plugin HDF5 found forwards
    # prescient_follow_begin/_end to it, so PRESCIENT_FOLLOW learns rows in wheel processes too.
    path, _ = data
    proc = run([wheel_python, "-c", RECORD_READS, path, os.path.join(REPO, "python")],
               connector_env(os.path.join(build_dir, "plugins-wheel"), tmp_path), tmp_path)
    lines = proc.stdout.splitlines()
    assert [line.split("\t")[1:] for line in lines] == [
        ["/images", str(SAMPLES), "5+1"], ["/images", str(SAMPLES), "7+1,9+1"]], proc.stdout


def test_wheel_plugin_binds_to_whichever_libhdf5_loads_it(build_dir, data, tmp_path):
    """The same plugins-wheel/ serves the environment's own h5py (Debian's, linked to the
    system libhdf5 of the same series): it binds to the library that loads it, not to a name."""
    path, native = data
    out = tmp_path / "out.json"
    run(["python3", READS, path, out, "--epochs", EPOCHS, "--seed", SEED],
        connector_env(os.path.join(build_dir, "plugins-wheel"), tmp_path), tmp_path)
    with open(out) as f:
        got = json.load(f)
    assert got["connector"] == "prescient"
    assert "h5py.libs" not in got["libhdf5"]
    assert got["epochs"] == native["epochs"]
    assert total(stats(tmp_path), "reads_served") == 3 * SAMPLES * EPOCHS


@pytest.mark.slow
def test_h5py_suite_of_the_wheel_with_the_wheel_plugin(wheel_python, build_dir):
    """h5py's own test suite, shipped in the wheel (h5py.tests), natively and through
    plugins-wheel/: no failure beyond the native run (tests/h5py_suite/run compares them)."""
    env = clean_env()
    env.update({"PRESCIENT_PLUGIN_DIR": os.path.join(build_dir, "plugins-wheel"),
                "PRESCIENT_H5PY_MODULE": "h5py", "PRESCIENT_H5PY_SUITE_NAME": "wheel"})
    harness = os.path.join(os.path.dirname(os.path.dirname(HERE)), "h5py_suite", "run")
    proc = subprocess.run([wheel_python, harness], env=env, capture_output=True, text=True,
                          timeout=1200)
    print(proc.stdout[-4000:])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "SUMMARY: OK" in proc.stdout

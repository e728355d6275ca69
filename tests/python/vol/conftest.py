"""Fixtures for the connector integration tests (tests/python/vol).

Every test runs h5py code in subprocesses: natively (no HDF5_VOL_CONNECTOR) and with the
connector loaded through the environment, exactly as an unmodified job would load it.

Environment:
  PRESCIENT_PLUGIN_DIR      directory holding libprescient_vol.so (default <repo>/build/dev/plugins)
  PRESCIENT_REQUIRE_PLUGIN  1: a missing plugin FAILS every test (tests/run sets it); otherwise
                            the tests skip
  PRESCIENT_TEST_CONNECTOR  prescient (default) or pass_through: HDF5's built-in pass-through as
                            a stand-in, to check the harness itself; tests of prescient's own
                            features (stats, settings, name) skip then

The connector runs with PRESCIENT_MIN_DATASET_BYTES=0 unless a test says otherwise: the tests'
datasets are a few KiB, standing for large ones, and are to be cached (a test of the size rule,
test_vol_small_datasets.py, sets it).
"""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PLUGIN_NAME = "libprescient_vol.so"


def _clean_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HDF5_VOL_CONNECTOR", "HDF5_PLUGIN_PATH", "PRESCIENT_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
    return env


class Runner:
    """Runs commands natively or with the connector active."""

    def __init__(self, plugin_dir, connector):
        self.plugin_dir = plugin_dir
        self.connector = connector  # "prescient" or "pass_through"
        self.stand_in = connector == "pass_through"

    def env(self, mode, stats=None, extra=None, connector_string=None):
        env = _clean_env()
        if mode == "connector":
            env["HDF5_VOL_CONNECTOR"] = connector_string or f"{self.connector} under_vol=0;under_info={{}}"
            if not self.stand_in:
                env["HDF5_PLUGIN_PATH"] = self.plugin_dir
                env["PRESCIENT_MIN_DATASET_BYTES"] = "0"  # small test data stands for large
                if stats:
                    env["PRESCIENT_STATS"] = str(stats)
        elif mode != "native":
            raise ValueError(mode)
        env.update(extra or {})
        return env

    def run(self, args, mode, cwd, stats=None, extra=None, check=True, timeout=180,
            connector_string=None):
        """Runs args (a list; a leading '.py' path runs with this Python) and returns the result."""
        if args and str(args[0]).endswith(".py"):
            args = [sys.executable, *map(str, args)]
        proc = subprocess.run(list(map(str, args)), cwd=str(cwd), capture_output=True, text=True,
                              timeout=timeout,
                              env=self.env(mode, stats, extra, connector_string))
        if check and proc.returncode != 0:
            pytest.fail(f"{mode} run of {' '.join(map(str, args))} failed (exit {proc.returncode}):\n"
                        f"{proc.stderr[-4000:]}", pytrace=False)
        return proc

    def python(self, code, args, mode, cwd, **kwargs):
        """Runs Python source code with command-line arguments args."""
        return self.run([sys.executable, "-c", code, *args], mode, cwd, **kwargs)


@pytest.fixture(scope="session")
def runner():
    connector = os.environ.get("PRESCIENT_TEST_CONNECTOR", "prescient").split()[0]
    if connector not in ("prescient", "pass_through"):
        pytest.fail(f"PRESCIENT_TEST_CONNECTOR='{connector}' is not prescient or pass_through")
    plugin_dir = os.environ.get("PRESCIENT_PLUGIN_DIR", os.path.join(REPO, "build", "dev", "plugins"))
    if connector == "prescient" and not os.path.isfile(os.path.join(plugin_dir, PLUGIN_NAME)):
        message = f"no {PLUGIN_NAME} in {plugin_dir} (set PRESCIENT_PLUGIN_DIR or build the connector)"
        if os.environ.get("PRESCIENT_REQUIRE_PLUGIN") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return Runner(plugin_dir, connector)


@pytest.fixture
def prescient(runner):
    """For tests of prescient's own features: not available with the built-in stand-in."""
    if runner.stand_in:
        pytest.skip("tests a prescient feature; the pass_through stand-in does not have it")
    return runner


def _libhdf5_of(path):
    """The libhdf5 a binary or plugin loads (resolved path), from ldd; None if it has none."""
    proc = subprocess.run(["ldd", path], capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        fields = line.split()
        if fields and fields[0].startswith("libhdf5") and "_hl" not in fields[0] and "=>" in fields:
            return os.path.realpath(fields[fields.index("=>") + 1])
    return None


@pytest.fixture(scope="session")
def hdf5_threadsafe(runner):
    """Whether the libhdf5 the plugin links is a thread-safe build: only then does the prefetch
    leader prepare files the job has not opened (vol/schedule/dataset_resolver.h). Debian's
    parallel HDF5 (PRESCIENT_ENV_FLAVOR=parallel) is not."""
    import ctypes
    lib = _libhdf5_of(os.path.join(runner.plugin_dir, PLUGIN_NAME))
    if lib is None:
        return False
    answer = ctypes.c_bool(False)
    return ctypes.CDLL(lib).H5is_library_threadsafe(ctypes.byref(answer)) >= 0 and answer.value


@pytest.fixture
def hdf5_tools(runner):
    """For tests running h5dump/h5ls with the connector: the tools must load the libhdf5 the
    plugin links (one HDF5 per process). Debian builds the tools against the serial library
    only, so with the parallel HDF5 (PRESCIENT_ENV_FLAVOR=parallel) these tests skip."""
    if not runner.stand_in:
        import shutil
        tool = shutil.which("h5dump")
        tools_lib = _libhdf5_of(tool) if tool else None
        plugin_lib = _libhdf5_of(os.path.join(runner.plugin_dir, PLUGIN_NAME))
        if tools_lib != plugin_lib:
            pytest.skip(f"h5dump loads {tools_lib}, the plugin {plugin_lib}: the HDF5 tools of this "
                        "environment are built against another libhdf5")
    return runner

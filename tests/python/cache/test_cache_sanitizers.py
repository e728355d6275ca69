"""The four-rank DataLoader job, reduced, against connectors built with
-DPRESCIENT_SANITIZE=address (ASan+UBSan) and =thread (TSan), the sanitizer runtime preloaded
into Python (issue 4, section 5). Marked slow: tests/run does not run it; run with
PRESCIENT_SLOW_TESTS=1 (or -m slow).

The sanitized plugins come from PRESCIENT_ASAN_PLUGIN_DIR / PRESCIENT_TSAN_PLUGIN_DIR, else
they are configured and built here, in <repo>/build/cache-tests-address|thread (minutes).
The test fails on any sanitizer report whose stack names the connector (libprescient_vol),
on a wrong tensor, a crash or a hang; other reports (Python, NumPy, PyTorch) are printed.
"""

import glob
import os
import re
import subprocess

import pytest

from cachetest_support import LOADER, REPO, compare, read_json, run, run_ranks, segment_leftovers

RANKS, EPOCHS, BATCH, SAMPLES, SEED = 4, 2, 8, 400, 5
TIMEOUT = 600  # sanitized runs are slow, and this machine is shared


def _compiler(build):
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith("CMAKE_CXX_COMPILER:"):
                return line.split("=", 1)[1].strip()
    return "c++"


def _plugin_dir(kind):
    variable = {"address": "PRESCIENT_ASAN_PLUGIN_DIR", "thread": "PRESCIENT_TSAN_PLUGIN_DIR"}[kind]
    build = os.path.join(REPO, "build", f"cache-tests-{kind}")
    if os.environ.get(variable):
        return os.environ[variable], os.path.dirname(os.environ[variable].rstrip("/"))
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        subprocess.run(["cmake", "-S", REPO, "-B", build, "-G", "Ninja",
                        "-DPRESCIENT_BUILD_TESTS=OFF", f"-DPRESCIENT_SANITIZE={kind}",
                        "-DCMAKE_BUILD_TYPE=RelWithDebInfo"],
                       check=True, capture_output=True)
    proc = subprocess.run(["cmake", "--build", build, "-j2", "--target", "prescient_vol"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"building the {kind}-sanitized connector failed:\n{proc.stdout[-3000:]}",
                    pytrace=False)
    return os.path.join(build, "plugins"), build


def _runtime(kind, build):
    compiler = _compiler(build)
    name = {"address": "libasan.so", "thread": "libtsan.so"}[kind]
    if "clang" in os.path.basename(compiler):
        name = f"libclang_rt.{'asan' if kind == 'address' else 'tsan'}-x86_64.so"
    path = subprocess.run([compiler, f"-print-file-name={name}"], capture_output=True,
                          text=True).stdout.strip()
    if not os.path.isabs(path) or not os.path.exists(path):
        pytest.fail(f"no {name} for {compiler}", pytrace=False)
    return path


def _reports(log_dir):
    """Sanitizer reports (one per block), from every process's log file."""
    reports = []
    for path in sorted(glob.glob(os.path.join(log_dir, "san.*"))):
        with open(path, errors="replace") as f:
            text = f.read()
        for block in re.split(r"\n(?==+\n(?:WARNING|ERROR): )", text):
            if re.search(r"(WARNING|ERROR): (ThreadSanitizer|AddressSanitizer|LeakSanitizer)|"
                         r"runtime error:", block):
                reports.append((os.path.basename(path), block.strip()))
    return reports


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["address", "thread"])
def test_four_ranks_under_sanitizer(cache, node_id, tmp_path, kind):
    plugin_dir, build = _plugin_dir(kind)
    data = tmp_path / "samples.h5"
    run([LOADER, data, "--make", SAMPLES], cache.native_env(), tmp_path)
    run([LOADER, data, tmp_path / "native.json", "--ranks", RANKS, "--epochs", EPOCHS, "--batch",
         BATCH, "--seed", SEED, "--workers", 0, "--all-ranks"], cache.native_env(), tmp_path)
    native = read_json(tmp_path / "native.json")

    # With a schedule (when the tool is built) the prefetch leader's I/O threads run too.
    tool = cache.schedule_tool()
    if tool:
        run([tool, "generate", "--source", "torch-distributed", "--samples", SAMPLES, "--epochs",
             EPOCHS, "--ranks", RANKS, "--ranks-per-node", RANKS, "--workers", 2, "--batch-size",
             BATCH, "--seed", SEED, "--quiet", "--dataset", f"{data}:gz", "--row-bytes",
             32 * 32 * 2, "--output", tmp_path / "sched.bin"], cache.native_env(), tmp_path)
    else:
        print(f"no prescient-schedule under {cache.build_dir}: running without a schedule")

    logs = tmp_path / "logs"
    logs.mkdir()
    options = f"log_path={logs}/san:halt_on_error=0"
    extra = {"LD_PRELOAD": _runtime(kind, build)}
    if tool:
        extra["PRESCIENT_SCHEDULE"] = str(tmp_path / "sched.bin")
    if kind == "address":
        extra["ASAN_OPTIONS"] = options + ":detect_leaks=0:abort_on_error=0"
        extra["UBSAN_OPTIONS"] = f"log_path={logs}/san:print_stacktrace=1"
    else:
        # exitcode=0: a report must not turn into a worker failure; the logs are checked below.
        extra["TSAN_OPTIONS"] = options + ":die_after_fork=0:report_signal_unsafe=0:exitcode=0"
    envs = [cache.connector_env(node_id, stats=tmp_path / f"stats-r{r}.json", plugin_dir=plugin_dir,
                                extra={**extra, "PRESCIENT_RANK": str(r)}) for r in range(RANKS)]
    try:
        got = run_ranks(envs, data, tmp_path, 2, EPOCHS, BATCH, SEED, TIMEOUT)
    finally:
        reports = _reports(logs)
        ours = [r for r in reports if "prescient" in r[1]]
        for name, block in reports:
            print(f"--- {kind} report in {name} "
                  f"({'connector' if (name, block) in ours else 'other'})\n{block[:3000]}")
    compare(native, got, f"{kind}-sanitized connector")
    assert segment_leftovers(node_id) == []
    workers = [read_json(p) for p in glob.glob(str(tmp_path / "stats-r*.*.json"))]
    assert sum(s["reads_served"] for s in workers) > 0, "the sanitized connector served nothing"
    if tool:
        assert sum(s.get("schedule_matches", 0) for s in workers) > 0, "schedule not followed"
    print(f"{kind}: {len(reports)} reports, {len(ours)} in the connector; rows prefetched "
          f"{sum(s['rows_prefetched'] for s in workers)}")
    assert not ours, f"{len(ours)} {kind} sanitizer reports in the connector; first:\n" \
                     f"{ours[0][1][:6000]}"

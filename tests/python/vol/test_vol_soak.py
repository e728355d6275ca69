"""The soak test (slow): readers attacked as training jobs are attacked, every row checked.

Two ranks (a main process and two forked workers each, reading their schedule's order, some steps
row by row and some as sorted batch reads) share a node cache that holds a quarter of the data.
For SOAK_SECONDS the test, at random moments, SIGKILLs a reader (a worker, a rank's main process,
the prefetch leader: whoever it picks) and starts a new rank when one died, SIGSTOPs a reader for
up to 3 s (a debugger, Ctrl-Z, a frozen cgroup) and rewrites the data file in place with a new
version of every row. It reports rows checked, wrong rows, stale rows and the longest wait:

* wrong: a row that is no version of itself, outside the window in which a read may race with a
  rewrite (a read that overlaps the rewrite can see a torn row, as native HDF5 would): must be 0;
* stale: a row of an older version read more than 2.5 s after a rewrite ended (the connector
  notices a changed file within a second; the margin covers a reader stopped meanwhile): must be 0;
* longest wait: the slowest read of a reader that was not itself stopped during it: bounded
  (a stopped claim holder or leader is overtaken), here at most WAIT_BOUND_S.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
READER = os.path.join(HERE, "voltest_soak_reader.py")
SAMPLER = os.path.join(HERE, "..", "..", "..", "scheduler", "python")
ROWS = 3000
SOAK_SECONDS = float(os.environ.get("PRESCIENT_SOAK_SECONDS", "75"))
RACE_MARGIN_S = 2.5
WAIT_BOUND_S = 8.0

sys.path.insert(0, HERE)
sys.path.insert(0, SAMPLER)
sys.path.insert(0, os.path.join(HERE, "..", "cache"))
from cachetest_support import remove_leftovers  # noqa: E402
from voltest_soak_reader import ROW, pattern  # noqa: E402
from voltest_support import schedule_tool  # noqa: E402


def write_version(path, version, offset=None):
    """Writes every row of `version` (in place when the file exists: same size, same layout)."""
    import h5py
    data = np.stack([pattern(i, version) for i in range(ROWS)])
    if offset is None:
        with h5py.File(path, "w") as f:
            f.create_dataset("x", data=data)
        with h5py.File(path, "r") as f:
            return f["x"].id.get_offset()
    with open(path, "r+b") as raw:
        raw.seek(offset)
        raw.write(data.tobytes())
        raw.flush()
        os.fsync(raw.fileno())
    return offset


def children_of(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


@pytest.fixture
def soak_node():
    """The test's node id; the files its killed readers leave in /dev/shm go with the test."""
    node = f"soak-{os.getpid()}"
    yield node
    remove_leftovers(node)


@pytest.mark.skipif(os.environ.get("PRESCIENT_SLOW_TESTS") != "1",
                    reason="slow (about 90 s): PRESCIENT_SLOW_TESTS=1")
def test_soak(prescient, tmp_path, soak_node):
    data = tmp_path / "data.h5"
    offset = write_version(data, 0)
    sched = tmp_path / "soak.sched"
    subprocess.run([schedule_tool(), "generate", "--source", "torch-distributed", "--samples",
                    str(ROWS), "--epochs", "40", "--ranks", "2", "--ranks-per-node", "2",
                    "--workers", "2", "--batch-size", "16", "--seed", "5", "--store", "lists",
                    "--dataset", f"{data}:x", "--rows", str(ROWS), "--row-bytes", str(ROW * 4),
                    "--output", str(sched), "--quiet"], check=True)
    env = prescient.env("connector", extra={
        "PRESCIENT_SCHEDULE": str(sched), "PRESCIENT_CACHE_SIZE": "4MiB",  # a quarter of 12 MiB
        "PRESCIENT_NODE_ID": soak_node, "PRESCIENT_LOG": "error",
        "PYTHONPATH": SAMPLER + os.pathsep + HERE})
    rng = random.Random(2026)
    deadline = time.monotonic() + SOAK_SECONDS
    ranks = {}  # rank -> Popen of its main process
    started = []
    stops = {}  # pid -> [(start, end)] wall-clock intervals it was stopped
    rewrites = []  # (start, end, version) wall clock
    events = {"kill": 0, "stop": 0, "rewrite": 0, "restart": 0}

    def start_rank(rank):
        left = deadline - time.monotonic()
        report = tmp_path / f"r{rank}-{len(started)}.json"
        p = subprocess.Popen([sys.executable, READER, str(data), str(sched), str(rank), "2",
                              str(report), f"{max(1.0, left):.1f}"], env=env, cwd=tmp_path,
                             stderr=subprocess.DEVNULL)
        ranks[rank] = p
        started.append(p)

    for rank in (0, 1):
        start_rank(rank)
    version = 0
    next_rewrite = time.monotonic() + 12
    while time.monotonic() < deadline - 3:
        time.sleep(rng.uniform(0.3, 1.2))
        for rank, p in list(ranks.items()):
            if p.poll() is not None and time.monotonic() < deadline - 5:
                events["restart"] += 1
                start_rank(rank)
        if time.monotonic() >= next_rewrite and version + 1 < 64:
            version += 1
            t0 = time.time()
            write_version(data, version, offset)
            rewrites.append((t0, time.time(), version))
            events["rewrite"] += 1
            next_rewrite = time.monotonic() + rng.uniform(8, 15)
            continue
        pool = []
        for p in started:
            if p.poll() is None:
                pool += [p.pid] + children_of(p.pid)
        if not pool:
            continue
        victim = rng.choice(pool)
        if rng.random() < 0.5:
            try:
                os.kill(victim, signal.SIGKILL)
                events["kill"] += 1
            except ProcessLookupError:
                pass
        else:
            t0 = time.time()
            try:
                os.kill(victim, signal.SIGSTOP)
                time.sleep(rng.uniform(0.5, 3.0))
                os.kill(victim, signal.SIGCONT)
                stops.setdefault(victim, []).append((t0, time.time()))
                events["stop"] += 1
            except ProcessLookupError:
                pass
    for p in started:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
    # Orphaned workers of killed ranks end at the deadline by themselves.
    time.sleep(1.5)

    def racing(t):
        return any(start - 0.1 <= t <= end + RACE_MARGIN_S for start, end, _ in rewrites)

    def version_due(t):
        due = 0
        for _, end, v in rewrites:
            if t > end + RACE_MARGIN_S:
                due = max(due, v)
        return due

    rows = wrong = stale = 0
    longest = 0.0
    examples = []
    for name in os.listdir(tmp_path):
        if ".json.w" not in name or ".tmp" in name:
            continue
        report = json.load(open(tmp_path / name))
        rows += report["rows"]
        for start, row, head in report["wrong"]:
            if not racing(start):
                wrong += 1
                examples.append((name, start, row, head))
        for start, row, seen in report["reads"]:
            if not racing(start) and seen < version_due(start):
                stale += 1
                examples.append((name, start, row, f"version {seen} < {version_due(start)}"))
        own_stops = stops.get(report["pid"], [])
        for start, took in report["slow"]:
            if not any(a <= start + took and start <= b for a, b in own_stops):
                longest = max(longest, took)
    print(f"soak: {SOAK_SECONDS:.0f} s, {rows} rows checked, {wrong} wrong, {stale} stale, "
          f"longest wait {longest:.2f} s; {events}")
    assert rows > 10000, "the readers hardly read"
    assert events["kill"] > 0 and events["stop"] > 0 and events["rewrite"] > 0, events
    assert wrong == 0 and stale == 0, examples[:10]
    assert longest <= WAIT_BOUND_S, f"a reader waited {longest:.1f} s"

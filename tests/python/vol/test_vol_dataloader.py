"""PyTorch DataLoader with forked workers: exactly the native tensors, and per-worker stats."""

import collections
import hashlib
import os
import textwrap

import numpy as np
import pytest

from voltest_support import read_stats

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = os.path.join(HERE, "voltest_scenarios.py")
LOADER = os.path.join(HERE, "voltest_loader.py")
SAMPLES, EPOCHS = 100, 2


@pytest.fixture(scope="module")
def data_file(runner, tmp_path_factory):
    directory = tmp_path_factory.mktemp("loader")
    path = directory / "train.h5"
    runner.run([SCENARIOS, "selections", "write", path], "native", directory)
    return path


def digest(npz):
    h = hashlib.sha256()
    for key in ("x", "xc", "index"):
        h.update(npz[key].dtype.str.encode() + str(npz[key].shape).encode())
        h.update(npz[key].tobytes())
    return h.hexdigest()


SLOW = pytest.mark.skipif(os.environ.get("PRESCIENT_SLOW_TESTS") != "1",
                          reason="about 20 s (spawned workers import torch); PRESCIENT_SLOW_TESTS=1")


@pytest.mark.parametrize("kind", ["lazy", "eager", "reopen", pytest.param("lazy-spawn", marks=SLOW)])
def test_loader_returns_native_tensors(kind, runner, data_file, tmp_path):
    epochs = 1 if kind.endswith("spawn") else EPOCHS  # spawned workers import torch: slow
    runner.run([LOADER, data_file, tmp_path / "native.npz", kind, epochs], "native", tmp_path)
    runner.run([LOADER, data_file, tmp_path / "conn.npz", kind, epochs], "connector", tmp_path,
               stats=tmp_path / "stats.json")
    native, conn = np.load(tmp_path / "native.npz"), np.load(tmp_path / "conn.npz")
    assert len(native["index"]) == SAMPLES * epochs
    assert sorted(native["index"][:SAMPLES]) == list(range(SAMPLES)), "an epoch misses samples"
    assert len(set(native["worker_pid"])) >= 2, "the loader did not use two worker processes"
    for key in ("index", "x", "xc"):
        assert native[key].dtype == conn[key].dtype and native[key].shape == conn[key].shape, key
        mismatched = np.flatnonzero([a.tobytes() != b.tobytes()
                                     for a, b in zip(native[key], conn[key])])
        assert mismatched.size == 0, (
            f"{key}: {mismatched.size} of {len(native[key])} samples differ from native "
            f"(first at position {mismatched[:5]}, index {native['index'][mismatched[:5]]})")
    assert digest(native) == digest(conn)


def test_worker_stats_written_at_close(prescient, data_file, tmp_path):
    """Workers end with os._exit (multiprocessing does that), so stats must be written at
    file close: one file per worker pid, counting exactly the reads that worker made."""
    prescient.run([LOADER, data_file, tmp_path / "conn.npz", "reopen"], "connector", tmp_path,
                  stats=tmp_path / "stats.json")
    result = np.load(tmp_path / "conn.npz")
    parent = int(result["parent_pid"][0])
    served = collections.Counter(int(p) for p in result["worker_pid"])
    assert parent not in served and len(served) >= 2

    stats = read_stats(tmp_path)
    by_pid = {s["pid"]: (path, s) for path, s in stats.items()}
    missing = sorted(set(served) - set(by_pid))
    assert not missing, f"no stats file for worker pids {missing}; files: {sorted(stats)}"
    for pid, samples in served.items():
        path, s = by_pid[pid]
        assert path.endswith(f".{pid}.json"), f"worker stats should be named by pid: {path}"
        assert s["enabled"] is True
        # Each sample reads x[i] and xc[i]: two single-row, regular, simple reads.
        assert s["reads"] == 2 * samples, (pid, s)
        assert s["rows"] == 2 * samples, (pid, s)
        assert s["selections"]["regular"] == 2 * samples, (pid, s)
        assert s["files_opened"] == samples, (pid, s)


FORK_SCRIPT = textwrap.dedent("""
    import os, sys, h5py
    path = sys.argv[1]
    with h5py.File(path, "r") as f:       # the parent reads once before forking
        f["y"][0:2]
    children = []
    for k in range(2):
        pid = os.fork()
        if pid == 0:
            with h5py.File(path, "r") as f:
                f["y"][[3, 17, 42]]
                f["x"][5 + k]
            os._exit(0)                    # no atexit handlers, no library shutdown
        children.append(pid)
    for pid in children:
        assert os.waitpid(pid, 0)[1] == 0
    print(" ".join(map(str, [os.getpid()] + children)))
""")


def test_forked_children_exiting_with_os_exit_write_stats(prescient, data_file, tmp_path):
    proc = prescient.python(FORK_SCRIPT, [data_file], "connector", tmp_path, stats=tmp_path / "stats.json",
                            timeout=120)
    parent, *children = map(int, proc.stdout.split())
    stats = {s["pid"]: s for s in read_stats(tmp_path).values()}
    assert parent in stats, f"the parent wrote no stats: {sorted(stats)}"
    assert stats[parent]["reads"] == 1 and stats[parent]["rows"] == 2
    for child in children:
        assert child in stats, f"child {child} (ended by os._exit) wrote no stats"
        s = stats[child]
        # The child's own counters: inherited parent counts must not be counted twice.
        assert (s["reads"], s["rows"], s["files_opened"]) == (2, 4, 1), s
        assert s["selections"]["irregular"] == 1 and s["selections"]["regular"] == 1, s

"""fork() runs no work of Prescient's: everything happens when the dataset is opened.

A DataLoader's main process opens the dataset (for len()), then forks its workers. The node's
segment, the dataset's registration and the schedule binding (the schedule file read, the
next-use index built) must all be done by then, inside HDF5's open callback, so that the at-fork
handlers only take and release locks; the prefetch thread starts with a process's first read,
so a process that only opens and forks has none running when it forks. With PRESCIENT_LOG=info
the connector says when it opens the segment and binds the schedule; the script marks the
moment it forks. Nothing may be logged between the fork and the child's first read.
"""

import os
import subprocess
import time
import sys
import textwrap

import pytest

from voltest_support import read_stats, schedule_tool

SCRIPT = textwrap.dedent("""
    import os, sys, h5py
    path = sys.argv[1]
    f = h5py.File(path, "r")
    n = len(f["x"])                      # what a DataLoader's main process does
    print("MARK before-fork", file=sys.stderr, flush=True)
    pid = os.fork()
    if pid == 0:
        print("MARK child-started", file=sys.stderr, flush=True)
        f["x"][3]
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print("MARK child-done", os.waitstatus_to_exitcode(status), file=sys.stderr, flush=True)
""")




def test_fork_does_no_work(prescient, tmp_path):
    data = tmp_path / "data.h5"
    prescient.python("import h5py, numpy as np, sys\n"
                     "with h5py.File(sys.argv[1], 'w') as f:\n"
                     "    f['x'] = np.arange(64 * 1024, dtype=np.float32).reshape(64, 1024)\n",
                     [data], "native", tmp_path)
    sched = tmp_path / "s.sched"
    subprocess.run([schedule_tool(), "generate", "--source", "sequential", "--samples", "64",
                    "--epochs", "2", "--dataset", f"{data}:x", "--rows", "64", "--row-bytes",
                    "4096", "--output", str(sched), "--quiet"], check=True)
    proc = prescient.python(SCRIPT, [data], "connector", tmp_path, extra={
        "PRESCIENT_LOG": "info", "PRESCIENT_SCHEDULE": str(sched),
        "PRESCIENT_NODE_ID": f"fork-{os.getpid()}", "PRESCIENT_CACHE_SIZE": "16MiB"})
    lines = [line for line in proc.stderr.splitlines() if line.startswith(("MARK", "prescient"))]
    marks = {line: i for i, line in enumerate(lines) if line.startswith("MARK")}
    fork_at, child_at = marks["MARK before-fork"], marks["MARK child-started"]
    before = "\n".join(lines[:fork_at])
    assert "node cache" in before and "schedule bound" in before, "\n".join(lines)
    assert child_at == fork_at + 1, "Prescient worked at fork time:\n" + "\n".join(lines)
    assert "MARK child-done 0" in marks


GENERATIONS = textwrap.dedent("""
    import multiprocessing, os, sys, h5py, torch

    class Lazy(torch.utils.data.Dataset):
        # The common fork-safe pattern: the file is opened in the worker, never in the main
        # process, and the workers are new every epoch (persistent_workers off).
        def __init__(self, path):
            self.path = path
        def __len__(self):
            return 256
        def __getitem__(self, i):
            if not hasattr(self, "f"):
                self.f = h5py.File(self.path, "r")
            return self.f["x"][i]

    if __name__ == "__main__":
        path, method = sys.argv[1], sys.argv[2]
        context = multiprocessing.get_context(method.partition("-")[0])
        if method == "forkserver":
            # Nothing preloaded: the forkserver never loads HDF5, each worker it forks does.
            context.set_forkserver_preload([])
        elif method == "forkserver-h5py":
            # The forkserver loads HDF5 (and so the connector) and its workers inherit it.
            context.set_forkserver_preload(["__main__", "h5py"])
        for epoch in range(3):
            for batch in torch.utils.data.DataLoader(Lazy(path), batch_size=16, num_workers=2,
                                                     multiprocessing_context=context):
                pass
        print("MAIN pid", os.getpid(), flush=True)
""")

SLOW = pytest.mark.skipif(os.environ.get("PRESCIENT_SLOW_TESTS") != "1",
                          reason="about 20 s (each worker imports torch); PRESCIENT_SLOW_TESTS=1")


# The plain name is what most jobs set; the connector then sees no info string, and the
# training process, which opens nothing, makes its Runtime only after its workers. Workers
# started by spawn or by a forkserver (Python 3.14's default) inherit nothing from the
# training process: they load the connector themselves, and the keeper must still be the
# training process's.
@pytest.mark.parametrize("connector,method", [
    ("prescient under_vol=0;under_info={}", "fork"), ("prescient", "fork"),
    pytest.param("prescient", "spawn", marks=SLOW),
    pytest.param("prescient", "forkserver", marks=SLOW),
    pytest.param("prescient", "forkserver-h5py", marks=SLOW)])
def test_workers_of_each_epoch_find_the_previous_epochs_rows(prescient, tmp_path, connector,
                                                             method):
    # Nothing holds the segment between two epochs but the keeper the first worker started for
    # the training process: epochs 2 and 3 are served from the cache, not from the file.
    data = tmp_path / "data.h5"
    prescient.python("import h5py, numpy as np, sys\n"
                     "with h5py.File(sys.argv[1], 'w') as f:\n"
                     "    f['x'] = np.arange(256 * 1024, dtype=np.float32).reshape(256, 1024)\n",
                     [data], "native", tmp_path)
    script = tmp_path / "generations.py"  # a file: spawned workers import the main module
    script.write_text(GENERATIONS)
    stats = tmp_path / "stats"
    stats.mkdir()
    node = f"generations-{os.getpid()}-{len(connector)}-{method}"
    prescient.run([script, data, method], "connector", tmp_path, stats=str(stats / "s.json"),
                  extra={"PRESCIENT_NODE_ID": node, "PRESCIENT_CACHE_SIZE": "16MiB"},
                  connector_string=connector)
    loaded = hits = reads = not_awaited = 0  # loaded: rows read from the file (misses, read-around)
    files = read_stats(stats, "s*.json")
    # Every worker of every generation keeps its own statistics file (the training process,
    # which opens nothing, once wrote over the first worker's).
    assert sum(1 for t in files.values() if t["reads"] > 0) == 3 * 2, sorted(files)
    for t in files.values():
        loaded += t["rows_loaded"] + t["rows_read_around"]
        not_awaited += t["rows_not_awaited"]
        hits += t["rows_hit"]
        reads += t["reads"]
    assert reads == 3 * 256, reads
    # Each row once, in the first epoch; on a loaded machine a worker reads a row the other one
    # is still loading rather than wait for it (rows_not_awaited, by design: NodeCache's
    # "Waiting"): 2 of 256 in a run beside a CI build.
    assert loaded - not_awaited == 256, (loaded, not_awaited, hits)
    # The keeper follows the training process out: nothing of the node's is held afterwards.
    deadline = time.monotonic() + 5
    while True:
        keepers = [p for p in os.listdir("/proc") if p.isdigit() and node in _cmdline(p)]
        if not keepers or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not keepers, "a keeper outlived the training process"


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""

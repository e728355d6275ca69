"""fork() runs no work of Prescient's: everything happens when the dataset is opened.

A DataLoader's main process opens the dataset (for len()), then forks its workers. The node's
segment, the dataset's registration and the schedule binding (the schedule file read, the
next-use index built, the prefetch thread started) must all be done by then, inside HDF5's
open callback, so that the at-fork handlers only take and release locks. With PRESCIENT_LOG=info
the connector says when it opens the segment and binds the schedule; the script marks the
moment it forks. Nothing may be logged between the fork and the child's first read.
"""

import os
import subprocess
import sys
import textwrap

import pytest

from voltest_support import schedule_tool

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

"""Admission behind the reader (PRESCIENT_ADMIT_BEHIND): a miss's rows reach the caller at once,
and a thread of the process copies them into the node cache afterwards.

What must hold whatever the timing: every byte a read returns is the file's, in the process that
handed rows over, in a child forked while hand-overs were in flight (it inherits the queue but
not the thread), and after a child that handed rows over left with os._exit (as DataLoader
workers do) before its thread published them; rows handed over become hits; with the setting 0
nothing is handed over.
"""

import textwrap

import pytest

from voltest_support import read_stats

ROWS, COLUMNS = 96, 8192  # 32 KiB rows: larger than what a reader copies in itself

SCRIPT = textwrap.dedent("""
    import os, sys, h5py, numpy as np
    path, rows, columns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

    def expected(i):
        return np.arange(i * columns, (i + 1) * columns, dtype=np.float32)

    def check(d, order):
        for i in order:
            got = d[i]
            if not np.array_equal(got, expected(i)):
                raise SystemExit(f"{os.getpid()}: row {i} differs")

    f = h5py.File(path, "r")
    d = f["x"]
    check(d, range(0, rows // 3))              # misses: handed over one by one
    pid = os.fork()                             # hand-overs may still be in flight
    if pid == 0:
        check(d, range(rows // 3, 2 * rows // 3))  # the child's own misses and hand-overs
        check(d, range(0, rows // 3))              # the parent's rows: hits or waits
        os._exit(0)                                # no drain: its thread dies with it
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    check(d, np.random.default_rng(1).permutation(rows))  # everything, after the child left
    block = d[10:20]                            # a read of several rows at once
    assert np.array_equal(block, np.concatenate([expected(i) for i in range(10, 20)]).reshape(10, -1))
    f.close()
    print(pid)
""")


@pytest.fixture(scope="module")
def data_file(runner, tmp_path_factory):
    path = tmp_path_factory.mktemp("admission") / "rows.h5"
    runner.python("import h5py, numpy as np, sys\n"
                  "with h5py.File(sys.argv[1], 'w') as f:\n"
                  f"    f['x'] = np.arange({ROWS} * {COLUMNS}, dtype=np.float32)"
                  f".reshape({ROWS}, {COLUMNS})\n",
                  [path], "native", path.parent)
    return path


def run(prescient, data_file, tmp_path, setting):
    node = f"admission-{setting}-{tmp_path.name}"
    proc = prescient.python(SCRIPT, [data_file, ROWS, COLUMNS], "connector", tmp_path,
                            stats=tmp_path / "stats.json",
                            extra={"PRESCIENT_ADMIT_BEHIND": setting, "PRESCIENT_NODE_ID": node,
                                   "PRESCIENT_CACHE_SIZE": "64MiB"})
    child = int(proc.stdout.split()[-1])
    stats = {s["pid"]: s for s in read_stats(tmp_path).values()}
    assert child in stats and len(stats) == 2, sorted(stats)
    parent = next(s for pid, s in stats.items() if pid != child)
    return parent, stats[child]


def test_rows_handed_over_are_exact_in_the_process_its_forked_child_and_after_the_child_left(
        prescient, data_file, tmp_path):
    parent, child = run(prescient, data_file, tmp_path, "64MiB")
    # A miss reads the rest of its slab too (rows_read_around: published by the reader); the
    # missed rows themselves are the ones handed over.
    for process in (parent, child):
        assert 0 < process["rows_admitted_behind"] <= process["rows_loaded"], process
        assert process["rows_admitted_behind_declined"] == 0, process
        assert process["fallback_serve_failed"] == 0, process
    assert parent["rows_hit"] >= ROWS, parent  # the second pass: hits, its own rows included


def test_zero_turns_it_off(prescient, data_file, tmp_path):
    parent, child = run(prescient, data_file, tmp_path, "0")
    for process in (parent, child):
        assert process["rows_admitted_behind"] == 0 and process["rows_loaded"] > 0, process
    assert parent["rows_hit"] >= ROWS, parent

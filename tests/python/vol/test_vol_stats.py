"""PRESCIENT_STATS across process trees: no process may overwrite another one's counters."""

import os
import sys
import textwrap

import pytest

from voltest_support import read_stats

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = os.path.join(HERE, "voltest_scenarios.py")

# A parent that reads, then starts an independent child process (not a fork: a new
# interpreter with the same environment, as pytest-in-subprocess or a launcher would), then
# reads again and closes last.
PARENT = textwrap.dedent("""
    import os, subprocess, sys, h5py
    path, child = sys.argv[1], sys.argv[2]
    with h5py.File(path, "r") as f:
        for i in range(5):
            f["y"][i]
    subprocess.run([sys.executable, "-c", child, path], check=True)
    with h5py.File(path, "r") as f:
        for i in range(7):
            f["x"][i]
    print(os.getpid())
""")

CHILD = textwrap.dedent("""
    import os, sys, h5py
    with h5py.File(sys.argv[1], "r") as f:
        f["y"][[3, 17, 42]]
    print(os.getpid(), file=sys.stderr)
""")


@pytest.fixture(scope="module")
def data_file(runner, tmp_path_factory):
    directory = tmp_path_factory.mktemp("stats")
    path = directory / "data.h5"
    runner.run([SCENARIOS, "selections", "write", path], "native", directory)
    return path


def test_independent_child_process_keeps_its_own_stats(prescient, data_file, tmp_path):
    proc = prescient.run([sys.executable, "-c", PARENT, data_file, CHILD], "connector", tmp_path,
                         stats=tmp_path / "stats.json")
    parent = int(proc.stdout.split()[-1])
    stats = {s["pid"]: (path, s) for path, s in read_stats(tmp_path).items()}
    assert parent in stats, f"the parent's counters are gone: {sorted(stats)}"
    _, p = stats[parent]
    assert (p["files_opened"], p["reads"]) == (2, 12), (
        f"the parent's stats were overwritten or incomplete: {p}")
    children = [s for pid, (_, s) in stats.items() if pid != parent]
    assert len(children) == 1, f"expected one stats file for the child: {sorted(stats)}"
    assert (children[0]["files_opened"], children[0]["reads"]) == (1, 1), children[0]


# Siblings that load the connector themselves, all at once: DataLoader workers forked from a
# training process that never imported h5py (it is imported in __getitem__). None of them is a
# forked child of the connector, so each may take the plain path; only one may have it.
SIBLINGS = textwrap.dedent("""
    import os, sys
    path, count = sys.argv[1], int(sys.argv[2])
    go_read, go_write = os.pipe()
    children = []
    for k in range(count):
        pid = os.fork()
        if pid == 0:
            os.close(go_write)
            import h5py  # loads the connector; its statistics start at the first open
            os.read(go_read, 1)  # every sibling released at the same moment
            with h5py.File(path, "r") as f:
                for i in range(k + 1):
                    f["x"][i]
            os._exit(0)
        children.append(pid)
    os.close(go_write)  # end of file releases them all
    assert all(os.waitpid(pid, 0)[1] == 0 for pid in children)
    print(" ".join(map(str, children)))
""")


def test_siblings_starting_together_each_keep_their_own_stats(prescient, data_file, tmp_path):
    """Processes that start their statistics at the same moment never share a file (they did:
    both saw no file at the plain path, both took it, and one's counters were lost)."""
    count = 8
    for attempt in range(10):  # the race is a matter of microseconds: try it more than once
        directory = tmp_path / f"attempt{attempt}"
        directory.mkdir()
        proc = prescient.run([sys.executable, "-c", SIBLINGS, data_file, str(count)], "connector",
                             directory, stats=directory / "stats.json")
        children = sorted(int(pid) for pid in proc.stdout.split())
        stats = read_stats(directory)
        assert sorted(s["pid"] for s in stats.values()) == children, sorted(stats)
        # Child k read k + 1 rows: every file holds one sibling's counters, whole.
        reads = sorted(s["reads"] for s in stats.values())
        assert reads == list(range(1, count + 1)), reads


def test_stats_written_at_exit_without_close(prescient, data_file, tmp_path):
    """A process that never closes its file still leaves its counters (written at exit)."""
    script = textwrap.dedent("""
        import sys, h5py
        f = h5py.File(sys.argv[1], "r")
        for i in range(4):
            f["x"][i]
        sys.stdout.flush()
    """)
    prescient.run([sys.executable, "-c", script, data_file], "connector", tmp_path,
                  stats=tmp_path / "stats.json")
    stats = read_stats(tmp_path)
    assert len(stats) == 1, sorted(stats)
    (s,) = stats.values()
    assert (s["files_opened"], s["reads"]) == (1, 4), s


def test_with_the_cache_off_reads_are_forwarded_uninspected_and_counted(prescient, data_file,
                                                                        tmp_path):
    """PRESCIENT_CACHE=0: every read goes to HDF5 without being looked at (no decoding, no
    cache), and is counted as a read and a forwarded one; the bytes are native's."""
    script = textwrap.dedent("""
        import sys, h5py, numpy as np, zlib
        with h5py.File(sys.argv[1], "r") as f:
            parts = [f["x"][i] for i in range(6)] + [f["y"][[3, 17, 42]], f["x"][2:5]]
        print(zlib.crc32(b"".join(np.ascontiguousarray(p).tobytes() for p in parts)))
    """)
    native = prescient.run([sys.executable, "-c", script, data_file], "native", tmp_path)
    off = prescient.run([sys.executable, "-c", script, data_file], "connector", tmp_path,
                        stats=tmp_path / "stats.json", extra={"PRESCIENT_CACHE": "0"})
    assert off.stdout == native.stdout
    (s,) = read_stats(tmp_path).values()
    assert (s["reads"], s["reads_forwarded"], s["reads_served"]) == (8, 8, 0), s
    assert s["forwarded"] == {k: 8 if k == "cache_off" else 0 for k in s["forwarded"]}, s
    assert s["reads_simple"] == s["reads_undecoded"] == s["rows"] == s["bytes"] == 0, s


def test_pid_placeholder(prescient, data_file, tmp_path):
    """'%p' in PRESCIENT_STATS is replaced by the pid."""
    script = "import os, sys, h5py\nwith h5py.File(sys.argv[1], 'r') as f: f['x'][1]\nprint(os.getpid())"
    proc = prescient.run([sys.executable, "-c", script, data_file], "connector", tmp_path,
                         stats=tmp_path / "run-%p.json")
    pid = int(proc.stdout.strip())
    stats = read_stats(tmp_path, "run-*.json")
    assert list(stats) == [str(tmp_path / f"run-{pid}.json")], sorted(stats)
    assert next(iter(stats.values()))["reads"] == 1


def test_node_block_holds_the_segments_own_counters(prescient, data_file, tmp_path):
    """The file carries a snapshot of the node cache's counters, named by its segment."""
    script = textwrap.dedent("""
        import sys, time, h5py
        with h5py.File(sys.argv[1], "r") as f:
            for i in range(6):
                f["x"][i]
            time.sleep(0.15)  # past the snapshot interval: the next read refreshes it
            for i in range(6):
                f["x"][i]
    """)
    prescient.run([sys.executable, "-c", script, data_file], "connector", tmp_path,
                  stats=tmp_path / "stats.json")
    (s,) = read_stats(tmp_path).values()
    if prescient.stand_in:
        return
    node = s["node"]
    assert node["segment"].startswith("prescient"), node
    # x's small rows are cached several to an entry: one miss, then hits; the snapshot taken
    # after the pause has seen at least the first six reads.
    assert node["misses"] >= 1 and node["hits"] >= 5, node
    assert node["rows_resident"] >= 1 and node["bytes_resident"] > 0, node
    assert node["capacity_bytes"] >= node["bytes_resident"], node
    for counter in ("recoveries", "corruptions", "stall_takeovers", "leader_takeovers",
                    "claims_released_late"):
        assert node[counter] == 0, node


def test_rows_not_kept_and_the_time_spent_keeping_rows_are_counted(prescient, tmp_path):
    """A dataset twice the cache, read twice without a schedule: every byte equals native's,
    the full cache keeps few of the later misses (rows_not_admitted, part of rows_loaded), and
    the time reads spent keeping rows is counted (admit_ns)."""
    path = tmp_path / "big.h5"
    prescient.python(textwrap.dedent("""
        import sys, h5py, numpy as np
        with h5py.File(sys.argv[1], "w") as f:
            f["d"] = np.arange(4096 * 1024, dtype="<f4").reshape(4096, 1024)  # 16 MiB, 4 KiB rows
    """), [path], "native", tmp_path)
    reader = textwrap.dedent("""
        import hashlib, sys, h5py
        digest = hashlib.sha256()
        with h5py.File(sys.argv[1], "r") as f:
            d = f["d"]
            for _ in range(2):
                for i in range(0, 4096, 16):
                    digest.update(d[i:i + 16].tobytes())
        print(digest.hexdigest())
    """)
    native = prescient.python(reader, [path], "native", tmp_path).stdout
    extra = {"PRESCIENT_CACHE_SIZE": "8MiB", "PRESCIENT_NODE_ID": f"notkept-{os.getpid()}"}
    served = prescient.python(reader, [path], "connector", tmp_path, extra=extra,
                              stats=tmp_path / "stats.json").stdout
    assert served == native
    (s,) = read_stats(tmp_path).values()
    assert s["reads_served"] == 512, s
    assert s["rows_loaded"] + s["rows_hit"] + s["rows_waited"] == 2 * 4096, s
    assert 0 < s["rows_not_admitted"] <= s["rows_loaded"], s
    # Without a schedule a full cache keeps about one miss in eight: most of the rows that
    # did not fit are not kept.
    assert s["rows_not_admitted"] >= 4096 // 2, s
    assert s["admit_ns"] > 0, s

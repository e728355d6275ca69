"""Tests of the report command (pytest; run inside the project environment):

    env/run python3 -m pytest -q -p no:cacheprovider examples/report/test_report.py

The last two tests need the connector and the schedule tool built in
build/bench (examples/bench/run builds them) and are skipped otherwise.
"""

import json
import glob
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import segment_geometry  # noqa: E402
import report  # noqa: E402
import stats_merge  # noqa: E402

# tests/run points PRESCIENT_BUILD_DIR at its build; by hand, examples/bench/run's build.
BUILD = os.environ.get("PRESCIENT_BUILD_DIR", os.path.join(REPO, "build", "bench"))
PLUGINS = os.path.join(BUILD, "plugins")
TOOL = os.path.join(BUILD, "scheduler", "tool", "prescient-schedule")
_HAVE_BUILD = os.path.isdir(PLUGINS) and os.access(TOOL, os.X_OK)
if not _HAVE_BUILD and os.environ.get("PRESCIENT_REQUIRE_PLUGIN") == "1":
    raise RuntimeError(f"no connector build in {BUILD} (PRESCIENT_REQUIRE_PLUGIN=1 requires every test)")
built = pytest.mark.skipif(not _HAVE_BUILD,
                           reason=f"needs a connector build in {BUILD} (set PRESCIENT_BUILD_DIR)")


def doc(pid, **counters):
    d = {"prescient_stats_version": 1, "pid": pid, "parent_pid": 1, "forked_child": pid != 10, "enabled": True,
         "selections": {"all": 1, "regular": 2}}
    d.update(counters)
    return d


def test_merge_sums_counters_and_epochs_but_not_identities(tmp_path):
    a = doc(10, reads=5, rows_hit=3, rows_loaded=2, epochs=[{"epoch": 0, "reads": 5, "rows_hit": 3},
                                                            {"epoch": 1, "reads": 0}])
    b = doc(11, reads=7, rows_hit=7, epochs=[{"epoch": 1, "reads": 7, "rows_hit": 7}])
    c = doc(12, reads=1)  # written without a schedule: no per-epoch blocks
    for i, d in enumerate((a, b, c)):
        (tmp_path / f"s.{i}.json").write_text(json.dumps(d))
    (tmp_path / "not-stats.json").write_text(json.dumps({"something": 1}))
    (tmp_path / "broken.json").write_text("{")
    merged = stats_merge.merge_files(stats_merge.expand(str(tmp_path)))
    assert merged["files"] == 3
    t = merged["totals"]
    assert t["reads"] == 13 and t["rows_hit"] == 10 and t["rows_loaded"] == 2
    assert "pid" not in t and "forked_child" not in t and "epochs" not in t
    assert t["selections"] == {"all": 3, "regular": 6}
    assert [(e["epoch"], e["reads"], e.get("rows_hit", 0)) for e in merged["epochs"]] == [(0, 5, 3), (1, 7, 7)]
    assert stats_merge.hit_rate(t) == pytest.approx(10 / 12)
    assert stats_merge.hit_rate({}) is None


def test_the_summary_says_why_reads_were_forwarded_most_frequent_first(tmp_path):
    a = doc(10, reads=9, reads_forwarded=5, forwarded={"type": 2, "selection": 1, "dataset": 0})
    b = doc(11, reads=4, reads_forwarded=3, forwarded={"type": 1, "too_small": 2, "dataset": 0})
    for i, d in enumerate((a, b)):
        (tmp_path / f"s.{i}.json").write_text(json.dumps(d))
    merged = stats_merge.merge_files(stats_merge.expand(str(tmp_path)))
    rows = dict(report.summary_rows(merged))
    assert rows["reads forwarded to HDF5"] == "8"
    assert rows['  why (statistics "forwarded")'] == "type 3, too_small 2, selection 1"
    assert report.forward_reasons({"reads_forwarded": 0}) == "-"


def test_node_blocks_are_the_latest_snapshot_per_segment_never_a_sum(tmp_path):
    # Three processes of node A (snapshots taken at different times) and one of node B.
    a1 = doc(10, reads=1, node={"segment": "seg-a", "hits": 5, "evictions": 1, "rows_resident": 9})
    a2 = doc(11, reads=1, node={"segment": "seg-a", "hits": 8, "evictions": 1, "rows_resident": 7})
    a3 = doc(12, reads=1)  # no cache attached: no node block
    b = doc(20, reads=1, node={"segment": "seg-b", "hits": 2, "evictions": 4, "rows_resident": 3})
    for i, d in enumerate((a1, a2, a3, b)):
        (tmp_path / f"s.{i}.json").write_text(json.dumps(d))
    merged = stats_merge.merge_files(stats_merge.expand(str(tmp_path)))
    assert merged["nodes"] == {"seg-a": {"hits": 8, "evictions": 1, "rows_resident": 9},
                               "seg-b": {"hits": 2, "evictions": 4, "rows_resident": 3}}
    assert merged["totals"]["node"] == {"hits": 10, "evictions": 5, "rows_resident": 12}
    assert merged["totals"]["reads"] == 4


def test_glob_and_difference(tmp_path):
    (tmp_path / "stats.json").write_text(json.dumps(doc(10, reads=4)))
    (tmp_path / "stats.99.json").write_text(json.dumps(doc(99, reads=6)))
    assert len(stats_merge.expand(str(tmp_path / "stats*.json"))) == 2
    assert stats_merge.expand(str(tmp_path / "nothing*.json")) == []
    later = {"reads": 10, "selections": {"all": 4}}
    assert stats_merge.difference(later, {"reads": 4, "selections": {"all": 1}}) == {"reads": 6,
                                                                                      "selections": {"all": 3}}
    assert stats_merge.difference(later, {}) == later


def test_geometry_is_monotonic_and_close_to_the_data_share():
    row = 65536
    for rows in (16, 1000, 5000, 20064):
        size = segment_geometry.segment_bytes_for_rows(rows, row)
        assert segment_geometry.rows_held(size, row) >= rows
        assert segment_geometry.rows_held(size - (1 << 20), row) < rows
        # Metadata is about 2% of the segment plus ~0.5 MiB of fixed tables.
        assert rows * row < size < rows * row * 1.03 + (1 << 20)
    assert segment_geometry.parse_size("1.5GiB") == 3 << 29
    assert segment_geometry.parse_size("64 MiB") == 64 << 20
    assert segment_geometry.parse_size("4096") == 4096
    with pytest.raises(ValueError):
        segment_geometry.parse_size("lots")


def _run_connector(tmp_path, node, size, schedule=None, epochs=2, n=256):
    import h5py

    path = tmp_path / "d.h5"
    data = np.arange(n * 1024, dtype=np.float32).reshape(n, 1024)
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRESCIENT_")}
    env.update(HDF5_PLUGIN_PATH=PLUGINS, HDF5_VOL_CONNECTOR="prescient under_vol=0;under_info={}",
               PRESCIENT_NODE_ID=node, PRESCIENT_CACHE_SIZE=str(size), PRESCIENT_KEEP_CACHE="1",
               PRESCIENT_STATS=str(tmp_path / "stats" / "stats.json"))
    if schedule:
        env["PRESCIENT_SCHEDULE"] = schedule
    os.makedirs(tmp_path / "stats", exist_ok=True)
    script = ("import sys, h5py, numpy as np\n"
              "order = [int(i) for i in sys.argv[2].split(',')]\n"
              "with h5py.File(sys.argv[1], 'r') as f:\n"
              "    d = f['x']\n"
              "    for i in order:\n"
              "        assert d[i][0] == i * 1024\n")
    return path, env, script, data


def _segment_path(node):
    """The node's kept segment (PRESCIENT_KEEP_CACHE=1 names it <registry base>.kept in the user's
    directory; without it the segment is unnamed and gone with its last process)."""
    uid = os.getuid()
    found = glob.glob(f"/dev/shm/prescient-u{uid}*/prescient-cache-v*-u{uid}-{node}.kept")
    assert found, f"no kept segment for node {node}"
    return found[0]


def _remove_segment(path):
    for p in (path, path[:-len(".kept")] + ".lock"):
        if os.path.exists(p):
            os.remove(p)


@built
def test_geometry_matches_a_real_segment(tmp_path):
    node = f"report-test-{os.getpid()}"
    size = 40 << 20
    path, env, script, _ = _run_connector(tmp_path, node, size)
    subprocess.run([sys.executable, "-c", script, str(path), "0,1,2"], env=env, check=True)
    segment = _segment_path(node)
    try:
        actual = os.path.getsize(segment)
    finally:
        _remove_segment(segment)
    blocks = segment_geometry.data_blocks(size)
    # The segment is exactly as large as the layout the mirror computed.
    assert actual == segment_geometry._segment_bytes(blocks, 4096, 4096)


@built
def test_report_command_against_the_simulator(tmp_path):
    import h5py  # noqa: F401  (the generating process runs without the connector)

    n, epochs = 256, 2
    node = f"report-test-{os.getpid()}-2"
    size = segment_geometry.segment_bytes_for_rows(64, 4096)
    path, env, script, _ = _run_connector(tmp_path, node, size)
    sched = str(tmp_path / "s.sched")
    subprocess.run([TOOL, "generate", "--source", "torch-distributed", "--samples", str(n), "--epochs",
                    str(epochs), "--batch-size", "8", "--seed", "3", "--dataset", f"{path}:x", "--row-bytes",
                    "4096", "--output", sched, "--quiet"], check=True)
    env["PRESCIENT_SCHEDULE"] = sched
    ids = []
    for e in range(epochs):
        order = subprocess.run([TOOL, "dump", sched, "--rank", "0", "--epoch", str(e)], capture_output=True,
                               text=True, check=True)
        ids += [int(tok) for tok in order.stdout.split()]
    assert len(ids) == n * epochs
    try:
        subprocess.run([sys.executable, "-c", script, str(path), ",".join(map(str, ids))], env=env, check=True)
    finally:
        _remove_segment(_segment_path(node))
    out = subprocess.run([sys.executable, os.path.join(HERE, "report.py"), str(tmp_path / "stats"),
                          "--schedule", sched, "--cache-size", str(size), "--tool", TOOL, "--out",
                          str(tmp_path / "report")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rows = segment_geometry.rows_held(size, 4096)
    assert f"simulator (belady, cache {rows:,} rows)" in out.stdout, out.stdout
    summary = json.load(open(tmp_path / "report" / "summary.json"))
    assert summary["totals"]["reads"] == n * epochs
    assert os.path.getsize(tmp_path / "report" / "report.png") > 1000

"""Files opened for SWMR reading (h5py's swmr=True): served from the cache, and exact while a
real SWMR writer changes them.

robomimic's SequenceDataset (and the robot-learning loaders built on it) opens its episodes'
file with swmr=True by default, though nothing writes it. Such a file is cached like any
read-only one, except that the connector looks at the file's identity (fstat: size,
modification and status-change times) at every read of it, not once a second: a SWMR writer
may change rows at any time, and a read made after its write returned must see the new bytes.
Every sequence runs natively and through the connector; the digests of every read must be equal.
"""

import json
import os

from voltest_support import forwarded_for, totals_of

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "voltest_swmr.py")


def run_both(runner, tmp_path, command, name, write=True):
    data = tmp_path / f"{name}.h5"
    results = {}
    for mode in ("native", "connector"):
        if write:
            runner.run([SCRIPT, "write", data], "native", tmp_path)
        elif data.exists():
            data.unlink()
        out = tmp_path / f"{name}-{mode}.json"
        stats = tmp_path / f"{name}-stats"
        stats.mkdir(exist_ok=True)
        runner.run([SCRIPT, command, data, out], mode, tmp_path,
                   stats=stats / "stats.json" if mode == "connector" else None,
                   extra={"PRESCIENT_NODE_ID": f"swmr-{name}-{os.getpid()}"})
        results[mode] = json.loads(out.read_text())
    return results, tmp_path / f"{name}-stats"


def test_episodes_opened_for_swmr_reading_are_served_from_the_cache(runner, tmp_path):
    results, stats_dir = run_both(runner, tmp_path, "episodes", "episodes")
    assert results["connector"] == results["native"], "a read differs from native's"
    assert not any(r.startswith("error") for r in results["native"]), results["native"][:4]
    if runner.stand_in:
        return
    totals = totals_of(stats_dir)
    # 12 episodes x 11 windows x 2 datasets, twice; every one served, the second pass all hits.
    assert totals["reads"] == 528, totals
    assert totals["reads_served"] == 528, totals
    assert forwarded_for(totals) == {}, totals
    assert totals["rows_hit"] >= 264 * 10, totals
    assert totals["fallback_file_changed"] == 0, totals


def test_a_swmr_writers_changes_are_seen_at_the_next_read(runner, tmp_path):
    """A real SWMR writer in another process: rows read before its writes are served from the
    cache; once it has overwritten rows in place (the file's size unchanged) and flushed, the
    next read, made at once, sees the new bytes, as natively, and every read of the file after
    it is forwarded (its cached rows never served again), the rows appended later too."""
    results, stats_dir = run_both(runner, tmp_path, "with-writer", "with-writer", write=False)
    native = results["native"]
    assert results["connector"] == native, "a read differs from native's"
    first, second, after_1, after_2 = native
    assert not any(isinstance(r, str) and r.startswith("error")
                   for r in first + second + after_1 + after_2), native
    # The writer really changed what is read: rows 0-4 of each dataset, then the rows appended.
    assert first[0] == after_1[0] == [200, 7] and after_2[0] == [210, 7], native
    assert first == second
    assert after_1[1] != first[1] and after_2[1] != after_1[1], "rows 0-4 of 'grown' unchanged"
    fixed_first = first.index([200, 64])
    assert after_1[after_1.index([200, 64]) + 1] != first[fixed_first + 1]
    if runner.stand_in:
        return
    totals = totals_of(stats_dir)
    # Before the writer's first round: both passes served (the second from the cache).
    assert totals["reads_served"] >= 2 * 2 * (200 // 5 + 1), totals
    assert totals["rows_hit"] > 0, totals
    # After it: forwarded, found changed at the first read.
    assert totals["fallback_file_changed"] >= 1, totals
    assert forwarded_for(totals).get("file_changed", 0) >= 2 * 2 * (200 // 5 + 1) - 2, totals

"""Byte-exact differential tests: >= 10,000 random h5py reads through the node cache, compared
read by read with the same reads done natively (issue 4, section 5).

The reads cover every selection h5py 3.13 issues on contiguous, chunked, gzip, shuffle+gzip and
fletcher32 datasets of several dtypes (big-endian ones included) in several files, and reads
that must be forwarded (astype, compound fields, read_direct into an offset memory selection,
partial rows, boolean masks, scalar datasets, vlen strings). The connector run does two passes
over the same reads: the second must be served mostly from the cache, and identical.

PRESCIENT_CACHE_TEST_SEED fixes the seed of the reads (default: a new seed every run, printed
in every failure message).
"""

import json
import os
import random
import shutil

import numpy as np
import pytest

from cachetest_support import HERE, read_json, run, segment_leftovers
from cachetest_files import IN_PLACE
from cachetest_reads import classify, describe, make_plan

READS = 10_000
SEED = int(os.environ.get("PRESCIENT_CACHE_TEST_SEED", random.randrange(1 << 30)))
FILES_SCRIPT = os.path.join(HERE, "cachetest_files.py")
READS_SCRIPT = os.path.join(HERE, "cachetest_reads.py")


@pytest.fixture(scope="module")
def workload(tmp_path_factory, cache):
    """The files, the plan of reads and the native digests (computed once)."""
    root = tmp_path_factory.mktemp("cache-diff")
    data = root / "data"
    run([FILES_SCRIPT, data, "--seed", SEED % 1000], cache.native_env(), root)
    plan = make_plan(SEED, READS)
    plan_path = root / "plan.json"
    plan_path.write_text(json.dumps(plan))
    run([READS_SCRIPT, data, plan_path, root / "native.json"], cache.native_env(), root)
    native = read_json(root / "native.json")["digests"][0]
    reads = [op for op in plan if op[0] != "reopen"]
    assert len(native) == len(reads) >= READS
    # The comparison means something only if most reads return data (not errors).
    errors = sum(d.startswith("error:") for d in native)
    assert errors < len(native) // 20, f"{errors} native reads failed (seed {SEED})"
    return {"root": root, "data": data, "plan": plan, "plan_path": plan_path, "reads": reads,
            "native": native}


def _schedule(cache, workload, out):
    tool = cache.schedule_tool()
    if tool is None:
        pytest.skip(f"no prescient-schedule under {cache.build_dir} (set PRESCIENT_BUILD_DIR to a "
                    "build tree with the scheduler tool)")
    run([tool, "generate", "--source", "torch-distributed", "--samples", 1000, "--epochs", 2,
         "--ranks", 1, "--batch-size", 8, "--seed", 3, "--quiet", "--rows", 1000,
         "--row-bytes", 6 * 4 * 2,
         "--dataset", f"{workload['data'] / 'a.h5'}:gzip_i2", "--output", out],
        cache.native_env(), workload["root"])
    return out


def _value_diff(cache, workload, node_id, tmp_path, pass_index, read_index, extra):
    """Re-runs the failing read with a dump of its value, natively and through the connector,
    and describes the difference."""
    lines = []
    values = {}
    for mode in ("native", "connector"):
        dump = tmp_path / f"{mode}.npy"
        env = cache.native_env() if mode == "native" else \
            cache.connector_env(node_id + "-r", extra=extra)
        run([READS_SCRIPT, workload["data"], workload["plan_path"], tmp_path / f"{mode}-dump.json",
             "--passes", pass_index + 1, "--dump", f"{pass_index}:{read_index}:{dump}"],
            env, tmp_path, check=False)
        values[mode] = np.load(dump, allow_pickle=True) if dump.exists() else None
    n, c = values["native"], values["connector"]
    if n is None or c is None:
        return "(the value could not be dumped: one side raised)"
    lines.append(f"native: dtype {n.dtype.str} shape {n.shape}; connector: dtype {c.dtype.str} "
                 f"shape {c.shape}")
    if n.shape == c.shape and n.dtype == c.dtype and not n.dtype.hasobject:
        nb = np.ascontiguousarray(n).view(np.uint8).reshape(-1)
        cb = np.ascontiguousarray(c).view(np.uint8).reshape(-1)
        bad = np.nonzero(nb != cb)[0]
        lines.append(f"{len(bad)} of {len(nb)} bytes differ; first at byte {bad[:8].tolist()}")
        if len(bad):
            item = int(bad[0]) // max(1, n.dtype.itemsize)
            lines.append(f"element {np.unravel_index(item, n.shape) if n.shape else ()}: native "
                         f"{n.reshape(-1)[item]!r}, connector {c.reshape(-1)[item]!r}")
    else:
        lines.append(f"native {n!r:.300}\nconnector {c!r:.300}")
    return "\n".join(lines)


def _delta(after, before, key):
    return after[key] - (before[key] if before else 0)


@pytest.mark.parametrize("schedule", [False, True], ids=["no-schedule", "schedule"])
def test_random_reads_match_native(cache, workload, node_id, tmp_path, schedule):
    extra = {}
    if schedule:
        extra["PRESCIENT_SCHEDULE"] = str(_schedule(cache, workload, tmp_path / "sched.bin"))
    stats_path = tmp_path / "stats.json"
    env = cache.connector_env(node_id, stats=stats_path, extra=extra)
    proc = run([READS_SCRIPT, workload["data"], workload["plan_path"], tmp_path / "conn.json",
                "--passes", 2], env, tmp_path, timeout=300)
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("prescient: warn")]
    out = read_json(tmp_path / "conn.json")
    leftovers = segment_leftovers(node_id)

    native, reads = workload["native"], workload["reads"]
    for p, digests in enumerate(out["digests"]):
        assert len(digests) == len(native)
        for i, (want, got) in enumerate(zip(native, digests)):
            if want != got:
                detail = _value_diff(cache, workload, node_id, tmp_path, p, i, extra)
                pytest.fail(f"read {i} of pass {p + 1} differs from native (seed {SEED}, "
                            f"{'with' if schedule else 'without'} schedule):\n"
                            f"  {describe(reads[i])}\n  native {want}\n  got    {got}\n{detail}",
                            pytrace=False)

    assert leftovers == [], "a normal run left its segment in /dev/shm"
    s1, s2 = out["stats"]
    assert s1 is not None and s2 is not None, "no statistics file: is the connector loaded?"
    classes = [classify(op) for op in reads]
    simple_reads, optional_reads = classes.count("simple"), classes.count("optional")
    assert s1["reads"] == len(reads), s1
    assert 0 < s1["reads_served"] <= s1["reads_simple"], s1
    # Every read of a simple kind is served; no read that must be forwarded is.
    assert simple_reads <= s1["reads_served"] <= simple_reads + optional_reads, \
        (simple_reads, optional_reads, s1)
    served2 = _delta(s2, s1, "reads_served")
    hit2 = _delta(s2, s1, "rows_hit")
    loaded2 = _delta(s2, s1, "rows_loaded")
    assert served2 == s1["reads_served"], "the same reads were not served the same way twice"
    # The whole working set fits in the cache: the second pass is (almost) all hits.
    assert hit2 >= 0.95 * (hit2 + loaded2), (hit2, loaded2)
    assert _delta(s2, s1, "storage_reads") <= 0.05 * max(1, s1["storage_reads"]), (s1, s2)
    if schedule:
        # The random reads do not follow the schedule: counted, at most one warning.
        assert s2["schedule_mismatches"] > 0, s2
        assert len(warnings) <= 1, warnings
    else:
        assert warnings == [], warnings
    print(f"seed {SEED}: {len(native)} reads x 2 passes identical; {simple_reads} of simple "
          f"kinds, {optional_reads} optional; pass 1 served "
          f"{s1['reads_served']}/{s1['reads']} (simple {s1['reads_simple']}), rows hit "
          f"{s1['rows_hit']} loaded {s1['rows_loaded']}, storage reads {s1['storage_reads']}; "
          f"pass 2 rows hit {hit2} loaded {loaded2}; schedule matches "
          f"{s2.get('schedule_matches')} mismatches {s2.get('schedule_mismatches')}; {warnings}")


def test_rewritten_file_is_never_served_stale(cache, workload, node_id, tmp_path):
    """A cache kept across runs (PRESCIENT_KEEP_CACHE=1) must not serve the old contents of a
    file rewritten in between: same path, inode, size and layout; new contents and mtime."""
    data = tmp_path / "data"
    shutil.copytree(workload["data"], data)
    plan = [op for op in workload["plan"] if op[0] == "reopen" or
            (op[0] == "b.h5" and op[1] in IN_PLACE)][:3000]
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan))
    keep = {"PRESCIENT_KEEP_CACHE": "1"}

    def connector(name, extra):
        stats = tmp_path / f"stats-{name}.json"
        run([READS_SCRIPT, data, plan_path, tmp_path / f"{name}.json"],
            cache.connector_env(node_id, stats=stats, extra=extra), tmp_path)
        return read_json(tmp_path / f"{name}.json")

    def native(name):
        run([READS_SCRIPT, data, plan_path, tmp_path / f"{name}.json"], cache.native_env(),
            tmp_path)
        return read_json(tmp_path / f"{name}.json")["digests"][0]

    before = native("native-before")
    first = connector("first", keep)
    assert first["digests"][0] == before
    assert segment_leftovers(node_id), "PRESCIENT_KEEP_CACHE=1 did not keep the segment"

    path = data / "b.h5"
    old = path.stat()
    run([FILES_SCRIPT, data, "--seed", SEED % 1000, "--only", "b.h5", "--variant", 1,
         "--in-place"], cache.native_env(), tmp_path)
    new = path.stat()
    assert (new.st_size, new.st_ino) == (old.st_size, old.st_ino)
    assert new.st_mtime_ns != old.st_mtime_ns
    after = native("native-after")
    changed = sum(a != b for a, b in zip(before, after))
    assert changed > len(after) // 2, f"the rewrite changed only {changed} reads"

    # Warm run over the rewritten file: same keys except the file's mtime.
    second = connector("second", keep)
    got = second["digests"][0]
    reads = [op for op in plan if op[0] != "reopen"]
    for i, (want, old_digest, g) in enumerate(zip(after, before, got)):
        if g != want:
            stale = " (the OLD file's contents: stale cache)" if g == old_digest else ""
            pytest.fail(f"after rewriting b.h5, read {i} {describe(reads[i])} differs from "
                        f"native{stale}", pytrace=False)
    s = second["stats"][0] or read_json(tmp_path / "stats-second.json")
    assert s["reads_served"] > 0, s
    # The last run without PRESCIENT_KEEP_CACHE removes the kept segment.
    third = connector("third", {})
    assert third["digests"][0] == after
    assert segment_leftovers(node_id) == [], "the segment outlived a run without KEEP_CACHE"


def test_reads_in_another_order_than_the_schedule(cache, workload, node_id, tmp_path):
    """A schedule made with the wrong seed: the loader reads every sample of the scheduled
    dataset, one at a time, in another shuffled order. Every read stays exact, the mismatches are
    counted, and the persistent mismatch turns prefetching off with exactly one warning."""
    schedule = _schedule(cache, workload, tmp_path / "sched.bin")  # seed 3
    rng = np.random.default_rng(4)
    plan = [["a.h5", "gzip_i2", "int", [int(i)]] for _ in range(2) for i in rng.permutation(1000)]
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan))
    run([READS_SCRIPT, workload["data"], plan_path, tmp_path / "native.json"], cache.native_env(),
        tmp_path)
    proc = run([READS_SCRIPT, workload["data"], plan_path, tmp_path / "conn.json"],
               cache.connector_env(node_id, stats=tmp_path / "stats.json",
                                   extra={"PRESCIENT_SCHEDULE": str(schedule)}), tmp_path)
    native = read_json(tmp_path / "native.json")["digests"][0]
    got = read_json(tmp_path / "conn.json")["digests"][0]
    bad = [i for i, (a, b) in enumerate(zip(native, got)) if a != b]
    assert not bad, f"{len(bad)} reads differ, first {describe(plan[bad[0]])}"
    s = read_json(tmp_path / "stats.json")
    assert s["reads_served"] == len(plan), s
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("prescient: warn")]
    assert s["schedule_mismatches"] > 0.5 * len(plan), s
    assert len(warnings) == 1, (
        f"{len(warnings)} warnings for a loader that never follows the schedule "
        f"(schedule_matches {s['schedule_matches']}, mismatches {s['schedule_mismatches']}): "
        f"{warnings}")


def test_segment_that_cannot_be_made_is_a_pass_through(cache, workload, node_id, tmp_path):
    """PRESCIENT_SHM_DIR where no segment can be made: one warning, every read forwarded and
    exact, nothing cached."""
    plan = workload["plan"][:2000]
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan))
    native = workload["native"][:sum(op[0] != "reopen" for op in plan)]
    env = cache.connector_env(node_id, stats=tmp_path / "stats.json",
                              extra={"PRESCIENT_SHM_DIR": str(tmp_path / "no-such-dir")})
    proc = run([READS_SCRIPT, workload["data"], plan_path, tmp_path / "conn.json"], env, tmp_path)
    got = read_json(tmp_path / "conn.json")["digests"][0]
    assert got == native
    s = read_json(tmp_path / "stats.json")
    assert s["reads"] == len(native) and s["reads_served"] == 0, s
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("prescient: warn")]
    assert len(warnings) == 1, warnings


def test_schedule_without_row_bytes_is_used_or_refused_loudly(cache, workload, node_id,
                                                             tmp_path):
    """`prescient-schedule generate --dataset FILE:NAME` without --row-bytes (its help: 0 =
    unknown), read in exactly the schedule's order: the connector must follow the schedule, or
    say with a warning why it does not; never drop it silently."""
    tool = cache.schedule_tool()
    if tool is None:
        pytest.skip(f"no prescient-schedule under {cache.build_dir}")
    sched = tmp_path / "sched.bin"
    run([tool, "generate", "--source", "torch-distributed", "--samples", 1000, "--epochs", 1,
         "--ranks", 1, "--batch-size", 8, "--seed", 3, "--quiet",
         "--dataset", f"{workload['data'] / 'a.h5'}:gzip_i2", "--output", sched],
        cache.native_env(), tmp_path)
    order = run([tool, "dump", sched, "--rank", 0, "--epoch", 0], cache.native_env(),
                tmp_path).stdout.split()
    plan = [["a.h5", "gzip_i2", "int", [int(i)]] for i in order]
    assert len(plan) == 1000
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan))
    proc = run([READS_SCRIPT, workload["data"], plan_path, tmp_path / "conn.json"],
               cache.connector_env(node_id, stats=tmp_path / "stats.json",
                                   extra={"PRESCIENT_SCHEDULE": str(sched)}), tmp_path)
    s = read_json(tmp_path / "stats.json")
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("prescient: warn")]
    followed = s["schedule_matches"] >= 0.9 * len(plan)
    assert followed or len(warnings) == 1, (
        f"the schedule was neither followed (matches {s['schedule_matches']}, mismatches "
        f"{s['schedule_mismatches']}) nor refused with a warning ({warnings})")


BAD_SCHEDULES = ["truncated", "garbage", "missing", "wrong-rank", "changed-file", "corrupt-index"]


@pytest.mark.parametrize("case", BAD_SCHEDULES)
def test_bad_schedule_files_lose_nothing(cache, workload, node_id, tmp_path, case):
    """A schedule that is corrupt, missing, for other ranks, or made before the file changed:
    one warning naming PRESCIENT_SCHEDULE, every read exact and still cached, the schedule
    not used.
    A corrupt next-use index beside a good schedule is rebuilt silently and the schedule is
    followed."""
    data = tmp_path / "data"
    shutil.copytree(workload["data"], data)
    sched = tmp_path / "sched.bin"
    copy = {**workload, "data": data, "root": tmp_path}
    _schedule(cache, copy, sched)
    tool = cache.schedule_tool()
    # The loader reads the scheduled dataset in the schedule's order (rank 0, epoch 0).
    order = run([tool, "dump", sched, "--rank", 0, "--epoch", 0], cache.native_env(),
                tmp_path).stdout.split()
    extra = {"PRESCIENT_SCHEDULE": str(sched)}
    if case == "truncated":
        sched.write_bytes(sched.read_bytes()[:100])
    elif case == "garbage":
        sched.write_bytes(os.urandom(sched.stat().st_size))
    elif case == "missing":
        extra["PRESCIENT_SCHEDULE"] = str(tmp_path / "no-such.sched")
    elif case == "wrong-rank":
        extra["PRESCIENT_RANK"] = "3"  # the schedule has one rank
    elif case == "changed-file":
        st = os.stat(data / "a.h5")
        os.utime(data / "a.h5", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    elif case == "corrupt-index":
        index = tmp_path / "sched.bin.node0.index"  # where the connector looks for node 0's
        run([tool, "index", sched, "--node", 0, "--output", index, "--quiet"], cache.native_env(),
            tmp_path)
        index.write_bytes(os.urandom(index.stat().st_size))
    plan = [["a.h5", "gzip_i2", "int", [int(i)]] for i in order]
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan))
    run([READS_SCRIPT, data, plan_path, tmp_path / "native.json"], cache.native_env(), tmp_path)
    proc = run([READS_SCRIPT, data, plan_path, tmp_path / "conn.json"],
               cache.connector_env(node_id, stats=tmp_path / "stats.json", extra=extra), tmp_path)
    native = read_json(tmp_path / "native.json")["digests"][0]
    got = read_json(tmp_path / "conn.json")["digests"][0]
    assert got == native, f"{sum(a != b for a, b in zip(native, got))} reads differ ({case})"
    s = read_json(tmp_path / "stats.json")
    assert s["reads_served"] == len(plan), s
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("prescient: warn")]
    if case == "corrupt-index":
        # A fallback: rebuilt in memory, counted, and said once.
        assert len(warnings) == 1 and "next-use index" in warnings[0], warnings
        assert s["fallback_index_rebuilt"] == 1, s
        assert s["schedule_matches"] >= 0.9 * len(plan), s
        return
    assert len(warnings) == 1, warnings
    assert "PRESCIENT_SCHEDULE" in warnings[0], warnings
    # Running without the schedule: nothing is compared with it (read-around of
    # whole chunks counts as rows_read_around, as it does without any schedule).
    assert s.get("schedule_matches", 0) == 0 and s.get("schedule_mismatches", 0) == 0, s
    assert segment_leftovers(node_id) == []

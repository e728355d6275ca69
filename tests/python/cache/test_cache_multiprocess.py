"""Four ranks on one node share one cache: each rank is a process running a PyTorch DataLoader
with two forked workers over a DistributedSampler, for three epochs, over a contiguous and a
gzip-chunked dataset (issue 4, section 5). Every tensor must equal native, nothing may hang,
and the later epochs must be served from rows other processes loaded."""

import time

import pytest

from cachetest_support import LOADER, compare, read_json, run, run_ranks, segment_leftovers

RANKS, EPOCHS, BATCH, SAMPLES, SEED = 4, 3, 10, 1200, 11
GZ_ROW_BYTES = 32 * 32 * 2  # cachetest_loader.make: dataset 'gz', int16 rows of 32 x 32
TIMEOUT = 150  # seconds for the whole job; a hang fails the test


@pytest.fixture(scope="module")
def loader_data(tmp_path_factory, cache):
    root = tmp_path_factory.mktemp("cache-mp")
    data = root / "samples.h5"
    run([LOADER, data, "--make", SAMPLES], cache.native_env(), root)
    # The oracle: every rank's batches, natively, in one process without workers.
    run([LOADER, data, root / "native.json", "--ranks", RANKS, "--epochs", EPOCHS, "--batch",
         BATCH, "--seed", SEED, "--workers", 0, "--all-ranks"], cache.native_env(), root)
    native = read_json(root / "native.json")
    return root, data, native


def _schedule(cache, data, out):
    tool = cache.schedule_tool()
    if tool is None:
        pytest.skip(f"no prescient-schedule under {cache.build_dir} (set PRESCIENT_BUILD_DIR)")
    run([tool, "generate", "--source", "torch-distributed", "--samples", SAMPLES, "--epochs",
         EPOCHS, "--ranks", RANKS, "--ranks-per-node", RANKS, "--workers", 2, "--batch-size",
         BATCH, "--seed", SEED, "--quiet", "--dataset", f"{data}:gz", "--row-bytes", GZ_ROW_BYTES,
         "--output", out],
        cache.native_env(), out.parent)
    return out


@pytest.mark.parametrize("schedule", [False, True], ids=["no-schedule", "schedule"])
def test_four_ranks_two_workers_three_epochs(cache, loader_data, node_id, tmp_path, schedule):
    root, data, native = loader_data
    extra = {}
    if schedule:
        extra["PRESCIENT_SCHEDULE"] = str(_schedule(cache, data, tmp_path / "sched.bin"))
    envs = [cache.connector_env(node_id, stats=tmp_path / f"stats-r{r}.json",
                                extra={**extra, "PRESCIENT_RANK": str(r)}) for r in range(RANKS)]
    (tmp_path / "barrier").mkdir()
    start = time.monotonic()
    got = run_ranks(envs, data, tmp_path, 2, EPOCHS, BATCH, SEED, TIMEOUT,
                    extra_args=("--barrier", str(tmp_path / "barrier")))
    elapsed = time.monotonic() - start
    compare(native, got, "connector")
    assert segment_leftovers(node_id) == [], "the job left its segment in /dev/shm"

    # Statistics of the workers (they do every read), attributed to epochs by pid.
    keys = ("reads", "reads_served", "rows_hit", "rows_waited", "rows_loaded", "rows_prefetched",
            "stall_ns", "schedule_matches", "schedule_mismatches")
    per_epoch = {e: dict.fromkeys(keys, 0) for e in range(EPOCHS)}
    for r, result in enumerate(got):
        assert len(result["workers"]) == 2 * EPOCHS, result["workers"]
        for epoch, pid in result["workers"]:
            path = tmp_path / f"stats-r{r}.{pid}.json"
            assert path.exists(), f"no statistics file for worker {pid} of rank {r}"
            s = read_json(path)
            for key in keys:
                per_epoch[epoch][key] += s.get(key, 0)
    reads = SAMPLES * 3  # three datasets per sample
    for epoch, s in per_epoch.items():
        assert s["reads"] == reads, (epoch, s)
        assert s["reads_served"] == reads, f"epoch {epoch}: not every per-sample read served: {s}"
    for epoch in range(1, EPOCHS):
        s = per_epoch[epoch]
        # Every row was loaded in epoch 0 by some process (the ranks wait for each other after
        # each epoch) and the cache holds them all: later epochs hit, in fresh worker processes.
        shared = s["rows_hit"] + s["rows_waited"]
        assert shared > 0, f"epoch {epoch}: no cross-process hits: {s}"
        assert s["rows_loaded"] <= 0.01 * (shared + s["rows_loaded"]), f"epoch {epoch}: {s}"
    if schedule:
        # Each worker follows its rank's part of the schedule exactly: every read of the
        # scheduled dataset ('gz') matches it.
        for epoch, s in per_epoch.items():
            assert (s["schedule_matches"], s["schedule_mismatches"]) == (SAMPLES, 0), (epoch, s)
    mains = [read_json(tmp_path / f"stats-r{r}.json") for r in range(RANKS)]
    print(f"4 ranks x 2 workers x {EPOCHS} epochs: {elapsed:.1f} s, per epoch {per_epoch}; "
          f"main processes: {[{k: m.get(k) for k in keys} for m in mains]}")

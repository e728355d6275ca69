"""Datasets too small to cache (PRESCIENT_MIN_DATASET_BYTES): one dataset per sample.

A file holds one group per sample, each with a 4 KiB contiguous `data`, a scalar `label` and a
4 KiB chunked, gzip-compressed `zdata`, beside a 160 KiB contiguous `table` (the layout public
loaders write with `create_group` per sample). Without a schedule, a contiguous dataset smaller
than the setting is neither identified nor cached: its reads go to HDF5 unlooked-at. Chunked
datasets and larger ones are cached as before; so is every dataset with a schedule file, and a
followed process leaves only a file of many such datasets to HDF5. Every read's bytes are compared
with native's, in two passes (the second is where hits would come from).
"""

import json
import os

import pytest

from voltest_support import forwarded_for, totals_of

SAMPLES = 64

SCRIPT = r'''
import hashlib, json, sys
import h5py, numpy as np

path, out, action = sys.argv[1], sys.argv[2], sys.argv[3]
if action == "write":
    with h5py.File(path, "w") as f:
        for i in range(%(samples)d):
            g = f.create_group(f"s{i:04d}")
            g["data"] = np.full((32, 32), i, dtype="<f4")
            g["label"] = np.int64(i)
            g.create_dataset("zdata", data=np.arange(1024, dtype="<f4") + i, chunks=(256,),
                             compression="gzip")
        f["table"] = np.arange(40960, dtype="<f4").reshape(640, 64)
    sys.exit(0)
digests = []
with h5py.File(path, "r") as f:
    table = f["table"]
    for _ in range(2):
        for i in np.random.default_rng(1).permutation(%(samples)d):
            g = f[f"s{i:04d}"]
            for value in (g["data"][()], g["label"][()], g["zdata"][()], g["data"][3:9],
                          table[int(i)], table[int(i) * 4:int(i) * 4 + 8]):
                digests.append(hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest())
json.dump(digests, open(out, "w"))
''' % {"samples": SAMPLES}


def run(prescient, tmp_path, name, extra):
    data = tmp_path / "samples.h5"
    if not data.exists():
        prescient.python(SCRIPT, [data, "-", "write"], "native", tmp_path)
    results = {}
    for mode in ("native", "connector"):
        out = tmp_path / f"{name}-{mode}.json"
        stats = tmp_path / f"{name}-stats"
        stats.mkdir(exist_ok=True)
        env = {"PRESCIENT_NODE_ID": f"small-{name}-{os.getpid()}", **extra}
        prescient.python(SCRIPT, [data, out, "read"], mode, tmp_path,
                         stats=stats / "stats.json" if mode == "connector" else None, extra=env)
        results[mode] = json.loads(out.read_text())
    assert results["connector"] == results["native"]
    return totals_of(tmp_path / f"{name}-stats")


def test_small_contiguous_datasets_are_forwarded_without_a_schedule(prescient, tmp_path):
    t = run(prescient, tmp_path, "default", {"PRESCIENT_MIN_DATASET_BYTES": "128KiB"})
    # Two passes over 64 samples: each opens `data` twice and `label` (small, contiguous: not
    # cached) and `zdata` (small but chunked: cached); `table` is opened once and cached.
    assert t["datasets_opened"] == 2 * SAMPLES * 4 + 1, t
    assert t["datasets_too_small"] == 2 * SAMPLES * 3, t
    # 6 reads a sample: data twice and label, forwarded unlooked-at; zdata and two table reads
    # served (the first pass loads them, the second hits).
    assert t["reads"] == 2 * SAMPLES * 6, t
    assert t["reads_forwarded"] == 2 * SAMPLES * 3, t
    assert forwarded_for(t) == {"too_small": 2 * SAMPLES * 3}, t
    assert t["reads_served"] == 2 * SAMPLES * 3, t
    assert t["reads_scalar"] == 0, t  # the labels were not looked at
    assert t["rows_hit"] > 0, t


def test_every_dataset_is_cached_with_the_setting_at_zero(prescient, tmp_path):
    t = run(prescient, tmp_path, "all", {"PRESCIENT_MIN_DATASET_BYTES": "0"})
    assert t["datasets_too_small"] == 0, t
    # Only the scalar labels are forwarded (no rows to cache).
    assert t["reads_forwarded"] == 2 * SAMPLES, t
    assert forwarded_for(t) == {"selection": 2 * SAMPLES}, t
    assert t["reads_served"] == 2 * SAMPLES * 5, t


def test_a_schedule_file_keeps_every_dataset(prescient, tmp_path):
    # A schedule's sample map may name any dataset: none is left out for its size (the file
    # given does not exist, so the reads are served as without a schedule).
    schedule = tmp_path / "absent.schedule"
    t = run(prescient, tmp_path, "schedule", {"PRESCIENT_MIN_DATASET_BYTES": "64KiB",
                                              "PRESCIENT_SCHEDULE": str(schedule)})
    assert t["datasets_too_small"] == 0, t
    assert t["reads_served"] == 2 * SAMPLES * 5, t


def test_followed_a_file_of_one_dataset_per_sample_is_left_to_hdf5(prescient, tmp_path):
    # The follower learns and prefetches a few small fields of a file, so the first ones opened
    # are cached; past 32 distinct small contiguous datasets in one file (`data` and `label` of
    # the first 16 groups visited), the file holds one dataset per sample, which no learned map
    # describes, and every small contiguous dataset of it is left to HDF5 from then on.
    schedule = tmp_path / "not-yet-published.schedule"
    t = run(prescient, tmp_path, "follow", {"PRESCIENT_MIN_DATASET_BYTES": "64KiB",
                                            "PRESCIENT_FOLLOW": "1",
                                            "PRESCIENT_SCHEDULE": str(schedule)})
    cached_groups = 32 // 2
    # Opens of `data` (twice) and `label` per group visit.
    assert t["datasets_too_small"] == 2 * SAMPLES * 3 - cached_groups * 3, t
    assert t["reads_forwarded"] == 2 * SAMPLES * 3 - cached_groups * 2, t
    assert t["reads_served"] == 2 * SAMPLES * 3 + cached_groups * 2, t

"""Datasets of many files: one sample per file needs one dataset record per file and field.

The segment's dataset table is sized from the cache (one record per 2 KiB, DatasetTableSize).
A job that opens more datasets than the table holds keeps every byte exact: the datasets beyond
it are read natively, with one warning for the process (not one per dataset and read), and each
is tried once.
"""

import json
import os

import h5py
import numpy as np

from cachetest_support import read_json, run

FILES = 2100  # x 2 fields = 4,200 datasets, more than the 4,096 records tables once had
READER = """
import glob, json, sys
import h5py
files = sorted(glob.glob(sys.argv[1] + "/*.h5"))
bad = 0
for _ in range(2):
    for i, path in enumerate(files):
        with h5py.File(path, "r") as f:
            x, y = f["x"][0], f["y"][0]
        bad += int(x[0] != i or x[-1] != -i or y != 3 * i)
json.dump({"bad": bad, "files": len(files)}, open(sys.argv[2], "w"))
"""


def _make_files(directory):
    directory.mkdir()
    for i in range(FILES):
        with h5py.File(directory / f"s{i:05d}.h5", "w") as f:
            f["x"] = np.array([[i, 1, 2, -i]], dtype="i4")
            f["y"] = np.array([3 * i], dtype="i8")


def _read(cache, node_id, tmp_path, data, size):
    script = tmp_path / "reader.py"
    script.write_text(READER)
    stats = tmp_path / f"stats-{size}.json"
    out = tmp_path / f"out-{size}.json"
    env = cache.connector_env(node_id, stats=stats, extra={"PRESCIENT_CACHE_SIZE": size})
    proc = run([script, data, out], env, tmp_path)
    return read_json(out), read_json(stats), proc.stderr.splitlines()


def test_more_datasets_than_the_table_holds(cache, node_id, tmp_path):
    data = tmp_path / "files"
    _make_files(data)
    # 8 MiB: a table of 4,096 records, 3,584 usable.
    got, stats, stderr = _read(cache, node_id, tmp_path, data, "8MiB")
    assert got == {"bad": 0, "files": FILES}
    full = [line for line in stderr if "dataset table full" in line]
    assert len(full) == 1, full
    assert all("not caching" not in line for line in stderr if line not in full), stderr[:5]
    assert stats["reads"] == 4 * FILES
    # The datasets that fit are served in the second pass; the rest are read natively.
    assert 0 < stats["reads_served"] < stats["reads"], json.dumps(stats)[:2000]

    # 64 MiB: 32,768 records, everything is cached and nothing is said.
    got, stats, stderr = _read(cache, node_id + "b", tmp_path, data, "64MiB")
    assert got == {"bad": 0, "files": FILES}
    assert not [line for line in stderr if "not caching" in line], stderr[:5]
    assert stats["reads_served"] == stats["reads"], json.dumps(stats)[:2000]

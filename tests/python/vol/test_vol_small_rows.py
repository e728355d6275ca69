"""A dataset of small rows much larger than the cache: a time series read in sliding windows.

`x` holds 64,000 steps of 16 float32 channels (64-byte rows, 4 MiB), `y` a label per step; each
read takes a window of 64 steps at a multiple of 16 and the label at its last step, in a shuffled
order, twice. The cache (4 MiB, 3.6 MB for rows) holds four fifths of it. Rows that small are
cached several to an entry (64 KiB) also when the dataset is larger than a sixteenth of the
cache, where its rows would not fit it a 4 KiB block each: cached so, the cache held 1.6% of the
rows it could, 0.9% of the rows read hit and every read went to storage (8,025 requests for
8,000 reads); in entries, 75% hit and 1,090 requests. Every read's bytes are compared with
native's.
"""

import json
import os

from voltest_support import totals_of

SCRIPT = r'''
import hashlib, json, sys
import h5py, numpy as np

path, out, action = sys.argv[1], sys.argv[2], sys.argv[3]
STEPS, WINDOW, STRIDE = 64000, 64, 16
if action == "write":
    rng = np.random.default_rng(4)
    with h5py.File(path, "w") as f:
        f["x"] = rng.standard_normal((STEPS, 16), dtype=np.float32)
        f["y"] = np.arange(STEPS, dtype=np.int64)
    sys.exit(0)
digests = []
with h5py.File(path, "r") as f:
    x, y = f["x"], f["y"]
    starts = np.arange(0, STEPS - WINDOW + 1, STRIDE)
    for epoch in range(2):
        for s in np.random.default_rng(epoch).permutation(starts)[:2000]:
            s = int(s)
            for value in (x[s:s + WINDOW], y[s + WINDOW - 1]):
                digests.append(hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest())
json.dump(digests, open(out, "w"))
'''


def test_a_series_of_small_rows_larger_than_the_cache_fills_it_in_entries(prescient, tmp_path):
    data = tmp_path / "series.h5"
    prescient.python(SCRIPT, [data, "-", "write"], "native", tmp_path)
    results = {}
    stats = tmp_path / "stats"
    stats.mkdir()
    for mode in ("native", "connector"):
        out = tmp_path / f"{mode}.json"
        env = {"PRESCIENT_NODE_ID": f"small-rows-{os.getpid()}", "PRESCIENT_CACHE_SIZE": "4MiB"}
        prescient.python(SCRIPT, [data, out, "read"], mode, tmp_path,
                         stats=stats / "stats.json" if mode == "connector" else None, extra=env)
        results[mode] = json.loads(out.read_text())
    assert results["connector"] == results["native"]

    t = totals_of(stats)
    reads = 2 * 2000 * 2
    assert t["reads_served"] == reads, t
    # Most of the series stays cached and most windows hit (a row to a block: 0.9%)...
    assert t["rows_hit"] >= 0.5 * t["rows"], t
    # ... so most reads need no storage request (a row to a block: every one did).
    assert t["storage_reads"] <= 0.25 * reads, t

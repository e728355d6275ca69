"""What the connector's read decoder counts for known h5py reads (h5py-read-path §1.3).

One connector process performs each read between opening and closing the file; the
statistics are written at every file close, so the difference between consecutive stats
files is exactly what one read was counted as.
"""

import json
import os
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = os.path.join(HERE, "voltest_scenarios.py")
ROW_BYTES = 3 * 8 * 8 * 4  # one row of x: float32 (3, 8, 8)

# expression -> (selection kind, rows along dimension 0, simple read? None = not checked)
EXPECTED = {
    "x[5]": ("regular", 1, True),
    "x[-1]": ("regular", 1, True),
    "x[10:20]": ("regular", 10, True),
    "x[10:20:3]": ("regular", 4, True),
    "x[[3,17,42]]": ("irregular", 3, True),
    "x[[3,4,5]]": ("regular", 3, True),
    "x[[0,2,4,6]]": ("regular", 4, True),
    "x[[1,2,3,5,6,7]]": ("regular", 6, True),
    "x[[3,4,5,17]]": ("irregular", 4, True),
    "y[[1,5,9]]": ("regular", 3, True),
    "y[::7]": ("regular", 15, True),
    "x[:]": ("regular", 100, True),
    "x[()]": ("all", 100, True),
    "np.asarray(x)": ("all", 100, True),
    "y[mask]": ("points", 3, None),
    # The same part of every row is simple (cut from cached rows); under half a row, as
    # x[5,1], x[:,1] and x[2:50:5,::2,1:7:3] take, it is served only where whole rows pay.
    "x[5,1]": ("regular", 1, True),
    "x[5,:,2:6]": ("regular", 1, True),
    "x[5,[0,2]]": ("regular", 1, True),
    "x[[3,17,42],1:]": ("irregular", 3, True),
    "x[5,:,:,::2]": ("regular", 1, True),
    "x[:,1]": ("regular", 100, True),
    "x[2:50:5,::2,1:7:3]": ("regular", 10, True),
    "x.astype(f8)[5]": ("regular", 1, False),
    "read_direct s_[10:18] -> s_[8:16]": ("regular", 8, False),
    "read_direct s_[5] -> rank 3": ("regular", 1, None),
    # A member of a compound, stored as read: gathered from the stored rows.
    "c['b',10:12]": ("regular", 2, True),
    "xc[[3,17,42]]": ("irregular", 3, True),
    "s[()]": ("all", None, None),
    "v[5]": ("regular", 1, False),
}
# Bytes delivered by the reads of row parts above (float32 elements of x's (3, 8, 8) rows).
ROW_PART_BYTES = {"x[5,:,2:6]": 3 * 4 * 8 * 4, "x[5,[0,2]]": 2 * 8 * 8 * 4,
                  "x[[3,17,42],1:]": 3 * 2 * 8 * 8 * 4, "x[5,:,:,::2]": 3 * 8 * 4 * 4,
                  "x[5,1]": 8 * 8 * 4, "x[:,1]": 100 * 8 * 8 * 4,
                  "x[2:50:5,::2,1:7:3]": 10 * 2 * 2 * 8 * 4}

# Why the reads above that are not served are forwarded (statistics "forwarded"); the others
# are served. The test's rows are small enough to share a cache entry, from which parts of rows
# are not cut.
FORWARDED_FOR = {
    "y[mask]": "selection",
    "s[()]": "selection",
    "x.astype(f8)[5]": "type",
    "read_direct s_[10:18] -> s_[8:16]": "memory",
    "v[5]": "dataset",  # variable-length strings: no fixed-size rows to cache
    **{expression: "small_row_part" for expression in ROW_PART_BYTES},
}

COUNT_SCRIPT = textwrap.dedent("""
    import json, os, sys, h5py
    import numpy as np
    from voltest_scenarios import selection_reads
    path, stats_path, names = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])

    def snapshot():
        with open(stats_path) as f:
            return json.load(f)

    out = {}
    with h5py.File(path, "r") as f:   # a first open/close so that a stats file exists
        pass
    before = snapshot()
    for name in names:
        with h5py.File(path, "r") as f:
            selection_reads(f)[name]()
        after = snapshot()
        out[name] = {"before": before, "after": after}
        before = after
    print(json.dumps(out))
""")


def delta(before, after):
    out = {k: after[k] - before[k] for k in ("reads", "reads_simple", "rows", "bytes",
                                             "files_opened", "datasets_opened")}
    for group in ("selections", "forwarded"):
        out[group] = {k: after[group][k] - before[group][k] for k in after[group]}
    out["reads_served"] = after["reads_served"] - before["reads_served"]
    return out


@pytest.fixture(scope="module")
def counted(prescient_module, tmp_path_factory):
    runner = prescient_module
    directory = tmp_path_factory.mktemp("counts")
    path = directory / "data.h5"
    runner.run([SCENARIOS, "selections", "write", path], "native", directory)
    stats = directory / "stats.json"
    proc = runner.run([sys.executable, "-c", COUNT_SCRIPT, path, stats, json.dumps(list(EXPECTED))],
                      "connector", directory, stats=stats)
    return {name: delta(v["before"], v["after"]) for name, v in json.loads(proc.stdout).items()}


@pytest.fixture(scope="module")
def prescient_module(request):
    runner = request.getfixturevalue("runner")
    if runner.stand_in:
        pytest.skip("counts are a prescient feature; the pass_through stand-in has none")
    return runner


@pytest.mark.parametrize("expression", list(EXPECTED))
def test_read_is_counted(counted, expression):
    kind, rows, simple = EXPECTED[expression]
    d = counted[expression]
    assert d["reads"] == 1, d
    assert d["files_opened"] == 1, d
    assert d["selections"][kind] == 1, d
    assert sum(d["selections"].values()) == 1, d
    if rows is not None:
        assert d["rows"] == rows, d
    if simple is not None:
        assert d["reads_simple"] == (1 if simple else 0), d
    # Served, or forwarded for one reason, the one the read's shape gives.
    reason = FORWARDED_FOR.get(expression)
    assert d["forwarded"] == {k: int(k == reason) for k in d["forwarded"]}, d
    assert d["reads_served"] == (0 if reason else 1), d
    if expression in ROW_PART_BYTES:
        assert d["bytes"] == ROW_PART_BYTES[expression], d
    elif simple and expression.startswith("x") and not expression.startswith("xc"):
        assert d["bytes"] == rows * ROW_BYTES, d

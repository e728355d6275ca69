"""Random datasets and random reads, byte for byte against native HDF5.

voltest_random_reads.py writes, for each seed, one dataset of every storage kind (contiguous,
compact, chunked, gzip, shuffle+gzip, lzf, Fletcher-32, scale-offset, n-bit, unwritten chunks,
grown by resizes) with a drawn shape, stored type and chunking, and reads each in thirty drawn
ways, twice and again in a forked child. The readings through the connector, with its default
cache and with a cache of 1 MiB that evicts all the time, must equal the native reading: every
value, dtype and shape, and every exception (HDF5 1.14's scale-offset filter fails on some
chunks of one-byte integers; the connector must then fail alike, not invent bytes).
"""

import json
import os
import pickle

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "voltest_random_reads.py")
SEEDS = range(8)
CACHES = {"default cache": None, "1 MiB cache": "1MiB"}


def load(path):
    with open(path, "rb") as f:
        return pickle.load(f)


def first_differences(expected, actual, limit=5):
    lines = [f"{len(expected)} records natively, {len(actual)} through the connector"]
    for want, got in zip(expected, actual):
        if want != got and len(lines) <= limit:
            lines.append(f"{want[0]} {want[1]}{want[2]}:\n    native:    {str(want[3])[:200]}\n"
                         f"    connector: {str(got[3])[:200]}")
    return "\n".join(lines)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_reads_match_native(seed, runner, tmp_path):
    data = tmp_path / "data.h5"
    runner.run([SCRIPT, "write", data, seed], "native", tmp_path)
    runner.run([SCRIPT, "read", data, seed, tmp_path / "native.pkl"], "native", tmp_path)
    reference = load(tmp_path / "native.pkl")
    assert len(reference) > 600, "the script recorded too little"

    for label, size in CACHES.items():
        tag = label.split()[0]
        extra = {"PRESCIENT_NODE_ID": f"random-reads-{os.getpid()}-{seed}-{tag}"}
        if size:
            extra["PRESCIENT_CACHE_SIZE"] = size
        stats = tmp_path / f"stats-{tag}.json"
        result = runner.run([SCRIPT, "read", data, seed, tmp_path / f"{tag}.pkl"], "connector",
                            tmp_path, stats=stats, extra=extra)
        readings = load(tmp_path / f"{tag}.pkl")
        if readings != reference:
            pytest.fail(f"seed {seed}, {label}: " + first_differences(reference, readings),
                        pytrace=False)
        if runner.stand_in:
            continue
        # Both paths ran: reads the cache served and reads it forwarded (conversions,
        # compound fields, filters it reads through HDF5 when those fail).
        with open(stats) as f:
            counters = json.load(f)
        assert counters["reads_served"] > 0, f"{label}: nothing served from the cache"
        assert counters["reads_forwarded"] > 0, f"{label}: nothing forwarded"
        assert "Traceback" not in result.stderr

"""Helpers shared by the connector integration tests (a uniquely named module: the conftest.py
files of the other tests/python directories are importable as "conftest" too)."""

import ctypes
import glob
import json
import mmap
import os

import pytest


def read_stats(directory, pattern="stats*.json"):
    """All PRESCIENT_STATS files in directory, as {path: dict}."""
    out = {}
    for path in sorted(glob.glob(os.path.join(str(directory), pattern))):
        with open(path) as f:
            out[path] = json.load(f)
    return out


COUNTER_GROUPS = ("selections", "forwarded")  # nested counters, summed too ("node" is not)


def totals_of(directory):
    """Counters summed over every statistics file in directory, with the counter groups'
    (totals["forwarded"]["type"], ...)."""
    totals = {}
    for stats in read_stats(directory).values():
        for key, value in stats.items():
            if isinstance(value, int) and not isinstance(value, bool):
                totals[key] = totals.get(key, 0) + value
            elif key in COUNTER_GROUPS:
                group = totals.setdefault(key, {})
                for name, count in value.items():
                    group[name] = group.get(name, 0) + count
    return totals


def forwarded_for(totals):
    """The reasons of totals' forwarded reads that occurred, {reason: reads}."""
    return {reason: reads for reason, reads in totals["forwarded"].items() if reads}


def check_client_reads(runner, script, client, tmp_path, least_records):
    """A client script (voltest_records.script_main) writes its files natively, then reads them
    as `client` natively and with the connector: every record must be the same, and the
    connector must have served reads from its cache, not merely forwarded them all, each
    forwarded read with its reason. Returns the connector's counters summed over its processes
    (forked workers write stats.json.<pid>.json beside the parent's), None with the stand-in."""
    from voltest_records import first_difference, load

    data = tmp_path / "data"
    runner.run([script, "write", data], "native", tmp_path)
    runner.run([script, "read", client, data, tmp_path / "native.pkl"], "native", tmp_path)
    runner.run([script, "read", client, data, tmp_path / "connector.pkl"], "connector", tmp_path,
               stats=tmp_path / "stats.json")
    native, connector = load(tmp_path / "native.pkl"), load(tmp_path / "connector.pkl")
    assert len(native) >= least_records, f"the client recorded too little: {len(native)} reads"
    difference = first_difference(native, connector)
    assert difference is None, difference
    if runner.stand_in:
        return None
    counters = totals_of(tmp_path)
    assert counters["reads_served"] > 0 and counters["rows_hit"] > 0, counters
    assert counters["reads"] == counters["reads_served"] + counters["reads_forwarded"], counters
    assert sum(counters["forwarded"].values()) == counters["reads_forwarded"], counters
    return counters


def schedule_tool():
    """Path of prescient-schedule in PRESCIENT_BUILD_DIR (default build/dev); a missing tool fails
    the test when PRESCIENT_REQUIRE_PLUGIN=1 (tests/run), else skips it."""
    here = os.path.dirname(os.path.abspath(__file__))
    build = os.environ.get("PRESCIENT_BUILD_DIR",
                           os.path.join(here, "..", "..", "..", "build", "dev"))
    tool = os.path.join(build, "scheduler", "tool", "prescient-schedule")
    if not os.path.isfile(tool):
        if os.environ.get("PRESCIENT_REQUIRE_PLUGIN") == "1":
            pytest.fail(f"no prescient-schedule in {build} (PRESCIENT_REQUIRE_PLUGIN=1)")
        pytest.skip(f"no prescient-schedule in {build}")
    return tool


def resident_pages(fd, size):
    """Per page of the first `size` bytes of the file open at `fd`: 1 where the page cache holds
    it. mincore(2) over a mapping that is never touched: unlike a read (even preadv2 with
    RWF_NOWAIT, which starts read-ahead), asking brings nothing in."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                          ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap")
    try:
        vec = ctypes.create_string_buffer((size + mmap.PAGESIZE - 1) // mmap.PAGESIZE)
        if libc.mincore(addr, size, vec) != 0:
            raise OSError(ctypes.get_errno(), "mincore")
        return [b & 1 for b in vec.raw]
    finally:
        libc.munmap(addr, size)

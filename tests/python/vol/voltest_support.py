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

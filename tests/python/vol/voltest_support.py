"""Helpers shared by the connector integration tests (a uniquely named module: the conftest.py
files of the other tests/python directories are importable as "conftest" too)."""

import glob
import json
import os

import pytest


def read_stats(directory, pattern="stats*.json"):
    """All PRESCIENT_STATS files in directory, as {path: dict}."""
    out = {}
    for path in sorted(glob.glob(os.path.join(str(directory), pattern))):
        with open(path) as f:
            out[path] = json.load(f)
    return out


def totals_of(directory):
    """Counters summed over every statistics file in directory."""
    totals = {}
    for stats in read_stats(directory).values():
        for key, value in stats.items():
            if isinstance(value, int) and not isinstance(value, bool):
                totals[key] = totals.get(key, 0) + value
    return totals


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

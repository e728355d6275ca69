"""Helpers shared by the connector integration tests (a uniquely named module: the conftest.py
files of the other tests/python directories are importable as "conftest" too)."""

import glob
import json
import os


def read_stats(directory, pattern="stats*.json"):
    """All PRESCIENT_STATS files in directory, as {path: dict}."""
    out = {}
    for path in sorted(glob.glob(os.path.join(str(directory), pattern))):
        with open(path) as f:
            out[path] = json.load(f)
    return out

"""Fixtures for the node agent's tests (tests/python/agent): several nodes emulated on this
machine (examples/bench/emulated_nodes.py), prescient-node under mpirun.

Environment: PRESCIENT_BUILD_DIR (prescient-node, prescient-schedule; default build/dev),
PRESCIENT_PLUGIN_DIR (default BUILD/plugins), PRESCIENT_REQUIRE_PLUGIN=1 (a missing build or
mpirun fails instead of skipping; tests/run sets it).
"""

import os
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(REPO, "examples", "bench"))


class Build:
    def __init__(self, build, plugin_dir):
        self.plugin_dir = plugin_dir
        self.tool = os.path.join(build, "scheduler", "tool", "prescient-schedule")
        self.agent = os.path.join(build, "scheduler", "tool", "prescient-node")


@pytest.fixture(scope="session")
def build():
    root = os.environ.get("PRESCIENT_BUILD_DIR", os.path.join(REPO, "build", "dev"))
    plugin_dir = os.environ.get("PRESCIENT_PLUGIN_DIR", os.path.join(root, "plugins"))
    b = Build(root, plugin_dir)
    missing = [p for p in (b.tool, b.agent, os.path.join(plugin_dir, "libprescient_vol.so"))
               if not os.path.exists(p)]
    if shutil.which("mpirun") is None:
        missing.append("mpirun")
    if missing:
        message = "missing: " + ", ".join(missing) + " (set PRESCIENT_BUILD_DIR)"
        if os.environ.get("PRESCIENT_REQUIRE_PLUGIN") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return b

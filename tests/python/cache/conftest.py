"""Fixtures for the node-cache integration tests (tests/python/cache).

Every h5py read runs in a subprocess: natively (no connector) and with the prescient connector
loaded through HDF5_PLUGIN_PATH/HDF5_VOL_CONNECTOR, each with its own PRESCIENT_NODE_ID so that
no two tests (and no other user of this machine) share a cache segment.

Environment:
  PRESCIENT_PLUGIN_DIR      directory holding libprescient_vol.so
                            (default /work/main/build/dev/plugins)
  PRESCIENT_REQUIRE_PLUGIN  1: a missing plugin FAILS the tests (tests/run sets it); otherwise
                            they skip
  PRESCIENT_BUILD_DIR       build tree holding scheduler/tool/prescient-schedule (default
                            /work/main/build/dev); without the tool the schedule cases skip
  PRESCIENT_SLOW_TESTS      1: also run the tests marked slow (sanitizer builds); `-m slow` too
"""

import os
import re

import pytest

from cachetest_support import (DEFAULT_BUILD, HERE, PLUGIN_NAME, Cache, new_node_id,
                               remove_leftovers)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long optional tests (sanitizer builds); run with "
                            "PRESCIENT_SLOW_TESTS=1 or -m slow")


def pytest_collection_modifyitems(config, items):
    # tests/run selects no markers: slow tests of this directory run only when asked for.
    if os.environ.get("PRESCIENT_SLOW_TESTS") == "1" or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: set PRESCIENT_SLOW_TESTS=1 or use -m slow")
    for item in items:
        if "slow" in item.keywords and str(item.fspath).startswith(HERE + os.sep):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cache():
    plugin_dir = os.environ.get("PRESCIENT_PLUGIN_DIR", os.path.join(DEFAULT_BUILD, "plugins"))
    if not os.path.isfile(os.path.join(plugin_dir, PLUGIN_NAME)):
        message = (f"no {PLUGIN_NAME} in {plugin_dir} (set PRESCIENT_PLUGIN_DIR or build the "
                   "connector)")
        if os.environ.get("PRESCIENT_REQUIRE_PLUGIN") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return Cache(plugin_dir, os.environ.get("PRESCIENT_BUILD_DIR", DEFAULT_BUILD))


@pytest.fixture
def node_id(request):
    """A fresh node id; whatever it leaves in /dev/shm is removed after the test (tests that
    check for leftovers do so themselves, before this cleanup)."""
    nid = new_node_id(re.sub(r"[^A-Za-z0-9.-]", "", request.node.name.replace("test_", ""))[:24])
    remove_leftovers(nid)
    yield nid
    remove_leftovers(nid)

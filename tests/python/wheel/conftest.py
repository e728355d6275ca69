"""Fixtures for the pip-wheel tests (tests/python/wheel): h5py as PyTorch users install it,
from the Python package index, in a venv of pinned wheels (make_venv), with Prescient loaded
through HDF5_PLUGIN_PATH and HDF5_VOL_CONNECTOR only.

    env/run python3 -m pytest -q -p no:cacheprovider tests/python/wheel

They run in the default flavor of the environment (HDF5 1.14, the series of the pinned
wheel's own HDF5); other flavors skip them.

Environment: PRESCIENT_BUILD_DIR (default build/dev: its plugins/, plugins-wheel/ and
scheduler/tool/prescient-schedule), PRESCIENT_REQUIRE_PLUGIN=1 (a missing plugin or venv
fails instead of skipping).
"""

import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: h5py's own suite from the wheel (about a minute); "
                            "run with PRESCIENT_SLOW_TESTS=1 or -m slow")


def pytest_collection_modifyitems(config, items):
    flavor = os.environ.get("PRESCIENT_ENV_FLAVOR", "default")
    if flavor != "default":
        skip = pytest.mark.skip(reason="the pip-wheel route is tested in the default flavor "
                                f"(HDF5 1.14 and the Python of the pinned wheel; this is '{flavor}')")
        for item in items:
            item.add_marker(skip)
        return
    if os.environ.get("PRESCIENT_SLOW_TESTS") == "1" or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: set PRESCIENT_SLOW_TESTS=1 or use -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def _require(message):
    if os.environ.get("PRESCIENT_REQUIRE_PLUGIN") == "1":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def build_dir():
    build = os.environ.get("PRESCIENT_BUILD_DIR", os.path.join(REPO, "build", "dev"))
    for needed in ("plugins/libprescient_vol.so", "plugins-wheel/libprescient_vol.so",
                   "plugins-wheel/unbound/libprescient_vol_unbound.so"):
        if not os.path.isfile(os.path.join(build, needed)):
            _require(f"no {needed} under {build} (set PRESCIENT_BUILD_DIR)")
    return build


@pytest.fixture(scope="session")
def wheel_python():
    proc = subprocess.run([os.path.join(HERE, "..", "make_venv"), os.path.join(HERE, "requirements.txt")],
                          capture_output=True, text=True,
                          timeout=900)
    if proc.returncode != 0:
        _require(f"cannot make the pip-wheel venv:\n{proc.stderr[-3000:]}")
    return proc.stdout.strip()

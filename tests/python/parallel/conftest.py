"""Fixtures for the parallel-HDF5 tests (tests/python/parallel): h5py built with MPI, jobs
started with mpirun (4 ranks on this one node), natively and through the connector.

They run in the 'parallel' flavor of the project environment, where HDF5 and h5py are built
with OpenMPI:

    PRESCIENT_ENV_FLAVOR=parallel env/run python3 -m pytest -q -p no:cacheprovider tests/python/parallel

Elsewhere (an h5py without MPI) they skip, saying so.

Environment: PRESCIENT_PLUGIN_DIR (the plugin built against the parallel HDF5; default
build/parallel/plugins), PRESCIENT_BUILD_DIR (for prescient-schedule; default build/parallel),
PRESCIENT_REQUIRE_PLUGIN=1 (a missing plugin fails instead of skipping).
"""

import os
import shutil

import pytest

from partest_support import REPO, Mpi


@pytest.fixture(scope="session")
def mpi():
    try:
        import h5py
    except ImportError:
        pytest.skip("no h5py")
    if not h5py.get_config().mpi:
        pytest.skip("h5py is built without MPI: run in PRESCIENT_ENV_FLAVOR=parallel")
    if shutil.which("mpirun") is None:
        pytest.skip("no mpirun")
    build = os.environ.get("PRESCIENT_BUILD_DIR", os.path.join(REPO, "build", "parallel"))
    plugin_dir = os.environ.get("PRESCIENT_PLUGIN_DIR", os.path.join(build, "plugins"))
    if not os.path.isfile(os.path.join(plugin_dir, "libprescient_vol.so")):
        message = f"no libprescient_vol.so in {plugin_dir} (set PRESCIENT_PLUGIN_DIR)"
        if os.environ.get("PRESCIENT_REQUIRE_PLUGIN") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return Mpi(plugin_dir, build)

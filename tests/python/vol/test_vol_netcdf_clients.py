"""netCDF-4 clients through the connector, byte for byte against native (voltest_netcdf.py).

Climate and weather loaders read netCDF-4 files (HDF5 underneath) with netCDF4-python, whose
netCDF C library calls the HDF5 C API directly, or with h5netcdf over h5py, usually through
xarray, also in forked workers through handles their parent opened (CREDIT's ERA5 dataset under a
DataLoader). Each client reads the same files natively and with the connector; every value, dtype,
shape and mask must be the same, and the connector must have served reads from its cache
(not merely forwarded them all). Files written through the connector by the netCDF C library
must read back natively as the natively written ones do.
"""

import glob
import importlib.util
import os
import subprocess

import pytest

from conftest import PLUGIN_NAME, _libhdf5_of
from voltest_records import first_difference, load
from voltest_support import check_client_reads

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "voltest_netcdf.py")
MODULES = {"netcdf4": ["netCDF4"], "h5netcdf": ["h5netcdf"],
           "xarray": ["xarray", "netCDF4", "h5netcdf"], "forked": ["xarray", "netCDF4"]}


def _netcdf_library_hdf5():
    """The libhdf5 netCDF4-python's C library loads (resolved), or None; found beside the
    package without importing it into the test process."""
    spec = importlib.util.find_spec("netCDF4")
    if spec is None or not spec.submodule_search_locations:
        return None
    for directory in spec.submodule_search_locations:
        for extension in glob.glob(os.path.join(directory, "_netCDF4*.so")):
            return _libhdf5_of(extension)
    return None


@pytest.fixture
def client_runner(request, runner):
    """The runner, when the client's modules are installed and load the plugin's libhdf5."""
    client = request.param
    for module in MODULES[client]:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (the default environment has it: env/packages.txt)")
    if "netCDF4" in MODULES[client] and not runner.stand_in:
        plugin_lib = _libhdf5_of(os.path.join(runner.plugin_dir, PLUGIN_NAME))
        netcdf_lib = _netcdf_library_hdf5()
        if netcdf_lib != plugin_lib:
            pytest.skip(f"the netCDF C library loads {netcdf_lib}, the plugin {plugin_lib}: one "
                        "HDF5 per process")
    return client, runner


@pytest.mark.parametrize("client_runner", sorted(MODULES), indirect=True)
def test_netcdf_client_reads_what_native_reads(client_runner, tmp_path):
    # Served from the cache, not merely passed through: a time step read in one epoch is read
    # again in the next (or by the other worker).
    client, runner = client_runner
    check_client_reads(runner, SCRIPT, client, tmp_path, least_records=100)


@pytest.mark.parametrize("client_runner", ["netcdf4"], indirect=True)
def test_files_the_netcdf_library_writes_through_the_connector_read_as_native_ones(
        client_runner, tmp_path):
    client, runner = client_runner
    for mode in ("native", "connector"):
        runner.run([SCRIPT, "write", tmp_path / f"{mode}-written"], mode, tmp_path)
        runner.run([SCRIPT, "read", client, tmp_path / f"{mode}-written", tmp_path / f"{mode}.pkl"],
                   "native", tmp_path)
    difference = first_difference(load(tmp_path / "native.pkl"),
                                   load(tmp_path / "connector.pkl"))
    assert difference is None, difference
    # The files themselves dump alike (ncdump would need libnetcdf's tools; h5dump reads all).
    dumps = []
    for mode in ("native", "connector"):
        proc = subprocess.run(["h5dump", "-H", f"{mode}-written/era_0.nc"], cwd=tmp_path,
                              capture_output=True, text=True, env=runner.env("native"))
        assert proc.returncode == 0, proc.stderr[-2000:]
        dumps.append(proc.stdout.replace(f"{mode}-written/", ""))
    assert dumps[0] == dumps[1]

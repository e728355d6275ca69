"""PyTables and pandas' HDFStore through the connector, byte for byte against native
(voltest_pytables.py).

PyTables calls the HDF5 C API itself, with filters of its own (Blosc, Blosc2, LZO, bzip2) that
the connector cannot decode, compound tables with query indexes, big-endian and variable-length
data; pandas' HDFStore reads through it. Each client reads the same files natively and with the
connector: every value, dtype and shape must be the same, and the connector must have served
reads from its cache, not merely forwarded them all. Files PyTables writes through the
connector must read back natively as the natively written ones do.
"""

import functools
import importlib.util
import os

import pytest

from conftest import PLUGIN_NAME, _libhdf5_of
from voltest_records import first_difference, load
from voltest_support import check_client_reads, forwarded_for

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "voltest_pytables.py")
MODULES = {"pytables": ["tables"], "pandas": ["pandas", "tables"], "forked": ["tables"]}


@functools.lru_cache(maxsize=None)
def _pytables_package(runner):
    """The directory of the PyTables package the readers import (asked of a subprocess with the
    readers' path, not of this process), or None when it is not installed."""
    proc = runner.python("import os, tables; print(os.path.dirname(tables.__file__))", [],
                         "native", HERE, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _pytables_hdf5(package):
    """The libhdf5 PyTables' extension in `package` loads (resolved), or None."""
    for name in sorted(os.listdir(package)):
        if name.startswith("hdf5extension") and name.endswith(".so"):
            return _libhdf5_of(os.path.join(package, name))
    return None


@pytest.fixture
def client_runner(request, runner):
    """The runner, when the client's modules are installed and load the plugin's libhdf5."""
    client = request.param
    package = _pytables_package(runner)
    if package is None:
        pytest.skip("PyTables is not installed (the default environment has it: env/packages.txt)")
    if "pandas" in MODULES[client] and importlib.util.find_spec("pandas") is None:
        pytest.skip("pandas is not installed (the default environment has it: env/packages.txt)")
    if not runner.stand_in:
        plugin_lib = _libhdf5_of(os.path.join(runner.plugin_dir, PLUGIN_NAME))
        tables_lib = _pytables_hdf5(package)
        if tables_lib != plugin_lib:
            pytest.skip(f"PyTables loads {tables_lib}, the plugin {plugin_lib}: one HDF5 per process")
    return client, runner


@pytest.mark.parametrize("client_runner", sorted(MODULES), indirect=True)
def test_pytables_client_reads_what_native_reads(client_runner, tmp_path):
    client, runner = client_runner
    counters = check_client_reads(runner, SCRIPT, client, tmp_path, least_records=20)
    if counters is not None and client == "pytables":
        # Forwarded, and why: the big-endian array PyTables reads in native order (HDF5
        # converts it), coordinate lists (points) and the variable-length array.
        why = forwarded_for(counters)
        assert why.get("type", 0) >= 240 and why.get("selection", 0) > 0, counters
        assert why.get("dataset", 0) > 0, counters


@pytest.mark.parametrize("client_runner", ["pytables"], indirect=True)
def test_files_pytables_writes_through_the_connector_read_as_native_ones(client_runner, tmp_path):
    client, runner = client_runner
    for mode in ("native", "connector"):
        runner.run([SCRIPT, "write", tmp_path / f"{mode}-written"], mode, tmp_path)
        for reader in ("pytables", "pandas"):
            runner.run([SCRIPT, "read", reader, tmp_path / f"{mode}-written",
                        tmp_path / f"{mode}-{reader}.pkl"], "native", tmp_path)
    for reader in ("pytables", "pandas"):
        difference = first_difference(load(tmp_path / f"native-{reader}.pkl"),
                                      load(tmp_path / f"connector-{reader}.pkl"))
        assert difference is None, f"{reader}: {difference}"

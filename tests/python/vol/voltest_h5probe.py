"""Asks the HDF5 library that h5py uses which VOL connector serves an object.

h5py 3.13 has no VOL API, so this calls H5VLget_connector_name through ctypes on the very
libhdf5 that h5py's extension modules loaded (found in /proc/self/maps). A test that passes
while the connector silently failed to load is worthless; this is how tests prove it loaded.
"""

import ctypes
import re


def hdf5_library_path():
    """Path of the libhdf5 shared library mapped into this process (import h5py first): Debian's
    libhdf5_serial / libhdf5_openmpi, a plain libhdf5, or a pip wheel's libhdf5-<hash>."""
    pattern = re.compile(r"/libhdf5(_serial|_openmpi|_mpich)?(-[0-9a-f]{8})?\.so[.\d]*$")
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and pattern.search(fields[-1]):
                return fields[-1]
    raise RuntimeError("no libhdf5 is mapped into this process; import h5py first")


def _library():
    lib = ctypes.CDLL(hdf5_library_path())
    lib.H5VLget_connector_name.argtypes = [ctypes.c_int64, ctypes.c_char_p, ctypes.c_size_t]
    lib.H5VLget_connector_name.restype = ctypes.c_ssize_t
    return lib


def connector_name(hid):
    """Name of the VOL connector of an HDF5 object id (e.g. h5py.File(...).id.id)."""
    buf = ctypes.create_string_buffer(256)
    n = _library().H5VLget_connector_name(int(hid), buf, ctypes.sizeof(buf))
    if n < 0:
        raise RuntimeError(f"H5VLget_connector_name failed for id {hid}")
    return buf.value.decode()


def default_connector_name(path):
    """Creates PATH with h5py's defaults and reports the file's connector name."""
    import h5py

    with h5py.File(path, "w") as f:
        return connector_name(f.id.id)


if __name__ == "__main__":
    import sys
    import tempfile
    import os

    import h5py  # noqa: F401  (loads libhdf5)

    target = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "probe.h5")
    print(default_connector_name(target))

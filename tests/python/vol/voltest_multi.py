"""Reads several datasets in one H5Dread_multi, for the multi-dataset differential test.

    python3 voltest_multi.py write FILE
    python3 voltest_multi.py read FILE OUT.json [STATS.json]

h5py has no H5Dread_multi, so the reads go through ctypes on the very libhdf5 that h5py
loaded (ids from h5py are valid there). Each case is one H5Dread_multi call made twice (the
second finds in the cache what the first kept), in a file opened for the case. OUT records,
per case and call, a digest of every buffer, or the fact that HDF5 failed; the test compares
native and connector runs. With STATS, the counters before and after each case's two calls are
recorded too.
"""

import ctypes
import hashlib
import json
import sys

import h5py
import numpy as np

from voltest_h5probe import hdf5_library_path
from voltest_transfer import (COLS, CORRUPT_ROW, H5S_SELECT_SET, ROWS, damage_chunk, herr_t,
                              hid_t, hsize_t, hsizes)


def write(path):
    values = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS) / 7
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=values)  # contiguous
        f.create_dataset("labels", data=np.arange(ROWS, dtype=np.int64) * 3 - 50)
        f.create_dataset("z", data=values[::-1] * 2, chunks=(8, COLS), compression="gzip")
        f.create_dataset("fl", data=values + 1, chunks=(8, COLS), fletcher32=True)
    damage_chunk(path, "fl", CORRUPT_ROW)


def library():
    lib = ctypes.CDLL(hdf5_library_path())
    for name, restype, argtypes in [
        ("H5open", herr_t, []),
        ("H5Dget_space", hid_t, [hid_t]),
        ("H5Screate_simple", hid_t, [ctypes.c_int, ctypes.POINTER(hsize_t), ctypes.POINTER(hsize_t)]),
        ("H5Sselect_hyperslab", herr_t,
         [hid_t, ctypes.c_int, ctypes.POINTER(hsize_t), ctypes.POINTER(hsize_t),
          ctypes.POINTER(hsize_t), ctypes.POINTER(hsize_t)]),
        ("H5Sclose", herr_t, [hid_t]),
        ("H5Dread_multi", herr_t,
         [ctypes.c_size_t, ctypes.POINTER(hid_t), ctypes.POINTER(hid_t), ctypes.POINTER(hid_t),
          ctypes.POINTER(hid_t), hid_t, ctypes.POINTER(ctypes.c_void_p)]),
        ("H5Eset_auto2", herr_t, [hid_t, ctypes.c_void_p, ctypes.c_void_p]),
    ]:
        getattr(lib, name).restype = restype
        getattr(lib, name).argtypes = argtypes
    lib.H5open()
    lib.H5Eset_auto2(0, None, None)  # failures are part of the comparison, not noise
    return lib


def native_type(lib, name):
    return hid_t.in_dll(lib, name).value


class Part:
    """One dataset of a multi read: rows first..first+count (a stride of `step`), into memory of
    `dtype` (HDF5 converts when it is not the stored type)."""

    def __init__(self, name, first, count, dtype, step=1):
        self.name, self.first, self.count, self.dtype, self.step = name, first, count, dtype, step


def cases():
    f32, i64, i32 = np.float32, np.int64, np.int32
    return {
        # Every dataset servable: a sample, its label and a compressed field beside it.
        "all_servable": [Part("x", 8, 16, f32), Part("labels", 8, 16, i64), Part("z", 8, 16, f32)],
        # One of three converted by HDF5 (labels into int32): the other two are served.
        "one_converted": [Part("x", 0, 16, f32), Part("labels", 0, 16, i32),
                          Part("z", 40, 8, f32, step=2)],
        # The same dataset twice, overlapping rows, into two buffers.
        "same_dataset_twice": [Part("x", 0, 8, f32), Part("x", 4, 8, f32)],
        # The forwarded dataset fails (a damaged chunk): the whole call fails, as natively.
        "forwarded_fails": [Part("x", 20, 4, f32), Part("fl", CORRUPT_ROW, 4, f32)],
        # Everything forwarded (both converted): one call of two datasets underneath.
        "all_converted": [Part("x", 0, 4, np.float64), Part("labels", 4, 4, i32)],
    }


def memory_type(lib, dtype):
    return native_type(lib, {np.float32: "H5T_NATIVE_FLOAT_g", np.float64: "H5T_NATIVE_DOUBLE_g",
                             np.int64: "H5T_NATIVE_LLONG_g", np.int32: "H5T_NATIVE_INT_g"}[dtype])


def read_multi(lib, f, parts):
    """One H5Dread_multi of `parts`: a digest per buffer, or 'error'."""
    n = len(parts)
    dsets, types = (hid_t * n)(), (hid_t * n)()
    mem_spaces, file_spaces = (hid_t * n)(), (hid_t * n)()
    bufs, arrays = (ctypes.c_void_p * n)(), []
    opened = []  # h5py closes a dataset's id with its last reference: kept until the call is done
    for i, part in enumerate(parts):
        dset = f[part.name]
        opened.append(dset)
        shape = (part.count,) + dset.shape[1:]
        array = np.zeros(shape, dtype=part.dtype)
        arrays.append(array)
        dsets[i] = dset.id.id
        types[i] = memory_type(lib, part.dtype)
        file_spaces[i] = lib.H5Dget_space(dset.id.id)
        start = hsizes(part.first, *([0] * (len(shape) - 1)))
        stride = hsizes(part.step, *([1] * (len(shape) - 1)))
        lib.H5Sselect_hyperslab(file_spaces[i], H5S_SELECT_SET, start, stride,
                                hsizes(part.count, *([1] * (len(shape) - 1))),
                                hsizes(1, *shape[1:]))
        mem_spaces[i] = lib.H5Screate_simple(len(shape), hsizes(*shape), None)
        bufs[i] = array.ctypes.data
    status = lib.H5Dread_multi(n, dsets, types, mem_spaces, file_spaces, 0, bufs)
    for i in range(n):
        lib.H5Sclose(mem_spaces[i])
        lib.H5Sclose(file_spaces[i])
    if status < 0:
        return "error"
    return [hashlib.sha256(a.tobytes()).hexdigest() for a in arrays]


def load_stats(stats_path):
    try:
        with open(stats_path) as s:
            return json.load(s)
    except (TypeError, FileNotFoundError):  # no STATS, or none written yet
        return None


def read(path, out, stats_path=None):
    lib = library()
    results = {}
    for name, parts in cases().items():
        with h5py.File(path, "r") as f:
            before = load_stats(stats_path)
            record = {"calls": [read_multi(lib, f, parts) for _ in range(2)]}
            if stats_path:
                record["stats_before"], record["stats"] = before, load_stats(stats_path)
            # The same rows read one dataset at a time through h5py, for the test to check
            # that the multi read returned them.
            singles = []
            for part in parts:
                try:
                    rows = f[part.name][part.first:part.first + part.count * part.step:part.step]
                    singles.append(hashlib.sha256(rows.astype(part.dtype).tobytes()).hexdigest())
                except OSError:
                    singles.append("error")
            record["singles"] = singles
        results[name] = record
    with open(out, "w") as o:
        json.dump(results, o)


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        read(*sys.argv[2:])

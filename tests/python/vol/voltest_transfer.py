"""Reads through HDF5's C API with dataset transfer property lists, for the dxpl differential test.

    python3 voltest_transfer.py write FILE
    python3 voltest_transfer.py read FILE OUT.json [STATS.json]

h5py exposes few transfer properties, so the reads go through ctypes on the very libhdf5
that h5py loaded (ids from h5py are valid there). Each case reads rows 8..24 of a dataset:
first with the default list (which puts the rows in Prescient's cache), then twice with a
list carrying the property (a cache hit if Prescient ignored it). OUT records, per case and
read, a digest of the bytes or the fact that HDF5 failed; the test compares native and
connector runs. With STATS, the counters after each case are recorded too.
"""

import ctypes
import hashlib
import json
import sys

import h5py
import numpy as np

from voltest_h5probe import hdf5_library_path

ROWS, COLS = 64, 16
FIRST, COUNT = 8, 16
CORRUPT_ROW = 16  # a row of the fletcher32 dataset whose chunk is damaged on disk

hid_t = ctypes.c_int64
herr_t = ctypes.c_int
hsize_t = ctypes.c_ulonglong
CONV_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, hid_t, hid_t, ctypes.c_void_p,
                           ctypes.c_void_p, ctypes.c_void_p)
FILTER_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                             ctypes.c_void_p)
H5S_SELECT_SET = 0
H5S_PLIST = 2
H5Z_DISABLE_EDC = 0
H5Z_CB_CONT = 1
H5T_CONV_UNHANDLED = 0


def write(path):
    values = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS) / 7
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=values)
        f.create_dataset("fl", data=values, chunks=(8, COLS), fletcher32=True)
    damage_chunk(path, "fl", CORRUPT_ROW)


def damage_chunk(path, name, row):
    """Flips one stored byte of the chunk of 2-D dataset `name` (chunks of 8 rows) that holds
    `row`: its Fletcher-32 checksum then fails."""
    with h5py.File(path, "r") as f:
        info = f[name].id.get_chunk_info_by_coord((row // 8 * 8, 0))
    with open(path, "r+b") as raw:
        raw.seek(info.byte_offset + 5)
        byte = raw.read(1)[0]
        raw.seek(info.byte_offset + 5)
        raw.write(bytes([byte ^ 0xFF]))


def library():
    lib = ctypes.CDLL(hdf5_library_path())
    for name, restype, argtypes in [
        ("H5open", herr_t, []),
        ("H5Pcreate", hid_t, [hid_t]),
        ("H5Pclose", herr_t, [hid_t]),
        ("H5Pset_data_transform", herr_t, [hid_t, ctypes.c_char_p]),
        ("H5Pset_type_conv_cb", herr_t, [hid_t, CONV_CB, ctypes.c_void_p]),
        ("H5Pset_filter_callback", herr_t, [hid_t, FILTER_CB, ctypes.c_void_p]),
        ("H5Pset_edc_check", herr_t, [hid_t, ctypes.c_int]),
        ("H5Pset_buffer", herr_t, [hid_t, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p]),
        ("H5Pset_hyper_vector_size", herr_t, [hid_t, ctypes.c_size_t]),
        ("H5Pset_btree_ratios", herr_t, [hid_t, ctypes.c_double, ctypes.c_double, ctypes.c_double]),
        ("H5Pset_dataset_io_hyperslab_selection", herr_t,
         [hid_t, ctypes.c_uint, ctypes.c_int, ctypes.POINTER(hsize_t), ctypes.POINTER(hsize_t),
          ctypes.POINTER(hsize_t), ctypes.POINTER(hsize_t)]),
        ("H5Screate_simple", hid_t, [ctypes.c_int, ctypes.POINTER(hsize_t), ctypes.POINTER(hsize_t)]),
        ("H5Sselect_hyperslab", herr_t,
         [hid_t, ctypes.c_int, ctypes.POINTER(hsize_t), ctypes.POINTER(hsize_t),
          ctypes.POINTER(hsize_t), ctypes.POINTER(hsize_t)]),
        ("H5Sclose", herr_t, [hid_t]),
        ("H5Dread", herr_t, [hid_t, hid_t, hid_t, hid_t, hid_t, ctypes.c_void_p]),
        ("H5Eset_auto2", herr_t, [hid_t, ctypes.c_void_p, ctypes.c_void_p]),
    ]:
        getattr(lib, name).restype = restype
        getattr(lib, name).argtypes = argtypes
    lib.H5open()
    lib.H5Eset_auto2(0, None, None)  # failures are part of the comparison, not noise
    return lib


def hsizes(*values):
    return (hsize_t * len(values))(*values)


class Reader:
    def __init__(self, lib, dset):
        self.lib, self.dset = lib, dset
        self.dxpl_class = hid_t.in_dll(lib, "H5P_CLS_DATASET_XFER_ID_g").value
        self.float_type = hid_t.in_dll(lib, "H5T_NATIVE_FLOAT_g").value
        self.callbacks = []  # ctypes callbacks must outlive the lists that hold them

    def dxpl(self, setup=None):
        plist = self.lib.H5Pcreate(self.dxpl_class)
        if setup:
            setup(plist)
        return plist

    def read(self, dxpl, plist_selection=False):
        """Rows FIRST..FIRST+COUNT: digest of the bytes, or 'error'."""
        buf = np.zeros((COUNT, COLS), dtype=np.float32)
        mem = self.lib.H5Screate_simple(2, hsizes(COUNT, COLS), None)
        if plist_selection:
            file_space = H5S_PLIST
        else:
            file_space = self.lib.H5Screate_simple(2, hsizes(ROWS, COLS), None)
            self.lib.H5Sselect_hyperslab(file_space, H5S_SELECT_SET, hsizes(FIRST, 0), None,
                                         hsizes(COUNT, COLS), None)
        status = self.lib.H5Dread(self.dset, self.float_type, mem, file_space, dxpl,
                                  buf.ctypes.data_as(ctypes.c_void_p))
        self.lib.H5Sclose(mem)
        if not plist_selection:
            self.lib.H5Sclose(file_space)
        if status < 0:
            return "error"
        return hashlib.sha256(buf.tobytes()).hexdigest()


def cases(lib, reader):
    """name -> (dataset, setup function for the list, reads through H5S_PLIST?)."""
    conv = CONV_CB(lambda *args: H5T_CONV_UNHANDLED)
    filt = FILTER_CB(lambda *args: H5Z_CB_CONT)
    reader.callbacks += [conv, filt]
    return {
        "data_transform": ("x", lambda p: lib.H5Pset_data_transform(p, b"2*x+1"), False),
        "type_conv_cb": ("x", lambda p: lib.H5Pset_type_conv_cb(p, conv, None), False),
        "filter_callback": ("fl", lambda p: lib.H5Pset_filter_callback(p, filt, None), False),
        "checksums_off": ("fl", lambda p: lib.H5Pset_edc_check(p, H5Z_DISABLE_EDC), False),
        "plist_selection": ("x", lambda p: lib.H5Pset_dataset_io_hyperslab_selection(
            p, 2, H5S_SELECT_SET, hsizes(FIRST, 0), None, hsizes(COUNT, COLS), None), True),
        # Properties that change how HDF5 works, not the bytes: served from the cache.
        "harmless": ("x", lambda p: (lib.H5Pset_buffer(p, 1 << 20, None, None),
                                     lib.H5Pset_hyper_vector_size(p, 4096),
                                     lib.H5Pset_btree_ratios(p, 0.2, 0.5, 0.8)), False),
    }


def read(path, out, stats_path=None):
    lib = library()
    results = {}
    for name, (dataset, setup, plist_selection) in cases(lib, Reader(lib, 0)).items():
        # A file of its own per case: HDF5's chunk cache must not carry a chunk decoded
        # under one case's list into the next case.
        with h5py.File(path, "r") as f:
            dset = f[dataset]  # keeps the id open while it is used through ctypes
            reader = Reader(lib, dset.id.id)
            default = reader.dxpl()
            special = reader.dxpl(setup)
            record = {"default": reader.read(default),
                      "property": [reader.read(special, plist_selection) for _ in range(2)]}
            lib.H5Pclose(default)
            lib.H5Pclose(special)
        if stats_path:
            with open(stats_path) as s:
                record["stats"] = json.load(s)
        results[name] = record
    with open(out, "w") as o:
        json.dump(results, o)


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        read(*sys.argv[2:])

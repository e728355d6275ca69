"""Chunks of hdf5plugin's filters, as `pip install h5py hdf5plugin` users write and read them.

    python wheeltest_hdf5plugin.py FILE --make N
    python wheeltest_hdf5plugin.py FILE OUT.json [--epochs E] [--seed S]

hdf5plugin registers its filters (its own builds of Zstandard, Blosc2, Blosc, bitshuffle, LZ4,
bzip2) with the HDF5 library h5py loaded, here the pip wheel's. Every dataset of FILE is read
one sample at a time in a shuffled order, then as one slice crossing chunks, every epoch; OUT.json
holds a digest per dataset and epoch, the HDF5 library and the connector serving the file.
"""

import argparse
import hashlib
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "vol"))


def filters():
    """Dataset name -> (hdf5plugin filter, dtype, chunk shape): every filter the connector
    decodes itself, with settings users pick (codecs, shuffles, levels), and chunks of one
    sample, of several, and of part of one."""
    import hdf5plugin as p

    return {
        "zstd": (p.Zstd(clevel=3), "<f4", (1, 16, 64)),
        "blosc2-lz4-shuffle": (p.Blosc2(cname="lz4", clevel=5, filters=p.Blosc2.SHUFFLE), "<f4",
                               (4, 16, 64)),
        "blosc2-zstd-bitshuffle": (p.Blosc2(cname="zstd", clevel=3, filters=p.Blosc2.BITSHUFFLE),
                                   "<i2", (3, 8, 64)),
        "blosc2-blosclz-noshuffle": (p.Blosc2(cname="blosclz", clevel=9,
                                              filters=p.Blosc2.NOFILTER), "<f8", (1, 16, 64)),
        "blosc-zstd-bitshuffle": (p.Blosc(cname="zstd", clevel=5, shuffle=p.Blosc.BITSHUFFLE),
                                  "<f4", (2, 16, 64)),
        "bitshuffle-lz4": (p.Bitshuffle(cname="lz4"), "<f4", (1, 16, 64)),
        "bitshuffle-zstd": (p.Bitshuffle(cname="zstd", clevel=3), "<u2", (5, 16, 64)),
        "lz4": (p.LZ4(), "<f4", (1, 16, 64)),
        "bzip2": (p.BZip2(blocksize=9), "<f4", (2, 16, 64)),
    }


def make(path, n):
    import h5py

    rng = np.random.default_rng(5)
    # Small integers: data a compressor shrinks, as detector counts are.
    counts = rng.poisson(3.0, (n, 16, 64))
    with h5py.File(path, "w") as f:
        for name, (compression, dtype, chunks) in filters().items():
            f.create_dataset(name, data=counts.astype(dtype), chunks=chunks, **compression)
        f.create_dataset("labels", data=rng.integers(0, 10, n).astype("<i8"))


def digest(h, a):
    a = np.asarray(a)
    h.update(f"{a.dtype.str}{a.shape}".encode())
    h.update(np.ascontiguousarray(a).tobytes())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("out", nargs="?")
    parser.add_argument("--make", type=int)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=9)
    args = parser.parse_args()
    import h5py
    import hdf5plugin

    if args.make:
        make(args.file, args.make)
        return
    import voltest_h5probe

    out = {"hdf5": h5py.version.hdf5_version, "hdf5plugin": hdf5plugin.version,
           "libhdf5": voltest_h5probe.hdf5_library_path(), "digests": {}}
    rng = np.random.default_rng(args.seed)
    with h5py.File(args.file, "r") as f:
        out["connector"] = voltest_h5probe.connector_name(f.id.id)
        names = sorted(filters())
        n = f["labels"].shape[0]
        for epoch in range(args.epochs):
            order = rng.permutation(n)
            for name in names:
                h = hashlib.sha1()
                for i in order:
                    digest(h, f[name][i])
                    digest(h, f["labels"][i])
                digest(h, f[name][n // 3: n // 3 + 7])
                out["digests"][f"{epoch}/{name}"] = h.hexdigest()
    with open(args.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()

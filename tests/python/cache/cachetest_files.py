"""Test files for the node-cache tests: several HDF5 files, each with datasets of every storage
kind the cache serves (contiguous, chunked, gzip, shuffle+gzip, fletcher32) and kinds it must
forward (scalar, vlen strings) or may (compound rows, read whole through h5py's slow path or a
field at a time).

Run as a script (natively, never with the connector) to write the files:
    python3 cachetest_files.py DIR [--seed S] [--variant V]
--variant changes every value (same shapes, same layout, same file sizes): it is how the
stale-data test rewrites a file between runs.
"""

import argparse
import os

import numpy as np

# name -> (dtype, row shape, creation keywords). Chunk shapes split inner dimensions and do not
# divide the extents, so edge chunks are partial along every dimension.
NUMERIC = {
    "cont_f4": ("<f4", (3, 5), {}),
    "cont_be_f8": (">f8", (2, 2), {}),
    "cont_u1": ("u1", (), {}),
    "chunk_f8": ("<f8", (7,), {"chunks": (4, 3)}),
    "chunk_i8_1d": ("<i8", (), {"chunks": (64,), "compression": "gzip"}),
    "gzip_i2": ("<i2", (6, 4), {"chunks": (5, 6, 4), "compression": "gzip", "compression_opts": 4}),
    "gzip_u1": ("u1", (33,), {"chunks": (7, 16), "compression": "gzip", "compression_opts": 1}),
    "shufgz_be_i4": (">i4", (10,), {"chunks": (3, 4), "shuffle": True, "compression": "gzip"}),
    "fletcher_f4": ("<f4", (4,), {"chunks": (6, 4), "fletcher32": True}),
    # Chunks never written read as the fill value (no storage behind them).
    "sparse_i4": ("<i4", (5,), {"chunks": (6, 2), "compression": "gzip", "fillvalue": 12345,
                                "sparse": True}),
}

# file name -> number of rows of its numeric datasets.
FILES = {"a.h5": 1000, "b.h5": 257, "c.h5": 61}

# Datasets every read must forward, or that h5py reads through its slow path (compound rows,
# whose fields the connector may serve).
FORWARD_ONLY = ("scal", "comp", "vstr")


def _values(rng, dtype, shape):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        # A few distinct values per row: compressible, but every row differs.
        base = rng.integers(-1000, 1000, size=shape).astype(dt)
        return (base / 8).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -30000), min(info.max, 30000) + 1, size=shape,
                        dtype=dt.newbyteorder("=")).astype(dt)


def write_file(path, rows, seed):
    import h5py

    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        for name, (dtype, row_shape, kwargs) in NUMERIC.items():
            shape = (rows, *row_shape)
            kwargs = dict(kwargs)
            if "chunks" in kwargs:  # h5py refuses chunks larger than a fixed extent
                kwargs["chunks"] = tuple(min(c, s) for c, s in zip(kwargs["chunks"], shape))
            values = _values(rng, dtype, shape)
            if kwargs.pop("sparse", False):
                ds = f.create_dataset(name, shape=shape, dtype=dtype, **kwargs)
                ds[: rows // 3] = values[: rows // 3]  # the first third, then scattered rows
                for r in range(rows // 2, rows, 17):
                    ds[r, 1:3] = values[r, 1:3]
            else:
                f.create_dataset(name, data=values, **kwargs)
        f["scal"] = np.float64(rng.random())
        comp_t = np.dtype([("a", "<i4"), ("b", "<f8"), ("c", "S4")])
        comp = np.zeros(rows, comp_t)
        comp["a"] = rng.integers(0, 1 << 30, rows)
        comp["b"] = rng.random(rows)
        comp["c"] = [b"r%03d" % (i % 1000) for i in range(rows)]
        f["comp"] = comp
        f.create_dataset("vstr", data=[f"s{seed}-{i}-" + "x" * (i % 7) for i in range(rows)],
                         dtype=h5py.string_dtype())


# Datasets whose storage has a fixed size: rewriting their values in place keeps the file's size.
IN_PLACE = ("cont_f4", "cont_be_f8", "cont_u1", "chunk_f8", "fletcher_f4")


def rewrite_in_place(path, seed):
    """New values for the IN_PLACE datasets, written with h5py 'r+': same path, inode, size and
    layout; only the contents and the modification time change."""
    import h5py

    rng = np.random.default_rng(seed)
    with h5py.File(path, "r+") as f:
        for name in IN_PLACE:
            ds = f[name]
            ds[...] = _values(rng, ds.dtype, ds.shape)


def write_all(directory, seed=0, variant=0):
    os.makedirs(directory, exist_ok=True)
    for k, (name, rows) in enumerate(sorted(FILES.items())):
        write_file(os.path.join(directory, name), rows, seed * 1000 + k * 10 + variant * 7919)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variant", type=int, default=0)
    parser.add_argument("--only", help="write only this file name")
    parser.add_argument("--in-place", action="store_true",
                        help="with --only: rewrite the fixed-size datasets of an existing file")
    args = parser.parse_args()
    if args.only and args.in_place:
        rewrite_in_place(os.path.join(args.directory, args.only), args.seed * 1000 + args.variant)
    elif args.only:
        k = sorted(FILES).index(args.only)
        write_file(os.path.join(args.directory, args.only), FILES[args.only],
                   args.seed * 1000 + k * 10 + args.variant * 7919)
    else:
        write_all(args.directory, args.seed, args.variant)


if __name__ == "__main__":
    main()

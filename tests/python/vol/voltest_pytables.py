"""Reads HDF5 files through PyTables and pandas, for the PyTables differential test.

    python3 voltest_pytables.py write DIR
    python3 voltest_pytables.py read CLIENT DIR OUT.pkl      CLIENT: pytables | pandas | forked

PyTables (and pandas' HDFStore, built on it) calls the HDF5 C API itself, not through h5py, and
stores data its own ways: arrays chunked and compressed by its own filters (Blosc, Blosc2, LZO,
bzip2, registered by PyTables with HDF5 at import), tables of compound rows with a column index
(an OPSI index: datasets of its own, read by queries), extendable and variable-length arrays,
big-endian data, and pandas' frames as tables or as fixed blocks. DIR gets one file of each
kind, written by PyTables; the readers read them as loaders and analysis codes do: samples one
at a time in a new random order each epoch, windows, coordinate lists, queries, iterators.
OUT records, per read, a digest of the values with their dtype and shape (voltest_records.py);
the test compares the native and connector runs. `forked` reads as a DataLoader's forked
workers do, through a file the parent opened.
"""

import os
import sys

import numpy as np

from voltest_records import in_forked_workers, script_main

SAMPLES, SIDE = 240, 24
FILTERS = ("zlib", "shuffle", "fletcher32", "blosc", "blosc2", "blosc2:zstd", "lzo", "bzip2",
           "none")


def _filters(name):
    import tables

    if name == "none":
        return None
    if name == "shuffle":
        return tables.Filters(complevel=3, complib="zlib", shuffle=True)
    if name == "fletcher32":
        return tables.Filters(complevel=1, complib="zlib", fletcher32=True)
    return tables.Filters(complevel=5, complib=name)


def write(directory):
    import pandas as pd
    import tables

    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(21)
    shape = (SAMPLES, SIDE, SIDE)
    with tables.open_file(os.path.join(directory, "samples.h5"), "w") as f:
        f.create_array("/", "images", rng.standard_normal(shape, dtype=np.float32))
        f.create_array("/", "big_endian", rng.standard_normal(shape).astype(">f8"))
        arrays = f.create_group("/", "chunked")
        for name in FILTERS:
            # Chunks of 6 samples, the last one partial: a sample read alone decodes its chunk.
            c = f.create_carray(arrays, name.replace(":", "_"), tables.Float32Atom(), shape,
                                filters=_filters(name), chunkshape=(6, SIDE, SIDE))
            c[:] = rng.standard_normal(shape, dtype=np.float32)
        grow = f.create_earray("/", "grow", tables.Int64Atom(), (0, 16), chunkshape=(64, 16))
        for k in range(7):  # appended in pieces, as a writer of a growing record does
            grow.append(np.arange(k * 1600, (k + 1) * 1600, dtype=np.int64).reshape(100, 16))

        class Label(tables.IsDescription):
            index = tables.Int64Col(pos=0)
            target = tables.Float64Col(shape=(4,), pos=1)
            name = tables.StringCol(16, pos=2)
            weight = tables.Float32Col(pos=3)

        labels = f.create_table("/", "labels", Label, filters=tables.Filters(1, "zlib"),
                                chunkshape=(50,))
        row = labels.row
        for i in range(SAMPLES * 4):
            row["index"] = (i * 7919) % (SAMPLES * 4)
            row["target"] = rng.standard_normal(4)
            row["name"] = f"sample-{i}".encode()
            row["weight"] = i * 0.25
            row.append()
        labels.flush()
        labels.cols.index.create_index()
        ragged = f.create_vlarray("/", "ragged", tables.Int32Atom())
        for i in range(SAMPLES):
            ragged.append(np.arange(i % 23, dtype=np.int32) * i)
    frame = pd.DataFrame({"x": rng.standard_normal(4000), "k": rng.integers(0, 50, 4000),
                          "tag": [f"t{i % 97}" for i in range(4000)]})
    frame.to_hdf(os.path.join(directory, "frame_table.h5"), key="frame", format="table",
                 data_columns=["k"], complevel=1)
    frame.to_hdf(os.path.join(directory, "frame_fixed.h5"), key="frame", format="fixed")


def _epochs(seed, epochs=2):
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        yield [int(i) for i in rng.permutation(SAMPLES)]


def read_pytables(directory, rec):
    import tables

    with tables.open_file(os.path.join(directory, "samples.h5"), "r") as f:
        chunked = [f.get_node("/chunked", name.replace(":", "_")) for name in FILTERS]
        for epoch in _epochs(3):
            for k, i in enumerate(epoch[:120]):  # a sample and its label, one at a time
                rec.add(f"images[{i}]", f.root.images[i])
                rec.add(f"big_endian[{i}]", f.root.big_endian[i])
                rec.add(f"labels[{i}]", f.root.labels[i])
                array = chunked[k % len(chunked)]
                rec.add(f"{array.name}[{i}]", array[i])
                if k % 15 == 0:  # windows, strides, coordinates
                    rec.add("images window", f.root.images[i // 2:i // 2 + 9, 3:20:4])
                    rec.add(f"{array.name} window", array[i // 3:i // 3 + 13, ::5, 2])
                    rec.add("labels coordinates",
                            f.root.labels.read_coordinates([i, 3 * i, 5, SAMPLES * 4 - 1]))
                    rec.add("grow window", f.root.grow[i:i * 2 + 5:3])
        rec.add("images whole", f.root.images.read())
        for array in chunked:
            rec.add(f"{array.name} whole", array.read())
        rec.add("labels query", f.root.labels.read_where("(index > 100) & (index < 900)"))
        rec.add("labels query on the index", f.root.labels.read_where("index == 400"))
        rec.add("labels column", f.root.labels.col("weight"))
        rec.add("labels rows iterated",
                [r["target"].tolist() for r in f.root.labels.iterrows(7, 900, 11)])
        rec.add("ragged", repr([x.tolist() for x in f.root.ragged[5:200:3]]))


def read_pandas(directory, rec):
    import pandas as pd

    table = os.path.join(directory, "frame_table.h5")
    for _ in range(2):  # the second pass finds the rows cached
        rec.add("table", pd.read_hdf(table, "frame").to_numpy())
        rec.add("table where", pd.read_hdf(table, "frame", where="k < 20").to_numpy())
        rec.add("fixed", pd.read_hdf(os.path.join(directory, "frame_fixed.h5"), "frame").to_numpy())
        with pd.HDFStore(table, "r") as store:
            rec.add("select window", store.select("frame", start=123, stop=2900).to_numpy())
            for piece in store.select("frame", chunksize=700):
                rec.add("select chunk", piece.to_numpy())
            rec.add("select column", store.select_column("frame", "k").to_numpy())


def read_forked(directory, rec):
    """As a DataLoader over a PyTables file opened in the training process: forked workers read
    the samples through the inherited handle and leave with os._exit."""
    import tables

    with tables.open_file(os.path.join(directory, "samples.h5"), "r") as f:
        rec.add("parent images[0]", f.root.images[0])
        blosc2 = f.get_node("/chunked/blosc2")
        order = [i for epoch in _epochs(6) for i in epoch[:80]]

        def read_sample(mine, i):
            mine.add(f"worker images[{i}]", f.root.images[i])
            mine.add(f"worker blosc2[{i}]", blosc2[i])
            mine.add(f"worker labels[{i}]", f.root.labels[i])

        in_forked_workers(rec, directory, order, read_sample)
        rec.add("parent after the workers", f.root.images[5:9])


READERS = {"pytables": read_pytables, "pandas": read_pandas, "forked": read_forked}


if __name__ == "__main__":
    sys.exit(script_main(sys.argv, write, READERS))

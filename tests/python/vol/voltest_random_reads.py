"""Random datasets read in random ways, for test_vol_random_reads.py.

    python3 voltest_random_reads.py write FILE SEED
    python3 voltest_random_reads.py read FILE SEED OUT.pkl

`write` makes one dataset per storage kind below (contiguous, compact, chunked without
filters, gzip, shuffle+gzip, lzf, Fletcher-32, scale-offset, n-bit, chunks never written,
resizable), each with a shape, a stored type (little- and big-endian integers and floats,
complex, compound) and chunk sizes drawn from SEED. `read` draws, from SEED too, thirty reads
of each dataset (single rows, slices with steps, sorted index lists, masks, parts of rows,
`read_direct`, `astype`, compound fields, `[()]`), makes them in a shuffled order twice (the
second time the cache may serve them), then once more in a forked child (a DataLoader worker
inherits the parent's connector), and pickles what each returned: dtype, shape and bytes, or
the exception's type and message. The same SEED gives the same reads natively and through
the connector, so the two pickles must be equal.
"""

import os
import pickle
import sys

import h5py
import numpy as np

from voltest_scenarios import canonical  # dtype, shape and bytes of what h5py returned

STORAGE = ("contiguous", "compact", "chunked", "gzip", "shuffle-gzip", "lzf", "fletcher32",
           "scaleoffset", "nbit", "unwritten", "resizable")
TYPES = ("<f4", ">f4", "<f8", ">f8", "<i2", ">i8", "u1", "<u4", "<i4", "<c8", "compound")
READS_PER_DATASET = 30


def compound_type():
    return np.dtype([("a", "<i4"), ("b", ">f8"), ("c", "S3")])


def dataset_specs(seed):
    rng = np.random.default_rng(seed)
    specs = []
    for storage in STORAGE:
        rows = int(rng.integers(1, 300))
        inner = tuple(int(x) for x in rng.integers(1, 9, size=int(rng.integers(0, 3))))
        dtype = str(rng.choice(TYPES))
        if storage == "scaleoffset" and dtype in ("compound", "<c8"):
            dtype = "<i4"  # scale-offset takes integers and floats only
        if storage == "nbit":
            dtype = "<i4"  # stored with fewer significant bits (below)
        if storage == "compact":
            rows = min(rows, 40)  # a compact dataset lives in its 64 KiB object header
        shape = (rows,) + inner
        chunks = tuple(int(rng.integers(1, s + 1)) for s in shape)
        specs.append({"name": storage, "shape": shape, "dtype": dtype, "chunks": chunks})
    return specs


def values(spec, rng):
    shape = spec["shape"]
    if spec["dtype"] == "compound":
        v = np.zeros(shape, dtype=compound_type())
        v["a"] = rng.integers(-1000, 1000, size=shape)
        v["b"] = rng.standard_normal(shape)
        v["c"] = b"xyz"
        return v
    dt = np.dtype(spec["dtype"])
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if spec["name"] == "nbit":
        return rng.integers(0, 1 << 19, size=shape).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -50000), min(info.max, 50000), size=shape).astype(dt)


def create_low_level(f, spec, v, dcpl, tid):
    space = h5py.h5s.create_simple(v.shape)
    h5py.h5d.create(f.id, spec["name"].encode(), tid, space, dcpl=dcpl)
    f[spec["name"]][...] = v


def write(path, seed):
    rng = np.random.default_rng(seed + 1)
    with h5py.File(path, "w") as f:
        for spec in dataset_specs(seed):
            v = values(spec, rng)
            # A dataset is named after its storage kind.
            name = storage = spec["name"]
            chunks = spec["chunks"]
            if storage == "contiguous":
                f.create_dataset(name, data=v)
            elif storage == "compact":
                dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
                dcpl.set_layout(h5py.h5d.COMPACT)
                create_low_level(f, spec, v, dcpl, h5py.h5t.py_create(v.dtype, logical=True))
            elif storage == "nbit":
                dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
                dcpl.set_chunk(chunks)
                dcpl.set_filter(h5py.h5z.FILTER_NBIT)
                tid = h5py.h5t.STD_I32LE.copy()
                tid.set_precision(20)
                create_low_level(f, spec, v, dcpl, tid)
            elif storage == "unwritten":  # half the rows written: the other chunks hold the fill value
                d = f.create_dataset(name, shape=v.shape, dtype=v.dtype, chunks=chunks,
                                     compression="gzip", fillvalue=np.zeros((), v.dtype))
                d[: max(1, v.shape[0] // 2)] = v[: max(1, v.shape[0] // 2)]
            elif storage == "resizable":  # grown row by row to its size
                d = f.create_dataset(name, shape=(0,) + v.shape[1:], maxshape=(None,) + v.shape[1:],
                                     dtype=v.dtype, chunks=chunks)
                for begin in range(0, v.shape[0], 37):
                    d.resize(min(v.shape[0], begin + 37), axis=0)
                    d[begin:begin + 37] = v[begin:begin + 37]
            else:
                filters = {"chunked": {}, "gzip": {"compression": "gzip"},
                           "shuffle-gzip": {"compression": "gzip", "shuffle": True},
                           "lzf": {"compression": "lzf"}, "fletcher32": {"fletcher32": True},
                           "scaleoffset": {"scaleoffset": 0 if v.dtype.kind in "iu" else 3}}
                f.create_dataset(name, data=v, chunks=chunks, **filters[storage])


def random_reads(d, rng):
    """[(description, thunk)] for dataset d."""
    shape, rows = d.shape, d.shape[0]
    plain = d.dtype.names is None
    out = []
    while len(out) < READS_PER_DATASET:
        kind = int(rng.integers(0, 12))
        i = int(rng.integers(0, rows))
        if kind == 0:
            out.append((f"[{i}]", lambda i=i: d[i]))
        elif kind == 1:
            a = int(rng.integers(0, rows))
            b, step = int(rng.integers(a, rows + 1)), int(rng.integers(1, 4))
            out.append((f"[{a}:{b}:{step}]", lambda a=a, b=b, s=step: d[a:b:s]))
        elif kind == 2:
            picks = sorted({int(x) for x in rng.integers(0, rows, size=int(rng.integers(1, 20)))})
            out.append((f"[{picks}]", lambda p=picks: d[p]))
        elif kind == 3:
            mask = rng.random(rows) < 0.3
            out.append(("[mask]", lambda m=mask: d[m]))
        elif kind == 4 and len(shape) > 1:
            j = int(rng.integers(0, shape[1]))
            out.append((f"[{i}, {j}]", lambda i=i, j=j: d[i, j]))
        elif kind == 5 and len(shape) > 1:
            picks = sorted({int(x) for x in rng.integers(0, rows, size=int(rng.integers(1, 10)))})
            a = int(rng.integers(0, shape[1]))
            b = int(rng.integers(a + 1, shape[1] + 1))
            out.append((f"[{picks}, {a}:{b}]", lambda p=picks, a=a, b=b: d[p, a:b]))
        elif kind == 6:
            out.append(("[()]", lambda: d[()]))
        elif kind == 7:
            def direct(i=i):
                buf = np.empty(shape[1:], dtype=d.dtype)
                buf.reshape(-1).view(np.uint8)[...] = 0x5A  # a byte left unwritten shows
                d.read_direct(buf, np.s_[i], np.s_[...])
                return buf
            out.append((f"read_direct [{i}]", direct))
        elif kind == 8 and plain and d.dtype.kind in "iuf":
            out.append((f"astype(f8)[{i}]", lambda i=i: d.astype("f8")[i]))
        elif kind == 9 and not plain:
            out.append((f"fields(a)[{i}]", lambda i=i: d.fields("a")[i]))
        elif kind == 10:
            out.append((f"[{i}:{i + 1}]", lambda i=i: d[i:i + 1]))
        elif kind == 11 and len(shape) > 1:
            out.append((f"[{i}, ..., -1]", lambda i=i: d[i, ..., -1]))
    return out


def outcome(thunk):
    try:
        return canonical(thunk())
    except Exception as err:  # noqa: BLE001 - the exception itself is the outcome
        return ("exception", type(err).__name__, str(err))


def read(path, seed, out):
    rng = np.random.default_rng(seed + 2)
    records = []
    with h5py.File(path, "r") as f:
        plan = [(name, desc, thunk) for name in sorted(f)
                for desc, thunk in random_reads(f[name], rng)]
        order = rng.permutation(len(plan))
        for attempt in ("first", "again"):
            records += [(attempt, plan[k][0], plan[k][1], outcome(plan[k][2])) for k in order]
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # a forked worker: the parent's open file, its own reads
            try:
                os.close(read_end)
                child = [("forked child", plan[k][0], plan[k][1], outcome(plan[k][2]))
                         for k in order[::-1]]
                with os.fdopen(write_end, "wb") as pipe:
                    pipe.write(pickle.dumps(child))
            finally:
                os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            records += pickle.loads(pipe.read())
        _, status = os.waitpid(pid, 0)
        records.append(("forked child", "exit status", "", status))
    with open(out, "wb") as f:
        pickle.dump(records, f)


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "read":
        read(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        sys.exit(f"unknown command {sys.argv[1]!r} (write or read)")

"""Random h5py reads over the files of cachetest_files.py, and a script that performs them.

make_plan() draws a deterministic list of operations (reads of every shape h5py 3.13 issues,
plus file reopenings). The script performs a plan, one or more passes, and writes per read a
digest of what h5py returned (dtype, shape, bytes; or the exception), so that a native run and
a connector run can be compared read by read:

    python3 cachetest_reads.py DIR PLAN.json OUT.json [--passes P] [--dump PASS:INDEX:FILE.npy]

With PRESCIENT_STATS set, the process's live statistics file is read back after every pass.
"""

import argparse
import hashlib
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cachetest_files import FILES, NUMERIC  # noqa: E402

# Read kinds the connector may serve from the cache (whole rows, stored type, contiguous memory).
SIMPLE_KINDS = ("int", "slice", "step", "fancy_regular", "fancy_blocks", "fancy_irregular",
                "all", "ellipsis", "asarray", "read_direct_full", "open_slice")
# Read kinds that must be forwarded: partial rows, a converted type (astype to another dtype),
# an offset memory selection, scalar and vlen datasets; zero-row reads.
FORWARD_KINDS = ("astype", "partial", "read_direct_offset", "scalar", "vlen", "empty")
# Reads the connector may serve or forward: whole rows in the stored type, but selected through
# h5py's slow path (a 1-D boolean mask, whole compound rows, astype to the stored dtype), and
# a field of the compound rows (gathered from the stored rows: vol/objects/compound_fields.h).
OPTIONAL_KINDS = ("mask", "compound", "field")


def classify(op):
    """'simple' (must be served), 'forward' (must not be) or 'optional'."""
    kind = op[2]
    if kind == "astype":
        return "optional" if np.dtype(op[3][2]) == np.dtype(NUMERIC[op[1]][0]) else "forward"
    if kind in SIMPLE_KINDS:
        return "simple"
    return "optional" if kind in OPTIONAL_KINDS else "forward"


# How often each kind of read is drawn: mostly reads the cache serves.
KIND_WEIGHTS = {
    "int": 14, "slice": 14, "step": 7, "fancy_regular": 6, "fancy_blocks": 5,
    "fancy_irregular": 10, "all": 1, "ellipsis": 1, "asarray": 1, "read_direct_full": 4,
    "open_slice": 3, "mask": 5, "astype": 4, "partial": 5, "read_direct_offset": 4,
    "compound": 3, "field": 3, "scalar": 2, "vlen": 3, "empty": 4,
}


def _sorted_unique(rng, n, k):
    return sorted(int(v) for v in rng.choice(n, size=min(k, n), replace=False))


def _read_op(rng, fname, rows):
    """One read: [file, dataset, kind, args]."""
    kinds = list(KIND_WEIGHTS)
    weights = np.array([KIND_WEIGHTS[k] for k in kinds], float)
    kind = rng.choice(kinds, p=weights / weights.sum())
    kind = str(kind)
    n = rows
    dset = str(rng.choice(list(NUMERIC)))
    if kind == "int":
        return [fname, dset, kind, [int(rng.integers(-n, n))]]
    if kind in ("slice", "read_direct_full", "astype", "read_direct_offset"):
        short = rng.random() < .9
        length = int(rng.integers(1, (min(n, 64) if short else n) + 1))
        a = int(rng.integers(0, n - length + 1))
        extra = [int(rng.integers(0, 5))] if kind == "read_direct_offset" else []
        if kind == "astype":
            extra = [str(rng.choice(["<f8", "<i8", ">f4"]))]
        return [fname, dset, kind, [a, a + length, *extra]]
    if kind == "open_slice":
        return [fname, dset, kind, [int(rng.integers(-min(n, 40), 0))]]
    if kind == "step":
        s = int(rng.integers(2, 8))
        a = int(rng.integers(0, n))
        b = int(rng.integers(a + 1, min(n, a + s * 40) + 1))
        return [fname, dset, kind, [a, b, s]]
    if kind == "fancy_regular":
        s = int(rng.integers(1, 6))
        c = int(rng.integers(1, max(2, min(30, n // s))))
        a = int(rng.integers(0, max(1, n - s * (c - 1))))
        return [fname, dset, kind, list(range(a, min(n, a + s * c), s))]
    if kind == "fancy_blocks":
        block = int(rng.integers(2, 5))
        stride = block + int(rng.integers(1, 4))
        c = int(rng.integers(2, 8))
        a = int(rng.integers(0, max(1, n - stride * c)))
        idx = [a + i * stride + j for i in range(c) for j in range(block)]
        return [fname, dset, kind, [i for i in idx if i < n]]
    if kind == "fancy_irregular":
        return [fname, dset, kind, _sorted_unique(rng, n, int(rng.integers(2, 24)))]
    if kind in ("all", "ellipsis", "asarray"):
        return [fname, dset, kind, []]
    if kind == "mask":
        return [fname, dset, kind, _sorted_unique(rng, n, int(rng.integers(1, 20)))]
    if kind == "partial":
        dset = str(rng.choice([d for d, (_, shape, _) in NUMERIC.items() if shape]))
        inner = NUMERIC[dset][1][0]
        if rng.random() < .5:
            return [fname, dset, kind, [int(rng.integers(0, n)), int(rng.integers(0, inner))]]
        a = int(rng.integers(0, n))
        j0 = int(rng.integers(0, inner))
        j1 = int(rng.integers(j0 + 1, inner + 1))
        if j1 - j0 == inner:  # keep it partial
            j0, j1 = (1, inner) if inner > 1 else (0, 1)
        return [fname, dset, kind, [a, int(rng.integers(a + 1, min(n, a + 20) + 1)), j0, j1]]
    if kind in ("compound", "field", "vlen"):
        a = int(rng.integers(0, n))
        b = int(rng.integers(a + 1, min(n, a + 30) + 1))
        dset = "vstr" if kind == "vlen" else "comp"
        return [fname, dset, kind, [a, b, str(rng.choice(["a", "b", "c"]))]]
    if kind == "scalar":
        return [fname, "scal", kind, []]
    if kind == "empty":
        a = int(rng.integers(0, n + 1))
        return [fname, dset, kind, [a]]
    raise AssertionError(kind)


def make_plan(seed, reads, reopen_every=97):
    """A list of operations: reads ([file, dataset, kind, args]) and ["reopen", file]."""
    rng = np.random.default_rng(seed)
    names = sorted(FILES)
    weights = np.array([FILES[f] for f in names], float) ** 0.5
    weights /= weights.sum()
    plan = []
    for i in range(reads):
        fname = str(rng.choice(names, p=weights))
        plan.append(_read_op(rng, fname, FILES[fname]))
        if i % reopen_every == reopen_every - 1:
            plan.append(["reopen", str(rng.choice(names))])
    return plan


def describe(op):
    """The read as h5py code, for failure messages."""
    fname, dset, kind, args = op
    x = f"h5py.File('{fname}')['{dset}']"
    if kind == "int":
        return f"{x}[{args[0]}]"
    if kind == "slice":
        return f"{x}[{args[0]}:{args[1]}]"
    if kind == "open_slice":
        return f"{x}[{args[0]}:]"
    if kind == "step":
        return f"{x}[{args[0]}:{args[1]}:{args[2]}]"
    if kind.startswith("fancy"):
        return f"{x}[{args}]"
    if kind == "all":
        return f"{x}[()]"
    if kind == "ellipsis":
        return f"{x}[...]"
    if kind == "asarray":
        return f"np.asarray({x})"
    if kind == "mask":
        return f"{x}[mask with rows {args} set]"
    if kind == "astype":
        return f"{x}.astype('{args[2]}')[{args[0]}:{args[1]}]"
    if kind == "partial":
        return f"{x}[{args[0]}, {args[1]}]" if len(args) == 2 else \
            f"{x}[{args[0]}:{args[1]}, {args[2]}:{args[3]}]"
    if kind == "read_direct_full":
        return f"{x}.read_direct(arr[{args[1] - args[0]} rows], np.s_[{args[0]}:{args[1]}])"
    if kind == "read_direct_offset":
        n = args[1] - args[0]
        return (f"{x}.read_direct(arr[{n + args[2] + 2} rows], np.s_[{args[0]}:{args[1]}], "
                f"np.s_[{args[2]}:{args[2] + n}])")
    if kind == "compound":
        return f"{x}[{args[0]}:{args[1]}]"
    if kind == "field":
        return f"{x}['{args[2]}', {args[0]}:{args[1]}]"
    if kind == "scalar":
        return f"{x}[()]"
    if kind == "vlen":
        return f"{x}[{args[0]}:{args[1]}]"
    if kind == "empty":
        return f"{x}[{args[0]}:{args[0]}]"
    return repr(op)


def perform(ds, kind, args):
    """Performs one read on h5py Dataset ds; returns what h5py returned."""
    if kind == "int":
        return ds[args[0]]
    if kind == "slice":
        return ds[args[0]:args[1]]
    if kind == "open_slice":
        return ds[args[0]:]
    if kind == "step":
        return ds[args[0]:args[1]:args[2]]
    if kind.startswith("fancy"):
        return ds[args]
    if kind == "all":
        return ds[()]
    if kind == "ellipsis":
        return ds[...]
    if kind == "asarray":
        return np.asarray(ds)
    if kind == "mask":
        mask = np.zeros(ds.shape[0], bool)
        mask[args] = True
        return ds[mask]
    if kind == "astype":
        return ds.astype(args[2])[args[0]:args[1]]
    if kind == "partial":
        if len(args) == 2:
            return ds[args[0], args[1]]
        return ds[args[0]:args[1], args[2]:args[3]]
    if kind == "read_direct_full":
        out = np.full((args[1] - args[0], *ds.shape[1:]), 77, ds.dtype)
        ds.read_direct(out, np.s_[args[0]:args[1]])
        return out
    if kind == "read_direct_offset":
        n = args[1] - args[0]
        out = np.full((n + args[2] + 2, *ds.shape[1:]), 77, ds.dtype)
        ds.read_direct(out, np.s_[args[0]:args[1]], np.s_[args[2]:args[2] + n])
        return out
    if kind in ("compound", "vlen"):
        return ds[args[0]:args[1]]
    if kind == "field":
        return ds[args[2], args[0]:args[1]]
    if kind == "scalar":
        return ds[()]
    if kind == "empty":
        return ds[args[0]:args[0]]
    raise AssertionError(kind)


def digest(value):
    h = hashlib.sha1()
    if isinstance(value, (bytes, str)):
        h.update(b"scalar-" + type(value).__name__.encode() + repr(value).encode())
        return h.hexdigest()
    arr = np.asarray(value)
    h.update(f"{type(value).__name__}|{arr.dtype.str}|{arr.dtype.descr}|{arr.shape}|".encode())
    if arr.dtype.hasobject:
        h.update(repr(arr.tolist()).encode())
    else:
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


class Files:
    """Open h5py files and datasets, reopened on request (the per-sample reopen pattern)."""

    def __init__(self, directory):
        import h5py
        self.h5py = h5py
        self.directory = directory
        self.files = {}
        self.datasets = {}

    def dataset(self, fname, dset):
        if fname not in self.files:
            self.files[fname] = self.h5py.File(os.path.join(self.directory, fname), "r")
        key = (fname, dset)
        if key not in self.datasets:
            self.datasets[key] = self.files[fname][dset]
        return self.datasets[key]

    def reopen(self, fname):
        for key in [k for k in self.datasets if k[0] == fname]:
            del self.datasets[key]
        f = self.files.pop(fname, None)
        if f is not None:
            f.close()

    def close(self):
        for fname in list(self.files):
            self.reopen(fname)


def stats_snapshot():
    path = os.environ.get("PRESCIENT_STATS")
    if not path:
        return None
    path = path.replace("%p", str(os.getpid()))
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def run_plan(directory, plan, passes, dump=None):
    files = Files(directory)
    results, stats = [], []
    for p in range(passes):
        out = []
        for op in plan:
            if op[0] == "reopen":
                files.reopen(op[1])
                continue
            fname, dset, kind, args = op
            try:
                value = perform(files.dataset(fname, dset), kind, args)
                out.append(digest(value))
                if dump and dump[0] == p and dump[1] == len(out) - 1:
                    np.save(dump[2], np.asarray(value), allow_pickle=True)
            except Exception as e:  # the exception is part of the result
                out.append(f"error:{type(e).__name__}:{e}")
        results.append(out)
        stats.append(stats_snapshot())
    files.close()
    return results, stats


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("directory")
    parser.add_argument("plan")
    parser.add_argument("out")
    parser.add_argument("--passes", type=int, default=1)
    parser.add_argument("--dump", help="PASS:INDEX:FILE.npy: save the value of one read")
    args = parser.parse_args()
    with open(args.plan) as f:
        plan = json.load(f)
    dump = None
    if args.dump:
        p, i, path = args.dump.split(":", 2)
        dump = (int(p), int(i), path)
    results, stats = run_plan(args.directory, plan, args.passes, dump)
    with open(args.out, "w") as f:
        json.dump({"digests": results, "stats": stats}, f)


if __name__ == "__main__":
    main()

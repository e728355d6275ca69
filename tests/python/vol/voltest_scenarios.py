"""h5py scenarios run in subprocesses, natively and through the connector, then compared.

    python3 voltest_scenarios.py NAME write FILE
    python3 voltest_scenarios.py NAME read OUT FILE [FILE...]     (one OUT.<i>.pkl per FILE)

Every scenario has a write function (creates FILE with h5py, including writes, resizes and
attribute updates made through whichever connector is active) and a read function that
records what h5py returns: values with dtype, shape and raw bytes, attributes, link targets
and exceptions (an exception must match the native one too). The records are pickled and
compared for equality by the tests.
"""

import os
import pickle
import sys

import h5py
import numpy as np

N = 100
SHAPE = (N, 3, 8, 8)


def canonical(value):
    """A comparable form of what h5py returned: type, dtype, shape and raw bytes."""
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            return ("ndarray-object", value.dtype.str, value.shape,
                    [canonical(v) for v in value.ravel().tolist()])
        return ("ndarray", value.dtype.descr, value.shape, np.ascontiguousarray(value).tobytes())
    if isinstance(value, np.generic):
        return ("scalar", value.dtype.descr, value.tobytes())
    if isinstance(value, (bytes, str, int, float, bool, type(None))):
        return (type(value).__name__, value)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [canonical(v) for v in value])
    if isinstance(value, dict):
        return ("dict", sorted((k, canonical(v)) for k, v in value.items()))
    if isinstance(value, h5py.Datatype):
        return ("named-type", value.dtype.descr)
    return ("repr", repr(value))


class Recorder:
    def __init__(self):
        self.records = []

    def add(self, name, thunk):
        """Records thunk()'s result, or the exception type and message it raised."""
        try:
            result = canonical(thunk())
        except Exception as err:  # noqa: BLE001 - the exception itself is the result
            result = ("exception", type(err).__name__, str(err).split("(")[0].strip())
        self.records.append((name, result))


def data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-(10**6), 10**6, size=shape).astype(dtype)


def compound_type():
    return np.dtype([("a", "<i4"), ("b", "<f8"), ("c", "S4")])


def compound_data():
    out = np.zeros(N, dtype=compound_type())
    out["a"] = np.arange(N) * 3 - 7
    out["b"] = np.linspace(-1, 1, N)
    out["c"] = [f"k{i:03d}".encode()[:4] for i in range(N)]
    return out


# --- scenarios ----------------------------------------------------------------------------


def write_basic(path):
    with h5py.File(path, "w") as f:
        f["x"] = data(SHAPE, "f4", 1)
        f.create_dataset("i", data=data((50, 7), "<i2", 2))
        f.create_dataset("be", data=data((40,), ">f8", 3))  # big-endian on disk
        f.create_dataset("u8", data=np.arange(256, dtype="u1"))
        f.create_dataset("empty", shape=(0, 4), dtype="f4")
        f.create_dataset("fill", shape=(10,), dtype="i4", fillvalue=42)
    with h5py.File(path, "r+") as f:  # writes through the active connector
        f["x"][5] = np.full(SHAPE[1:], 1.5, dtype="f4")
        f["x"][10:20:3, 1] = -2.0
        f["i"][[1, 4, 9]] = np.full((3, 7), 77, dtype="<i2")
        f["fill"][3:5] = [1, 2]
        f["be"][0] = 3.25
        del f["u8"]
        f["u8"] = np.arange(255, -1, -1, dtype="u1")


def read_basic(path, rec):
    with h5py.File(path, "r") as f:
        rec.add("keys", lambda: sorted(f.keys()))
        for name in ("x", "i", "be", "u8", "empty", "fill"):
            rec.add(f"{name}[()]", lambda name=name: f[name][()])
            rec.add(f"{name}.dtype/shape", lambda name=name: (f[name].dtype.str, f[name].shape))
        rec.add("fill.fillvalue", lambda: f["fill"].fillvalue)


def write_attributes(path):
    with h5py.File(path, "w") as f:
        d = f.create_dataset("d", data=np.arange(10))
        g = f.create_group("g")
        for obj in (f, d, g):
            obj.attrs["int"] = 7
            obj.attrs["float"] = np.float32(2.5)
            obj.attrs["array"] = np.arange(12, dtype="i8").reshape(3, 4)
            obj.attrs["str"] = "unicode ✓ text"
            obj.attrs["bytes"] = np.bytes_(b"fixed")
            obj.attrs["vlen_list"] = ["a", "bb", "ccc"]
            obj.attrs["compound"] = compound_data()[:3]
            obj.attrs.create("explicit", data=[1, 2, 3], dtype="u2")
            obj.attrs["empty"] = h5py.Empty("f4")
    with h5py.File(path, "r+") as f:
        f.attrs["int"] = 8  # overwrite
        del f["d"].attrs["float"]
        f["g"].attrs.modify("array", np.ones((3, 4), dtype="i8"))


def read_attributes(path, rec):
    with h5py.File(path, "r") as f:
        for obj_name in ("/", "d", "g"):
            obj = f[obj_name]
            rec.add(f"{obj_name} attr names", lambda obj=obj: sorted(obj.attrs.keys()))
            for key in sorted(obj.attrs.keys()):
                rec.add(f"{obj_name}.attrs[{key}]", lambda obj=obj, key=key: obj.attrs[key])
                rec.add(f"{obj_name}.attrs[{key}] dtype",
                        lambda obj=obj, key=key: obj.attrs.get_id(key).dtype.str)
        rec.add("missing attr", lambda: f.attrs["nope"])


def write_groups_links(path):
    external = path + ".ext.h5"
    with h5py.File(external, "w") as e:
        e.create_group("inner")["data"] = np.arange(6.0)
    with h5py.File(path, "w") as f:
        g = f.create_group("a/b/c")
        g["d"] = np.arange(20).reshape(4, 5)
        f["hard"] = g["d"]
        f["soft"] = h5py.SoftLink("/a/b/c/d")
        f["dangling"] = h5py.SoftLink("/nowhere")
        f["ext"] = h5py.ExternalLink(os.path.basename(external), "/inner/data")
        f.create_group("tracked", track_order=True)
        for name in ("z", "y", "x"):
            f["tracked"].create_group(name)
        f.move("a/b", "a/moved")
        f.copy("a/moved/c/d", "copied")


def read_groups_links(path, rec):
    with h5py.File(path, "r") as f:
        names = []
        f.visit(names.append)
        rec.add("visit", lambda: names)
        items = []
        f.visititems(lambda n, o: items.append((n, type(o).__name__)))
        rec.add("visititems", lambda: items)
        rec.add("hard", lambda: f["hard"][()])
        rec.add("soft", lambda: f["soft"][()])
        rec.add("soft getlink", lambda: f.get("soft", getlink=True).path)
        rec.add("dangling", lambda: f["dangling"])
        rec.add("dangling in", lambda: "dangling" in f)
        rec.add("ext", lambda: f["ext"][()])
        own_name = os.path.basename(path)  # the external file is named after this one
        rec.add("ext getlink", lambda: (f.get("ext", getlink=True).filename.replace(own_name, "SELF"),
                                        f.get("ext", getlink=True).path))
        rec.add("tracked order", lambda: list(f["tracked"].keys()))
        rec.add("copied", lambda: f["copied"][()])
        rec.add("hard is soft", lambda: f["hard"] == f["soft"])
        rec.add("moved", lambda: "a/b" in f)
        rec.add("missing", lambda: f["a/none"])
        rec.add("group class", lambda: f.get("a", getclass=True).__name__)


def write_compound_vlen(path):
    with h5py.File(path, "w") as f:
        f["c"] = compound_data()
        str_t = h5py.string_dtype()
        f.create_dataset("v", data=[f"s{i}" * (i % 5) for i in range(N)], dtype=str_t)
        f.create_dataset("vb", data=[b"ab", b"", b"xyz"], dtype=h5py.string_dtype("ascii"))
        f.create_dataset("fixed", data=np.array([b"abc", b"de"], dtype="S5"))
        f.create_dataset("vlen_int", (4,), dtype=h5py.vlen_dtype("i4"))
        f["vlen_int"][:] = [np.arange(i) for i in range(4)]
        f.create_dataset("enum", data=np.array([0, 1, 1, 0], dtype="i1"),
                         dtype=h5py.enum_dtype({"OFF": 0, "ON": 1}, basetype="i1"))
        f.create_dataset("bool", data=np.array([True, False, True]))
        arr = np.zeros(4, dtype=[("m", "<f4", (2, 3)), ("k", "<i2")])
        arr["m"] = np.arange(24, dtype="f4").reshape(4, 2, 3)
        arr["k"] = [5, 6, 7, 8]
        f.create_dataset("arr", data=arr)  # compound with an array member
        f["named"] = np.dtype("<f2")
    with h5py.File(path, "r+") as f:
        f["c"][7] = (1, 2.0, b"zz")
        f["v"][3] = "replaced ✓"


def read_compound_vlen(path, rec):
    with h5py.File(path, "r") as f:
        c, v = f["c"], f["v"]
        rec.add("c[()]", lambda: c[()])
        rec.add("c[5]", lambda: c[5])
        rec.add("c[10:12]", lambda: c[10:12])
        rec.add("c['b', 10:12]", lambda: c["b", 10:12])
        rec.add("c.fields('a')[10:12]", lambda: c.fields("a")[10:12])
        rec.add("c.fields(['c','a'])[::9]", lambda: c.fields(["c", "a"])[::9])
        rec.add("v[5]", lambda: v[5])
        rec.add("v[2:4]", lambda: v[2:4])
        rec.add("v.asstr()[:]", lambda: v.asstr()[:])
        rec.add("v[[1,3,50]]", lambda: v[[1, 3, 50]])
        rec.add("vb", lambda: f["vb"][()])
        rec.add("fixed", lambda: f["fixed"][()])
        rec.add("vlen_int", lambda: f["vlen_int"][()])
        rec.add("enum", lambda: (f["enum"][()], h5py.check_enum_dtype(f["enum"].dtype)))
        rec.add("bool", lambda: f["bool"][()])
        rec.add("arr", lambda: f["arr"][()])
        rec.add("arr[1]", lambda: f["arr"][1])
        rec.add("named", lambda: f["named"])
        rec.add("dtypes", lambda: [f[k].dtype.descr for k in ("c", "fixed", "arr")])


def write_chunked(path):
    with h5py.File(path, "w") as f:
        x = data(SHAPE, "f4", 4)
        f.create_dataset("gz", data=x, chunks=(4, 3, 8, 8), compression="gzip", compression_opts=4)
        f.create_dataset("sgz", data=x, chunks=(7, 1, 8, 8), shuffle=True, compression="gzip")
        f.create_dataset("fletcher", data=np.arange(1000), chunks=(64,), fletcher32=True)
        f.create_dataset("partial", shape=(50, 10), chunks=(8, 8), dtype="i4", fillvalue=-1)
    with h5py.File(path, "r+") as f:
        f["gz"][7] = 0.5
        f["sgz"][[2, 50, 99]] = np.full((3,) + SHAPE[1:], -0.25, dtype="f4")
        f["partial"][3:9, 2:5] = 9  # some chunks never written: fill value


def read_chunked(path, rec):
    with h5py.File(path, "r") as f:
        for name in ("gz", "sgz", "fletcher", "partial"):
            d = f[name]
            rec.add(f"{name} props", lambda d=d: (d.chunks, d.compression, d.compression_opts,
                                                  d.shuffle, d.fletcher32))
            rec.add(f"{name}[()]", lambda d=d: d[()])
            rec.add(f"{name}[5]", lambda d=d: d[5])
            rec.add(f"{name}[[3,17,42]]", lambda d=d: d[[3, 17, 42]])
            rec.add(f"{name}[1:40:6]", lambda d=d: d[1:40:6])
        rec.add("gz.iter_chunks", lambda: list(f["gz"].iter_chunks())[:5])


def write_layouts(path):
    """Every storage layout HDF5 has for the same rows: the connector reads some raw (from
    the data's address) and must forward or load the others through HDF5."""
    x = data((40, 6), "i4", 9)
    with h5py.File(path, "w") as f:
        f.create_dataset("contiguous", data=x)
        f.create_dataset("unallocated", shape=x.shape, dtype="i4", fillvalue=7)
        ext = f.create_dataset("external", shape=x.shape, dtype="i4",
                               external=[(os.path.basename(path) + ".raw", 0, h5py.h5f.UNLIMITED)])
        ext[...] = x
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        space = h5py.h5s.create_simple(x.shape)
        h5py.h5d.create(f.id, b"compact", h5py.h5t.STD_I32LE, space, dcpl=dcpl)
        f["compact"][...] = x
        layout = h5py.VirtualLayout(shape=x.shape, dtype="i4")
        layout[...] = h5py.VirtualSource(".", "contiguous", shape=x.shape)
        f.create_virtual_dataset("virtual", layout)
        f.create_dataset(LONG_PATH, data=x)  # longer than the connector's name buffer


# A dataset path of 366 characters.
LONG_PATH = "/".join(["g" * 60] * 6) + "/x"


def read_layouts(path, rec):
    # The external file is named relative to the working directory by default.
    os.chdir(os.path.dirname(os.path.abspath(path)))
    with h5py.File(path, "r") as f:
        for name in ("contiguous", "unallocated", "external", "compact", "virtual", LONG_PATH):
            d = f[name]
            rec.add(f"{name} name", lambda d=d: d.name)
            for attempt in ("first", "again"):  # the second may be served from the cache
                rec.add(f"{name} rows {attempt}", lambda d=d: [d[i] for i in (0, 17, 39)])
                rec.add(f"{name}[3:9] {attempt}", lambda d=d: d[3:9])


def write_resizable(path):
    with h5py.File(path, "w") as f:
        d = f.create_dataset("r", shape=(10, 4), maxshape=(None, 4), chunks=(5, 4), dtype="f8")
        d[:] = np.arange(40).reshape(10, 4)
        f.create_dataset("grow", shape=(0,), maxshape=(None,), dtype="i8", chunks=(16,))
    with h5py.File(path, "r+") as f:
        d = f["r"]
        before = d[7:10].copy()
        d.resize((25, 4))
        d[10:25] = np.arange(60).reshape(15, 4) * -1.0
        assert np.array_equal(d[7:10], before)
        d.resize(18, axis=0)  # shrink
        g = f["grow"]
        for i in range(5):
            g.resize((g.shape[0] + 7,))
            g[-7:] = np.arange(7) + 100 * i


def read_resizable(path, rec):
    with h5py.File(path, "r") as f:
        rec.add("r shape", lambda: (f["r"].shape, f["r"].maxshape))
        rec.add("r[()]", lambda: f["r"][()])
        rec.add("r[15:]", lambda: f["r"][15:])
        rec.add("grow[()]", lambda: f["grow"][()])
        rec.add("grow[::5]", lambda: f["grow"][::5])


def write_selections(path):
    with h5py.File(path, "w") as f:
        f["x"] = data(SHAPE, "f4", 5)
        f.create_dataset("xc", data=f["x"][()], chunks=(1, 3, 8, 8), compression="gzip")
        f["y"] = np.arange(N, dtype="i8") * 11
        f["s"] = np.float64(3.141592653589793)
        f["c"] = compound_data()
        f.create_dataset("v", data=[f"v{i}" for i in range(N)], dtype=h5py.string_dtype())


def selection_reads(f):
    """Every selection shape of the research notes (h5py-read-path §1.3), and then some."""
    x, xc, y, s, c, v = (f[k] for k in ("x", "xc", "y", "s", "c", "v"))
    mask = np.zeros(N, dtype=bool)
    mask[[2, 40, 77]] = True

    def direct(shape, src, dest, dtype="f4"):
        def run():
            out = np.zeros(shape, dtype=dtype)
            x.read_direct(out, src, dest)
            return out
        return run

    def low_level(dset, start, stop, mtype, dtype):
        # H5Dread with a memory type chosen here, not by h5py.
        def run():
            fspace = dset.id.get_space()
            shape = (stop - start,) + dset.shape[1:]
            fspace.select_hyperslab((start,) + (0,) * (dset.ndim - 1), shape)
            out = np.zeros(shape, dtype=dtype)
            dset.id.read(h5py.h5s.create_simple(shape), fspace, out, mtype)
            return out
        return run

    def type_changed_between_reads():
        # One id, two types: a verdict kept per id would serve the second read unconverted.
        mtype = h5py.h5t.NATIVE_INT64.copy()
        first = low_level(y, 0, 10, mtype, "<i8")()
        mtype.set_order(h5py.h5t.ORDER_BE)
        return [first, low_level(y, 0, 10, mtype, ">i8")(), low_level(y, 0, 10, mtype, ">i8")()]

    return {
        "H5Dread x[10:12] H5T_NATIVE_FLOAT": low_level(x, 10, 12, h5py.h5t.NATIVE_FLOAT, "<f4"),
        "H5Dread x[10:12] H5T_IEEE_F32BE": low_level(x, 10, 12, h5py.h5t.IEEE_F32BE, ">f4"),
        "H5Dread x[10:12] copy of H5T_NATIVE_FLOAT": low_level(
            x, 10, 12, h5py.h5t.NATIVE_FLOAT.copy(), "<f4"),
        "H5Dread y[0:10] H5T_STD_I64BE": low_level(y, 0, 10, h5py.h5t.STD_I64BE, ">i8"),
        "H5Dread y[0:10] one type id, set to big-endian between reads": type_changed_between_reads,
        "x[5]": lambda: x[5],
        "x[np.int64(7)]": lambda: x[np.int64(7)],
        "x[-1]": lambda: x[-1],
        "x[10:20]": lambda: x[10:20],
        "x[10:20:3]": lambda: x[10:20:3],
        "x[[3,17,42]]": lambda: x[[3, 17, 42]],
        "x[np.array([3,17,42])]": lambda: x[np.array([3, 17, 42])],
        "x[[3,4,5]]": lambda: x[[3, 4, 5]],
        "x[[0,2,4,6]]": lambda: x[[0, 2, 4, 6]],
        "y[[1,5,9]]": lambda: y[[1, 5, 9]],
        "x[[1,2,3,5,6,7]]": lambda: x[[1, 2, 3, 5, 6, 7]],
        "x[[3,4,5,17]]": lambda: x[[3, 4, 5, 17]],
        "x[5,:,2:6]": lambda: x[5, :, 2:6],
        # The same part of every row, half a row or more: cut from cached whole rows.
        "x[5,[0,2]]": lambda: x[5, [0, 2]],
        "x[5,[0,2]] again": lambda: x[5, [0, 2]],
        "x[[3,17,42],1:]": lambda: x[[3, 17, 42], 1:],
        "x[4:9,:,1:]": lambda: x[4:9, :, 1:],
        "x[5,:,:,::2]": lambda: x[5, :, :, ::2],
        "x[2:40:3,[0,1]]": lambda: x[2:40:3, [0, 1]],
        "xc[5,1:]": lambda: xc[5, 1:],
        "xc[[3,17],:,4:]": lambda: xc[[3, 17], :, 4:],
        "c[5:8] fields a": lambda: c[5:8]["a"],
        "x[5,1]": lambda: x[5, 1],
        "x[...]": lambda: x[...],
        "x[()]": lambda: x[()],
        "x[:]": lambda: x[:],
        "x[:,1]": lambda: x[:, 1],
        "x[2:50:5,::2,1:7:3]": lambda: x[2:50:5, ::2, 1:7:3],
        "x[90:]": lambda: x[90:],
        "x[95:200]": lambda: x[95:200],
        "x[0:0]": lambda: x[0:0],
        "x[[42,3]] (unsorted)": lambda: x[[42, 3]],
        "x[[3,3]] (duplicate)": lambda: x[[3, 3]],
        "x[100] (out of range)": lambda: x[100],
        "y[mask]": lambda: y[mask],
        "y[y > 1000]": lambda: y[y[()] > 1000],
        "y[:]": lambda: y[:],
        "y[::7]": lambda: y[::7],
        "y[[]]": lambda: y[[]],
        "read_direct s_[10:18] -> s_[0:8]": direct((8,) + SHAPE[1:], np.s_[10:18], np.s_[0:8]),
        "read_direct s_[10:18] -> s_[8:16]": direct((16,) + SHAPE[1:], np.s_[10:18], np.s_[8:16]),
        "read_direct s_[5] -> rank 3": direct(SHAPE[1:], np.s_[5], None),
        "read_direct f8 s_[1:3]": direct((2,) + SHAPE[1:], np.s_[1:3], None, "f8"),
        "np.asarray(x)": lambda: np.asarray(x),
        "np.asarray(x, f8)": lambda: np.asarray(x, dtype="f8"),
        "x.astype(f8)[5]": lambda: x.astype("f8")[5],
        "x.astype(f2)[[3,17,42]]": lambda: x.astype("f2")[[3, 17, 42]],
        "s[()]": lambda: s[()],
        "s[...]": lambda: s[...],
        "c[5]": lambda: c[5],
        "c[10:12]": lambda: c[10:12],
        "c['b',10:12]": lambda: c["b", 10:12],
        "c.fields('a')[10:12]": lambda: c.fields("a")[10:12],
        "c[[3,17,42]]": lambda: c[[3, 17, 42]],
        "v[5]": lambda: v[5],
        "v[2:4]": lambda: v[2:4],
        "xc[5]": lambda: xc[5],
        "xc[[3,17,42]]": lambda: xc[[3, 17, 42]],
        "xc[10:20:3]": lambda: xc[10:20:3],
        "xc[()]": lambda: xc[()],
        "per-sample reopen f['x'][i]": lambda: [f["x"][i] for i in (9, 3, 71)],
        "iteration": lambda: [row for row in y][:5],
        "len/shape/size": lambda: (len(x), x.shape, x.size, x.nbytes),
    }


def read_selections(path, rec):
    with h5py.File(path, "r") as f:
        for name, thunk in selection_reads(f).items():
            rec.add(name, thunk)
    with h5py.File(path, "r+") as f:  # r+ rebuilds h5py's reader on every read
        for name in ("x[5]", "x[[3,17,42]]", "y[mask]", "np.asarray(x)"):
            rec.add(name + " (r+)", selection_reads(f)[name])


def write_references(path):
    with h5py.File(path, "w") as f:
        d = f.create_dataset("d", data=np.arange(100).reshape(10, 10))
        g = f.create_group("g")
        g.attrs["self"] = g.ref
        f.create_dataset("refs", data=[d.ref, g.ref, f.ref], dtype=h5py.ref_dtype)
        f.create_dataset("regions", data=[d.regionref[2:5, 1:9:2], d.regionref[[1, 7], :]],
                         dtype=h5py.regionref_dtype)
        f.attrs["dref"] = d.ref


def read_references(path, rec):
    with h5py.File(path, "r") as f:
        refs, regions = f["refs"], f["regions"]
        rec.add("deref names", lambda: [f[r].name for r in refs[()]])
        rec.add("deref d", lambda: f[refs[0]][()])
        rec.add("attr ref", lambda: f[f["g"].attrs["self"]].name)
        rec.add("file attr ref", lambda: f[f.attrs["dref"]][2:4])
        rec.add("region names", lambda: [f[r].name for r in regions[()]])
        rec.add("region reads", lambda: [f["d"][r] for r in regions[()]])
        rec.add("region shapes", lambda: [f["d"].regionref.shape(r) for r in regions[()]])
        rec.add("null ref", lambda: bool(h5py.Reference()))


def write_identity(path):
    write_selections(path)


def read_identity(path, rec):
    """Object identity and id bookkeeping: f[name] must not register new file ids, and the
    connector must not leave ids open (h5py closes files by enumerating open ids)."""
    from h5py import h5f, h5o

    def open_counts(fid=h5f.OBJ_ALL):
        return {kind: h5f.get_obj_count(fid, getattr(h5f, f"OBJ_{kind}"))
                for kind in ("FILE", "DATASET", "GROUP", "DATATYPE", "ATTR", "ALL")}

    rec.add("counts before", open_counts)
    with h5py.File(path, "r") as f:
        for i in range(50):
            f["x"][i]  # per-sample reopen pattern
        rec.add("counts after reopen loop", open_counts)
        x, y, c = f["x"], f["y"], f["c"]
        x[5], y[[1, 5]], c[3], x.dtype, c.dtype
        rec.add("counts with datasets open", open_counts)
        rec.add("counts of this file", lambda: open_counts(f.id.id))
        rec.add("x.file == f", lambda: x.file == f)
        rec.add("x.file.id == f.id", lambda: x.file.id == f.id)
        rec.add("x == f['x']", lambda: x == f["x"])
        rec.add("hash equal", lambda: hash(x) == hash(f["x"]))
        rec.add("parent", lambda: x.parent.name)
        rec.add("file intent", lambda: (f.mode, f.id.get_intent()))
        rec.add("filename", lambda: f.filename == str(path))
        rec.add("driver/libver", lambda: (f.driver, f.libver, f.userblock_size))
        rec.add("filesize", lambda: f.id.get_filesize())
        rec.add("freespace", lambda: f.id.get_freespace())
        rec.add("object info", lambda: (h5o.get_info(x.id).type, h5o.get_info(x.id).rc,
                                        h5o.get_info(x.id).num_attrs))
        rec.add("x offset/storage", lambda: (x.id.get_offset(), x.id.get_storage_size()))
        rec.add("xc chunks", lambda: (f["xc"].id.get_num_chunks(),
                                      tuple(f["xc"].id.get_chunk_info(3))))
        rec.add("xc read_direct_chunk", lambda: f["xc"].id.read_direct_chunk((7, 0, 0, 0)))
        rec.add("dcpl", lambda: (x.id.get_create_plist().get_layout(),
                                 f["xc"].id.get_create_plist().get_nfilters()))
        rec.add("mdc hit rate type", lambda: type(f.id.get_mdc_hit_rate()).__name__)
        rec.add("vfd handle type", lambda: type(f.id.get_vfd_handle()).__name__)
        f.flush()
        x.refresh()
        rec.add("after flush/refresh", lambda: x[7])
    rec.add("counts after close", open_counts)
    # The same file open twice at once, and two different files.
    with h5py.File(path, "r") as a, h5py.File(path, "r") as b:
        rec.add("two handles", lambda: (a["x"][3].tobytes() == b["x"][3].tobytes(), a == b,
                                        open_counts()))
    rec.add("counts at the end", open_counts)


def write_fapls(path):
    write_basic(path)
    with h5py.File(path, "a") as f:
        f.create_dataset("gz", data=data(SHAPE, "f4", 4), chunks=(4, 3, 8, 8), compression="gzip")


def read_fapls(path, rec):
    """One file reopened with different file access property lists, in turns: the connector
    remembers the FAPLs it gave the native connector, and each open must still get its own
    driver, library bounds, chunk cache, sieve buffer and metadata cache settings."""
    from h5py import h5p

    def settings(f):
        fapl = f.id.get_access_plist()
        return (f.driver, f.libver, fapl.get_cache(), fapl.get_sieve_buf_size(),
                fapl.get_fclose_degree(), type(f.id.get_mdc_config()).__name__)

    def sieve_fapl(size):
        fapl = h5p.create(h5p.FILE_ACCESS)
        fapl.set_fapl_sec2()
        fapl.set_sieve_buf_size(size)
        return fapl

    opens = [
        ("default", {}),
        ("core", {"driver": "core"}),
        ("default again", {}),
        ("latest", {"libver": "latest"}),
        ("chunk cache", {"rdcc_nbytes": 4 << 20, "rdcc_nslots": 1031, "rdcc_w0": 0.5}),
        ("stdio", {"driver": "stdio"}),
        ("core again", {"driver": "core"}),
        ("no locking", {"locking": False}),
        ("default third", {}),
    ]
    for turn in range(2):
        for label, kwargs in opens:
            with h5py.File(path, "r", **kwargs) as f:
                rec.add(f"{label} {turn}: settings", lambda: settings(f))
                rec.add(f"{label} {turn}: rows", lambda: (f["x"][3], f["i"][[1, 7]], f["gz"][9]))
        for size in (4096, 1 << 20, 4096):
            fid = h5py.h5f.open(str(path).encode(), h5py.h5f.ACC_RDONLY, fapl=sieve_fapl(size))
            with h5py.File(fid) as f:
                rec.add(f"sieve {size} {turn}", lambda: (settings(f), f["x"][2], f["be"][5]))
        # One list for several opens, two at once: an open must leave it as it was given.
        shared = sieve_fapl(1 << 16)
        first = h5py.File(h5py.h5f.open(str(path).encode(), h5py.h5f.ACC_RDONLY, fapl=shared))
        for k in range(3):
            fid = h5py.h5f.open(str(path).encode(), h5py.h5f.ACC_RDONLY, fapl=shared)
            with h5py.File(fid) as f:
                rec.add(f"shared list {k} {turn}",
                        lambda: (settings(f), f["x"][4], f["gz"][k], first["x"][5]))
        first.close()


def write_threads(path):
    write_selections(path)


def read_threads(path, rec):
    """Concurrent reads from Python threads (HDF5 is thread-safe; h5py serialises calls)."""
    from concurrent.futures import ThreadPoolExecutor

    with h5py.File(path, "r") as f:
        x, xc = f["x"], f["xc"]

        def work(k):
            rows = list(range(k, N, 4))
            return [x[i] for i in rows] + [xc[i] for i in rows] + [x[rows[:5]]]

        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(work, range(4)))
        for k, arrays in enumerate(results):
            rec.add(f"thread {k}", lambda arrays=arrays: arrays)


def write_errors(path):
    write_selections(path)
    with open(path + ".txt", "w") as f:
        f.write("not an HDF5 file\n" * 100)


def read_errors(path, rec):
    """Failures must surface as the same Python exceptions as natively (error stack kept)."""
    directory = os.path.dirname(path)
    rec.add("open missing r", lambda: h5py.File(os.path.join(directory, "missing.h5"), "r"))
    rec.add("open missing r+", lambda: h5py.File(os.path.join(directory, "missing.h5"), "r+"))
    rec.add("open text file", lambda: h5py.File(path + ".txt", "r"))
    rec.add("w- on existing", lambda: h5py.File(path, "w-"))
    rec.add("x on existing", lambda: h5py.File(path, "x"))
    rec.add("is_hdf5", lambda: (h5py.is_hdf5(path), h5py.is_hdf5(path + ".txt")))
    with h5py.File(path, "r") as f:
        rec.add("missing object", lambda: f["nothing/here"])
        rec.add("missing attr", lambda: f["x"].attrs["none"])
        rec.add("write to read-only", lambda: f["x"].__setitem__(0, 1.0))
        rec.add("create in read-only", lambda: f.create_group("new"))
        rec.add("bad index", lambda: f["x"][100])
        rec.add("bad field", lambda: f["c"]["nofield", 0])
        rec.add("get default", lambda: f.get("nothing", "default"))
        rec.add("contains", lambda: ("x" in f, "nothing" in f, "x/y" in f))
    with h5py.File(path, "r+") as f:
        rec.add("create existing", lambda: f.create_dataset("x", data=[1]))
        rec.add("shape mismatch", lambda: f["y"].__setitem__(slice(0, 3), [1, 2]))
        rec.add("resize fixed", lambda: f["y"].resize((200,)))
        rec.add("require mismatch", lambda: f.require_dataset("y", (5,), "f4"))


def write_update(path):
    write_selections(path)


def read_update(path, rec):
    """Reads, writes and resizes through one handle: later reads must see the new bytes."""
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        copy = os.path.join(scratch, "copy.h5")
        shutil.copyfile(path, copy)
        with h5py.File(copy, "r+") as f:
            x, y = f["x"], f["y"]
            rec.add("x[5] before", lambda: x[5])
            x[5] = np.full(SHAPE[1:], 7.0, dtype="f4")
            rec.add("x[5] after write", lambda: x[5])
            rec.add("x[[3,5,42]] after write", lambda: x[[3, 5, 42]])
            rec.add("np.asarray(x) after write", lambda: np.asarray(x))
            f.create_dataset("r", data=np.arange(12.0).reshape(6, 2), maxshape=(None, 2),
                             chunks=(2, 2))
            r = f["r"]
            rec.add("r before resize", lambda: r[()])
            r.resize((9, 2))
            r[6:] = -1
            rec.add("r after resize", lambda: r[()])
            rec.add("r[[1,7]]", lambda: r[[1, 7]])
            y[::10] = -y[::10]
            rec.add("y after strided write", lambda: y[()])
        with h5py.File(copy, "r") as f:  # and again after reopening
            rec.add("reopened x[5]", lambda: f["x"][5])
            rec.add("reopened r", lambda: f["r"][()])
            rec.add("reopened y", lambda: f["y"][()])


SCENARIOS = {
    "references": (write_references, read_references),
    "identity": (write_identity, read_identity),
    "threads": (write_threads, read_threads),
    "fapls": (write_fapls, read_fapls),
    "errors": (write_errors, read_errors),
    "update": (write_update, read_update),
    "basic": (write_basic, read_basic),
    "attributes": (write_attributes, read_attributes),
    "groups_links": (write_groups_links, read_groups_links),
    "compound_vlen": (write_compound_vlen, read_compound_vlen),
    "chunked": (write_chunked, read_chunked),
    "resizable": (write_resizable, read_resizable),
    "selections": (write_selections, read_selections),
    "layouts": (write_layouts, read_layouts),
}


def main(argv):
    name, phase = argv[1], argv[2]
    write, read = SCENARIOS[name]
    if phase == "write":
        write(argv[3])
        return 0
    out = argv[3]
    for i, path in enumerate(argv[4:]):
        rec = Recorder()
        read(path, rec)
        with open(f"{out}.{i}.pkl", "wb") as f:
            pickle.dump(rec.records, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

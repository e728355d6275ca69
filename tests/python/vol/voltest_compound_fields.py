"""Reads of some fields of compound datasets, run natively and through the connector.

    python3 voltest_compound_fields.py write FILE
    python3 voltest_compound_fields.py read FILE OUT.json

`write` makes compound datasets as HEP and catalogue files keep them (and `labels`, an enum
dataset, which h5py reads as its base integers) (ATLAS's flavour-tagging
files: a structured array of jets, one of tracks per jet): `jets` (rows of a packed compound with
floats, a half float, an integer, a bool, an enum, a string, an array and a nested compound
member; contiguous), `tracks` (rows of 40 tracks each; chunked, and the same with shuffle+gzip
and with LZF), `aligned` (the jets' fields at C-aligned offsets, so the stored type has padding)
and `bigendian` (big-endian members).

`read` reads them as loaders do, each read twice in a shuffled order (the second from the
cache): h5py's `d["x"]` and `d.fields([...])` (packed types of one or more fields, in the file's
order or another), salt's `read_direct` of a batch of rows into a structured array of fewer
fields, row lists, parts of rows; and reads HDF5 must convert, which the connector forwards: a
field read as another type, a structured array with a field the file lacks (HDF5 keeps the
buffer's bytes there) or with padding, the big-endian members in native order. OUT holds, per
read, what the connector should do with it ("fields": served from the cache, gathered;
"type": forwarded for its type; "stored": served as the stored type; "any": either) and a digest of the result's dtype and bytes, or
the error the read raised.
"""

import hashlib
import json
import sys

import h5py
import numpy as np

JETS = 6000
TRACKS = 40
LABEL = h5py.enum_dtype({"b": 5, "c": 4, "light": 0}, basetype="i1")


def jet_type(align=False, big_endian=False):
    e = ">" if big_endian else "<"
    return np.dtype([("pt", e + "f4"), ("eta", e + "f4"), ("flavour", e + "i4"), ("valid", "?"),
                     ("mass", e + "f2"), ("label", LABEL), ("name", "S5"),
                     ("vec", e + "f4", (3,)), ("nested", [("x", e + "i2"), ("y", "u1")])],
                    align=align)


def track_type():
    return np.dtype([("d0", "<f4"), ("z0", "<f4"), ("phi", "<f2"), ("hits", "u1"),
                     ("valid", "?"), ("charge", "<i2"), ("truth", "<i8")])


def fill(dtype, shape, rng):
    v = np.zeros(shape, dtype=dtype)
    for name in dtype.names:
        field = v[name]
        kind = dtype.fields[name][0]
        if kind.names:  # nested
            for sub in kind.names:
                field[sub] = rng.integers(0, 100, size=field.shape)
        elif kind.kind == "S":
            field[...] = np.array([b"jet%02d" % k for k in range(field.size)], dtype="S5").reshape(
                field.shape) if field.ndim else b"jet"
        elif kind.kind == "b":
            field[...] = rng.random(field.shape) < 0.7
        elif kind.kind in "iu":
            field[...] = rng.integers(0, 5 if name == "label" else 120, size=field.shape)
        else:
            field[...] = rng.standard_normal(field.shape)
    return v


def write(path):
    rng = np.random.default_rng(3)
    with h5py.File(path, "w") as f:
        f.create_dataset("jets", data=fill(jet_type(), (JETS,), rng))
        tracks = fill(track_type(), (JETS, TRACKS), rng)
        f.create_dataset("tracks", data=tracks, chunks=(64, TRACKS))
        f.create_dataset("tracks_gzip", data=tracks, chunks=(64, TRACKS), compression="gzip",
                         shuffle=True)
        f.create_dataset("tracks_lzf", data=tracks, chunks=(64, TRACKS), compression="lzf")
        f.create_dataset("aligned", data=fill(jet_type(align=True), (JETS,), rng))
        f.create_dataset("bigendian", data=fill(jet_type(big_endian=True), (JETS,), rng))
        # Labels kept as an enum dataset (rows of 32).
        f.create_dataset("labels", data=rng.choice([0, 4, 5], size=(JETS, 32)).astype("i1"),
                         dtype=LABEL)


def digest(value):
    value = np.asarray(value)
    h = hashlib.sha256(str(value.dtype).encode() + str(value.shape).encode())
    h.update(np.ascontiguousarray(value).tobytes())
    return h.hexdigest()[:16]


def packed(dataset, names, **overrides):
    """The structured dtype of `names` of the dataset's fields, packed (as h5py and salt make
    it), some fields' types replaced by `overrides`."""
    return np.dtype([(n, overrides.get(n, dataset.dtype.fields[n][0])) for n in names])


def direct(dataset, dtype, selection, shape):
    """salt's read: read_direct into a reused structured array, prefilled with bytes a
    read that left any unwritten would show."""
    buf = np.empty(shape, dtype=dtype)
    buf.view(np.uint8)[...] = 0x5A
    dataset.read_direct(buf, selection)
    return buf


def reads(f, rng):
    """(what the connector should do, a name, a thunk) for every read."""
    jets, tracks = f["jets"], f["tracks"]
    out = []
    for i in rng.integers(0, JETS, size=6):
        i = int(i)
        out += [("fields", f"jets['pt', {i}]", lambda i=i: jets["pt", i]),
                # h5py reads an enum as its base integers: HDF5's conversion is a copy.
                ("fields", f"jets.fields('label')[{i}]", lambda i=i: jets.fields("label")[i]),
                ("stored", f"labels[{i}]", lambda i=i: f["labels"][i]),
                ("fields", f"jets.fields('valid')[{i}]", lambda i=i: jets.fields("valid")[i]),
                ("fields", f"jets['nested', {i}]", lambda i=i: jets["nested", i]),
                ("fields", f"jets['name', 'vec', {i}]", lambda i=i: jets["name", "vec", i]),
                # Every member, the enum read as integers: gathered as one copy.
                ("fields", f"jets[{i}]", lambda i=i: jets[i]),
                ("stored", f"tracks[{i}]", lambda i=i: tracks[i])]
    for start in rng.integers(0, JETS - 300, size=6):
        s = int(start)
        sl = np.s_[s:s + 256]
        out += [
            ("fields", f"jets.fields(['eta','pt'])[{s}:+256]",
             lambda sl=sl: jets.fields(["eta", "pt"])[sl]),
            ("fields", f"jets.fields(all but the enum, reversed)[{s}:+256]",
             lambda sl=sl: jets.fields([n for n in reversed(jets.dtype.names)
                                        if n != "label"])[sl]),
            ("fields", f"read_direct jets salt-style [{s}:+256]",
             lambda sl=sl: direct(jets, packed(jets, ["pt", "eta", "mass", "valid", "flavour"]),
                                  sl, (256,))),
            ("fields", f"read_direct tracks salt-style [{s}:+256]",
             lambda sl=sl: direct(tracks, packed(tracks, ["d0", "z0", "phi", "valid", "truth"]),
                                  sl, (256, TRACKS))),
            ("fields", f"tracks_gzip fields [{s}:+256]",
             lambda sl=sl: f["tracks_gzip"].fields(["hits", "d0"])[sl]),
            ("fields", f"tracks_lzf fields [{s}:+256]",
             lambda sl=sl: f["tracks_lzf"].fields(["charge"])[sl]),
            ("fields", f"aligned fields [{s}:+256]",
             lambda sl=sl: f["aligned"].fields(["vec", "pt", "valid"])[sl]),
            # HDF5 converts these: forwarded, and as native's.
            ("type", f"jets pt as f8 [{s}:+256]",
             lambda sl=sl: direct(jets, packed(jets, ["pt", "eta"], pt="<f8"), sl, (256,))),
            ("type", f"jets with a field the file lacks [{s}:+256]",
             lambda sl=sl: direct(jets, np.dtype([("pt", "<f4"), ("extra", "<i4")]), sl,
                                  (256,))),
            ("type", f"jets into an aligned array [{s}:+256]",
             lambda sl=sl: direct(jets, np.dtype([("valid", "?"), ("pt", "<f4")], align=True),
                                  sl, (256,))),
            ("type", f"labels as int16 [{s}:+256]",
             lambda sl=sl: f["labels"].astype("<i2")[sl]),
            ("fields", f"jets.fields(all reversed)[{s}:+256]",
             lambda sl=sl: jets.fields(list(reversed(jets.dtype.names)))[sl]),
            ("type", f"bigendian fields in native order [{s}:+256]",
             lambda sl=sl: direct(f["bigendian"], np.dtype([("pt", "<f4"), ("eta", "<f4")]), sl,
                                  (256,))),
            ("fields", f"bigendian fields as stored [{s}:+256]",
             lambda sl=sl: f["bigendian"].fields(["eta", "pt"])[sl]),
        ]
    for _ in range(4):
        picks = sorted({int(x) for x in rng.integers(0, JETS, size=20)})
        out += [("fields", f"jets['flavour', {picks[:3]}...]",
                 lambda p=picks: jets["flavour", p]),
                # Rows of this size share cache entries: parts of them are HDF5's.
                ("any", f"tracks['d0', 'charge', rows {picks[:3]}..., 0:30]",
                 lambda p=picks: tracks["d0", "charge", p, 0:30])]
    # A whole field of a whole dataset, as `d["x"]` reads it.
    out.append(("fields", "jets['flavour']", lambda: jets["flavour"]))
    return out


def read(path, out):
    rng = np.random.default_rng(17)
    results = []
    with h5py.File(path, "r") as f:
        plan = reads(f, rng)
        for _ in range(2):
            for k in rng.permutation(len(plan)):
                expect, name, thunk = plan[k]
                try:
                    outcome = digest(thunk())
                except Exception as e:  # an error is part of what is compared
                    outcome = f"error: {type(e).__name__}"
                results.append([expect, name, outcome])
    with open(out, "w") as fh:
        json.dump(results, fh)


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        read(sys.argv[2], sys.argv[3])

"""Read sequences for the serving tests, run natively and through the connector.

    python3 voltest_serving.py write FILE
    python3 voltest_serving.py write-samples FILE
    python3 voltest_serving.py labels FILE OUT.json
    python3 voltest_serving.py samples FILE OUT.json
    python3 voltest_serving.py scheduled-samples FILE OUT.json ORDER.txt
    python3 voltest_serving.py write-fields FILE
    python3 voltest_serving.py row-parts FILE OUT.json
    python3 voltest_serving.py write-volume FILE
    python3 voltest_serving.py patches FILE OUT.json
    python3 voltest_serving.py partly-cached FILE OUT.json
    python3 voltest_serving.py rewrite FILE OUT.json MODE      (MODE: same-size | truncate)
    python3 voltest_serving.py file-closed FILE OUT.json
    python3 voltest_serving.py written-here FILE OUT.json
    python3 voltest_serving.py write-elsewhere FILE
    python3 voltest_serving.py elsewhere FILE OUT.json
    python3 voltest_serving.py write-mappings FILE
    python3 voltest_serving.py mappings FILE OUT.json
    python3 voltest_serving.py write-virtual-samples FILE
    python3 voltest_serving.py scheduled-virtual FILE OUT.json ORDER.txt
    python3 voltest_serving.py write-unwritten FILE
    python3 voltest_serving.py write-bitshuffled FILE
    python3 voltest_serving.py bitshuffled FILE OUT.json
    python3 voltest_serving.py write-filtered FILE KIND
    python3 voltest_serving.py filtered FILE OUT.json KIND
    python3 voltest_serving.py unwritten FILE OUT.json

`labels` reads images with their 8-byte labels, one sample at a time, by batch (sorted
fancy lists) and by slices, twice over (the second pass from the cache). `samples` reads
every 16 KiB row of two contiguous datasets once in shuffled order (the first dataset's,
then the second's), then a shuffled batch of each, then all that again (a cold epoch, then a
warm one). `scheduled-samples` reads samples in the order of ORDER.txt (one line of sample ids
per epoch: the order a schedule was imported from), sample i being rows i of both datasets.
`rewrite` keeps one
h5py handle open, reads rows, changes the file under it (MODE), waits for the connector's
change check, and reads again. `file-closed` reads rows through a dataset before and after
its file's handle is closed (HDF5 keeps the file open for the dataset), and rows of a copy of
the file through an open handle. `written-here` writes the file itself and reads it in turns:
anew, through a read-only handle that shares a writable one's open, anew after the writes, after
an in-place rewrite made at once, and in a forked child. `elsewhere` reads two virtual datasets
and one in external storage, changes their source files (some replaced, some rewritten in
place), and reads them again, through a new handle, a handle kept open and in a new process. OUT holds a digest of every read, or the
error it raised.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import h5py
import numpy as np

N = 3000
SHAPE = (8, 8)
CHANGE_WAIT_S = 1.3  # the connector re-checks a file at most once a second


def write(path):
    rng = np.random.default_rng(7)
    with h5py.File(path, "w") as f:
        f.create_dataset("images", data=rng.random((N, *SHAPE), dtype=np.float32))
        f.create_dataset("labels", data=rng.integers(0, 1000, N, dtype=np.int64))
        f.create_dataset("flags", data=rng.integers(0, 2, N, dtype=np.uint8))


SAMPLES, SAMPLE_SHAPE = 1024, (64, 64)  # 16 KiB float32 rows, 16 MiB contiguous per dataset


def write_samples(path):
    rng = np.random.default_rng(8)
    with h5py.File(path, "w") as f:
        for name in ("a", "b"):
            f.create_dataset(name, data=rng.random((SAMPLES, *SAMPLE_SHAPE), dtype=np.float32))


def digest(value):
    return hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()[:16]


def attempt(fn):
    try:
        return digest(fn())
    except Exception as e:  # an error is part of what is compared
        return f"error: {type(e).__name__}"


def labels(path, out):
    rng = np.random.default_rng(11)
    order = rng.permutation(N)
    results = []
    with h5py.File(path, "r") as f:
        x, y, z = f["images"], f["labels"], f["flags"]
        for _ in range(2):
            for i in order[:400]:
                results.append(digest(x[i]) + digest(y[i]) + digest(z[i]))
            for b in range(0, 800, 32):
                batch = sorted(order[b:b + 32])
                results.append(digest(x[batch]) + digest(y[batch]) + digest(z[batch]))
            for start in range(0, N, 257):
                results.append(digest(y[start:start + 100]) + digest(z[start:start + 7]))
            results.append(digest(y[()]))
    json.dump(results, open(out, "w"))


def samples(path, out):
    rng = np.random.default_rng(12)
    results = []
    with h5py.File(path, "r") as f:
        for _ in range(2):
            for x in (f["a"], f["b"]):
                for i in rng.permutation(SAMPLES):
                    results.append(digest(x[i]))
                results.append(digest(x[sorted(rng.choice(SAMPLES, 40, replace=False))]))
    json.dump(results, open(out, "w"))


def scheduled_samples(path, out, order_path):
    results = []
    with h5py.File(path, "r") as f:
        a, b = f["a"], f["b"]
        for line in open(order_path):
            for i in map(int, line.split()):
                results.append(digest(a[i]) + digest(b[i]))
    json.dump(results, open(out, "w"))


FIELDS_SHAPE = (64, 5, 24, 36)  # time steps x channels x a small grid (a weather model's layout)


def write_fields(path):
    rng = np.random.default_rng(9)
    with h5py.File(path, "w") as f:
        f.create_dataset("fields", data=rng.random(FIELDS_SHAPE, dtype=np.float32))
        f.create_dataset("fields_gz", data=rng.random(FIELDS_SHAPE, dtype=np.float32),
                         chunks=(1, 5, 24, 36), compression="gzip")
        f.create_dataset("pairs", data=rng.integers(0, 99, (3000, 4), dtype=np.int16))


def row_parts(path, out):
    """Reads of the same part of every row, twice over (the second pass from the cache):
    channel lists and slices (FourCastNet's `fields[i, channels]`, with history slices
    `fields[i-2:i+1:2, channels]`), crops, parts below half a row (of rows the reads before
    them cached), and small rows cached in shared entries (forwarded)."""
    rng = np.random.default_rng(13)
    order = rng.permutation(FIELDS_SHAPE[0] - 3) + 2
    results = []
    with h5py.File(path, "r") as f:
        for _ in range(2):
            for name in ("fields", "fields_gz"):
                x = f[name]
                for i in order[:24]:
                    i = int(i)
                    results += [digest(x[i, [0, 1, 2, 4]]), digest(x[i, 1:]),
                                digest(x[i - 2:i + 1:2, np.array([0, 2, 3, 4])]),
                                digest(x[i + 1, :, 2:20]), digest(x[i, [1, 3], :, ::3]),
                                digest(x[i, :, :, 10:30]), digest(x[i, [0, 4]]),
                                digest(x[i:i + 2, ::2])]
                batch = sorted(int(i) for i in order[:6])
                results += [digest(x[batch, 1:]), digest(x[batch, 2:])]
                out_buf = np.zeros((3, 24, 36), np.float32)
                x.read_direct(out_buf, np.s_[7, 2:], np.s_[0:3])
                results.append(digest(out_buf))
            z = f["pairs"]
            results += [digest(z[i, 1:]) for i in (5, 900, 2999)] + [digest(z[[3, 17], :3])]
    json.dump(results, open(out, "w"))


VOLUME_SHAPE = (24, 96, 96)  # z-planes of 36 KiB
DEEP_SHAPE = (64, 96, 96)  # 2.3 MiB

# partly-cached, per dataset: whole planes read first (cached), then patches (under half of
# each plane) whose planes are all, partly or not cached. Each patch's note says what the
# connector does with it (test_vol_serving.py counts them).
PLANES_READ_WHOLE = [slice(4, 12), 20, 22, 24, 26, 28]
PARTLY_CACHED_PATCHES = [
    ((slice(3, 13), slice(8, 40), slice(16, 48)), "split: 8 of 10 planes cached, 2 runs not"),
    ((slice(0, 16, 2), slice(8, 40), slice(16, 48)), "split: strided, 4 of 8 cached, 2 runs not"),
    ((slice(4, 12), slice(50, 82), slice(3, 35)), "served: all cached"),
    ((slice(19, 30), slice(0, 32), slice(0, 32)), "forwarded: 5 of 11 cached"),
    ((slice(20, 29), slice(0, 32), slice(0, 32)), "split: 5 of 9 cached, 4 runs not"),
    ((slice(40, 48), slice(0, 32), slice(0, 32)), "forwarded: none cached"),
    ((slice(10, 14), slice(0, 32), slice(60, 92)), "split: 2 of 4 cached, at the edge"),
    ((slice(2, 6), slice(10, 20), slice(None)), "split: 10 whole lines of each plane"),
    ((slice(3, 13), [1, 5, 40], slice(8, 72)), "split: a list of lines (irregular hyperslab)"),
]


def write_volume(path):
    rng = np.random.default_rng(11)
    with h5py.File(path, "w") as f:
        f.create_dataset("volume", data=rng.random(VOLUME_SHAPE, dtype=np.float32))
        f.create_dataset("volume_gz", data=rng.random(VOLUME_SHAPE, dtype=np.float32),
                         chunks=(4, 32, 32), compression="gzip")
        f.create_dataset("channels", data=rng.random((200, 16, 32), dtype=np.float32))
        # Larger than a 2 MiB cache: whole planes never pay for its patches.
        f.create_dataset("deep", data=rng.random(DEEP_SHAPE, dtype=np.float32))
        f.create_dataset("deep_gz", data=rng.random(DEEP_SHAPE, dtype=np.float32),
                         chunks=(4, 32, 32), compression="gzip")


def patches(path, out):
    """Parts under half a row: 3-D patches of a volume (pytorch-3dunet's lazy loader: 8 x 32 x
    32 boxes every 4 x 16 x 16 voxels, a ninth of each z-plane, shuffled), over two passes, of
    a contiguous and a chunked gzip volume; and two of sixteen channels of every row of another
    dataset, each row once."""
    rng = np.random.default_rng(5)
    starts = [(z, y, x) for z in range(0, 17, 4) for y in range(0, 65, 16) for x in range(0, 65, 16)]
    results = []
    with h5py.File(path, "r") as f:
        for _ in range(2):
            for name in ("volume", "volume_gz"):
                v = f[name]
                for k in rng.permutation(len(starts)):
                    z, y, x = starts[k]
                    results.append(digest(v[z:z + 8, y:y + 32, x:x + 32]))
        c = f["channels"]
        results += [digest(c[int(i), 3:5]) for i in rng.permutation(200)]
    json.dump(results, open(out, "w"))


def partly_cached(path, out):
    """Patches whose planes the cache holds in part (PARTLY_CACHED_PATCHES), of a contiguous
    and a chunked gzip dataset that do not fit the cache, twice over."""
    results = []
    with h5py.File(path, "r") as f:
        for name in ("deep", "deep_gz"):
            v = f[name]
            for planes in PLANES_READ_WHOLE:
                results.append(digest(v[planes]))
            for _ in range(2):
                for box, _note in PARTLY_CACHED_PATCHES:
                    results.append(digest(v[box]))
    json.dump(results, open(out, "w"))


def rewrite(path, out, mode):
    results = []
    with h5py.File(path, "r") as f:
        x = f["images"]
        results += [attempt(lambda: x[5]), attempt(lambda: x[6]), attempt(lambda: x[2000])]
        offset = x.id.get_offset()
        row_bytes = int(np.prod(SHAPE)) * 4
        with open(path, "r+b") as raw:
            if mode == "same-size":
                # New values for rows 0..99, same file size: only the data changes.
                raw.seek(offset)
                raw.write(np.full((100, *SHAPE), 42.0, dtype=np.float32).tobytes())
            else:
                raw.truncate(offset + 3 * row_bytes)
            raw.flush()
            os.fsync(raw.fileno())
        time.sleep(CHANGE_WAIT_S)
        # Not row 2000 again: native HDF5 may answer it from its sieve buffer (the 64 KiB it
        # read around row 2000 before the change), which the connector's process never filled.
        results += [attempt(lambda: x[5]), attempt(lambda: x[6]), attempt(lambda: x[1500])]
    json.dump(results, open(out, "w"))


def file_closed(path, out):
    # The low-level API: h5py's File.close() would close the dataset too.
    file_id = h5py.h5f.open(os.fsencode(path), h5py.h5f.ACC_RDONLY)
    dataset = h5py.h5d.open(file_id, b"images")

    def row(i):
        file_space = dataset.get_space()
        file_space.select_hyperslab((i, 0, 0), (1, *SHAPE))
        value = np.empty((1, *SHAPE), dtype=np.float32)
        dataset.read(h5py.h5s.create_simple((1, *SHAPE)), file_space, value)
        return value

    # Rows 5 and 2000 lie in the first two 1,024-row slabs a miss reads around, 6 beside 5,
    # 2500 in the third slab.
    results = [attempt(lambda: row(5)), attempt(lambda: row(2000))]
    # A copy (another file to the cache) read through an open handle the whole time.
    copy = f"{path}.copy"
    shutil.copyfile(path, copy)
    with h5py.File(copy, "r") as f:
        results += [attempt(lambda: f["images"][5]), attempt(lambda: f["images"][2000])]
    file_id.close()
    results += [attempt(lambda: row(6)), attempt(lambda: row(2500))]
    dataset.close()
    json.dump(results, open(out, "w"))


def written_here(path, out):
    rng = np.random.default_rng(9)
    results = []

    def rows(f, which):
        return [attempt(lambda i=i: f["images"][i]) for i in which]

    with h5py.File(path, "w") as f:
        time.sleep(0.02)  # the data written a tick of the kernel's clock after the creation
        f.create_dataset("images", data=rng.random((SAMPLES, *SAMPLE_SHAPE), dtype=np.float32))
    with h5py.File(path, "r") as f:  # opened anew after the writes: served
        results += rows(f, (3, 700, 3))
    with h5py.File(path, "r+") as w:
        time.sleep(0.02)
        w["images"][0:10] = 7.0
        # A read-only handle now shares the writable open (and its unflushed bytes): forwarded.
        with h5py.File(path, "r") as r:
            results += rows(r, (3, 12))
            # Row 12 reaches the file (now or at the close) a tick past this open's time, which
            # the next open must be past to be served (a shared open raises the bar).
            time.sleep(0.02)
            w["images"][12] = -1.0
            results += rows(r, (12, 3))
    with h5py.File(path, "r") as f:  # anew: the new bytes, served
        results += rows(f, (3, 12, 700, 3, 12))
    child_out = f"{out}.child"
    pid = os.fork()  # as a DataLoader worker: forked after the writes, opening the file itself
    if pid == 0:
        status = 1
        try:
            with h5py.File(path, "r") as f:
                json.dump(rows(f, (3, 12, 40, 40)), open(child_out, "w"))
            status = 0
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    results += json.load(open(child_out)) if status == 0 else [f"child failed: {status}"]
    # Rewritten in place at once: within one tick of a kernel clock whose timestamps are coarse
    # (before Linux 6.13) the file's identity stays as it was, and the reads stay forwarded.
    with h5py.File(path, "r+") as w:
        w["images"][3] = 5.0
    with h5py.File(path, "r") as f:
        results += rows(f, (3, 700, 3))
    json.dump(results, open(out, "w"))


ELSEWHERE_ROWS = 64


def write_elsewhere(path, seed=21):
    """FILE holds `virtual_a` (rows from FILE.source0.h5 and FILE.source1.h5), `virtual_b` (from
    sources 2 and 3) and `external` (its bytes in FILE.raw), all with values from `seed`."""
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        for name, first in (("virtual_a", 0), ("virtual_b", 2)):
            f.create_virtual_dataset(name, layout_over_sources(
                path, [f".source{first + k}.h5" for k in range(2)], ELSEWHERE_ROWS, rng, "data",
                relative=False))
        raw = os.path.basename(path) + ".raw"
        external = f.create_dataset("external", (ELSEWHERE_ROWS, *SAMPLE_SHAPE), "f4",
                                    external=[(raw, 0, h5py.h5f.UNLIMITED)])
        external[...] = rng.random((ELSEWHERE_ROWS, *SAMPLE_SHAPE), dtype=np.float32)


CHANGE_SOURCES = """
import os, sys, h5py, numpy as np, voltest_serving as s
rng = np.random.default_rng(99)
p, h = sys.argv[1], s.ELSEWHERE_ROWS // 2
for replaced, rewritten in ((0, 1), (2, 3)):
    with h5py.File(p + ".new.h5", "w") as f:
        f["data"] = rng.random((h, *s.SAMPLE_SHAPE), dtype=np.float32)
    os.replace(p + ".new.h5", f"{p}.source{replaced}.h5")
    with h5py.File(f"{p}.source{rewritten}.h5", "r+") as f:
        f["data"][...] = rng.random((h, *s.SAMPLE_SHAPE), dtype=np.float32)
with open(p + ".raw", "r+b") as f:
    f.write(rng.random(s.ELSEWHERE_ROWS * 4096, dtype=np.float32).tobytes())
"""


def elsewhere(path, out, fresh_process=False):
    os.chdir(os.path.dirname(os.path.abspath(path)))  # the raw file is named relative to it
    everything = ("virtual_a", "virtual_b", "external")

    def read(f, names=everything):
        return [attempt(lambda i=i, n=n: f[n][i]) for n in names for i in (1, 40, 1)]

    def rows(names=everything):
        with h5py.File(path, "r") as f:
            return read(f, names)

    if fresh_process:
        json.dump(rows(), open(out, "w"))
        return
    # A file open across the change, like a loader's cached handle. (Its datasets are opened
    # per read: HDF5 holds an open virtual dataset's sources open, and their bytes in its sieve
    # buffer, so natively a dataset held open does not see its sources change at all.)
    kept = h5py.File(path, "r")
    results = read(kept) + rows()  # the second read may come from the cache
    # New sources, written by another process without the connector: one of each virtual
    # dataset's replaced (a new file under its name), the other rewritten in place, the raw
    # file rewritten in place; the main file is untouched.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HDF5_VOL_CONNECTOR", "HDF5_PLUGIN_PATH", "PRESCIENT_"))}
    subprocess.run([sys.executable, "-c", CHANGE_SOURCES, path], env=env, check=True,
                   cwd=os.path.dirname(os.path.abspath(__file__)))
    # `virtual_a` through a new file handle, `virtual_b` through the one kept open: each
    # dataset open checks the sources of the rows read through it.
    results += rows(("virtual_a", "external"))
    results += read(kept, ("virtual_b",))
    kept.close()
    second = f"{out}.fresh"
    subprocess.run([sys.executable, os.path.abspath(__file__), "elsewhere-fresh", path, second],
                   check=True)
    results += json.load(open(second))
    json.dump(results, open(out, "w"))


MAPPING_ROWS = 24


def write_mappings(path):
    """FILE holds virtual datasets of 24 rows of 64x64 int32 (16 KiB rows, each cached in an
    entry of its own) whose mappings Prescient reads raw
    (`whole`: three contiguous sources, out of order, one in part; `own`: a dataset of FILE
    itself; `gzipped`: two sources chunked and compressed alike, whole chunks out of order;
    `partial`: rows left to the fill value) and ones it must leave to HDF5 (`chunked`: a chunked
    source beside a contiguous one, `converted` sources of another byte order, `columns` filled
    half a row from each of two sources)."""
    rng = np.random.default_rng(31)
    shape = (64, 64)
    sources = {}
    for k, (kind, dtype) in enumerate((("plain", "<i4"), ("plain", "<i4"), ("plain", "<i4"),
                                       ("chunked", "<i4"), ("converted", ">i4"),
                                       ("gzipped", "<i4"), ("gzipped", "<i4"))):
        name = f"{path}.m{k}.h5"
        with h5py.File(name, "w") as s:
            data = rng.integers(-2**31, 2**31, (16, *shape), dtype=np.int64).astype(dtype)
            if kind == "chunked":
                s.create_dataset("x", data=data, chunks=(4, 16, 16), compression="gzip")
            elif kind == "gzipped":
                s.create_dataset("x", data=data, chunks=(4, 32, 64), compression="gzip",
                                 shuffle=True)
            else:
                s.create_dataset("x", data=data)
        sources[k] = os.path.basename(name)

    def layout():
        return h5py.VirtualLayout((MAPPING_ROWS, *shape), "<i4")

    def src(k, rows=16, name="x"):
        return h5py.VirtualSource(sources[k] if k is not None else ".", name, shape=(rows, *shape))

    with h5py.File(path, "w") as f:
        f.create_dataset("own_rows", data=rng.integers(0, 9, (30, *shape), dtype=np.int32))
        whole = layout()
        whole[0:8] = src(2)[8:16]  # the second half of source 2 first
        whole[8:24] = src(0)
        f.create_virtual_dataset("whole", whole)
        own = layout()
        own[0:12] = src(1)[4:16]
        own[12:24] = src(None, 30, "own_rows")[3:15]
        f.create_virtual_dataset("own", own)
        chunked = layout()
        chunked[0:16] = src(3)
        chunked[16:24] = src(0)[0:8]
        f.create_virtual_dataset("chunked", chunked)
        gzipped = layout()
        gzipped[0:8] = src(6)[8:16]
        gzipped[8:12] = src(5)[0:4]
        gzipped[12:24] = src(6)[0:12]
        f.create_virtual_dataset("gzipped", gzipped)
        partial = layout()
        partial[4:20] = src(1)
        f.create_virtual_dataset("partial", partial, fillvalue=-7)
        converted = layout()
        converted[0:16] = src(4)
        converted[16:24] = src(2)[0:8]
        f.create_virtual_dataset("converted", converted)
        columns = layout()
        columns[0:16, :, 0:32] = src(0)[:, :, 0:32]
        columns[0:16, :, 32:64] = src(1)[:, :, 32:64]
        columns[16:24] = src(2)[0:8]
        f.create_virtual_dataset("columns", columns)


MAPPINGS = ("whole", "own", "gzipped", "chunked", "partial", "converted", "columns")


def mappings(path, out):
    """Every virtual dataset of FILE read twice over: single rows, a slice, a sorted list, the
    whole of it."""
    os.chdir(os.path.dirname(os.path.abspath(path)))
    results = []
    with h5py.File(path, "r") as f:
        for _ in range(2):
            for name in MAPPINGS:
                for key in (0, 5, 23, 5, slice(2, 11), [1, 4, 19], slice(None)):
                    results.append(attempt(lambda n=name, k=key: f[n][k]))
    json.dump(results, open(out, "w"))


def layout_over_sources(path, suffixes, rows, rng, dataset, relative):
    """A virtual layout of `rows` random SAMPLE_SHAPE float32 rows taken in equal parts, in
    order, from new files FILE + suffix (each holding its part as `dataset`), named relative to
    FILE or by their full names."""
    part = rows // len(suffixes)
    layout = h5py.VirtualLayout((rows, *SAMPLE_SHAPE), "<f4")
    for k, suffix in enumerate(suffixes):
        source = f"{path}{suffix}"
        with h5py.File(source, "w") as s:
            s[dataset] = rng.random((part, *SAMPLE_SHAPE), dtype=np.float32)
        layout[k * part:(k + 1) * part] = h5py.VirtualSource(
            os.path.basename(source) if relative else source, dataset,
            shape=(part, *SAMPLE_SHAPE))
    return layout


def write_virtual_samples(path):
    """FILE holds `v`: SAMPLES rows of SAMPLE_SHAPE float32 from four source files of a quarter
    each, named relative to FILE (h5py's layout: contiguous sources, read raw)."""
    layout = layout_over_sources(path, [f".part{k}.h5" for k in range(4)], SAMPLES,
                                 np.random.default_rng(41), "x", relative=True)
    with h5py.File(path, "w") as f:
        f.create_virtual_dataset("v", layout)


def scheduled_virtual(path, out, order_path):
    """`v`'s rows in the order of ORDER (one epoch a line), with a pause every 32 reads, as a
    training step would make, for the prefetcher to read ahead in."""
    os.chdir(os.path.dirname(os.path.abspath(path)))
    results = []
    with h5py.File(path, "r") as f:
        for line in open(order_path):
            for k, i in enumerate(map(int, line.split())):
                results.append(digest(f["v"][i]))
                if k % 32 == 31:
                    time.sleep(0.002)
    json.dump(results, open(out, "w"))


UNWRITTEN = ("never_half", "never_whole", "ifset_half", "never_contiguous", "virtual_half")


def write_unwritten(path):
    """FILE holds 256 rows of 4,096 int32 (16 KiB rows) in chunks of 8 rows, written in part or
    whole: `never_half` (fill time never, rows 0-127 written: HDF5 leaves a reader's buffer as
    it was for the rest), `never_whole` (fill time never, every row written), `ifset_half`
    (fill value -3 for the rows not written), `never_contiguous` (contiguous, fill time never,
    never written), and `virtual_half`, a virtual dataset of `never_half`'s rows 4-259 (its
    mapping splits chunks, so it is not read raw)."""
    rng = np.random.default_rng(41)
    shape = (256, 4096)
    with h5py.File(path, "w") as f:
        for name, rows, extra in (("never_half", 128, {"fill_time": "never"}),
                                  ("never_whole", 256, {"fill_time": "never"}),
                                  ("ifset_half", 128, {"fillvalue": -3})):
            d = f.create_dataset(name, shape, "<i4", chunks=(8, 4096), **extra)
            d[:rows] = rng.integers(-2**31, 2**31, (rows, 4096), dtype=np.int64).astype("<i4")
        f.create_dataset("never_contiguous", shape, "<i4", fill_time="never")
        layout = h5py.VirtualLayout(shape, "<i4")
        layout[:252] = h5py.VirtualSource(".", "never_half", shape=shape)[4:]
        layout[252:] = h5py.VirtualSource(".", "ifset_half", shape=shape)[:4]
        f.create_virtual_dataset("virtual_half", layout)


def unwritten(path, out):
    """Every dataset of FILE read twice over into buffers filled with 0x55 bytes (what HDF5
    leaves there is part of what is compared): single rows, slices across the written end, the
    whole of it."""
    results = []
    with h5py.File(path, "r") as f:
        for _ in range(2):
            for name in UNWRITTEN:
                d = f[name]
                for key in (3, 200, 127, slice(120, 136), slice(None)):
                    rows = np.arange(d.shape[0])[key]
                    buffer = np.full((np.size(rows), d.shape[1]), 0x55555555, dtype="<i4")
                    d.read_direct(buffer, np.s_[key] if isinstance(key, slice) else
                                  np.s_[key:key + 1])
                    results.append(digest(buffer))
    json.dump(results, open(out, "w"))


def bitshuffled_datasets():
    """name: (shape, dtype, chunks, bitshuffle client data (block size, compression)), as
    detectors and hdf5plugin write them: LZ4 or none, the default block or a set one, elements
    of 1 to 8 bytes, chunks a frame or several, edge chunks, chunk sizes that are not a multiple
    of 8 elements (the tail stored as it is) and larger than a block."""
    import bitshuffle.h5 as bsh
    lz4, none = bsh.H5_COMPRESS_LZ4, 0
    return {
        "frames_u16_lz4": ((40, 96, 96), "<u2", (1, 96, 96), (0, lz4)),
        "frames_i32_lz4": ((37, 50, 30), "<i4", (4, 50, 30), (0, lz4)),
        "rows_f64_none": ((300, 13), "<f8", (7, 13), (0, none)),
        "rows_u8_block": ((1000, 45), "|u1", (33, 45), (64, lz4)),
        "rows_f32_odd": ((257, 3), "<f4", (5, 3), (0, lz4)),
    }


def write_bitshuffled(path):
    """FILE holds bitshuffled datasets (bitshuffled_datasets), Poisson counts and random bits."""
    import bitshuffle.h5 as bsh
    rng = np.random.default_rng(53)
    with h5py.File(path, "w") as f:
        for name, (shape, dtype, chunks, (block, compression)) in bitshuffled_datasets().items():
            if np.dtype(dtype).kind == "f":
                data = rng.normal(0, 1e3, shape).astype(dtype)
            else:
                data = rng.poisson(3, shape).astype(dtype)
                data.flat[::17] = np.iinfo(dtype).max
            f.create_dataset(name, data=data, chunks=chunks, compression=bsh.H5FILTER,
                             compression_opts=(block, compression))


def bitshuffled(path, out):
    """Every bitshuffled dataset of FILE read twice over: single rows, slices, a sorted list,
    the whole of it."""
    import bitshuffle.h5  # noqa: F401 (registers the filter with HDF5 for the native reads)
    json.dump(read_every_way(path, bitshuffled_datasets()), open(out, "w"))


def read_every_way(path, names):
    """Each dataset of NAMES in FILE read twice over: its first, last and middle row, a slice, a
    sorted list, the whole of it; each read's digest or error."""
    results = []
    with h5py.File(path, "r") as f:
        for _ in range(2):
            for name in names:
                d = f[name]
                n = d.shape[0]
                for key in (0, n - 1, n // 2, slice(3, n // 3), sorted({1, n // 4, n - 2}),
                            slice(None)):
                    results.append(attempt(lambda k=key: d[k]))
    return results


def filtered_datasets(kind):
    """name: (shape, dtype, create_dataset keywords) for chunks of other filters, as h5py,
    PyTables and hdf5plugin write them: LZF with and without shuffle (h5py's own filter); HDF5's
    LZ4 filter (32004) with its default and a small block; Blosc (32001) with each of its codecs
    and shuffles; Blosc2 (32026) flat and as B2ND arrays; bzip2 (307) at two levels; bitshuffle with Zstandard; HDF5's Fletcher-32 checksum after no filter, gzip or
    LZF (chunks of an odd number of bytes among them). Elements of 1 to 8 bytes, edge chunks, and random
    bytes that do not compress (LZF and LZ4 then store a chunk or a block as it is)."""
    if kind == "lzf":
        return {
            "counts_lzf": ((300, 40), "<u2", dict(chunks=(7, 40), compression="lzf")),
            "floats_lzf_shuffle": ((123, 9, 5), "<f8", dict(chunks=(10, 9, 5), compression="lzf",
                                                             shuffle=True)),
            "noise_lzf": ((64, 256), "|u1", dict(chunks=(3, 256), compression="lzf")),
        }
    if kind == "lz4":
        return {
            "counts_lz4": ((300, 40), "<u2", dict(chunks=(7, 40), compression=32004)),
            "floats_lz4_blocks": ((123, 9, 5), "<f4", dict(chunks=(10, 9, 5), compression=32004,
                                                           compression_opts=(100,))),
            "noise_lz4_shuffle": ((64, 256), "<i8", dict(chunks=(3, 256), compression=32004,
                                                         compression_opts=(512,), shuffle=True)),
        }
    if kind == "blosc":
        # Client data: 4 slots Blosc fills in, level, shuffle (0 none, 1 byte, 2 bit), codec
        # (0 blosclz, 1 lz4, 2 lz4hc, 4 zlib, 5 zstd).
        return {f"blosc_c{codec}_s{shuffle}": ((200, 33), dtype, dict(
                    chunks=(9, 33), compression=32001,
                    compression_opts=(0, 0, 0, 0, 5, shuffle, codec)))
                for codec, shuffle, dtype in ((0, 1, "<f4"), (1, 2, "<u2"), (2, 0, "|u1"),
                                              (4, 1, "<i8"), (5, 2, "<f8"))}
    if kind == "blosc2":
        # Client data: 4 slots the filter fills in, level, filter (1 shuffle, 2 bitshuffle), codec
        # (0 blosclz, 1 lz4, 5 zstd). Chunks of rank 2 and up are B2ND arrays; the frames' blocks
        # are smaller than their chunk and do not divide it (padded at the far edges).
        return {
            "counts_blosc2": ((300, 40), "<u2", dict(chunks=(7, 40), compression=32026,
                                                     compression_opts=(0, 0, 0, 0, 5, 1, 5))),
            "floats_blosc2_3d": ((123, 9, 5), "<f8", dict(chunks=(10, 9, 5), compression=32026,
                                                          compression_opts=(0, 0, 0, 0, 5, 2, 1))),
            "noise_blosc2_flat": ((640,), "|u1", dict(chunks=(30,), compression=32026,
                                                      compression_opts=(0, 0, 0, 0, 9, 1, 0))),
            # Blocks of 3 x 64 x 128 (the filter's choice at level 1), padded to 3 x 320 x 384.
            "frames_blosc2": ((12, 300, 301), "<u2", dict(chunks=(3, 300, 301), compression=32026,
                                                         compression_opts=(0, 0, 0, 0, 1, 1, 1))),
        }
    if kind == "bzip2":
        # Client data: the level (1-9, the block size in 100 kB).
        return {
            "counts_bzip2": ((300, 40), "<u2", dict(chunks=(7, 40), compression=307,
                                                    compression_opts=(9,))),
            "noise_bzip2_shuffle": ((64, 256), "<i8", dict(chunks=(3, 256), compression=307,
                                                           compression_opts=(1,), shuffle=True)),
        }
    if kind == "fletcher32":
        return {
            "counts_checked": ((300, 40), "<u2", dict(chunks=(7, 40), fletcher32=True)),
            "floats_gzip_checked": ((123, 9, 5), "<f8", dict(chunks=(10, 9, 5), compression="gzip",
                                                              shuffle=True, fletcher32=True)),
            "noise_lzf_checked": ((64, 255), "|u1", dict(chunks=(3, 255), compression="lzf",
                                                         fletcher32=True)),
        }
    if kind == "bitshuffle-zstd":
        import bitshuffle.h5 as bsh
        return {
            "frames_zstd": ((40, 96, 96), "<u2", dict(chunks=(1, 96, 96), compression=bsh.H5FILTER,
                                                      compression_opts=(0, bsh.H5_COMPRESS_ZSTD))),
            "rows_zstd_odd": ((257, 3), "<f4", dict(chunks=(5, 3), compression=bsh.H5FILTER,
                                                    compression_opts=(64, bsh.H5_COMPRESS_ZSTD))),
        }
    raise ValueError(kind)


def register_filters(kind):
    """What makes HDF5 able to apply KIND's filter in this process: h5py registers LZF itself;
    bitshuffle's module and PyTables (Blosc2) register theirs; LZ4, Blosc and bzip2 are plugins
    HDF5 finds on its own."""
    if kind.startswith("bitshuffle"):
        import bitshuffle.h5  # noqa: F401
    if kind == "blosc2":
        import tables  # noqa: F401  (registers its Blosc2 filter with HDF5)


def write_filtered(path, kind):
    """FILE holds KIND's datasets (filtered_datasets): counts with repeats, floats, and noise."""
    register_filters(kind)
    rng = np.random.default_rng(59)
    with h5py.File(path, "w") as f:
        for name, (shape, dtype, keywords) in filtered_datasets(kind).items():
            if name.startswith("noise"):
                data = rng.integers(0, 256, size=(*shape, np.dtype(dtype).itemsize),
                                    dtype=np.uint8).view(dtype).reshape(shape)
            elif np.dtype(dtype).kind == "f":
                data = rng.normal(0, 1e3, shape).round(1).astype(dtype)
            else:
                data = rng.poisson(3, shape).astype(dtype)
            f.create_dataset(name, data=data, **keywords)


def filtered(path, out, kind):
    """Every dataset of KIND in FILE read twice over: single rows, slices, a sorted list, the
    whole of it."""
    register_filters(kind)
    json.dump(read_every_way(path, filtered_datasets(kind)), open(out, "w"))


COMMANDS = {
    "write": write,
    "write-samples": write_samples,
    "labels": labels,
    "samples": samples,
    "scheduled-samples": scheduled_samples,
    "write-fields": write_fields,
    "row-parts": row_parts,
    "write-volume": write_volume,
    "patches": patches,
    "partly-cached": partly_cached,
    "rewrite": rewrite,
    "file-closed": file_closed,
    "written-here": written_here,
    "write-elsewhere": write_elsewhere,
    "elsewhere": elsewhere,
    "elsewhere-fresh": lambda path, out: elsewhere(path, out, fresh_process=True),
    "write-mappings": write_mappings,
    "mappings": mappings,
    "write-virtual-samples": write_virtual_samples,
    "scheduled-virtual": scheduled_virtual,
    "write-unwritten": write_unwritten,
    "unwritten": unwritten,
    "write-bitshuffled": write_bitshuffled,
    "bitshuffled": bitshuffled,
    "write-filtered": write_filtered,
    "filtered": filtered,
}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]](*sys.argv[2:])

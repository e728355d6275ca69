"""Fields in files of their own (format version 3) on the Python side: the
writer (prescient._schedule_writer) writes version 2 without field files and
version 3 with them, the reader (prescient_sampler) reads both and says where
each field lives, the dataset check compares the file a field is in,
schedule_for pairs globs in sorted order, and the C++ tool and the Python
modules read each other's version 3 files (byte for byte the same)."""

import os
import re
import struct
import sys
import zlib
from pathlib import Path

import pytest

np = pytest.importorskip("numpy", reason="numpy is missing: run this suite inside env/run")

from conftest import REPO, run_tool  # noqa: E402

sys.path.insert(0, str(REPO / "python"))

from prescient._schedule_writer import (WriterField, WriterFieldFile,  # noqa: E402
                                        WriterFile, write_schedule)
from prescient_sampler import (DatasetMismatchError, ScheduleFile,  # noqa: E402
                               ScheduleFileError, ScheduleSampler, SampleMap,
                               fingerprint_dataset)
from prescient_sampler._sample_map import FieldFile, FieldPlace, MapField, MapFile  # noqa: E402

# Preamble offsets (scheduler/README.md, "Preamble").
VERSION_AT, HEADER_SIZE_AT, HEADER_CRC_AT, PREAMBLE_CRC_AT = 8, 32, 64, 76


# -- helpers ------------------------------------------------------------------

def version_of(path) -> int:
    return struct.unpack_from("<I", Path(path).read_bytes(), VERSION_AT)[0]


def stamped(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0" * size)
    return path


def stat_of(path):
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def patchcamelyon(tmp_path, rows=(4, 3)):
    """Images in img_k.h5, labels in lab_k.h5 (other sizes, so a check that
    compares the wrong file fails): the writer's files and fields."""
    files = []
    for k, n in enumerate(rows):
        img = stamped(tmp_path / "data" / f"img_{k}.h5", 300 + k)
        lab = stamped(tmp_path / "data" / f"lab_{k}.h5", 20 + k)
        labels = WriterFieldFile(1, os.path.realpath(lab), *stat_of(lab))
        files.append(WriterFile(os.path.realpath(img), n, *stat_of(img), field_files=(labels,)))
    return files, (WriterField("x", 12), WriterField("y", 8))


def one_epoch(num_samples, ranks=1):
    """Every sample once, split over the ranks, one step each."""
    parts = {}
    for rank in range(ranks):
        ids = np.arange(rank, num_samples, ranks)
        parts[(0, rank)] = (ids, [0, len(ids)])
    return parts


def write(path, files, fields, ranks=1, **kwargs):
    n = sum(f.rows for f in files)
    write_schedule(path, parts=one_epoch(n, ranks), ranks=ranks, ranks_per_node=1,
                   num_samples=n, files=files, fields=fields, **kwargs)
    return path


def as_read(files):
    """The reader's MapFiles of the writer's files."""
    return tuple(MapFile(f.path, f.rows, f.size, f.mtime_ns,
                         tuple(FieldFile(ff.field, ff.path, ff.size, ff.mtime_ns)
                               for ff in f.field_files)) for f in files)


def edit(path, change):
    """Applies change(bytearray) to the file at `path`, then recomputes the header
    and preamble CRCs, so only the edit itself can make a reader refuse it."""
    data = bytearray(path.read_bytes())
    change(data)
    header_size = struct.unpack_from("<Q", data, HEADER_SIZE_AT)[0]
    struct.pack_into("<I", data, HEADER_CRC_AT, zlib.crc32(bytes(data[80:80 + header_size])))
    struct.pack_into("<I", data, PREAMBLE_CRC_AT, zlib.crc32(bytes(data[:PREAMBLE_CRC_AT])))
    path.write_bytes(bytes(data))


# -- the Python writer and reader ---------------------------------------------

def test_writer_writes_version_2_without_field_files(tmp_path):
    files, fields = patchcamelyon(tmp_path)
    plain = [WriterFile(f.path, f.rows, f.size, f.mtime_ns) for f in files]
    out = write(tmp_path / "v2.sched", plain, fields)
    assert version_of(out) == 2
    f = ScheduleFile(out)
    assert f.format_version == 2
    m = f.header.map
    assert m.files == as_read(plain) and all(mf.field_files == () for mf in m.files)
    assert not m.has_field_files
    assert m.place_of(1, 1) == FieldPlace(files[1].path, files[1].size, files[1].mtime_ns)


def test_writer_writes_version_3_with_field_files_and_the_reader_reads_it(tmp_path):
    files, fields = patchcamelyon(tmp_path)
    out = write(tmp_path / "v3.sched", files, fields, ranks=2)
    assert version_of(out) == 3
    f = ScheduleFile(out)
    assert f.format_version == 3
    m = f.header.map
    assert m.files == as_read(files) and m.has_field_files
    assert [(d.dataset, d.row_bytes) for d in m.fields] == [("x", 12), ("y", 8)]
    labels = files[1].field_files[0]
    assert m.place_of(1, 0) == (files[1].path, files[1].size, files[1].mtime_ns)
    assert m.place_of(1, 1) == (labels.path, labels.size, labels.mtime_ns)
    # A field file's path finds its file, as the connector looks up an opened file.
    assert m.file_index(labels.path) == 1 and m.file_index(files[0].path) == 0
    assert m.file_index(str(tmp_path / "data" / "other.h5")) is None
    assert m.paths_of(0) == (files[0].path, files[0].field_files[0].path)
    assert m.locate(5) == (1, 1) and m.num_samples == 7
    assert f.part(1, 0)[0].tolist() == [1, 3, 5]


def test_version_3_header_bytes_follow_the_spec(tmp_path):
    """Each file entry is followed by U32 count, then per field file U32
    field, Str path, U64 size, I64 mtime_ns: the map at the header's end,
    built here from the spec, not from the writer."""
    img, lab, meta = "/d/img.h5", "/d/lab.h5", "/d/meta.h5"
    files = [WriterFile(img, 5, 300, -7, field_files=(WriterFieldFile(2, meta, 9, 10),
                                                       WriterFieldFile(1, lab, 20, 2**62)))]
    fields = [WriterField("x", 12), WriterField("y", 8), WriterField("z", 0)]
    out = write(tmp_path / "h.sched", files, fields)
    data = out.read_bytes()
    header = data[80:80 + struct.unpack_from("<Q", data, HEADER_SIZE_AT)[0]]

    def s(text):
        return struct.pack("<I", len(text)) + text.encode()

    expected = (struct.pack("<I", 3) + s("x") + struct.pack("<Q", 12) + s("y")
                + struct.pack("<Q", 8) + s("z") + struct.pack("<Q", 0)
                + struct.pack("<I", 1) + s(img) + struct.pack("<QQq", 5, 300, -7)
                + struct.pack("<I", 2)
                + struct.pack("<I", 2) + s(meta) + struct.pack("<Qq", 9, 10)
                + struct.pack("<I", 1) + s(lab) + struct.pack("<Qq", 20, 2**62))
    assert header.endswith(expected)
    # Order kept as written; two fields of a file may share one file.
    shared = [WriterFile(img, 5, 1, 1, field_files=(WriterFieldFile(2, lab, 2, 3),
                                                     WriterFieldFile(1, lab, 2, 3)))]
    m = ScheduleFile(write(tmp_path / "s.sched", shared, fields)).header.map
    assert [ff.field for ff in m.files[0].field_files] == [2, 1]
    assert m.place_of(0, 1) == m.place_of(0, 2) == (lab, 2, 3) and m.paths_of(0) == (img, lab)


FILE_A = "/d/a.h5"
FILE_B = "/d/b.h5"


def field_file(field=1, path="/d/la.h5"):
    return WriterFieldFile(field, path, 1, 1)


def two_files(a_field_files=(), b_field_files=()):
    return [WriterFile(FILE_A, 2, 10, 1, field_files=a_field_files),
            WriterFile(FILE_B, 1, 10, 1, field_files=b_field_files)]


INVALID = {
    "field index past the fields": (two_files((field_file(2),)), "of field 2"),
    "negative field index": (two_files((field_file(-1),)), "outside"),
    "a field twice in one file": (two_files((field_file(1), field_file(1, "/d/lb.h5"))),
                                  "repeats field 1"),
    "the file's own path": (two_files((field_file(1, FILE_A),)), "names the file itself"),
    "empty path": (two_files((field_file(1, ""),)), "not absolute"),
    "relative path": (two_files((field_file(1, "la.h5"),)), "not absolute"),
    "every field elsewhere": (two_files((field_file(0), field_file(1, "/d/lb.h5"))),
                              "every field of"),
    "another file's own path": (two_files((field_file(1, FILE_B),)), "listed twice"),
    "a later file's field file is an earlier file": (two_files((), (field_file(1, FILE_A),)),
                                                     "listed twice"),
    "one field file in two files": (two_files((field_file(),), (field_file(),)),
                                    "listed twice"),
    "not a WriterFieldFile": (two_files(((1, "/d/la.h5", 1, 1),)), "not a WriterFieldFile"),
    "size beyond u64": (two_files((WriterFieldFile(1, "/d/la.h5", 2**64, 1),)), "size of"),
    "mtime beyond i64": (two_files((WriterFieldFile(1, "/d/la.h5", 1, 2**63),)), "mtime_ns"),
}


@pytest.mark.parametrize("files,message", INVALID.values(), ids=INVALID.keys())
def test_writer_refuses_what_the_sample_map_refuses(tmp_path, files, message):
    with pytest.raises(ValueError, match=message):
        write(tmp_path / "bad.sched", files, [WriterField("x"), WriterField("y")])
    assert os.listdir(tmp_path) == []


def test_writer_accepts_the_neighbours_of_the_invalid_cases(tmp_path):
    # Field files in both files, each of its own path; one field elsewhere.
    files = two_files((field_file(),), (field_file(1, "/d/lb.h5"),))
    assert version_of(write(tmp_path / "ok.sched", files,
                            [WriterField("x"), WriterField("y")])) == 3


def map_file(path, field_files=()):
    return MapFile(path, 2, 1, 1, tuple(FieldFile(f, p) for f, p in field_files))


@pytest.mark.parametrize("files,message", [
    ([map_file(FILE_A, [(2, "/d/l")])], "of field 2"),
    ([map_file(FILE_A, [(1, "")])], "no path"),
    ([map_file(FILE_A, [(1, FILE_A)])], "names the file itself"),
    ([map_file(FILE_A, [(1, "/d/l"), (1, "/d/m")])], "repeats field 1"),
    ([map_file(FILE_A, [(0, "/d/l"), (1, "/d/m")])], "every field of"),
    ([map_file(FILE_A, [(1, FILE_B)]), map_file(FILE_B)], "listed twice"),
    ([map_file(FILE_A), map_file(FILE_B, [(1, FILE_A)])], "listed twice"),
    ([map_file(FILE_A, [(1, "/d/l")]), map_file(FILE_B, [(1, "/d/l")])], "listed twice"),
], ids=["field past the fields", "no path", "own path", "field twice", "every field elsewhere",
        "another file's path", "an earlier file's path", "one field file in two files"])
def test_sample_map_refuses_what_the_cpp_map_refuses(files, message):
    with pytest.raises(ValueError, match=message):
        SampleMap(files, [MapField("x"), MapField("y")])


def test_reader_refuses_an_impossible_field_file_count(tmp_path):
    files, fields = patchcamelyon(tmp_path, rows=(4,))
    out = write(tmp_path / "c.sched", files, fields)

    def impossible_count(data):
        # The count follows the file's path, rows, size and mtime.
        path = os.fsencode(files[0].path)
        at = data.index(path) + len(path) + 24
        assert struct.unpack_from("<I", data, at)[0] == 1
        struct.pack_into("<I", data, at, 0xFFFFFFF0)

    edit(out, impossible_count)
    with pytest.raises(ScheduleFileError, match="field file count") as e:
        ScheduleFile(out)
    assert e.value.code == "corrupt"


def test_reader_refuses_version_6_and_names_the_versions_it_reads(tmp_path):
    files, fields = patchcamelyon(tmp_path)
    out = write(tmp_path / "v6.sched", files, fields)
    edit(out, lambda data: struct.pack_into("<I", data, VERSION_AT, 6))
    with pytest.raises(ScheduleFileError, match="versions 1 to 5") as e:
        ScheduleFile(out)
    assert e.value.code == "bad-version"


# -- the dataset check ----------------------------------------------------------

def test_dataset_check_compares_the_file_the_field_lives_in(tmp_path):
    files, fields = patchcamelyon(tmp_path)
    f = ScheduleFile(write(tmp_path / "c.sched", files, fields))
    img, lab = files[1].path, files[1].field_files[0].path
    # Each field against its own file, by path among several files.
    ScheduleSampler(f, rank=0, dataset=fingerprint_dataset(img, "x", 3, 12))
    ScheduleSampler(f, rank=0, dataset=fingerprint_dataset(lab, "/y", 3, 8))
    f.check_dataset(fingerprint_dataset(lab, "y", 3, 8), path=True)
    # The labels file given with the images' dataset, and the other way round.
    with pytest.raises(DatasetMismatchError, match=re.escape(f"is in '{img}', not in '{lab}'")):
        f.check_dataset(fingerprint_dataset(lab, "x", 3, 12))
    with pytest.raises(DatasetMismatchError, match=re.escape(f"is in '{lab}', not in '{img}'")):
        f.check_dataset(fingerprint_dataset(img, "y", 3, 8))
    # A labels file rewritten since: named, with its new size; the images still match.
    stamped(Path(lab), 99)
    with pytest.raises(DatasetMismatchError, match=re.escape(f"file size of '{lab}' is 99")):
        ScheduleSampler(f, rank=0, dataset=fingerprint_dataset(lab, "y", 3, 8))
    f.check_dataset(fingerprint_dataset(img, "x", 3, 12))


def test_dataset_check_of_a_one_file_map_uses_the_field_to_pick_the_file(tmp_path):
    """With one file and no path check, the field names the file whose stat
    is compared (a fingerprint of a labels file that is not under its
    recorded path, e.g. a copy, still matches by its size and mtime)."""
    files, fields = patchcamelyon(tmp_path, rows=(4,))
    f = ScheduleFile(write(tmp_path / "one.sched", files, fields))
    lab = files[0].field_files[0]
    copy = tmp_path / "copy.h5"
    copy.write_bytes(Path(lab.path).read_bytes())
    os.utime(copy, ns=(lab.mtime_ns, lab.mtime_ns))
    f.check_dataset(fingerprint_dataset(str(copy), "y", 4, 8))
    with pytest.raises(DatasetMismatchError, match="file size of"):
        f.check_dataset(fingerprint_dataset(str(copy), "x", 4, 12))
    with pytest.raises(DatasetMismatchError, match="files are"):
        f.check_dataset(fingerprint_dataset(str(copy), "y", 4, 8), path=True)


def test_sampler_checks_real_h5py_datasets_in_their_files(tmp_path):
    h5py = pytest.importorskip("h5py")
    d = tmp_path / "h5"
    d.mkdir()
    files = []
    for k, n in enumerate((5, 2)):
        with h5py.File(d / f"img_{k}.h5", "w") as h:
            h["x"] = np.zeros((n, 3), dtype=np.float32)
        with h5py.File(d / f"lab_{k}.h5", "w") as h:
            h["y"] = np.arange(n, dtype=np.int64)
        img, lab = os.path.realpath(d / f"img_{k}.h5"), os.path.realpath(d / f"lab_{k}.h5")
        files.append(WriterFile(img, n, *stat_of(img),
                                field_files=(WriterFieldFile(1, lab, *stat_of(lab)),)))
    sched = write(tmp_path / "h.sched", files, [WriterField("x", 12), WriterField("y", 8)])
    with h5py.File(d / "lab_1.h5", "r") as h:
        ScheduleSampler(sched, rank=0, dataset=h["y"])
    with h5py.File(d / "img_0.h5", "r") as h:
        ScheduleSampler(sched, rank=0, dataset=h["x"])
    # Rewritten since (an mtime set outright: a rewrite within the clock's
    # granularity could keep the old one).
    os.utime(d / "lab_0.h5", ns=(1, 1))
    with h5py.File(d / "lab_0.h5", "r") as h, pytest.raises(DatasetMismatchError,
                                                             match="lab_0.h5"):
        ScheduleSampler(sched, rank=0, dataset=h["y"])


# -- schedule_for ---------------------------------------------------------------

def sequential_loader(n):
    torch = pytest.importorskip("torch")
    data = torch.utils.data
    dataset = list(range(n))
    return data.DataLoader(dataset, batch_size=2, sampler=data.SequentialSampler(dataset))


def h5_files(h5py, directory, names, field, rows):
    directory.mkdir(parents=True, exist_ok=True)
    for name, n in zip(names, rows):
        with h5py.File(directory / name, "w") as h:
            h[field] = np.arange(n, dtype=np.int32)
    return [os.path.realpath(directory / name) for name in names]


def test_schedule_for_pairs_field_globs_in_sorted_order(tmp_path):
    """Names whose byte-wise order is not their numeric order: a10 before a9,
    B before a; labels in another directory with a different prefix. Rows
    come from the first field in the first field's files."""
    h5py = pytest.importorskip("h5py")
    from prescient._schedule_for import schedule_for

    names = ["a9.h5", "B.h5", "a10.h5"]
    imgs = h5_files(h5py, tmp_path / "img", names, "x", (3, 2, 4))
    labs = h5_files(h5py, tmp_path / "lab", ["lab_" + n for n in names], "y", (3, 2, 4))
    out = schedule_for(sequential_loader(9), 1, tmp_path / "s.sched",
                       datasets=[f"{tmp_path}/img/*.h5:x", f"{tmp_path}/lab/lab_*.h5:y",
                                 f"{tmp_path}/img/*.h5:z"])
    assert version_of(out) == 3
    m = ScheduleFile(out).header.map
    order = [1, 2, 0]  # B, a10, a9
    assert [f.path for f in m.files] == [imgs[i] for i in order]
    assert [f.rows for f in m.files] == [2, 4, 3]
    assert [d.dataset for d in m.fields] == ["x", "y", "z"]
    for f, i in zip(m.files, order):
        # Only y is elsewhere: z's glob names the images' own files.
        assert f.field_files == (FieldFile(1, labs[i], *stat_of(labs[i])),)
        assert (f.size, f.mtime_ns) == stat_of(imgs[i])
        assert m.place_of(m.file_index(labs[i]), 2).path == imgs[i]


def test_schedule_for_same_files_for_every_field_writes_version_2(tmp_path):
    from prescient._schedule_for import schedule_for

    paths = [stamped(tmp_path / f"p{k}.h5", 10) for k in range(2)]
    out = schedule_for(sequential_loader(6), 1, tmp_path / "s.sched", rows_per_file=3,
                       datasets=[f"{tmp_path}/p*.h5:x", f"{tmp_path}/p*.h5:y"])
    assert version_of(out) == 2
    m = ScheduleFile(out).header.map
    assert [f.path for f in m.files] == [os.path.realpath(p) for p in paths]
    assert not m.has_field_files


def test_schedule_for_needs_as_many_files_per_field(tmp_path):
    from prescient._schedule_for import _map_files

    for k in range(3):
        stamped(tmp_path / f"img_{k}.h5", 10)
    for k in range(2):
        stamped(tmp_path / f"lab_{k}.h5", 10)
    images, labels = f"{tmp_path}/img_*.h5:x", f"{tmp_path}/lab_*.h5:y"
    with pytest.raises(ValueError,
                       match=re.escape(f"'{labels}' names 2 files but '{images}' names 3")):
        _map_files([images, labels], 1)
    # A pairing that puts one file in two places of the map is refused by the writer.
    files, fields = _map_files([f"{tmp_path}/img_[01].h5:x", f"{tmp_path}/img_[12].h5:y"], 1)
    with pytest.raises(ValueError, match="listed twice"):
        write(tmp_path / "bad.sched", files, fields)


# -- with the C++ tool ----------------------------------------------------------

def cpp_generate(tool, out, *datasets, store="lists"):
    run_tool(tool, "generate", "--source", "sequential", "--epochs", 1, "--quiet",
             *[a for d in datasets for a in ("--dataset", d)], "--rows-per-file", 4,
             "--store", store, "--output", out)
    return out


def test_python_written_version_3_passes_the_cpp_tool(tool, tmp_path):
    files, fields = patchcamelyon(tmp_path)
    out = write(tmp_path / "p.sched", files, fields, ranks=2)
    text = run_tool(tool, "inspect", out).stdout  # verifies every part by default
    assert "checksums:   ok (header, index and 2 parts)" in text, text
    lab0, lab1 = files[0].field_files[0].path, files[1].field_files[0].path
    assert f"first:     '{files[0].path}': 4 rows" in text and f"; y in '{lab0}'" in text, text
    assert f"last:      '{files[1].path}': 3 rows" in text and f"; y in '{lab1}'" in text, text
    for path in (files[1].path, lab1):
        assert "matches the map" in run_tool(tool, "inspect", out, "--check-dataset",
                                             path).stdout
    dump = run_tool(tool, "dump", out, "--rank", 1, "--epoch", 0).stdout
    assert [int(x) for x in dump.split()] == [1, 3, 5]


def test_cpp_written_version_3_is_read_with_its_field_files(tool, tmp_path):
    d = tmp_path / "pcam"
    for k in range(3):
        stamped(d / f"img{k}.h5", 100 + k)
        stamped(d / f"lab{k}.h5", 10 + k)
    out = cpp_generate(tool, tmp_path / "c.sched", f"{d}/img*.h5:x", f"{d}/lab*.h5:y")
    assert version_of(out) == 3
    f = ScheduleFile(out)
    m = f.header.map
    assert [d_.dataset for d_ in m.fields] == ["x", "y"] and m.num_samples == 12
    for k, mf in enumerate(m.files):
        img, lab = os.path.realpath(d / f"img{k}.h5"), os.path.realpath(d / f"lab{k}.h5")
        assert (mf.path, mf.rows, mf.size, mf.mtime_ns) == (img, 4, *stat_of(img))
        assert mf.field_files == (FieldFile(1, lab, *stat_of(lab)),)
        assert m.file_index(lab) == k
    assert f.part(0, 0)[0].tolist() == list(range(12))
    # The dataset check of the labels uses the labels file.
    lab2 = str(d / "lab2.h5")
    ScheduleSampler(f, rank=0, dataset=fingerprint_dataset(lab2, "y", 4, 0))
    # A recipe carries the same map.
    recipe = cpp_generate(tool, tmp_path / "r.sched", f"{d}/img*.h5:x", f"{d}/lab*.h5:y",
                          store="recipe")
    assert version_of(recipe) == 3 and ScheduleFile(recipe).header.map == m


def test_python_rewrite_of_a_cpp_version_3_file_is_byte_identical(tool, tmp_path):
    d = tmp_path / "pcam"
    for k in range(2):
        stamped(d / f"img{k}.h5", 100 + k)
        stamped(d / f"lab{k}.h5", 10 + k)
    cpp = cpp_generate(tool, tmp_path / "cpp.sched", f"{d}/img*.h5:x",
                       f"{d}/lab*.h5:y", f"{d}/img*.h5:meta")
    f = ScheduleFile(cpp)
    h = f.header
    files = [WriterFile(m.path, m.rows, m.size, m.mtime_ns,
                        field_files=tuple(WriterFieldFile(ff.field, ff.path, ff.size, ff.mtime_ns)
                                          for ff in m.field_files))
             for m in h.map.files]
    python = tmp_path / "python.sched"
    write_schedule(python, parts={(e, r): f.part(r, e) for e in range(h.epochs)
                                  for r in range(h.layout.ranks)},
                   ranks=h.layout.ranks, ranks_per_node=h.layout.ranks_per_node,
                   num_samples=h.num_samples, files=files,
                   fields=[WriterField(m.dataset, m.row_bytes) for m in h.map.fields],
                   workers=h.layout.workers, batch_size=h.layout.batch_size, seed=h.seed,
                   source=h.source, parameters=h.parameters, generator=h.generator)
    assert python.read_bytes() == cpp.read_bytes()


def test_cpp_writes_version_2_when_every_field_is_in_the_same_files(tool, tmp_path):
    d = tmp_path / "same"
    for k in range(2):
        stamped(d / f"f{k}.h5", 50)
    out = cpp_generate(tool, tmp_path / "s.sched", f"{d}/f*.h5:x", f"{d}/f*.h5:y")
    assert version_of(out) == 2
    assert not ScheduleFile(out).header.map.has_field_files

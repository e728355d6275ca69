"""python/prescient/_schedule_writer.py: schedule files written in Python are read back
exactly by the Python reader (prescient_sampler._format) and by the C++ reader
(prescient-schedule inspect/dump), and are byte-identical to what the C++ writer writes
for the same schedule; bad inputs raise ValueError and leave no file behind.

    env/run python3 -m pytest -q tests/python/follow/test_schedule_writer.py

The C++ cases need build/dev/scheduler/tool/prescient-schedule (PRESCIENT_BUILD_DIR
overrides the build tree); without it they skip, or fail when PRESCIENT_REQUIRE_PLUGIN=1.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

np = pytest.importorskip("numpy", reason="numpy is missing: run this suite inside env/run")

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(REPO / "scheduler" / "python"))
sys.path.insert(0, str(REPO / "tests" / "python" / "vol"))

from prescient_sampler._format import ScheduleFile  # noqa: E402
from voltest_support import schedule_tool  # noqa: E402

import prescient._schedule_writer as _writer  # noqa: E402
from prescient._schedule_writer import WriterField, WriterFile, write_schedule  # noqa: E402


# -- helpers ------------------------------------------------------------------

@pytest.fixture(scope="module")
def tool() -> str:
    return schedule_tool()


def run_tool(tool, *args, check=True) -> subprocess.CompletedProcess:
    result = subprocess.run([tool, *map(str, args)], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"prescient-schedule {' '.join(map(str, args))} failed "
                             f"({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def dump_steps(tool, path, rank, epoch):
    """A part's steps as lists of ids, through the C++ reader."""
    out = run_tool(tool, "dump", path, "--rank", rank, "--epoch", epoch).stdout
    return [[int(x) for x in line.split()] for line in out.splitlines()]


def steps_of(samples, bounds):
    ids, b = np.asarray(samples).tolist(), np.asarray(bounds).tolist()
    return [ids[b[s]:b[s + 1]] for s in range(len(b) - 1)]


def random_parts(rng, epochs, ranks, num_samples, steps_per_epoch, max_step=9,
                 empty=()):
    """{(epoch, rank): (samples, boundaries)} with steps of random sizes (0..max_step);
    the (epoch, rank) pairs in `empty` have no samples but the epoch's steps."""
    parts = {}
    for epoch in range(epochs):
        steps = steps_per_epoch[epoch]
        for rank in range(ranks):
            sizes = (np.zeros(steps, dtype=np.int64) if (epoch, rank) in empty
                     else rng.integers(0, max_step + 1, size=steps))
            bounds = np.concatenate(([0], np.cumsum(sizes))).astype(np.uint64)
            samples = rng.integers(0, num_samples, size=int(bounds[-1]), dtype=np.int64)
            parts[(epoch, rank)] = (samples, bounds)
    return parts


def three_files(tmp_path):
    files = []
    for i, rows in enumerate((40, 30, 50)):
        p = tmp_path / f"part{i}.h5"
        p.write_bytes(b"\0" * (100 + i))
        st = os.stat(p)
        files.append(WriterFile(os.path.realpath(p), rows, st.st_size, st.st_mtime_ns))
    return files


TWO_FIELDS = (WriterField("images", 12), WriterField("/labels", 8))


def assert_reads_back(path, parts, *, ranks, ranks_per_node, num_samples, files=(),
                      fields=(), workers=0, batch_size=1, seed=0, source="import",
                      parameters="", generator="prescient-follow 0.1.0"):
    f = ScheduleFile(path)
    h = f.header
    epochs = 1 + max(e for e, _ in parts)
    assert (h.source, h.parameters, h.generator) == (source, parameters, generator)
    assert (h.layout.ranks, h.layout.ranks_per_node, h.layout.workers,
            h.layout.batch_size) == (ranks, ranks_per_node, workers, batch_size)
    assert (h.epochs, h.num_samples, h.seed, h.storage) == (epochs, num_samples, seed, 0)
    assert [(m.path, m.rows, m.size, m.mtime_ns, m.group, m.rows_per_sample)
            for m in h.map.files] == \
        [(w.path, w.rows, w.size, w.mtime_ns, w.group, w.rows_per_sample) for w in files]
    version = (5 if any(w.rows_per_sample > 1 for w in files) else 4 if any(w.group for w in files)
               else 3 if any(w.field_files for w in files) else 2)
    with open(path, "rb") as raw:
        assert int.from_bytes(raw.read(12)[8:], "little") == version
    assert [(m.dataset, m.row_bytes) for m in h.map.fields] == \
        [(w.dataset, w.row_bytes) for w in fields]
    for (epoch, rank), (samples, bounds) in parts.items():
        got_samples, got_bounds = f.part(rank, epoch)
        assert got_samples.dtype == np.dtype("<u4") and got_bounds.dtype == np.dtype("<u8")
        np.testing.assert_array_equal(got_samples, np.asarray(samples, dtype=np.uint32))
        np.testing.assert_array_equal(got_bounds, np.asarray(bounds, dtype=np.uint64))


def assert_cpp_reads_back(tool, path, parts, *, ranks):
    epochs = 1 + max(e for e, _ in parts)
    report = run_tool(tool, "inspect", path).stdout
    assert f"checksums:   ok (header, index and {epochs * ranks} parts)" in report, report
    for (epoch, rank), (samples, bounds) in parts.items():
        assert dump_steps(tool, path, rank, epoch) == steps_of(samples, bounds)
    return report


# -- cases --------------------------------------------------------------------

def case_ranks_epochs_empty_parts(tmp_path):
    """4 ranks x 3 epochs, steps of 0..9 samples, other step counts per epoch, empty
    parts; a map of 3 files and 2 fields."""
    rng = np.random.default_rng(1)
    parts = random_parts(rng, 3, 4, 120, steps_per_epoch=(6, 3, 8),
                         empty={(0, 2), (1, 0), (1, 1), (1, 2), (1, 3)})
    return parts, dict(ranks=4, ranks_per_node=2, num_samples=120, files=three_files(tmp_path),
                       fields=TWO_FIELDS, workers=3, batch_size=5, seed=2**64 - 1,
                       source="plan", parameters="order=global,cache=25%",
                       generator="prescient-follow test ✓")


def case_abstract(tmp_path):
    """No files (abstract samples), no fields; one rank, odd sample counts (padding)."""
    rng = np.random.default_rng(2)
    parts = random_parts(rng, 2, 1, 7, steps_per_epoch=(3, 5), max_step=5)
    return parts, dict(ranks=1, ranks_per_node=1, num_samples=7)


def case_abstract_with_row_size(tmp_path):
    """No files, one nameless field: the size of an abstract sample (for simulate)."""
    parts = {(0, 0): ([2, 0, 1], [0, 3]), (0, 1): ([1, 1, 1], [0, 3])}
    return parts, dict(ranks=2, ranks_per_node=2, num_samples=3,
                       fields=(WriterField("", 4096),))


def case_zero_steps(tmp_path):
    """An epoch of no steps at all (boundaries [0]) beside a normal one."""
    parts = {(0, 0): ([], [0]), (1, 0): ([4, 3], [0, 1, 2])}
    return parts, dict(ranks=1, ranks_per_node=1, num_samples=5)


def case_groups(tmp_path):
    """A map of groups of one file (format version 4): PDEBench's seeds, 3 groups of
    101 rows, and the file's root beside them."""
    p = tmp_path / "seeds.h5"
    p.write_bytes(b"\0" * 300)
    st = os.stat(p)
    path = os.path.realpath(p)
    files = [WriterFile(path, 101, st.st_size, st.st_mtime_ns, group=g)
             for g in ("0000", "0001", "train/0002")]
    files.append(WriterFile(path, 5, st.st_size, st.st_mtime_ns))
    parts = {(0, 0): ([300, 0, 101, 307], [0, 2, 4])}
    return parts, dict(ranks=1, ranks_per_node=1, num_samples=308, files=files,
                       fields=(WriterField("data", 16),))


def case_whole_groups(tmp_path):
    """Groups read whole, each one sample of all its rows (format version 5): 3 groups of
    256, 101 and 256 rows, and the file's root beside them, a sample a row."""
    p = tmp_path / "seeds.h5"
    p.write_bytes(b"\0" * 300)
    st = os.stat(p)
    path = os.path.realpath(p)
    files = [WriterFile(path, rows, st.st_size, st.st_mtime_ns, group=g, rows_per_sample=rows)
             for g, rows in (("0000", 256), ("0001", 101), ("train/0002", 256))]
    files.append(WriterFile(path, 5, st.st_size, st.st_mtime_ns))
    parts = {(0, 0): ([7, 0, 1, 3, 2], [0, 2, 5])}
    return parts, dict(ranks=1, ranks_per_node=1, num_samples=8, files=files,
                       fields=(WriterField("data", 16),))


CASES = [case_ranks_epochs_empty_parts, case_abstract, case_abstract_with_row_size,
         case_zero_steps, case_groups, case_whole_groups]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__[5:])
def test_python_reader_reads_what_was_written(tmp_path, case):
    parts, kwargs = case(tmp_path)
    out = tmp_path / "w.sched"
    write_schedule(out, parts=parts, **kwargs)
    assert_reads_back(out, parts, **kwargs)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__[5:])
def test_cpp_reader_reads_what_was_written(tool, tmp_path, case):
    parts, kwargs = case(tmp_path)
    out = tmp_path / "w.sched"
    write_schedule(str(out), parts=parts, **kwargs)
    report = assert_cpp_reads_back(tool, out, parts, ranks=kwargs["ranks"])
    if case is case_whole_groups:
        assert "map:         4 files, 5..256 rows per file, 8 samples, 3 of them a sample of " \
            "several rows each" in report, report
    if kwargs.get("files") and len(kwargs["files"]) == 3:
        assert f"map:         3 files, 30..50 rows per file, {kwargs['num_samples']}" in report
        assert "fields:      images (12 bytes per row), /labels (8 bytes per row)" in report


def test_inputs_of_any_integer_type(tmp_path):
    """Lists, int64 / uint32 / uint64 arrays, numpy integers for the scalars."""
    parts = {(0, 0): ([5, 0, 2], [0, 2, 3]),
             (0, 1): (np.array([1, 4], dtype=np.int64), np.array([0, 0, 2], dtype=np.int32)),
             (np.int64(1), np.uint8(0)): (np.array([3], dtype=np.uint32), (0, 1, 1)),
             (1, 1): (np.array([], dtype=np.float64), np.zeros(3, dtype=np.uint64))}
    out = tmp_path / "t.sched"
    write_schedule(out, parts=parts, ranks=np.uint32(2), ranks_per_node=1,
                   num_samples=np.int64(6), seed=np.uint64(9))
    f = ScheduleFile(out)
    assert (f.header.epochs, f.header.num_samples, f.header.seed) == (2, 6, 9)
    assert steps_of(*f.part(1, 0)) == [[], [1, 4]]
    assert steps_of(*f.part(0, 1)) == [[3], []]
    assert steps_of(*f.part(1, 1)) == [[], []]


# -- byte-identical to the C++ writer -------------------------------------------

def rewrite_in_python(source_file, out):
    """Reads a schedule with the Python reader and writes it again with write_schedule."""
    f = ScheduleFile(source_file)
    h = f.header
    parts = {(e, r): f.part(r, e) for e in range(h.epochs) for r in range(h.layout.ranks)}
    write_schedule(out, parts=parts, ranks=h.layout.ranks,
                   ranks_per_node=h.layout.ranks_per_node, num_samples=h.num_samples,
                   files=[WriterFile(m.path, m.rows, m.size, m.mtime_ns) for m in h.map.files],
                   fields=[WriterField(m.dataset, m.row_bytes) for m in h.map.fields],
                   workers=h.layout.workers, batch_size=h.layout.batch_size, seed=h.seed,
                   source=h.source, parameters=h.parameters, generator=h.generator)


@pytest.mark.parametrize("flags", [
    # a planned, load-balanced order: steps of different sizes; 3 files, 2 fields
    ["--source", "plan", "--plan", "solar=on,cache=25%", "--samples", 120, "--epochs", 3,
     "--ranks", 4, "--ranks-per-node", 2, "--batch-size", 5, "--workers", 2, "--seed", 7,
     "--files-from", "{files}", "--dataset", "images", "--dataset", "/labels",
     "--row-bytes", 12, "--row-bytes", 8],
    # abstract samples, 31 per rank (the samples need padding before the boundaries)
    ["--source", "numpy", "--samples", 123, "--epochs", 2, "--ranks", 4, "--batch-size", 4,
     "--seed", 3],
    # one file, one field, a short last batch
    ["--source", "torch-distributed", "--samples", 50, "--epochs", 2, "--ranks", 3,
     "--batch-size", 8, "--dataset", "{one}:x", "--row-bytes", 4],
], ids=["plan-3-files", "numpy-abstract", "torch-one-file"])
def test_byte_identical_to_the_cpp_writer(tool, tmp_path, flags):
    files = three_files(tmp_path)
    listing = tmp_path / "files.txt"
    listing.write_text("".join(f"{f.path} {f.rows}\n" for f in files))
    args = [str(a).format(files=listing, one=files[0].path) for a in flags]
    cpp = tmp_path / "cpp.sched"
    run_tool(tool, "generate", *args, "--store", "lists", "--quiet", "--output", cpp)
    python = tmp_path / "python.sched"
    rewrite_in_python(cpp, python)
    assert python.read_bytes() == cpp.read_bytes()


# -- invalid inputs -------------------------------------------------------------

def valid_kwargs():
    return dict(parts={(0, 0): ([0, 1], [0, 1, 2]), (0, 1): ([2], [0, 0, 1])}, ranks=2,
                ranks_per_node=1, num_samples=3)


FILE_A = WriterFile("/data/a.h5", 2, 10, 1)
FILE_B = WriterFile("/data/b.h5", 1, 10, 1)

INVALID = {
    "sample id >= num_samples": dict(parts={(0, 0): ([3], [0, 1])}, ranks=1),
    "negative sample id": dict(parts={(0, 0): ([-1], [0, 1])}, ranks=1),
    "float sample ids": dict(parts={(0, 0): ([0.5], [0, 1])}, ranks=1),
    "2-D samples": dict(parts={(0, 0): ([[0]], [0, 1])}, ranks=1),
    "boundaries not from 0": dict(parts={(0, 0): ([0], [1, 1])}, ranks=1),
    "boundaries short of the samples": dict(parts={(0, 0): ([0, 1], [0, 1])}, ranks=1),
    "boundaries past the samples": dict(parts={(0, 0): ([0], [0, 2])}, ranks=1),
    "decreasing boundaries": dict(parts={(0, 0): ([0, 1], [0, 2, 1, 2])}, ranks=1),
    "no boundaries": dict(parts={(0, 0): ([], [])}, ranks=1),
    "missing rank": dict(parts={(0, 0): ([0], [0, 1])}),
    "missing epoch": dict(parts={(0, 0): ([0], [0, 1]), (0, 1): ([0], [0, 1]),
                                 (2, 0): ([0], [0, 1]), (2, 1): ([0], [0, 1])}),
    "rank >= ranks": dict(parts={(0, 0): ([0], [0, 1]), (0, 1): ([0], [0, 1]),
                                 (0, 2): ([0], [0, 1])}),
    "negative epoch": dict(parts={(-1, 0): ([0], [0, 1])}, ranks=1),
    "key not a pair": dict(parts={0: ([0], [0, 1])}, ranks=1),
    "part not a pair": dict(parts={(0, 0): [0]}, ranks=1),
    "no parts": dict(parts={}),
    "step counts differ within an epoch": dict(parts={(0, 0): ([0, 1], [0, 1, 2]),
                                                      (0, 1): ([2], [0, 1])}),
    "num_samples 0": dict(num_samples=0, parts={(0, 0): ([], [0])}, ranks=1),
    "num_samples 2^32": dict(num_samples=2**32),
    "num_samples not an integer": dict(num_samples=3.0),
    "ranks 0": dict(ranks=0),
    "ranks_per_node 0": dict(ranks_per_node=0),
    "batch_size 0": dict(batch_size=0),
    "negative workers": dict(workers=-1),
    "seed 2^64": dict(seed=2**64),
    "files without fields": dict(files=[FILE_A, FILE_B]),
    "rows do not add up": dict(files=[FILE_A], fields=[WriterField("x")]),
    "file twice": dict(files=[FILE_A, WriterFile("/data/a.h5", 1, 10, 1)],
                       fields=[WriterField("x")]),
    "file of no rows": dict(files=[FILE_A, FILE_B, WriterFile("/data/c.h5", 0, 1, 1)],
                            fields=[WriterField("x")]),
    "group twice in a file": dict(
        files=[WriterFile("/data/a.h5", 2, 10, 1, group="g"),
               WriterFile("/data/a.h5", 1, 10, 1, group="g")], fields=[WriterField("x")]),
    "group with a leading /": dict(
        files=[FILE_A, WriterFile("/data/a.h5", 1, 10, 1, group="/g")], fields=[WriterField("x")]),
    "group with a trailing /": dict(
        files=[FILE_A, WriterFile("/data/a.h5", 1, 10, 1, group="g/")], fields=[WriterField("x")]),
    "rows per sample that do not divide the rows": dict(
        files=[WriterFile("/data/a.h5", 3, 10, 1, rows_per_sample=2)], fields=[WriterField("x")]),
    "rows per sample 0": dict(
        files=[WriterFile("/data/a.h5", 3, 10, 1, rows_per_sample=0)], fields=[WriterField("x")]),
    "relative path": dict(files=[WriterFile("a.h5", 3, 10, 1)], fields=[WriterField("x")]),
    "dataset twice (leading / not significant)": dict(
        files=[FILE_A, FILE_B], fields=[WriterField("x"), WriterField("/x")]),
    "negative row_bytes": dict(fields=[WriterField("x", -1)]),
    "mtime beyond i64": dict(files=[FILE_A, WriterFile("/data/b.h5", 1, 10, 2**63)],
                             fields=[WriterField("x")]),
    "string over 1 MiB": dict(parameters="p" * ((1 << 20) + 1)),
    "source not a str": dict(source=None),
}


@pytest.mark.parametrize("change", INVALID.values(), ids=INVALID.keys())
def test_invalid_inputs_raise_and_write_nothing(tmp_path, change):
    kwargs = dict(valid_kwargs(), **change)
    out = tmp_path / "bad.sched"
    with pytest.raises(ValueError):
        write_schedule(out, **kwargs)
    assert os.listdir(tmp_path) == []


def test_valid_kwargs_of_the_invalid_cases_are_valid(tmp_path):
    write_schedule(tmp_path / "ok.sched", **valid_kwargs())
    ScheduleFile(tmp_path / "ok.sched").part(1, 0)


# -- the file on disk -------------------------------------------------------------

def test_mode_0600_and_replaced_atomically(tmp_path):
    out = tmp_path / "s.sched"
    out.write_bytes(b"old contents")
    os.chmod(out, 0o644)
    inode = os.stat(out).st_ino
    write_schedule(out, **valid_kwargs())
    st = os.stat(out)
    assert st.st_mode & 0o777 == 0o600
    assert st.st_ino != inode  # a new file renamed over the old one, not rewritten in place
    assert os.listdir(tmp_path) == ["s.sched"]
    ScheduleFile(out).part(0, 0)


def test_stale_temporary_is_reused_with_mode_0600(tmp_path):
    out = tmp_path / "s.sched"
    stale = tmp_path / f"s.sched.tmp-{os.getpid()}"
    stale.write_bytes(b"x" * 100000)
    os.chmod(stale, 0o666)
    write_schedule(out, **valid_kwargs())
    assert os.stat(out).st_mode & 0o777 == 0o600
    assert os.listdir(tmp_path) == ["s.sched"]


def test_failed_rename_removes_the_temporary(tmp_path):
    out = tmp_path / "a-directory"
    out.mkdir()
    (out / "keep").write_text("x")  # os.replace cannot put a file over a non-empty directory
    with pytest.raises(OSError):
        write_schedule(out, **valid_kwargs())
    assert sorted(os.listdir(tmp_path)) == ["a-directory"]


def test_failed_write_removes_the_temporary_and_keeps_the_old_file(tmp_path, monkeypatch):
    out = tmp_path / "s.sched"
    out.write_bytes(b"old contents")
    real = _writer._write_sections

    def fail_midway(stream, *args):
        real(stream, *args)
        stream.flush()
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_writer, "_write_sections", fail_midway)
    with pytest.raises(OSError, match="No space left"):
        write_schedule(out, **valid_kwargs())
    assert os.listdir(tmp_path) == ["s.sched"]
    assert out.read_bytes() == b"old contents"


def test_two_million_samples(tmp_path):
    n = 2_000_000
    rng = np.random.default_rng(5)
    samples = rng.permutation(n).astype(np.uint32)
    bounds = np.arange(0, n + 1, 64, dtype=np.uint64)
    bounds = np.append(bounds, np.uint64(n)) if bounds[-1] != n else bounds
    parts = {(0, 0): (samples, bounds), (0, 1): (samples[::-1], bounds)}
    out = tmp_path / "big.sched"
    write_schedule(out, parts=parts, ranks=2, ranks_per_node=2, num_samples=n, batch_size=64)
    f = ScheduleFile(out)
    got, got_bounds = f.part(1, 0)
    np.testing.assert_array_equal(got, samples[::-1])
    np.testing.assert_array_equal(got_bounds, bounds)

"""Writer for Prescient schedule files (format version 2, 3 when a field is kept in a
file of its own, 4 when a file of the map is a group, 5 when a sample is more than
one row; storage "lists"), in pure
Python + NumPy.

The byte layout is specified in scheduler/README.md ("Schedule file format");
this module mirrors scheduler/core/schedule_writer.cc and schedule_format.cc
byte for byte: the same preamble, header field order, string encoding,
CRC-32s, index entries, alignment and zero padding, so the C++ reader
(ScheduleReader, prescient-schedule inspect/dump) and the Python reader
(prescient_sampler._format.ScheduleFile) read what it writes. Every input is
validated first, with the checks of the C++ writer and readers, and a
ValueError names what is wrong; nothing is written then.

The file is written to PATH.tmp-<pid> in the same directory (mode 0600) and
renamed over PATH, so readers never see a partial file; the temporary is
removed on any error. Sample lists are converted, checked and checksummed
with NumPy and zlib, with no per-sample Python loop.

    write_schedule("train.sched", parts={(0, 0): (ids, [0, 64, 128])}, ranks=1,
                   ranks_per_node=1, num_samples=1000,
                   files=[WriterFile("/data/train.h5", 1000, 4096000, 1700000000000000000)],
                   fields=[WriterField("images", 4096)])
"""

from __future__ import annotations

import dataclasses
import operator
import os
import struct
import zlib
from typing import List, Mapping, Sequence, Tuple

import numpy as np

MAGIC = b"\x89PSCH\r\n\x1a"
# Written: version 2 when no file of the map keeps a field in a file of its
# own or is a group, else 3 (which adds each file's field files), or 4 (each
# file's group) when a file is a group, or 5 (each file's rows per sample)
# when a sample is more than one row, as the C++ writer does, so readers
# that predate a version still read the schedules that do not need it.
FORMAT_VERSION = 5
_VERSION_WITH_GROUPS = 4
_VERSION_WITH_FIELD_FILES = 3
_VERSION_WITHOUT_FIELD_FILES = 2
STORAGE_LISTS = 0
PREAMBLE_SIZE = 80
INDEX_ENTRY_SIZE = 40
_MAX_STRING = 1 << 20
_U32_MAX = 0xFFFFFFFF
_U64_MAX = 0xFFFFFFFFFFFFFFFF
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
# Preamble without its own CRC (bytes 0..75): magic, version, storage,
# file size, header offset/size, index offset/size, data offset, header CRC,
# index CRC, reserved.
_PREAMBLE_BODY = struct.Struct("<8sIIQQQQQQIII")
# One index entry per (epoch, rank), epoch-major: samples offset, sample count,
# boundaries offset, steps, CRC of samples then boundaries, reserved.
_INDEX_ENTRY = np.dtype([("samples_offset", "<u8"), ("sample_count", "<u8"),
                         ("step_begin_offset", "<u8"), ("steps", "<u8"),
                         ("crc", "<u4"), ("reserved", "<u4")])
assert _INDEX_ENTRY.itemsize == INDEX_ENTRY_SIZE


@dataclasses.dataclass(frozen=True)
class WriterFieldFile:
    """A field of a WriterFile kept in a file of its own (same rows)."""
    field: int      # index into the fields
    path: str       # absolute, symbolic links resolved
    size: int       # st_size
    mtime_ns: int   # st_mtime_ns


@dataclasses.dataclass(frozen=True)
class WriterFile:
    """One file of the sample map, in sample order."""
    path: str       # absolute, symbolic links resolved
    rows: int       # rows of every field in this file
    size: int       # st_size
    mtime_ns: int   # st_mtime_ns
    # Fields kept in files of their own; the others are in `path` (at least one).
    field_files: Tuple[WriterFieldFile, ...] = ()
    # The group the fields are in, without leading or trailing '/' ("" = the
    # root): a group per sample (PDEBench's "0000/data") is a file of the map each.
    group: str = ""
    # Consecutive rows that make one sample (divides `rows`): a group read
    # whole by its sample has all its rows, and is one sample of the schedule.
    rows_per_sample: int = 1

    def __post_init__(self):
        object.__setattr__(self, "field_files", tuple(self.field_files))


@dataclasses.dataclass(frozen=True)
class WriterField:
    """One field (dataset) read per sample."""
    dataset: str        # dataset path inside each file; a leading '/' is not significant
    row_bytes: int = 0  # 0 = unknown


@dataclasses.dataclass(frozen=True)
class _Part:
    samples: np.ndarray  # '<u4', C-contiguous
    bounds: np.ndarray   # '<u8', C-contiguous, steps + 1 entries

    @property
    def steps(self) -> int:
        return len(self.bounds) - 1


# -- validation ---------------------------------------------------------------

def _integer(name: str, value, low: int, high: int) -> int:
    try:
        v = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, not {type(value).__name__}") from None
    if not low <= v <= high:
        raise ValueError(f"{name} = {v} is outside [{low}, {high}]")
    return v


def _string_bytes(name: str, value, encode=lambda s: s.encode("utf-8")) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a str, not {type(value).__name__}")
    try:
        data = encode(value)
    except UnicodeError as e:
        raise ValueError(f"{name} {value!r} cannot be encoded: {e}") from None
    if len(data) > _MAX_STRING:
        raise ValueError(f"{name} is {len(data)} bytes; header strings hold at most "
                         f"{_MAX_STRING}")
    return data


def _check_field_files(f: WriterFile, fields: int) -> None:
    """The checks of SampleMap's constructor on one file's field files: each
    of a field of the map, once, in a path other than the file's own, and not
    every field elsewhere (the file's own path must hold one)."""
    seen = set()
    for ff in f.field_files:
        where = f"sample map: a field file of {f.path!r}"
        if not isinstance(ff, WriterFieldFile):
            raise ValueError(f"{where} is a {type(ff).__name__}, not a WriterFieldFile")
        field = _integer(f"{where}: field", ff.field, 0, _U32_MAX)
        if field >= fields:
            raise ValueError(f"{where} is of field {field}, but there are {fields} fields")
        if not isinstance(ff.path, str) or not os.path.isabs(ff.path):
            raise ValueError(f"{where}: path {ff.path!r} is not absolute")
        if ff.path == f.path:
            raise ValueError(f"{where} names the file itself: leave field {field} out")
        if field in seen:
            raise ValueError(f"{where} repeats field {field}")
        seen.add(field)
        _integer(f"size of {ff.path!r}", ff.size, 0, _U64_MAX)
        _integer(f"mtime_ns of {ff.path!r}", ff.mtime_ns, _I64_MIN, _I64_MAX)
    if fields and len(seen) == fields:
        raise ValueError(f"sample map: every field of {f.path!r} is in another file (the "
                         "file's own path must hold at least one)")


def _format_version(files: Sequence[WriterFile]) -> int:
    if any(f.rows_per_sample != 1 for f in files):
        return FORMAT_VERSION
    if any(f.group for f in files):
        return _VERSION_WITH_GROUPS
    if any(f.field_files for f in files):
        return _VERSION_WITH_FIELD_FILES
    return _VERSION_WITHOUT_FIELD_FILES


def _check_map(files: Sequence[WriterFile], fields: Sequence[WriterField],
               num_samples: int) -> None:
    """The checks of SampleMap's constructor and of the readers' map check."""
    if files and not fields:
        raise ValueError("sample map: files but no field (dataset) to read in them")
    seen_datasets = set()
    for f in fields:
        if not isinstance(f.dataset, str):
            raise ValueError(f"sample map: field dataset {f.dataset!r} is not a str")
        bare = f.dataset.lstrip("/")  # a leading '/' is not significant
        if bare in seen_datasets:
            raise ValueError(f"sample map: dataset {f.dataset!r} is listed twice")
        seen_datasets.add(bare)
    owner = {}  # every (path, group) of the map -> index of the file it belongs to
    total_samples = 0
    for i, f in enumerate(files):
        if not isinstance(f.path, str) or not os.path.isabs(f.path):
            raise ValueError(f"sample map: file path {f.path!r} is not absolute")
        if (not isinstance(f.group, str) or f.group.startswith("/") or f.group.endswith("/")
                or "//" in f.group or "\0" in f.group):
            raise ValueError(f"sample map: file {f.path!r} has group {f.group!r}: write it "
                             "without leading or trailing '/'")
        if (f.path, f.group) in owner:
            raise ValueError(f"sample map: file {f.path!r} (group {f.group!r}) is listed twice")
        owner[(f.path, f.group)] = i
        _check_field_files(f, len(fields))
        for ff in f.field_files:
            # Two fields of one file may share a path; two files may not.
            if owner.setdefault((ff.path, f.group), i) != i:
                raise ValueError(f"sample map: file {ff.path!r} is listed twice")
        rows = _integer(f"rows of {f.path!r}", f.rows, 0, _U64_MAX)
        if rows == 0:
            raise ValueError(f"sample map: file {f.path!r} has no rows")
        per_sample = _integer(f"rows_per_sample of {f.path!r}", f.rows_per_sample, 1, _U64_MAX)
        if rows % per_sample:
            raise ValueError(f"sample map: file {f.path!r} has {rows} rows, not samples of "
                             f"{per_sample} rows each")
        total_samples += rows // per_sample
    if files and total_samples != num_samples:
        raise ValueError(f"sample map: the files hold {total_samples} samples but num_samples "
                         f"is {num_samples}")


def _as_integer_array(name: str, values, dtype: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, not of shape {array.shape}")
    if array.size == 0:
        return np.empty(0, dtype=dtype)
    if array.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integers, not {array.dtype}")
    return array


def _check_part(where: str, samples, boundaries, num_samples: int) -> _Part:
    """The checks of CheckSchedule (schedule_writer.cc) for one part."""
    ids = _as_integer_array(f"{where}: samples", samples, "<u4")
    if ids.size:
        lowest, highest = int(ids.min()), int(ids.max())
        if lowest < 0 or highest >= num_samples:
            bad = lowest if lowest < 0 else highest
            raise ValueError(f"{where}: sample id {bad} is outside [0, num_samples = "
                             f"{num_samples})")
    bounds = _as_integer_array(f"{where}: boundaries", boundaries, "<u8")
    if bounds.size == 0:
        raise ValueError(f"{where}: boundaries are empty (need at least [0])")
    if int(bounds[0]) != 0 or int(bounds[-1]) != ids.size:
        raise ValueError(f"{where}: boundaries must start at 0 and end at the number of samples "
                         f"({ids.size}), not run from {int(bounds[0])} to {int(bounds[-1])}")
    if np.any(bounds[1:] < bounds[:-1]):
        raise ValueError(f"{where}: decreasing step boundaries")
    return _Part(np.ascontiguousarray(ids, dtype="<u4"), np.ascontiguousarray(bounds, dtype="<u8"))


def _check_parts(parts: Mapping[Tuple[int, int], tuple], ranks: int,
                 num_samples: int) -> List[_Part]:
    """The parts in file order (epoch-major), validated; every (epoch, rank)
    present and equal step counts within an epoch."""
    if not parts:
        raise ValueError("parts is empty: a schedule has at least one epoch")
    keys = {}
    for key in parts:
        try:
            epoch, rank = key
        except (TypeError, ValueError):
            raise ValueError(f"parts key {key!r} is not an (epoch, rank) pair") from None
        epoch = _integer(f"epoch of parts key {key!r}", epoch, 0, _U32_MAX - 1)
        rank = _integer(f"rank of parts key {key!r}", rank, 0, _U32_MAX)
        if rank >= ranks:
            raise ValueError(f"parts key {key!r}: rank {rank} >= ranks = {ranks}")
        keys[(epoch, rank)] = key
    epochs = 1 + max(epoch for epoch, _ in keys)
    ordered = []
    for epoch in range(epochs):
        for rank in range(ranks):
            if (epoch, rank) not in keys:
                raise ValueError(f"parts has no (epoch {epoch}, rank {rank}): every rank of "
                                 f"epochs 0..{epochs - 1} is needed")
            where = f"epoch {epoch} rank {rank}"
            try:
                samples, boundaries = parts[keys[(epoch, rank)]]
            except (TypeError, ValueError):
                raise ValueError(f"{where}: a part is a (samples, boundaries) pair") from None
            part = _check_part(where, samples, boundaries, num_samples)
            if rank > 0 and part.steps != ordered[-1].steps:
                raise ValueError(f"{where}: {part.steps} steps but rank 0 has "
                                 f"{ordered[-1].steps}; all ranks of an epoch need the same "
                                 "number of steps")
            ordered.append(part)
    return ordered


# -- encoding -----------------------------------------------------------------

class _Encoder:
    """Appends little-endian values, as format::Encoder does."""

    def __init__(self):
        self.chunks: List[bytes] = []

    def u32(self, v: int) -> None:
        self.chunks.append(struct.pack("<I", v))

    def u64(self, v: int) -> None:
        self.chunks.append(struct.pack("<Q", v))

    def i64(self, v: int) -> None:
        self.chunks.append(struct.pack("<q", v))

    def string(self, data: bytes) -> None:  # u32 length + the bytes
        self.u32(len(data))
        self.chunks.append(data)

    def getvalue(self) -> bytes:
        return b"".join(self.chunks)


def _encode_field_files(out: _Encoder, f: WriterFile) -> None:
    """Version 3's addition after each file: its field files."""
    out.u32(len(f.field_files))
    for ff in f.field_files:
        out.u32(ff.field)
        out.string(_string_bytes("field file path", ff.path, os.fsencode))
        out.u64(ff.size)
        out.i64(ff.mtime_ns)


def _encode_header(*, version: int, source: str, parameters: str, generator: str, ranks: int,
                   ranks_per_node: int, workers: int, batch_size: int, epochs: int,
                   num_samples: int, seed: int, files: Sequence[WriterFile],
                   fields: Sequence[WriterField]) -> bytes:
    """format::EncodeHeader, version 2 to 5."""
    out = _Encoder()
    out.string(_string_bytes("source", source))
    out.string(_string_bytes("parameters", parameters))
    out.string(_string_bytes("generator", generator))
    for v in (ranks, ranks_per_node, workers, batch_size, epochs):
        out.u32(v)
    out.u64(num_samples)
    out.u64(seed)
    out.u32(STORAGE_LISTS)
    out.u32(len(fields))
    for f in fields:
        out.string(_string_bytes("field dataset", f.dataset))
        out.u64(_integer(f"row_bytes of field {f.dataset!r}", f.row_bytes, 0, _U64_MAX))
    out.u32(len(files))
    for f in files:
        # Paths are bytes to the C++ side: os.fsencode keeps undecodable bytes
        # (surrogateescape) as they were.
        out.string(_string_bytes("file path", f.path, os.fsencode))
        out.u64(f.rows)
        out.u64(_integer(f"size of {f.path!r}", f.size, 0, _U64_MAX))
        out.i64(_integer(f"mtime_ns of {f.path!r}", f.mtime_ns, _I64_MIN, _I64_MAX))
        if version >= 4:
            out.string(_string_bytes(f"group of {f.path!r}", f.group))
        if version >= 5:
            out.u64(f.rows_per_sample)
        if version >= 3:
            _encode_field_files(out, f)
    return out.getvalue()


def _align_up(v: int, a: int) -> int:
    return (v + a - 1) // a * a


def _part_crc(part: _Part) -> int:
    return zlib.crc32(part.bounds, zlib.crc32(part.samples))


def _build_index(parts: Sequence[_Part], data_offset: int) -> Tuple[np.ndarray, int]:
    """The index entries and the file size, laid out as WriteFile does: the
    parts one after another from data_offset, each its samples, zeros up to
    a multiple of 8, then its boundaries."""
    sample_count = np.array([p.samples.size for p in parts], dtype=np.uint64)
    bound_count = np.array([p.bounds.size for p in parts], dtype=np.uint64)
    samples_bytes = (4 * sample_count + 7) // 8 * 8  # with the padding
    part_bytes = samples_bytes + 8 * bound_count
    part_offset = np.zeros(len(parts) + 1, dtype=np.uint64)
    np.cumsum(part_bytes, out=part_offset[1:])
    part_offset += np.uint64(data_offset)
    index = np.zeros(len(parts), dtype=_INDEX_ENTRY)
    index["samples_offset"] = part_offset[:-1]
    index["sample_count"] = sample_count
    index["step_begin_offset"] = part_offset[:-1] + samples_bytes
    index["steps"] = bound_count - 1
    index["crc"] = [_part_crc(p) for p in parts]
    return index, int(part_offset[-1])


def _encode_preamble(*, version: int, file_size: int, header_size: int, header_crc: int,
                     index_offset: int, index_size: int, index_crc: int) -> bytes:
    """format::EncodePreamble: 76 bytes, then their CRC-32."""
    body = _PREAMBLE_BODY.pack(MAGIC, version, STORAGE_LISTS, file_size, PREAMBLE_SIZE,
                               header_size, index_offset, index_size, index_offset + index_size,
                               header_crc, index_crc, 0)
    return body + struct.pack("<I", zlib.crc32(body))


# -- writing ------------------------------------------------------------------

def _write_sections(out, preamble: bytes, header: bytes, index_offset: int, index: np.ndarray,
                    parts: Sequence[_Part]) -> None:
    out.write(preamble)
    out.write(header)
    out.write(bytes(index_offset - (PREAMBLE_SIZE + len(header))))
    out.write(index.tobytes())
    for part in parts:
        out.write(part.samples)  # the array's buffer, not a copy
        out.write(bytes(_align_up(part.samples.nbytes, 8) - part.samples.nbytes))
        out.write(part.bounds)


def write_atomically(path: str, write) -> None:
    """write(file object) into PATH.tmp-<pid> (created with mode 0600), then
    rename it over PATH; the temporary is removed on any error."""
    tmp = f"{path}.tmp-{os.getpid()}"
    flags = (os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_NOFOLLOW", 0))
    fd = os.open(tmp, flags, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(fd, 0o600)  # also when a stale temporary of this pid is reused
            write(out)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_schedule(path, *, parts, ranks, ranks_per_node, num_samples, files=(), fields=(),
                   workers=0, batch_size=1, seed=0, source="import", parameters="",
                   generator="prescient-follow 0.1.0") -> None:
    """Writes a schedule file (storage lists) at `path`: format version 2, 3
    when a file of the map keeps fields in files of their own, 4 when a file of
    the map is a group (WriterFile.group), 5 when a sample of a file is more
    than one row (WriterFile.rows_per_sample).

    parts: {(epoch, rank): (samples, boundaries)} for every rank in
    range(ranks) of every epoch in range(1 + max epoch); samples are sample
    ids < num_samples (stored as u32), boundaries the step boundaries
    (u64, b[0] = 0, non-decreasing, b[-1] = len(samples)); all ranks of an
    epoch have the same number of steps (len(boundaries) - 1).
    files, fields: the sample map (WriterFile in sample order, WriterField in
    read order); no files = abstract samples. A WriterFile's field_files
    (WriterFieldFile) name fields kept in files of their own, with the same
    rows; each path belongs to one file of the map only.
    Raises ValueError for any input the readers would refuse, before writing.
    """
    path = os.fspath(path)
    ranks = _integer("ranks", ranks, 1, _U32_MAX)
    ranks_per_node = _integer("ranks_per_node", ranks_per_node, 1, _U32_MAX)
    workers = _integer("workers", workers, 0, _U32_MAX)
    batch_size = _integer("batch_size", batch_size, 1, _U32_MAX)
    num_samples = _integer("num_samples", num_samples, 1, _U32_MAX)
    seed = _integer("seed", seed, 0, _U64_MAX)
    files, fields = tuple(files), tuple(fields)
    _check_map(files, fields, num_samples)
    ordered = _check_parts(parts, ranks, num_samples)
    epochs = len(ordered) // ranks

    version = _format_version(files)
    header = _encode_header(version=version, source=source, parameters=parameters,
                            generator=generator, ranks=ranks, ranks_per_node=ranks_per_node,
                            workers=workers, batch_size=batch_size, epochs=epochs,
                            num_samples=num_samples, seed=seed, files=files, fields=fields)
    index_offset = _align_up(PREAMBLE_SIZE + len(header), 8)
    index_size = INDEX_ENTRY_SIZE * len(ordered)
    index, file_size = _build_index(ordered, index_offset + index_size)
    preamble = _encode_preamble(version=version, file_size=file_size, header_size=len(header),
                                header_crc=zlib.crc32(header), index_offset=index_offset,
                                index_size=index_size, index_crc=zlib.crc32(index.tobytes()))
    write_atomically(path, lambda out: _write_sections(out, preamble, header, index_offset,
                                                        index, ordered))

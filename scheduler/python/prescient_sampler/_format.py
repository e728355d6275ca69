"""Reader for Prescient schedule files (format versions 1 to 5), in pure Python + NumPy.

The byte layout is specified in scheduler/README.md ("Schedule file format");
this module and scheduler/core/schedule_reader.cc implement the same checks.
Each (rank, epoch) part is read on its first use with os.pread into memory the
process owns (never mapped: a schedule truncated or rewritten in place while
the job runs gives a ScheduleFileError, not a SIGBUS), so a process reads only
the lists it uses.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import struct
import zlib
from typing import Dict, Tuple

import numpy as np

from ._sample_map import FieldFile, MapField, MapFile, SampleMap

MAGIC = b"\x89PSCH\r\n\x1a"
# The newest version read. 3: a file of the map may keep fields in files of
# their own; 4: a file of the map may be a group; 5: a sample may be a block
# of rows; writers still write 2 for a map without any of these, so older
# readers read ordinary schedules.
FORMAT_VERSION = 5
OLDEST_FORMAT_VERSION = 1   # version 1: one dataset fingerprint instead of a map
PREAMBLE_SIZE = 80
INDEX_ENTRY_SIZE = 40
_PREAMBLE = struct.Struct("<8sIIQQQQQQIIII")
_INDEX_ENTRY = struct.Struct("<QQQQII")
_MAX_STRING = 1 << 20
STORAGE_LISTS = 0
STORAGE_RECIPE = 1


class ScheduleFileError(ValueError):
    """A schedule file that cannot be used. `code` names the problem, with the
    same names as the C++ ScheduleFileErrorCode: io, truncated, bad-magic,
    bad-version, bad-checksum, corrupt, unsupported, fingerprint-mismatch,
    out-of-range."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class DatasetMismatchError(ScheduleFileError):
    """The schedule was made for another dataset (fingerprint mismatch)."""

    def __init__(self, message: str):
        super().__init__("fingerprint-mismatch", message)


@dataclasses.dataclass(frozen=True)
class DatasetFingerprint:
    file_path: str = ""
    dataset_name: str = ""
    rows: int = 0
    row_bytes: int = 0
    file_size: int = 0
    mtime_ns: int = 0


@dataclasses.dataclass(frozen=True)
class Layout:
    ranks: int
    ranks_per_node: int
    workers: int
    batch_size: int


@dataclasses.dataclass(frozen=True)
class Header:
    map: SampleMap
    # The map's single file and field (rows = num_samples otherwise), as in
    # version 1.
    dataset: DatasetFingerprint
    source: str
    parameters: str
    generator: str
    layout: Layout
    epochs: int
    num_samples: int
    seed: int
    storage: int


class _Decoder:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if size > len(self.data) - self.pos:
            raise ValueError("short header")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return value

    def string(self) -> str:
        n = self.take("<I")
        if n > _MAX_STRING or n > len(self.data) - self.pos:
            raise ValueError("bad string length")
        s = self.data[self.pos:self.pos + n].decode("utf-8", errors="replace")
        self.pos += n
        return s


def _map_of_fingerprint(d: DatasetFingerprint) -> SampleMap:
    if not d.file_path:
        if not d.row_bytes and not d.dataset_name:
            return SampleMap()
        return SampleMap((), (MapField(d.dataset_name, d.row_bytes),))
    return SampleMap((MapFile(d.file_path, d.rows, d.file_size, d.mtime_ns),),
                     (MapField(d.dataset_name, d.row_bytes),))


def _fingerprint_of_map(m: SampleMap, num_samples: int) -> DatasetFingerprint:
    if len(m.files) == 1 and len(m.fields) == 1:
        f, d = m.files[0], m.fields[0]
        return DatasetFingerprint(f.path, d.dataset, f.rows, d.row_bytes, f.size, f.mtime_ns)
    return DatasetFingerprint("", "", num_samples, m.bytes_per_sample, 0, 0)


def _decode_map_file(d: _Decoder, version: int) -> MapFile:
    path, rows, size, mtime_ns = d.string(), d.take("<Q"), d.take("<Q"), d.take("<q")
    group = d.string() if version >= 4 else ""
    rows_per_sample = d.take("<Q") if version >= 5 else 1
    if version < 3:
        return MapFile(path, rows, size, mtime_ns)
    count = d.take("<I")
    # Each field file takes at least 24 bytes: refuse a count the header
    # cannot hold before looping over it.
    if count > (len(d.data) - d.pos) // 24:
        raise ValueError("impossible field file count")
    field_files = [FieldFile(d.take("<I"), d.string(), d.take("<Q"), d.take("<q"))
                   for _ in range(count)]
    return MapFile(path, rows, size, mtime_ns, tuple(field_files), group, rows_per_sample)


def _decode_header(data: bytes, version: int) -> Header:
    d = _Decoder(data)
    if version == 1:
        dataset = DatasetFingerprint(d.string(), d.string(), d.take("<Q"), d.take("<Q"),
                                     d.take("<Q"), d.take("<q"))
    source, parameters, generator = d.string(), d.string(), d.string()
    layout = Layout(d.take("<I"), d.take("<I"), d.take("<I"), d.take("<I"))
    epochs, num_samples, seed, storage = d.take("<I"), d.take("<Q"), d.take("<Q"), d.take("<I")
    if version == 1:
        sample_map = _map_of_fingerprint(dataset)
    else:
        field_count = d.take("<I")
        if field_count > (len(data) - d.pos) // 12:
            raise ValueError("impossible field count")
        fields = [MapField(d.string(), d.take("<Q")) for _ in range(field_count)]
        file_count = d.take("<I")
        if file_count > (len(data) - d.pos) // 28:
            raise ValueError("impossible file count")
        files = [_decode_map_file(d, version) for _ in range(file_count)]
        sample_map = SampleMap(files, fields)
    if d.pos != len(data) or storage not in (STORAGE_LISTS, STORAGE_RECIPE):
        raise ValueError("trailing bytes or unknown storage")
    return Header(sample_map, _fingerprint_of_map(sample_map, num_samples), source, parameters,
                  generator, layout, epochs, num_samples, seed, storage)


class ScheduleFile:
    """An open schedule file: the header, the index, and lazily mapped parts.

    >>> f = ScheduleFile("train.sched")
    >>> samples, step_begin = f.part(rank=0, epoch=3)   # numpy arrays in memory
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._parts: Dict[Tuple[int, int], Tuple[np.ndarray, np.ndarray]] = {}
        self._fd = -1
        self._open()
        size = self._size
        preamble = self._read(0, min(size, PREAMBLE_SIZE))
        self._parse_preamble(preamble, size)
        header_bytes = self._read_exactly(self._header_offset, self._header_size, "header")
        index_bytes = self._read_exactly(self._index_offset, self._index_size, "index")
        if zlib.crc32(header_bytes) != self._header_crc:
            self._fail("bad-checksum", "header checksum mismatch")
        try:
            self.header = _decode_header(header_bytes, self._version)
        except (ValueError, struct.error) as e:
            self._fail("corrupt", f"malformed header: {e}")
        if self.header.storage != self._storage:
            self._fail("corrupt", "preamble and header disagree on the storage kind")
        h = self.header
        if (h.layout.ranks == 0 or h.layout.ranks_per_node == 0 or h.layout.batch_size == 0
                or h.epochs == 0 or h.num_samples == 0 or h.num_samples > 0xFFFFFFFF):
            self._fail("corrupt", "header has an empty or impossible shape")
        if h.map.has_files and h.map.num_samples != h.num_samples:
            self._fail("corrupt", f"the sample map holds {h.map.num_samples} samples but the "
                       f"schedule {h.num_samples}")
        if zlib.crc32(index_bytes) != self._index_crc:
            self._fail("bad-checksum", "index checksum mismatch")
        self._entries = []
        if h.storage == STORAGE_LISTS:
            self._parse_index(index_bytes)

    def _open(self) -> None:
        # O_NONBLOCK: a FIFO in place of the schedule must not hang the open.
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(self.path, flags)
        except OSError as e:
            raise ScheduleFileError("io", f"schedule file '{self.path}': cannot open: "
                                    f"{e.strerror}") from e
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            kind = " (a FIFO)" if stat.S_ISFIFO(st.st_mode) else (
                " (a directory)" if stat.S_ISDIR(st.st_mode) else "")
            self._fail("io", f"not a regular file{kind}")
        self._fd, self._size = fd, st.st_size

    def close(self) -> None:
        """Closes the file; parts already read stay usable."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self):
        self.close()

    def __getstate__(self):
        # Picklable (DataLoader workers started with spawn): the descriptor is
        # not sent; the copy reopens the file by path when it needs a part.
        state = self.__dict__.copy()
        state["_fd"] = -1
        return state

    def _read(self, offset: int, count: int) -> bytes:
        if self._fd < 0:
            self._open()
        chunks, done = [], 0
        while done < count:
            try:
                chunk = os.pread(self._fd, count - done, offset + done)
            except OSError as e:
                self._fail("io", f"read failed: {e.strerror}")
            if not chunk:
                break
            chunks.append(chunk)
            done += len(chunk)
        return b"".join(chunks)

    def _read_exactly(self, offset: int, count: int, what: str) -> bytes:
        data = self._read(offset, count)
        if len(data) != count:
            self._fail("truncated", f"{what}: the file is shorter than when it was opened "
                       "(truncated or rewritten in place since)")
        return data

    def _fail(self, code: str, what: str):
        raise ScheduleFileError(code, f"schedule file '{self.path}': {what}")

    def _parse_preamble(self, preamble: bytes, size: int) -> None:
        if len(preamble) >= 8 and preamble[:8] != MAGIC:
            self._fail("bad-magic", "not a Prescient schedule file (bad magic)")
        if len(preamble) < PREAMBLE_SIZE:
            self._fail("truncated", f"truncated: {size} bytes, shorter than the preamble")
        (_, version, storage, file_size, header_offset, header_size, index_offset, index_size,
         data_offset, header_crc, index_crc, _, preamble_crc) = _PREAMBLE.unpack(preamble)
        if not OLDEST_FORMAT_VERSION <= version <= FORMAT_VERSION:
            self._fail("bad-version", f"format version {version}; this reader reads versions "
                       f"{OLDEST_FORMAT_VERSION} to {FORMAT_VERSION}")
        self._version = version
        if zlib.crc32(preamble[:PREAMBLE_SIZE - 4]) != preamble_crc:
            self._fail("bad-checksum", "preamble checksum mismatch")
        if file_size > size:
            self._fail("truncated", f"truncated: {size} of {file_size} bytes")
        if file_size < size:
            self._fail("corrupt", f"{size - file_size} unexpected bytes after the schedule")
        if (header_offset != PREAMBLE_SIZE or header_offset + header_size > file_size
                or index_offset < header_offset + header_size or index_offset % 8
                or index_offset + index_size > file_size
                or data_offset != index_offset + index_size):
            self._fail("corrupt", "inconsistent section offsets in the preamble")
        self._storage = storage
        self._file_size = file_size
        self._header_offset, self._header_size = header_offset, header_size
        self._index_offset, self._index_size = index_offset, index_size
        self._data_offset = data_offset
        self._header_crc, self._index_crc = header_crc, index_crc

    def _parse_index(self, index_bytes: bytes) -> None:
        h = self.header
        parts = h.layout.ranks * h.epochs
        if len(index_bytes) != parts * INDEX_ENTRY_SIZE:
            self._fail("corrupt", "index size does not match ranks x epochs")
        self._epoch_first_step = [0] * (h.epochs + 1)
        for i in range(parts):
            so, count, bo, steps, crc, _ = _INDEX_ENTRY.unpack_from(index_bytes,
                                                                    i * INDEX_ENTRY_SIZE)
            rank, epoch = i % h.layout.ranks, i // h.layout.ranks
            if (so < self._data_offset or so % 4 or so + 4 * count > self._file_size
                    or bo < self._data_offset or bo % 8
                    or bo + 8 * (steps + 1) > self._file_size):
                self._fail("corrupt", f"rank {rank} epoch {epoch}: lists lie outside the file")
            if rank == 0:
                self._epoch_first_step[epoch + 1] = self._epoch_first_step[epoch] + steps
            elif steps != self._entries[-1][3]:
                self._fail("corrupt", f"rank {rank} epoch {epoch}: ranks of one epoch have "
                           "different step counts")
            self._entries.append((so, count, bo, steps, crc))

    @property
    def format_version(self) -> int:
        """The format version the file was written in (1 to FORMAT_VERSION)."""
        return self._version

    @property
    def is_recipe(self) -> bool:
        return self.header.storage == STORAGE_RECIPE

    def epoch_first_step(self, epoch: int) -> int:
        """Global step of the epoch's first step (lists only)."""
        self._require_lists()
        return self._epoch_first_step[epoch]

    def _require_lists(self) -> None:
        if self.is_recipe:
            h = self.header
            raise ScheduleFileError(
                "unsupported",
                f"schedule file '{self.path}' stores only the recipe of '{h.source}' "
                f"({h.parameters}); it describes what that loader does by itself, so use the "
                "loader's own sampler (e.g. torch DistributedSampler with these parameters), "
                "or regenerate the file with 'prescient-schedule generate --store lists'")

    def part(self, rank: int, epoch: int) -> Tuple[np.ndarray, np.ndarray]:
        """(samples uint32[n], step_begin uint64[steps + 1]) of one rank's epoch
        (read-only arrays in memory)."""
        self._require_lists()
        h = self.header
        if not (0 <= rank < h.layout.ranks and 0 <= epoch < h.epochs):
            raise ScheduleFileError(
                "out-of-range", f"rank {rank} epoch {epoch} is outside the schedule "
                f"({h.layout.ranks} ranks, {h.epochs} epochs)")
        key = (rank, epoch)
        cached = self._parts.get(key)
        if cached is not None:
            return cached
        so, count, bo, steps, crc = self._entries[epoch * h.layout.ranks + rank]
        where = f"rank {rank} epoch {epoch}: "
        sample_bytes = self._read_exactly(so, 4 * count, where.rstrip(": "))
        bound_bytes = self._read_exactly(bo, 8 * (steps + 1), where.rstrip(": "))
        samples = np.frombuffer(sample_bytes, dtype="<u4")
        bounds = np.frombuffer(bound_bytes, dtype="<u8")
        if zlib.crc32(bound_bytes, zlib.crc32(sample_bytes)) != crc:
            self._fail("bad-checksum", where + "sample list checksum mismatch")
        if bounds[0] != 0 or int(bounds[-1]) != count or np.any(np.diff(bounds.astype(np.int64)) < 0):
            self._fail("corrupt", where + "step boundaries do not cover the sample list")
        if count and int(samples.max()) >= h.num_samples:
            self._fail("corrupt", where + "sample id out of range")
        self._parts[key] = (samples, bounds)
        return samples, bounds

    def check_dataset(self, actual: DatasetFingerprint, *, path: bool = False,
                      dataset_name: bool = True, shape: bool = True,
                      file_stat: bool = True) -> None:
        """Raises DatasetMismatchError unless `actual` is a dataset of the
        schedule's sample map: the map's only file (or, with several files or
        path=True, the file with actual.file_path, resolved with
        os.path.realpath, as its own path or one of its field files), the
        field named actual.dataset_name, with the file's rows, the field's
        row size (unless 0 in the map), and the size and mtime of the file
        the field lives in (place_of: a field kept in a file of its own is
        compared with that file)."""
        m = self.header.map

        def mismatch(what):
            raise DatasetMismatchError(
                f"schedule file '{self.path}' was made for another dataset: {what}")

        if not m.has_files:
            mismatch("the schedule names no dataset (it was made without --dataset)")
        file, opened, field = 0, None, 0
        if m.has_groups:
            # A file of the map is a group: the path and the dataset's name say which.
            for candidate in {actual.file_path, os.path.realpath(actual.file_path)}:
                slot = m.find(candidate, actual.dataset_name)
                if slot is not None:
                    (file, field), opened = slot, candidate
                    break
            else:
                mismatch(f"dataset {actual.dataset_name!r} of {actual.file_path!r} is no field "
                         "of a group of the schedule's files")
        elif path or len(m.files) > 1:
            file, opened = self._find_file(actual.file_path, mismatch)
        if not m.has_groups and (dataset_name or len(m.fields) > 1):
            found = m.field_index(actual.dataset_name)
            if found is None:
                mismatch(f"dataset name is {actual.dataset_name!r} but the schedule was made "
                         f"for {', '.join(repr(f.dataset) for f in m.fields)}")
            field = found
        f, d = m.files[file], m.fields[field]
        place = m.place_of(file, field)
        # The path named one of the file's paths, but perhaps not the one
        # this field is in (the labels file given with the images' dataset).
        if opened is not None and opened != place.path:
            mismatch(f"dataset {m.dataset_of(file, field)!r} of {f.path!r} is in {place.path!r}, not in "
                     f"{opened!r}")

        def differs(what, stored, found):
            mismatch(f"{what} is {found} but the schedule was made for {stored}")

        if shape and f.rows != actual.rows:
            differs("row count", f.rows, actual.rows)
        if shape and d.row_bytes and d.row_bytes != actual.row_bytes:
            differs("row size", d.row_bytes, actual.row_bytes)
        if file_stat and place.size != actual.file_size:
            differs(f"file size of {place.path!r}", place.size, actual.file_size)
        if file_stat and place.mtime_ns != actual.mtime_ns:
            differs(f"modification time (ns) of {place.path!r}", place.mtime_ns,
                    actual.mtime_ns)

    def _find_file(self, file_path: str, mismatch) -> Tuple[int, str]:
        """(file index, the map's path that matched) of `file_path`, as given
        or resolved; calls mismatch() when the map has no such path."""
        m = self.header.map
        for candidate in (file_path, os.path.realpath(file_path) if file_path else None):
            found = m.file_index(candidate) if candidate else None
            if found is not None:
                return found, candidate
        mismatch(f"file path is {file_path!r} but the schedule's files are "
                 f"{m.files[0].path!r}" + (f" ... {m.files[-1].path!r} ({len(m.files)} files)"
                                           if len(m.files) > 1 else ""))


def fingerprint_dataset(file_path: str, dataset_name: str, rows: int,
                        row_bytes: int) -> DatasetFingerprint:
    """Fingerprint of an HDF5 dataset: the file's size and mtime from stat()."""
    st = os.stat(file_path)
    return DatasetFingerprint(os.fspath(file_path), dataset_name, int(rows), int(row_bytes),
                              st.st_size, st.st_mtime_ns)


def fingerprint_h5py(dataset) -> DatasetFingerprint:
    """Fingerprint of an open h5py.Dataset (no h5py import needed here)."""
    row_bytes = int(dataset.dtype.itemsize * int(np.prod(dataset.shape[1:], dtype=np.int64)))
    return fingerprint_dataset(dataset.file.filename, dataset.name, dataset.shape[0], row_bytes)

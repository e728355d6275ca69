"""The sample map of a schedule file: sample id -> (file, row) over an ordered
list of files, with one or more fields (HDF5 datasets) read per sample.

Samples are numbered over the files in order, then rows:
``sample = first_sample(file) + row``; a sample is the same row of every field
of its file. A file of the map may keep some fields in files of their own
(format version 3: PatchCamelyon's images in one file, its labels in another,
with the same rows), listed in its ``field_files``; ``place_of(file, field)``
says where a field lives. A file of the map may also be a group inside a file
(format version 4: PDEBench's "0000/data", "0001/data", ... in one file, one
entry per group), its fields named relative to the group;
``dataset_of(file, field)`` gives the full name. A group read whole by its
sample is one sample of all its rows (format version 5,
``rows_per_sample``): ``sample = first_sample(file) + row // rows_per_sample``,
and ``locate`` gives the sample's first row. Mirrors
scheduler/core/sample_map.h.

    m = ScheduleFile("train.sched").header.map
    file, row = m.locate(12345)              # one sample
    files, rows = m.locate_many(batch)       # a batch, vectorised
    with h5py.File(m.place_of(file, 0).path) as f:
        x = f[m.dataset_of(file, 0)][row]
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np


@dataclasses.dataclass(frozen=True)
class FieldFile:
    """A field of a MapFile kept in a file of its own (format version 3)."""
    field: int         # index into SampleMap.fields
    path: str          # absolute, symbolic links resolved when the schedule was made
    size: int = 0      # st_size
    mtime_ns: int = 0  # st_mtime_ns


@dataclasses.dataclass(frozen=True)
class MapFile:
    path: str          # absolute, symbolic links resolved when the schedule was made
    rows: int          # rows of every field in this file
    size: int = 0      # st_size
    mtime_ns: int = 0  # st_mtime_ns
    # The fields kept elsewhere, each with `rows` rows; every field not listed
    # here is in `path`, and at least one is.
    field_files: Tuple[FieldFile, ...] = ()
    # The group the fields are in, without leading or trailing '/' ("" = the root).
    group: str = ""
    # Consecutive rows that make one sample (format version 5 otherwise);
    # divides `rows`. A group read whole by its sample has all its rows.
    rows_per_sample: int = 1

    def __post_init__(self):
        # A tuple whatever the caller passed, so the file stays hashable and
        # compares equal to the one the reader makes.
        object.__setattr__(self, "field_files", tuple(self.field_files))


@dataclasses.dataclass(frozen=True)
class MapField:
    dataset: str        # path inside each file; a leading '/' is not significant
    row_bytes: int = 0  # 0 = unknown


class SampleLocation(NamedTuple):
    file: int
    row: int


class FieldPlace(NamedTuple):
    """Where one field of one file of the map lives."""
    path: str
    size: int
    mtime_ns: int


def bare_dataset_name(name: str) -> str:
    return name.lstrip("/")


def _is_bare_group_name(group: str) -> bool:
    return (not group.startswith("/") and not group.endswith("/") and "//" not in group
            and "\0" not in group)


def _check_field_files(f: MapFile, fields: int) -> None:
    """Each field file of `f` is of a field of the map, once, not in the
    file's own path, and not all of them (the file's own path holds a field)."""
    seen = set()
    for ff in f.field_files:
        where = f"sample map: a field file of {f.path!r}"
        if not 0 <= ff.field < fields:
            raise ValueError(f"{where} is of field {ff.field} of {fields}")
        if not ff.path:
            raise ValueError(f"{where} has no path")
        if ff.path == f.path:
            raise ValueError(f"{where} names the file itself: leave the field out")
        if ff.field in seen:
            raise ValueError(f"{where} repeats field {ff.field}")
        seen.add(ff.field)
    if fields and len(f.field_files) == fields:
        raise ValueError(f"sample map: every field of {f.path!r} is in another file "
                         "(the file must hold one)")


class SampleMap:
    """Immutable. An empty map (no files) describes abstract samples."""

    def __init__(self, files: Sequence[MapFile] = (), fields: Sequence[MapField] = ()):
        self.files: Tuple[MapFile, ...] = tuple(files)
        self.fields: Tuple[MapField, ...] = tuple(fields)
        if self.files and not self.fields:
            raise ValueError("sample map: files but no field (dataset) to read in them")
        names = [bare_dataset_name(f.dataset) for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError("sample map: a dataset is listed twice")
        first = [0]
        # Every (path, group) of the map (own and field files) -> its file; a
        # path and group belong to one file only, though two fields of a file
        # may share one.
        self._by_place: Dict[Tuple[str, str], int] = {}
        for i, f in enumerate(self.files):
            if f.rows <= 0 or not f.path:
                raise ValueError(f"sample map: file {f.path!r} has no rows or no path")
            if not _is_bare_group_name(f.group):
                raise ValueError(f"sample map: file {f.path!r} has group {f.group!r}: write it "
                                 "without leading or trailing '/'")
            if f.rows_per_sample <= 0 or f.rows % f.rows_per_sample:
                raise ValueError(f"sample map: file {f.path!r} has {f.rows} rows, not samples "
                                 f"of {f.rows_per_sample} rows each")
            if (f.path, f.group) in self._by_place:
                raise ValueError(f"sample map: file {f.path!r} (group {f.group!r}) is listed twice")
            self._by_place[(f.path, f.group)] = i
            _check_field_files(f, len(self.fields))
            for ff in f.field_files:
                if self._by_place.setdefault((ff.path, f.group), i) != i:
                    raise ValueError(f"sample map: file {ff.path!r} is listed twice")
            first.append(first[-1] + f.rows // f.rows_per_sample)
        if first[-1] > 0xFFFFFFFF:
            raise ValueError("sample map: 2^32 or more samples")
        self._first = first
        self._first_array = np.asarray(first, dtype=np.int64)
        self._rows_per_sample = np.asarray([f.rows_per_sample for f in self.files] or [1],
                                           dtype=np.int64)

    @property
    def has_files(self) -> bool:
        return bool(self.files)

    @property
    def has_field_files(self) -> bool:
        """Whether any field is kept in a file of its own (format version 3)."""
        return any(f.field_files for f in self.files)

    @property
    def has_groups(self) -> bool:
        """Whether any file of the map is a group (format version 4)."""
        return any(f.group for f in self.files)

    @property
    def has_row_blocks(self) -> bool:
        """Whether a sample of any file is more than one row (format version 5)."""
        return any(f.rows_per_sample > 1 for f in self.files)

    @property
    def num_samples(self) -> int:
        return self._first[-1]

    @property
    def bytes_per_sample(self) -> int:
        """The fields' known row sizes, times a sample's rows (their mean, rounded up)."""
        row = sum(f.row_bytes for f in self.fields)
        if not self.has_row_blocks or not self.num_samples:
            return row
        return -(-row * sum(f.rows for f in self.files) // self.num_samples)

    def first_sample(self, file: int) -> int:
        return self._first[file]

    def locate(self, sample: int) -> SampleLocation:
        if not 0 <= sample < self.num_samples:
            raise IndexError(f"sample {sample} outside the map's {self.num_samples} samples")
        file = bisect.bisect_right(self._first, sample) - 1
        return SampleLocation(file, (sample - self._first[file]) * self.files[file].rows_per_sample)

    def sample_of(self, file: int, row: int) -> int:
        """The sample row `row` of `file` belongs to."""
        return self._first[file] + row // self.files[file].rows_per_sample

    def locate_many(self, samples) -> Tuple[np.ndarray, np.ndarray]:
        """(file indices, first rows) of an array of samples."""
        s = np.asarray(samples, dtype=np.int64)
        if s.size and (s.min() < 0 or s.max() >= self.num_samples):
            raise IndexError(f"a sample lies outside the map's {self.num_samples} samples")
        files = np.searchsorted(self._first_array, s, side="right") - 1
        return files, (s - self._first_array[files]) * self._rows_per_sample[files]

    def file_index(self, path: str, group: str = "") -> Optional[int]:
        """The file with this path and group, as its own path or one of its
        field files (compared as stored: absolute and resolved)."""
        return self._by_place.get((path, group))

    def find(self, path: str, dataset: str) -> Optional[Tuple[int, int]]:
        """(file, field) of dataset `dataset` of the HDF5 file at `path`: the
        file of that path whose group is the dataset's ancestor, the root
        first, and the field named by the rest; None when none."""
        name = bare_dataset_name(dataset)
        parts = name.split("/")
        for k in range(len(parts)):
            file = self.file_index(path, "/".join(parts[:k]))
            field = self.field_index("/".join(parts[k:])) if file is not None else None
            if field is not None:
                return file, field
        return None

    def dataset_of(self, file: int, field: int) -> str:
        """The dataset's full name in place_of(file, field).path."""
        group, dataset = self.files[file].group, self.fields[field].dataset
        return f"{group}/{bare_dataset_name(dataset)}" if group else dataset

    def place_of(self, file: int, field: int) -> FieldPlace:
        """Where `field` of `file` lives: a field file of it, else its own path."""
        # Checked, not indexed: a negative index would name another file or field.
        if not 0 <= file < len(self.files):
            raise IndexError(f"file {file} outside the map's {len(self.files)} files")
        if not 0 <= field < len(self.fields):
            raise IndexError(f"field {field} outside the map's {len(self.fields)} fields")
        f = self.files[file]
        for ff in f.field_files:
            if ff.field == field:
                return FieldPlace(ff.path, ff.size, ff.mtime_ns)
        return FieldPlace(f.path, f.size, f.mtime_ns)

    def paths_of(self, file: int) -> Tuple[str, ...]:
        """Every path of `file`: its own first, then its field files' (once each)."""
        paths = [self.files[file].path]
        for ff in self.files[file].field_files:
            if ff.path not in paths:
                paths.append(ff.path)
        return tuple(paths)

    def field_index(self, dataset: str) -> Optional[int]:
        want = bare_dataset_name(dataset)
        for i, f in enumerate(self.fields):
            if bare_dataset_name(f.dataset) == want:
                return i
        return None

    def __eq__(self, other) -> bool:
        return (isinstance(other, SampleMap) and self.files == other.files
                and self.fields == other.fields)

    def __repr__(self) -> str:
        return (f"SampleMap({len(self.files)} files, fields "
                f"{[f.dataset for f in self.fields]}, {self.num_samples} samples)")

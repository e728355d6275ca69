"""The sample map of a schedule file: sample id -> (file, row) over an ordered
list of files, with one or more fields (HDF5 datasets) read per sample.

Samples are numbered over the files in order, then rows:
``sample = first_sample(file) + row``; a sample is the same row of every field
of its file. Mirrors scheduler/core/sample_map.h.

    m = ScheduleFile("train.sched").header.map
    file, row = m.locate(12345)              # one sample
    files, rows = m.locate_many(batch)       # a batch, vectorised
    with h5py.File(m.files[file].path) as f:
        x = f[m.fields[0].dataset][row]
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np


@dataclasses.dataclass(frozen=True)
class MapFile:
    path: str          # absolute, symbolic links resolved when the schedule was made
    rows: int          # rows of every field in this file
    size: int = 0      # st_size
    mtime_ns: int = 0  # st_mtime_ns


@dataclasses.dataclass(frozen=True)
class MapField:
    dataset: str        # path inside each file; a leading '/' is not significant
    row_bytes: int = 0  # 0 = unknown


class SampleLocation(NamedTuple):
    file: int
    row: int


def bare_dataset_name(name: str) -> str:
    return name.lstrip("/")


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
        self._by_path: Dict[str, int] = {}
        for i, f in enumerate(self.files):
            if f.rows <= 0 or not f.path:
                raise ValueError(f"sample map: file {f.path!r} has no rows or no path")
            if f.path in self._by_path:
                raise ValueError(f"sample map: file {f.path!r} is listed twice")
            self._by_path[f.path] = i
            first.append(first[-1] + f.rows)
        if first[-1] > 0xFFFFFFFF:
            raise ValueError("sample map: 2^32 or more samples")
        self._first = first
        self._first_array = np.asarray(first, dtype=np.int64)

    @property
    def has_files(self) -> bool:
        return bool(self.files)

    @property
    def num_samples(self) -> int:
        return self._first[-1]

    @property
    def bytes_per_sample(self) -> int:
        return sum(f.row_bytes for f in self.fields)

    def first_sample(self, file: int) -> int:
        return self._first[file]

    def locate(self, sample: int) -> SampleLocation:
        if not 0 <= sample < self.num_samples:
            raise IndexError(f"sample {sample} outside the map's {self.num_samples} samples")
        file = bisect.bisect_right(self._first, sample) - 1
        return SampleLocation(file, sample - self._first[file])

    def locate_many(self, samples) -> Tuple[np.ndarray, np.ndarray]:
        """(file indices, rows) of an array of samples."""
        s = np.asarray(samples, dtype=np.int64)
        if s.size and (s.min() < 0 or s.max() >= self.num_samples):
            raise IndexError(f"a sample lies outside the map's {self.num_samples} samples")
        files = np.searchsorted(self._first_array, s, side="right") - 1
        return files, s - self._first_array[files]

    def file_index(self, path: str) -> Optional[int]:
        """The file with this path (compared as stored: absolute and resolved)."""
        return self._by_path.get(path)

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

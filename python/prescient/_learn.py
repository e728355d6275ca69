"""Which HDF5 rows a sample index stands for, learned from the reads it makes.

While a DataLoader worker runs `dataset[index]`, the connector records the
thread's reads (prescient_follow_begin/_end, vol/follow/read_recorder.h). The
worker appends them to its own file in the job's directory:

    K <index>            or   K <i1>,<i2>,...   (a batch read: ds[batch])
    <file>\t<dataset>\t<dataset rows>\t<first>+<count>,...   (one line per read)
    E

The training process reads every worker's file when it publishes an epoch and
turns the records into a sample map: the *primary field* is the dataset read
most often; the other fields are the datasets read at exactly the primary's
rows (a label beside its image); a sample is a row of a file, numbered over
the files in sorted path order (the connector's sample map,
scheduler/core/sample_map.h), and an index stands for the samples its primary
reads touched, in the order read. A batch index list that read as many
primary rows as it has indices is taken apart in sorted order (the usual
`d[sorted(batch)]`); anything else is not learned from, and its reads are
served unscheduled. Indices that each read datasets of their own in a group
of their own (PDEBench's `f[seed]["data"]`) make a map of groups: each
index's group (the parent its datasets share) is a file of the map, its
datasets fields named in the group; so do indices that share a group with a few
others, no dataset read by most of them (robomimic's windows of an episode,
`data/demo_<k>/obs/<camera>[t:t+10]`). Indices that each read datasets of their
own with no group of their own make no map: their reads are cached without a
schedule. Where the
learned indices show a pattern (Pattern: index i stands for samples
i * per + offset ..., with one offset per file for files concatenated in
another order than sorted), it predicts the indices not read yet; the files
(or groups) not read yet beside those read complete the map where that makes
the pattern (one sample per file, a group per seed).
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import functools
import os
import sys
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

LEARN_PREFIX = "learn-"
# A worker's learn file is "learn-<pid>.s<base seed>": the base seed of its
# DataLoader iterator, which the training process lists in QUIET_SEEDS (one per
# line) when that iterator's workers are not to be learned from (another
# dataset's loader, or a loader that gave way): their records are not read,
# also those appended after the listing.
SEED_MARK = ".s"
QUIET_SEEDS = "quiet-seeds"


def load_quiet_seeds(directory: str) -> frozenset:
    try:
        with open(os.path.join(directory, QUIET_SEEDS), "rb") as f:
            return frozenset(f.read().decode("ascii", "replace").split())
    except OSError:
        return frozenset()


def _seed_of(name: str) -> Optional[str]:
    head, mark, seed = name.rpartition(SEED_MARK)
    return seed if mark and head.startswith(LEARN_PREFIX) else None
# The index range the learned map's pattern predicts, shared with the workers:
# they then learn one index of it in _RECHECK (as of known indices) instead of
# every index of the first epoch (_follower.Follower.learns).
PREDICTED = "predicted"
# Learned indices needed before a pattern is believed (every one must fit it).
_MIN_PATTERN_EVIDENCE = 32
# ... and of each file before its own offset is (a piecewise pattern, Pattern).
_MIN_PIECE_EVIDENCE = 4
# Learned indices that may break a pattern over the whole map, one in this
# many: a loader's boundary cases (FourCastNet's last step of a year reads
# that step twice instead of the next year's first). They keep their learned
# rows; a boundary index not learned yet is predicted wrongly, which costs a
# prefetch, never a byte.
_EXCEPTION_SHARE = 16
# A map needs a primary dataset that indices share: once this many indices are
# learned, a most-read dataset read by no more than _OWN_DATASET_READERS of
# them means every index reads datasets of its own (a group per sample,
# `f[key]["data"]`, as PDEBench keeps its seeds). The map is then one of
# groups (each index's group a file of the map, _in_groups) when the indices
# have groups of their own, else none. Without this, such records gave a "map"
# of the first sample's dataset alone, its rows standing for samples no index
# reads.
_OWN_DATASET_EVIDENCE = 32
_OWN_DATASET_READERS = 2
# A map of groups whose indices each read their group's primary dataset whole
# (PDEBench's `f[seed]["data"][...]`) makes each group one sample of all its
# rows (MapFile.rows_per_sample); one that reads parts of its group numbers
# every row as a sample. Either way, groups are mapped up to this many rows
# an index read; longer ones are not, and their reads are cached without a
# schedule. Groups of 256 rows of 1 KiB each, followed, ran at 0.74-0.78x
# native against 0.98-1.02x unfollowed when each row was a sample, and at
# 0.69-0.89x against 0.90-1.11x with each group one sample and the resolver's
# files kept open (RESULTS.md, "A group per sample, followed", "Groups read
# whole"): the prefetch leader, a new DataLoader worker every epoch, opens
# every group's dataset again each epoch before it can tell whether its rows
# are cached, and its per-row work does not shrink with the schedule.
_MAX_GROUP_ROWS = 128

# The rows of a read, in the order read: a range when they are one run of
# ascending rows (nearly every read: a sample's row, a contiguous block), else
# a tuple. A range holds no objects the cyclic garbage collector follows, so an
# index's reads (a tuple of (file, dataset, rows) tuples) are untracked by its
# young collections (one level of tuples each) before they reach the old
# generation; with a tuple of rows one level deeper, CPython 3.13 kept every
# index's tuple tracked, and 40,000 of them set off a full
# collection of the training process's heap (~90 ms with torch loaded) while
# the workers waited for their next indices.
Rows = Sequence[int]


def _rows_of(runs: str) -> Rows:
    """The rows of "<first>+<count>,...": a range for one ascending run, else a tuple."""
    rows: List[int] = []
    for run in runs.split(","):
        if not run:
            continue
        first, _, count = run.partition("+")
        first_i = int(first)
        rows.extend(range(first_i, first_i + int(count)))
    if rows and rows == list(range(rows[0], rows[0] + len(rows))):
        return range(rows[0], rows[0] + len(rows))
    return tuple(rows)


def _read_of(prefix: str) -> Tuple[str, str, int]:
    path, dataset, rows_total = prefix.split("\t")
    return path, dataset.lstrip("/"), int(rows_total)


class Predicted:
    """The index ranges [first, end) the learned pattern predicts, as the
    publisher shares them with the workers (_publish.save_predicted)."""

    def __init__(self, ranges: Sequence[Tuple[int, int]]):
        self.ranges = tuple((int(a), int(b)) for a, b in ranges)
        self._firsts = [a for a, _ in self.ranges]

    def __contains__(self, index: int) -> bool:
        k = bisect.bisect_right(self._firsts, index) - 1
        return k >= 0 and index < self.ranges[k][1]


def load_predicted(directory: str) -> Optional[Predicted]:
    """What the publisher shared (_publish.Publisher), or None (nothing shared, or unreadable)."""
    try:
        with open(os.path.join(directory, PREDICTED)) as f:
            values = [int(v) for v in f.read().split()]
    except (OSError, ValueError):
        return None
    ranges = [(a, b) for a, b in zip(values[0::2], values[1::2]) if a < b]
    if len(values) % 2 or not ranges or any(
            b0 > a1 for (_, b0), (a1, _) in zip(ranges, ranges[1:])):
        return None
    return Predicted(ranges)


def format_record(key: Sequence[int], recorded: bytes) -> bytes:
    """One record of a learn file: the key, the recorder's lines (bytes, as
    ReadRecorder::End returns them), its end."""
    if recorded and not recorded.endswith(b"\n"):
        recorded += b"\n"
    if len(key) == 1:
        return b"K %d\n%sE\n" % (int(key[0]), recorded)
    return b"K %s\n%sE\n" % (b",".join(b"%d" % int(k) for k in key), recorded)


# A file of a map of groups is named "<file realpath>\0<group>" ('\0' is in
# no path): the learner compares and sorts it as one string, the publisher
# writes its parts (MapFile.file_path, MapFile.group).
_GROUP_MARK = "\0"


@dataclasses.dataclass(frozen=True)
class MapFile:
    path: str  # the file's realpath, or "<realpath>\0<group>" for a group of it
    rows: int
    # Rows that make one sample: all of them for a group its index reads whole.
    rows_per_sample: int = 1

    @property
    def samples(self) -> int:
        return self.rows // self.rows_per_sample

    @property
    def file_path(self) -> str:
        return self.path.partition(_GROUP_MARK)[0]

    @property
    def group(self) -> str:
        return self.path.partition(_GROUP_MARK)[2]


def _in_groups(reads):
    """An index's reads as reads of its group (a file of a map of groups):
    ("<file>\\0<group>", dataset in the group, rows), where the group is the
    parent every dataset the index read shares ("0003" of "0003/data" and
    "0003/grid/t"); None when they share none (a dataset of the root, or
    datasets of two groups)."""
    common = None
    for _, dataset, _ in reads:
        parents = dataset.split("/")[:-1]
        common = parents if common is None else os.path.commonprefix([common, parents])
        if not common:
            return None
    group = "/".join(common)
    cut = len(group) + 1
    return tuple((path + _GROUP_MARK + group, dataset[cut:], rows)
                 for path, dataset, rows in reads)


@dataclasses.dataclass(frozen=True)
class LearnedSampleMap:
    """The files and fields learned, numbered as the connector's sample map.

    The files whose primary field was read come first (sorted by path); the
    samples an index stands for are theirs. Companion files follow: a file
    whose fields are read at exactly a primary file's rows (PatchCamelyon
    keeps images in x.h5 and labels in y.h5), `companions[k]` for the k-th
    primary file, as many for each. A companion's sample is read with the
    primary sample of the same row (with_companions)."""

    files: Tuple[MapFile, ...]
    fields: Tuple[str, ...]
    first_sample: Dict[str, int]
    num_samples: int
    companions: Tuple[Tuple[str, ...], ...] = ()

    @property
    def primary_files(self) -> int:
        return len(self.files) - sum(len(c) for c in self.companions)

    @functools.cached_property
    def whole_groups(self) -> bool:
        """Whether its groups are each one sample (their indices read them whole)."""
        return any(f.rows_per_sample > 1 for f in self.files)

    @property
    def primary_samples(self) -> int:
        """The samples of the primary files (those an index's reads are numbered in)."""
        return sum(f.samples for f in self.files[: self.primary_files])

    @functools.cached_property
    def _deltas(self) -> Tuple[List[int], Tuple[List[int], ...]]:
        """The primary files' first samples, and for each companion c, what to
        add to a primary sample of file k for its companion's: deltas[c][k]."""
        firsts = [self.first_sample[f.path] for f in self.files[: self.primary_files]]
        width = len(self.companions[0]) if self.companions else 0
        deltas = tuple([self.first_sample[comp[c]] - first
                        for comp, first in zip(self.companions, firsts)] for c in range(width))
        return firsts, deltas

    def with_companions(self, primary):
        """The samples of an index, its primary samples given: a tuple, followed
        by its companions' samples (a tuple); or a NumPy array of n indices'
        (n rows of `per`), each row followed by its companions' (n rows of
        per * (1 + C))."""
        if not self.companions:
            return primary
        firsts, deltas = self._deltas
        if isinstance(primary, tuple):
            files = [bisect.bisect_right(firsts, s) - 1 for s in primary]
            return primary + tuple(s + delta[k] for delta in deltas for s, k in zip(primary, files))
        import numpy as np

        k = np.searchsorted(np.asarray(firsts, dtype=np.int64), primary, side="right") - 1
        columns = [primary] + [primary + np.asarray(delta, dtype=np.int64)[k] for delta in deltas]
        return np.concatenate(columns, axis=1)


@dataclasses.dataclass(frozen=True)
class Pattern:
    """A map's evident pattern: index i of the k-th piece, starts[k] <= i <
    ends[k], stands for samples i * stride + offsets[k] .. + per - 1. One piece
    covers the whole map (row = index, file = index // rows per file over the
    sorted files, whole contiguous batches); one piece per file when the
    files are concatenated in another order than sorted (a ConcatDataset of
    an unsorted glob: each file's rows in index order, at its own offset), or
    when each file has fewer indices than rows (windows of time steps that
    stop short of a file's end). The stride is per unless given: windows side
    by side; FourCastNet's index reads steps t and t + 1, so per = 2 and
    stride = 1."""

    per: int
    starts: Tuple[int, ...]  # ascending, pieces do not overlap
    ends: Tuple[int, ...]
    offsets: Tuple[int, ...]
    stride: int = 0  # 0: per

    @property
    def step(self) -> int:
        return self.stride or self.per

    def first_sample(self, index: int) -> Optional[int]:
        k = bisect.bisect_right(self.starts, index) - 1
        if k < 0 or index >= self.ends[k]:
            return None
        return index * self.step + self.offsets[k]

    def first_samples(self, indices):
        """first_sample of every index of a NumPy array at once; -1 where no
        piece holds it. (NumPy is imported here, not at start-up: the start-up
        hook imports this module in every Python process.)"""
        import numpy as np

        starts = np.asarray(self.starts, dtype=np.int64)
        k = np.searchsorted(starts, indices, side="right") - 1
        inside = k >= 0
        k = np.maximum(k, 0)
        inside &= indices < np.asarray(self.ends, dtype=np.int64)[k]
        first = indices * self.step + np.asarray(self.offsets, dtype=np.int64)[k]
        return np.where(inside, first, -1)

    def ranges(self) -> Tuple[Tuple[int, int], ...]:
        """The pieces' index ranges, adjacent ones merged."""
        merged: List[List[int]] = []
        for a, b in zip(self.starts, self.ends):
            if merged and merged[-1][1] == a:
                merged[-1][1] = b
            else:
                merged.append([a, b])
        return tuple((a, b) for a, b in merged)


def _piece(per: int, stride: int, offset: int, first: int, rows: int) -> Tuple[int, int]:
    """[lo, hi): the indices i whose samples i * stride + offset .. + per - 1
    lie in the samples [first, first + rows)."""
    lo = max(0, -((offset - first) // stride))  # the least i >= 0 with i * stride + offset >= first
    hi = (first + rows - per - offset) // stride + 1
    return lo, max(lo, hi)


def _is_run(samples: Tuple[int, ...], per: int) -> bool:
    """Whether the samples are `per` distinct samples in a row (a regular index's)."""
    return len(samples) == per and samples[-1] - samples[0] == per - 1 and len(set(samples)) == per


def _neighbour_strides(firsts: Dict[int, int]) -> collections.Counter:
    """The samples between neighbouring indices of {index: its first sample}, counted where
    they are a whole positive number per index: the stride most of them agree on is the
    pattern's (an exception among them cannot decide it)."""
    strides = collections.Counter()
    ordered = sorted(firsts)
    for a, b in zip(ordered, ordered[1:]):
        step, rest = divmod(firsts[b] - firsts[a], b - a)
        if rest == 0 and step > 0:
            strides[step] += 1
    return strides


def _other_rows(before, after) -> bool:
    """Whether two records of one index read other rows: a dataset both read, read at other
    rows, or no dataset in common. A read in one record only is no change: the connector
    records the reads it looks at, and a process may leave a file's small datasets to HDF5
    unlooked at (vol/serve/small_dataset_census.h: past the first 32 it sees, so which ones
    depends on its order of reading) where the process that read the index before did not."""
    rows_before = {(path, dataset): rows for path, dataset, rows in before}
    common = False
    for path, dataset, rows in after:
        known = rows_before.get((path, dataset))
        if known is not None:
            common = True
            if known != rows:
                return True
    return not common


def _reads_whole(reads, dataset: str, rows_in) -> bool:
    """Whether an index's reads of `dataset` (one file's or group's) cover
    every row of it, and no other dataset of the same name elsewhere: what
    makes its group one sample. rows_in(path, dataset) gives a dataset's rows."""
    paths = {p for p, d, _ in reads if d == dataset}
    if len(paths) != 1:
        return False
    path = paths.pop()
    read = [r for _, d, r in reads if d == dataset]
    total = rows_in(path, dataset)
    if not total:
        return False
    if len(read) == 1:
        r = read[0]
        return len(r) == total and (r == range(total) or sorted(r) == list(range(total)))
    return set().union(*read) == set(range(total))


def _rows_per_index(records, dataset: str) -> int:
    """The rows of `dataset` most indices read (in {index: reads})."""
    rows = collections.Counter(sum(len(r) for _, d, r in reads if d == dataset)
                               for reads in records.values())
    return rows.most_common(1)[0][0] if rows else 0


def _most_read(records) -> Optional[Tuple[collections.Counter, str]]:
    """(indices per dataset, the most read: among equals the first by name)
    of {index: reads}, or None without reads."""
    counts = collections.Counter()
    for reads in records.values():
        counts.update({dataset for _, dataset, _ in reads})
    if not counts:
        return None
    return counts, min(counts, key=lambda d: (-counts[d], d))


class LearnedMap:
    """Everything learned so far, from every worker file of the job."""

    def __init__(self) -> None:
        # index -> the reads it made: (file realpath, dataset, rows in order)
        self._reads: Dict[int, Tuple[Tuple[str, str, Rows], ...]] = {}
        self._dataset_rows: Dict[Tuple[str, str], int] = {}
        self._offsets: Dict[str, int] = {}
        self._realpaths: Dict[str, str] = {}
        self.unlearnable = 0  # records nothing could be learned from
        # The last map built found that every index reads datasets of its own,
        # with no group of its own to make a map of groups from.
        self.datasets_of_their_own = False
        # The last map built is one of groups: {index: its reads as _in_groups
        # gives them} (reads with no group of their own left out), else None.
        self._grouped: Optional[Dict[int, tuple]] = None
        self.rechecked = 0    # indices read again while learning
        self.changed = 0      # ... that read other rows than before
        self._map: Optional[LearnedSampleMap] = None
        self._pattern: Optional[Pattern] = None
        self._unplaced = 0  # new indices in no piece since the pattern was found
        # False when the records contradict every pattern (adding more cannot help).
        self._pattern_possible = True
        self._piece_files: frozenset = frozenset()  # files (map positions) with a piece
        self._exceptions: set = set()  # learned indices the pattern does not describe
        self._file_firsts: List[int] = []  # each map file's first sample
        # Records the map was built from: its "no pattern" verdict stands for
        # good only when they were enough evidence (see _still_fits).
        self._built_from = 0
        self._samples: Dict[int, Tuple[int, ...]] = {}
        self._sibling_cache: Dict[Tuple[str, str], Iterable[str]] = {}
        # A read line's "<file>\t<dataset>\t<rows>" -> (file realpath, dataset, rows):
        # a learn file repeats a handful of them 40,000 times.
        self._heads: Dict[str, Tuple[str, str, int]] = {}

    # ----------------------------------------------------------- learning --
    def known(self) -> frozenset:
        return frozenset(self._reads)

    def __len__(self) -> int:
        return len(self._reads)

    def _realpath(self, path: str) -> str:
        real = self._realpaths.get(path)
        if real is None:
            real = self._realpaths[path] = os.path.realpath(path)
        return real

    def _add_batch(self, key: List[int], resolved: list) -> None:
        """A batch: every dataset read with one row per index is split in
        sorted order; the batch is not learned from otherwise."""
        per_index: Dict[int, list] = {k: [] for k in key}
        if len(per_index) != len(key):
            self.unlearnable += 1
            return
        ordered = sorted(per_index)
        split_any = False
        for real, dataset, rows in resolved:
            if len(rows) != len(ordered) or len(set(rows)) != len(rows):
                continue
            split_any = True
            for index, row in zip(ordered, sorted(rows)):
                per_index[index].append((real, dataset, range(row, row + 1)))
        if not split_any:
            self.unlearnable += 1
            return
        for index, entries in per_index.items():
            self._set(index, tuple(entries))

    def _set(self, index: int, reads) -> None:
        known = self._reads.get(index)
        if known is not None:  # read again (workers re-check a few known indices)
            self.rechecked += 1
            if known == reads:
                return
            changed = _other_rows(known, reads)
            self.changed += changed
            if not changed and len(reads) <= len(known):
                return  # the same rows, fewer of its reads looked at: keep the fuller record
        self._reads[index] = reads
        if self._grouped is not None:
            grouped = _in_groups(reads)
            if grouped is None:
                self._grouped.pop(index, None)
                self._map = None
                return
            self._grouped[index] = reads = grouped
        if not self._still_fits(index, reads, new=known is None):
            self._map = None

    def _still_fits(self, index: int, reads, new: bool) -> bool:
        """Whether the map and pattern built so far stand with this record
        added, checked for it alone: its files and fields are the map's and
        its samples fit the pattern; or, for a map without a pattern found in
        enough records, a new index reading only the map's files and fields
        (no pattern can appear by adding records: one fits none already).
        Otherwise both are rebuilt from every record at the next use: without
        that second case a map without a pattern (a loader's shuffled index
        table) was rebuilt at every look, ~40 ms per 40,000 records, a dozen
        times in the first epoch. Records a rebuild could still learn a
        pattern from (files read too few times for a piece of their own) are
        let in until they are as many as the records the map was built from:
        the rebuilds' cost then doubles at most."""
        m = self._map
        if m is None:
            return False
        if any(path not in m.first_sample or dataset not in m.fields
               for path, dataset, _ in reads):
            return False
        if m.whole_groups and not _reads_whole(reads, m.fields[0], self._rows_in):
            return False  # a group read in part: its rows are samples after all
        pattern = self._pattern
        if pattern is None and (not new or self._built_from < _MIN_PATTERN_EVIDENCE):
            return False
        self._samples.pop(index, None)
        if pattern is None:
            return not self._pattern_possible or self._let_in_unplaced()
        samples = self._learned_samples(index)
        first = pattern.first_sample(index)
        if first is None:  # in no piece: a file with too little evidence so far ...
            if not self._in_piece_files(samples):
                return self._let_in_unplaced()
            # ... or a file of a piece, at an index outside it: a boundary case
            return self._taken_as_exception(index)
        if samples and samples[0] == first and _is_run(samples, pattern.per):
            self._exceptions.discard(index)
            return True
        return self._taken_as_exception(index)

    def _taken_as_exception(self, index: int) -> bool:
        """Keeps a learned index the pattern does not describe as an exception
        while they are at most one in _EXCEPTION_SHARE; False (rebuild) past that."""
        if index in self._exceptions or len(self._exceptions) < len(self._reads) // _EXCEPTION_SHARE:
            self._exceptions.add(index)
            return True
        return False

    def _let_in_unplaced(self) -> bool:
        """Counts a new index no pattern places; True while such indices are
        fewer than the records the map was built from (then it is rebuilt)."""
        self._unplaced += 1
        return self._unplaced < max(_MIN_PATTERN_EVIDENCE, self._built_from)

    def _in_piece_files(self, samples: Tuple[int, ...]) -> bool:
        """Whether any of the samples lies in a file that has a piece."""
        files = self._piece_files
        return any(self._file_of(s) in files for s in samples)

    def _file_of(self, sample: int) -> int:
        """The position of the map's file holding the sample."""
        return bisect.bisect_right(self._file_firsts, sample) - 1

    def unstable(self) -> bool:
        """True when indices read again read other rows (more than 1 in 10 of at
        least 32): the dataset maps indices to rows anew (a table it
        reshuffles), and a learned map would prefetch the wrong rows."""
        return self.rechecked >= 32 and self.changed * 10 > self.rechecked

    def skip_written(self, directory: str) -> None:
        """Reads nothing of what the workers wrote so far (the records of a
        loader no longer followed): later reads start at the files' ends (a
        record cut there is not one: it lacks its "K" line)."""
        try:
            names = [n for n in os.listdir(directory) if n.startswith(LEARN_PREFIX)]
        except OSError:
            return
        for name in names:
            try:
                self._offsets[name] = os.stat(os.path.join(directory, name)).st_size
            except OSError:
                continue

    def read_files(self, directory: str) -> int:
        """Reads what workers appended since the last call; returns records."""
        added = 0
        try:
            names = sorted(n for n in os.listdir(directory) if n.startswith(LEARN_PREFIX))
        except OSError:
            return 0
        quiet = load_quiet_seeds(directory)
        names = [n for n in names if _seed_of(n) not in quiet]
        for name in names:
            path = os.path.join(directory, name)
            offset = self._offsets.get(name, 0)
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    data = f.read()
            except OSError:
                continue
            # Only whole records (a worker may be appending right now).
            end = data.rfind(b"\nE\n")
            if end < 0:
                continue
            chunk = data[: end + 3].decode("utf-8", "replace")
            self._offsets[name] = offset + end + 3
            added += self.add_records(chunk)
        return added

    def add_records(self, chunk: str) -> int:
        """Learns from whole records (format_record's, decoded); returns how many.

        One pass over the chunk's lines, without a call per line: the
        training process reads 40,000 records in a 40,000-sample epoch of an
        index table, on a thread that holds the interpreter's lock while the
        loop's main thread waits for it to hand the workers their indices.
        The looks of such a first epoch took ~165 ms with a call per record
        and per line, ~95 ms so (build/exp measurements, RESULTS.md)."""
        heads = self._heads
        added = 0
        key: Optional[List[int]] = None
        resolved: list = []
        broken = False  # an overflow or a line that is not the recorder's: nothing learned
        for line in chunk.split("\n"):
            if line == "E":
                if key is not None:
                    added += 1
                    if broken or not resolved:
                        self.unlearnable += 1
                    elif len(key) == 1:
                        self._set(key[0], tuple(resolved))
                    else:
                        self._add_batch(key, resolved)
                key = None
                continue
            if key is None and line.startswith("K "):
                try:
                    key = [int(k) for k in line[2:].split(",") if k]
                except ValueError:
                    self.unlearnable += 1
                    key = None
                    continue
                if not key:
                    key = None
                    self.unlearnable += 1
                    continue
                resolved = []
                broken = False
                continue
            if key is None or broken:
                continue
            prefix, tab, runs = line.rpartition("\t")
            if not tab:
                broken = line == "overflow"
                continue
            head = heads.get(prefix)
            if head is None:
                try:
                    path, dataset, rows_total = _read_of(prefix)
                except ValueError:  # not a recorder's line
                    continue
                head = heads[prefix] = (self._realpath(path), dataset, rows_total)
            try:
                first, _, count = runs.partition("+")
                if count == "1":  # a sample's read: one row
                    first_i = int(first)
                    rows = range(first_i, first_i + 1)
                else:
                    rows = _rows_of(runs)
            except ValueError:
                broken = True
                continue
            real, dataset, rows_total = head
            self._dataset_rows[(real, dataset)] = rows_total
            resolved.append((real, dataset, rows))
        return added

    # ------------------------------------------------------------ the map --
    def sample_map(self) -> Optional[LearnedSampleMap]:
        if self._map is None:
            self._map = self._build_map()
            self._built_from = len(self._reads)
            self._samples = {}
            self._unplaced = 0
            self._exceptions = set()
            self._pattern = self._find_pattern() if self._map is not None else None
            if (self._map is not None and self._pattern is None and not self._map.companions
                    and len(self._reads) >= _MIN_PATTERN_EVIDENCE):
                if self._grouped is None:
                    self._try_sibling_files()
                else:
                    self._try_sibling_groups()
            if self._map is not None and self._pattern is None:
                self._pattern = self._find_pieces()
            elif self._map is not None:  # one piece over every file
                self._file_firsts = [self._map.first_sample[f.path] for f in self._map.files]
                self._piece_files = frozenset(range(self._map.primary_files))
        return self._map

    def _try_sibling_files(self) -> None:
        """One sample per file (or any fixed number): the files read so far are
        a scattering of the dataset's, so their numbering fits no pattern.
        Their siblings (same directory, same suffix) complete the sorted file
        list, each assumed to hold as many rows as every file read so far; the
        wider map is kept only when every learned index fits a pattern in it
        (a wrong guess about a file then costs prefetches, never bytes: the
        connector checks each file's size and rows before binding it)."""
        seen = {f.path for f in self._map.files}
        paths = set(seen)
        for path in seen:
            paths.update(self._siblings(path))
        self._try_wider_map(paths)

    def _try_wider_map(self, paths) -> None:
        """The map over `paths` (the files read so far and those assumed to be
        like them, each of as many rows and samples as every file read so
        far), kept when every learned index fits a pattern in it."""
        m = self._map
        shapes = {(f.rows, f.rows_per_sample) for f in m.files}
        if len(shapes) != 1 or len(paths) == len(m.files):
            return
        rows, per_sample = shapes.pop()
        files = tuple(MapFile(p, rows, per_sample) for p in sorted(paths))
        per_file = rows // per_sample
        first = {f.path: i * per_file for i, f in enumerate(files)}
        self._map = LearnedSampleMap(files, m.fields, first, len(files) * per_file)
        self._pattern = self._find_pattern()
        if self._pattern is None:
            self._map = m

    def _try_sibling_groups(self) -> None:
        """_try_sibling_files for a map of groups: a group per sample
        (PDEBench's seeds, `f[keys[i]]`, keys sorted) leaves the groups read
        so far a scattering of the file's, so their numbering fits no pattern
        until every group is read. The other groups beside them in the same
        parent complete the sorted list, each assumed to hold the fields as
        the groups read so far do; the wider map is kept only when every
        learned index fits a pattern in it, which then predicts the first
        epoch's other indices (a wrong guess costs prefetches, never bytes:
        the connector checks every dataset's rows before binding it)."""
        m = self._map
        parents = {(f.file_path, f.group.rpartition("/")[0]) for f in m.files}
        if len(parents) != 1:
            return
        path, parent = parents.pop()
        groups = self._sibling_groups(path, parent)
        seen = {f.group for f in m.files}
        if not seen.issubset(groups):
            return
        self._try_wider_map({path + _GROUP_MARK + g for g in groups})

    def _sibling_groups(self, path: str, parent: str) -> frozenset:
        """The groups in `parent` ("" for the root) of the file `path`, by their
        full names; empty when they cannot be listed. Listed through h5py in
        this process, and only when the application has imported it: a
        process that reads its files otherwise (netCDF) gets no second HDF5."""
        key = (path, _GROUP_MARK + parent)
        found = self._sibling_cache.get(key)
        if found is not None:
            return found
        found = frozenset()
        h5py = sys.modules.get("h5py")
        if h5py is not None:
            try:
                with h5py.File(path, "r") as f:
                    where = f[parent] if parent else f
                    if isinstance(where, h5py.Group):
                        prefix = parent + "/" if parent else ""
                        found = frozenset(prefix + name for name in where
                                          if where.get(name, getclass=True) is h5py.Group)
            except Exception:  # noqa: BLE001 - a guess that cannot be made is no guess
                found = frozenset()
        self._sibling_cache[key] = found
        return found

    def _siblings(self, path: str) -> Tuple[str, ...]:
        directory, name = os.path.split(path)
        suffix = os.path.splitext(name)[1]
        key = (directory, suffix)
        found = self._sibling_cache.get(key)
        if found is None:
            try:
                with os.scandir(directory) as entries:
                    found = tuple(os.path.join(directory, e.name) for e in entries
                                  if e.name.endswith(suffix) and e.is_file())
            except OSError:
                found = ()
            self._sibling_cache[key] = found
        return found

    def _map_reads(self, index: int):
        """An index's reads as the map describes them (in groups for a map of groups)."""
        if self._grouped is not None:
            return self._grouped.get(index)
        return self._reads.get(index)

    def _rows_in(self, path: str, dataset: str, default=None):
        """The rows of `dataset` of a file of the map (a group's: named in it)."""
        real, _, group = path.partition(_GROUP_MARK)
        return self._dataset_rows.get((real, f"{group}/{dataset}" if group else dataset), default)

    def _build_map(self) -> Optional[LearnedSampleMap]:
        self._grouped = None
        whole = False
        records = self._reads
        found = _most_read(records)
        if found is None:
            return None
        counts, primary = found
        self.datasets_of_their_own = False
        grouped = None
        if len(records) >= _OWN_DATASET_EVIDENCE and counts[primary] <= _OWN_DATASET_READERS:
            # Every index reads datasets of its own: a map of their groups, if they have any.
            grouped = {i: g for i, r in records.items() if (g := _in_groups(r)) is not None}
            found = _most_read(grouped)
            if found is None or found[0][found[1]] <= _OWN_DATASET_READERS:
                self.datasets_of_their_own = True
                return None
            if _rows_per_index(grouped, found[1]) > _MAX_GROUP_ROWS:
                self.datasets_of_their_own = True
                return None
        elif len(records) >= _OWN_DATASET_EVIDENCE and counts[primary] < len(records) // 2:
            # No dataset is read by most indices: each reads datasets of a group that some
            # others share (windows of an episode, robomimic's `data/demo_<k>/obs/...`). A map
            # of groups when nearly every index reads the same dataset of its group; else the
            # map of the most read dataset, as before.
            grouped = {i: g for i, r in records.items() if (g := _in_groups(r)) is not None}
            in_groups = _most_read(grouped)
            if (in_groups is None or len(grouped) < 0.99 * len(records)
                    or in_groups[0][in_groups[1]] < 0.99 * len(grouped)
                    or _rows_per_index(grouped, in_groups[1]) > _MAX_GROUP_ROWS):
                grouped = None
            else:
                found = in_groups
        if grouped is not None:
            (counts, primary), records = found, grouped
            self._grouped = grouped
            whole = all(_reads_whole(reads, primary, self._rows_in)
                        for reads in grouped.values() if any(d == primary for _, d, _ in reads))
        # Other fields: read at the primary's file and rows by (almost) every index;
        # companions: read at the primary's rows in another file (see _companions).
        same = collections.Counter()
        beside = collections.Counter()  # (primary file, other file, dataset) -> indices
        with_primary = 0
        of_file = collections.Counter()  # primary file -> indices that read it
        for reads in records.values():
            primary_reads = {(p, rows) for p, d, rows in reads if d == primary}
            if not primary_reads:
                continue
            with_primary += 1
            in_file = {d for p, d, rows in reads if d != primary and (p, rows) in primary_reads}
            same.update(in_file)
            of_file.update({p for p, _ in primary_reads})
            if len(primary_reads) + len(in_file) >= len(reads):
                continue  # nothing read elsewhere (the usual record: no companion to look for)
            at_rows = {rows: p for p, rows in primary_reads}
            beside.update({(at_rows[rows], p, d) for p, d, rows in reads
                           if rows in at_rows and p != at_rows[rows]})
        fields = [primary] + sorted(d for d, n in same.items() if n >= 0.99 * with_primary)
        paths = sorted({p for reads in records.values() for p, d, _ in reads if d == primary})
        files = []
        for path in paths:
            rows = self._rows_in(path, primary)
            # A field of another length in this file cannot share the primary's rows.
            fields = [f for f in fields if f == primary or self._rows_in(path, f, rows) == rows]
            files.append(MapFile(path, rows, rows if whole else 1))
        companions, companion_fields = self._companions(files, of_file, beside)
        fields += [d for d in companion_fields if d not in fields]
        for comps, f in zip(companions, list(files)):
            files.extend(MapFile(c, f.rows, f.rows_per_sample) for c in comps)
        first, total = {}, 0
        for f in files:
            first[f.path] = total
            total += f.samples
        if total == 0:
            return None
        return LearnedSampleMap(tuple(files), tuple(fields), first, total, companions)

    def _companions(self, files: List[MapFile], of_file: collections.Counter,
                    beside: collections.Counter) -> Tuple[Tuple[Tuple[str, ...], ...], List[str]]:
        """The companion files of each primary file (as many for each, or none
        at all) and their fields: another file whose dataset of as many rows
        is read at the primary's rows by (almost) every index that reads the
        primary file, and by no index of another primary file. Without them
        the labels of images kept apart (x.h5, y.h5) were read unscheduled:
        half of every followed epoch's reads, and none prefetched."""
        primaries = {f.path for f in files}
        rows_of = {f.path: f.rows for f in files}
        found: Dict[Tuple[str, str], set] = collections.defaultdict(set)  # (p, q) -> datasets
        owners: Dict[str, set] = collections.defaultdict(set)  # q -> primary files beside it
        for (p, q, d), n in beside.items():
            owners[q].add(p)
            if (q not in primaries and n >= 0.99 * of_file[p]
                    and self._rows_in(q, d) == rows_of[p]):
                found[(p, q)].add(d)
        of_primary: Dict[str, List[str]] = collections.defaultdict(list)
        for p, q in found:
            if owners[q] == {p}:
                of_primary[p].append(q)
        per_file = [tuple(sorted(of_primary.get(f.path, ()))) for f in files]
        if not per_file[0] or any(len(c) != len(per_file[0]) for c in per_file):
            return (), []
        fields = sorted({d for (p, q), names in found.items() if owners[q] == {p} for d in names})
        return tuple(per_file), fields

    def _learned_samples(self, index: int) -> Tuple[int, ...]:
        m = self._map
        reads = self._map_reads(index)
        if m is None or not reads:
            return ()
        primary = m.fields[0]
        out = []
        for path, dataset, rows in reads:
            if dataset != primary:
                continue
            first = m.first_sample.get(path)
            if first is None:
                continue
            if not m.whole_groups:
                out.extend(first + r for r in rows)
            elif not out or out[-1] != first:  # its group, read whole
                out.append(first)
        return tuple(out)

    def _find_pattern(self) -> Optional[Pattern]:
        """One piece over the whole map when the learned indices i stand for
        the samples i * stride + offset .. + per - 1 of the map (row = index,
        file = index // rows per file over the sorted files, whole contiguous
        batches, overlapping windows, ...): the map's evident pattern, which
        predicts the indices not read yet. Up to one learned index in
        _EXCEPTION_SHARE may read other rows (kept as learned: _exceptions);
        the rest must all fit, and be at least _MIN_PATTERN_EVIDENCE."""
        if len(self._reads) < _MIN_PATTERN_EVIDENCE:
            return None
        learned = {index: self._learned_samples(index) for index in self._reads}
        if not all(learned.values()):
            return None
        # The shape most indices have: `per` samples in a row, all distinct.
        per = collections.Counter(len(v) for v in learned.values()).most_common(1)[0][0]
        regular = {i: v[0] for i, v in learned.items() if _is_run(v, per)}
        # The stride and offset most neighbouring indices agree on.
        strides = _neighbour_strides(regular)
        if not strides:
            return None
        stride = strides.most_common(1)[0][0]
        offset = collections.Counter(f - i * stride for i, f in regular.items()).most_common(1)[0][0]
        fitting = {i for i, f in regular.items() if f == i * stride + offset}
        exceptions = set(learned) - fitting
        if (len(fitting) < _MIN_PATTERN_EVIDENCE
                or len(exceptions) > len(learned) // _EXCEPTION_SHARE):
            return None
        lo, hi = _piece(per, stride, offset, 0, self._map.primary_samples)
        if lo >= hi:
            return None
        self._exceptions = exceptions
        return Pattern(per, (lo,), (hi,), (offset,), 0 if stride == per else stride)

    def exceptions(self) -> Dict[int, Tuple[int, ...]]:
        """Learned indices the pattern does not describe, and their samples."""
        if self.pattern() is None:
            return {}
        return {i: self._learned_samples(i) for i in self._exceptions}

    def _find_pieces(self) -> Optional[Pattern]:
        """One piece per file when each file's learned indices fit a pattern of
        their own (same samples per index, one offset per file) and the
        files' index ranges do not overlap: files concatenated in an order
        other than sorted, or indices that skip one or more between files
        (CREDIT's ERA5 datasets leave an index out after each year's file).
        Up to one learned index in _EXCEPTION_SHARE may fit no piece, as over
        the whole map (_find_pattern): a loader's boundary cases (CREDIT's
        last indices of a year read the year's last window again). A file
        read fewer than _MIN_PIECE_EVIDENCE times gets no piece yet (its
        indices are not predicted, and another look may give it one); a
        contradiction (more exceptions than that, overlapping ranges) ends
        the search for good (_pattern_possible)."""
        m = self._map
        self._file_firsts = [m.first_sample[f.path] for f in m.files]
        self._piece_files = frozenset()
        self._pattern_possible = False
        if len(self._reads) < _MIN_PATTERN_EVIDENCE:
            self._pattern_possible = True
            return None
        learned = {index: self._learned_samples(index) for index in self._reads}
        if not all(learned.values()):
            return None
        # The shape most indices have: `per` samples in a row, all distinct, in one file.
        per = collections.Counter(len(v) for v in learned.values()).most_common(1)[0][0]
        of_file: Dict[int, Dict[int, int]] = collections.defaultdict(dict)  # k -> {index: first}
        for index, samples in learned.items():
            k = self._file_of(samples[0])
            if _is_run(samples, per) and self._file_of(samples[-1]) == k:
                of_file[k][index] = samples[0]
        # One stride for every file: the one most neighbouring indices of a file
        # agree on (per when no file was read at two indices: windows side by side).
        strides = sum((_neighbour_strides(firsts) for firsts in of_file.values()),
                      collections.Counter())
        stride = strides.most_common(1)[0][0] if strides else per
        # Each file's offset: the one most of its indices agree on.
        fitting: Dict[int, set] = {}
        offsets: Dict[int, int] = {}
        for k, firsts in of_file.items():
            offset = collections.Counter(f - i * stride for i, f in firsts.items())
            offsets[k] = offset.most_common(1)[0][0]
            fitting[k] = {i for i, f in firsts.items() if f == i * stride + offsets[k]}
        exceptions = set(learned).difference(*fitting.values())
        if len(exceptions) > len(learned) // _EXCEPTION_SHARE:
            return None
        kept = sorted(k for k in offsets if len(fitting[k]) >= _MIN_PIECE_EVIDENCE)
        self._pattern_possible = len(kept) < len(offsets)  # more reads may add pieces
        pieces = []
        for k in kept:
            lo, hi = _piece(per, stride, offsets[k], self._file_firsts[k], m.files[k].samples)
            if lo < hi:
                pieces.append((lo, hi, offsets[k], k))
        if not pieces:  # no file read often enough yet
            return None
        pieces.sort()
        if any(a[1] > b[0] for a, b in zip(pieces, pieces[1:])):
            self._pattern_possible = False
            return None
        pattern = Pattern(per, tuple(p[0] for p in pieces), tuple(p[1] for p in pieces),
                          tuple(p[2] for p in pieces), 0 if stride == per else stride)
        # An index of a file without a piece inside another file's piece
        # contradicts the concatenation.
        piece_of = {p[3]: i for i, p in enumerate(pieces)}
        for k, indices in fitting.items():
            if k not in piece_of and any(pattern.first_sample(i) is not None for i in indices):
                self._pattern_possible = False
                return None
        self._piece_files = frozenset(piece_of)
        self._exceptions = exceptions
        return pattern

    def samples_of(self, index: int) -> Tuple[int, ...]:
        """The samples an index stands for: learned, else predicted by the
        map's evident pattern; empty when neither."""
        cached = self._samples.get(index)
        if cached is not None:
            return cached
        if self.sample_map() is None:
            return ()
        result = self._learned_samples(index)
        if not result and self._pattern is not None:
            first = self._pattern.first_sample(index)
            if first is not None:
                result = tuple(range(first, first + self._pattern.per))
        if result:
            result = self._map.with_companions(result)
        self._samples[index] = result
        return result

    def pattern(self) -> Optional[Pattern]:
        """The map's evident pattern, or None."""
        if self.sample_map() is None:
            return None
        return self._pattern

    def predicted_indices(self) -> Optional[Tuple[Tuple[int, int], ...]]:
        """The index ranges [first, end) the evident pattern maps into the
        map's samples, or None without a pattern."""
        pattern = self.pattern()
        return pattern.ranges() if pattern is not None else None

    def predicts(self) -> bool:
        """True when indices not read yet are predicted (an evident pattern)."""
        return self.pattern() is not None

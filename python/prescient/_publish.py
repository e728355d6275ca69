"""Each rank's epoch orders, and the node's schedule assembled from them.

A rank's training process saves the order of every epoch it starts
(`order-r<rank>-e<epoch>.npy`: the sampler's items, each one DataLoader step,
as index lists) in the job's directory. Publishing (any rank, serialised by a
lock file) reads every rank's orders and what the workers learned, translates
indices into the samples of the learned map, and writes the schedule the
connector follows (PRESCIENT_SCHEDULE), renamed into place so a reader never
sees a partial file:

* ranks: every rank of the job on this node (`local_ranks`, or more when a
  rank number says so); a rank that has not started an epoch yet reads
  nothing in it (empty steps);
* epochs: 0 .. the newest any rank started; epochs every rank has finished
  are kept as empty steps, so global step numbers never change between
  versions of the file;
* steps of one epoch are as many as its longest order (DistributedSampler
  gives every rank the same number).
"""

from __future__ import annotations

import fcntl
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ._learn import _EXCEPTION_SHARE, PREDICTED, LearnedMap
from ._schedule_writer import WriterField, WriterFile, write_atomically, write_schedule

_ORDER = re.compile(r"order-r(\d+)-e(\d+)\.npy$")
_LOCK = "publish.lock"
KNOWN = "known.npy"


def save_order(directory: str, rank: int, epoch: int, items: Sequence[Sequence[int]],
               workers: int) -> None:
    """One epoch of one rank: item k (one step) is a list of indices, read by
    `workers` DataLoader workers. Stored as one int64 array:
    [items, workers, len_0, ..., len_{items-1}, indices...]."""
    lengths = np.fromiter((len(item) for item in items), dtype=np.int64, count=len(items))
    flat = np.fromiter((int(i) for item in items for i in item), dtype=np.int64,
                       count=int(lengths.sum()))
    data = np.concatenate([np.array([len(items), workers], dtype=np.int64), lengths, flat])
    _save_atomically(os.path.join(directory, f"order-r{rank}-e{epoch}.npy"), data)


def _save_atomically(path: str, data: np.ndarray) -> None:
    write_atomically(path, lambda out: np.save(out, data, allow_pickle=False))


def save_predicted(directory: str, ranges: Optional[Sequence[Tuple[int, int]]]) -> None:
    """Shares the index ranges [first, end) the learned pattern predicts
    (_learn.load_predicted reads them in the workers); None withdraws them."""
    path = os.path.join(directory, PREDICTED)
    if ranges is None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return
    text = "".join(f"{int(a)} {int(b)}\n" for a, b in ranges).encode()
    write_atomically(path, lambda out: out.write(text))


def save_known(directory: str, known) -> None:
    """The indices whose rows are learned, for workers forked before the
    epoch's publication (they read it at their first fetch)."""
    _save_atomically(os.path.join(directory, KNOWN), np.fromiter(known, np.int64, len(known)))


def load_known(directory: str) -> frozenset:
    try:
        return frozenset(np.load(os.path.join(directory, KNOWN), allow_pickle=False).tolist())
    except (OSError, ValueError):
        return frozenset()


def _load_order(path: str) -> Tuple[np.ndarray, np.ndarray, int]:
    """(lengths per step, indices, workers)."""
    data = np.load(path, allow_pickle=False)
    steps = int(data[0])
    lengths = data[2 : 2 + steps]
    return lengths, data[2 + steps :], int(data[1])


def _orders(directory: str) -> Dict[Tuple[int, int], str]:
    found = {}
    for name in os.listdir(directory):
        m = _ORDER.match(name)
        if m:
            found[(int(m.group(1)), int(m.group(2)))] = os.path.join(directory, name)
    return found


# A rank's epoch is published only when (almost) all its indices are learned:
# the indices learned so far in an epoch are the ones already read, so a
# partly learned epoch would only describe its past.
_MIN_LEARNED = 0.99
# ... or when at most one index in this many is neither learned nor predicted,
# with a pattern that predicts the rest (a loader's boundary indices outside
# every piece, not read yet: CREDIT's last two of a year's file in 96; the
# pattern tolerates as many among the learned ones), or from a rank's second
# epoch on (its first read every index but those drop_last left out: the
# Well's 8 of 776 with batches of 16, a different 8 the next epoch).
_UNDESCRIBED_SHARE = _EXCEPTION_SHARE


def _translate(learned: LearnedMap, lengths: np.ndarray, indices: np.ndarray,
               after_an_epoch: bool = False):
    """(samples, step boundaries) of an order, or None when too few of its
    indices are learned yet (after_an_epoch: the rank finished an epoch
    before this order's)."""
    pattern = learned.pattern()
    if pattern is not None:
        # Every learned index fits the pattern (LearnedMap checks each), so
        # it gives every index's samples at once.
        per = pattern.per
        idx = np.asarray(indices, dtype=np.int64)
        first = pattern.first_samples(idx)
        exceptions = learned.exceptions()
        # Learned exceptions may lie outside every piece (a boundary index).
        is_exception = np.isin(idx, np.fromiter(exceptions, dtype=np.int64, count=len(exceptions)))
        if ((first >= 0) | is_exception).all() and all(len(v) == per for v in exceptions.values()):
            samples = first[:, None] + np.arange(per, dtype=np.int64)
            # Learned indices the pattern does not describe read their own rows.
            for position in np.flatnonzero(is_exception).tolist():
                samples[position] = exceptions[int(idx[position])]
            samples = learned.sample_map().with_companions(samples)
            width = samples.shape[1]
            samples = samples.reshape(-1)
            bounds = np.zeros(len(lengths) + 1, dtype=np.uint64)
            np.cumsum(np.asarray(lengths, dtype=np.uint64) * np.uint64(width), out=bounds[1:])
            return samples.astype(np.uint32), bounds
    # Cheap first, without a pattern (nothing predicted): at most len(learned)
    # of the order's distinct indices are learned, so the rest are unknown
    # (each at least once). While the first epoch of such a map is learned,
    # every look ends here, not in the loop below.
    allowed = (1 - _MIN_LEARNED) * len(indices)
    if pattern is not None or after_an_epoch:
        allowed = max(allowed, len(indices) / _UNDESCRIBED_SHARE)
    if pattern is None and (len(np.unique(np.asarray(indices, dtype=np.int64))) - len(learned)
                            > allowed):
        return None
    samples: List[int] = []
    bounds = np.zeros(len(lengths) + 1, dtype=np.uint64)
    pos = unknown = 0
    for step, length in enumerate(lengths):
        for index in indices[pos : pos + int(length)]:
            of_index = learned.samples_of(int(index))
            unknown += not of_index
            samples.extend(of_index)
        pos += int(length)
        bounds[step + 1] = len(samples)
    if unknown > allowed:
        return None
    return np.asarray(samples, dtype=np.uint32), bounds


class Publisher:
    """Publishes the node's schedule for one rank's follower."""

    def __init__(self, directory: str, schedule_path: str, local_ranks: int):
        self._directory = directory
        self._schedule_path = schedule_path
        self._local_ranks = local_ranks
        self.learned = LearnedMap()
        self.published = 0  # schedule versions this process wrote
        self.covered = set()  # (rank, epoch) parts the last version described
        # path -> (size, mtime_ns) as first seen: a map of a million files is not
        # stat'ed again at every publish (a file changed since is found by the
        # connector, which compares both before binding it).
        self._stats: Dict[str, Tuple[int, int]] = {}
        self._shared_prediction: Optional[Tuple[Tuple[int, int], ...]] = None

    def _share_prediction(self) -> None:
        """Tells the workers which indices the pattern predicts (or that it
        broke), when that changed since this publisher last said."""
        predicted = self.learned.predicted_indices()
        if predicted != self._shared_prediction:
            save_predicted(self._directory, predicted)
            self._shared_prediction = predicted

    def _stat(self, path: str) -> Tuple[int, int]:
        known = self._stats.get(path)
        if known is None:
            try:
                st = os.stat(path)
                known = (st.st_size, st.st_mtime_ns)
            except OSError:  # gone since it was listed: the connector leaves it unbound
                known = (0, 0)
            self._stats[path] = known
        return known

    def forget_learned(self) -> None:
        """Starts learning anew (the followed loader is now one over another
        dataset): what the workers wrote so far is left unread, and what was
        shared from it (the known indices, the prediction) is withdrawn."""
        self.learned = LearnedMap()
        self.learned.skip_written(self._directory)
        save_known(self._directory, frozenset())
        save_predicted(self._directory, None)
        self._shared_prediction = None

    def absorb(self) -> int:
        """Reads what the workers appended since the last look (no schedule is
        written); returns the records read."""
        added = self.learned.read_files(self._directory)
        self.learned.sample_map()  # built now if the records call for it
        self._share_prediction()
        return added

    def publish(self) -> bool:
        """Writes the schedule; False when nothing can be scheduled yet (no
        sample map learned)."""
        fd = os.open(os.path.join(self._directory, _LOCK),
                     os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self.learned.read_files(self._directory)
            sample_map = self.learned.sample_map()
            self._share_prediction()
            if sample_map is None:
                return False
            # Indices that read other rows each epoch: nothing is described
            # (parts left empty), so nothing wrong is prefetched.
            unstable = self.learned.unstable()
            orders = _orders(self._directory)
            if not orders:
                return False
            ranks = max(self._local_ranks, 1 + max(r for r, _ in orders))
            epochs = 1 + max(e for _, e in orders)
            newest = {}
            for r, e in orders:
                newest[r] = max(newest.get(r, -1), e)
            # Epochs before the oldest current epoch are finished by every rank.
            oldest_current = min(newest.values()) if len(newest) == ranks else 0
            loaded = {key: _load_order(path) for key, path in orders.items()}
            # Orders of finished epochs are kept as their step counts only (the
            # global step numbers of later epochs depend on them): a long job
            # must not fill the node's memory with them.
            for (r, e), path in orders.items():
                lengths, indices, workers_of = loaded[(r, e)]
                if e < oldest_current and len(indices):
                    save_order(self._directory, r, e, [()] * len(lengths), workers_of)
            steps = {e: 0 for e in range(epochs)}
            workers = max(w for _, _, w in loaded.values())
            for (r, e), (lengths, _, _) in loaded.items():
                steps[e] = max(steps[e], len(lengths))
            # Samples per step at most: with the workers, how far apart the
            # connector expects a rank's readers to be (position tracking).
            batch = 1
            parts = {}
            self.covered = set()
            for e in range(epochs):
                for r in range(ranks):
                    empty = (np.zeros(0, np.uint32), np.zeros(steps[e] + 1, np.uint64))
                    if (r, e) not in loaded or e < oldest_current or unstable:
                        parts[(e, r)] = empty
                        continue
                    lengths, indices, _ = loaded[(r, e)]
                    translated = _translate(self.learned, lengths, indices,
                                            after_an_epoch=(r, e - 1) in loaded)
                    if translated is None:
                        parts[(e, r)] = empty
                        continue
                    samples, bounds = translated
                    self.covered.add((r, e))
                    if len(bounds) > 1:
                        batch = max(batch, int(np.diff(bounds.astype(np.int64)).max()))
                    padded = np.full(steps[e] + 1, bounds[-1], dtype=np.uint64)
                    padded[: len(bounds)] = bounds
                    parts[(e, r)] = (samples, padded)
            # For workers forked before their epoch's next look.
            save_known(self._directory, self.learned.known())
            if not self.covered and not os.path.exists(self._schedule_path):
                # Nothing to follow yet, and no earlier version to withdraw: the
                # connector would bind a schedule that describes no read (the
                # looks while a map without a pattern is learned, a dozen in a
                # first epoch).
                return False
            files = []
            for f in sample_map.files:
                size, mtime_ns = self._stat(f.file_path)
                files.append(WriterFile(path=f.file_path, rows=f.rows, size=size,
                                        mtime_ns=mtime_ns, group=f.group,
                                        rows_per_sample=f.rows_per_sample))
            write_schedule(
                self._schedule_path, parts=parts, ranks=ranks, ranks_per_node=ranks,
                num_samples=sample_map.num_samples, files=files,
                fields=[WriterField(dataset=d) for d in sample_map.fields],
                workers=workers, batch_size=batch,
                source="import", parameters="follow=1")
            self.published += 1
            return True

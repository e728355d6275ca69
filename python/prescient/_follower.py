"""The run-time follower: a DataLoader's epoch order, captured as the sampler
makes it, and the rows each index reads, learned in the workers.

Two functions of torch.utils.data are wrapped (install()):

* `_BaseDataLoaderIter._next_index`, through which every DataLoader iterator
  (one process or many workers, persistent or not) takes its next item from
  the sampler. The first time an epoch's sampler iterator is asked, it is
  asked exactly as the DataLoader would ask it (the same call, at the same
  moment, after the base seed is drawn), and then for the rest of the epoch's
  `len(batch_sampler)` items at once; the DataLoader then gets those items, one
  per call, and after them the sampler iterator itself again (so its ending,
  and whatever random numbers that draws, are the DataLoader's own). Nothing
  is drawn that the DataLoader would not draw, in the same order: the batches
  and every generator's state after the epoch are the same as without the
  follower. The order is saved for the connector, which prefetches and evicts
  by it.
* `_MapDatasetFetcher.fetch`, which runs `dataset[index]` (or `__getitems__`)
  in a worker: an index whose rows are not known yet is bracketed by the
  connector's read recorder, and what it read is appended to the worker's
  learn file; once the learned map's pattern predicts the index (the
  training process shares the predicted range), or its rows are known, one
  such fetch in _RECHECK is recorded, to notice a dataset that leaves them.

One DataLoader is followed per process: the one given to prescient.follow(),
else the first that asks its sampler for an epoch (a validation loader that
starts later is not followed; its reads are served from the cache as usual,
and its workers learn nothing). When the first is validation's (PyTorch
Lightning's sanity check, a script that evaluates before it trains), the
first loader over a larger dataset that starts an epoch takes its place, and
what was learned is forgotten. Workers learn unless their DataLoader iterator
is marked as not learning (by its base seed, in the job's directory: a loader
over another dataset than the followed one, or the loader given way).
A loader made anew for every epoch over the same dataset object (a script that
builds its DataLoader inside the epoch loop) is followed on: once the followed
loader is gone, the next one over its dataset takes its place, and its epochs
continue the process's count. A loader over another dataset never does: the
rows an index reads are learned per dataset, and another's indices would be
taken for this one's.
"""

from __future__ import annotations

import operator
import os
import sys
import threading
import time
import weakref
from typing import List, Optional, Sequence

from . import _context, _learn, _plugin


# The connector's PRESCIENT_FOLLOW_RECORD: the worker whose first read begins a
# bracket (Follower._loading).
RECORD_VARIABLE = "PRESCIENT_FOLLOW_RECORD"
# Base seeds of DataLoader iterators whose workers do not learn, one per line
# in the job's directory (Follower._mark_quiet).
QUIET_SEEDS = _learn.QUIET_SEEDS
# One known key in this many is recorded again (see Follower.learns).
_RECHECK = 32
# A worker looks again at the indices the pattern predicts (_learn.PREDICTED)
# when this many seconds passed since its last look: one small file read, a few
# microseconds (counted in time, not fetches: a fetch may be a batch).
_PREDICTED_CHECK_SECONDS = 0.05
# Items between two looks at what the workers learned, once past the first
# looks (16, 64, 256, 1024, 4096 items: see _EpochOrder.__next__).
_LOOK_EVERY = 4096
# Items of at least this many indices each (a batch of contiguous rows read at
# once, salt's slices of 4,000 jets) are looked at from the 6th item on (6, 24,
# 96, ...): the DataLoader takes its first 4 items at once (2 workers, 2 each),
# so the 6th is handed out once two fetches are done, whose records show the
# pattern already. At the 16th, the workers had recorded 68,000 indices, whose
# parsing and mapping took the training process 0.86 s before the pattern was
# shared (RESULTS.md, "An eleventh public loader").
_LARGE_ITEM = 256
_FIRST_LOOK_LARGE = 6


def _warn(message: str) -> None:
    print(f"prescient: {message}", file=sys.stderr, flush=True)


def _info(message: str) -> None:
    print(f"prescient: info: {message}", file=sys.stderr, flush=True)


def _as_indices(item) -> Optional[List[int]]:
    """A sampler item as the indices it stands for (an int, a batch, or a slice
    of contiguous indices with a start and a stop: salt's RandomBatchSampler
    yields np.s_[start:stop] for its dataset to read a batch of rows at once)."""
    try:
        return [operator.index(item)]  # int, NumPy and 0-d torch integers
    except (TypeError, ValueError, RuntimeError):
        pass
    if isinstance(item, slice):
        try:
            start, stop = operator.index(item.start), operator.index(item.stop)
            step = 1 if item.step is None else operator.index(item.step)
        except (TypeError, ValueError, RuntimeError):
            return None  # an open end or a negative one: counted from a length unknown here
        if start < 0 or stop < 0 or step <= 0:
            return None
        return list(range(start, stop, step))
    try:
        return [operator.index(i) for i in item]
    except (TypeError, ValueError, RuntimeError):
        return None


def _item_size(item) -> int:
    """How many indices a sampler item stands for (1 for an index or anything
    unsized), without listing them."""
    if isinstance(item, slice):
        try:
            return len(range(item.start, item.stop, 1 if item.step is None else item.step))
        except (TypeError, ValueError):  # an open end, a zero step: not followed anyway
            return 1
    try:
        return len(item)
    except TypeError:  # an index, or not a batch
        return 1


class _EpochOrder:
    """Stands in for one epoch's sampler iterator (see the module docstring)."""

    __slots__ = ("_source", "_follower", "_stream", "_items", "_position", "_workers",
                 "_epoch", "_next_check")

    def __init__(self, source, follower: "Follower", stream, workers: int):
        self._source = source
        self._workers = workers
        self._epoch = None       # the follower's number for this epoch, once started
        self._next_check = 16    # items delivered before the next look at what was learned
        self._follower = follower
        self._stream = stream
        self._items: Optional[list] = None
        self._position = 0

    def __iter__(self):
        return self

    def __next__(self):
        if self._items is None:
            first = next(self._source)  # the DataLoader's own first pull
            self._items = [first]
            if self._take_rest():
                self._epoch = self._follower.epoch_started(self._stream, self._items,
                                                           self._workers)
            if _item_size(first) >= _LARGE_ITEM:
                self._next_check = _FIRST_LOOK_LARGE
        if self._position < len(self._items):
            item = self._items[self._position]
            self._position += 1
            if self._position == self._next_check:
                # While this epoch's rows are still being learned, what the workers
                # learned so far may show the map's pattern (row = index, ...),
                # which predicts the rest of the epoch: looked at after 16, 64,
                # 256, 1024, 4096 items (6, 24, ... of large items), then every
                # _LOOK_EVERY.
                self._next_check = min(self._next_check * 4, self._next_check + _LOOK_EVERY)
                self._follower.epoch_progressed(self._epoch)
            return item
        return next(self._source)

    def _take_rest(self) -> bool:
        """Takes the epoch's other items; False (nothing taken) for a sampler
        without a length, whose epoch cannot be taken without going past it."""
        try:
            length = len(self._stream)
        except TypeError:
            return False
        while len(self._items) < length:
            try:
                self._items.append(next(self._source))
            except StopIteration:
                break
        return True


class _Passthrough:
    """A sampler iterator of a DataLoader that is not followed."""

    __slots__ = ("_source",)

    def __init__(self, source):
        self._source = source

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._source)


def _worker_base_seed() -> Optional[int]:
    """In a DataLoader worker, its iterator's base seed (WorkerInfo's seed is
    the base seed plus the worker's id); None elsewhere."""
    worker = sys.modules.get("torch.utils.data._utils.worker")
    info = worker.get_worker_info() if worker is not None else None
    return None if info is None else info.seed - info.id


def _length(dataset) -> Optional[int]:
    try:
        return len(dataset)
    except Exception:  # noqa: BLE001 - no length (an iterable dataset), or a failing one
        return None


class _Held:
    """The followed loader's dataset, by identity: a weak reference where the
    dataset allows one (it does not keep the dataset alive), else the object
    itself (a class with __slots__ and no __weakref__; the loader held it
    anyway)."""

    __slots__ = ("_ref", "_object")

    def __init__(self, dataset):
        try:
            self._ref, self._object = weakref.ref(dataset), None
        except TypeError:
            self._ref, self._object = None, dataset

    def holds(self, dataset) -> bool:
        held = self._ref() if self._ref is not None else self._object
        return held is not None and held is dataset


class Follower:
    """This process's follower (one per process; forked workers inherit it)."""

    def __init__(self, context: _context.FollowContext):
        self.context = context
        self._publisher = None
        self._chosen = None          # weakref to the followed index sampler
        self._dataset = None         # the followed loader's dataset (_Held)
        self._explicit = False
        self._epoch = 0
        self._size = None            # len() of the followed loader's dataset
        self._lock = threading.Lock()
        self._known = frozenset()    # indices whose rows are learned (inherited by workers)
        self._recorder = None
        self._recorder_pid = None
        self._modules_looked_at = -1  # len(sys.modules) at the last look for the recorder
        self._learn_fd = None
        self._learn_pid = None
        self._warned = set()
        self._quiet_pid = None       # the process _quiet was worked out in
        self._quiet = False          # whether this worker's iterator was marked quiet
        self._quiet_size = -1        # the size of the file _quiet was read from
        self._quiet_checked = 0.0    # time.monotonic() of the last look
        self._quiet_marked = set()   # base seeds this process marked
        self._followed_seeds = set()  # base seeds of the followed loader's iterators
        self._forget = False         # the learned map is to be forgotten (_follow)
        self._fetches = 0            # known keys fetched by this process
        self._predicted = None       # the index ranges the pattern predicts, as last read
        self._predicted_checked = None  # time.monotonic() of the last look
        # The publisher is used by one thread at a time: the training thread
        # (the publication at an epoch's start) or the looking thread
        # (epoch_progressed).
        self._publisher_lock = threading.Lock()
        self._looking = None         # the looking thread, while one runs

    # ------------------------------------------------ the training process --
    @property
    def publisher(self):
        # NumPy is imported only when a loader is followed: the start-up hook runs
        # before the site's packages are all on sys.path (a virtual environment's
        # .pth), and a program that never iterates a DataLoader pays nothing.
        if self._publisher is None:
            from ._publish import Publisher

            self._publisher = Publisher(self.context.directory, self.context.schedule_path,
                                        self.context.local_ranks)
        return self._publisher

    def choose(self, index_sampler, dataset, explicit: bool) -> None:
        """Follows the loader of `index_sampler` and `dataset` from its next
        epoch on. Epochs keep counting from the process's last: the published
        orders are the rank's reads in sequence, whichever loader made them."""
        with self._lock:
            if self._explicit and not explicit:
                return
            other = self._dataset is not None and not self._dataset.holds(dataset)
            quiet = list(self._followed_seeds) if other else []
            self._follow(index_sampler, dataset)
            self._explicit = explicit
        if quiet:
            self._mark_quiet(quiet)
        self._forget_if_asked()

    def wrap(self, source, index_sampler, dataset, workers: int = 0, seed: Optional[int] = None):
        """The sampler iterator of a loader's epoch, as the DataLoader is to use
        it (`seed`: the iterator's base seed, when it has workers)."""
        quiet = []
        with self._lock:
            chosen = self._chosen() if self._chosen is not None else None
            if self._chosen is None or (chosen is None and self._dataset.holds(dataset)):
                # The first loader to start an epoch, or the successor of a
                # followed loader that is gone, over the same dataset.
                self._follow(index_sampler, dataset)
            elif chosen is not index_sampler and self._gives_way_to(dataset):
                # The workers of the loader followed so far learn no more.
                quiet.extend(self._followed_seeds)
                self._follow(index_sampler, dataset)
            followed = self._chosen() is index_sampler
            if seed is not None:
                if followed:
                    self._followed_seeds.add(seed)
                elif not self._dataset.holds(dataset):
                    quiet.append(seed)
        if quiet:
            self._mark_quiet(quiet)
        self._forget_if_asked()
        if not followed:
            return _Passthrough(source)
        return _EpochOrder(source, self, index_sampler, workers)

    def _follow(self, index_sampler, dataset) -> None:
        other = self._dataset is not None and not self._dataset.holds(dataset)
        self._chosen = weakref.ref(index_sampler)
        self._dataset = _Held(dataset)
        self._size = _length(dataset)
        self._followed_seeds = set()
        if other:
            self._forget = True  # done by the caller, outside the lock (_forget_if_asked)

    def _gives_way_to(self, dataset) -> bool:
        """Whether the loader followed so far gives way to one that starts an
        epoch over `dataset`: one over a larger dataset, unless the followed
        one was chosen in code. The first loader to start an epoch is often
        validation's: PyTorch Lightning's sanity check (two batches, by
        default, from an iterator that persistent workers keep) or a script
        that evaluates before it trains; training's dataset is the larger.
        A validation pass during or after a training epoch is over a smaller
        one; sizes only grow, so two loaders never take turns."""
        if self._explicit or self._dataset.holds(dataset):
            return False
        size = _length(dataset)
        return size is not None and self._size is not None and size > self._size

    def _mark_quiet(self, seeds) -> None:
        """Tells the workers of the iterators with these base seeds not to
        learn (_quiet_here), through the job's directory: each worker knows
        its iterator's base seed from its WorkerInfo (seed = base seed + worker
        id) however it was started. Written before the iterator's epoch hands
        its workers an index."""
        new = [s for s in seeds if s not in self._quiet_marked]
        if not new:
            return
        try:
            fd = os.open(os.path.join(self.context.directory, QUIET_SEEDS),
                         os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, b"".join(b"%d\n" % s for s in new))
            finally:
                os.close(fd)
            self._quiet_marked.update(new)
        except OSError as e:
            self._warn_once("quiet", f"cannot mark a loader's workers as not learning "
                            f"({e.strerror}); their fetches are learned too")

    def _forget_if_asked(self) -> None:
        """What the workers learned of the loader followed before is not the
        new one's (indices stand for other rows): forgotten."""
        with self._lock:
            forget, self._forget = self._forget, False
        if not forget:
            return
        try:
            with self._publisher_lock:
                self.publisher.forget_learned()
                self._known = frozenset()
        except Exception as e:  # noqa: BLE001 - reported, never raised into training
            self._warn_failed(e)

    def may_learn_from(self, dataset) -> bool:
        """Whether a fetch from `dataset` is learned: not when it is another
        dataset than the followed loader's (a validation loader's: its indices
        read other rows, and taken for the followed dataset's they would make
        the learned map look unstable). The training process (a loader without
        workers) knows the followed loader. A worker goes by whether its
        iterator was marked as not learning (_mark_quiet), not by what it
        inherited: workers started by spawn or a forkserver get the dataset
        pickled (another object), and forked ones may have been forked before
        the followed loader changed (training's first workers, forked before
        it took the place of a sanity check's loader, or validation's
        persistent ones, forked while it was followed)."""
        base_seed = _worker_base_seed()
        if base_seed is None:
            held = self._dataset
            return held is None or held.holds(dataset)
        return not self._quiet_here(base_seed)

    def _quiet_here(self, base_seed: int) -> bool:
        """Whether this worker's iterator (by its base seed) was marked by
        _mark_quiet: the file is read again when it grew, looked at at most
        every _PREDICTED_CHECK_SECONDS."""
        pid = os.getpid()
        now = time.monotonic()
        if self._quiet_pid == pid and now - self._quiet_checked < _PREDICTED_CHECK_SECONDS:
            return self._quiet
        if self._quiet_pid != pid:
            self._quiet_pid, self._quiet, self._quiet_size = pid, False, -1
        self._quiet_checked = now
        try:
            size = os.stat(os.path.join(self.context.directory, QUIET_SEEDS)).st_size
        except OSError:
            return self._quiet  # nothing marked yet
        if size != self._quiet_size:
            self._quiet = str(base_seed) in _learn.load_quiet_seeds(self.context.directory)
            self._quiet_size = size
        return self._quiet

    def epoch_progressed(self, epoch: Optional[int]) -> None:
        """Looks at what the workers learned so far, on a thread of its own
        (_look_in_background): publishes again while this epoch is not
        described yet (the workers may have learned enough since to predict
        it), and once it is, only reads what they learned."""
        if epoch is None:
            return
        self._look_in_background(self.publisher, epoch)

    def _look_in_background(self, publisher, epoch: int) -> None:
        """Runs a look (_look) on a short-lived thread, unless one still runs.

        A look parses what the workers appended since the last: ~25 ms per
        4,096 records. On the training loop's main thread, the one that feeds
        the workers their indices, that held the workers of a first epoch of
        an index table (every fetch learned) a dozen times. And the
        publication at the next epoch's start must read it all before the
        workers get their first indices: 40,000 indices learned in the first
        epoch took ~0.4 s there, with the workers forked and idle."""
        with self._lock:
            if self._looking is not None and self._looking.is_alive():
                return
            thread = threading.Thread(target=self._look, args=(publisher, epoch),
                                      name="prescient-look", daemon=True)
            self._looking = thread
        thread.start()

    def _look(self, publisher, epoch: int) -> None:
        try:
            with self._publisher_lock:
                if (self.context.rank, epoch) in publisher.covered:
                    publisher.absorb()
                else:
                    publisher.publish()
        except Exception as e:  # noqa: BLE001 - reported, never raised into training
            self._warn_failed(e)

    def epoch_started(self, stream, items: Sequence, workers: int) -> Optional[int]:
        """The epoch's order is known: save it and publish the schedule; returns
        the epoch's number. Never raises: following is an optimisation, the
        training must go on."""
        try:
            converted = []
            for item in items:
                indices = _as_indices(item)
                if indices is None:
                    self._warn_once("items", "the sampler's items are not indices or lists of "
                                    "indices; this epoch is not followed")
                    return None
                converted.append(indices)
            with self._lock:
                epoch = self._epoch
                self._epoch += 1
            from ._publish import save_order

            save_order(self.context.directory, self.context.rank, epoch, converted, workers)
            with self._publisher_lock:  # waits for a look still reading
                self.publisher.publish()
                self._known = self.publisher.learned.known()
                unstable = self.publisher.learned.unstable()
                own_datasets = self.publisher.learned.datasets_of_their_own
            if own_datasets and self.context.verbose:
                self._warn_once("own", "the sampler's indices each read datasets of their own "
                                "with no group of their own, or read more than "
                                f"{_learn._MAX_GROUP_ROWS} rows of groups of their own; a "
                                "followed schedule describes rows of datasets the indices "
                                "share or of short groups, so nothing is prefetched: reads "
                                "are cached without it", say=_info)
            if unstable:
                learned = self.publisher.learned
                self._warn_once("unstable", f"the rows an index reads change between epochs "
                                f"({learned.changed} of {learned.rechecked} indices read again "
                                "read other rows: the dataset maps indices anew, e.g. a table it "
                                "reshuffles); the sampler is not followed, reads stay correct")
            return epoch
        except Exception as e:  # noqa: BLE001 - reported, never raised into training
            self._warn_failed(e)

    def _warn_failed(self, error: Exception) -> None:
        self._warn_once("publish", f"following the sampler failed ({error!r}); the job runs "
                        "without the followed schedule")

    def _warn_once(self, key: str, message: str, say=_warn) -> None:
        if key not in self._warned:
            self._warned.add(key)
            say(message)

    # --------------------------------------------------------- the workers --
    def _recorder_here(self):
        pid = os.getpid()
        if self._recorder_pid != pid:
            self._recorder_pid = pid
            self._recorder = None
            self._modules_looked_at = -1
            self._learn_fd = None
            self._predicted_checked = None
            # Workers are forked before their epoch is published (the DataLoader
            # starts them first): what is known is read from the job's directory.
            from ._publish import load_known

            self._known = self._known | load_known(self.context.directory)
        if self._recorder is None and len(sys.modules) != self._modules_looked_at:
            # The connector is loaded when h5py is imported, and a worker may
            # import it only in its first fetch: one started by a forkserver
            # or spawn (or forked from a process that never read a file) from
            # a script that imports h5py inside __getitem__. It is looked for
            # again whenever modules were imported since the last look (a
            # scan of /proc/self/maps, not made on every fetch of a process
            # that has no connector).
            self._modules_looked_at = len(sys.modules)
            self._recorder = _plugin.find_recorder()
        return self._recorder

    def _predicted_here(self):
        """The index ranges the learned pattern predicts (_learn.Predicted), re-read
        every _PREDICTED_CHECK_SECONDS (the publisher shares it in the job's
        directory as soon as it finds the pattern, or withdraws it)."""
        now = time.monotonic()
        last = self._predicted_checked
        if last is None or now - last >= _PREDICTED_CHECK_SECONDS:
            self._predicted_checked = now
            self._predicted = _learn.load_predicted(self.context.directory)
        return self._predicted

    def learns(self, key) -> bool:
        """Whether the fetch of `key` (an index or a batch of them) is recorded."""
        recorder = self._recorder_here()
        indices = _as_indices(key)
        if indices is None or recorder is None:
            return False
        return self._learns(indices)

    def _learns(self, indices: List[int]) -> bool:
        known = self._known
        if not all(i in known for i in indices):
            predicted = self._predicted_here()
            if predicted is None or not all(i in known or i in predicted for i in indices):
                return True
        return self._rechecks()

    def _learns_index(self, index: int) -> bool:
        """_learns([index]), without the list and the generators: it runs for
        every sample of an auto-collating loader's first epoch (fetch_each)."""
        if index not in self._known:
            predicted = self._predicted_here()
            if predicted is None or index not in predicted:
                return True
        return self._rechecks()

    def _rechecks(self) -> bool:
        """For a key whose rows are known or predicted: whether it is learned
        again. One such key in _RECHECK is: a dataset that maps its indices to
        rows anew every epoch shows itself (LearnedMap.unstable), and one that
        leaves the pattern breaks it (the publisher withdraws the prediction
        and every index is learned again). The first epoch of a row = index
        dataset records 1/32 of its fetches, not all of them: recording,
        writing and reading back every fetch cost ~1 s of the two cores in
        40,000 fetches."""
        self._fetches += 1
        return self._fetches % _RECHECK == 0

    def call_learning(self, key, call):
        """Runs call() (a dataset access for `key`), recording its reads when
        `key` is being learned."""
        recorder = self._recorder_here()
        indices = _as_indices(key)
        if indices is None:
            return call()
        if recorder is None:
            result, record = self._loading(indices, call)
            if record:
                self._append(record)
            return result
        if not self._learns(indices):
            return call()
        return self._recorded(recorder, indices, call)

    def fetch_each(self, dataset, indices) -> list:
        """[dataset[i] for i in indices], recording the reads of the indices
        being learned: an auto-collating loader's fetch, one sample at a time.
        It runs for every sample, so it looks up its process once per batch,
        creates no bracket for a sample it does not learn, and writes the
        batch's records in one append (those fetched, also when a later
        fetch of the batch raises)."""
        recorder = self._recorder_here()
        batch = indices if isinstance(indices, list) else list(indices)
        data = []
        records = []
        try:
            if recorder is not None and self._all_known(batch):
                self._fetch_known(dataset, batch, recorder, data, records)
                return data
            for i in batch:
                try:
                    index = operator.index(i)
                except (TypeError, ValueError, RuntimeError):
                    data.append(dataset[i])  # not an index: nothing to learn from
                    continue
                if recorder is None:  # the connector is not loaded yet
                    item, record = self._loading([index], lambda: dataset[i])
                    data.append(item)
                    if record:
                        records.append(record)
                    recorder = self._recorder_here()
                    continue
                if not self._learns_index(index) or not recorder.begin():
                    data.append(dataset[i])
                    continue
                try:
                    item = dataset[i]
                except BaseException:
                    recorder.end()  # a failed fetch teaches nothing
                    raise
                records.append(_learn.format_record((index,), recorder.end()))
                data.append(item)
        finally:
            if records:
                self._append(b"".join(records))
        return data

    def _all_known(self, batch: list) -> bool:
        try:
            return self._known.issuperset(batch)
        except TypeError:  # an unhashable item: not an index
            return False

    def _fetch_known(self, dataset, batch: list, recorder, data: list, records: list) -> None:
        """fetch_each of a batch whose every index's rows are known (a later
        epoch): plain fetches in one comprehension each, but for the one
        index in _RECHECK that is learned again, at the positions the count
        of _rechecks gives it. Index by index, such a batch took 25.7 ms per
        40,000 samples in isolation, against 1.8 ms for torch's own
        comprehension; this way 5.1 ms (RESULTS.md, 2026-12-04)."""
        first = self._fetches
        self._fetches = first + len(batch)
        start = 0
        for at in range(_RECHECK - 1 - first % _RECHECK, len(batch), _RECHECK):
            data.extend([dataset[i] for i in batch[start:at]])
            start = at + 1
            i = batch[at]
            try:
                index = operator.index(i)  # equal to a known index, yet maybe not one (3.0)
            except (TypeError, ValueError, RuntimeError):
                data.append(dataset[i])
                continue
            if not recorder.begin():
                data.append(dataset[i])
                continue
            try:
                item = dataset[i]
            except BaseException:
                recorder.end()  # a failed fetch teaches nothing
                raise
            records.append(_learn.format_record((index,), recorder.end()))
            data.append(item)
        data.extend([dataset[i] for i in batch[start:]])

    def _loading(self, indices: List[int], call):
        """call() in a process whose connector is not loaded yet: (its result,
        the record of its reads or None). A worker started by a forkserver or
        spawn (or forked from a process that never opened a file) whose script
        imports h5py inside __getitem__ loads the connector in its first
        fetch, which therefore cannot be bracketed; the connector is asked
        (RECORD_VARIABLE, read when it parses its settings) to begin a
        bracket at this process's first read, which is ended here. Without
        it, the first fetch of every such worker went unlearned: with workers
        made anew every epoch, the same indices could stay unknown."""
        pid = os.getpid()
        if os.environ.get(RECORD_VARIABLE) != str(pid):
            os.environ[RECORD_VARIABLE] = str(pid)
        result = call()
        recorder = self._recorder_here()
        if recorder is None:
            return result, None
        os.environ.pop(RECORD_VARIABLE, None)  # read once, at the connector's start
        recorded = recorder.end()  # what the first read's bracket holds ("" without one)
        if not recorded or not self._learns(indices):
            return result, None
        return result, _learn.format_record(indices, recorded)

    def _recorded(self, recorder, indices: List[int], call):
        """call(), with the reads it makes recorded for `indices`."""
        if not recorder.begin():  # the connector is not loaded (yet), or is another version
            return call()
        try:
            result = call()
        except BaseException:
            recorder.end()  # a failed fetch teaches nothing
            raise
        self._append(_learn.format_record(indices, recorder.end()))
        return result

    def _append(self, records: bytes) -> None:
        """Appends whole records to this process's learn file; a failure is
        warned about once and costs the learning, never the fetch."""
        try:
            pid = self._recorder_pid  # this process's (_recorder_here ran first)
            if self._learn_fd is None or self._learn_pid != pid:
                base_seed = _worker_base_seed()
                seed = "" if base_seed is None else f"{_learn.SEED_MARK}{base_seed}"
                path = os.path.join(self.context.directory, f"{_learn.LEARN_PREFIX}{pid}{seed}")
                self._learn_fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                                         0o600)
                self._learn_pid = pid
            view = memoryview(records)
            while view:  # a regular file takes it whole but for a full device
                written = os.write(self._learn_fd, view)
                if written <= 0:
                    break
                view = view[written:]
        except OSError as e:
            self._warn_once("learn", f"cannot write what the workers learn ({e.strerror})")


_follower: Optional[Follower] = None
_installed = False


def get() -> Optional[Follower]:
    return _follower


def start(context: _context.FollowContext) -> Follower:
    global _follower
    if _follower is None:
        _follower = Follower(context)
    return _follower


def patch_dataloader(dataloader_module) -> None:
    """Wraps _next_index (the order) in torch.utils.data.dataloader."""
    base = dataloader_module._BaseDataLoaderIter
    if getattr(base._next_index, "_prescient", False):
        return
    original = base._next_index

    def _next_index(self):
        follower = _follower
        it = self._sampler_iter
        if follower is not None and not isinstance(it, (_EpochOrder, _Passthrough)):
            workers = getattr(self, "_num_workers", 0)
            seed = getattr(self, "_base_seed", None) if workers else None
            try:
                wrapped = follower.wrap(it, self._index_sampler, self._dataset, workers,
                                        None if seed is None else int(seed))
            except Exception as e:  # noqa: BLE001 - following is an optimisation
                follower._warn_failed(e)
                wrapped = _Passthrough(it)
            self._sampler_iter = wrapped
        return original(self)

    _next_index._prescient = True
    base._next_index = _next_index


def patch_fetch(fetch_module) -> None:
    """Wraps _MapDatasetFetcher.fetch (the learning) in torch.utils.data._utils.fetch."""
    fetcher = fetch_module._MapDatasetFetcher
    if getattr(fetcher.fetch, "_prescient", False):
        return
    original = fetcher.fetch

    def fetch(self, possibly_batched_index):
        follower = _follower
        if follower is None or not follower.may_learn_from(self.dataset):
            return original(self, possibly_batched_index)
        dataset = self.dataset
        if self.auto_collation:
            if hasattr(dataset, "__getitems__") and dataset.__getitems__:
                data = follower.call_learning(
                    possibly_batched_index, lambda: dataset.__getitems__(possibly_batched_index))
            else:
                data = follower.fetch_each(dataset, possibly_batched_index)
        else:
            data = follower.call_learning(possibly_batched_index,
                                          lambda: dataset[possibly_batched_index])
        return self.collate_fn(data)

    fetch._prescient = True
    fetcher.fetch = fetch

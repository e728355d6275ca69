"""prescient.schedule_for(loader, epochs, output, datasets=...): the schedule file of a
live DataLoader whose sampler is seeded, for clairvoyance across epochs (the
connector then evicts by next use over the whole run, not only the epoch it
follows) with no flags to match by hand.

The orders are made the way the DataLoader makes them, epoch after epoch: the
base seed each new iterator draws from the loader's generator, `set_epoch(e)`
of a DistributedSampler (the usual loop calls it at the start of epoch e), the
sampler's items up to and past its end (its last draws included), every
DistributedSampler rank by a copy of the sampler with that rank. Every
generator touched is put back in the state it was in: the training that
follows sees the same numbers as without the call.

A sampler whose order depends on the global random state when the epoch starts
(RandomSampler without a generator, a sampler of unknown kind) cannot be
scheduled ahead: ValueError says so (PRESCIENT_FOLLOW=1 follows any sampler).

Sample ids are the dataset's indices, numbered over the map's files in sorted
path order, then rows (scheduler/README.md, "The sample map"). A field may
live in files of its own (images in one file, labels in another): its glob's
k-th file is paired with the first field's k-th file, as
`prescient-schedule generate --dataset` pairs them.
"""

from __future__ import annotations

import copy
import glob
import os
from typing import List, Optional, Sequence

import numpy as np

from ._schedule_writer import WriterField, WriterFieldFile, WriterFile, write_schedule


def _torch():
    import torch
    import torch.utils.data as data

    return torch, data


def _inner(index_sampler):
    """(batch sampler or None, the sampler of indices)."""
    _, data = _torch()
    if isinstance(index_sampler, data.BatchSampler):
        return index_sampler, index_sampler.sampler
    return None, index_sampler


def _check_seeded(sampler) -> None:
    _, data = _torch()
    if isinstance(sampler, (data.SequentialSampler, data.DistributedSampler, range, list, tuple)):
        return
    if isinstance(sampler, (data.RandomSampler, data.SubsetRandomSampler,
                            data.WeightedRandomSampler)):
        if getattr(sampler, "generator", None) is not None:
            return
        raise ValueError(f"{type(sampler).__name__} without a generator draws its order from the "
                         "global random state when each epoch starts, which training also uses: "
                         "it cannot be scheduled ahead (give it a seeded torch.Generator, or use "
                         "PRESCIENT_FOLLOW=1)")
    raise ValueError(f"a {type(sampler).__name__} is not a sampler whose order prescient knows how "
                     "to make ahead (SequentialSampler, DistributedSampler, or a Random/Subset/"
                     "Weighted sampler with a generator); use PRESCIENT_FOLLOW=1 to follow it")


def _generators(loader, sampler):
    found = []
    for g in (getattr(loader, "generator", None), getattr(sampler, "generator", None)):
        if g is not None and all(g is not h for h in found):
            found.append(g)
    return found


def _rank_sampler(batch_sampler, sampler, rank: int):
    """The index sampler of `rank` (a shallow copy: generators stay shared)."""
    _, data = _torch()
    if isinstance(sampler, data.DistributedSampler):
        sampler = copy.copy(sampler)
        sampler.rank = rank
    if batch_sampler is None:
        return sampler
    batch_sampler = copy.copy(batch_sampler)
    batch_sampler.sampler = sampler
    return batch_sampler


def _epoch_items(index_sampler) -> List[List[int]]:
    it = iter(index_sampler)
    items = []
    for _ in range(len(index_sampler)):
        try:
            item = next(it)
        except StopIteration:
            break
        items.append([int(item)] if np.ndim(item) == 0 else [int(i) for i in item])
    for _ in it:  # past the end, as the DataLoader goes: the sampler's last draws
        pass
    return items


def loader_orders(loader, epochs: int) -> List[List[List[List[int]]]]:
    """orders[epoch][rank] = the items (lists of indices, one per step) of every rank."""
    torch, data = _torch()
    batch_sampler, sampler = _inner(loader._index_sampler)
    _check_seeded(sampler)
    ranks = sampler.num_replicas if isinstance(sampler, data.DistributedSampler) else 1
    generators = _generators(loader, sampler)
    saved = [g.get_state() for g in generators]
    saved_epoch = getattr(sampler, "epoch", None)
    orders = []
    try:
        for epoch in range(epochs):
            if loader.generator is not None and (epoch == 0 or not loader.persistent_workers
                                                 or loader.num_workers == 0):
                torch.empty((), dtype=torch.int64).random_(generator=loader.generator)
            per_rank = []
            for rank in range(ranks):
                # Each rank's process makes its own epoch from the same starting state.
                states = [g.get_state() for g in generators]
                index_sampler = _rank_sampler(batch_sampler, sampler, rank)
                if hasattr(_inner(index_sampler)[1], "set_epoch"):
                    _inner(index_sampler)[1].set_epoch(epoch)
                per_rank.append(_epoch_items(index_sampler))
                if rank + 1 < ranks:
                    for g, state in zip(generators, states):
                        g.set_state(state)
            orders.append(per_rank)
    finally:
        for g, state in zip(generators, saved):
            g.set_state(state)
        if saved_epoch is not None:
            sampler.epoch = saved_epoch
    return orders


def _glob_files(entry: str):
    """(sorted resolved paths, dataset name) of one FILE_OR_GLOB:NAME entry."""
    pattern, sep, name = entry.rpartition(":")
    if not sep or not pattern or not name:
        raise ValueError(f"datasets: '{entry}' is not FILE_OR_GLOB:NAME")
    # Byte-wise order of the absolute paths as matched (what sorted(glob(...))
    # loaders see, and how prescient-schedule orders them), each then stored
    # resolved; a str sort would differ for undecodable bytes kept as surrogates.
    matched = sorted((os.path.abspath(p) for p in glob.glob(pattern)), key=os.fsencode)
    paths = [os.path.realpath(p) for p in matched]
    if not paths:
        raise ValueError(f"datasets: '{pattern}' names no file")
    return paths, name


def _stat(path: str):
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def _rows(path: str, dataset: str, rows_per_file: Optional[int]) -> int:
    if rows_per_file is not None:
        return rows_per_file
    import h5py

    with h5py.File(path, "r") as f:
        return len(f[dataset])


def _map_files(datasets: Sequence[str], rows_per_file: Optional[int]):
    """The map's files (the first field's, sorted) and fields from
    FILE_OR_GLOB:NAME entries. A later field whose glob names other files
    lives in files of its own: its k-th file (sorted) goes with the first
    field's k-th file, so both globs must name as many files; where the two
    are the same file, nothing is recorded (the field is in the file itself)."""
    if not datasets:
        raise ValueError("datasets: at least one FILE_OR_GLOB:NAME is needed")
    globbed = [_glob_files(entry) for entry in datasets]
    first_paths = globbed[0][0]
    for entry, (paths, _) in zip(datasets[1:], globbed[1:]):
        if len(paths) != len(first_paths):
            raise ValueError(f"datasets: '{entry}' names {len(paths)} files but '{datasets[0]}' "
                             f"names {len(first_paths)}; a field in files of its own needs one "
                             "file per file of the first field (paired in sorted order)")
    files = []
    for k, path in enumerate(first_paths):
        field_files = []
        for field, (paths, _) in enumerate(globbed[1:], start=1):
            if paths[k] != path:
                field_files.append(WriterFieldFile(field, paths[k], *_stat(paths[k])))
        rows = _rows(path, globbed[0][1], rows_per_file)
        files.append(WriterFile(path, rows, *_stat(path), field_files=tuple(field_files)))
    return files, [WriterField(dataset=name) for _, name in globbed]


def schedule_for(loader, epochs: int, output, *, datasets: Sequence[str],
                 rows_per_file: Optional[int] = None, ranks_per_node: Optional[int] = None) -> str:
    """Writes the schedule of `loader`'s next `epochs` epochs (every rank of a
    DistributedSampler) to `output` and returns its path. `datasets` are the
    fields read per sample, as FILE_OR_GLOB:NAME; a field whose glob names
    other files than the first's is kept in files of its own, the k-th of its
    files (sorted) holding the rows of the first field's k-th file, so each
    glob must name as many files as the first. `rows_per_file` saves opening
    the files for their lengths (else the first field's length in each of
    its files, with h5py); `ranks_per_node` (default: all ranks on one node)
    lays the ranks out on nodes."""
    if epochs < 1:
        raise ValueError("epochs must be at least 1")
    files, fields = _map_files(datasets, rows_per_file)
    num_samples = sum(f.rows for f in files)
    orders = loader_orders(loader, epochs)
    ranks = len(orders[0])
    parts = {}
    for epoch, per_rank in enumerate(orders):
        steps = max(len(items) for items in per_rank)
        for rank, items in enumerate(per_rank):
            lengths = [len(item) for item in items] + [0] * (steps - len(items))
            bounds = np.concatenate([[0], np.cumsum(lengths)]).astype(np.uint64)
            samples = np.fromiter((i for item in items for i in item), dtype=np.int64)
            if samples.size and (samples.min() < 0 or samples.max() >= num_samples):
                raise ValueError(f"the sampler yields index {int(samples.max())}, but the map has "
                                 f"{num_samples} samples")
            parts[(epoch, rank)] = (samples.astype(np.uint32), bounds)
    batch = loader.batch_size or 1
    write_schedule(os.fspath(output), parts=parts, ranks=ranks,
                   ranks_per_node=ranks_per_node or ranks, num_samples=num_samples,
                   files=files, fields=fields, workers=loader.num_workers, batch_size=batch,
                   source="import", parameters="schedule_for=1")
    return os.fspath(output)

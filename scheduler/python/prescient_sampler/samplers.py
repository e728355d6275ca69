"""Drop-in replacements for DistributedSampler and BatchSampler that follow a
schedule file (orders planned by Prescient: global, local, partial, groups,
SOLAR's optimisations). Pure Python + NumPy; torch is not imported.

    sampler = ScheduleBatchSampler("train.sched", rank=rank, dataset=h5["images"])
    loader = DataLoader(ds, batch_sampler=sampler, num_workers=4)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for batch in loader: ...

Batch sizes may vary from step to step in load-balanced schedules (every rank
still has the same number of steps); scale the loss by the batch size if the
gradient average must not change.
"""

from __future__ import annotations

import os
from typing import Iterator, List, Optional, Union

from ._format import (DatasetFingerprint, ScheduleFile, ScheduleFileError,
                      fingerprint_h5py)


def _default_rank() -> int:
    # torch.distributed when it is initialised, else the launcher's RANK.
    try:
        import torch.distributed as dist  # optional
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
    except ImportError:
        pass
    return int(os.environ.get("RANK", "0"))


class _ScheduleView:
    def __init__(self, schedule: Union[str, os.PathLike, ScheduleFile], rank: Optional[int],
                 num_replicas: Optional[int], dataset, check_dataset: Union[bool, dict]):
        self.schedule = schedule if isinstance(schedule, ScheduleFile) else ScheduleFile(schedule)
        h = self.schedule.header
        self.schedule._require_lists()
        self.rank = _default_rank() if rank is None else int(rank)
        if num_replicas is not None and num_replicas != h.layout.ranks:
            raise ScheduleFileError(
                "corrupt", f"schedule file '{self.schedule.path}' was made for "
                f"{h.layout.ranks} ranks, not num_replicas={num_replicas}")
        if not 0 <= self.rank < h.layout.ranks:
            raise ScheduleFileError(
                "out-of-range", f"rank {self.rank} is outside the schedule's "
                f"{h.layout.ranks} ranks")
        if dataset is not None:
            fp = dataset if isinstance(dataset, DatasetFingerprint) else fingerprint_h5py(dataset)
            options = check_dataset if isinstance(check_dataset, dict) else {}
            if check_dataset:
                self.schedule.check_dataset(fp, **options)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        if not 0 <= epoch < self.schedule.header.epochs:
            raise ScheduleFileError(
                "out-of-range", f"epoch {epoch}: the schedule file '{self.schedule.path}' "
                f"covers epochs 0..{self.schedule.header.epochs - 1}")
        self.epoch = int(epoch)

    def part(self):
        return self.schedule.part(self.rank, self.epoch)

    @property
    def sample_map(self):
        """The schedule's SampleMap: the ids this sampler yields are global
        sample ids over its files; sample_map.locate(i) -> (file, row)."""
        return self.schedule.header.map

    def locate(self, sample: int):
        """(file index, row) of a yielded sample id; field k of it is in
        sample_map.place_of(file, k).path (sample_map.files[file].path unless
        that field is kept in a file of its own)."""
        return self.schedule.header.map.locate(sample)


class ScheduleSampler(_ScheduleView):
    """Per-sample indices of one rank, like DistributedSampler.

    schedule      path of the schedule file (or an open ScheduleFile)
    rank          this process's rank (default: torch.distributed, else $RANK, else 0)
    num_replicas  if given, must equal the schedule's rank count
    dataset       an h5py.Dataset or a DatasetFingerprint to check the file against
    check_dataset False to skip the check, or a dict of ScheduleFile.check_dataset options
    """

    def __init__(self, schedule, rank: Optional[int] = None, num_replicas: Optional[int] = None,
                 dataset=None, check_dataset: Union[bool, dict] = True):
        super().__init__(schedule, rank, num_replicas, dataset, check_dataset)

    def __iter__(self) -> Iterator[int]:
        samples, _ = self.part()
        return iter(samples.tolist())

    def __len__(self) -> int:
        samples, _ = self.part()
        return len(samples)


class ScheduleBatchSampler(_ScheduleView):
    """One rank's batches (global steps) of the current epoch, for
    DataLoader(batch_sampler=...). Same arguments as ScheduleSampler."""

    def __init__(self, schedule, rank: Optional[int] = None, num_replicas: Optional[int] = None,
                 dataset=None, check_dataset: Union[bool, dict] = True):
        super().__init__(schedule, rank, num_replicas, dataset, check_dataset)

    def __iter__(self) -> Iterator[List[int]]:
        samples, bounds = self.part()
        ids = samples.tolist()
        b = bounds.tolist()
        for s in range(len(b) - 1):
            yield ids[b[s]:b[s + 1]]

    def __len__(self) -> int:
        _, bounds = self.part()
        return len(bounds) - 1

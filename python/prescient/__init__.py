"""Prescient's Python side: clairvoyance for a DataLoader without a schedule file.

    PRESCIENT_FOLLOW=1 python train.py        # with python/ on PYTHONPATH, or the package installed

or, in code, `prescient.follow(loader)` before the first epoch. Each epoch's
order is captured from the loader's sampler as the epoch starts (seeded or
not: nothing about the sampler needs to be known), the rows each index reads
are learned from the connector in the first epoch, and the connector on the
node prefetches and evicts by the result (README.md, "Following a sampler").
"""

from __future__ import annotations

from ._context import FollowSetupError

__all__ = ["follow", "schedule_for", "FollowSetupError"]
__version__ = "0.1.0"


def follow(loader):
    """Follows `loader` (a torch DataLoader) in this process: its epochs are
    captured as they start. Call before h5py opens a file (the connector reads
    where the schedule goes when it starts) and before the first epoch.
    Returns the loader, so `loader = prescient.follow(DataLoader(...))` works."""
    from . import _startup

    follower = _startup.enable(explicit=True)
    index_sampler = loader._index_sampler
    follower.choose(index_sampler, loader.dataset, explicit=True)
    return loader


def schedule_for(loader, epochs, output, *, datasets, rows_per_file=None, ranks_per_node=None):
    """Writes the schedule file of `loader`'s next `epochs` epochs (a seeded
    sampler; see prescient._schedule_for) for PRESCIENT_SCHEDULE."""
    from ._schedule_for import schedule_for as write

    return write(loader, epochs, output, datasets=datasets, rows_per_file=rows_per_file,
                 ranks_per_node=ranks_per_node)

"""torch-distributed and torch-loader schedules against real PyTorch."""

import itertools

import pytest

torch = pytest.importorskip("torch", reason="torch is missing: run this suite inside env/run")
from torch.utils.data import DataLoader, Dataset, DistributedSampler  # noqa: E402

from conftest import batches_from_dump, batches_from_file, generate, run_tool  # noqa: E402


class Recorder(Dataset):
    """Returns (index, worker id) so a batch shows which worker read it."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        info = torch.utils.data.get_worker_info()
        return i, -1 if info is None else info.id


def loader_batches(loader):
    out = []
    for idx, worker in loader:
        out.append((idx.tolist(), set(worker.tolist())))
    return out


GRID = [
    # n, ranks, seed, drop_last, shuffle, batch, drop_last_batch
    (1, 1, 0, False, True, 1, False),
    (7, 3, 5, False, True, 2, False),
    (7, 8, 5, False, True, 1, False),  # padding longer than the dataset
    (50, 2, 11, False, True, 4, False),
    (50, 2, 11, True, True, 4, True),
    (1003, 4, 7, False, True, 16, False),
    (1003, 4, 7, True, True, 16, True),
    (1003, 4, 7, False, False, 10, False),
    (10007, 8, 2**32 + 5, False, True, 64, False),
    (10007, 3, -3, True, True, 33, False),
    (4096, 16, 123456789, False, True, 32, True),
]


@pytest.mark.parametrize("n,ranks,seed,drop_last,shuffle,bs,dlb", GRID)
def test_torch_distributed_matches_torch(tool, tmp_path, n, ranks, seed, drop_last, shuffle, bs,
                                         dlb):
    extra = []
    if drop_last:
        extra.append("--drop-last")
    if not shuffle:
        extra.append("--no-shuffle")
    if dlb:
        extra.append("--drop-last-batch")
    epochs = 3
    lists = generate(tool, tmp_path / "l.sched", "torch-distributed", n, epochs, ranks=ranks,
                     batch_size=bs, seed=seed, extra=extra)
    recipe = generate(tool, tmp_path / "r.sched", "torch-distributed", n, epochs, ranks=ranks,
                      batch_size=bs, seed=seed, store="recipe", extra=extra)
    for epoch, rank in itertools.product(range(epochs), range(ranks)):
        sampler = DistributedSampler(range(n), num_replicas=ranks, rank=rank, shuffle=shuffle,
                                     seed=seed, drop_last=drop_last)
        sampler.set_epoch(epoch)
        loader = DataLoader(range(n), sampler=sampler, batch_size=bs, drop_last=dlb)
        expected = [b.tolist() for b in loader]
        assert batches_from_file(lists, rank, epoch) == expected, (epoch, rank)
        if rank == ranks - 1:  # the C++ reader's recipe path, once per epoch
            assert batches_from_dump(tool, recipe, rank, epoch) == expected


@pytest.mark.parametrize("workers", [2, 3])
def test_torch_distributed_worker_assignment(tool, tmp_path, workers):
    n, ranks, seed, bs = 50, 2, 11, 4
    path = generate(tool, tmp_path / "w.sched", "torch-distributed", n, 3, ranks=ranks,
                    workers=workers, batch_size=bs, seed=seed)
    for rank in range(ranks):
        sampler = DistributedSampler(Recorder(n), num_replicas=ranks, rank=rank, seed=seed)
        sampler.set_epoch(2)
        loader = DataLoader(Recorder(n), sampler=sampler, batch_size=bs, num_workers=workers)
        got = loader_batches(loader)
        ours = batches_from_file(path, rank, 2)
        assert [b for b, _ in got] == ours
        # The file's layout says batch k -> worker k % workers.
        for k, (_, worker_ids) in enumerate(got):
            assert worker_ids == {k % workers}


LOADER_GRID = [
    # n, seed, batch, drop_last_batch, workers, persistent
    (10, 5, 3, False, 0, False),
    (1000, 0, 32, True, 0, False),
    (997, 2**40 + 9, 10, False, 0, False),
    (300, 42, 16, False, 2, False),
    (300, 42, 16, True, 2, True),
]


@pytest.mark.parametrize("n,seed,bs,dlb,workers,persistent", LOADER_GRID)
def test_torch_loader_matches_torch(tool, tmp_path, n, seed, bs, dlb, workers, persistent):
    epochs = 3
    extra = (["--drop-last-batch"] if dlb else []) + (["--persistent-workers"]
                                                      if persistent else [])
    path = generate(tool, tmp_path / "t.sched", "torch-loader", n, epochs, workers=workers,
                    batch_size=bs, seed=seed, extra=extra)
    recipe = generate(tool, tmp_path / "tr.sched", "torch-loader", n, epochs, workers=workers,
                      batch_size=bs, seed=seed, store="recipe", extra=extra)
    g = torch.Generator().manual_seed(seed)
    loader = DataLoader(Recorder(n), batch_size=bs, shuffle=True, generator=g, drop_last=dlb,
                        num_workers=workers, persistent_workers=persistent)
    for epoch in range(epochs):
        got = loader_batches(loader)
        assert [b for b, _ in got] == batches_from_file(path, 0, epoch), epoch
        assert [b for b, _ in got] == batches_from_dump(tool, recipe, 0, epoch), epoch
        if workers:
            for k, (_, worker_ids) in enumerate(got):
                assert worker_ids == {k % workers}


@pytest.mark.slow
@pytest.mark.parametrize("n", [214_748_363, 214_748_364])
def test_randperm_branches_at_the_threshold(tool, tmp_path, n):
    """Both torch.randperm algorithms (forward Fisher-Yates below the
    threshold, inside-out with 64-bit draws from it on), probed positions.
    Together the two sizes pin the switch point. ~1.7 GiB (torch's int64
    permutation) + ~1.1 GiB (the tool) of memory, 30-70 s each here."""
    ranks, seed, epoch = 4, 3, 1
    path = generate(tool, tmp_path / "big.sched", "torch-distributed", n, 2, ranks=ranks,
                    batch_size=256, seed=seed, store="recipe")
    g = torch.Generator().manual_seed(seed + epoch)
    perm = torch.randperm(n, generator=g)
    per_rank = -(-n // ranks)
    rank = 1
    positions = [0, 1, 2, 1000, 123_456, 10_000_000, per_rank // 2, per_rank - 2, per_rank - 1]
    out = run_tool(tool, "dump", path, "--rank", rank, "--epoch", epoch, "--positions",
                   ",".join(map(str, positions))).stdout.split()
    expected = [int(perm[(rank + p * ranks) % n]) for p in positions]
    del perm
    assert [int(x) for x in out] == expected


def test_persistent_workers_do_not_change_distributed_orders(tool, tmp_path):
    n, ranks, seed, bs, workers = 60, 2, 4, 5, 2
    path = generate(tool, tmp_path / "p.sched", "torch-distributed", n, 2, ranks=ranks,
                    workers=workers, batch_size=bs, seed=seed, extra=["--persistent-workers"])
    sampler = DistributedSampler(Recorder(n), num_replicas=ranks, rank=1, seed=seed)
    loader = DataLoader(Recorder(n), sampler=sampler, batch_size=bs, num_workers=workers,
                        persistent_workers=True)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        got = loader_batches(loader)
        assert [b for b, _ in got] == batches_from_file(path, 1, epoch)
        for k, (_, worker_ids) in enumerate(got):
            assert worker_ids == {k % workers}

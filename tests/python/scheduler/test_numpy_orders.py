"""numpy, numpy-legacy and sequential schedules against real NumPy."""

import itertools

import pytest

np = pytest.importorskip("numpy", reason="numpy is missing: run this suite inside env/run")

from conftest import (batch, batches_from_dump, batches_from_file, generate,  # noqa: E402
                      split_like_distributed_sampler)

GRID = [
    # n, ranks, seed, drop_last, batch, drop_last_batch
    (1, 1, 0, False, 1, False),
    (10, 1, 3, False, 3, False),
    (10, 3, 0, False, 2, False),
    (1003, 4, 7, True, 16, True),
    (1003, 4, 12345678901234, False, 16, False),
    (65537, 8, 2**63 + 11, False, 100, False),
]


def orders(kind, n, seed, epochs, reseed):
    if kind == "numpy":
        if reseed:
            return [np.random.default_rng(seed + e).permutation(n) for e in range(epochs)]
        rng = np.random.default_rng(seed)
        return [rng.permutation(n) for _ in range(epochs)]
    if reseed:
        return [np.random.RandomState(seed + e).permutation(n) for e in range(epochs)]
    np.random.seed(seed)  # the global legacy generator, as scripts use it
    return [np.random.permutation(n) for _ in range(epochs)]


@pytest.mark.parametrize("kind", ["numpy", "numpy-legacy"])
@pytest.mark.parametrize("reseed", [False, True])
@pytest.mark.parametrize("n,ranks,seed,drop_last,bs,dlb", GRID)
def test_numpy_matches_numpy(tool, tmp_path, kind, reseed, n, ranks, seed, drop_last, bs, dlb):
    if kind == "numpy-legacy":
        seed %= 2**32 - 8
    epochs = 4
    extra = (["--drop-last"] if drop_last else []) + (["--drop-last-batch"] if dlb else []) + (
        ["--reseed-each-epoch"] if reseed else [])
    lists = generate(tool, tmp_path / "n.sched", kind, n, epochs, ranks=ranks, batch_size=bs,
                     seed=seed, extra=extra)
    recipe = generate(tool, tmp_path / "nr.sched", kind, n, epochs, ranks=ranks, batch_size=bs,
                      seed=seed, store="recipe", extra=extra)
    expected_orders = orders(kind, n, seed, epochs, reseed)
    for epoch, rank in itertools.product(range(epochs), range(ranks)):
        part = split_like_distributed_sampler(expected_orders[epoch].tolist(), ranks, rank,
                                              drop_last)
        expected = batch(part, bs, dlb)
        assert batches_from_file(lists, rank, epoch) == expected, (epoch, rank)
    # The C++ recipe path, jumping straight to the last epoch (replays the
    # generator over the earlier ones).
    part = split_like_distributed_sampler(expected_orders[-1].tolist(), ranks, 0, drop_last)
    assert batches_from_dump(tool, recipe, 0, epochs - 1) == batch(part, bs, dlb)


@pytest.mark.parametrize("n,ranks,drop_last", [(10, 3, False), (10, 3, True), (5, 8, False)])
def test_sequential(tool, tmp_path, n, ranks, drop_last):
    extra = ["--drop-last"] if drop_last else []
    path = generate(tool, tmp_path / "s.sched", "sequential", n, 2, ranks=ranks, batch_size=2,
                    extra=extra)
    for rank in range(ranks):
        part = split_like_distributed_sampler(list(range(n)), ranks, rank, drop_last)
        assert batches_from_file(path, rank, 1) == batch(part, 2, False)

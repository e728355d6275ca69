"""python/prescient/_follower.py without a connector: the stand-in for an epoch's sampler
iterator hands the DataLoader exactly the sampler's items, pulls the sampler exactly as far as
the DataLoader would (its end included, never further), and reports the epoch once."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "python"))

from prescient._follower import _as_indices, _EpochOrder  # noqa: E402


class CountingSampler:
    def __init__(self, items, length=None):
        self.items, self.length, self.pulls = list(items), length, 0

    def __len__(self):
        if self.length is None:
            raise TypeError("no length")
        return self.length

    def __iter__(self):
        for item in self.items:
            self.pulls += 1
            yield item
        self.pulls += 1  # the pull that ends the iteration (a sampler's last draws happen here)


class FakeFollower:
    def __init__(self):
        self.epochs = []

    def epoch_started(self, stream, items, workers):
        self.epochs.append((list(items), workers))
        return len(self.epochs) - 1

    def epoch_progressed(self, epoch):
        pass


def drain(it):
    out = []
    while True:
        try:
            out.append(next(it))
        except StopIteration:
            return out


@pytest.mark.parametrize("items", [[3, 1, 2], [[0, 1], [4, 5], [2]], []])
def test_same_items_same_pulls_one_report(items):
    native = CountingSampler(items, len(items))
    assert drain(iter(native)) == items
    sampler, follower = CountingSampler(items, len(items)), FakeFollower()
    assert drain(_EpochOrder(iter(sampler), follower, sampler, workers=2)) == items
    assert sampler.pulls == native.pulls
    assert follower.epochs == ([(items, 2)] if items else [])


def test_a_sampler_without_length_is_not_followed():
    sampler, follower = CountingSampler([5, 6, 7]), FakeFollower()
    it = _EpochOrder(iter(sampler), follower, sampler, workers=0)
    assert next(it) == 5 and sampler.pulls == 1  # nothing taken ahead
    assert drain(it) == [6, 7] and follower.epochs == []


def test_sampler_items_as_indices():
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    assert _as_indices(3) == [3] and _as_indices(np.int64(4)) == [4]
    assert _as_indices(torch.tensor(5)) == [5] and _as_indices(torch.tensor([1, 2])) == [1, 2]
    assert _as_indices([7, 8]) == [7, 8] and _as_indices(np.array([1, 2])) == [1, 2]
    assert _as_indices("ab") is None and _as_indices(2.5) is None
    # Slices of contiguous indices (salt's RandomBatchSampler yields np.s_[start:stop]).
    assert _as_indices(np.s_[np.int64(8):12]) == [8, 9, 10, 11]
    assert _as_indices(slice(2, 9, 3)) == [2, 5, 8] and _as_indices(slice(4, 4)) == []
    # An open or negative end counts from a length the follower does not know.
    for open_ended in (slice(None, 5), slice(3, None), slice(-4, -1), slice(5, 1, -1),
                       slice(0.5, 3)):
        assert _as_indices(open_ended) is None, open_ended


def test_learning_is_looked_at_early_then_at_a_steady_pace():
    class LookingFollower(FakeFollower):
        def __init__(self):
            super().__init__()
            self.looks = []
            self.order = None

        def epoch_progressed(self, epoch):
            self.looks.append(self.order._position)

    items = list(range(20000))
    sampler, follower = CountingSampler(items, len(items)), LookingFollower()
    follower.order = _EpochOrder(iter(sampler), follower, sampler, workers=2)
    assert drain(follower.order) == items
    assert follower.looks == [16, 64, 256, 1024, 4096, 8192, 12288, 16384]

    # Items of many indices each (salt's slices of a batch of rows) are looked at sooner: the
    # 16th item of 4,000 indices came after 68,000 indices were recorded.
    items = [slice(b * 4000, (b + 1) * 4000) for b in range(200)]
    sampler, follower = CountingSampler(items, len(items)), LookingFollower()
    follower.order = _EpochOrder(iter(sampler), follower, sampler, workers=2)
    assert drain(follower.order) == items
    assert follower.looks == [6, 24, 96]


class Data:
    """A dataset object (identity is what the follower compares)."""


class SlottedData:
    __slots__ = ()  # no __weakref__: the follower holds it by a strong reference


def a_follower(tmp_path):
    from prescient import _context
    from prescient._follower import Follower
    return Follower(_context.FollowContext(directory=str(tmp_path), rank=0, local_ranks=1))


@pytest.mark.parametrize("data_type", [Data, SlottedData])
def test_a_loader_made_anew_over_the_same_dataset_is_followed_on(data_type, tmp_path):
    from prescient._follower import _EpochOrder, _Passthrough
    follower, data, other = a_follower(tmp_path), data_type(), data_type()
    first = CountingSampler([0, 1])
    assert isinstance(follower.wrap(iter([]), first, data), _EpochOrder)
    # While the followed loader lives, another over the same dataset is not followed (two
    # loaders at once: which one's order comes next is not known).
    second = CountingSampler([1, 0])
    assert isinstance(follower.wrap(iter([]), second, data), _Passthrough)
    del first  # the followed loader (and its sampler) is gone
    # A loader over another dataset does not take its place ...
    assert isinstance(follower.wrap(iter([]), CountingSampler([0]), other), _Passthrough)
    # ... the next one over the followed dataset does.
    assert isinstance(follower.wrap(iter([]), second, data), _EpochOrder)
    assert follower.may_learn_from(data) and not follower.may_learn_from(other)


def test_workers_that_do_not_know_the_followed_dataset_learn_every_fetch(tmp_path):
    follower = a_follower(tmp_path)
    # Forked before the first epoch was followed, or started by spawn or a forkserver.
    assert follower.may_learn_from(Data())


class Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


def test_validation_sampled_first_gives_way_to_training_and_its_workers_stop_learning(
        tmp_path, monkeypatch):
    """A validation loader followed first (PyTorch Lightning's sanity check) gives way to the
    training loader, over a larger dataset; the workers of every loader over another dataset
    than the followed one are marked not to learn by their iterator's base seed (workers started
    by spawn or a forkserver get the dataset pickled and cannot tell it; persistent ones forked
    while validation was followed believe it still is)."""
    from torch.utils.data._utils import worker

    from prescient import _follower
    from prescient._follower import _EpochOrder, _Passthrough
    follower, val, train = a_follower(tmp_path), Sized(10), Sized(100)
    val_sampler, train_sampler = CountingSampler([0]), CountingSampler([0])
    assert isinstance(follower.wrap(iter([]), val_sampler, val, seed=11), _EpochOrder)
    assert not (tmp_path / _follower.QUIET_SEEDS).exists()
    # Training starts while the sanity check's iterator (persistent workers) is kept.
    assert isinstance(follower.wrap(iter([]), train_sampler, train, seed=22), _EpochOrder)
    # Validation's next passes, by its persistent workers or new ones: not followed.
    assert isinstance(follower.wrap(iter([]), val_sampler, val, seed=11), _Passthrough)
    assert isinstance(follower.wrap(iter([]), val_sampler, val, seed=33), _Passthrough)
    assert isinstance(follower.wrap(iter([]), train_sampler, train, seed=44), _EpochOrder)
    # A smaller dataset never takes training's place.
    assert isinstance(follower.wrap(iter([]), CountingSampler([0]), Sized(50)), _Passthrough)
    assert (tmp_path / _follower.QUIET_SEEDS).read_text().split() == ["11", "33"]

    def learns(seed, worker_id, dataset, knows=None):
        """A worker's view: its WorkerInfo set; `knows`: the dataset a forked worker believes
        followed (None: started by spawn or a forkserver)."""
        monkeypatch.setattr(worker, "_worker_info",
                            worker.WorkerInfo(id=worker_id, num_workers=2, seed=seed + worker_id,
                                              dataset=dataset))
        view = a_follower(tmp_path)
        if knows is not None:
            view._dataset = _follower._Held(knows)
        return view.may_learn_from(dataset)

    assert not learns(11, 1, val, knows=val)  # validation's, forked during the sanity check
    assert not learns(33, 0, Sized(10))  # a forkserver's, with its pickled copy
    assert learns(22, 1, train, knows=val)  # training's first, forked before the switch
    assert learns(44, 1, Sized(100))
    # Without workers the training process fetches itself: the followed loader's dataset only.
    monkeypatch.setattr(worker, "_worker_info", None)
    assert not follower.may_learn_from(val) and follower.may_learn_from(train)

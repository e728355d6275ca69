"""prescient.schedule_for: the orders it computes are the ones the DataLoader then delivers,
computing them changes no generator's state, unseeded samplers are refused, and the schedule
file it writes is followed from the first epoch by the connector."""

import glob
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
from torch.utils.data import (BatchSampler, DataLoader, DistributedSampler,  # noqa: E402
                              RandomSampler, SequentialSampler)

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(REPO / "scheduler" / "python"))

from prescient._schedule_for import loader_orders  # noqa: E402
import prescient  # noqa: E402
from prescient_sampler._format import ScheduleFile  # noqa: E402

N = 60


class Indices(torch.utils.data.Dataset):
    def __len__(self):
        return N

    def __getitem__(self, i):
        return torch.tensor(i)


def delivered(loader, epochs, set_epoch):
    out = []
    for epoch in range(epochs):
        if set_epoch is not None:
            set_epoch(epoch)
        out.append([b.reshape(-1).tolist() for b in loader])
    return out


def states(loader):
    g = loader.generator.get_state().tolist() if loader.generator is not None else None
    return torch.get_rng_state().tolist(), np.random.get_state()[1].tolist(), random.getstate(), g


def loaders():
    """(name, make(rank, world) -> (loader, set_epoch or None))."""
    def distributed(rank, world):
        s = DistributedSampler(Indices(), num_replicas=world, rank=rank, seed=5)
        return DataLoader(Indices(), batch_size=4, sampler=s), s.set_epoch

    def random_with_generator(rank, world):
        g = torch.Generator().manual_seed(9)
        return DataLoader(Indices(), batch_size=4, shuffle=True, generator=g), None

    def batch_sampler_as_sampler(rank, world):
        g = torch.Generator().manual_seed(3)
        s = BatchSampler(RandomSampler(Indices(), generator=g), 7, drop_last=False)
        return DataLoader(Indices(), batch_size=None, sampler=s, generator=g), None

    def sequential(rank, world):
        return DataLoader(Indices(), batch_size=5, sampler=SequentialSampler(Indices())), None

    return [("distributed", distributed), ("random", random_with_generator),
            ("batches", batch_sampler_as_sampler), ("sequential", sequential)]


@pytest.mark.parametrize("name,make", loaders())
def test_orders_are_what_the_loader_delivers_and_no_generator_moves(name, make):
    torch.manual_seed(1), np.random.seed(1), random.seed(1)
    loader, set_epoch = make(0, 2)
    before = states(loader)
    orders = loader_orders(loader, 3)
    assert states(loader) == before
    world = len(orders[0])
    for rank in range(world):
        torch.manual_seed(1), np.random.seed(1), random.seed(1)
        loader, set_epoch = make(rank, world)
        expected = delivered(loader, 3, set_epoch)
        assert [orders[e][rank] for e in range(3)] == expected, name


def test_unseeded_sampler_is_refused():
    loader = DataLoader(Indices(), batch_size=4, shuffle=True)  # no generator
    with pytest.raises(ValueError, match="PRESCIENT_FOLLOW"):
        loader_orders(loader, 2)


SCRIPT = """
import json, sys, h5py, torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler
path, out, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
class DS(Dataset):
    f = None
    def __len__(self): return 400
    def __getitem__(self, i):
        if self.f is None: self.f = h5py.File(path, "r")
        return torch.from_numpy(self.f["x"][i]), int(self.f["y"][i])
ds = DS()
sampler = DistributedSampler(ds, num_replicas=1, rank=0, seed=11)
loader = DataLoader(ds, batch_size=8, sampler=sampler, num_workers=2,
                    multiprocessing_context="fork")
if len(sys.argv) > 4:
    sys.path.insert(0, sys.argv[4])
    import prescient
    prescient.schedule_for(loader, epochs, out, datasets=[path + ":x", path + ":y"])
    sys.exit(0)
for e in range(epochs):
    sampler.set_epoch(e)
    for x, y in loader:
        pass
"""


def test_schedule_file_is_followed_from_the_first_epoch(tmp_path):
    plugin_dir = os.environ.get("PRESCIENT_PLUGIN_DIR", str(REPO / "build" / "dev" / "plugins"))
    if not os.path.isfile(os.path.join(plugin_dir, "libprescient_vol.so")):
        if os.environ.get("PRESCIENT_REQUIRE_PLUGIN") == "1":
            pytest.fail(f"no libprescient_vol.so in {plugin_dir}")
        pytest.skip(f"no libprescient_vol.so in {plugin_dir}")
    import h5py
    data = tmp_path / "d.h5"
    with h5py.File(data, "w") as f:
        f["x"] = np.random.default_rng(0).integers(0, 255, (400, 1024), dtype=np.uint8)
        f["y"] = np.arange(400)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HDF5_VOL_CONNECTOR", "HDF5_PLUGIN_PATH", "PRESCIENT_"))}
    sched = tmp_path / "train.sched"
    subprocess.run([sys.executable, "-c", SCRIPT, str(data), str(sched), "3", str(REPO / "python")],
                   env=env, check=True, timeout=120)
    header = ScheduleFile(str(sched)).header
    assert header.epochs == 3 and [f.dataset for f in header.map.fields] == ["x", "y"]
    env.update(HDF5_PLUGIN_PATH=plugin_dir, HDF5_VOL_CONNECTOR="prescient",
               PRESCIENT_SCHEDULE=str(sched), PRESCIENT_STATS=str(tmp_path / "stats.json"),
               PRESCIENT_NODE_ID=f"schedule-for-{os.getpid()}")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(data), "-", "3"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "prescient:" not in proc.stderr, proc.stderr[-3000:]
    matched = missed = 0
    for path in glob.glob(str(tmp_path / "stats*.json")):
        with open(path) as f:
            stats = json.load(f)
        matched += stats["schedule_matches"]
        missed += stats["schedule_mismatches"]
    assert matched == 3 * 400 * 2 and missed == 0  # every read of both fields, every epoch

"""Four public loader shapes whose orders no seed-based schedule can describe,
run unmodified (the tests run them natively and with PRESCIENT_FOLLOW=1).

    python follow_loaders.py make DIR
    python follow_loaders.py run DIR SHAPE EPOCHS OUT.json

Shapes:
  list      an unseeded np.random.shuffle'd index list, DistributedSampler(shuffle=False)
  files     a per-epoch file permutation crossed with an in-file permutation, 8 files
  batches   BatchSampler(RandomSampler(generator=g)), each batch one read of d[sorted(batch)]
  blocks    shuffled whole contiguous batches, each one read of d[b*B:(b+1)*B]
  slices    the same as ATLAS's salt samples them: a sampler of np.s_[b*B:(b+1)*B] slices in a
            shuffled order (its RandomBatchSampler), each one read_direct of the batch's rows
            into a reused array
  concat    a ConcatDataset of one Dataset per file, the files in an unsorted (glob-like) order,
            shuffle=True
  fresh     a new DataLoader (shuffle=True) over the same dataset every epoch, each followed by
            a validation pass over another dataset (a new loader too), made after the training
            loader is gone
  sanity    a validation loader (persistent workers) over another, smaller dataset takes two
            batches before training starts (PyTorch Lightning's sanity check), then training
            (shuffle=True) with a full validation pass by that loader after every epoch
  table     like list, but the dataset reshuffles its index table every epoch (not followable)
  pair      images in one file and their labels in another (PatchCamelyon's layout: x.h5 and
            y.h5, read at the same row, both opened for every sample as torchvision's PCAM
            does), shuffle=True
  pairs     the same over 8 pairs of files (img_k.h5 and lbl_k.h5), shuffle=True: the connector
            reads ahead into pairs of files no worker has opened yet
  seeds     one group per sample in one file, `data` (128 KiB) and `grid/x`, `grid/y` in it, the
            file opened for every sample and the group's data read whole (PDEBench's
            FNODatasetMult), shuffle=True: no learned map describes a dataset per sample
  patches   overlapping 3-D patches of a volume and its labels, the file opened for every
            sample (pytorch-3dunet's LazyHDF5Dataset), shuffle=True: each read takes a
            sixteenth of the z-planes it touches
  windows   sliding windows over a time series (index i reads x[i*S:i*S+W] and the label at the
            window's last row), shuffle=True: every row is read by W/S indices an epoch
  ranks     one rank (RANK of WORLD_SIZE) of DistributedSampler ranks sharing a node; LOADER_SLOWDOWN
            makes a rank's training step slower, so ranks do not move in lockstep

`run` writes, per epoch, a digest of every batch in delivery order and a digest of
every random generator's state after the epoch (torch, NumPy, random, the loader's).
"""

import hashlib
import json
import os
import random
import sys
import time

import importlib

import numpy as np
import torch
from torch.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset,
                              DistributedSampler, RandomSampler, Sampler)

FILES, ROWS_PER_FILE, ROW_BYTES, BATCH = 8, 500, 4096, 25
SAMPLES = FILES * ROWS_PER_FILE
# "patches": raw float32 (4 MiB) and label uint8 (1 MiB) volumes, 735 patches.
VOLUME, PATCH, STRIDE = (64, 128, 128), (8, 32, 32), (4, 16, 16)
SEEDS, SEED_SHAPE = 96, (16, 32, 32, 2)  # "seeds": 128 KiB of float32 a sample, 12 MiB in all
SEED_BATCH = 4
# "windows": a series of 64,000 steps of 16 float32 channels (4 MiB), windows of 64 steps every 32.
SERIES_ROWS, SERIES_CHANNELS, WINDOW, WINDOW_STRIDE = 64000, 16, 64, 32
WINDOWS = (SERIES_ROWS - WINDOW) // WINDOW_STRIDE + 1
COMPUTE_S = 0.02
# How workers start (test_follow.py runs both): forked, as on Linux before Python 3.14, or
# from a forkserver, Python 3.14's default.
MP = os.environ.get("LOADER_MP", "fork")
# When h5py is imported: "eager" (here, as most scripts do) or "lazy" (by the first file a
# dataset opens, as scripts that import it inside __getitem__ do: a worker then loads the
# connector in its first fetch, and no process before it has).
if os.environ.get("LOADER_IMPORT", "eager") == "eager":
    import h5py  # noqa: F401


def h5file(path, mode="r"):
    return importlib.import_module("h5py").File(path, mode)


def make(directory):
    rng = np.random.default_rng(7)
    for k in range(FILES):
        with h5file(os.path.join(directory, f"part_{k:02d}.h5"), "w") as f:
            f["x"] = rng.integers(0, 255, (ROWS_PER_FILE, ROW_BYTES), dtype=np.uint8)
            f["y"] = np.arange(k * ROWS_PER_FILE, (k + 1) * ROWS_PER_FILE, dtype=np.int64)
    with h5file(os.path.join(directory, "all.h5"), "w") as f:
        f["x"] = rng.integers(0, 255, (SAMPLES, ROW_BYTES), dtype=np.uint8)
        f["y"] = np.arange(SAMPLES, dtype=np.int64)
    with h5file(os.path.join(directory, "pair_x.h5"), "w") as f:
        f["x"] = rng.integers(0, 255, (SAMPLES, ROW_BYTES), dtype=np.uint8)
    with h5file(os.path.join(directory, "pair_y.h5"), "w") as f:
        f["y"] = np.arange(SAMPLES, dtype=np.int64).reshape(SAMPLES, 1, 1)
    with h5file(os.path.join(directory, "seeds.h5"), "w") as f:
        axis = np.linspace(-1, 1, SEED_SHAPE[1], dtype=np.float32)
        for seed in range(SEEDS):
            group = f.create_group(f"{seed:04d}")
            group["data"] = rng.standard_normal(SEED_SHAPE, dtype=np.float32)
            group["grid/x"], group["grid/y"] = axis, axis + seed
    with h5file(os.path.join(directory, "volume.h5"), "w") as f:
        f["raw"] = rng.standard_normal(VOLUME, dtype=np.float32)
        f["label"] = rng.integers(0, 5, VOLUME, dtype=np.uint8)
    with h5file(os.path.join(directory, "series.h5"), "w") as f:
        f["x"] = rng.standard_normal((SERIES_ROWS, SERIES_CHANNELS), dtype=np.float32)
        f["y"] = np.arange(SERIES_ROWS, dtype=np.int64)
    for k in range(FILES):
        with h5file(os.path.join(directory, f"img_{k:02d}.h5"), "w") as f:
            f["x"] = rng.integers(0, 255, (ROWS_PER_FILE, ROW_BYTES), dtype=np.uint8)
        with h5file(os.path.join(directory, f"lbl_{k:02d}.h5"), "w") as f:
            f["y"] = np.arange(k * ROWS_PER_FILE, (k + 1) * ROWS_PER_FILE, dtype=np.int64)


class OneFile(Dataset):
    """Rows of all.h5, opened lazily in each worker; `order` maps index -> row."""

    def __init__(self, directory, order=None):
        self.path = os.path.join(directory, "all.h5")
        self.order = order
        self.f = None

    def __len__(self):
        return SAMPLES

    def __getitem__(self, index):
        if self.f is None:
            self.f = h5file(self.path)
        if isinstance(index, list):  # a batch: one read of the sorted rows
            rows = sorted(index)
            return torch.from_numpy(self.f["x"][rows]), torch.from_numpy(self.f["y"][rows])
        row = self.order[index] if self.order is not None else index
        return torch.from_numpy(self.f["x"][row]), int(self.f["y"][row])


class ManyFiles(Dataset):
    def __init__(self, directory):
        self.paths = sorted(os.path.join(directory, f"part_{k:02d}.h5") for k in range(FILES))
        self.files = {}

    def __len__(self):
        return SAMPLES

    def __getitem__(self, index):
        k, row = divmod(index, ROWS_PER_FILE)
        if k not in self.files:
            self.files[k] = h5file(self.paths[k])
        f = self.files[k]
        return torch.from_numpy(f["x"][row]), int(f["y"][row])


class Part(Dataset):
    """One file's rows: ConcatDataset puts them after the files before it."""

    def __init__(self, path):
        self.path = path
        self.f = None

    def __len__(self):
        return ROWS_PER_FILE

    def __getitem__(self, row):
        if self.f is None:
            self.f = h5file(self.path)
        return torch.from_numpy(self.f["x"][row]), int(self.f["y"][row])


class Pair(Dataset):
    """A sample's image in one file and its label in another, at the same row; both files
    opened for every sample, the label read as one element (torchvision's PCAM)."""

    def __init__(self, directory):
        self.paths = (os.path.join(directory, "pair_x.h5"), os.path.join(directory, "pair_y.h5"))

    def __len__(self):
        return SAMPLES

    def __getitem__(self, index):
        with h5file(self.paths[0]) as images:
            image = torch.from_numpy(images["x"][index])
        with h5file(self.paths[1]) as labels:
            return image, int(labels["y"][index, 0, 0])


class Pairs(Dataset):
    """Pair's layout over several pairs of files, each opened at its first sample."""

    def __init__(self, directory):
        self.paths = [(os.path.join(directory, f"img_{k:02d}.h5"),
                       os.path.join(directory, f"lbl_{k:02d}.h5")) for k in range(FILES)]
        self.opened = {}

    def __len__(self):
        return SAMPLES

    def __getitem__(self, index):
        k, row = divmod(index, ROWS_PER_FILE)
        if k not in self.opened:
            self.opened[k] = (h5file(self.paths[k][0])["x"], h5file(self.paths[k][1])["y"])
        images, labels = self.opened[k]
        return torch.from_numpy(images[row]), int(labels[row])


# The files in the order a directory listing may give them (not sorted).
UNSORTED = (3, 0, 5, 1, 7, 2, 6, 4)


class Seeds(Dataset):
    """A group per sample, the file opened for each (PDEBench's FNODatasetMult)."""

    def __init__(self, directory):
        self.path = os.path.join(directory, "seeds.h5")
        with h5file(self.path) as f:
            self.keys = sorted(f.keys())

    def __len__(self):
        return len(self.keys)

    def __getitem__(self, index):
        with h5file(self.path) as f:
            group = f[self.keys[index]]
            data = torch.tensor(np.array(group["data"], dtype="f"))
            grid = np.stack([np.array(group["grid"]["x"], dtype="f"),
                             np.array(group["grid"]["y"], dtype="f")])
        return data.permute(1, 2, 0, 3), torch.from_numpy(grid)


class Patches(Dataset):
    """Overlapping patches of a volume and its labels, the file opened for every sample
    (pytorch-3dunet's LazyHDF5Dataset)."""

    def __init__(self, directory):
        self.path = os.path.join(directory, "volume.h5")
        self.starts = [(z, y, x) for z in range(0, VOLUME[0] - PATCH[0] + 1, STRIDE[0])
                       for y in range(0, VOLUME[1] - PATCH[1] + 1, STRIDE[1])
                       for x in range(0, VOLUME[2] - PATCH[2] + 1, STRIDE[2])]

    def __len__(self):
        return len(self.starts)

    def __getitem__(self, index):
        z, y, x = self.starts[index]
        box = (slice(z, z + PATCH[0]), slice(y, y + PATCH[1]), slice(x, x + PATCH[2]))
        with h5file(self.path) as f:
            raw = f["raw"][box]
        with h5file(self.path) as f:
            label = f["label"][box]
        return torch.from_numpy(raw), torch.from_numpy(label.astype(np.int64))


class Windows(Dataset):
    """Sliding windows over a time series (forecasting loaders' shape): index i is the window
    of WINDOW steps from i * WINDOW_STRIDE and the label at its last step."""

    def __init__(self, directory):
        self.path = os.path.join(directory, "series.h5")
        self.f = None

    def __len__(self):
        return WINDOWS

    def __getitem__(self, index):
        if self.f is None:
            self.f = h5file(self.path)
        start = index * WINDOW_STRIDE
        return (torch.from_numpy(self.f["x"][start:start + WINDOW]),
                int(self.f["y"][start + WINDOW - 1]))


class FileThenRow(Sampler):
    """Files in a new order every epoch, rows in a new order in each file (unseeded)."""

    def __len__(self):
        return SAMPLES

    def __iter__(self):
        for k in np.random.permutation(FILES):
            for row in np.random.permutation(ROWS_PER_FILE):
                yield int(k) * ROWS_PER_FILE + int(row)


class Blocks(Dataset):
    def __init__(self, directory):
        self.path = os.path.join(directory, "all.h5")
        self.f = None

    def __len__(self):
        return SAMPLES // BATCH

    def __getitem__(self, b):
        if self.f is None:
            self.f = h5file(self.path)
        return (torch.from_numpy(self.f["x"][b * BATCH:(b + 1) * BATCH]),
                torch.from_numpy(self.f["y"][b * BATCH:(b + 1) * BATCH]))


class SlicedBlocks(Dataset):
    """salt's SaltDataset: a sample is a slice of rows, read with read_direct into arrays
    resized to the batch (the dataset's length is the rows')."""

    def __init__(self, directory):
        self.path = os.path.join(directory, "all.h5")
        self.f = None

    def __len__(self):
        return SAMPLES

    def __getitem__(self, rows):
        if self.f is None:
            self.f = h5file(self.path)
        out = []
        for name in ("x", "y"):
            d = self.f[name]
            batch = np.empty((rows.stop - rows.start,) + d.shape[1:], d.dtype)
            d.read_direct(batch, rows)
            out.append(torch.from_numpy(batch))
        return tuple(out)


class ShuffledSlices(Sampler):
    """salt's RandomBatchSampler: batch numbers in a torch.randperm order, each yielded as the
    slice of its rows."""

    def __len__(self):
        return SAMPLES // BATCH

    def __iter__(self):
        for b in torch.randperm(SAMPLES // BATCH):
            yield np.s_[int(b) * BATCH:(int(b) + 1) * BATCH]


class ShuffledBlocks(Sampler):
    def __len__(self):
        return SAMPLES // BATCH

    def __iter__(self):
        return iter(np.random.permutation(SAMPLES // BATCH).tolist())


def loader_for(shape, directory):
    if shape == "list":
        order = list(range(SAMPLES))
        np.random.shuffle(order)
        ds = OneFile(directory, order)
        sampler = DistributedSampler(ds, num_replicas=1, rank=0, shuffle=False)
        return DataLoader(ds, batch_size=BATCH, sampler=sampler, num_workers=2,
                          multiprocessing_context=MP)
    if shape == "sanity":  # run() samples the validation loader first
        return fresh_loader(OneFile(directory))
    if shape == "fresh":  # the first epoch's loader; run() makes one anew every epoch
        return fresh_loader(OneFile(directory))
    if shape == "table":  # like "list", but the dataset reshuffles its table every epoch
        order = list(range(SAMPLES))
        ds = OneFile(directory, order)
        sampler = DistributedSampler(ds, num_replicas=1, rank=0, shuffle=False)
        return DataLoader(ds, batch_size=BATCH, sampler=sampler, num_workers=2,
                          multiprocessing_context=MP)
    if shape == "files":
        return DataLoader(ManyFiles(directory), batch_size=BATCH, sampler=FileThenRow(),
                          num_workers=2,
                          multiprocessing_context=MP)
    if shape == "concat":
        parts = [Part(os.path.join(directory, f"part_{k:02d}.h5")) for k in UNSORTED]
        return DataLoader(ConcatDataset(parts), batch_size=BATCH, shuffle=True, num_workers=2,
                          multiprocessing_context=MP)
    if shape == "pair":
        return fresh_loader(Pair(directory))
    if shape == "pairs":
        return fresh_loader(Pairs(directory))
    if shape == "seeds":
        # Batches of a few seeds as PDEBench trains (5 for its 2D data): 24 steps an epoch.
        return DataLoader(Seeds(directory), batch_size=SEED_BATCH, shuffle=True, num_workers=2,
                          multiprocessing_context=MP)
    if shape == "patches":
        return fresh_loader(Patches(directory))
    if shape == "windows":
        return fresh_loader(Windows(directory))
    if shape == "batches":
        ds = OneFile(directory)
        g = torch.Generator()
        g.manual_seed(int(os.environ.get("LOADER_SEED", "3")))
        sampler = BatchSampler(RandomSampler(ds, generator=g), BATCH, drop_last=False)
        return DataLoader(ds, batch_size=None, sampler=sampler, num_workers=2, generator=g,
                          multiprocessing_context=MP)
    if shape == "ranks":  # one of RANKS ranks of a job on one node (RANK from the environment)
        ds = OneFile(directory)
        sampler = DistributedSampler(ds, num_replicas=int(os.environ["WORLD_SIZE"]),
                                     rank=int(os.environ["RANK"]))
        return DataLoader(ds, batch_size=BATCH, sampler=sampler, num_workers=2,
                          multiprocessing_context=MP)
    if shape == "blocks":
        return DataLoader(Blocks(directory), batch_size=None, sampler=ShuffledBlocks(),
                          num_workers=2,
                          multiprocessing_context=MP)
    if shape == "slices":
        return DataLoader(SlicedBlocks(directory), batch_size=None, sampler=ShuffledSlices(),
                          num_workers=2, multiprocessing_context=MP)
    raise SystemExit(f"unknown shape {shape}")


def fresh_loader(ds):
    return DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=2, multiprocessing_context=MP)


def validation_loader(directory, persistent=False):
    """A loader over another dataset (the first file's part, smaller than training's)."""
    return DataLoader(Part(os.path.join(directory, "part_00.h5")), batch_size=BATCH,
                      num_workers=2, multiprocessing_context=MP, persistent_workers=persistent)


def validation_pass(directory):
    """One pass of a validation loader, made and dropped while no training loader exists: a
    follower must not take it for the training's."""
    return [digest(x.numpy(), y.numpy()) for x, y in validation_loader(directory)]


def digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def rng_digest(loader):
    g = loader.generator.get_state().numpy() if loader.generator is not None else np.zeros(1)
    state = np.random.get_state()
    return {"torch": digest(torch.get_rng_state().numpy()),
            "numpy": digest(state[1], np.array(state[2:4], dtype=np.float64)),
            "random": hashlib.sha256(repr(random.getstate()).encode()).hexdigest()[:16],
            "loader": digest(g)}


def run(directory, shape, epochs, out):
    # The loaders draw from the global generators without a seed of their own;
    # the process seeds them once so that two runs can be compared.
    torch.manual_seed(11), np.random.seed(11), random.seed(11)
    loader = loader_for(shape, directory)
    result = []
    if shape == "sanity":
        validation = validation_loader(directory, persistent=True)  # as Lightning's often is
        it = iter(validation)
        sanity = [digest(x.numpy(), y.numpy()) for x, y in (next(it), next(it))]
        del it
    compute_s = COMPUTE_S * float(os.environ.get("LOADER_SLOWDOWN", "1"))
    for epoch in range(epochs):
        if shape == "fresh" and epoch > 0:
            loader = fresh_loader(dataset)
        if hasattr(loader.sampler, "set_epoch"):
            loader.sampler.set_epoch(epoch)
        if shape == "table":
            np.random.shuffle(loader.dataset.order)
        batches = []
        for x, y in loader:
            batches.append(digest(x.numpy(), y.numpy() if hasattr(y, "numpy") else np.asarray(y)))
            time.sleep(compute_s)  # the training step the loader runs ahead of
        # Training draws random numbers between epochs too (augmentation, dropout).
        torch.rand(3), np.random.rand(2), random.random()
        result.append({"batches": batches, "rng": rng_digest(loader)})
        if shape == "sanity":
            result[-1]["validation"] = [digest(x.numpy(), y.numpy()) for x, y in validation]
            result[-1]["sanity"] = sanity
        if shape == "fresh":
            dataset = loader.dataset
            del loader
            result[-1]["validation"] = validation_pass(directory)
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        run(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])

"""One rank of an emulated multi-node job (emulated_nodes.py): an unmodified torch + h5py loop.

    RANK=r WORLD_SIZE=R python3 emulated_loader.py CONFIG.json RESULT.json

Every sample s of the dataset is images[s] = (arange(row) + 7 s) % 256 and labels[s] = s, over
files of `rows_per_file` samples in sorted path order. The loop reads every field of every sample
its DistributedSampler gives it, through a DataLoader with `workers` workers, and checks every
byte. With `"batch_reads": true` a worker reads its whole batch at once, one sorted fancy-index
read per file and field (`images[sorted rows]`, through the Dataset's `__getitems__`), the way
batch-oriented loaders do; otherwise one sample at a time; the result file says how many samples were read, how many were wrong, how long each epoch
took, its first batch (which also waits for the workers to start) and its slowest other batch.
`"start_method"` ("fork", "forkserver", "spawn") says how the DataLoader starts its workers
(default: Python's, forkserver from Python 3.14 on). `"pause_seconds"` is a pause after every
epoch but the last, with no worker alive (a validation pass or a checkpoint, as real jobs have).
`"rank_compute_seconds"` ({"rank": seconds}) gives some ranks another training step than
`"compute_seconds"` (nodes that finish at different times).
"""

import glob
import json
import multiprocessing
import os
import sys
import time

import h5py
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Samples(Dataset):
    def __init__(self, files, rows_per_file):
        self.files, self.rows_per_file = files, rows_per_file
        self.handles = {}

    def __len__(self):
        return len(self.files) * self.rows_per_file

    def __getitem__(self, s):
        f, row = divmod(s, self.rows_per_file)
        if f not in self.handles:
            h = h5py.File(self.files[f], "r")
            self.handles[f] = (h, h["images"], h["labels"])
        _, images, labels = self.handles[f]
        return s, torch.from_numpy(images[row]), int(labels[row])


class BatchSamples(Samples):
    """The same samples, a batch per call: the DataLoader's fetcher hands `__getitems__` the
    batch's indices, and each file's rows are read with one sorted selection per field."""

    def __getitems__(self, indices):
        by_file = {}
        for s in indices:
            by_file.setdefault(s // self.rows_per_file, []).append(s)
        out = {}
        for f, members in by_file.items():
            if f not in self.handles:
                h = h5py.File(self.files[f], "r")
                self.handles[f] = (h, h["images"], h["labels"])
            _, images, labels = self.handles[f]
            rows = sorted({s % self.rows_per_file for s in members})
            block, tags = images[rows], labels[rows]
            for i, row in enumerate(rows):
                out[f * self.rows_per_file + row] = (torch.from_numpy(block[i]), int(tags[i]))
        return [(s, *out[s]) for s in indices]


def expected(s, width):
    return ((np.arange(width, dtype=np.int64) + 7 * s) % 256).astype(np.uint8)


def main():
    config = json.load(open(sys.argv[1]))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    files = sorted(glob.glob(config["glob"]))
    dataset = (BatchSamples if config.get("batch_reads") else Samples)(files, config["rows_per_file"])
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True,
                                 seed=config["seed"])
    # How the workers start: Python's default (fork before 3.14, forkserver from 3.14 on), or
    # as the config says.
    start = config.get("start_method")
    context = multiprocessing.get_context(start) if start else None
    loader = DataLoader(dataset, batch_size=config["batch"], sampler=sampler,
                        num_workers=config["workers"], multiprocessing_context=context)
    compute_seconds = config.get("rank_compute_seconds", {}).get(
        str(rank), config.get("compute_seconds", 0))
    result = {"rank": rank, "read": 0, "wrong": 0, "epoch_seconds": [], "max_batch_seconds": [],
              "first_batch_seconds": []}
    for epoch in range(config["epochs"]):
        sampler.set_epoch(epoch)
        start = time.perf_counter()
        slowest = 0.0
        waited = time.perf_counter()
        for b, (ids, images, labels) in enumerate(loader):
            # The first batch of an epoch also waits for the DataLoader's workers to start
            # (fork, imports): kept apart, so the slowest batch measures waits for data.
            if b == 0:
                result["first_batch_seconds"].append(time.perf_counter() - waited)
            else:
                slowest = max(slowest, time.perf_counter() - waited)
            for s, image, label in zip(ids.tolist(), images.numpy(), labels.tolist()):
                result["read"] += 1
                if label != s or not np.array_equal(image, expected(s, image.shape[0])):
                    result["wrong"] += 1
            time.sleep(compute_seconds)
            waited = time.perf_counter()
        result["epoch_seconds"].append(time.perf_counter() - start)
        result["max_batch_seconds"].append(slowest)
        if epoch + 1 < config["epochs"]:
            time.sleep(config.get("pause_seconds", 0))
    json.dump(result, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()

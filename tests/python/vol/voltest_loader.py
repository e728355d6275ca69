"""A PyTorch DataLoader over an HDF5 file, as an unmodified training job would write it.

    python3 voltest_loader.py FILE OUT.npz lazy|eager|reopen|lazy-spawn [EPOCHS]

lazy:   the Dataset opens the file at its first __getitem__ in each worker (recommended);
eager:  the Dataset opens the file in __init__ and the forked workers inherit it;
reopen: every __getitem__ opens, reads and closes the file (so each worker closes files,
        which is when the connector writes its statistics);
lazy-spawn: lazy, with spawned workers (fresh interpreters that load the connector
        themselves, as with Python 3.14's forkserver default) instead of forked ones.
Each sample is (x[i], xc[i], i, pid of the worker); the script saves everything the loader
returned, in order, to OUT.npz, plus the parent pid.
"""

import os
import sys

import h5py
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class LazyDataset(Dataset):
    def __init__(self, path):
        self.path = path
        with h5py.File(path, "r") as f:
            self.n = len(f["x"])
        self.file = None
        self.pid = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.file is None or self.pid != os.getpid():
            self.file = h5py.File(self.path, "r")
            self.pid = os.getpid()
            self.x, self.xc = self.file["x"], self.file["xc"]
        return torch.from_numpy(self.x[i]), torch.from_numpy(self.xc[i]), i, os.getpid()


class EagerDataset(Dataset):
    def __init__(self, path):
        self.file = h5py.File(path, "r")
        self.x, self.xc = self.file["x"], self.file["xc"]
        self.x[0]  # the parent reads before forking, as many scripts do

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return torch.from_numpy(self.x[i]), torch.from_numpy(self.xc[i]), i, os.getpid()


class ReopenDataset(Dataset):
    def __init__(self, path):
        self.path = path
        with h5py.File(path, "r") as f:
            self.n = len(f["x"])

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        with h5py.File(self.path, "r") as f:
            return torch.from_numpy(f["x"][i]), torch.from_numpy(f["xc"][i]), i, os.getpid()


KINDS = {"lazy": LazyDataset, "eager": EagerDataset, "reopen": ReopenDataset}


def main(argv):
    path, out, kind = argv[1], argv[2], argv[3]
    epochs = int(argv[4]) if len(argv) > 4 else 2
    base, _, start_method = kind.partition("-")
    dataset = KINDS[base](path)
    loader = DataLoader(dataset, batch_size=8, shuffle=True, num_workers=2,
                        multiprocessing_context=start_method or "fork",
                        generator=torch.Generator().manual_seed(20260401))
    xs, xcs, indices, pids = [], [], [], []
    for _ in range(epochs):
        for x, xc, i, pid in loader:
            xs.append(x.numpy())
            xcs.append(xc.numpy())
            indices.append(i.numpy())
            pids.append(pid.numpy())
    np.savez(out, x=np.concatenate(xs), xc=np.concatenate(xcs), index=np.concatenate(indices),
             worker_pid=np.concatenate(pids), parent_pid=np.array([os.getpid()]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

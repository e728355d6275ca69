"""One rank of a data-parallel job: a PyTorch DataLoader (2 forked workers) over a
DistributedSampler, reading samples of several HDF5 datasets with h5py, for several epochs.

    python3 cachetest_loader.py FILE OUT.json --rank R --ranks N [--epochs E] [--batch B]
        [--seed S] [--datasets a,b] [--make N]

Writes per epoch and batch a digest of every tensor (dtype, shape, bytes) and the sample ids,
plus the pid of every worker with its epoch (to attribute worker statistics files to epochs).
--barrier DIR makes the ranks wait for each other after every epoch.
--make N writes FILE instead (natively): N samples, contiguous and gzip-chunked datasets.
"""

import argparse
import hashlib
import json
import os

import numpy as np

EPOCH = -1  # set before each epoch's workers are forked; read by worker_init_fn


def make(path, n, seed=0):
    import h5py

    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        f.create_dataset("cont", data=rng.integers(-500, 500, (n, 16, 64)).astype("<f4") / 4)
        f.create_dataset("gz", data=rng.integers(0, 50, (n, 32, 32)).astype("<i2"),
                         chunks=(8, 16, 32), compression="gzip", compression_opts=6)
        f.create_dataset("label", data=rng.integers(0, 10, n).astype("<i8"))


class H5Samples:
    """Opens the file lazily in each process (the usual pattern for forked workers)."""

    def __init__(self, path, names):
        self.path, self.names, self.file = path, names, None
        import h5py
        with h5py.File(path, "r") as f:
            self.n = f[names[0]].shape[0]

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import h5py
        import torch
        if self.file is None:
            self.file = h5py.File(self.path, "r")
        return (i, *(torch.from_numpy(np.asarray(self.file[name][i])) for name in self.names))


def barrier(directory, epoch, rank, ranks, timeout=120):
    import glob
    import time
    open(os.path.join(directory, f"e{epoch}-r{rank}"), "w").close()
    deadline = time.monotonic() + timeout
    while len(glob.glob(os.path.join(directory, f"e{epoch}-r*"))) < ranks:
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {rank}: the other ranks did not finish epoch {epoch}")
        time.sleep(0.01)


def tensor_digest(t):
    a = t.numpy()
    h = hashlib.sha1(f"{a.dtype.str}|{a.shape}|".encode())
    h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("out", nargs="?")
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--datasets", default="cont,gz,label")
    parser.add_argument("--barrier", help="a directory: ranks wait for each other after every "
                        "epoch, as DDP's collectives make them")
    parser.add_argument("--make", type=int)
    parser.add_argument("--all-ranks", action="store_true",
                        help="compute every rank's batches in this process (the native oracle)")
    args = parser.parse_args()
    if args.make:
        make(args.file, args.make)
        return

    if args.all_ranks:
        outputs = []
        for rank in range(args.ranks):
            args.rank = rank
            outputs.append(run_rank(args))
        with open(args.out, "w") as f:
            json.dump(outputs, f)
        return
    with open(args.out, "w") as f:
        json.dump(run_rank(args), f)


def run_rank(args):
    import torch
    from torch.utils.data import DataLoader, DistributedSampler

    global EPOCH
    pid_log = args.out + ".workers"
    if os.path.exists(pid_log):
        os.unlink(pid_log)

    def worker_init(_):
        with open(pid_log, "a") as f:
            f.write(f"{EPOCH} {os.getpid()}\n")

    torch.set_num_threads(1)
    ds = H5Samples(args.file, args.datasets.split(","))
    sampler = DistributedSampler(ds, num_replicas=args.ranks, rank=args.rank, shuffle=True,
                                 seed=args.seed)
    loader = DataLoader(ds, batch_size=args.batch, sampler=sampler, num_workers=args.workers,
                        multiprocessing_context="fork" if args.workers else None,
                        worker_init_fn=worker_init if args.workers else None)
    epochs = []
    for epoch in range(args.epochs):
        EPOCH = epoch
        sampler.set_epoch(epoch)
        batches = []
        for batch in loader:
            ids, *tensors = batch
            batches.append([ids.tolist(), [tensor_digest(t) for t in tensors]])
        epochs.append(batches)
        if args.barrier:
            barrier(args.barrier, epoch, args.rank, args.ranks)
    workers = []
    if os.path.exists(pid_log):
        with open(pid_log) as f:
            workers = [list(map(int, line.split())) for line in f if line.strip()]
    return {"epochs": epochs, "workers": workers, "pid": os.getpid()}


if __name__ == "__main__":
    main()

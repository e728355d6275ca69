"""One MPI rank of a SOLAR-style loader: h5py opens the file with driver='mpio' on
MPI.COMM_WORLD (as SOLAR's published loaders do), a DistributedSampler gives the rank's order,
and every sample and its label are read independently, a batch at a time, for several epochs.

    mpirun -n 4 python3 partest_solar_loader.py FILE OUT_PREFIX [--epochs E] [--batch B]
        [--seed S] [--collective]
    python3 partest_solar_loader.py FILE --make N

Writes OUT_PREFIX.rank<R>.json: per epoch and batch the sample ids and a digest of every
array (dtype, shape, bytes). --collective also reads one block of rows per rank inside
`with dset.collective:`, as a slice and with read_direct (only the latter reaches HDF5 as a
collective transfer: see below), and records their digests.
--make N writes FILE (serially, no MPI driver): N samples, a contiguous and a gzip-chunked
dataset of samples and a label dataset.
"""

import argparse
import hashlib
import json

import numpy as np


def make(path, n, seed=0):
    import h5py

    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        f.create_dataset("images", data=rng.standard_normal((n, 32, 64)).astype("<f4"))
        f.create_dataset("fields", data=rng.integers(0, 60, (n, 16, 32)).astype("<i2"),
                         chunks=(16, 16, 32), compression="gzip", compression_opts=4)
        f.create_dataset("labels", data=rng.integers(0, 1000, n).astype("<i8"))


def digest(array):
    a = np.ascontiguousarray(array)
    h = hashlib.sha1(f"{a.dtype.str}|{a.shape}|".encode())
    h.update(a.tobytes())
    return h.hexdigest()


class Samples:
    """The dataset a DistributedSampler needs: only its length."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("out", nargs="?")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--collective", action="store_true")
    parser.add_argument("--make", type=int)
    args = parser.parse_args()
    if args.make:
        make(args.file, args.make)
        return

    import h5py
    from mpi4py import MPI
    from torch.utils.data import DistributedSampler

    comm = MPI.COMM_WORLD
    out = {"rank": comm.rank, "ranks": comm.size, "epochs": []}
    with h5py.File(args.file, "r", driver="mpio", comm=comm) as f:
        images, fields, labels = f["images"], f["fields"], f["labels"]
        sampler = DistributedSampler(Samples(images.shape[0]), num_replicas=comm.size,
                                     rank=comm.rank, shuffle=True, seed=args.seed)
        for epoch in range(args.epochs):
            sampler.set_epoch(epoch)
            order = list(sampler)
            batches = []
            for start in range(0, len(order), args.batch):
                ids = order[start:start + args.batch]
                # Independent reads, one sample at a time, with the label beside each sample.
                x = np.stack([images[i] for i in ids])
                y = np.stack([fields[i] for i in ids])
                z = np.array([labels[i] for i in ids])
                batches.append([ids, [digest(x), digest(y), digest(z)]])
            out["epochs"].append(batches)
            comm.Barrier()  # ranks meet after each epoch, as a training step's allreduce makes them
        if args.collective:
            rows = images.shape[0] // comm.size
            mine = np.s_[comm.rank * rows:(comm.rank + 1) * rows]
            # h5py reads a numeric slice through its fast reader, which passes HDF5 the default
            # (independent) transfer list even inside `collective`; read_direct passes the
            # dataset's list, which `collective` made collective. Both are recorded.
            with images.collective:
                sliced = images[mine]
            block = np.empty((rows,) + images.shape[1:], images.dtype)
            with images.collective:
                images.read_direct(block, mine)
            out["collective_slice"] = digest(sliced)
            out["collective"] = digest(block)
    with open(f"{args.out}.rank{comm.rank}.json", "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()

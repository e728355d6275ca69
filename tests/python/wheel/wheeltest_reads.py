"""Reads samples the way a training loop does, with whatever h5py the running python has
(the pip wheel's, in these tests).

    python wheeltest_reads.py FILE --make N
    python wheeltest_reads.py FILE OUT.json [--epochs E] [--seed S] [--fork]

Every epoch visits every sample in the order of np.random.default_rng(seed).permutation(n)
(one generator across epochs: the schedule tool's 'numpy' source), reading the sample, a
gzip-compressed field and the label one at a time. OUT.json holds a digest of each epoch's
bytes in visiting order, the HDF5 library the process uses, the connector that served the
file (asked from HDF5 itself) and, with --fork, the epochs read by a forked child (a
DataLoader worker's situation: the connector's state inherited, its threads not).
"""

import argparse
import hashlib
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "vol"))


def make(path, n):
    import h5py

    rng = np.random.default_rng(3)
    with h5py.File(path, "w") as f:
        f.create_dataset("images", data=rng.standard_normal((n, 16, 64)).astype("<f4"))
        f.create_dataset("fields", data=rng.integers(0, 90, (n, 16, 16)).astype("<i2"),
                         chunks=(32, 16, 16), compression="gzip", compression_opts=4)
        f.create_dataset("labels", data=rng.integers(0, 10, n).astype("<i8"))


def read_epoch(f, order):
    h = hashlib.sha1()
    for i in order:
        for name in ("images", "fields", "labels"):
            a = np.asarray(f[name][i])
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("out", nargs="?")
    parser.add_argument("--make", type=int)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=9)
    parser.add_argument("--fork", action="store_true")
    args = parser.parse_args()
    import h5py

    if args.make:
        make(args.file, args.make)
        return
    import voltest_h5probe

    out = {"h5py": h5py.version.version, "hdf5": h5py.version.hdf5_version,
           "libhdf5": voltest_h5probe.hdf5_library_path(), "epochs": [], "child_epochs": []}
    rng = np.random.default_rng(args.seed)
    with h5py.File(args.file, "r") as f:
        n = f["images"].shape[0]
        out["connector"] = voltest_h5probe.connector_name(f.id.id)
        for _ in range(args.epochs):
            order = rng.permutation(n)
            if not args.fork:
                out["epochs"].append(read_epoch(f, order))
                continue
            # The epoch is read by a forked child, as a DataLoader worker would.
            child_out = f"{args.out}.child"
            pid = os.fork()
            if pid == 0:
                try:
                    with open(child_out, "w") as c:
                        c.write(read_epoch(f, order))
                finally:
                    os._exit(0)
            _, status = os.waitpid(pid, 0)
            if status != 0:
                raise SystemExit(f"the forked reader failed (status {status})")
            with open(child_out) as c:
                out["child_epochs"].append(c.read())
    with open(args.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()

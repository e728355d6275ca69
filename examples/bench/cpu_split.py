"""Where a one-sample-per-file loop's CPU goes: the training process's and its DataLoader workers'
user and system time, page faults and context switches, per epoch.

    env/run python3 examples/bench/cpu_split.py DIR [--files 4000] [--epochs 3] [--tag T]
        [--warm] [--flush-mib N]

DIR holds one HDF5 file (`*.h5`) per sample, each with a dataset `x` and a dataset `y` of one row (the
never-slower suite's `onefile` workload: `build/bench-data/workloads/onefile-*` after
`examples/bench/run --suite never-slower --keep --cases onefile`). Every sample is opened, `x[0]`
and `y[0]` read, and the file closed, by a DataLoader with 2 workers (forked every epoch),
`DistributedSampler(num_replicas=1, shuffle=True, seed=42)`, batches of 32: the suite's loop
without its checks. Whether the connector is loaded is decided by the environment, as in
`loop.py`; run native and Prescient in turn and compare.

Before each epoch every file is dropped from the page cache (POSIX_FADV_DONTNEED; files written
just before need a `sync` first) unless --warm. --flush-mib N writes N MiB of memory before every
visit, emptying the CPU caches as the other processes that run while a cold visit waits on the
disk do: with --warm it isolates what a visit costs when it starts with cold caches.

Prints one JSON line per epoch: wall time, the process's (`main_*`) and the ended workers'
(`w_*`) user and system seconds (getrusage), minor faults, voluntary and involuntary context
switches. RESULTS.md, "a file open without the list swap, and where onefile's CPU goes", used it.
"""

import argparse
import json
import os
import resource
import time

import h5py
import numpy as np
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class OneFilePerSample(Dataset):
    def __init__(self, paths, flush_mib):
        self.paths = paths
        self.junk = np.zeros(flush_mib << 18, dtype=np.float32) if flush_mib else None

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        if self.junk is not None:
            np.add(self.junk, 1, out=self.junk)
        with h5py.File(self.paths[i], "r") as f:
            return f["x"][0], f["y"][0]


def drop_from_page_cache(paths):
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("directory")
    p.add_argument("--files", type=int, default=4000, help="the first N .h5 files by name (4000)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--tag", default="", help="a label printed with every line")
    p.add_argument("--warm", action="store_true", help="leave the files in the page cache")
    p.add_argument("--flush-mib", type=int, default=0, help="MiB written before every visit (0)")
    a = p.parse_args()

    names = sorted(n for n in os.listdir(a.directory) if n.endswith(".h5"))
    paths = [os.path.join(a.directory, n) for n in names[:a.files]]
    dataset = OneFilePerSample(paths, a.flush_mib)
    sampler = DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True, seed=42)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler, num_workers=2)
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        if not a.warm:
            drop_from_page_cache(paths)
        self0 = resource.getrusage(resource.RUSAGE_SELF)
        workers0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        for _ in loader:
            pass
        wall = time.perf_counter() - start
        self1 = resource.getrusage(resource.RUSAGE_SELF)
        workers1 = resource.getrusage(resource.RUSAGE_CHILDREN)

        def delta(before, after, field):
            value = getattr(after, field) - getattr(before, field)
            return round(value, 3) if isinstance(value, float) else value

        print(json.dumps({
            "tag": a.tag, "epoch": epoch, "wall_s": round(wall, 3),
            "main_user_s": delta(self0, self1, "ru_utime"),
            "main_sys_s": delta(self0, self1, "ru_stime"),
            "w_user_s": delta(workers0, workers1, "ru_utime"),
            "w_sys_s": delta(workers0, workers1, "ru_stime"),
            "main_minflt": delta(self0, self1, "ru_minflt"),
            "w_minflt": delta(workers0, workers1, "ru_minflt"),
            "w_voluntary_switches": delta(workers0, workers1, "ru_nvcsw"),
            "w_involuntary_switches": delta(workers0, workers1, "ru_nivcsw"),
        }), flush=True)


if __name__ == "__main__":
    main()

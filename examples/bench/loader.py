"""One benchmark run: an unmodified h5py + PyTorch training loop (run by bench.py).

    python3 loader.py CONFIG.json RESULT.json

The loop is what a user writes: a map-style Dataset that opens the HDF5 file
lazily in each worker and reads one sample at a time (``dset[i]``), a
DistributedSampler (one replica, shuffle, seed), a DataLoader, and an optional
sleep per batch standing in for compute. Whether the Prescient connector is
loaded is decided by the environment bench.py gives this process; nothing here
knows about it.

What the harness adds around the loop, per epoch: the file is made cold
(fdatasync + POSIX_FADV_DONTNEED) before the epoch when asked; the time each
``dset[i]`` call takes (and the minor page faults it causes) is measured inside
__getitem__ and returned with the sample; the time the loop blocks waiting for its next batch is measured; every
sample's float64 sum is checked against the sums recorded when the data was
generated (a wrong byte would show); the device's read counters
(/proc/diskstats) and the connector's statistics files are sampled at epoch
boundaries. The check's own time (a NumPy float64 sum per batch, ~0.5 ms) is
measured and left out of the epoch time.
"""

import glob
import json
import os
import resource
import sys
import time

import h5py
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "report"))
import stats_merge  # noqa: E402  (examples/report/stats_merge.py)
from storage import device_of, device_reads, drop_from_page_cache  # noqa: E402  (beside this file)


class Samples(Dataset):
    """The common pattern: the file is opened lazily, once per worker."""

    def __init__(self, path, name):
        self.path, self.name = path, name
        with h5py.File(path, "r") as f:
            self.n = len(f[name])
        self.f = None
        self.d = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.f is None:
            self.f = h5py.File(self.path, "r")
            self.d = self.f[self.name]
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter_ns()
        x = self.d[i]
        elapsed = time.perf_counter_ns() - start
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        return i, torch.from_numpy(x), elapsed, faults


def read_whole_file(path, block=8 << 20):
    with open(path, "rb", buffering=0) as f:
        while f.read(block):
            pass


def main():
    config = json.load(open(sys.argv[1]))
    out_path = sys.argv[2]
    path, name = config["path"], config["dataset"]
    workers, batch = config["workers"], config["batch_size"]
    compute_s = config.get("compute_s", 0.0)
    limit = config.get("limit_samples")  # stop an epoch after this many samples
    expected_sums = np.load(config["sums"])
    stats_glob = config.get("stats_glob")
    device = device_of(path)

    ds = Samples(path, name)
    sampler = DistributedSampler(ds, num_replicas=1, rank=0, shuffle=True, seed=config["seed"])
    # persistent_workers keeps the same worker processes across epochs, so their
    # page tables over the node cache's segment survive (see examples/bench/RESULTS.md).
    persistent = bool(config.get("persistent_workers")) and workers > 0
    loader = DataLoader(ds, batch_size=batch, sampler=sampler, num_workers=workers,
                        persistent_workers=persistent)

    epochs = []
    for epoch in range(config["epochs"]):
        cold = not config.get("prewarm", False)
        if cold:
            drop_from_page_cache([path])
        else:
            read_whole_file(path)  # untimed: the epoch then reads from the page cache
        sampler.set_epoch(epoch)
        dev0 = device_reads(device)
        samples = read_ns = batches = minflt = 0
        wait = compute = check = first_wait = 0.0
        bad = 0
        start = time.perf_counter()
        it = iter(loader)
        while True:
            t0 = time.perf_counter()
            try:
                idx, x, ns, faults = next(it)
            except StopIteration:
                break
            t1 = time.perf_counter()
            wait += t1 - t0
            if batches == 0:
                first_wait = t1 - t0  # includes starting the workers (forked every epoch)
            got = x.numpy().sum(axis=tuple(range(1, x.dim())), dtype=np.float64)
            bad += int(np.count_nonzero(~np.isclose(got, expected_sums[idx.numpy()], rtol=1e-9, atol=1e-6)))
            check += time.perf_counter() - t1
            samples += len(idx)
            read_ns += int(ns.sum())
            minflt += int(faults.sum())
            batches += 1
            if compute_s > 0:
                t2 = time.perf_counter()
                time.sleep(compute_s)
                compute += time.perf_counter() - t2
            if limit and samples >= limit:
                break
        del it  # shuts non-persistent workers down before the epoch is closed
        # The check is the harness's, not the loader's: its time is left out of the epoch.
        elapsed = time.perf_counter() - start - check
        dev1 = device_reads(device)
        record = {
            "epoch": epoch, "cold": cold, "seconds": elapsed, "samples": samples, "batches": batches,
            "wait_s": wait, "first_wait_s": first_wait, "compute_s": compute, "check_s": check, "read_ns": read_ns, "read_minflt": minflt, "bad_samples": bad,
            "device_reads": dev1[0] - dev0[0], "device_bytes": dev1[1] - dev0[1],
        }
        if stats_glob:
            record["stats_cumulative"] = stats_merge.merge_files(sorted(glob.glob(stats_glob)))["totals"]
        epochs.append(record)
        if bad:
            print(f"loader: {bad} samples of epoch {epoch} differ from the data written", file=sys.stderr)
    with open(out_path, "w") as f:
        json.dump({"device": device, "epochs": epochs}, f, indent=1)
    if any(e["bad_samples"] for e in epochs):
        sys.exit(3)


if __name__ == "__main__":
    main()

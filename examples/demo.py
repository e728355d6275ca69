"""Prescient demo driver (run through examples/demo).

1. Generates a small CosmoFlow-like dataset: N samples of 4x32x32 float32,
   stored twice, contiguous and gzip-chunked.
2. Runs an unmodified training-style loader in a child process with the
   connector loaded the way a user would load it (two environment variables):
   torch DistributedSampler order, DataLoader with worker processes, each
   worker opening the file lazily and reading one sample at a time.
3. Checks every sample against the data it wrote, then merges the statistics
   files of the main process and its workers and prints what the connector saw.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np

SAMPLE_SHAPE = (4, 32, 32)


def generate(path, samples):
    import h5py  # the generating process runs without the connector

    rng = np.random.default_rng(1234)
    data = rng.standard_normal((samples,) + SAMPLE_SHAPE, dtype=np.float32)
    with h5py.File(path, "w") as f:
        f.create_dataset("contiguous", data=data)
        f.create_dataset("gzip", data=data, chunks=(32,) + SAMPLE_SHAPE, compression="gzip",
                         compression_opts=1)
        f.create_dataset("labels", data=np.arange(samples, dtype=np.int64))
    return data


LOADER = textwrap.dedent(
    """
    import sys, time, h5py, numpy as np, torch
    from torch.utils.data import DataLoader, Dataset, DistributedSampler

    path, name, epochs, workers, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]

    class Samples(Dataset):
#The usual pattern : open lazily in each worker, keep the handle.
        def __init__(self):
            with h5py.File(path, "r") as f:
                self.n = len(f[name])
            self.f = None
        def __len__(self):
            return self.n
        def __getitem__(self, i):
            if self.f is None:
                self.f = h5py.File(path, "r")
                self.d = self.f[name]
            return i, torch.from_numpy(self.d[i])

    ds = Samples()
    sampler = DistributedSampler(ds, num_replicas=1, rank=0, shuffle=True, seed=42)
    loader = DataLoader(ds, batch_size=16, sampler=sampler, num_workers=workers)
    got = np.zeros((len(ds),) + tuple({shape}), dtype=np.float32)
    start = time.perf_counter()
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for idx, x in loader:
            got[idx.numpy()] = x.numpy()
    elapsed = time.perf_counter() - start
    np.save(out, got)
    print(f"{{elapsed:.3f}}")
    """
).format(shape=SAMPLE_SHAPE)


def merge_stats(pattern):
    files = sorted(glob.glob(pattern))
    stats = [json.load(open(p)) for p in files]
    total = {"processes": len(stats), "selections": {}}
    for s in stats:
        for key in ("files_opened", "datasets_opened", "reads", "reads_simple", "rows", "bytes",
                    "reads_forwarded", "reads_served", "rows_hit", "rows_loaded", "rows_waited",
                    "rows_prefetched", "storage_reads", "storage_bytes", "stall_ns"):
            total[key] = total.get(key, 0) + s.get(key, 0)
        for kind, n in s.get("selections", {}).items():
            total["selections"][kind] = total["selections"].get(kind, 0) + n
    return total, stats


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plugin-dir", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--samples", type=int, default=2048)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    os.makedirs(args.workdir, exist_ok=True)
    path = os.path.join(args.workdir, "demo.h5")
    print(f"demo: generating {args.samples} samples of {SAMPLE_SHAPE} float32 in {path}")
    data = generate(path, args.samples)

    for name in ("contiguous", "gzip"):
        for old in glob.glob(os.path.join(args.workdir, f"stats-{name}*.json")):
            os.remove(old)
        stats_path = os.path.join(args.workdir, f"stats-{name}.json")
        env = dict(os.environ,
                   HDF5_PLUGIN_PATH=args.plugin_dir,
                   HDF5_VOL_CONNECTOR="prescient under_vol=0;under_info={}",
                   PRESCIENT_STATS=stats_path)
        out = os.path.join(args.workdir, f"got-{name}.npy")
        print(f"\ndemo: {args.epochs} shuffled epochs over '{name}' with a DataLoader of "
              f"{args.workers} workers, connector loaded")
        result = subprocess.run([sys.executable, "-c", LOADER, path, name, str(args.epochs),
                                 str(args.workers), out], env=env, capture_output=True, text=True)
        if result.returncode != 0:
            sys.stderr.write(result.stdout + result.stderr)
            sys.exit(f"demo: the loader failed on '{name}'")
        elapsed = float(result.stdout.strip().splitlines()[-1])
        got = np.load(out)
        if not np.array_equal(got, data):
            sys.exit(f"demo: samples read through the connector differ from the data written ('{name}')")
        total, per_process = merge_stats(stats_path.replace(".json", "*.json"))
        reads_per_s = total.get("reads", 0) / elapsed if elapsed > 0 else 0
        print(f"  every sample identical to the data written; {elapsed:.2f} s ({reads_per_s:,.0f} reads/s)")
        print(f"  connector statistics from {total['processes']} processes "
              f"(main + workers, one JSON file each):")
        print(f"    files opened     {total.get('files_opened', 0)}")
        print(f"    datasets opened  {total.get('datasets_opened', 0)}")
        print(f"    reads            {total.get('reads', 0)}  (simple, cacheable: {total.get('reads_simple', 0)})")
        print(f"    rows read        {total.get('rows', 0)}  ({total.get('bytes', 0) / 2**20:.1f} MiB)")
        print(f"    served by cache  {total.get('reads_served', 0)} reads: {total.get('rows_hit', 0)} rows hit, "
              f"{total.get('rows_loaded', 0)} loaded on a miss, {total.get('rows_waited', 0)} waited for")
        print(f"    storage          {total.get('storage_reads', 0)} reads, "
              f"{total.get('storage_bytes', 0) / 2**20:.1f} MiB; stalled {total.get('stall_ns', 0) / 1e9:.3f} s")
        kinds = ", ".join(f"{k} {v}" for k, v in total["selections"].items() if v)
        print(f"    selection kinds  {kinds}")
        for s in per_process:
            role = "worker" if s.get("forked_child") else "main"
            print(f"      pid {s['pid']:>7} ({role:6}): {s.get('reads', 0)} reads")
    print("\ndemo: done.")


if __name__ == "__main__":
    main()

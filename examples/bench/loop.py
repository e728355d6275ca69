"""One rank's training loop: unmodified torch + h5py code (started by ranks.py).

    RANK=r WORLD_SIZE=R python3 loop.py CONFIG.json RESULT.json

Nothing here knows about Prescient: whether the connector is loaded is decided by the environment
the process is given. The loop is what users write:

  Dataset   map-style; opens each file lazily, once per process (DataLoader workers open their own),
            except `onefile` workloads, where every sample is opened, read and closed (what the
            loaders of that layout do); reads every field of a sample.
  sampler   DistributedSampler(num_replicas=R, rank=r, shuffle, seed) with set_epoch(e), or (one rank,
            `sampler` in the configuration) one of the orders public loaders make that no seed-based
            schedule can describe (issue 12's four shapes):
              index-table      the dataset maps index i to sample table[i], a table shuffled once with
                               np.random.shuffle (unseeded); DistributedSampler(shuffle=False) (mode sample)
              file-then-row    files in a new unseeded permutation every epoch, the rows of each file in
                               a new unseeded permutation (mode sample, several files)
              random-batches   BatchSampler(RandomSampler(generator=g)), the DataLoader given g too
                               (mode batch)
              shuffled-blocks  whole contiguous batches in a new unseeded permutation (mode slices)
              concat-unsorted  a ConcatDataset of one Dataset per file, the files not in sorted order,
                               shuffled by an unseeded RandomSampler (mode sample, several files)
              random           DataLoader(ds, shuffle=True): an unseeded RandomSampler (mode sample)
  modes     sample  DataLoader(ds, batch_size=B, sampler=sampler): ds[i] one sample at a time
            batch   DataLoader(ds, batch_size=None, sampler=BatchSampler(sampler, B)): ds[batch]
                    reads d[sorted(batch)] (one file only)
            slices  DataLoader(slice_ds, batch_size=None, sampler=DistributedSampler(slice_ds)):
                    d[i:i+B] for shuffled batch starts i (one file only)
            rows    no DataLoader: ds[i] in this process, in sampler order (per-row reads)

With `main_opens` the main process opens the first file once before the loop to read a length
and closes it (what many loaders' __init__ does); without it only the workers open files.

Around the loop (the harness's part): before each epoch every file of the workload is made cold
(when `cold`); the time the loop blocks in next() is measured; every sample of every field is
checked against the float64 sums saved at generation (the check's time is left out of the epoch);
an optional compute sleep per batch; a slowdown factor f stretches every step of this rank to f
times its length (ranks that do not move in lockstep); the connector's statistics files of this
rank (main process and workers), the block device's counters and the CPU time the hypervisor
stole from the machine (storage.cpu_steal_s) are read at every epoch's end. `cpu_s` is the CPU
time (user and system) of the rank's process and of the workers that ended with the epoch (all of
them unless the workers are persistent), the check's left out, and `cpu_main_s` the rank's
process's share: on a machine whose cores the loop fills, what a connector costs shows there
first.
"""

import bisect
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "report"))

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset,  # noqa: E402
                              DistributedSampler, RandomSampler, Sampler)

import counters  # noqa: E402
import storage  # noqa: E402


class Samples(Dataset):
    """Sample id -> every field's row, over files in sorted path order. `field_files[k]` names the
    file of each field in the k-th file of samples: the same file for every field, or one file
    per field (PatchCamelyon's layout: images in x.h5, labels in y.h5)."""

    def __init__(self, field_files, rows_per_file, fields, open_per_sample=False, rdcc_nbytes=None):
        self.field_files, self.fields = field_files, fields
        self.starts = np.concatenate([[0], np.cumsum(rows_per_file)]).tolist()
        self.open_per_sample = open_per_sample
        self.file_kwargs = {"rdcc_nbytes": rdcc_nbytes} if rdcc_nbytes else {}
        self.handles = {}  # file index -> (h5py.File, [datasets]), opened lazily in each process

    def __len__(self):
        return self.starts[-1]

    def _locate(self, i):
        k = bisect.bisect_right(self.starts, i) - 1
        return k, i - self.starts[k]

    def _datasets(self, k):
        if k not in self.handles:
            paths = self.field_files[k]
            files = {path: h5py.File(path, "r", **self.file_kwargs) for path in dict.fromkeys(paths)}
            self.handles[k] = (files, [files[path][name] for path, name in zip(paths, self.fields)])
        return self.handles[k][1]

    def __getitem__(self, i):
        if isinstance(i, list):
            return self._batch(i)
        k, row = self._locate(i)
        if self.open_per_sample:  # each file opened once for the sample, read and closed
            paths = self.field_files[k]
            files = {path: h5py.File(path, "r", **self.file_kwargs) for path in dict.fromkeys(paths)}
            try:
                return (i,) + tuple(files[path][name][row] for path, name in zip(paths, self.fields))
            finally:
                for f in files.values():
                    f.close()
        return (i,) + tuple(d[row] for d in self._datasets(k))

    def _batch(self, batch):
        # h5py wants increasing, distinct indices: read the sorted distinct rows once.
        order = np.sort(np.asarray(batch, dtype=np.int64))
        rows = np.unique(order)
        where = np.searchsorted(rows, order)
        values = tuple(d[rows.tolist()][where] for d in self._datasets(0))
        return (torch.from_numpy(order),) + tuple(torch.from_numpy(v) for v in values)


class Slices(Dataset):
    """Batch k = rows k*B .. k*B+B-1 of every field (one file)."""

    def __init__(self, samples, batch):
        self.samples, self.batch = samples, batch

    def __len__(self):
        return -(-len(self.samples) // self.batch)

    def __getitem__(self, k):
        begin = k * self.batch
        end = min(len(self.samples), begin + self.batch)
        ds = self.samples._datasets(0)
        return (torch.arange(begin, end),) + tuple(torch.from_numpy(d[begin:end]) for d in ds)


class IndexTable(Dataset):
    """Index i -> sample table[i]: the loader's own index table, shuffled once and unseeded."""

    def __init__(self, samples):
        self.samples = samples
        self.table = list(range(len(samples)))
        np.random.shuffle(self.table)

    def __len__(self):
        return len(self.table)

    def __getitem__(self, i):
        return self.samples[self.table[i]]


class FilePart(Dataset):
    """One file's samples, as a loader that makes one Dataset per file has them."""

    def __init__(self, samples, k):
        self.samples, self.first = samples, samples.starts[k]
        self.rows = samples.starts[k + 1] - self.first

    def __len__(self):
        return self.rows

    def __getitem__(self, j):
        return self.samples[self.first + j]


def unsorted_concat(samples):
    """A ConcatDataset of the files' parts in an order other than sorted (a directory
    listing's, an unsorted glob's): odd-numbered files first, then even-numbered."""
    files = list(range(len(samples.starts) - 1))
    return ConcatDataset([FilePart(samples, k) for k in files[1::2] + files[0::2]])


class FileThenRow(Sampler):
    """Every epoch: the files in a new unseeded permutation, each file's rows in another."""

    def __init__(self, samples):
        self.starts = samples.starts

    def __len__(self):
        return self.starts[-1]

    def __iter__(self):
        for k in np.random.permutation(len(self.starts) - 1):
            begin, end = self.starts[k], self.starts[k + 1]
            for row in np.random.permutation(end - begin):
                yield begin + int(row)


class ShuffledBlocks(Sampler):
    """Every epoch: the blocks (whole contiguous batches) in a new unseeded permutation."""

    def __init__(self, blocks):
        self.blocks = blocks

    def __len__(self):
        return self.blocks

    def __iter__(self):
        return iter(np.random.permutation(self.blocks).tolist())


# sampler -> the mode it reads in.
PUBLIC_ORDERS = {"index-table": "sample", "file-then-row": "sample", "random-batches": "batch",
                 "shuffled-blocks": "slices", "concat-unsorted": "sample", "random": "sample"}


def make_public_loader(config, ds):
    """(sampler, DataLoader) of one of the orders of PUBLIC_ORDERS (one rank)."""
    order, mode, batch = config["sampler"], config["mode"], config["batch_size"]
    if order not in PUBLIC_ORDERS:
        raise ValueError(f"unknown sampler '{order}'")
    if PUBLIC_ORDERS[order] != mode:
        raise ValueError(f"sampler '{order}' reads in mode '{PUBLIC_ORDERS[order]}', not '{mode}'")
    kwargs = dict(num_workers=config["workers"],
                  persistent_workers=bool(config.get("persistent_workers")) and config["workers"] > 0)
    if order == "index-table":
        table = IndexTable(ds)
        sampler = DistributedSampler(table, num_replicas=1, rank=0, shuffle=False)
        return sampler, DataLoader(table, batch_size=batch, sampler=sampler, **kwargs)
    if order == "concat-unsorted":
        parts = unsorted_concat(ds)
        sampler = RandomSampler(parts)
        return sampler, DataLoader(parts, batch_size=batch, sampler=sampler, **kwargs)
    if order == "random":
        sampler = RandomSampler(ds)
        return sampler, DataLoader(ds, batch_size=batch, sampler=sampler, **kwargs)
    if order == "file-then-row":
        sampler = FileThenRow(ds)
        return sampler, DataLoader(ds, batch_size=batch, sampler=sampler, **kwargs)
    if order == "random-batches":
        g = torch.Generator()
        g.manual_seed(config["seed"])
        sampler = BatchSampler(RandomSampler(ds, generator=g), batch, drop_last=False)
        return sampler, DataLoader(ds, batch_size=None, sampler=sampler, generator=g, **kwargs)
    slices = Slices(ds, batch)
    sampler = ShuffledBlocks(len(slices))
    return sampler, DataLoader(slices, batch_size=None, sampler=sampler, **kwargs)


def make_loader(config, ds, rank, ranks):
    mode, batch, workers = config["mode"], config["batch_size"], config["workers"]
    persistent = bool(config.get("persistent_workers")) and workers > 0
    if config.get("sampler", "distributed") != "distributed":
        if ranks != 1:
            raise ValueError(f"sampler '{config['sampler']}' runs one rank, not {ranks}")
        return make_public_loader(config, ds)
    if mode == "slices":
        slices = Slices(ds, batch)
        sampler = DistributedSampler(slices, num_replicas=ranks, rank=rank, shuffle=config["shuffle"],
                                     seed=config["seed"])
        return sampler, DataLoader(slices, batch_size=None, sampler=sampler, num_workers=workers,
                                   persistent_workers=persistent)
    sampler = DistributedSampler(ds, num_replicas=ranks, rank=rank, shuffle=config["shuffle"], seed=config["seed"])
    if mode == "sample":
        return sampler, DataLoader(ds, batch_size=batch, sampler=sampler, num_workers=workers,
                                   persistent_workers=persistent)
    if mode == "batch":
        return sampler, DataLoader(ds, batch_size=None, sampler=BatchSampler(sampler, batch, drop_last=False),
                                   num_workers=workers, persistent_workers=persistent)
    if mode == "rows":
        return sampler, None
    raise ValueError(f"unknown mode '{mode}'")


def rows_in_process(ds, sampler, batch):
    """The per-row loop without a DataLoader: yields batches of B samples read one row at a time."""
    pending = []
    for i in sampler:
        pending.append(ds[i])
        if len(pending) == batch:
            yield _stack(pending)
            pending = []
    if pending:
        yield _stack(pending)


def _stack(items):
    return tuple(np.stack([np.asarray(item[c]) for item in items]) for c in range(len(items[0])))


def wrong_samples(batch, sums, fields):
    """Samples of the batch whose bytes differ from those generated (any field)."""
    ids = np.asarray(batch[0]).astype(np.int64)
    bad = np.zeros(len(ids), dtype=bool)
    for name, values in zip(fields, batch[1:]):
        values = values.numpy() if isinstance(values, torch.Tensor) else np.asarray(values)
        got = values.reshape(len(ids), -1).astype(np.float64).sum(axis=1)
        bad |= ~np.isclose(got, sums[name][ids], rtol=1e-9, atol=1e-6)
    return int(np.count_nonzero(bad)), len(ids)


def main():
    config = json.load(open(sys.argv[1]))
    out_path = sys.argv[2]
    rank = int(os.environ.get("RANK", "0"))
    ranks = int(os.environ.get("WORLD_SIZE", "1"))
    w = config["workload"]
    files, fields = w["files"], w["fields"]
    sums = dict(np.load(w["sums"]))
    ds = Samples(w["field_files"], w["rows_per_file"], fields, open_per_sample=w["open_per_sample"],
                 rdcc_nbytes=config.get("rdcc_nbytes"))
    if config.get("main_opens"):
        # What many loaders do in __init__: open a file for the dataset's length, then close it.
        with h5py.File(files[0], "r") as f:
            len(f[fields[0]])
    sampler, loader = make_loader(config, ds, rank, ranks)
    slowdown = config.get("slowdown", [1.0])
    factor = float(slowdown[rank % len(slowdown)])
    compute_s = float(config.get("compute_s", 0.0))
    stats_files = config.get("stats_files")  # [main file, worker-file glob] of this rank
    device = storage.device_of(files[0])

    epochs = []
    for epoch in range(config["epochs"]):
        if config.get("cold", True):
            storage.drop_from_page_cache(files)
        if hasattr(sampler, "set_epoch"):  # the public orders reshuffle by themselves
            sampler.set_epoch(epoch)
        dev0 = storage.device_reads(device)
        steal0 = storage.cpu_steal_s()
        cpu0 = os.times()
        samples = batches = bad = 0
        wait = check = slept = first_wait = check_cpu = 0.0
        start = time.perf_counter()
        it = iter(loader) if loader is not None else rows_in_process(ds, sampler, config["batch_size"])
        step_start = start
        while True:
            t0 = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                break
            t1 = time.perf_counter()
            wait += t1 - t0
            if batches == 0:
                first_wait = t1 - t0  # includes starting the workers when they are forked per epoch
            c1 = time.process_time()
            wrong, n = wrong_samples(batch, sums, fields)
            check_cpu += time.process_time() - c1
            t2 = time.perf_counter()
            check += t2 - t1
            bad += wrong
            samples += n
            batches += 1
            if compute_s > 0:
                time.sleep(compute_s)
            if factor > 1.0:
                # This rank's step lasts `factor` times what it took (the check excluded).
                time.sleep((factor - 1.0) * (time.perf_counter() - step_start - (t2 - t1)))
            t3 = time.perf_counter()
            slept += t3 - t2
            step_start = t3
        del it  # shuts non-persistent workers down: their statistics are final
        elapsed = time.perf_counter() - start - check
        dev1 = storage.device_reads(device)
        steal = storage.cpu_steal_s() - steal0
        cpu1 = os.times()
        cpu_main = sum(cpu1[:2]) - sum(cpu0[:2]) - check_cpu
        cpu = cpu_main + sum(cpu1[2:4]) - sum(cpu0[2:4])
        record = {"epoch": epoch, "seconds": elapsed, "samples": samples, "batches": batches, "wait_s": wait,
                  "first_wait_s": first_wait, "compute_s": slept, "check_s": check, "bad_samples": bad,
                  "device_reads": dev1[0] - dev0[0], "device_bytes": dev1[1] - dev0[1], "steal_s": steal,
                  "cpu_s": cpu, "cpu_main_s": cpu_main}
        if stats_files:
            record["stats_cumulative"] = counters.snapshot(stats_files)
        epochs.append(record)
        if bad:
            print(f"loop: rank {rank}: {bad} samples of epoch {epoch} differ from the data written", file=sys.stderr)
    with open(out_path, "w") as f:
        json.dump({"rank": rank, "ranks": ranks, "slowdown": factor, "device": device, "epochs": epochs}, f, indent=1)


if __name__ == "__main__":
    main()

"""What one h5py read costs with and without the connector, in instructions: a measure the
machine's noise does not move.

    env/run python3 examples/bench/read_cost.py [--samples 8000] [--epochs 2] [--plugin-dir DIR]

Needs valgrind, which the environment does not install (`env/run apt-get install -y valgrind`).
One process reads `images[i]` and `labels[i]` of an imglab workload (16 KiB float32 images and
int64 labels, one file) for every i in a new shuffled order each epoch, with h5py and no
DataLoader, the file in the page cache, under callgrind, as:

  native        no connector variables: HDF5's native connector
  pass-through  PRESCIENT_CACHE=0: the connector inspects every read and forwards it
  cache         the connector's default cache: the first epoch loads every row, later ones hit
  quarter       a cache of a quarter of the data: misses, admissions and evictions in every epoch
  loader        the default cache, the same reads made by a DataLoader (num_workers=0, batches
                of 32, RandomSampler with a seeded generator) fetching `(images[i], labels[i])`
  followed      `loader` with its sampler followed at run time (PRESCIENT_FOLLOW=1, python/ on
                PYTHONPATH): the connector places every read in the rank's order, keys its rows
                by their next use and reports the rank's progress

For each it prints the instructions spent inside H5Dread per read (inclusive: HDF5's own read
and everything the connector does inside it), and the whole program's instructions. `loader`
and `followed` import PyTorch, which `cache` does not: compare their reads with `cache`'s and
their totals with each other (the follower's Python side is their difference outside H5Dread).
`--profiles DIR` keeps callgrind's files, to see with `callgrind_annotate` where they go.

    env/run python3 examples/bench/read_cost.py --shape small-datasets [--samples 200]

measures instead what a loop of many small datasets costs, one visit being the open of a dataset
and its whole read (`g[name][()]`): the layout of MACE's sharded HDF5 files (public_loader.py
mace: a group per configuration, some twenty datasets of a few hundred bytes each, scalars and
strings among them), every dataset of the first --samples configurations visited in order, the
file in the page cache. Opens, group lookups and closes are most of such a visit, so it counts
the whole program, not H5Dread: a run that visits nothing is subtracted, and the rest divided by
the visits. Variants: native, pass-through and cache as above, and `hdf5-pass-through` (HDF5's
own pass-through connector over the native one: what stacking any connector costs).

    env/run python3 examples/bench/read_cost.py --shape file-per-sample [--samples 300]

counts the same way a visit of a file per sample (the never-slower suite's `onefile`: open
the file, read its `x` (64 x 64 float32) and `y` whole, close it), --samples files. The
connector runs without its admission thread (PRESCIENT_ADMIT_BEHIND=0: each read places its own
misses), whose use depends on the machine's load at the moment. Wall time
on this machine moves by 10% between runs minutes apart; instruction counts move by less than
0.1%. What they leave out: time in the kernel (reads, page faults), waiting, and other threads'
work is counted but not their parallelism, so they measure the CPU path, not the epoch.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import cachesize  # noqa: E402
import workloads  # noqa: E402

VARIANTS = ("native", "pass-through", "cache", "quarter", "loader", "followed")
VISIT_VARIANTS = ("native", "pass-through", "cache", "hdf5-pass-through")

# The child: one process, every row of both datasets per epoch, in a new order each epoch.
CHILD = r"""
import sys, h5py, numpy as np
path, epochs = sys.argv[1], int(sys.argv[2])
f = h5py.File(path, "r")
datasets = [f["images"], f["labels"]]
rng = np.random.default_rng(1)
for _ in range(epochs):
    for i in rng.permutation(len(datasets[0])):
        for d in datasets:
            d[int(i)]
"""

# The DataLoader child (loader, followed): the same reads, fetched by a DataLoader in the calling
# process, so that the follower sees its sampler's order.
LOADER_CHILD = r"""
import sys, h5py, torch
from torch.utils.data import DataLoader, Dataset, RandomSampler
path, epochs = sys.argv[1], int(sys.argv[2])

class ImagesAndLabels(Dataset):
    def __init__(self):
        self.datasets = None
        with h5py.File(path, "r") as f:
            self.length = len(f["images"])
    def __len__(self):
        return self.length
    def __getitem__(self, i):
        if self.datasets is None:
            f = h5py.File(path, "r")
            self.datasets = [f["images"], f["labels"]]
        return [d[int(i)] for d in self.datasets]

data = ImagesAndLabels()
generator = torch.Generator()
generator.manual_seed(1)
loader = DataLoader(data, batch_size=32, sampler=RandomSampler(data, generator=generator),
                    num_workers=0, collate_fn=lambda batch: batch)
for _ in range(epochs):
    for batch in loader:
        pass
"""

# The small-datasets child: every dataset of the first n configurations, opened and read whole
# (as MACE's HDF5Dataset.__getitem__ does); n = 0 measures the rest of the program.
SMALL_CHILD = r"""
import sys, h5py
path, n = sys.argv[1], int(sys.argv[2])
with h5py.File(path, "r") as f:
    batch = f["config_batch_0"]
    visits = 0
    for j in range(n):
        g = batch["config_" + str(j)]
        for group in ("properties", "property_weights"):
            for k in g[group]:
                g[group][k][()]
                visits += 1
        for k in ("atomic_numbers", "positions", "weight", "config_type", "pbc", "cell"):
            g[k][()]
            visits += 1
    print(visits)
"""

# The file-per-sample child: the first n files opened, both datasets read whole, closed.
FILE_CHILD = r"""
import os, sys, h5py
directory, n = sys.argv[1], int(sys.argv[2])
for name in sorted(os.listdir(directory))[:n]:
    with h5py.File(os.path.join(directory, name), "r") as f:
        f["x"][()]
        f["y"][()]
print(n)
"""


def make_sample_files(directory, files):
    """`files` files of one sample each (x: 64 x 64 float32, y: int64), unless there already."""
    import h5py
    import numpy as np

    os.makedirs(directory, exist_ok=True)
    for i in range(files):
        path = os.path.join(directory, f"sample_{i:06d}.h5")
        if not os.path.exists(path):
            with h5py.File(path + ".tmp", "w") as f:
                f["x"] = np.full((64, 64), i, np.float32)
                f["y"] = np.int64(i)
            os.replace(path + ".tmp", path)
    return directory


def variant_env(variant, plugin_dir, workload):
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("PRESCIENT_") or k.startswith("HDF5_VOL") or k == "HDF5_PLUGIN_PATH")}
    if variant == "native":
        return env
    if variant == "hdf5-pass-through":
        env["HDF5_VOL_CONNECTOR"] = "pass_through under_vol=0;under_info={}"
        return env
    # No admission thread: whether it takes a read's rows depends on the machine's load at that
    # moment (PRESCIENT_ADMIT_BEHIND_WHEN), which would make the count depend on it too.
    env.update({"HDF5_PLUGIN_PATH": plugin_dir, "HDF5_VOL_CONNECTOR": "prescient",
                "PRESCIENT_NODE_ID": f"read-cost-{os.getpid()}-{variant}",
                "PRESCIENT_ADMIT_BEHIND": "0"})
    if variant == "pass-through":
        env["PRESCIENT_CACHE"] = "0"
    elif variant == "followed":
        env["PRESCIENT_FOLLOW"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (os.path.join(REPO, "python"), env.get("PYTHONPATH")) if p)
    elif variant == "quarter":
        env["PRESCIENT_CACHE_SIZE"] = str(cachesize.segment_for_share(workload, 0.25))
    return env


def program_total(text):
    """The program's instructions from `callgrind_annotate` output, or None."""
    total = re.search(r"^\s*([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", text, re.M)
    return int(total.group(1).replace(",", "")) if total else None


def parse_annotate(text):
    """(instructions in H5Dread, inclusive; the program's total) from `callgrind_annotate
    --inclusive=yes` output, or None when either is missing."""
    total = program_total(text)
    read = re.search(r"^\s*([\d,]+) \([\d. ]+%\)\s+\S*:H5Dread \[", text, re.M)
    if total is None or not read:
        return None
    return int(read.group(1).replace(",", "")), total


def annotate(out_file, *options):
    return subprocess.run(["callgrind_annotate", *options, out_file], check=True,
                          capture_output=True, text=True).stdout


def instructions(out_file):
    counts = parse_annotate(annotate(out_file, "--inclusive=yes"))
    if counts is None:
        raise SystemExit(f"read-cost: no H5Dread or total in {out_file}")
    return counts


def program_instructions(out_file):
    total = program_total(annotate(out_file))
    if total is None:
        raise SystemExit(f"read-cost: no total in {out_file}")
    return total


def instructions_per_visit(args, tmp):
    """--shape small-datasets or file-per-sample: the program's instructions per visit, a run
    that visits nothing subtracted."""
    if args.shape == "small-datasets":
        import public_loader

        data = os.path.join(args.workdir, "mace")
        train = public_loader.make_mace_files(data, 1, max(args.samples, 1), log=print)
        child, path = SMALL_CHILD, os.path.join(train, "train_0.h5")
        visit = "open and read of a small dataset"
    else:
        child = FILE_CHILD
        path = make_sample_files(os.path.join(args.workdir, "file-per-sample"), args.samples)
        visit = "open of a file, read of its two datasets, close"
    print(f"| run | instructions per visit ({visit}) | against native |")
    print("|---|---|---|")
    native = None
    for variant in args.variants:
        counts = []
        for n in (0, args.samples):
            out = os.path.join(tmp, f"callgrind.{variant}.{n}")
            proc = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                                   sys.executable, "-c", child, path, str(n)],
                                  env=variant_env(variant, args.plugin_dir, None), check=True,
                                  capture_output=True, text=True)
            counts.append((int(proc.stdout.split()[-1]), program_instructions(out)))
        visits = counts[1][0]
        per_visit = (counts[1][1] - counts[0][1]) / visits
        native = per_visit if variant == "native" else native
        against = f"{per_visit / native - 1:+.1%}" if native and variant != "native" else ""
        print(f"| {variant} | {per_visit:,.0f} | {against} |", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", choices=("rows", "small-datasets", "file-per-sample"), default="rows",
                   help="rows of one file (default), many small datasets (MACE's layout), or a "
                        "file per sample")
    p.add_argument("--samples", type=int,
                   help="rows of the workload (8000); configurations for small-datasets (200); "
                        "files for file-per-sample (300)")
    p.add_argument("--epochs", type=int, default=2, help="passes over every row (2)")
    p.add_argument("--variants", nargs="+", choices=sorted(set(VARIANTS + VISIT_VARIANTS)),
                   help=f"of {', '.join(VARIANTS)} (rows); {', '.join(VISIT_VARIANTS)} (the "
                        "other shapes); all of the shape's by default")
    p.add_argument("--plugin-dir", default=os.path.join(REPO, "build", "bench", "plugins"),
                   help="where libprescient_vol.so is (build/bench/plugins)")
    p.add_argument("--workdir", default=os.path.join(REPO, "build", "bench-data", "workloads"))
    p.add_argument("--profiles", metavar="DIR",
                   help="keep callgrind's output files there (callgrind.<variant>[.<visits>]), "
                        "for callgrind_annotate; by default they go with a temporary directory")
    args = p.parse_args()
    for tool in ("valgrind", "callgrind_annotate"):
        if shutil.which(tool) is None:
            raise SystemExit(f"read-cost: {tool} not found (env/run apt-get install -y valgrind)")
    visits = args.shape != "rows"
    shape_variants = VISIT_VARIANTS if visits else VARIANTS
    args.variants = args.variants or list(shape_variants)
    unknown = [v for v in args.variants if v not in shape_variants]
    if unknown:
        raise SystemExit(f"read-cost: {', '.join(unknown)}: not a variant of --shape {args.shape}")
    if args.samples is None:
        args.samples = {"rows": 8000, "small-datasets": 200, "file-per-sample": 300}[args.shape]
    if any(v not in ("native", "hdf5-pass-through") for v in args.variants) and not os.path.isfile(
            os.path.join(args.plugin_dir, "libprescient_vol.so")):
        raise SystemExit(f"read-cost: no libprescient_vol.so in {args.plugin_dir} (build it: "
                         "examples/bench/run --help builds build/bench; or --plugin-dir)")
    if args.profiles:
        os.makedirs(args.profiles, exist_ok=True)
    if visits:
        with tempfile.TemporaryDirectory(prefix="read-cost-") as tmp:
            instructions_per_visit(args, args.profiles or tmp)
        return
    workload = workloads.ensure(args.workdir, workloads.recipe("imglab", samples=args.samples))
    path = workload.files[0]
    reads = 2 * args.samples * args.epochs
    print(f"read-cost: {args.samples} samples x 2 datasets x {args.epochs} epochs = {reads} reads "
          f"of {path}", flush=True)
    print("| run | instructions in H5Dread per read | program total (millions) |")
    print("|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="read-cost-") as tmp:
        for variant in args.variants:
            out = os.path.join(args.profiles or tmp, f"callgrind.{variant}")
            child = LOADER_CHILD if variant in ("loader", "followed") else CHILD
            subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                            sys.executable, "-c", child, path, str(args.epochs)],
                           env=variant_env(variant, args.plugin_dir, workload), check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            in_read, total = instructions(out)
            print(f"| {variant} | {in_read / reads:,.0f} | {total / 1e6:,.0f} |", flush=True)


if __name__ == "__main__":
    main()

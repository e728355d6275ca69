"""One dataset per sample: native h5py against the connector, alternated, every file cold.

    env/run python3 examples/bench/per_sample.py [--rounds 2] [--epochs 3] [--plugin-dir DIR]
        [--variants native connector cache-all follow] [--side 64] [--per-file 5000]
        [--stats-dir DIR] [--cache-size SIZE]

The layout many public loaders write: files of one group per sample, each holding the sample's
`data` (64x64 float32, 16 KiB, contiguous; --side 256 makes it 256 KiB, large enough to be
cached) and its scalar `label` (8 files x 5,000 samples, 690 MB). The loop is theirs: a map-style
Dataset that opens each file once per process and reads `f[key]["data"][()]` and
`f[key]["label"][()]`, DataLoader(shuffle=True, batch_size=32, num_workers=2), every file written
back and dropped from the page cache before every epoch.
Runs, in this order in every round:

  native      no connector variables
  connector   the connector's defaults, no schedule (small contiguous datasets are not cached:
              PRESCIENT_MIN_DATASET_BYTES=128KiB)
  cache-all   PRESCIENT_MIN_DATASET_BYTES=0: every dataset prepared, registered and cached
  follow      PRESCIENT_FOLLOW=1 with python/ on PYTHONPATH

It prints one line per run and epoch (seconds, CPU seconds of the job's processes, the ratio of
the round's native epoch to the run's), then the median ratio per variant and epoch.
Every sample's bytes are checked (its data holds its index). --stats-dir keeps each Prescient
process's statistics file there (PRESCIENT_STATS), named by round, run and pid. --cache-size sets
PRESCIENT_CACHE_SIZE for every Prescient run (a cache smaller than the data: every epoch mixes hits
and misses).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FILES, PER_FILE = 8, 5000
VARIANTS = ("native", "connector", "cache-all", "follow")

CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[4])
import h5py
from torch.utils.data import DataLoader, Dataset
from per_sample import timed_epochs

class PerSample(Dataset):
    def __init__(self, paths, per_file):
        self.paths, self.per_file, self.files = paths, per_file, {}
    def __len__(self):
        return len(self.paths) * self.per_file
    def __getitem__(self, i):
        f = self.files.get(i // self.per_file)
        if f is None:
            f = self.files[i // self.per_file] = h5py.File(self.paths[i // self.per_file], "r")
        g = f[f"s{i:06d}"]
        return g["data"][()], g["label"][()]

paths, epochs = json.loads(sys.argv[1]), int(sys.argv[2])
per_file = int(sys.argv[5])
loader = DataLoader(PerSample(paths, per_file), batch_size=32, shuffle=True, num_workers=2)
json.dump(timed_epochs(loader, paths, epochs), open(sys.argv[3], "w"))
"""


def timed_epochs(loader, paths, epochs):
    """Runs `epochs` epochs of `loader` (batches of samples whose first element holds the label
    beside them), `paths` dropped from the page cache before each: per epoch its seconds, the CPU
    seconds of the process and its finished children (the DataLoader's workers), and how many
    samples were wrong."""
    import time
    import storage
    out = []
    for _ in range(epochs):
        storage.drop_from_page_cache(paths)
        t0, c0 = time.perf_counter(), os.times()
        wrong = 0
        for x, y in loader:
            wrong += int((x[:, 0, 0].long() != y).sum())
        c1 = os.times()
        cpu = sum(getattr(c1, k) - getattr(c0, k)
                  for k in ("user", "system", "children_user", "children_system"))
        out.append({"s": time.perf_counter() - t0, "cpu_s": cpu, "wrong": wrong})
    return out


def generate(workdir, side, per_file):
    """The files, once (a file is written under a temporary name and renamed when complete)."""
    import h5py
    import numpy as np
    directory = os.path.join(workdir, f"side{side}-per{per_file}")
    os.makedirs(directory, exist_ok=True)
    paths = []
    for f in range(FILES):
        path = os.path.join(directory, f"part{f}.h5")
        paths.append(path)
        if os.path.exists(path):
            continue
        with h5py.File(path + ".tmp", "w") as h:
            for j in range(per_file):
                i = f * per_file + j
                g = h.create_group(f"s{i:06d}")
                g["data"] = np.full((side, side), i, dtype="<f4")
                g["label"] = np.int64(i)
        os.rename(path + ".tmp", path)
    return paths


def variant_env(variant, plugin_dir, run_id, stats_dir=None, cache_size=None, settings=()):
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("PRESCIENT_") or k.startswith("HDF5_VOL") or k == "HDF5_PLUGIN_PATH")}
    if variant == "native":
        return env
    env.update({"HDF5_PLUGIN_PATH": plugin_dir, "HDF5_VOL_CONNECTOR": "prescient",
                "PRESCIENT_NODE_ID": f"per-sample-{os.getpid()}-{run_id}"})
    if stats_dir:
        env["PRESCIENT_STATS"] = os.path.join(stats_dir, f"{run_id}-%p.json")
    if cache_size:
        env["PRESCIENT_CACHE_SIZE"] = cache_size
    env.update(settings)
    if variant == "cache-all":
        env["PRESCIENT_MIN_DATASET_BYTES"] = "0"
    elif variant == "follow":
        env["PRESCIENT_FOLLOW"] = "1"
        env["PYTHONPATH"] = os.path.join(REPO, "python") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def alternation_arguments(doc, variants, data_name):
    """The arguments of a benchmark that alternates runs of a loader (`alternate`): rounds,
    epochs, variants, the plugin, where its data and statistics go."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--variants", nargs="+", default=list(variants), choices=variants)
    p.add_argument("--plugin-dir", default=os.path.join(REPO, "build", "bench", "plugins"),
                   help="where libprescient_vol.so is (build/bench/plugins)")
    p.add_argument("--workdir", default=os.path.join(REPO, "build", "bench-data", data_name))
    p.add_argument("--stats-dir", help="keep the Prescient runs' statistics files here")
    return p


def check_alternation_arguments(args, tag):
    """Stops when a Prescient variant has no plugin to load; makes the statistics directory."""
    if any(v != "native" for v in args.variants) and not os.path.isfile(
            os.path.join(args.plugin_dir, "libprescient_vol.so")):
        raise SystemExit(f"{tag}: no libprescient_vol.so in {args.plugin_dir} (--plugin-dir)")
    if args.stats_dir:
        os.makedirs(args.stats_dir, exist_ok=True)


def main():
    p = alternation_arguments(__doc__, VARIANTS, "per-sample")
    p.add_argument("--side", type=int, default=64, help="data is SIDE x SIDE float32 (64)")
    p.add_argument("--per-file", type=int, default=PER_FILE, help=f"samples per file ({PER_FILE})")
    p.add_argument("--cache-size", help="PRESCIENT_CACHE_SIZE of the Prescient runs (default: the "
                   "connector's, which holds the data)")
    p.add_argument("--setting", action="append", default=[], metavar="PRESCIENT_NAME=VALUE",
                   help="a setting of every Prescient run (repeat for more; e.g. "
                   "PRESCIENT_PREFETCH=0)")
    args = p.parse_args()
    settings = dict(s.split("=", 1) for s in args.setting)
    if any(not k.startswith("PRESCIENT_") for k in settings):
        p.error("--setting takes PRESCIENT_NAME=VALUE")
    check_alternation_arguments(args, "per-sample")
    paths = generate(args.workdir, args.side, args.per_file)
    alternate(CHILD, [json.dumps(paths), str(args.epochs)],
              [HERE, str(args.per_file)], args.variants, args.rounds, args.epochs, "per-sample",
              lambda r, v: variant_env(v, args.plugin_dir, f"{r}{v}", args.stats_dir,
                                       args.cache_size, settings))


def alternate(child, args_before_out, args_after_out, variants, rounds, epochs, tag, env_of):
    """Runs `child` once per variant in every round (its arguments: `args_before_out`, the output
    file, `args_after_out`; its environment `env_of(round, variant)`), checks that no run read a
    wrong sample, and prints every epoch's time and its ratio to the round's native epoch, then
    the median ratio per variant and epoch."""
    ratios = {}
    print("| round | run | epoch | s | CPU s | native / run |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix=f"{tag}-") as tmp:
        for r in range(rounds):
            results = {}
            for v in variants:
                out = os.path.join(tmp, f"{r}-{v}.json")
                subprocess.run([sys.executable, "-c", child, *args_before_out, out, *args_after_out],
                               env=env_of(r, v), check=True)
                results[v] = json.load(open(out))
                if any(e["wrong"] for e in results[v]):
                    raise SystemExit(f"{tag}: {v} read wrong samples")
            for v, runs in results.items():
                for e, epoch in enumerate(runs):
                    native = results.get("native")
                    ratio = native[e]["s"] / epoch["s"] if native else float("nan")
                    ratios.setdefault((v, e), []).append(ratio)
                    print(f"| {r} | {v} | {e} | {epoch['s']:.2f} | {epoch['cpu_s']:.2f} | "
                          f"{ratio:.2f} |", flush=True)
    print("\n| run | " + " | ".join(f"epoch {e}" for e in range(epochs)) + " |")
    print("|---|" + "---|" * epochs)
    for v in variants:
        if v != "native":
            print(f"| {v} | " + " | ".join(f"{statistics.median(ratios[(v, e)]):.2f}"
                                          for e in range(epochs)) + " |")

if __name__ == "__main__":
    main()

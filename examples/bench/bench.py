"""Prescient end-to-end benchmark (issue 4, section 6); run through examples/bench/run.

For each of two datasets (contiguous, gzip level 1 in chunks of 32 samples) it
measures, side by side in one run (keys as in results.json):

  scan            one sequential cold read of the file in 8 MiB blocks (3 passes, median)
  native-1p       native h5py, one process, one sample at a time in DistributedSampler order, cold
  native-pc       the same with the file in the page cache (the warm reference)
  native-dl       native h5py behind a DataLoader with 2 workers, cold
  pre-lru         Prescient without a schedule (LRU node cache), DataLoader with 2 workers
  pre-sched       Prescient with the clairvoyant schedule (prefetch + next-use eviction), 2 workers
  pre-1p          Prescient with the schedule, one process (read time without worker contention)

Prescient runs use a node cache that holds the whole dataset, or with "-q" a
quarter of it; "+c" runs sleep per batch for the native storage time per batch
(measured first: one process, contiguous file, cold). Every epoch starts with
the file made cold (fdatasync + POSIX_FADV_DONTNEED); the node cache in
/dev/shm is what survives from one epoch to the next. The simulator
(`prescient-schedule simulate`, policy lru or belady like the run) predicts the
storage reads of every Prescient run for the same schedule and cache rows.

Native runs on gzip data decode a whole 2 MiB chunk per sample: they read only
the first --native-gzip-samples samples of an epoch and their epoch time is
extrapolated (marked "~").

Prints the tables, checks the targets, and writes results.json, output.txt (this output) and
the plots (examples/report) into --out.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "report"))
import datasets  # noqa: E402
import plots  # noqa: E402  (examples/report/plots.py)
import prediction  # noqa: E402
import segment_geometry  # noqa: E402
import stats_merge  # noqa: E402
from storage import machine_state  # noqa: E402

BATCH = 32
WORKERS = 2
SEED = 42


_LOG_FILE = None


def log(msg):
    print(msg, flush=True)
    if _LOG_FILE:
        with open(_LOG_FILE, "a") as f:
            f.write(msg + "\n")


class Bench:
    def __init__(self, args):
        self.args = args
        self.stats_root = os.path.join(args.out, "stats")
        self.results = {"config": {}, "scan": {}, "runs": [], "simulations": {}, "targets": []}
        self.counter = 0

    # -- one loader run ---------------------------------------------------------------------------
    def run(self, kind, key, label, *, connector=False, schedule=None, cache_bytes=None, workers=WORKERS,
            epochs=1, compute_s=0.0, limit=None, prewarm=False, cache_rows=None, policy=None,
            persistent=False):
        a = self.args
        self.counter += 1
        run_dir = os.path.join(self.stats_root, f"{kind}-{key}")
        shutil.rmtree(run_dir, ignore_errors=True)
        os.makedirs(run_dir)
        env = {k: v for k, v in os.environ.items() if not (k.startswith("PRESCIENT_") or k.startswith("HDF5_VOL"))}
        env["PRESCIENT_IN_ENV"] = "1"
        stats_glob = None
        node = None
        if connector:
            node = f"bench-{os.getpid()}-{self.counter}"
            env.update(HDF5_PLUGIN_PATH=a.plugin_dir, HDF5_VOL_CONNECTOR="prescient under_vol=0;under_info={}",
                       PRESCIENT_STATS=os.path.join(run_dir, "stats.json"), PRESCIENT_NODE_ID=node,
                       PRESCIENT_CACHE_SIZE=str(cache_bytes), PRESCIENT_LOG="warn")
            if schedule:
                env["PRESCIENT_SCHEDULE"] = schedule
            env.update(item.split("=", 1) for item in a.connector_env)
            stats_glob = os.path.join(run_dir, "stats*.json")
        config = {"path": self.files[kind], "dataset": datasets.NAME, "workers": workers, "batch_size": BATCH,
                  "epochs": epochs, "compute_s": compute_s, "limit_samples": limit, "prewarm": prewarm,
                  "sums": self.files["sums"], "seed": SEED, "stats_glob": stats_glob,
                  "persistent_workers": persistent}
        config_path = os.path.join(run_dir, "config.json")
        result_path = os.path.join(run_dir, "result.json")
        json.dump(config, open(config_path, "w"), indent=1)
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, os.path.join(HERE, "loader.py"), config_path, result_path], env=env,
                              capture_output=True, text=True)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            sys.stderr.write(proc.stdout + proc.stderr)
            sys.exit(f"bench: the loader failed in run {kind}/{key}")
        warnings = [line for line in proc.stderr.splitlines() if line.strip()]
        result = json.load(open(result_path))
        leftover = []
        if node:
            leftover = [p for p in os.listdir("/dev/shm") if node in p]
        merged = stats_merge.merge_files(stats_merge.expand(stats_glob)) if stats_glob else None
        run = {"kind": kind, "key": key, "label": label, "connector": connector, "schedule": bool(schedule),
               "workers": workers, "persistent": persistent, "compute_s": compute_s, "limit": limit,
               "prewarm": prewarm,
               "cache_bytes": cache_bytes, "cache_rows": cache_rows, "policy": policy, "wall_s": wall,
               "warnings": warnings[:20], "shm_leftover": leftover, "stats_dir": run_dir,
               "epochs": self.epoch_rows(result, merged, limit)}
        if merged:
            run["stats_totals"] = merged["totals"]
            run["stats_processes"] = merged["processes"]
            run["per_epoch_source"] = "epochs array" if merged["epochs"] else "snapshots at epoch ends"
        self.results["runs"].append(run)
        self.print_run(run)
        for w in warnings[:5]:
            log(f"    stderr: {w}")
        if leftover:
            log(f"    WARNING: left in /dev/shm after the run: {leftover}")
        return run

    def epoch_rows(self, result, merged, limit):
        rows = []
        previous = {}
        for i, e in enumerate(result["epochs"]):
            row = dict(e)
            row.pop("stats_cumulative", None)
            row["extrapolated"] = bool(limit and e["samples"] < self.n)
            row["epoch_s"] = e["seconds"] * (self.n / e["samples"]) if row["extrapolated"] else e["seconds"]
            row["read_us"] = e["read_ns"] / e["samples"] / 1e3 if e["samples"] else None
            if merged is not None:
                if merged["epochs"]:
                    c = next((b for b in merged["epochs"] if b["epoch"] == e["epoch"]), {})
                else:
                    cumulative = e.get("stats_cumulative") or {}
                    c = stats_merge.difference(cumulative, previous)
                    previous = cumulative
                row["counters"] = {k: v for k, v in c.items() if not isinstance(v, dict)}
            rows.append(row)
        return rows

    # -- output ---------------------------------------------------------------------------------------
    HEADER = (f"{'dataset':<10} {'run':<30} {'ep':>2} {'time s':>8} {'read us':>8} {'wait s':>7} {'stall s':>7} "
              f"{'hit %':>6} {'from stor':>9} {'predicted':>9} {'ratio':>6} {'stor ops':>8} {'stor MiB':>8} "
              f"{'dev ops':>7} {'dev MiB':>8}")

    def print_run(self, run):
        for e in run["epochs"]:
            log(self.format_row(run, e))

    def format_row(self, run, e):
        c = e.get("counters")
        t = f"{'~' if e['extrapolated'] else ''}{e['epoch_s']:.2f}"
        read = f"{e['read_us']:.1f}" if e["read_us"] is not None else "-"
        if c is not None:
            hr = stats_merge.hit_rate(c)
            hit = f"{100 * hr:.1f}" if hr is not None else "-"
            stall = f"{c.get('stall_ns', 0) / 1e9:.3f}"
            stor = f"{stats_merge.rows_from_storage(c)}"
            ops = f"{c.get('storage_reads', 0)}"
            mib = f"{c.get('storage_bytes', 0) / 2**20:.0f}"
        else:
            hit = stall = stor = ops = mib = "-"
        pred = e.get("predicted_storage")
        predicted = f"{pred}" if pred is not None else "-"
        ratio = f"{stats_merge.rows_from_storage(c) / pred:.3f}" if (pred and c is not None) else "-"
        return (f"{run['kind']:<10} {run['label']:<30} {e['epoch']:>2} {t:>8} {read:>8} {e['wait_s']:>7.2f} "
                f"{stall:>7} {hit:>6} {stor:>9} {predicted:>9} {ratio:>6} {ops:>8} {mib:>8} "
                f"{e['device_reads']:>7} {e['device_bytes'] / 2**20:>8.0f}")

    # -- the whole benchmark ------------------------------------------------------------------------
    def schedule(self, kind, workers):
        path = os.path.join(self.args.out, f"{kind}-w{workers}.sched")
        subprocess.run([self.args.tool, "generate", "--source", "torch-distributed", "--samples", str(self.n),
                        "--epochs", str(self.args.epochs), "--workers", str(workers), "--batch-size", str(BATCH),
                        "--seed", str(SEED), "--dataset", f"{self.files[kind]}:{datasets.NAME}", "--row-bytes",
                        str(datasets.ROW_BYTES), "--output", path, "--quiet"], check=True)
        return path

    def simulate(self, kind, sched, rows):
        sim = prediction.simulate(self.args.tool, sched, rows, ("lru", "belady"), datasets.ROW_BYTES)
        self.results["simulations"][f"{kind}-{rows}"] = sim
        return sim

    def attach_prediction(self, run, sim):
        pol = sim["policies"][run["policy"]]
        for e in run["epochs"]:
            if e["epoch"] < len(pol["epochs"]):
                e["predicted_storage"] = pol["epochs"][e["epoch"]]["storage"]
        log(f"    simulator ({run['policy']}, cache {sim['cache_samples']} samples): storage reads per epoch "
            f"{[x['storage'] for x in pol['epochs']]}")

    # Which runs each dataset gets. gzip with a quarter cache costs minutes per epoch at 20,000
    # samples (every chunk is decoded several times per epoch), so the default does it for two
    # epochs and leaves out its LRU and compute variants (--all includes them).
    FULL = {
        "contiguous": ["native-1p", "native-pc", "native-dl", "native-dl+c", "native-dl-pc+c", "native-dl-pc-pw",
                       "pre-lru", "pre-sched", "pre-sched-pw", "pre-1p", "pre-lru-q", "pre-sched-q", "pre-1p-q", "pre-lru+c", "pre-sched+c", "pre-sched-q+c", "pre-1p+c",
                       "pre-1p-q+c"],
        "gzip": ["native-1p", "native-pc", "native-dl", "native-dl+c", "pre-lru", "pre-sched", "pre-sched-pw", "pre-1p",
                 "pre-sched-q", "pre-lru+c", "pre-sched+c", "pre-1p+c"],
    }
    QUICK = {
        "contiguous": ["native-1p", "native-pc", "native-dl", "native-dl-pc+c", "pre-lru", "pre-sched", "pre-1p",
                       "pre-sched-q", "pre-sched+c", "pre-1p+c"],
        "gzip": ["native-1p", "native-pc", "pre-sched", "pre-1p", "pre-1p+c"],
    }
    EXTRA = ["pre-lru-q", "pre-sched-q+c", "pre-1p-q"]

    def dataset(self, kind):
        a = self.args
        n = self.n
        log(f"\n== {kind}: {os.path.getsize(self.files[kind]) / 2**20:.0f} MiB, {n} samples ==")
        scans = [datasets.sequential_scan(self.files[kind])[0] for _ in range(3)]
        scan = statistics.median(scans)
        self.results["scan"][kind] = {"passes_s": scans, "median_s": scan,
                                      "bytes": os.path.getsize(self.files[kind])}
        log(f"sequential cold scan (8 MiB reads): median {scan:.2f} s of {[round(s, 2) for s in scans]} "
            f"({os.path.getsize(self.files[kind]) / scan / 1e6:.0f} MB/s)")
        log(self.HEADER)
        keys = (self.QUICK if a.quick else self.FULL)[kind]
        if a.all:
            keys = keys + [k for k in self.EXTRA if k not in keys]
        if a.only:
            keys = [k for k in keys if k in a.only] + [k for k in a.only if k not in keys]
        limit = a.native_gzip_samples if kind == "gzip" else None
        native_epochs = 1 if kind == "gzip" or a.quick else 2
        compute = self.compute_s
        natives = {
            "native-1p": ("native h5py, 1 process", dict(workers=0, epochs=native_epochs)),
            "native-pc": ("native h5py, 1 proc, page cache", dict(workers=0, epochs=1, prewarm=True)),
            "native-dl": ("native, DataLoader 2w", dict(epochs=native_epochs)),
            "native-dl+c": ("native, DataLoader 2w +c", dict(epochs=1, compute_s=compute)),
            "native-dl-pc+c": ("native, DataLoader 2w, page cache +c", dict(epochs=1, compute_s=compute,
                                                                           prewarm=True)),
            "native-dl-pc-pw": ("native, DataLoader 2w persistent, page cache",
                                dict(epochs=2, prewarm=True, persistent=True)),
        }
        for key in keys:
            if key in natives:
                label, kwargs = natives[key]
                self.run(kind, key, label, limit=limit, **kwargs)

        sched_w = self.schedule(kind, WORKERS)
        sched_1 = self.schedule(kind, 0)
        full_bytes = segment_geometry.segment_bytes_for_rows(n + 64, datasets.ROW_BYTES)
        quarter_bytes = segment_geometry.segment_bytes_for_rows(n // 4, datasets.ROW_BYTES)
        held = {"full": segment_geometry.rows_held(full_bytes, datasets.ROW_BYTES),
                "quarter": segment_geometry.rows_held(quarter_bytes, datasets.ROW_BYTES)}
        size = {"full": full_bytes, "quarter": quarter_bytes}
        sims = {}
        E = a.epochs
        E_gzip_quarter = min(E, 2) if not a.all else E
        prescient = {
            # key: (label, schedule?, cache, workers, compute?)
            "pre-lru": ("Prescient LRU, full", False, "full", WORKERS, False),
            "pre-sched": ("Prescient sched, full", True, "full", WORKERS, False),
            "pre-sched-pw": ("Prescient sched, full, persistent w", True, "full", WORKERS, False),
            "pre-1p": ("Prescient sched, full, 1 proc", True, "full", 0, False),
            "pre-lru-q": ("Prescient LRU, quarter", False, "quarter", WORKERS, False),
            "pre-sched-q": ("Prescient sched, quarter", True, "quarter", WORKERS, False),
            "pre-1p-q": ("Prescient sched, quarter, 1 proc", True, "quarter", 0, False),
            "pre-lru+c": ("Prescient LRU, full +c", False, "full", WORKERS, True),
            "pre-sched+c": ("Prescient sched, full +c", True, "full", WORKERS, True),
            "pre-sched-q+c": ("Prescient sched, quarter +c", True, "quarter", WORKERS, True),
            "pre-1p+c": ("Prescient sched, full, 1 proc +c", True, "full", 0, True),
            "pre-1p-q+c": ("Prescient sched, quarter, 1 proc +c", True, "quarter", 0, True),
        }
        for key in keys:
            if key not in prescient:
                continue
            label, scheduled, cache, workers, with_compute = prescient[key]
            if cache not in sims:
                sims[cache] = self.simulate(kind, sched_w, held[cache])
            epochs = E_gzip_quarter if (kind == "gzip" and cache == "quarter") else E
            run = self.run(kind, key, label, connector=True, epochs=epochs, workers=workers,
                           schedule=(sched_w if workers else sched_1) if scheduled else None,
                           cache_bytes=size[cache], cache_rows=held[cache], compute_s=compute if with_compute else 0.0,
                           policy=prediction.CONNECTOR_POLICY[scheduled], persistent=key.endswith("-pw"))
            self.attach_prediction(run, sims[cache])
            plots.run_plots(run, os.path.join(a.out, "plots", f"{kind}-{key}"))

    def main(self):
        a = self.args
        os.makedirs(a.out, exist_ok=True)
        self.results["machine_before"] = machine_state()
        log(f"bench: machine {self.results['machine_before']}")
        self.files = datasets.ensure(a.workdir, a.samples, log)
        self.n = a.samples
        if self.files["generated_s"]:
            log(f"bench: datasets generated in {self.files['generated_s']:.0f} s")
        self.results["config"] = {"samples": a.samples, "epochs": a.epochs, "batch": BATCH, "workers": WORKERS,
                                  "seed": SEED, "row_bytes": datasets.ROW_BYTES, "quick": a.quick,
                                  "native_gzip_samples": a.native_gzip_samples,
                                  "sizes": {k: os.path.getsize(self.files[k]) for k in ("contiguous", "gzip")}}
        # The compute time per batch: the native storage time per batch, measured first on the
        # contiguous file (one process, cold, one sample at a time).
        probe = self.run("contiguous", "probe", "native probe (compute time)", workers=0, epochs=1)
        self.results["runs"].pop()
        e = probe["epochs"][0]
        self.compute_s = a.compute_ms / 1e3 if a.compute_ms is not None else e["seconds"] / e["batches"]
        self.results["config"]["compute_s_per_batch"] = self.compute_s
        log(f"bench: compute per batch ('+c' runs) = native storage time per batch = {self.compute_s * 1e3:.2f} ms")
        for kind in a.datasets:
            self.dataset(kind)
        self.results["machine_after"] = machine_state()
        import targets  # noqa: E402
        self.results["targets"] = targets.evaluate(self.results)
        log("\n== targets ==")
        for t in self.results["targets"]:
            log(f"[{t['verdict']}] {t['name']}: {t['detail']}")
        json.dump(self.results, open(os.path.join(a.out, "results.json"), "w"), indent=1)
        plots.bench_plots(self.results, os.path.join(a.out, "plots"))
        log(f"\nbench: results in {a.out}/results.json, plots in {a.out}/plots/")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plugin-dir", required=True, help="directory holding the connector plugin (given by the "
                        "run script)")
    parser.add_argument("--tool", required=True, help="the prescient-schedule executable")
    parser.add_argument("--workdir", required=True, help="where the datasets live")
    parser.add_argument("--out", help="results directory (default: WORKDIR/results)")
    parser.add_argument("--quick", action="store_true", help="4,000 samples, 128 native gzip samples per epoch, 2 epochs")
    parser.add_argument("--samples", type=int, help="samples per dataset (default 20,000, --quick 4,000)")
    parser.add_argument("--epochs", type=int, help="epochs of the Prescient runs (default 3, --quick 2)")
    parser.add_argument("--native-gzip-samples", type=int, help="samples per native gzip epoch, the rest extrapolated (default 1024, --quick 128)")
    parser.add_argument("--compute-ms", type=float, help="override the measured compute time per batch")
    parser.add_argument("--datasets", nargs="+", default=["contiguous", "gzip"], choices=["contiguous", "gzip"],
                        help="datasets to measure (default both)")
    parser.add_argument("--only", nargs="+", help="runs to do (keys, e.g. native-pc pre-sched pre-sched-q)")
    parser.add_argument("--all", action="store_true", help="also the slow extra runs (gzip quarter LRU, ...)")
    parser.add_argument("--connector-env", nargs="+", default=[], metavar="VAR=VALUE",
                        help="extra settings for the Prescient runs (e.g. PRESCIENT_IO_THREADS=4)")
    parser.add_argument("--keep", action="store_true", help="keep the datasets for the next run")
    args = parser.parse_args()
    if args.samples is None:
        args.samples = 4000 if args.quick else 20000
    if args.native_gzip_samples is None:
        args.native_gzip_samples = 128 if args.quick else 1024
    if args.epochs is None:
        args.epochs = 2 if args.quick else 3
    args.out = args.out or os.path.join(args.workdir, "results")
    os.makedirs(args.out, exist_ok=True)
    global _LOG_FILE
    _LOG_FILE = os.path.join(args.out, "output.txt")
    open(_LOG_FILE, "w").close()
    started = time.perf_counter()
    try:
        Bench(args).main()
    finally:
        if not args.keep:
            for p in list(datasets.paths(args.workdir).values()) + [os.path.join(args.workdir, "sums.npy"),
                                                                   os.path.join(args.workdir, "datasets.json")]:
                if os.path.exists(p):
                    os.remove(p)
    log(f"bench: total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

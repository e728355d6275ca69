"""One run of the loop (R ranks at once), native or through Prescient, turned into one record.

A run is described by a `Run` value; `Runner.run(spec)` writes the loop's configuration, gives the
ranks their environment (native: no connector variables at all; Prescient: the plugin, a node id of
its own, its statistics files, the cache size, the schedule, the prefetch switch), launches them
(ranks.py), merges what the ranks and the connector's statistics files say, removes the run's
shared segment if one is left, and returns the record (also appended to `Runner.records`).
"""

import dataclasses
import json
import os
import shutil
import time

import cachesize
import counters
import ranks as ranks_mod

import stats_merge  # examples/report (counters.py put it on the path)

# The Python package of the run-time follower (PRESCIENT_FOLLOW).
PYTHON_PACKAGE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")


@dataclasses.dataclass
class Run:
    key: str                    # unique within a suite: the run's directory name
    label: str                  # what the tables call it
    workload: object            # workloads.Workload
    mode: str = "sample"        # sample | batch | slices | rows (loop.py)
    sampler: str = "distributed"  # distributed, or one of loop.PUBLIC_ORDERS (one rank)
    ranks: int = 1
    workers: int = 2
    persistent: bool = False
    batch: int = 32
    epochs: int = 3
    seed: int = 42
    compute_s: float = 0.0
    slowdown: tuple = (1.0,)
    connector: bool = False
    plugin_dir: str = None      # the connector build's plugin directory; None = the Runner's
    connector_env: dict = None  # connector variables of this run, over the Runner's
    cache_bytes: int = None     # PRESCIENT_CACHE_SIZE; None = the connector's default
    prefetch: bool = True
    schedule: str = None        # PRESCIENT_SCHEDULE
    follow: bool = False        # PRESCIENT_FOLLOW=1 with python/ on PYTHONPATH (no schedule file)
    schedule_note: str = ""
    rdcc_nbytes: int = None     # native chunk cache (h5py.File(rdcc_nbytes=...)); None = h5py's 1 MiB
    main_opens: bool = False    # the main process opens the first file once for a length (loop.py)
    cold: bool = True           # the workload's files are dropped from the page cache before every epoch
    tags: dict = dataclasses.field(default_factory=dict)  # suite-specific facts carried into the record


class Runner:
    def __init__(self, *, plugin_dir, out_dir, timeout_s, connector_env=(), log=print):
        self.plugin_dir = plugin_dir
        self.out_dir = out_dir
        self.timeout_s = timeout_s
        self.connector_env = dict(item.split("=", 1) for item in connector_env)
        self.log = log
        self.records = []
        self.counter = 0

    def base_env(self):
        env = {k: v for k, v in os.environ.items()
               if not (k.startswith("PRESCIENT_") or k.startswith("HDF5_VOL") or k == "HDF5_PLUGIN_PATH")}
        env["PRESCIENT_IN_ENV"] = os.environ.get("PRESCIENT_IN_ENV", "1")
        return env

    def run(self, spec):
        self.counter += 1
        run_dir = os.path.join(self.out_dir, "runs", spec.key)
        stats_dir = os.path.join(run_dir, "stats")
        shutil.rmtree(run_dir, ignore_errors=True)
        os.makedirs(stats_dir)
        w = spec.workload
        base = self.base_env()
        node = None
        if spec.connector:
            node = f"bench-{os.getpid()}-{self.counter}"
            base.update(HDF5_PLUGIN_PATH=spec.plugin_dir or self.plugin_dir, HDF5_VOL_CONNECTOR="prescient under_vol=0;under_info={}",
                        PRESCIENT_NODE_ID=node, PRESCIENT_LOG="warn", PRESCIENT_PREFETCH="1" if spec.prefetch else "0")
            if spec.cache_bytes:
                base["PRESCIENT_CACHE_SIZE"] = str(spec.cache_bytes)
            if spec.schedule:
                base["PRESCIENT_SCHEDULE"] = spec.schedule
            if spec.follow:
                base["PRESCIENT_FOLLOW"] = "1"
                base["PYTHONPATH"] = os.pathsep.join(p for p in (PYTHON_PACKAGE_DIR, base.get("PYTHONPATH")) if p)
            base.update(self.connector_env)
            base.update(spec.connector_env or {})

        def env_for_rank(r):
            env = ranks_mod.rank_env(base, r, spec.ranks)
            if spec.connector:
                env["PRESCIENT_STATS"] = os.path.join(stats_dir, f"r{r}.json")
            return env

        stats_patterns = lambda r: [os.path.join(stats_dir, f"r{r}.json"), os.path.join(stats_dir, f"r{r}.*.json")]
        config = {
            "workload": {"files": w.files, "field_files": w.field_files, "rows_per_file": w.rows_per_file,
                         "fields": [f.name for f in w.fields],
                         "sums": w.sums_path, "open_per_sample": w.kind == "onefile"},
            "mode": spec.mode, "sampler": spec.sampler, "workers": spec.workers, "persistent_workers": spec.persistent,
            "batch_size": spec.batch, "epochs": spec.epochs, "seed": spec.seed, "shuffle": True,
            "compute_s": spec.compute_s, "slowdown": list(spec.slowdown), "cold": spec.cold,
            "rdcc_nbytes": spec.rdcc_nbytes, "main_opens": spec.main_opens,
        }
        configs = []
        for r in range(spec.ranks):
            c = dict(config, stats_files=stats_patterns(r) if spec.connector else None)
            path = os.path.join(run_dir, f"config-r{r}.json")
            json.dump(c, open(path, "w"), indent=1)
            configs.append(path)

        start = time.perf_counter()
        outcomes, timed_out = ranks_mod.launch(configs, spec.ranks, env_for_rank, run_dir, self.timeout_s)
        wall = time.perf_counter() - start
        leftover = []
        if node:
            leftover = [p for p in os.listdir("/dev/shm") if node in p]
            for p in leftover:  # never leave a segment behind, whatever the run did
                try:
                    os.remove(os.path.join("/dev/shm", p))
                except OSError:
                    pass
            if spec.follow:  # the followed job's orders and learned rows (python/prescient/_context.py)
                shutil.rmtree(os.path.join("/dev/shm", f"prescient-follow-u{os.getuid()}", node), ignore_errors=True)
        record = self.record(spec, outcomes, timed_out, wall, leftover, stats_dir if spec.connector else None)
        self.records.append(record)
        return record

    def record(self, spec, outcomes, timed_out, wall, leftover, stats_dir):
        w = spec.workload
        failed = [o for o in outcomes if o["returncode"] != 0 or o["result"] is None]
        warnings = []
        for o in outcomes:
            warnings += [f"rank {o['rank']}: {line}" for line in o["stderr"].splitlines() if line.strip()]
        final = counters.collect([os.path.join(stats_dir, "*.json")]) if stats_dir else None
        rec = {
            "key": spec.key, "label": spec.label, "workload": w.kind, "workload_info": w.describe(),
            "mode": spec.mode, "ranks": spec.ranks, "workers": spec.workers, "persistent": spec.persistent,
            "batch": spec.batch, "epochs_asked": spec.epochs, "compute_s": spec.compute_s,
            "slowdown": list(spec.slowdown), "connector": spec.connector,
            "plugin_dir": (spec.plugin_dir or self.plugin_dir) if spec.connector else None,
            "connector_env": dict(self.connector_env, **(spec.connector_env or {})) if spec.connector else None,
            "prefetch": spec.prefetch,
            "cache_bytes": spec.cache_bytes,
            "cache_default": spec.connector and not spec.cache_bytes,
            "cache_default_bytes": cachesize.default_segment_bytes() if spec.connector and not spec.cache_bytes
            else None,
            "schedule": spec.schedule, "schedule_note": spec.schedule_note, "rdcc_nbytes": spec.rdcc_nbytes,
            "main_opens": spec.main_opens, "cold": spec.cold,
            "tags": spec.tags, "wall_s": wall, "timed_out": timed_out,
            "failed_ranks": [{"rank": o["rank"], "returncode": o["returncode"]} for o in failed],
            "warnings": warnings[:40], "shm_leftover": leftover, "stats": final,
        }
        rec["epochs"] = self.epochs(spec, outcomes, final)
        rec["wrong_samples"] = sum(e["bad_samples"] for e in rec["epochs"])
        return rec

    def epochs(self, spec, outcomes, final):
        """Per epoch, over the ranks: the slowest rank's time, waits and samples summed, the counters."""
        results = [o["result"] for o in outcomes if o["result"]]
        if not results:
            return []
        count = min(len(r["epochs"]) for r in results)
        per_rank_counters = []
        for r in results:
            previous = {"totals": {}, "fields": {}}
            rows = []
            for e in r["epochs"][:count]:
                snap = e.get("stats_cumulative")
                if snap is None:
                    rows.append(None)
                    continue
                rows.append({"totals": stats_merge.difference(snap["totals"], previous["totals"]),
                             "fields": {name: stats_merge.difference(v, previous["fields"].get(name, {}))
                                        for name, v in snap["fields"].items()}})
                previous = snap
            per_rank_counters.append(rows)
        connector_epochs = {b["epoch"]: b for b in (final or {}).get("epochs") or []}
        out = []
        for i in range(count):
            es = [r["epochs"][i] for r in results]
            row = {"epoch": i, "seconds": max(e["seconds"] for e in es), "per_rank_s": [e["seconds"] for e in es],
                   "wait_s": sum(e["wait_s"] for e in es), "first_wait_s": sum(e["first_wait_s"] for e in es),
                   "samples": sum(e["samples"] for e in es), "bad_samples": sum(e["bad_samples"] for e in es),
                   "device_reads": es[0]["device_reads"], "device_bytes": es[0]["device_bytes"],
                   # Machine-wide, like the device's counters: rank 0's view.
                   "steal_s": es[0].get("steal_s", 0.0),
                   # Every rank's process and its workers of the epoch (loop.py).
                   "cpu_s": sum(e.get("cpu_s", 0.0) for e in es),
                   "cpu_main_s": sum(e.get("cpu_main_s", 0.0) for e in es)}
            if final is not None:
                snaps = [rows[i] for rows in per_rank_counters if rows[i] is not None]
                summed, fields = {}, {}
                for s in snaps:
                    counters.add(summed, s["totals"])
                    for name, v in s["fields"].items():
                        counters.add(fields.setdefault(name, {}), v)
                if i in connector_epochs:
                    row["counters"] = {k: v for k, v in connector_epochs[i].items() if not isinstance(v, dict)}
                    row["counters_source"] = "connector epochs"
                else:
                    row["counters"] = {k: v for k, v in summed.items() if not isinstance(v, dict)}
                    row["counters_source"] = "snapshots at each rank's epoch end"
                row["fields"] = fields  # always from snapshots: the fields block has no epochs
            out.append(row)
        return out

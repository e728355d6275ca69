"""Suite `clairvoyance` (issue 8): storage rows against Belady's optimum, every cache size.

For each run: the schedule of the loop (`prescient-schedule generate --source torch-distributed`,
the loop's ranks, workers, batch and seed), the run through Prescient with that schedule and a cache
of a given share of the dataset, prefetch on or off (PRESCIENT_PREFETCH=0), and the simulator's
Belady figure for the same schedule and the same cache (`prescient-schedule simulate --policy
belady`, the cache's data capacity from segment_geometry.py). The target: the rows of the sample's
main field read from storage (rows_loaded + rows_prefetched + rows_read_around) within 5% of
Belady's figure.

Runs (the default; --quick makes them small):
  imglab   N rows (+ labels), caches of 5, 10, 25, 50, 100% of the dataset, 1 and 4 ranks,
           2 workers per rank, batch 32, prefetch on and off
  cosmo    gzip, one sample per chunk: chunk reads against the chunk-level optimum, which is the
           sample-level one here; onefile and dlio: caches of 25% and 100%, 1 rank, prefetch on/off
  batch    imglab read with ds[batch] = d[sorted(batch)], cache 25%, 1 rank, prefetch on and off
"""

import os

import cachesize
import runner
import schedtool
import workloads


class Suite:
    name = "clairvoyance"

    def __init__(self, args, run, tool, caps, workdir, log):
        self.args, self.runner, self.tool, self.caps, self.workdir, self.log = args, run, tool, caps, workdir, log
        self.sched_dir = os.path.join(args.out, "schedules")
        os.makedirs(self.sched_dir, exist_ok=True)
        self.simulations = {}

    def plan(self):
        """[(workload kind, recipe, mode, shares, ranks list)] of this invocation."""
        a = self.args
        out = []
        if "imglab" in a.clairvoyance_workloads:
            out.append(("imglab", workloads.recipe("imglab", samples=a.imglab_samples), "sample", a.shares, a.ranks))
        others = [0.25, 1.0]
        if "cosmo" in a.clairvoyance_workloads:
            out.append(("cosmo", workloads.recipe("cosmo", files=a.cosmo_files), "sample", others, [1]))
        if "onefile" in a.clairvoyance_workloads:
            out.append(("onefile", workloads.recipe("onefile", files=a.onefile_files), "sample", others, [1]))
        if "dlio" in a.clairvoyance_workloads:
            out.append(("dlio", workloads.recipe("dlio", files=a.dlio_files,
                                                 samples_per_file=a.dlio_samples_per_file), "sample", others, [1]))
        if "batch" in a.clairvoyance_workloads:
            out.append(("imglab", workloads.recipe("imglab", samples=a.imglab_samples), "batch", [0.25], [1]))
        return out

    def schedule(self, w, ranks):
        """(path for the connector or None, note, path for the simulator)."""
        a = self.args
        layout = schedtool.layout_args(samples=w.samples, epochs=a.epochs, ranks=ranks, workers=a.workers,
                                       batch=a.batch, seed=a.seed)
        flags, note = schedtool.map_args(w, self.caps)
        stem = os.path.join(self.sched_dir, f"{w.kind}-{w.recipe.key()}-r{ranks}")
        if flags:
            path = schedtool.generate(self.tool, stem + ".sched", layout, flags, None)
            return path, note, path
        sim = schedtool.generate(self.tool, stem + ".abstract.sched", layout, None, w.fields[0].row_bytes)
        return None, note, sim

    def belady(self, w, sim_schedule, segment):
        cap = cachesize.capacity(segment, w)
        key = f"{os.path.basename(sim_schedule)}@{segment}"
        if key not in self.simulations:
            # In samples as the cache stores them: large fields in whole blocks, small fields (kept
            # a block's worth of rows to an entry) by their share of a block. The simulator's
            # --block-bytes would give every field whole blocks per sample, which the cache does not.
            sim = schedtool.simulate(self.tool, sim_schedule, cache_samples=cap["samples"])
            sim["cache_counted"] = "samples: data blocks / blocks per sample (small fields by their share)"
            sim["capacity"] = cap
            self.simulations[key] = sim
        return self.simulations[key]

    def run(self):
        a = self.args
        for kind, rec, mode, shares, ranks_list in self.plan():
            w = workloads.ensure(os.path.join(self.workdir, "workloads"), rec, log=self.log)
            for ranks in ranks_list:
                sched, note, sim_sched = self.schedule(w, ranks)
                for share in shares:
                    segment = cachesize.segment_for_share(w, share)
                    sim = self.belady(w, sim_sched, segment)
                    for prefetch in a.prefetch:
                        key = f"{kind}-{mode}-r{ranks}-c{round(share * 100)}-{'pf' if prefetch else 'nopf'}"
                        label = (f"{kind}{' batch' if mode == 'batch' else ''}, {ranks} rank"
                                 f"{'s' if ranks > 1 else ''}, cache {share:.0%}, "
                                 f"prefetch {'on' if prefetch else 'off'}")
                        spec = runner.Run(key=key, label=label, workload=w, mode=mode, ranks=ranks, workers=a.workers,
                                          persistent=a.persistent_workers, batch=a.batch, epochs=a.epochs,
                                          seed=a.seed, compute_s=a.compute_ms / 1e3, main_opens=a.main_opens,
                                          cold=not a.warm,
                                          slowdown=tuple(a.slowdown) if ranks > 1 else (1.0,), connector=True,
                                          cache_bytes=segment, prefetch=prefetch, schedule=sched, schedule_note=note,
                                          tags={"share": share, "primary_field": w.fields[0].name,
                                                "other_fields": [f.name for f in w.fields[1:]],
                                                "simulation": sim, "simulated_schedule": sim_sched})
                        record = self.runner.run(spec)
                        self.log(self.one_line(record))
        return {"simulations": self.simulations}

    @staticmethod
    def one_line(record):
        import result_tables

        row = result_tables.clairvoyance_row(record)
        bound = "" if row["exact"] else "<= "
        return (f"  {record['label']}: {bound}{row['field_rows']} {row['field']} rows from storage vs Belady "
                f"{row['belady']} = {bound}{row['ratio']} ({row['verdict']}); matches/mismatches "
                f"{row['matches']}/{row['mismatches']}; "
                f"epochs {row['epoch_times']} s; wrong samples {record['wrong_samples']}"
                + ("; TIMED OUT" if record["timed_out"] else "")
                + (f"; FAILED ranks {record['failed_ranks']}" if record["failed_ranks"] else ""))

"""Suite `never-slower` (issue 9): native h5py and Prescient side by side, every epoch cold (or, with
--warm, every epoch with the files left in the page cache).

Every case runs the same loop natively (no connector variables at all) and through Prescient, in
one invocation, each epoch with every file of the workload made cold first. Prescient runs at the
connector's default cache size (PRESCIENT_CACHE_SIZE unset: min(50% of free /dev/shm, 25% of RAM))
and at a quarter of the data, without a schedule and, where this prescient-schedule can describe the
workload, with one, and (--follow) with the sampler followed at run time (PRESCIENT_FOLLOW=1, no
schedule file; not for imglab-rows, which has no DataLoader). The target: native seconds / Prescient seconds >= 1.0 in every epoch.

Before the first case, one native epoch of it runs as a warm-up that no table judges (--no-warm-up:
none): the first loop of an invocation runs slower on this VM, natively too.

Native runs bracket the Prescient runs: native, Prescient A, native, Prescient B, native, ... and
each Prescient epoch is compared with the mean of the same epoch of the native runs just before and
just after it, so storage and machine drift over the minutes a case takes (up to 40% here) is not
charged to whichever run came last. (cosmo's second baseline, rdcc, runs once.) With --rounds N the
Prescient variants of a case run N times over (each still between native runs), and an epoch is
judged by the median of its N ratios: native epochs of one case vary by 20% and more on this
machine, which a single pair of runs cannot tell from the connector.

--variants narrows the Prescient runs to some of the variants (lru-default, ..., follow-quarter).
--against [DIR] [VAR=VALUE ...] runs every chosen variant also with the connector in DIR (another
build's plugins directory; default this build) and the variables given, alternated with this
build's run in every round and between native runs like it: the tables then have a row "Prescient
(--against), ..." beside each variant's, so a change or a setting is judged against the other in
one run of the machine, e.g.

    examples/bench/run --suite never-slower --keep --follow --rounds 4 --epochs 1 --cases imglab-batch \
        --variants follow-default --against build/bench-before/plugins

Cases:
  imglab-dl      imglab (images + labels), DataLoader with 2 workers, ds[i]: the issue's shape
  imglab-rows    imglab, per-row reads in one process, no DataLoader
  imglab-batch   imglab, ds[batch] = d[sorted(batch)], DataLoader(batch_size=None), 2 workers
  cosmo          gzip, one sample per chunk, 2 workers; two native baselines: h5py's default chunk
                 cache (1 MiB per dataset) and a chunk cache of one chunk per open dataset
                 (h5py.File(..., rdcc_nbytes=<largest chunk>), at least the default)
  onefile        one sample per file, opened, read and closed per sample (the per-open cost), 2 workers
  dlio           records_0, records_1 and labels per sample, 2 workers
  imglab-slices  (on request) imglab, d[i:i+B] for shuffled batch starts, without a schedule (a
                 schedule of samples cannot describe slice reads today)
  pcam           (on request) PatchCamelyon's layout (images and labels in files of their own, as
                 shape-pair) read like imglab-dl, with a schedule whose map keeps each field in its
                 own file (format version 3)
  shape-list, shape-files, shape-batches, shape-blocks
                 (on request) issue 12's four public loader shapes, whose orders no seed-based schedule
                 describes (loop.PUBLIC_ORDERS), followed at run time only (PRESCIENT_FOLLOW=1, default
                 and quarter cache; no --follow needed): an unseeded index table read with
                 DistributedSampler(shuffle=False) (imglab), per-epoch file and in-file permutations over 8
                 files (dlio, 8 files of the imglab row count / 8), BatchSampler(RandomSampler(generator=g))
                 with d[sorted(batch)] reads (imglab), shuffled whole contiguous batches d[b*B:(b+1)*B]
                 (imglab); 2 workers
  shape-concat   (on request) a ConcatDataset of one Dataset per file over the 8 files of shape-files,
                 the files not in sorted order (an unsorted glob's), shuffle=True; followed like the four
  shape-pair     (on request) PatchCamelyon's layout: the images in one file, their labels in another
                 (pcam: imglab's fields apart), DataLoader(shuffle=True), ds[i] reads the image and the
                 label at row i, 2 workers; followed like the four
"""

import collections
import os

import cachesize
import runner
import schedtool
import workloads

CASES = ("imglab-dl", "imglab-rows", "imglab-batch", "cosmo", "onefile", "dlio")
# Issue 12's loader shapes: case -> (mode, loop.py sampler).
SHAPES = {"shape-list": ("sample", "index-table"), "shape-files": ("sample", "file-then-row"),
          "shape-batches": ("batch", "random-batches"), "shape-blocks": ("slices", "shuffled-blocks"),
          "shape-concat": ("sample", "concat-unsorted"), "shape-pair": ("sample", "random")}
EXTRA_CASES = ("imglab-slices", "pcam") + tuple(SHAPES)
# The Prescient variants' keys (suites.py --variants).
VARIANT_KEYS = ("lru-default", "lru-quarter", "sched-default", "sched-quarter", "follow-default", "follow-quarter")
# One Prescient run of a round: `plugin_dir` None is the suite's own build; `env` the connector
# variables it runs with beyond the suite's (--against).
Variant = collections.namedtuple("Variant", "key label share schedule plugin_dir env")
# Stands for "no schedule file: the sampler is followed at run time" among the variants.
FOLLOW = object()


def against_of(items):
    """(plugin directory or None, connector variables) of --against's items: VAR=VALUE items are
    variables, the one other item another build's plugins directory."""
    env = dict(item.split("=", 1) for item in items if "=" in item)
    dirs = [item for item in items if "=" not in item]
    if len(dirs) > 1:
        raise ValueError(f"--against: one plugins directory at most, not {dirs}")
    return (dirs[0] if dirs else None), env


def largest_chunk_bytes(w):
    """Bytes of the largest chunk of any chunked field (one row per chunk here)."""
    return max([f.row_bytes for f in w.fields if f.gzip] or [0])


def warm_up(files):
    """Reads every file once, leaving it in the page cache."""
    for path in files:
        with open(path, "rb", buffering=0) as f:
            while f.read(8 << 20):
                pass


class Suite:
    name = "never-slower"

    def __init__(self, args, run, tool, caps, workdir, log):
        self.args, self.runner, self.tool, self.caps, self.workdir, self.log = args, run, tool, caps, workdir, log
        self.sched_dir = os.path.join(args.out, "schedules")
        os.makedirs(self.sched_dir, exist_ok=True)

    def workload(self, case):
        a = self.args
        if case in ("shape-pair", "pcam"):
            rec = workloads.recipe("pcam", samples=a.ns_samples)
        elif case in ("shape-files", "shape-concat"):
            rec = workloads.recipe("dlio", files=8, samples_per_file=max(1, a.ns_samples // 8))
        elif case.startswith("imglab") or case in SHAPES:
            rec = workloads.recipe("imglab", samples=a.ns_samples)
        elif case == "cosmo":
            rec = workloads.recipe("cosmo", files=a.cosmo_files)
        elif case == "onefile":
            rec = workloads.recipe("onefile", files=a.onefile_files)
        else:
            rec = workloads.recipe("dlio", files=a.dlio_files, samples_per_file=a.dlio_samples_per_file)
        return workloads.ensure(os.path.join(self.workdir, "workloads"), rec, log=self.log)

    @staticmethod
    def shape(case):
        """(mode, workers, sampler) of a case."""
        if case in SHAPES:
            mode, sampler = SHAPES[case]
            return mode, 2, sampler
        mode, workers = {"imglab-rows": ("rows", 0), "imglab-batch": ("batch", 2),
                         "imglab-slices": ("slices", 2)}.get(case, ("sample", 2))
        return mode, workers, "distributed"

    def schedule(self, w, workers):
        a = self.args
        flags, note = schedtool.map_args(w, self.caps)
        if not flags:
            return None, note
        layout = schedtool.layout_args(samples=w.samples, epochs=a.epochs, ranks=1, workers=workers,
                                       batch=a.batch, seed=a.seed)
        path = os.path.join(self.sched_dir, f"{w.kind}-{w.recipe.key()}-w{workers}.sched")
        return schedtool.generate(self.tool, path, layout, flags, None), note

    def run(self):
        a = self.args
        cold = not getattr(a, "warm", False)
        notes = ["cold: before every epoch every file of the workload is written back and dropped from the page "
                 "cache (fdatasync + POSIX_FADV_DONTNEED); only Prescient's node cache in /dev/shm is meant to "
                 "outlive an epoch" if cold else
                 "warm (--warm): every file of the workload is read once before the case and the page cache is "
                 "left alone, so every epoch of every run, native or Prescient, reads its files at memory speed",
                 "native: the same loop with no connector variables (HDF5's native connector), h5py's default "
                 "chunk cache (1 MiB per dataset) unless stated"]
        if getattr(a, "warm_up", False) and a.cases:
            self.warm_up_machine(a.cases[0], cold)
            notes.append("warm-up: one native epoch of the first case ran before every measured run and is "
                         "in no table (--no-warm-up leaves it out)")
        for case in a.cases:
            w = self.workload(case)
            if not cold:
                warm_up(w.files)  # so the first run's first epoch is warm too
            mode, workers, sampler = self.shape(case)
            common = dict(workload=w, mode=mode, sampler=sampler, workers=workers, persistent=a.persistent_workers, batch=a.batch,
                          epochs=a.epochs, seed=a.seed, compute_s=a.compute_ms / 1e3, main_opens=a.main_opens,
                          cold=cold)
            self.log(f"\n-- {case}: {w.samples} samples in {len(w.files)} file(s), "
                     f"{w.bytes / 2**20:.1f} MiB stored, mode {mode}, {workers} workers --")
            baselines = [("native", "native h5py", None)]
            if case == "cosmo":
                rdcc = max(1 << 20, largest_chunk_bytes(w))
                baselines = [("native", "native h5py, default chunk cache (1 MiB)", None),
                             ("native-rdcc", f"native h5py, rdcc_nbytes={rdcc} (one chunk per dataset)", rdcc)]
                notes.append(f"cosmo: a chunk is {largest_chunk_bytes(w):,} bytes (one sample), so h5py's default "
                             f"1 MiB chunk cache already holds one chunk per open dataset; the second baseline "
                             f"(rdcc_nbytes={rdcc:,}) is the same setting stated explicitly and differs only for "
                             f"chunks over 1 MiB")
            def native(bracket):
                """The primary baseline's run number `bracket` (0 before the first Prescient run)."""
                key, label, _ = baselines[0]
                record = self.runner.run(runner.Run(
                    key=f"{case}-{key}" + (f"-{bracket}" if bracket else ""), label=label,
                    tags={"case": case, "role": "baseline", "baseline": key, "bracket": bracket}, **common))
                self.log(self.one_line(record))

            native(0)
            for key, label, rdcc in baselines[1:]:
                record = self.runner.run(runner.Run(key=f"{case}-{key}", label=label, rdcc_nbytes=rdcc,
                                                    tags={"case": case, "role": "baseline", "baseline": key},
                                                    **common))
                self.log(self.one_line(record))
            if case in SHAPES:
                sched, note = None, "no schedule: an order no seed describes"
            else:
                sched, note = ((None, "no schedule: slice reads") if case == "imglab-slices"
                               else self.schedule(w, workers))
            bracket = 0
            rounds = max(1, getattr(a, "rounds", 1) or 1)
            for round_ in range(rounds):
                for v in self.round_variants(case, sched, round_):
                    segment = cachesize.segment_for_share(w, v.share) if v.share else None
                    record = self.runner.run(runner.Run(
                        key=f"{case}-{v.key}" + (f"-r{round_}" if round_ else ""), label=v.label, connector=True,
                        plugin_dir=v.plugin_dir, connector_env=v.env, cache_bytes=segment,
                        schedule=None if v.schedule is FOLLOW else v.schedule, follow=v.schedule is FOLLOW,
                        schedule_note=note if v.schedule and v.schedule is not FOLLOW else "",
                        tags={"case": case, "role": "prescient", "share": v.share, "round": round_,
                              "against": v.env is not None,
                              "baselines": [b[0] for b in baselines], "brackets": [bracket, bracket + 1]},
                        **common))
                    self.log(self.one_line(record))
                    bracket += 1
                    native(bracket)
            if not sched and case != "imglab-slices" and case not in SHAPES:
                self.log(f"  (scheduled runs left out: {note})")
                notes.append(f"{case}: scheduled runs left out ({note})")
        return {"notes": notes}

    def warm_up_machine(self, case, cold):
        """One native epoch of `case`, judged by no table. On this VM the first loop of an invocation
        ran 10-35% longer than the next ones, natively too (2026-12-04: native epochs of 4.55, 4.30
        and 5.81 s before runs of 3.5-4.4 s, with 0.7-1.8 s more CPU), so whichever run came first
        was charged for the machine waking up: the case's first native run and, in its first round,
        the Prescient run after it."""
        a = self.args
        mode, workers, sampler = self.shape(case)
        record = self.runner.run(runner.Run(
            key="warm-up", label="native h5py, warm-up (not compared)", workload=self.workload(case),
            mode=mode, sampler=sampler, workers=workers, batch=a.batch, epochs=1, seed=a.seed,
            main_opens=a.main_opens, cold=cold, tags={"case": case, "role": "warm-up"}))
        self.log(self.one_line(record))

    def round_variants(self, case, sched, round_):
        """The Prescient runs of one round of a case, in the order they run. The variants are the six
        (cache default or a quarter; no schedule, a schedule where there is one, or the sampler followed
        with --follow), or the shapes' two followed ones, narrowed to --variants. With --against every
        variant runs twice, with this build and with the other one, which goes first in odd rounds so
        that neither build always runs right after native."""
        a = self.args
        followed = [("follow-default", "followed sampler, default cache", None, FOLLOW),
                    ("follow-quarter", "followed sampler, quarter cache", 0.25, FOLLOW)]
        if case in SHAPES:
            chosen = followed  # what these cases are for: no schedule can describe their orders
        else:
            chosen = [("lru-default", "no schedule, default cache", None, None),
                      ("lru-quarter", "no schedule, quarter cache", 0.25, None)]
            if sched:
                chosen += [("sched-default", "schedule, default cache", None, sched),
                           ("sched-quarter", "schedule, quarter cache", 0.25, sched)]
            if a.follow and case != "imglab-rows":  # the follower follows a DataLoader
                chosen += followed
        if a.quick:
            chosen = [c for c in chosen if c[0] != "sched-quarter" or case == "imglab-dl"]
        wanted = getattr(a, "variants", None)
        if wanted:
            chosen = [c for c in chosen if c[0] in wanted]
        against = getattr(a, "against", None)
        out = []
        for key, label, share, schedule in chosen:
            this = Variant(key, f"Prescient, {label}", share, schedule, None, None)
            if not against:
                out.append(this)
                continue
            plugin_dir, env = against_of(against)
            other = Variant(f"{key}-against", f"Prescient (--against), {label}", share, schedule, plugin_dir, env)
            out += [other, this] if round_ % 2 else [this, other]
        return out

    @staticmethod
    def one_line(record):
        times = ", ".join(f"{e['seconds']:.2f}" for e in record["epochs"])
        waits = ", ".join(f"{e['wait_s']:.2f}" for e in record["epochs"])
        steals = ", ".join(f"{e.get('steal_s', 0.0):.2f}" for e in record["epochs"])
        requests = ", ".join(f"{e.get('device_reads', 0):,}" for e in record["epochs"])
        cpus = ", ".join(f"{e.get('cpu_s', 0.0):.2f} ({e.get('cpu_main_s', 0.0):.2f} main)"
                         for e in record["epochs"])
        return (f"  {record['label']}: epochs {times} s, loop wait {waits} s, steal {steals} s, cpu {cpus} s, "
                f"device read requests {requests}, wrong samples {record['wrong_samples']}"
                + ("; TIMED OUT" if record["timed_out"] else "")
                + (f"; FAILED ranks {record['failed_ranks']}" if record["failed_ranks"] else ""))

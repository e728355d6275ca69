"""Prescient's benchmark suites (run through examples/bench/run --suite ...).

  classic       the end-to-end benchmark of issue 4 (bench.py; its own options: --suite classic --help)
  clairvoyance  issue 8: storage rows against Belady's optimum at every cache size, 1 and 4 ranks,
                prefetch on and off, for one-file, many-file, one-sample-per-file and several-field
                datasets and for batch reads (clairvoyance.py)
  never-slower  issue 9: native h5py and Prescient side by side, every epoch cold, with and without a
                schedule, at the default cache size and at a quarter of the data (never_slower.py)
  all           classic, then clairvoyance, then never-slower (only the options below apply)

Each suite prints its tables (Markdown, as in RESULTS.md), writes results-SUITE.json,
tables-SUITE.md and output-SUITE.txt into --out, and exits 1 if a run returned a wrong sample,
failed or timed out (missed targets do not change the exit status). Workloads are generated under
WORKDIR/workloads (reused when the recipe is the same) and deleted at the end unless --keep.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# The suites' own processes never load the connector: generating data, schedules and reading
# statistics must not go through it (the runs set their variables themselves).
for _k in [k for k in os.environ if k.startswith("HDF5_VOL") or k.startswith("PRESCIENT_") and k != "PRESCIENT_IN_ENV"]:
    del os.environ[_k]
sys.path.insert(0, HERE)

import clairvoyance  # noqa: E402
import never_slower  # noqa: E402
import runner  # noqa: E402
import schedtool  # noqa: E402
from storage import machine_state  # noqa: E402
import result_tables  # noqa: E402
import workloads  # noqa: E402


class Log:
    def __init__(self, path):
        self.path = path
        open(path, "w").close()

    def __call__(self, msg=""):
        print(msg, flush=True)
        with open(self.path, "a") as f:
            f.write(msg + "\n")


def _floats(text):
    return [float(x) for x in text.split(",") if x]


def _shares(text):
    values = [float(x) / 100 for x in text.split(",") if x]
    if not values or any(not 0 < v <= 1 for v in values):
        raise argparse.ArgumentTypeError("cache shares are percents in (0, 100], e.g. 5,10,25,50,100")
    return values


def _ints(text):
    return [int(x) for x in text.split(",") if x]


def _onoff(text):
    values = {"on": True, "off": False}
    try:
        return [values[x] for x in text.split(",") if x]
    except KeyError:
        raise argparse.ArgumentTypeError("prefetch: a comma list of on and off") from None


def parser():
    p = argparse.ArgumentParser(prog="examples/bench/run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", choices=["classic", "clairvoyance", "never-slower", "all"], default="classic",
                   help="which suite to run (default classic; see above)")
    p.add_argument("--plugin-dir", required=True, help="directory holding the connector plugin (the run script "
                   "passes its Release build's)")
    p.add_argument("--tool", required=True, help="the prescient-schedule executable (the run script passes it)")
    p.add_argument("--workdir", required=True, help="where workloads are generated (the run script passes "
                   "build/bench-data)")
    p.add_argument("--out", help="results directory (default WORKDIR/results)")
    p.add_argument("--quick", action="store_true",
                   help="small sizes for a smoke run: every suite in a few minutes (numbers not for RESULTS.md)")
    p.add_argument("--keep", action="store_true", help="keep the generated workloads for the next run")
    p.add_argument("--run-timeout", type=float, help="seconds one run (all its ranks) may take before it is ended "
                   "(default 1800, --quick 300)")
    p.add_argument("--connector-env", nargs="+", default=[], metavar="VAR=VALUE",
                   help="extra settings for every Prescient run (e.g. PRESCIENT_IO_THREADS=4)")
    g = p.add_argument_group("the loop (both suites)")
    g.add_argument("--epochs", type=int, help="epochs per run (default 3, --quick 2)")
    g.add_argument("--batch", type=int, default=32, help="batch size per rank (default 32)")
    g.add_argument("--seed", type=int, default=42, help="DistributedSampler seed (default 42)")
    g.add_argument("--workers", type=int, default=2, help="DataLoader workers per rank in the clairvoyance suite "
                   "(default 2; never-slower's cases fix their own)")
    g.add_argument("--persistent-workers", action="store_true",
                   help="DataLoader(persistent_workers=True) (default: workers forked every epoch, PyTorch's default)")
    g.add_argument("--main-opens", action="store_true",
                   help="the main process opens the first file once before the loop for a length, then closes it "
                   "(what many loaders' __init__ does); default: only the DataLoader workers open files")
    g.add_argument("--warm", action="store_true",
                   help="leave the workload's files in the page cache between epochs (default: every epoch cold, "
                   "its files written back and dropped first); after a first epoch that reads them, storage then "
                   "costs a memory copy, natively and through Prescient alike")
    g.add_argument("--compute-ms", type=float, default=0.0, help="sleep per batch standing in for compute (default 0)")
    g.add_argument("--slowdown", type=_floats, default=[1.0, 1.15, 1.3, 1.5], metavar="F,F,...",
                   help="per-rank slowdown factors of multi-rank runs, rank r gets F[r %% len]: every step of the "
                   "rank lasts F times what it took (default 1,1.15,1.3,1.5: ranks not in lockstep)")
    g = p.add_argument_group("clairvoyance")
    g.add_argument("--shares", type=_shares, help="imglab cache sizes in percent of the dataset "
                   "(default 5,10,25,50,100; --quick 10,100)")
    g.add_argument("--ranks", type=_ints, help="imglab rank counts (default 1,4)")
    g.add_argument("--prefetch", type=_onoff, default=[True, False], metavar="on,off",
                   help="prefetch settings to run (default on,off; off = PRESCIENT_PREFETCH=0)")
    g.add_argument("--imglab-samples", type=int, help="imglab rows in the clairvoyance suite (default 8000, "
                   "--quick 1024)")
    g.add_argument("--clairvoyance-workloads", nargs="+", default=["imglab", "cosmo", "onefile", "dlio", "batch"],
                   choices=["imglab", "cosmo", "onefile", "dlio", "batch"],
                   help="parts of the clairvoyance suite to run (default all; batch = imglab's batch mode)")
    g = p.add_argument_group("never-slower")
    g.add_argument("--cases", nargs="+", choices=list(never_slower.CASES + never_slower.EXTRA_CASES),
                   help=f"cases to run (default: {' '.join(never_slower.CASES)})")
    g.add_argument("--no-warm-up", dest="warm_up", action="store_false",
                   help="measure from the first run on (default: one native epoch of the first case runs "
                   "first and is judged by no table, since the first loop of an invocation runs slower on "
                   "this VM, natively too)")
    g.add_argument("--follow", action="store_true",
                   help="also run each case with the sampler followed at run time (PRESCIENT_FOLLOW=1)")
    g.add_argument("--ns-samples", type=int, help="imglab rows in the never-slower suite (default 40000, "
                   "--quick 2048)")
    g.add_argument("--rounds", type=int, default=1,
                   help="run every Prescient variant of a case this many times, each between native runs, "
                   "and judge each epoch by the median ratio over the rounds (default 1; a round of the "
                   "default cases takes ~12 minutes)")
    g.add_argument("--variants", nargs="+", choices=list(never_slower.VARIANT_KEYS), metavar="VARIANT",
                   help="run only these Prescient variants of each case (of: "
                   f"{' '.join(never_slower.VARIANT_KEYS)}; the follow ones need --follow outside the shape "
                   "cases; default all)")
    g.add_argument("--against", nargs="+", metavar="DIR|VAR=VALUE",
                   help="also run every Prescient variant with the connector in DIR (the plugins directory "
                   "of another build, such as the commit before a change; default this build) and the "
                   "connector variables given, alternated with this build's run in every round, each "
                   "between native runs: a change or a setting judged against the other in one run")
    g = p.add_argument_group("workload sizes (both suites)")
    g.add_argument("--cosmo-files", type=int, help="cosmo files of 128 samples (default 32, --quick 4)")
    g.add_argument("--onefile-files", type=int, help="onefile files, one sample each (default 4000, --quick 300)")
    g.add_argument("--dlio-files", type=int, help="dlio files (default 16, --quick 4)")
    g.add_argument("--dlio-samples-per-file", type=int, help="dlio samples per file (default 256, --quick 64)")
    return p


def defaults(a):
    q = a.quick
    fill = {"epochs": 2 if q else 3, "run_timeout": 300 if q else 1800, "shares": [0.10, 1.0] if q else
            [0.05, 0.10, 0.25, 0.50, 1.0], "ranks": [1, 4], "imglab_samples": 1024 if q else 8000,
            "cases": list(never_slower.CASES), "ns_samples": 2048 if q else 40000, "cosmo_files": 4 if q else 32,
            "onefile_files": 300 if q else 4000, "dlio_files": 4 if q else 16,
            "dlio_samples_per_file": 64 if q else 256}
    for k, v in fill.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    a.out = a.out or os.path.join(a.workdir, "results")
    return a


def run_suite(suite_cls, a, tool, caps, log):
    started = time.perf_counter()
    name = result_tables.output_name(suite_cls.name, a.warm)
    run = runner.Runner(plugin_dir=a.plugin_dir, out_dir=os.path.join(a.out, name),
                        timeout_s=a.run_timeout, connector_env=a.connector_env, log=log)
    log(f"\n== suite {suite_cls.name} ==")
    before = machine_state()
    log(f"bench: machine {before}")
    extra = suite_cls(a, run, tool, caps, a.workdir, log).run()
    results = {"suite": suite_cls.name, "config": {k: v for k, v in vars(a).items()}, "tool": caps,
               "machine_before": before, "machine_after": machine_state(), "runs": run.records,
               "seconds": time.perf_counter() - started}
    results.update(extra)
    path = os.path.join(a.out, f"results-{name}.json")
    json.dump(results, open(path, "w"), indent=1, default=str)
    md = result_tables.markdown(results)
    open(os.path.join(a.out, f"tables-{name}.md"), "w").write("\n".join(md) + "\n")
    log("")
    for line in md:
        log(line)
    log(f"\nbench: {suite_cls.name}: results in {path} ({results['seconds']:.0f} s)")
    return [r for r in run.records if r["wrong_samples"] or r["timed_out"] or r["failed_ranks"]]


def run_classic(a, log):
    """The classic suite (bench.py) with the options that apply to every suite."""
    cmd = [sys.executable, os.path.join(HERE, "bench.py"), "--plugin-dir", a.plugin_dir, "--tool", a.tool,
           "--workdir", a.workdir, "--out", os.path.join(a.out, "classic")]
    cmd += ["--quick"] if a.quick else []
    cmd += ["--keep"] if a.keep else []
    log(f"\n== suite classic ==\n$ {' '.join(cmd)}")
    return subprocess.run(cmd).returncode


def main(argv=None):
    a = defaults(parser().parse_args(argv))
    if a.suite == "classic":
        sys.exit("suites.py: the classic suite is bench.py (examples/bench/run --suite classic runs it)")
    if a.against:
        try:
            never_slower.against_of(a.against)
        except ValueError as e:
            sys.exit(f"suites.py: {e}")
    os.makedirs(a.out, exist_ok=True)
    log = Log(os.path.join(a.out, f"output-{result_tables.output_name(a.suite, a.warm)}.txt"))
    started = time.perf_counter()
    caps = schedtool.capabilities(a.tool)
    log(f"bench: prescient-schedule {a.tool}: sample maps (repeated --dataset) "
        f"{'yes' if caps['sample_maps'] else 'no'}, simulate --block-bytes {'yes' if caps['block_bytes'] else 'no'}")
    status = 0
    problems = []
    try:
        if a.suite == "all":
            status = run_classic(a, log)
        if a.suite in ("clairvoyance", "all"):
            problems += run_suite(clairvoyance.Suite, a, a.tool, caps, log)
        if a.suite in ("never-slower", "all"):
            problems += run_suite(never_slower.Suite, a, a.tool, caps, log)
    finally:
        if not a.keep:
            workloads.remove_all(os.path.join(a.workdir, "workloads"))
    for r in problems:
        log(f"bench: PROBLEM in {r['key']}: wrong samples {r['wrong_samples']}, timed out {r['timed_out']}, "
            f"failed ranks {r['failed_ranks']}")
    log(f"bench: total {time.perf_counter() - started:.0f} s")
    sys.exit(1 if problems or status else 0)


if __name__ == "__main__":
    main()

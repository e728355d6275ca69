"""Prescient run report (run through examples/report/run).

    examples/report/run STATS [--schedule FILE --cache-size SIZE] [--out DIR] [--policy P]

STATS is the directory holding a run's statistics files (PRESCIENT_STATS; the
main process's file and its workers' <name>.<pid>.json), or a glob of them.
Prints a summary table (processes, reads, why reads were forwarded, hit rate, rows loaded, prefetched and
waited for, storage requests and bytes, mean request size, stall time, schedule
matches) and, when the files carry per-epoch blocks, one row per epoch. With
--schedule and a cache size it runs `prescient-schedule simulate` on the same
schedule and cache and puts the simulator's storage reads per epoch next to
the measured rows read from storage. With --out it writes report.png (storage
reads against the prediction, hit rate, stall time per epoch) and
summary.json.

The policy the simulator replays is the connector's: `belady` when the run
followed a schedule (its files count schedule matches), `lru` otherwise.
The cache size is the segment size given as PRESCIENT_CACHE_SIZE; the rows its
data area holds (the segment's metadata takes ~1.8%) are what the simulator is
given (--cache-rows overrides).
"""

import argparse
import json
import os
import sys

import prediction
import segment_geometry
import stats_merge


def _fmt_int(v):
    return f"{int(v):,}" if v is not None else "-"


def summary_rows(merged):
    t = merged["totals"]
    reads = t.get("storage_reads", 0)
    hr = stats_merge.hit_rate(t)
    return [
        ("processes (statistics files)", f"{merged['processes']}"),
        ("dataset reads", _fmt_int(t.get("reads", 0))),
        ("reads served from the node cache", _fmt_int(t.get("reads_served", 0))),
        ("reads forwarded to HDF5", _fmt_int(t.get("reads_forwarded", 0))),
        ("  why (statistics \"forwarded\")", forward_reasons(t)),
        ("rows found in the cache (hits)", _fmt_int(t.get("rows_hit", 0))),
        ("rows loaded on a miss", _fmt_int(t.get("rows_loaded", 0))),
        ("rows waited for (in flight)", _fmt_int(t.get("rows_waited", 0))),
        ("rows prefetched", _fmt_int(t.get("rows_prefetched", 0))),
        ("hit rate", f"{100 * hr:.2f}%" if hr is not None else "-"),
        ("storage requests", _fmt_int(reads)),
        ("storage bytes", f"{t.get('storage_bytes', 0) / 2**20:,.1f} MiB"),
        ("mean request", f"{t.get('storage_bytes', 0) / reads / 1024:,.1f} KiB" if reads else "-"),
        ("stall time (waits inside reads)", f"{t.get('stall_ns', 0) / 1e9:.3f} s"),
        ("schedule matches / mismatches",
         f"{_fmt_int(t.get('schedule_matches', 0))} / {_fmt_int(t.get('schedule_mismatches', 0))}"),
    ]


def forward_reasons(totals):
    """Why the forwarded reads were, most frequent first ("type 240, selection 18"); "-" when
    none was (or the files predate the breakdown)."""
    reasons = sorted(((n, r) for r, n in totals.get("forwarded", {}).items() if n),
                     key=lambda item: (-item[0], item[1]))
    return ", ".join(f"{reason} {count:,}" for count, reason in reasons) or "-"


def epoch_table(epochs):
    head = (f"{'epoch':>5} {'reads':>9} {'hits':>9} {'loaded':>8} {'waited':>7} {'prefetched':>10} {'hit %':>7} "
            f"{'from storage':>12} {'predicted':>9} {'ratio':>6} {'requests':>8} {'MiB':>8} {'stall s':>8}")
    lines = [head, "-" * len(head)]
    for e in epochs:
        c = e["counters"]
        hr = stats_merge.hit_rate(c)
        stor = stats_merge.rows_from_storage(c)
        pred = e.get("predicted_storage")
        lines.append(
            f"{e['epoch']:>5} {c.get('reads', 0):>9} {c.get('rows_hit', 0):>9} {c.get('rows_loaded', 0):>8} "
            f"{c.get('rows_waited', 0):>7} {c.get('rows_prefetched', 0):>10} "
            f"{(f'{100 * hr:.1f}' if hr is not None else '-'):>7} {stor:>12} {(pred if pred is not None else '-'):>9} "
            f"{(f'{stor / pred:.3f}' if pred else '-'):>6} {c.get('storage_reads', 0):>8} "
            f"{c.get('storage_bytes', 0) / 2**20:>8.1f} {c.get('stall_ns', 0) / 1e9:>8.3f}")
    return lines


def find_tool(explicit):
    if explicit:
        return explicit
    repo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    for build in ("bench", "dev", "demo"):
        path = os.path.join(repo, "build", build, "scheduler", "tool", "prescient-schedule")
        if os.access(path, os.X_OK):
            return path
    sys.exit("report: prescient-schedule not found; build it or pass --tool")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stats", help="directory or glob of a run's statistics files")
    parser.add_argument("--schedule", help="the schedule file the run used (PRESCIENT_SCHEDULE)")
    parser.add_argument("--cache-size", help="the run's PRESCIENT_CACHE_SIZE (e.g. 1.3GiB)")
    parser.add_argument("--cache-rows", type=int, help="rows the cache holds (instead of --cache-size)")
    parser.add_argument("--row-bytes", type=int, help="bytes per row (default: the schedule's fingerprint)")
    parser.add_argument("--policy", choices=["auto", "lru", "belady"], default="auto")
    parser.add_argument("--tool", help="prescient-schedule executable (default: build/{bench,dev,demo})")
    parser.add_argument("--out", help="directory for report.png and summary.json")
    args = parser.parse_args(argv)

    files = stats_merge.expand(args.stats)
    merged = stats_merge.merge_files(files)
    if not merged["files"]:
        sys.exit(f"report: no statistics files in '{args.stats}'")
    totals = merged["totals"]
    print(f"Prescient run: {merged['files']} statistics files from {args.stats}\n")
    width = max(len(k) for k, _ in summary_rows(merged))
    for key, value in summary_rows(merged):
        print(f"  {key:<{width}}  {value}")

    epochs = [{"epoch": e["epoch"], "counters": e} for e in merged["epochs"]]
    simulation = None
    if args.schedule:
        if args.cache_rows is None and args.cache_size is None:
            sys.exit("report: --schedule needs --cache-size or --cache-rows")
        scheduled = totals.get("schedule_matches", 0) + totals.get("schedule_mismatches", 0) > 0
        policy = args.policy if args.policy != "auto" else prediction.CONNECTOR_POLICY[scheduled]
        row_bytes = args.row_bytes
        rows = args.cache_rows
        if rows is None:
            if row_bytes is None:
                row_bytes = _row_bytes_of(totals)
            if not row_bytes:
                sys.exit("report: cannot tell the row size; pass --row-bytes")
            rows = segment_geometry.rows_held(segment_geometry.parse_size(args.cache_size), row_bytes)
        simulation = prediction.simulate(find_tool(args.tool), args.schedule, rows, ("lru", "belady"), row_bytes)
        sim_epochs = simulation["policies"][policy]["epochs"]
        if not epochs:
            print("\n  (no per-epoch blocks in the statistics files: totals only)")
        for e in epochs:
            if e["epoch"] < len(sim_epochs):
                e["predicted_storage"] = sim_epochs[e["epoch"]]["storage"]
        measured = stats_merge.rows_from_storage(totals)
        predicted = simulation["policies"][policy]["storage"]
        print(f"\n  simulator ({policy}, cache {rows:,} rows): {predicted:,} storage reads predicted; "
              f"measured {measured:,} rows from storage ({measured / predicted:.3f}x)" if predicted else "")
        other = "lru" if policy == "belady" else "belady"
        print(f"  (the other policy, {other}: {simulation['policies'][other]['storage']:,}; "
              f"compulsory misses {simulation['bounds']['compulsory_node']:,})")
    if epochs:
        print()
        for line in epoch_table(epochs):
            print("  " + line)
    if args.out:
        import plots  # matplotlib only when a picture is asked for

        os.makedirs(args.out, exist_ok=True)
        if epochs:
            path = plots.epoch_figure(f"Prescient run {args.stats}", epochs, os.path.join(args.out, "report.png"))
            print(f"\nreport: plots in {path}")
        else:
            print("\nreport: no per-epoch blocks, no plot")
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump({"files": files, "totals": totals, "epochs": epochs, "simulation": simulation}, f, indent=1)


def _row_bytes_of(totals):
    rows, data = totals.get("rows", 0), totals.get("bytes", 0)
    return data // rows if rows and data % rows == 0 else None


if __name__ == "__main__":
    main()

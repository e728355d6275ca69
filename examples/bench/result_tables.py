"""The suites' results JSON turned into the Markdown tables of examples/bench/RESULTS.md.

    python3 examples/bench/result_tables.py RESULTS.json [RESULTS.json ...]

Pure functions of the records (no run, no tool): the suites print the same tables when they end.
Columns are explained in RESULTS.md ("Suite clairvoyance", "Suite never-slower").
"""

import json
import sys

import counters

WITHIN = 0.05  # clairvoyance: storage rows within 5% of Belady's figure
NOT_SLOWER = 1.0  # never-slower: native seconds / Prescient seconds at least this
# never-slower: an epoch during which the hypervisor took more than this share of the machine's
# CPU time (steal) is disturbed: on a CPU-bound loop it stretches the epoch by about as much, more
# than the margins judged here, so an epoch is judged on its undisturbed rounds when it has any.
STEAL_LIMIT = 0.05


def _int(v):
    return f"{int(v):,}" if v is not None else "-"


def _cache_text(record):
    if record.get("cache_default"):
        b = record.get("cache_default_bytes")
        return f"default ({b / 2**30:.1f} GiB)" if b else "default"
    b = record.get("cache_bytes")
    return f"{b / 2**20:.0f} MiB" if b else "-"


def clairvoyance_row(record):
    """The figures of one clairvoyance run (dict of display strings and numbers)."""
    tags = record["tags"]
    stats = record.get("stats") or {"totals": {}, "fields": {}}
    totals = stats.get("totals") or {}
    field = tags["primary_field"]
    info = next((f for f in record["workload_info"]["fields"] if f["name"] == field), {})
    rows, exact, source = counters.field_storage_rows(stats, field, tags.get("other_fields", ()),
                                                      None if info.get("gzip") else info.get("row_bytes"))
    sim = tags["simulation"]
    belady = sim["policies"]["belady"]["storage"]
    lru = sim["policies"].get("lru", {}).get("storage")
    ratio = rows / belady if belady else None
    per_field = counters.find_field(stats.get("fields") or {}, field)
    prefetched = (per_field or totals).get("rows_prefetched", 0)
    read_around = (per_field or totals).get("rows_read_around", 0)
    st, sw, _ = counters.stall_split(totals)
    clean = not record["wrong_samples"] and not record["timed_out"] and not record["failed_ranks"]
    if ratio is None or not clean:
        verdict = "MISSED"
    elif exact:
        verdict = "met" if abs(ratio - 1.0) <= WITHIN else "MISSED"
    else:  # an upper bound: within the target proves it, above it proves nothing
        verdict = "met (bound)" if ratio <= 1.0 + WITHIN else "unknown"
    return {
        "label": record["label"], "workload": record["workload"], "mode": record["mode"], "ranks": record["ranks"],
        "share": tags["share"], "cache_samples": sim.get("capacity", {}).get("samples"),
        "prefetch": record["prefetch"], "field": field, "field_rows": rows, "source": source, "belady": belady,
        "lru": lru, "ratio": f"{ratio:.3f}" if ratio is not None else "-", "ratio_value": ratio,
        "verdict": verdict, "exact": exact,
        "matches": totals.get("schedule_matches", 0), "mismatches": totals.get("schedule_mismatches", 0),
        "prefetched": prefetched, "read_around": read_around, "stall_storage_s": st, "stall_wait_s": sw,
        "epoch_times": "/".join(f"{e['seconds']:.2f}" for e in record["epochs"]),
        "schedule": "yes" if record.get("schedule") else "no", "wrong": record["wrong_samples"],
        "fallbacks": counters.fallbacks(totals),
    }


def clairvoyance_tables(results):
    head = ("| workload | mode | ranks | cache | cache samples | prefetch | schedule | field rows from storage "
            "| Belady | ratio | target | LRU (sim) | matches / mismatches | prefetched | read-around "
            "| stall storage s | stall wait s | epoch s | wrong |")
    lines = [head, "|" + "|".join("---" for _ in range(19)) + "|"]
    rows = [clairvoyance_row(r) for r in results["runs"]]
    sources = sorted({r["source"] for r in rows})
    for r in rows:
        bound = "" if r["exact"] else "<= "
        lines.append(
            f"| {r['workload']} | {r['mode']} | {r['ranks']} | {r['share']:.0%} | {_int(r['cache_samples'])} "
            f"| {'on' if r['prefetch'] else 'off'} | {r['schedule']} | {bound}{_int(r['field_rows'])} ({r['field']}) "
            f"| {_int(r['belady'])} | {bound}{r['ratio']} | {r['verdict']} | {_int(r['lru'])} "
            f"| {_int(r['matches'])} / {_int(r['mismatches'])} | {_int(r['prefetched'])} | {_int(r['read_around'])} "
            f"| {r['stall_storage_s']:.3f} | {r['stall_wait_s']:.3f} | {r['epoch_times']} | {r['wrong']} |")
    met = sum(r["verdict"].startswith("met") for r in rows)
    unknown = sum(r["verdict"] == "unknown" for r in rows)
    lines.append("")
    lines.append(f"Target (field rows from storage within {WITHIN:.0%} of Belady, correct bytes): met in {met} "
                 f"of {len(rows)} runs" + (f", unknown in {unknown} (only an upper bound was known)" if unknown
                                           else "") + f". Field rows taken from: {'; '.join(sources) or '-'}.")
    notes = sorted({f"{r['workload']}: {rec.get('schedule_note')}" for r, rec in zip(rows, results["runs"])
                    if rec.get("schedule_note")})
    for n in notes:
        lines.append(f"- schedule of {n}")
    sims = sorted({rec["tags"]["simulation"].get("cache_counted", "") for rec in results["runs"]})
    for s in sims:
        if s:
            lines.append(f"- simulator's cache counted in {s}")
    fb = {}
    for r in rows:
        for k, v in r["fallbacks"].items():
            fb[k] = fb.get(k, 0) + v
    if fb:
        lines.append("- connector fallbacks over all runs: " + ", ".join(f"{k} {v:,}" for k, v in sorted(fb.items())))
    return lines


def _disturbed(epoch, cpus):
    """Whether the hypervisor took more than STEAL_LIMIT of the machine during this epoch."""
    return epoch.get("steal_s", 0.0) > STEAL_LIMIT * cpus * epoch["seconds"]


def _bracketing_baseline(runs, case, bkey, brackets, cpus):
    """The baseline `bkey` of `case` as a Prescient run sees it: the mean, epoch by epoch, of the
    native runs numbered `brackets` (just before and just after it), or the single run of that
    baseline when the results have no brackets (earlier runs of the suite, cosmo's rdcc). Per
    epoch, a run the hypervisor disturbed is left out of the mean when another is not; the epoch
    is disturbed when all were."""
    runs_of = [r for r in runs if r["tags"].get("role") == "baseline" and r["tags"]["case"] == case
               and r["tags"]["baseline"] == bkey]
    chosen = [r for r in runs_of if brackets and r["tags"].get("bracket") in brackets]
    if not chosen:
        chosen = [r for r in runs_of if not r["tags"].get("bracket")][:1]
    if not chosen:
        return None
    epochs = []
    for e in chosen[0]["epochs"]:
        same = [next((x for x in r["epochs"] if x["epoch"] == e["epoch"]), None) for r in chosen]
        if any(x is None for x in same):
            continue
        calm = [x for x in same if not _disturbed(x, cpus)]
        used = calm or same
        epochs.append({"epoch": e["epoch"], "seconds": sum(x["seconds"] for x in used) / len(used),
                       "wait_s": sum(x["wait_s"] for x in used) / len(used),
                       "steal_s": sum(x.get("steal_s", 0.0) for x in used) / len(used),
                       "disturbed": not calm,
                       "bad_samples": sum(x["bad_samples"] for x in same)})
    label = chosen[0]["label"] + (f" (mean of the {len(chosen)} runs around it)" if len(chosen) > 1 else "")
    return {"label": label, "epochs": epochs, "wrong_samples": sum(r["wrong_samples"] for r in chosen)}


def never_slower_rows(results):
    """One row per (Prescient run, baseline, epoch) of the never-slower suite."""
    runs = results["runs"]
    cpus = (results.get("machine_before") or {}).get("cpus") or 1
    out = []
    for pre in runs:
        if pre["tags"].get("role") != "prescient":
            continue
        case = pre["tags"]["case"]
        for bkey in pre["tags"]["baselines"]:
            base = _bracketing_baseline(runs, case, bkey, pre["tags"].get("brackets"), cpus)
            if base is None:
                continue
            for e in pre["epochs"]:
                n = next((b for b in base["epochs"] if b["epoch"] == e["epoch"]), None)
                if n is None:
                    continue
                c = e.get("counters") or {}
                st, sw, _ = counters.stall_split(c)
                ratio = n["seconds"] / e["seconds"] if e["seconds"] > 0 else None
                valid = not pre["wrong_samples"] and not base["wrong_samples"] and not pre["timed_out"]
                ok = ratio is not None and ratio >= NOT_SLOWER and valid
                out.append({"case": case, "run": pre["label"], "baseline": base["label"], "epoch": e["epoch"],
                            "cache": _cache_text(pre), "native_s": n["seconds"], "prescient_s": e["seconds"],
                            "ratio": ratio, "verdict": "met" if ok else "MISSED", "native_wait_s": n["wait_s"],
                            "prescient_wait_s": e["wait_s"], "stall_storage_s": st, "stall_wait_s": sw,
                            "native_steal_s": n.get("steal_s", 0.0), "prescient_steal_s": e.get("steal_s", 0.0),
                            "disturbed": n["disturbed"] or _disturbed(e, cpus),
                            "wrong": e["bad_samples"] + n["bad_samples"], "valid": valid})
    return out


def never_slower_medians(rows):
    """Rows of several rounds folded into one per (case, run, baseline, epoch): the median ratio over
    the undisturbed rounds (all rounds when every one was disturbed) judges the epoch (met when >=
    NOT_SLOWER and no round read a wrong byte)."""
    groups = {}
    for r in rows:
        groups.setdefault((r["case"], r["run"], r["cache"], r["baseline"], r["epoch"]), []).append(r)
    out = []
    for (case, run, cache, baseline, epoch), rs in groups.items():
        judged = [r for r in rs if not r.get("disturbed")] or rs
        ratios = sorted(r["ratio"] for r in judged if r["ratio"] is not None)
        if not ratios:
            continue
        mid = len(ratios) // 2
        median = ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2
        wrong = sum(r["wrong"] for r in rs)
        broken = not all(r["valid"] for r in rs)  # a round read a wrong byte or timed out
        out.append({"case": case, "run": run, "cache": cache, "baseline": baseline, "epoch": epoch,
                    "rounds": len(rs), "judged": len(judged) if judged is not rs else 0,
                    "median": median, "low": ratios[0], "high": ratios[-1],
                    "rounds_met": sum(r["verdict"] == "met" for r in rs), "wrong": wrong, "broken": broken,
                    "verdict": "met" if median >= NOT_SLOWER and wrong == 0 and not broken else "MISSED"})
    return out


def never_slower_summary(medians):
    """The medians at a glance: one line per (case, Prescient run, cache) against the case's first
    baseline (plain native h5py), its epochs' median ratios side by side; `*` marks a median judged on
    disturbed rounds only, `!` an epoch that read a wrong byte or timed out."""
    lines_of, first_baseline, epochs = {}, {}, set()
    for m in medians:
        if first_baseline.setdefault(m["case"], m["baseline"]) != m["baseline"]:
            continue
        mark = ("!" if m["wrong"] or m["broken"] else "") + ("*" if m["judged"] == 0 else "")
        lines_of.setdefault((m["case"], m["run"], m["cache"]), {})[m["epoch"]] = f"{m['median']:.2f}{mark}"
        epochs.add(m["epoch"])
    epochs = sorted(epochs)
    lines = ["| case | Prescient run | cache | " + " | ".join(f"epoch {e}" for e in epochs) + " |",
             "|" + "|".join("---" for _ in range(3 + len(epochs))) + "|"]
    for (case, run, cache), by_epoch in lines_of.items():
        lines.append(f"| {case} | {run} | {cache} | " + " | ".join(by_epoch.get(e, "-") for e in epochs) + " |")
    return lines


def never_slower_tables(results):
    head = ("| case | Prescient run | cache | baseline | epoch | native s | Prescient s | ratio | target "
            "| native wait s | Prescient wait s | stall storage s | stall wait s "
            "| native steal s | Prescient steal s | wrong |")
    lines = [head, "|" + "|".join("---" for _ in range(16)) + "|"]
    rows = never_slower_rows(results)
    medians = never_slower_medians(rows)
    if any(m["rounds"] > 1 for m in medians):
        lines = ["Median ratio native / Prescient per epoch over the rounds, against plain native h5py "
                 "(`*`: only disturbed rounds to judge by; `!`: a wrong byte or a timeout):", ""]
        lines += never_slower_summary(medians)
        lines += ["", "Per epoch over the rounds (each round compared with the native runs around it; median, "
                  "lowest and highest over the undisturbed rounds, or over all when none was):", "",
                  "| case | Prescient run | cache | baseline | epoch | rounds | undisturbed | median ratio "
                  "| lowest | highest | rounds met | target |", "|" + "|".join("---" for _ in range(12)) + "|"]
        for m in medians:
            lines.append(f"| {m['case']} | {m['run']} | {m['cache']} | {m['baseline']} | {m['epoch']} "
                         f"| {m['rounds']} | {m['judged']} | {m['median']:.2f} | {m['low']:.2f} | {m['high']:.2f} "
                         f"| {m['rounds_met']} of {m['rounds']} | {m['verdict']} |")
        met = sum(m["verdict"] == "met" for m in medians)
        blind = sum(m["judged"] == 0 for m in medians)
        lines += ["", f"Target (median of native / Prescient over the rounds >= {NOT_SLOWER:.1f} in every epoch, "
                  f"correct bytes): met in {met} of {len(medians)} epochs"
                  + (f" ({blind} judged on disturbed rounds only)." if blind else "."),
                  "", "Every run:", "", head,
                  "|" + "|".join("---" for _ in range(16)) + "|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['run']} | {r['cache']} | {r['baseline']} | {r['epoch']} "
                     f"| {r['native_s']:.2f} | {r['prescient_s']:.2f} "
                     f"| {(f'{r['ratio']:.2f}' if r['ratio'] is not None else '-')} "
                     f"| {r['verdict']}{' (disturbed)' if r.get('disturbed') else ''} "
                     f"| {r['native_wait_s']:.2f} | {r['prescient_wait_s']:.2f} | {r['stall_storage_s']:.3f} "
                     f"| {r['stall_wait_s']:.3f} | {r['native_steal_s']:.2f} | {r['prescient_steal_s']:.2f} "
                     f"| {r['wrong']} |")
    met = sum(r["verdict"] == "met" for r in rows)
    lines.append("")
    lines.append(f"Target (native / Prescient >= {NOT_SLOWER:.1f} in every epoch, correct bytes): met in {met} of "
                 f"{len(rows)} epochs" + (" of single runs." if any(m["rounds"] > 1 for m in medians) else "."))
    lines.append("Steal: CPU seconds the hypervisor took from the machine during the epoch (all CPUs; "
                 "native: the mean of its runs). An epoch is disturbed when a run of its pair lost more than "
                 f"{STEAL_LIMIT:.0%} of the machine's CPU time that way.")
    for n in results.get("notes") or []:
        lines.append(f"- {n}")
    return lines


def output_name(suite, warm):
    """The suite's name in its output files: a --warm run does not replace the cold one's."""
    return suite + ("-warm" if warm else "")


def markdown(results):
    """The Markdown block of one suite's results."""
    title = {"clairvoyance": "Suite clairvoyance (issue 8)", "never-slower": "Suite never-slower (issue 9)"}
    warm = results.get("config", {}).get("warm")
    lines = [f"### {title.get(results['suite'], results['suite'])}{', warm page cache' if warm else ''}", ""]
    cfg = results.get("machine_before") or {}
    if cfg:
        lines.append(f"Run {cfg.get('utc', '?')} UTC, load {cfg.get('load_1m', 0):.2f} at the start, "
                     f"{results.get('seconds', 0):.0f} s, quick: {results['config'].get('quick')}; "
                     f"prescient-schedule: sample maps {'yes' if results['tool']['sample_maps'] else 'no'}, "
                     f"--block-bytes {'yes' if results['tool']['block_bytes'] else 'no'}.")
        lines.append("")
    if results["suite"] == "clairvoyance":
        lines += clairvoyance_tables(results)
    else:
        lines += never_slower_tables(results)
    for r in results["runs"]:
        if r["wrong_samples"] or r["timed_out"] or r["failed_ranks"]:
            lines.append(f"- **{r['key']}** ({r['label']}): wrong samples {r['wrong_samples']}, timed out "
                         f"{r['timed_out']}, failed ranks {r['failed_ranks']}")
    left = [r["key"] for r in results["runs"] if r.get("shm_leftover")]
    if left:
        lines.append(f"- the node cache's segment was left in /dev/shm after {len(left)} of {len(results['runs'])} "
                     f"runs (the harness removed it): {', '.join(left)}")
    return lines


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    for path in argv:
        print("\n".join(markdown(json.load(open(path)))))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

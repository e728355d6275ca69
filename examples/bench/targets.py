"""The issue's targets, checked against a benchmark's results (bench.py)."""

import stats_merge


def _run(results, kind, key):
    return next((r for r in results["runs"] if r["kind"] == kind and r["key"] == key), None)


def _later_read_us(run):
    later = [e for e in run["epochs"] if e["epoch"] >= 1]
    samples = sum(e["samples"] for e in later)
    return sum(e["read_ns"] for e in later) / samples / 1e3 if samples else None


def _later_faults(run):
    later = [e for e in run["epochs"] if e["epoch"] >= 1]
    samples = sum(e["samples"] for e in later)
    return sum(e.get("read_minflt", 0) for e in later) / samples if samples else 0.0


def _verdict(ok):
    return "MET" if ok else "MISSED"


def evaluate(results):
    out = []
    for kind in ("contiguous", "gzip"):
        scan = results["scan"].get(kind, {}).get("median_s")
        sched = _run(results, kind, "pre-sched")
        for key in ("pre-sched", "pre-1p"):
            run = _run(results, kind, key)
            if not (scan and run):
                continue
            t = run["epochs"][0]["epoch_s"]
            ratio = t / scan
            later = [e["epoch_s"] for e in run["epochs"][1:]]
            # The loader's own cost (DataLoader, h5py, the copy) is paid in every epoch, also
            # from a warm cache; what the cold epoch adds over a warm one is its I/O.
            excess = (t - min(later)) / scan if later else None
            out.append({"name": f"{kind}: cold first epoch <= 1.3x a sequential scan, cache holds the dataset "
                                f"({run['label']})",
                        "verdict": _verdict(ratio <= 1.3), "value": ratio,
                        "detail": f"epoch 0 {t:.2f} s vs scan {scan:.2f} s = {ratio:.2f}x"
                                  + (f"; over the fastest warm epoch ({min(later):.2f} s) it adds "
                                     f"{t - min(later):.2f} s = {excess:.2f}x the scan" if later else "")})

    # Like for like: one process against one process, DataLoader workers against workers.
    for key, ref_key in (("pre-1p", "native-pc"), ("pre-sched", "native-dl-pc+c"), ("pre-sched-pw", "native-dl-pc-pw"),
                         ("pre-sched", "native-pc")):
        pre = _run(results, "contiguous", key)
        ref = _run(results, "contiguous", ref_key)
        if ref and pre and _later_read_us(pre):
            ref_us = sum(e["read_ns"] for e in ref["epochs"]) / sum(e["samples"] for e in ref["epochs"]) / 1e3
            ratio = _later_read_us(pre) / ref_us
            ref_faults = (sum(e.get("read_minflt", 0) for e in ref["epochs"])
                          / max(1, sum(e["samples"] for e in ref["epochs"])))
            out.append({"name": f"contiguous: later epochs' read time <= 1.2x native from page cache "
                                f"({pre['label']} vs {ref['label']})",
                        "verdict": _verdict(ratio <= 1.2), "value": ratio,
                        "detail": f"{_later_read_us(pre):.1f} us vs {ref_us:.1f} us per sample = {ratio:.2f}x; "
                                  f"minor page faults per read {_later_faults(pre):.1f} vs {ref_faults:.1f}"})
    native_pc = _run(results, "gzip", "native-pc")
    native_cold = _run(results, "gzip", "native-1p")
    for key in ("pre-1p", "pre-sched", "pre-sched-pw"):
        pre = _run(results, "gzip", key)
        if native_pc and pre and _later_read_us(pre):
            speedup = native_pc["epochs"][0]["read_us"] / _later_read_us(pre)
            cold = native_cold["epochs"][0]["read_us"] / _later_read_us(pre) if native_cold else None
            out.append({"name": f"gzip: later epochs >= 300x faster per sample than native ({pre['label']})",
                        "verdict": _verdict(speedup >= 300), "value": speedup,
                        "detail": f"{_later_read_us(pre):.1f} us vs native {native_pc['epochs'][0]['read_us']:.0f} us "
                                  f"(page cache) = {speedup:.0f}x"
                                  + (f"; vs native cold {native_cold['epochs'][0]['read_us']:.0f} us = {cold:.0f}x"
                                     if cold else "")})

    for kind in ("contiguous", "gzip"):
        for key in ("pre-sched-q", "pre-sched-q+c", "pre-1p-q", "pre-lru-q"):
            run = _run(results, kind, key)
            if not run or any(e.get("predicted_storage") is None for e in run["epochs"]):
                continue
            measured = sum(stats_merge.rows_from_storage(e["counters"]) for e in run["epochs"])
            predicted = sum(e["predicted_storage"] for e in run["epochs"])
            ratio = measured / predicted if predicted else float("inf")
            per_epoch = ", ".join(f"{stats_merge.rows_from_storage(e['counters'])}/{e['predicted_storage']}"
                                  for e in run["epochs"])
            # The simulator counts samples; on chunked data the connector reads whole chunks and keeps
            # the rows of a chunk it will need (read-around), so rows from storage are not the same
            # unit there: gzip is reported, the target is judged on contiguous data.
            strict = (key.startswith("pre-sched") or key.startswith("pre-1p")) and kind == "contiguous"
            out.append({"name": f"{kind}: quarter cache, storage reads within 5% of the simulator "
                                f"({run['policy']}; {run['label']})" + ("" if strict else " [reference]"),
                        "verdict": _verdict(abs(ratio - 1) <= 0.05) if strict else "info", "value": ratio,
                        "detail": f"{measured} rows vs {predicted} predicted = {ratio:.3f} (per epoch {per_epoch}); "
                                  f"{sum(e['counters'].get('storage_reads', 0) for e in run['epochs'])} storage "
                                  f"requests, {sum(e['counters'].get('storage_bytes', 0) for e in run['epochs']) / 2**20:.0f} MiB"})

    for kind in ("contiguous", "gzip"):
        for key in ("pre-sched+c", "pre-sched-q+c", "pre-1p+c", "pre-1p-q+c", "pre-lru+c", "native-dl+c",
                    "native-dl-pc+c"):
            run = _run(results, kind, key)
            if not run:
                continue
            shares = [e["wait_s"] / e["seconds"] for e in run["epochs"]]
            steady = [(e["wait_s"] - e.get("first_wait_s", 0)) / e["seconds"] for e in run["epochs"]]
            loop = ("training loop waited for its batch " + ", ".join(f"{100 * x:.1f}%" for x in shares)
                    + " of each epoch (without the first batch, i.e. worker start: "
                    + ", ".join(f"{100 * x:.1f}%" for x in steady) + ")")
            if "counters" not in run["epochs"][0]:
                out.append({"name": f"{kind}: data wait with compute >= storage time ({run['label']}) [reference]",
                            "verdict": "info", "value": max(shares), "detail": loop})
                continue
            # The stall: time read callbacks wait for rows in flight (the exposed I/O),
            # summed over the processes of the run. Rows a caller loads itself on a miss are
            # exposed too and not in it: their count is shown.
            stall = [e["counters"].get("stall_ns", 0) / 1e9 / e["seconds"] for e in run["epochs"]]
            loaded = [e["counters"].get("rows_loaded", 0) for e in run["epochs"]]
            strict = key.startswith("pre-sched") or key.startswith("pre-1p")
            out.append({"name": f"{kind}: stall < 5% of the epoch with compute >= storage time ({run['label']})"
                                + ("" if strict else " [reference]"),
                        # A caller-loaded row costs one storage read (~0.1 ms): allow a handful.
                        "verdict": _verdict(max(stall) < 0.05 and all(x <= e["samples"] // 1000
                                                                       for x, e in zip(loaded, run["epochs"])))
                        if strict else "info",
                        "value": max(stall),
                        "detail": "connector stall " + ", ".join(f"{100 * x:.1f}%" for x in stall)
                                  + " of each epoch; rows loaded on a miss by the caller "
                                  + ", ".join(str(x) for x in loaded) + "; " + loop})
    return out

"""Merging the per-process statistics files of one run (PRESCIENT_STATS).

Each process that loads the connector writes one JSON file: the main process
the path it was given, each forked DataLoader worker
``<path-without-.json>.<pid>.json``. A run's totals are the sums of the
counters over those files. Files written with a schedule may carry a per-epoch
array ``"epochs": [{"epoch": e, <counters>}, ...]``; those are summed epoch by
epoch. Files without it simply contribute no per-epoch figures.

The ``"node"`` block is different: it is a snapshot of the node cache's own
counters (the same for every process of a node, named by its ``"segment"``),
so it is never summed over processes. Per segment the largest value of each
counter is kept (the latest snapshot: they only grow; for the gauges
``rows_resident``, ``bytes_resident`` and ``backed_bytes``, the largest seen),
and ``totals["node"]`` sums those over the run's segments (its nodes).
"""

import glob
import json
import os

# Fields that identify a process rather than count something.
_NOT_COUNTERS = {"pid", "parent_pid", "prescient_stats_version", "forked_child", "enabled", "epoch"}


def _add_counters(into, values):
    for key, value in values.items():
        if key in _NOT_COUNTERS or key == "node" or isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            into[key] = into.get(key, 0) + value
        elif isinstance(value, dict) and key != "epochs":
            # Nested counter groups (e.g. "selections": {"all": n, ...}).
            _add_counters(into.setdefault(key, {}), value)


def expand(spec):
    """The statistics files named by a directory, a glob or a file."""
    if os.path.isdir(spec):
        return sorted(glob.glob(os.path.join(spec, "*.json")))
    files = sorted(glob.glob(spec))
    if not files and os.path.isfile(spec):
        files = [spec]
    return files


def load(path):
    """A statistics document, or None when the file is not one (or unreadable)."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or "prescient_stats_version" not in doc:
        return None
    return doc


def merge_docs(docs):
    """{'processes', 'totals', 'epochs' (list, possibly empty)} of loaded documents."""
    totals = {}
    epochs = {}
    for doc in docs:
        _add_counters(totals, doc)
        for block in doc.get("epochs") or []:
            if isinstance(block, dict) and isinstance(block.get("epoch"), int):
                _add_counters(epochs.setdefault(block["epoch"], {}), block)
    per_epoch = [dict(epochs[e], epoch=e) for e in sorted(epochs)]
    nodes = _node_snapshots(docs)
    if nodes:
        summed = {}
        for snapshot in nodes.values():
            _add_counters(summed, snapshot)
        totals["node"] = summed
    return {"processes": len(docs), "totals": totals, "epochs": per_epoch, "nodes": nodes}


def _node_snapshots(docs):
    """{segment: {counter: largest value seen}} over the documents' "node" blocks."""
    nodes = {}
    for doc in docs:
        block = doc.get("node")
        if not isinstance(block, dict) or not isinstance(block.get("segment"), str):
            continue
        latest = nodes.setdefault(block["segment"], {})
        for key, value in block.items():
            if isinstance(value, int) and not isinstance(value, bool):
                latest[key] = max(latest.get(key, 0), value)
    return nodes


def merge_files(paths):
    docs = [d for d in (load(p) for p in paths) if d is not None]
    merged = merge_docs(docs)
    merged["files"] = len(docs)
    return merged


def difference(later, earlier):
    """Counter-wise later - earlier (both flat or nested counter dicts)."""
    out = {}
    for key, value in later.items():
        before = earlier.get(key, 0)
        if isinstance(value, dict):
            out[key] = difference(value, before if isinstance(before, dict) else {})
        else:
            out[key] = value - (before if isinstance(before, (int, float)) else 0)
    return out


def rows_requested(c):
    """Distinct rows the loaders asked the cache for: found, loaded or waited for."""
    return c.get("rows_hit", 0) + c.get("rows_loaded", 0) + c.get("rows_waited", 0)


def hit_rate(c):
    """Share of requested rows found ready in the cache (None without requests)."""
    asked = rows_requested(c)
    return c.get("rows_hit", 0) / asked if asked else None


def rows_from_storage(c):
    """Rows brought in from storage: loaded on a miss or prefetched ahead of use."""
    return c.get("rows_loaded", 0) + c.get("rows_prefetched", 0)

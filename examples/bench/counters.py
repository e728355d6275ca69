"""The connector's statistics as the suites read them (on top of examples/report/stats_merge.py).

stats_merge sums the counters of a run's statistics files (the main process's and its workers').
This adds what the suites need on top:
  - the per-field block `"fields": [{"field": NAME, "rows_hit", "rows_loaded", "rows_waited",
    "rows_prefetched", "rows_read_around"}, ...]` (the schedule's fields, in its order), summed
    per field name over the files;
  - rows a field brought in from storage: rows_loaded + rows_prefetched + rows_read_around;
  - the stall split into waiting on one's own storage reads and waiting on another process's.
"""

import glob
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "report"))
import stats_merge  # noqa: E402

FIELD_COUNTERS = ("rows_hit", "rows_loaded", "rows_waited", "rows_prefetched", "rows_read_around")


def add(into, values):
    """Adds the counters of `values` into `into` (nested groups too; identities skipped)."""
    stats_merge._add_counters(into, values)
    return into


def storage_rows(c):
    """Rows brought in from storage, by any process: on a miss, ahead of need, or around a miss."""
    return c.get("rows_loaded", 0) + c.get("rows_prefetched", 0) + c.get("rows_read_around", 0)


def merge_fields(docs):
    """{field name: {counter: sum}} over statistics documents; {} when none carries the block."""
    out = {}
    for doc in docs:
        for block in doc.get("fields") or []:
            if not isinstance(block, dict) or not isinstance(block.get("field"), str):
                continue
            into = out.setdefault(block["field"], {k: 0 for k in FIELD_COUNTERS})
            for k in FIELD_COUNTERS:
                value = block.get(k, 0)
                if isinstance(value, int) and not isinstance(value, bool):
                    into[k] += value
    return out


def files_of(patterns):
    """The statistics files matched by a list of paths and globs (each file once, sorted)."""
    found = set()
    for pattern in patterns:
        found.update(glob.glob(pattern))
    return sorted(found)


def snapshot(patterns):
    """{'files', 'totals', 'fields'} of the statistics files matching `patterns` right now."""
    docs = [d for d in (stats_merge.load(p) for p in files_of(patterns)) if d is not None]
    merged = stats_merge.merge_docs(docs)
    return {"files": len(docs), "totals": merged["totals"], "fields": merge_fields(docs)}


def collect(patterns):
    """Everything a finished run's files say: totals, per-epoch blocks and per-field rows."""
    docs = [d for d in (stats_merge.load(p) for p in files_of(patterns)) if d is not None]
    merged = stats_merge.merge_docs(docs)
    return {"files": len(docs), "totals": merged["totals"], "epochs": merged["epochs"],
            "fields": merge_fields(docs)}


def find_field(fields, name):
    """The block of field `name` in merged `fields`: by its name, or a name that qualifies it
    ('/images', 'file.h5:images'); None when absent."""
    if name in fields:
        return fields[name]
    for key, block in fields.items():
        if key.endswith("/" + name) or key.endswith(":" + name):
            return block
    return None


def field_storage_rows(stats, field, other_fields=(), row_bytes=None):
    """(rows of `field` brought in from storage, exact?, how it was obtained).

    Exact from the `fields` block when it names the field, or as the totals minus the rows the block
    gives every other field. Without the block only an upper bound is known: the totals (which then
    include the other fields' rows; a small field such as labels is loaded a block of rows at a
    time), or, for a field stored uncompressed (`row_bytes` given), the storage bytes divided by
    its row size when that is smaller (every row of the field read from storage moved its bytes at
    least once)."""
    fields = stats.get("fields") or {}
    totals = stats.get("totals") or {}
    block = find_field(fields, field)
    if block is not None:
        return storage_rows(block), True, "fields block"
    total = storage_rows(totals)
    others = [find_field(fields, f) for f in other_fields]
    if other_fields and all(b is not None for b in others):
        return total - sum(storage_rows(b) for b in others), True, "totals minus other fields"
    if not other_fields:
        return total, True, "totals (the only field)"
    if row_bytes:
        by_bytes = totals.get("storage_bytes", 0) // row_bytes
        if by_bytes < total:
            return by_bytes, False, "upper bound: storage bytes / row bytes (no fields block)"
    return total, False, "upper bound: totals, other fields included (no fields block)"


def stall_split(c):
    """(seconds waiting on own storage reads, seconds waiting on others' loads, total stall seconds)."""
    storage = c.get("stall_storage_ns", 0) / 1e9
    wait = c.get("stall_wait_ns", 0) / 1e9
    return storage, wait, c.get("stall_ns", 0) / 1e9


def fallbacks(c):
    """{name: count} of the fallback_* counters that are not zero."""
    return {k: v for k, v in c.items() if k.startswith("fallback_") and v}

"""The simulator's prediction for a run: `prescient-schedule simulate --json`.

The connector's policies map onto the simulator's: with a schedule it evicts
the row whose next use is furthest and does not admit a row that would be
evicted before its next use (the simulator's `belady`, Belady's MIN with
bypass); without a schedule it evicts the least recently used row, admitting one miss in eight once
full (`lru`).
"""

import json
import os
import subprocess
import tempfile

CONNECTOR_POLICY = {True: "belady", False: "lru"}


def simulate(tool, schedule, cache_rows, policies=("lru", "belady"), row_bytes=None):
    """{'cache_samples', 'num_samples', 'epochs', 'bounds', 'policies': {name: {'storage', 'hits',
    'reads', 'epochs': [{'storage', 'hits', 'reads'}, ...]}}} for a cache of `cache_rows` samples."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "simulation.json")
        cmd = [tool, "simulate", schedule, "--cache", str(int(cache_rows)), "--policy", ",".join(policies),
               "--model", "none", "--json", out, "--quiet"]
        if row_bytes:
            cmd += ["--row-bytes", str(int(row_bytes))]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{result.stdout}{result.stderr}")
        doc = json.load(open(out))
    policies_out = {}
    for p in doc["policies"]:
        policies_out[p["policy"]] = {
            "storage": p["storage"], "hits": p["hits"], "reads": p["reads"],
            "epochs": [{"storage": e["storage"], "hits": e["hits"], "reads": e["reads"]} for e in p["epochs"]],
        }
    return {"cache_samples": doc["cache_samples"], "num_samples": doc["num_samples"], "epochs": doc["epochs"],
            "bounds": doc["bounds"], "policies": policies_out}

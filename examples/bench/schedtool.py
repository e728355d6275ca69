"""prescient-schedule as the suites use it: what this build can do, schedules, Belady's figure.

Two features are being added to the tool while these suites are written; the suites ask the tool's
own help text whether it has them and say which way they went:
  - sample maps: `generate --dataset FILE_OR_GLOB:NAME` repeated (several fields; many files, sample
    ids over the files in sorted path order). Without it a schedule names one `FILE:NAME`: one-file
    workloads get a schedule of their first field only, and multi-file workloads get none (the
    connector then runs without a schedule) while the simulator still replays the same order on
    abstract samples for Belady's figure.
  - `simulate --block-bytes`: counts every field of a sample as the cache allocates it (in blocks).
    Without it the simulator is given the cache in samples of the largest field (the small fields'
    blocks are then left out, which flatters the cache by their share: stated in the results).
"""

import json
import os
import re
import subprocess
import tempfile

import numpy as np


def capabilities(tool):
    """{'sample_maps': bool, 'field_files': bool, 'block_bytes': bool} from the tool's help texts
    ('field_files': a field may be kept in files of its own, format version 3)."""
    gen = subprocess.run([tool, "generate", "--help"], capture_output=True, text=True).stdout
    sim = subprocess.run([tool, "simulate", "--help"], capture_output=True, text=True).stdout
    return {"sample_maps": _repeatable_dataset(gen),
            "field_files": bool(re.search(r"files\s+of\s+its\s+own", gen)),
            "block_bytes": "--block-bytes" in sim}


def _repeatable_dataset(help_text):
    """Whether the help text describes --dataset as repeatable (a sample map of several fields)."""
    lines = help_text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"\s*--dataset\b", line):
            text = " ".join([line] + [x for x in lines[i + 1:i + 3] if not re.match(r"\s*--", x)])
            return bool(re.search(r"repeat|glob", text, re.IGNORECASE))
    return False


def layout_args(*, samples, epochs, ranks, workers, batch, seed):
    """The torch-distributed layout of the loop (loop.py): every rank on this node."""
    return ["--source", "torch-distributed", "--samples", str(samples), "--epochs", str(epochs), "--ranks",
            str(ranks), "--ranks-per-node", str(ranks), "--workers", str(workers), "--batch-size", str(batch),
            "--seed", str(seed)]


def map_args(workload, caps, fields=None):
    """(flags naming the workload's files and fields, note) for `generate`, or (None, note) when this
    tool cannot describe the workload (the connector then gets no schedule)."""
    fields = [f for f in workload.fields if fields is None or f.name in fields]
    if workload.kind == "pcam":
        if not caps.get("field_files"):
            return None, "no schedule for the connector: this sample map holds every field in every file"
        # One file per field: each --dataset names its own file, paired with the first's.
        args = []
        for f in fields:
            args += ["--dataset", f"{workload.field_files[0][workload.fields.index(f)]}:{f.name}"]
        for f in fields:
            args += ["--row-bytes", str(f.row_bytes)]
        return args, "sample map: " + ", ".join(f.name for f in fields) + ", each in a file of its own"
    if caps["sample_maps"]:
        args = []
        for f in fields:
            args += ["--dataset", f"{workload.glob()}:{f.name}"]
        for f in fields:
            args += ["--row-bytes", str(f.row_bytes)]
        if not workload.single_file:
            # Every file of a workload holds the same number of samples.
            args += ["--rows-per-file", str(workload.recipe.rows_per_file)]
        return args, "sample map: " + ", ".join(f.name for f in fields)
    if workload.single_file:
        f = fields[0]
        return (["--dataset", f"{workload.files[0]}:{f.name}", "--row-bytes", str(f.row_bytes)],
                f"one field ({f.name}): this prescient-schedule takes one --dataset")
    return None, "no schedule for the connector: this prescient-schedule cannot describe several files"


def generate(tool, path, layout, map_flags, row_bytes):
    """Writes a schedule; without map flags an abstract one (samples only, for the simulator)."""
    cmd = [tool, "generate"] + layout + (map_flags or ["--row-bytes", str(row_bytes)]) + ["--output", path,
                                                                                         "--quiet"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{result.stdout}{result.stderr}")
    return path


def simulate(tool, schedule, *, cache_samples=None, cache_bytes=None, block_bytes=None, row_bytes=None,
             policies=("belady", "lru")):
    """{'cache_samples', 'bounds', 'policies': {name: {'storage', 'epochs': [storage per epoch]}}}."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "simulation.json")
        cmd = [tool, "simulate", schedule, "--policy", ",".join(policies), "--model", "none", "--json", out,
               "--quiet"]
        if block_bytes:
            # A bare number is a count of samples to the tool: bytes need a unit.
            cmd += ["--cache", f"{int(cache_bytes) // 1024}KiB", "--block-bytes", str(int(block_bytes))]
        else:
            cmd += ["--cache", str(int(cache_samples))]
        if row_bytes:
            cmd += ["--row-bytes", str(int(row_bytes))]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{result.stdout}{result.stderr}")
        doc = json.load(open(out))
    return {"command": cmd[:3] + ["..."] + cmd[3:], "cache_samples": doc.get("cache_samples"),
            "bounds": doc.get("bounds"),
            "policies": {p["policy"]: {"storage": p["storage"], "epochs": [e["storage"] for e in p["epochs"]]}
                         for p in doc["policies"]}}


def dump(tool, schedule, rank, epoch):
    """The sample ids rank `rank` reads in `epoch`, in order (for tests)."""
    out = subprocess.run([tool, "dump", schedule, "--rank", str(rank), "--epoch", str(epoch)], capture_output=True,
                         text=True, check=True).stdout
    return np.array([int(tok) for tok in out.split()], dtype=np.int64)

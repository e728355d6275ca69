"""Benchmark: Prescient's node agents across emulated nodes (issue 11).

    env/run python3 examples/bench/agents.py [--build build/bench] [--out DIR] [--nodes 4]
        [--ranks-per-node 2] [--workers 2] [--files 8] [--rows-per-file 500] [--row-bytes 16384]
        [--epochs 3] [--cache-share 0.4] [--compute-ms 10] [--batch-reads]
        [--start-method fork|forkserver|spawn] [--pause-s 0]

NODES emulated nodes on this machine (one cache segment each, PRESCIENT_NODE_ID), RANKS_PER_NODE
training ranks per node, each an unmodified DataLoader loop with WORKERS workers reading images
and labels from FILES files (emulated_loader.py: every byte checked; a sample at a time, or with
--batch-reads a batch at a time, one sorted selection per file and field), with a schedule
(`prescient-schedule generate --source torch-distributed`) and a node cache of CACHE_SHARE of the
dataset. The same job runs twice, side by side in one invocation:

  agents     one prescient-node per node under mpirun (started first; the job starts once every
             agent has published its placement)
  no agents  each node's cache on its own (the training processes lead their node's prefetch)

and the simulator predicts the agents' run (`prescient-schedule simulate --policy prescient` with
the cache, in samples, the agents placed by). Reported: the rows of the images field read from
storage over all epochs (every process, agents included: rows_loaded + rows_prefetched +
rows_read_around) against the compulsory bound (one read per sample) and the prediction; rows
fetched from peers; storage rows of all fields per epoch; the epoch times; the CPU time of every
process of the run (ranks, their workers, the agents and mpirun: children this script waited for);
wrong bytes (must be 0).
"Storage" is the files on this machine's disk, read through the page cache; the emulated nodes
share it, so the times say nothing about a parallel file system: the counts are the result.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import emulated_nodes as emu  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(REPO, "build", "bench"))
    p.add_argument("--out", default=None, help="working directory (default BUILD/agents-bench)")
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--ranks-per-node", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--rows-per-file", type=int, default=500)
    p.add_argument("--row-bytes", type=int, default=16384)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--cache-share", type=float, default=0.4,
                   help="node cache as a share of the dataset (0.4: the dataset is 2.5 caches)")
    p.add_argument("--compute-ms", type=float, default=10, help="the training step's time per batch")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--start-method", choices=("fork", "forkserver", "spawn"), default=None,
                   help="how the DataLoaders start their workers (default: Python's)")
    p.add_argument("--pause-s", type=float, default=0,
                   help="a pause after every epoch but the last, no worker alive (validation)")
    p.add_argument("--batch-reads", action="store_true",
                   help="workers read a batch at a time (images[sorted rows] per file)")
    return p.parse_args()


def simulate(tool, schedule, cache_samples, out):
    path = os.path.join(out, "prediction.json")
    subprocess.run([tool, "simulate", schedule, "--cache", str(cache_samples), "--policy",
                    "prescient,belady", "--quiet", "--json", path], check=True, capture_output=True)
    doc = json.load(open(path))
    return {p["policy"]: p for p in doc["policies"]}, doc


def cpu_of_children():
    """User + system seconds of the children this process has waited for (and theirs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(a, workdir, schedule, pattern, with_agents, tag):
    samples = a.files * a.rows_per_file
    config = {"glob": pattern, "rows_per_file": a.rows_per_file, "seed": a.seed, "batch": a.batch,
              "workers": a.workers, "epochs": a.epochs, "compute_seconds": a.compute_ms / 1000,
              "batch_reads": a.batch_reads, "start_method": a.start_method,
              "pause_seconds": a.pause_s}
    cache_bytes = int(a.cache_share * samples * (a.row_bytes + 8))
    job = emu.Job(workdir=workdir, plugin_dir=os.path.join(a.build, "plugins"),
                  agent=os.path.join(a.build, "scheduler", "tool", "prescient-node"), config=config,
                  nodes=a.nodes, ranks_per_node=a.ranks_per_node, cache_size=str(cache_bytes),
                  schedule=schedule, tag=tag)
    cpu_before = cpu_of_children()
    try:
        if with_agents:
            job.start_agents()
            if not job.wait_agents_ready():
                raise SystemExit("the agents did not start:\n" + job.agent_output())
        start = time.monotonic()
        job.start_ranks()
        results = job.wait_ranks(timeout=900)
        wall = time.monotonic() - start
        if with_agents and job.wait_agents(timeout=120) != 0:
            raise SystemExit("the agents failed:\n" + job.agent_output())
        docs = job.stats()
        agent_docs, training = emu.split_agents(docs)
        return {
            "wall_seconds": wall,
            "cpu_seconds": cpu_of_children() - cpu_before,
            "wrong": sum(r["wrong"] for r in results),
            "read": sum(r["read"] for r in results),
            "epoch_seconds": [max(r["epoch_seconds"][e] for r in results) for e in range(a.epochs)],
            "max_batch_seconds": max(max(r["max_batch_seconds"]) for r in results),
            "storage_rows_images": emu.storage_rows(docs),
            "storage_rows_labels": emu.storage_rows(docs, "labels"),
            # Who read the images: the agents, the training processes' misses, their prefetch
            # (a training process leads its node's prefetching when no agent does).
            "images_by_agents": emu.storage_rows(agent_docs),
            "images_missed_by_training": emu.field_counter(training, "images", "rows_loaded"),
            "images_prefetched_by_training": emu.field_counter(training, "images", "rows_prefetched"),
            "storage_rows_per_epoch_all_fields": emu.storage_rows_per_epoch(docs, a.epochs),
            "rows_remote": emu.total(docs, "rows_remote"),
            "rows_served": emu.total(docs, "rows_served"),
            "fallback_peer_failed": emu.total(docs, "fallback_peer_failed"),
            "cache_samples": job.cache_samples() if with_agents else None,
        }
    finally:
        job.kill()
        emu.remove_segments(job.tag, a.nodes)


def main():
    a = parse_args()
    tool = os.path.join(a.build, "scheduler", "tool", "prescient-schedule")
    for path in (tool, os.path.join(a.build, "scheduler", "tool", "prescient-node"),
                 os.path.join(a.build, "plugins", "libprescient_vol.so")):
        if not os.path.exists(path):
            raise SystemExit(f"missing {path}: build the project first (cmake --build {a.build})")
    out = a.out or os.path.join(a.build, "agents-bench")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    samples = a.files * a.rows_per_file
    pattern = emu.make_dataset(os.path.join(out, "data"), a.files, a.rows_per_file, a.row_bytes)
    schedule = emu.make_schedule(tool, os.path.join(out, "job.sched"), pattern=pattern,
                                 samples=samples, rows_per_file=a.rows_per_file, width=a.row_bytes,
                                 epochs=a.epochs, ranks=a.nodes * a.ranks_per_node,
                                 ranks_per_node=a.ranks_per_node, workers=a.workers,
                                 batch=a.batch, seed=a.seed)
    print(f"{a.nodes} nodes x {a.ranks_per_node} ranks x {a.workers} workers, {samples} samples of "
          f"{a.row_bytes} B + a label in {a.files} files, {a.epochs} epochs, "
          f"{'batch' if a.batch_reads else 'sample'} reads, node cache "
          f"{a.cache_share:.0%} of the dataset (aggregate {a.nodes * a.cache_share:.0%}), workers "
          f"started by {a.start_method or 'the default start method'}"
          + (f", a {a.pause_s:g} s pause between epochs" if a.pause_s else ""), flush=True)
    agents = run(a, out, schedule, pattern, True, "agents")
    alone = run(a, out, schedule, pattern, False, "alone")
    policies, _ = simulate(tool, schedule, agents["cache_samples"], out)
    predicted = policies["prescient"]["storage"]
    belady = policies["belady"]["storage"]
    report = {"args": vars(a), "samples": samples, "agents": agents, "no_agents": alone,
              "predicted_storage": predicted, "predicted_remote": policies["prescient"]["remote"],
              "belady_node_local": belady}
    json.dump(report, open(os.path.join(out, "agents-bench.json"), "w"), indent=1)

    print(f"cache per node: {agents['cache_samples']} samples (the agents' placement)")
    print(f"compulsory bound (one read per sample): {samples}; simulator: prescient {predicted} "
          f"({policies['prescient']['remote']} from peers), belady node-local {belady}")
    print(f"{'run':<10} {'images from storage':>20} {'x bound':>8} {'x predicted':>12} "
          f"{'from peers':>11} {'per epoch (all fields)':>26} {'epoch s':>18} {'cpu s':>7} "
          f"{'wrong':>6}")
    for name, r in (("agents", agents), ("no agents", alone)):
        rows = r["storage_rows_images"]
        print(f"{name:<10} {rows:>20} {rows / samples:>8.3f} {rows / predicted:>12.3f} "
              f"{r['rows_remote']:>11} {str(r['storage_rows_per_epoch_all_fields']):>26} "
              f"{' '.join(f'{t:.2f}' for t in r['epoch_seconds']):>18} {r['cpu_seconds']:>7.1f} "
              f"{r['wrong']:>6}")
    print(f"with agents, images read by the agents {agents['images_by_agents']}, missed by the "
          f"training processes {agents['images_missed_by_training']}, prefetched by them "
          f"{agents['images_prefetched_by_training']}")
    print(f"predicted   {predicted:>20} {predicted / samples:>8.3f} {1:>12.3f} "
          f"{policies['prescient']['remote']:>11}")
    print(f"report: {os.path.join(out, 'agents-bench.json')}")
    return 0 if agents["wrong"] == 0 and alone["wrong"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

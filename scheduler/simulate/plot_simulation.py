#!/usr/bin/env python3
"""Plots a `prescient-schedule simulate --json` result (called by --plot).

Two panels in the spirit of SOLAR's Figures 11 and 12:
  left:  the slowest rank's storage reads in every step, one line per policy
         (SOLAR Fig. 11 plots the maximum over GPUs of samples loaded from the PFS);
  right: storage reads per rank, averaged over the steps of the last epoch, one
         group of bars per policy (SOLAR Fig. 12: per-GPU loads and the barrier).
A table-like title carries the lower bounds.

usage: plot_simulation.py RESULT.json OUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[1]) as f:
        result = json.load(f)
    policies = result["policies"]
    epochs = result["epochs"]
    ranks = result["ranks"]
    fig, (steps_ax, ranks_ax) = plt.subplots(1, 2, figsize=(14, 5))

    for p in policies:
        series = p["step_max_rank_storage"]
        stride = max(1, len(series) // 4000)  # keep the plot light for long runs
        xs = list(range(0, len(series), stride))
        steps_ax.plot(xs, [series[i] for i in xs], label=p["policy"], linewidth=0.8)
    steps_ax.set_yscale("symlog", linthresh=10)
    total_steps = len(policies[0]["step_max_rank_storage"]) if policies else 0
    if epochs and total_steps:
        per_epoch = total_steps / epochs
        for e in range(1, epochs):
            steps_ax.axvline(e * per_epoch, color="0.9", linewidth=0.5, zorder=0)
    steps_ax.set_xlabel("global step")
    steps_ax.set_ylabel("slowest rank's storage reads in the step")
    steps_ax.set_title("storage reads of the slowest rank per step")
    steps_ax.legend()

    width = 0.8 / max(1, len(policies))
    last = epochs - 1
    steps_in_last = total_steps / epochs if epochs else 1
    for i, p in enumerate(policies):
        per_rank = [v / steps_in_last for v in p["rank_storage"][last]] if epochs else []
        xs = [r + i * width for r in range(ranks)]
        ranks_ax.bar(xs, per_rank, width=width, label=p["policy"])
        if per_rank:
            ranks_ax.hlines(max(per_rank), -0.5, ranks, linestyles="dotted", linewidth=0.6,
                            colors=ranks_ax.patches[-1].get_facecolor())
    if ranks <= 32:
        ranks_ax.set_xticks(range(ranks))
    ranks_ax.set_xlabel("rank")
    ranks_ax.set_ylabel("storage reads per step (last epoch, mean)")
    ranks_ax.set_title("per-rank storage reads; dotted: slowest rank (the barrier)")
    ranks_ax.legend()

    b = result["bounds"]
    fig.suptitle(
        f"{result['num_samples']:,} samples, {epochs} epochs, {ranks} ranks on "
        f"{result['nodes']} nodes, cache {result['cache_samples']:,}/node - lower bounds: "
        f"compulsory/node {b['compulsory_node']:,}, overall {b['compulsory_global']:,}, "
        f"Belady {b['belady']:,}",
        fontsize=9)
    fig.tight_layout()
    fig.savefig(argv[2], dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

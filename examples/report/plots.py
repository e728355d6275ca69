"""PNG plots of a run's statistics (matplotlib, no display needed).

``epoch_figure`` draws three panels, one bar group per epoch: rows read from
storage next to the simulator's prediction for the same schedule and cache,
the hit rate, and the stall time (time read callbacks waited for rows other
processes were loading; and, when the caller measured it, the time the
training loop waited for its next batch).
"""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import stats_merge  # noqa: E402


def epoch_figure(title, epochs, path):
    """epochs: [{'epoch', 'counters', optional 'predicted_storage', optional 'wait_s', 'epoch_s'}]."""
    xs = [e["epoch"] for e in epochs]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    stor = [stats_merge.rows_from_storage(e["counters"]) for e in epochs]
    pred = [e.get("predicted_storage") for e in epochs]
    width = 0.4
    ax = axes[0]
    ax.bar([x - width / 2 for x in xs], stor, width, label="measured (loaded + prefetched)")
    if any(p is not None for p in pred):
        ax.bar([x + width / 2 for x in xs], [p or 0 for p in pred], width, label="simulator")
    ax.set_title("rows read from storage")
    ax.set_xlabel("epoch")
    ax.set_xticks(xs)
    ax.legend(fontsize=8)
    ax = axes[1]
    rates = [stats_merge.hit_rate(e["counters"]) for e in epochs]
    ax.bar(xs, [100 * r if r is not None else 0 for r in rates], 0.6, color="tab:green")
    ax.set_ylim(0, 100)
    ax.set_title("hit rate (% of requested rows found ready)")
    ax.set_xlabel("epoch")
    ax.set_xticks(xs)
    ax = axes[2]
    stall = [e["counters"].get("stall_ns", 0) / 1e9 for e in epochs]
    ax.bar([x - width / 2 for x in xs], stall, width, label="connector stall (waits in reads)")
    if all("wait_s" in e for e in epochs):
        ax.bar([x + width / 2 for x in xs], [e["wait_s"] for e in epochs], width,
               label="training loop waited for data")
    ax.set_title("stall time (s)")
    ax.set_xlabel("epoch")
    ax.set_xticks(xs)
    ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def run_plots(run, prefix):
    """The benchmark's per-run figure (Prescient runs only)."""
    if not run.get("connector") or not run["epochs"] or "counters" not in run["epochs"][0]:
        return None
    return epoch_figure(f"{run['kind']}: {run['label']}", run["epochs"], prefix + ".png")


def bench_plots(results, directory):
    """Epoch time of every run, per dataset (first epoch and mean of the later ones)."""
    os.makedirs(directory, exist_ok=True)
    kinds = sorted({r["kind"] for r in results["runs"]})
    fig, axes = plt.subplots(len(kinds), 1, figsize=(12, 4 * len(kinds)), squeeze=False)
    for ax, kind in zip(axes[:, 0], kinds):
        runs = [r for r in results["runs"] if r["kind"] == kind]
        labels = [r["label"] for r in runs]
        first = [r["epochs"][0]["epoch_s"] for r in runs]
        later = [sum(e["epoch_s"] for e in r["epochs"][1:]) / (len(r["epochs"]) - 1) if len(r["epochs"]) > 1
                 else 0 for r in runs]
        ys = range(len(runs))
        ax.barh([y - 0.2 for y in ys], first, 0.4, label="epoch 0 (cold)")
        ax.barh([y + 0.2 for y in ys], later, 0.4, label="later epochs (mean)")
        scan = results["scan"].get(kind, {}).get("median_s")
        if scan:
            ax.axvline(scan, color="k", linestyle="--", label=f"sequential scan {scan:.2f} s")
        ax.set_yticks(list(ys))
        ax.set_yticklabels(labels, fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("epoch time (s, log; native gzip extrapolated)")
        ax.set_title(kind)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(directory, "epoch_times.png")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path

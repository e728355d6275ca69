"""Helpers of the parallel-HDF5 tests (a uniquely named module: every test directory's
conftest.py is importable as "conftest")."""

import glob
import itertools
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
LOADER = os.path.join(HERE, "partest_solar_loader.py")
RANKS = 4
_ids = itertools.count()


def clean_env():
    inherited = ("HDF5_VOL_CONNECTOR", "HDF5_PLUGIN_PATH", "PRESCIENT_", "LD_PRELOAD", "OMPI_",
                 "PMIX_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(inherited)}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["OMP_NUM_THREADS"] = "1"
    # One node: shared memory between the ranks, no TCP (whose interface probing warns in a
    # network namespace); mpirun as root (CI) needs its explicit consent.
    env["OMPI_MCA_btl"] = "self,sm"
    if os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return env


class Mpi:
    """Starts MPI jobs natively or through the connector."""

    def __init__(self, plugin_dir, build_dir):
        self.plugin_dir = plugin_dir
        self.build_dir = build_dir

    def native_env(self):
        return clean_env()

    def connector_env(self, node_id, stats, extra=None):
        env = clean_env()
        env.update({"HDF5_PLUGIN_PATH": self.plugin_dir, "HDF5_VOL_CONNECTOR": "prescient",
                    "PRESCIENT_CACHE_SIZE": "256MiB", "PRESCIENT_NODE_ID": node_id,
                    # The small test datasets stand for large ones: cached at any size.
                    "PRESCIENT_MIN_DATASET_BYTES": "0",
                    "PRESCIENT_STATS": str(stats)})
        env.update(extra or {})
        return env

    def schedule_tool(self):
        tool = os.path.join(self.build_dir, "scheduler", "tool", "prescient-schedule")
        if not os.access(tool, os.X_OK):
            pytest.skip(f"no prescient-schedule under {self.build_dir} (set PRESCIENT_BUILD_DIR)")
        return tool

    def run(self, args, env, cwd, ranks=RANKS, timeout=300):
        """mpirun -n RANKS args (one node; oversubscribed: the machine may have fewer cores)."""
        cmd = ["mpirun", "--oversubscribe", "-n", str(ranks), sys.executable, *map(str, args)]
        proc = subprocess.run(cmd, cwd=str(cwd), env=env, capture_output=True, text=True,
                              timeout=timeout)
        if proc.returncode != 0:
            pytest.fail(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n"
                        f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}", pytrace=False)
        return proc


def new_node_id(tag):
    return f"ptest-{os.getpid()}-{next(_ids)}-{tag}"[:64]


def remove_segments(node_id):
    # The segment is unnamed; what may stay is its registry (and a kept name) in the user's directory.
    uid = os.geteuid()
    for path in glob.glob(f"/dev/shm/prescient-u{uid}*/prescient-cache-v*-u{uid}-{node_id}*"):
        try:
            os.unlink(path)
        except OSError:
            pass


def read_ranks(prefix, ranks=RANKS):
    out = []
    for rank in range(ranks):
        with open(f"{prefix}.rank{rank}.json") as f:
            out.append(json.load(f))
    return out


def read_stats(directory):
    """The PRESCIENT_STATS file of every rank (stats-<pid>.json)."""
    stats = []
    for path in sorted(glob.glob(os.path.join(str(directory), "stats-*.json"))):
        with open(path) as f:
            stats.append(json.load(f))
    return stats


def total(stats, key):
    return sum(s.get(key, 0) for s in stats)

"""Several nodes emulated on one machine, with or without Prescient's node agents: a dataset of many
files (images and labels), its schedule, and a job of NODES x RANKS_PER_NODE training ranks, each a
separate process (a DataLoader with workers, emulated_loader.py) given its node's PRESCIENT_NODE_ID
(one cache segment per emulated node), plus one prescient-node per node under mpirun.

Used by the agents benchmark (agents.py) and by tests/python/agent."""

import glob
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
LOADER = os.path.join(HERE, "emulated_loader.py")
_ids = itertools.count()


def clean_env():
    inherited = ("HDF5_VOL_CONNECTOR", "HDF5_PLUGIN_PATH", "PRESCIENT_", "LD_PRELOAD", "OMPI_",
                 "PMIX_", "RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(inherited)}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["OMP_NUM_THREADS"] = "1"
    # One machine: shared memory between the agents, no TCP; mpirun as root (CI) needs consent.
    env["OMPI_MCA_btl"] = "self,sm"
    if os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return env


def make_dataset(directory, files, rows_per_file, width):
    """files x rows_per_file samples: images[s] = (arange(width) + 7 s) % 256, labels[s] = s."""
    os.makedirs(directory, exist_ok=True)
    for f in range(files):
        first = f * rows_per_file
        s = np.arange(first, first + rows_per_file, dtype=np.int64)
        images = ((np.arange(width, dtype=np.int64)[None, :] + 7 * s[:, None]) % 256).astype(np.uint8)
        with h5py.File(os.path.join(directory, f"part{f:03d}.h5"), "w") as h:
            h["images"] = images
            h["labels"] = s
    return os.path.join(directory, "part*.h5")


def make_schedule(tool, path, *, pattern, samples, rows_per_file, width, epochs, ranks,
                  ranks_per_node, workers, batch, seed):
    cmd = [tool, "generate", "--source", "torch-distributed", "--samples", str(samples),
           "--epochs", str(epochs), "--ranks", str(ranks), "--ranks-per-node", str(ranks_per_node),
           "--workers", str(workers), "--batch-size", str(batch), "--seed", str(seed),
           "--dataset", f"{pattern}:images", "--dataset", f"{pattern}:labels",
           "--row-bytes", str(width), "--row-bytes", "8", "--rows-per-file", str(rows_per_file),
           "--output", path, "--quiet"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return path


def node_id(tag, node):
    return f"emu-{os.getpid()}-{tag}-n{node}"[:60]


def remove_segments(tag, nodes):
    uid = os.geteuid()
    for n in range(nodes):
        for path in glob.glob(f"/dev/shm/prescient-u{uid}*/prescient-cache-v*-u{uid}-{node_id(tag, n)}*"):
            try:
                os.unlink(path)
            except OSError:
                pass


class Job:
    """An emulated job: `nodes` nodes of `ranks_per_node` ranks, optionally a node agent per node."""

    def __init__(self, *, workdir, plugin_dir, agent, config, nodes, ranks_per_node, cache_size,
                 schedule, tag=None, agent_log_level="info", extra_env=None):
        self.workdir, self.plugin_dir, self.agent = workdir, plugin_dir, agent
        self.config, self.nodes, self.rpn = config, nodes, ranks_per_node
        self.cache_size, self.schedule = cache_size, schedule
        self.tag = tag or f"j{next(_ids)}"
        self.agent_log_level = agent_log_level
        self.extra_env = extra_env or {}
        self.stats_dir = os.path.join(workdir, f"stats-{self.tag}")
        os.makedirs(self.stats_dir, exist_ok=True)
        self.agents = None
        self.mpi_shm_dir = None
        self.ranks = []

    def env(self, node):
        env = clean_env()
        env.update({"HDF5_PLUGIN_PATH": self.plugin_dir, "HDF5_VOL_CONNECTOR": "prescient",
                    "PRESCIENT_CACHE_SIZE": self.cache_size, "PRESCIENT_SCHEDULE": self.schedule,
                    "PRESCIENT_NODE_ID": node_id(self.tag, node),
                    "PRESCIENT_STATS": os.path.join(self.stats_dir, "%p.json")})
        env.update(self.extra_env)
        return env

    def start_agents(self, extra_args=()):
        """mpirun -n NODES, each agent taking its emulated node's id from its MPI rank. (The
        one-context-per-node form, `mpirun -n 1 -x PRESCIENT_NODE_ID=a prescient-node : -n 1 -x
        ...`, is what a user would write; this machine's mpirun crashes on any ':' context list.)"""
        prefix = node_id(self.tag, 0)[:-1]
        args = " ".join(map(str, extra_args))
        cmd = ["mpirun", "--oversubscribe", "-n", str(self.nodes), "sh", "-c",
               f'PRESCIENT_NODE_ID="{prefix}$OMPI_COMM_WORLD_RANK" exec "{self.agent}" {args}']
        env = self.env(0)
        del env["PRESCIENT_NODE_ID"]
        env["PRESCIENT_LOG"] = self.agent_log_level
        # Open MPI's shared-memory files in a directory of this job's, removed with the job:
        # agents killed by a fault test would otherwise leave them in /dev/shm.
        self.mpi_shm_dir = tempfile.mkdtemp(prefix=f"prescient-mpi-{self.tag}-", dir="/dev/shm")
        env["OMPI_MCA_btl_sm_backing_directory"] = self.mpi_shm_dir
        self.agent_log = open(os.path.join(self.workdir, f"agents-{self.tag}.log"), "w")
        self.agents = subprocess.Popen(cmd, env=env, stdout=self.agent_log,
                                       stderr=subprocess.STDOUT, start_new_session=True)

    def start_ranks(self):
        config_path = os.path.join(self.workdir, f"config-{self.tag}.json")
        json.dump(self.config, open(config_path, "w"))
        world = self.nodes * self.rpn
        for r in range(world):
            env = self.env(r // self.rpn)
            env.update({"RANK": str(r), "WORLD_SIZE": str(world), "LOCAL_RANK": str(r % self.rpn)})
            out = os.path.join(self.workdir, f"result-{self.tag}-{r}.json")
            log = open(os.path.join(self.workdir, f"rank-{self.tag}-{r}.log"), "w")
            p = subprocess.Popen([sys.executable, LOADER, config_path, out], env=env, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True)
            self.ranks.append((p, out, log))

    def wait_ranks(self, timeout):
        deadline = time.monotonic() + timeout
        results = []
        for p, out, log in self.ranks:
            try:
                p.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"a rank did not finish within {timeout} s; logs in {self.workdir}")
            log.close()
            assert p.returncode == 0, f"rank exited {p.returncode}: {open(log.name).read()[-3000:]}"
            results.append(json.load(open(out)))
        return results

    def wait_agents(self, timeout):
        if self.agents is None:
            return None
        try:
            self.agents.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the agents did not exit within {timeout} s of the job's end:\n"
                                 f"{self.agent_output()}")
        self.agent_log.close()
        return self.agents.returncode

    def wait_agents_ready(self, timeout=60):
        """Waits until every agent has published its node's ownership file (it then leads its
        node's prefetching); False on timeout or if the agents exited."""
        uid = os.geteuid()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.agents.poll() is not None:
                return False
            ready = sum(bool(glob.glob(f"/dev/shm/prescient-u{uid}*/*-{node_id(self.tag, n)}.owners"))
                        for n in range(self.nodes))
            if ready == self.nodes:
                return True
            time.sleep(0.05)
        return False

    def cache_samples(self):
        """The cache, in samples, the agents placed by (from their log), or None."""
        for line in self.agent_output(full=True).splitlines():
            m = re.search(r"at most \d+ per node of (\d+);", line)
            if m:
                return int(m.group(1))
        return None

    def agent_output(self, full=False):
        text = open(os.path.join(self.workdir, f"agents-{self.tag}.log")).read()
        return text if full else text[-4000:]

    def agent_pids(self):
        """pids of the prescient-node processes of this job's mpirun."""
        out = subprocess.run(["pgrep", "-f", self.agent], capture_output=True, text=True).stdout
        pids = []
        for pid in map(int, out.split()):
            try:
                env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            except OSError:
                continue
            for item in env:
                if item.startswith(b"PRESCIENT_NODE_ID=") and self.tag.encode() in item:
                    pids.append((pid, item.split(b"=", 1)[1].decode()))
        return pids

    def kill(self):
        for p, _, _ in self.ranks:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        if self.agents is not None and self.agents.poll() is None:
            os.killpg(self.agents.pid, signal.SIGKILL)
        if self.agents is not None:
            try:
                self.agents.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        if self.mpi_shm_dir is not None:
            shutil.rmtree(self.mpi_shm_dir, ignore_errors=True)

    def stats(self):
        docs = []
        for path in glob.glob(os.path.join(self.stats_dir, "*.json")):
            try:
                docs.append(json.load(open(path)))
            except (OSError, ValueError):
                pass
        return docs


def field_counter(docs, field, name):
    total = 0
    for d in docs:
        for f in d.get("fields", []):
            if f.get("field") == field:
                total += f.get(name, 0)
    return total


STORAGE_COUNTERS = ("rows_loaded", "rows_prefetched", "rows_read_around")


def storage_rows(docs, field="images"):
    """Rows of `field` read from storage by every process of the job (agents included)."""
    return sum(field_counter(docs, field, k) for k in STORAGE_COUNTERS)


def node_of(doc):
    """The emulated node a process's statistics come from ("n0", ...; "?" when it had no segment)."""
    return str((doc.get("node") or {}).get("segment", "?")).rsplit("-", 1)[-1]


def storage_rows_by_node(docs, field="images"):
    """Rows of `field` read from storage per node, its agent and training processes together."""
    out = {}
    for d in docs:
        node = node_of(d)
        out[node] = out.get(node, 0) + sum(field_counter([d], field, k) for k in STORAGE_COUNTERS)
    return out


def storage_rows_per_epoch(docs, epochs):
    """Rows of every field read from storage, per epoch (the statistics count fields together there)."""
    out = [0] * epochs
    for d in docs:
        for e, values in enumerate(d.get("epochs", [])[:epochs]):
            out[e] += sum(values.get(k, 0) for k in STORAGE_COUNTERS)
    return out


def storage_report(docs, epochs, field="images"):
    """Where a job's reads of `field` came from, per node and per kind of process, in a few lines:
    the message of a storage bound that failed (a run that is over cannot be asked again)."""
    nodes = {}
    agents, _ = split_agents(docs)
    for d in docs:
        node = node_of(d)
        kind = "agents" if d in agents else "training"
        into = nodes.setdefault((node, kind), {"processes": 0})
        into["processes"] += 1
        for k in STORAGE_COUNTERS + ("rows_hit", "rows_waited", "rows_remote", "rows_served"):
            into[k] = into.get(k, 0) + field_counter([d], field, k)
        for k in ("fallback_peer_failed", "stall_wait_ns", "rows_not_awaited"):
            into[k] = into.get(k, 0) + d.get(k, 0)
        # Node-wide counters (each process's last snapshot of its segment): who took the
        # prefetching or rows from a leader or loader seen making no progress.
        for k in ("leader_takeovers", "stall_takeovers"):
            into["node." + k] = max(into.get("node." + k, 0), (d.get("node") or {}).get(k, 0))
    lines = [f"storage rows per epoch (all fields): {storage_rows_per_epoch(docs, epochs)}"]
    for (node, kind), c in sorted(nodes.items()):
        lines.append(f"{node} {kind}: " + ", ".join(f"{k} {v}" for k, v in c.items() if v))
    return "\n".join(lines)


def split_agents(docs):
    """The statistics of the agents (they fetch rows from peers or serve them) and of the
    training processes, apart."""
    agents = [d for d in docs if d.get("rows_served", 0) or d.get("rows_remote", 0)]
    return agents, [d for d in docs if d not in agents]


def total(docs, name):
    return sum(d.get(name, 0) for d in docs)

"""Helpers shared by the node-cache tests (a uniquely named module: the conftest.py files of
the other test directories are importable as "conftest" too)."""

import glob
import itertools
import json
import os
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PLUGIN_NAME = "libprescient_vol.so"
DEFAULT_BUILD = "/work/main/build/dev"
CACHE_SIZE = "256MiB"  # always set: the default sizes the segment from free /dev/shm
SHM_DIR = "/dev/shm"
LOADER = os.path.join(HERE, "cachetest_loader.py")

_ids = itertools.count()


def clean_env():
    inherited = ("HDF5_VOL_CONNECTOR", "HDF5_PLUGIN_PATH", "PRESCIENT_", "LD_PRELOAD", "ASAN_",
                 "TSAN_", "UBSAN_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(inherited)}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
    return env


def new_node_id(tag):
    """A node id no other test or agent uses: every test gets its own segment."""
    return f"ctest-{os.getpid()}-{next(_ids)}-{tag}"[:64]


def segment_leftovers(node_id):
    """Files this node id's cache has in /dev/shm: its registry (<base>.lock, present while a
    process holds the segment; the last one out removes it) and a kept segment (<base>.kept).
    The segment itself has no name: the kernel frees it with its last holder."""
    uid = os.geteuid()
    base = f"prescient-cache-v*-u{uid}-{node_id}*"
    return sorted(glob.glob(os.path.join(SHM_DIR, base)) +
                  glob.glob(os.path.join(SHM_DIR, f"prescient-u{uid}*", base)))


def remove_leftovers(node_id):
    for path in segment_leftovers(node_id):
        try:
            os.unlink(path)
        except OSError:
            pass


class Cache:
    """Builds environments for native and connector subprocesses."""

    def __init__(self, plugin_dir, build_dir):
        self.plugin_dir = plugin_dir
        self.build_dir = build_dir

    def native_env(self, extra=None):
        env = clean_env()
        env.update(extra or {})
        return env

    def connector_env(self, node_id, stats=None, extra=None, plugin_dir=None):
        env = clean_env()
        env["HDF5_PLUGIN_PATH"] = plugin_dir or self.plugin_dir
        env["HDF5_VOL_CONNECTOR"] = "prescient"
        env["PRESCIENT_CACHE_SIZE"] = CACHE_SIZE
        env["PRESCIENT_MIN_DATASET_BYTES"] = "0"  # the small test datasets stand for large ones
        env["PRESCIENT_NODE_ID"] = node_id
        if stats:
            env["PRESCIENT_STATS"] = str(stats)
        env.update(extra or {})
        return env

    def schedule_tool(self):
        """Path of prescient-schedule, or None."""
        tool = os.path.join(self.build_dir, "scheduler", "tool", "prescient-schedule")
        return tool if os.access(tool, os.X_OK) else None


def run(args, env, cwd, timeout=180, check=True):
    """Runs args (a leading .py runs with this Python); fails the test on a non-zero exit."""
    args = list(map(str, args))
    if args[0].endswith(".py"):
        args = [sys.executable, *args]
    proc = subprocess.run(args, cwd=str(cwd), env=env, capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(args)} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}",
                    pytrace=False)
    return proc


def read_json(path):
    with open(path) as f:
        return json.load(f)


def stats_files(directory, prefix="stats"):
    """{path: counters} of every PRESCIENT_STATS file (main and forked workers) in directory."""
    out = {}
    for path in sorted(glob.glob(os.path.join(str(directory), prefix + "*.json"))):
        out[path] = read_json(path)
    return out


def wait_for(predicate, timeout, interval=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def _descendants(pids):
    """pids and every process below them (DataLoader workers, their children)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], list(pids)
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def dump_stacks(pids, path):
    """Every thread's stack of pids and their descendants, by gdb (when installed), into path:
    what a hang in CI leaves behind to be read."""
    with open(path, "w") as out:
        for pid in _descendants(pids):
            out.write(f"===== pid {pid}: {_cmdline(pid)}\n")
            out.flush()
            try:
                subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt"],
                               stdout=out, stderr=subprocess.STDOUT, timeout=60)
            except (OSError, subprocess.TimeoutExpired) as e:
                out.write(f"(no stack: {e})\n")
    return path


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:300]
    except OSError:
        return "?"


def _keep_for_ci(stacks):
    """tests/run prints the connector's frames of a hang at the end of the run (build dir)."""
    build = os.environ.get("PRESCIENT_BUILD_DIR")
    if build and os.path.isdir(build):
        with open(os.path.join(build, "hung-stacks.txt"), "a") as out:
            out.write(_stack_summary(stacks))


def _stack_summary(path, limit=12000):
    """The frames of the stacks file that name the connector or a wait, for the failure message."""
    keep = [line for line in open(path, errors="replace")
            if line.startswith(("=====", "Thread")) or "prescient" in line or "wait" in line.lower()
            or "lock" in line.lower()]
    return "".join(keep)[:limit]


def run_ranks(envs, data, out_dir, workers, epochs, batch, seed, timeout, extra_args=()):
    """Starts one cachetest_loader.py process per env (rank) at once; returns their outputs.
    Fails the test on a hang (timeout) or a crash."""
    procs = []
    for rank, env in enumerate(envs):
        out = out_dir / f"rank{rank}.json"
        with open(out_dir / f"rank{rank}.err", "w") as err:  # files: pipes could fill up
            procs.append((out, subprocess.Popen(
                [sys.executable, LOADER, data, out, "--rank", str(rank), "--ranks",
                 str(len(envs)), "--epochs", str(epochs), "--batch", str(batch), "--seed",
                 str(seed), "--workers", str(workers), *extra_args],
                env=env, cwd=out_dir, stdout=subprocess.DEVNULL, stderr=err)))
    deadline = time.monotonic() + timeout
    results, failures = [], []
    for rank, (out, proc) in enumerate(procs):
        try:
            proc.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            stacks = dump_stacks([p.pid for _, p in procs if p.poll() is None],
                                 out_dir / "hung-stacks.txt")
            _keep_for_ci(stacks)
            for _, p in procs:
                p.kill()
            pytest.fail(f"rank {rank} did not finish within {timeout} s: deadlock or livelock; "
                        f"stacks of every process left (gdb) in {stacks}:\n"
                        f"{_stack_summary(stacks)}", pytrace=False)
        if proc.returncode != 0:
            err = (out_dir / f"rank{rank}.err").read_text()
            failures.append(f"rank {rank} exit {proc.returncode}: {err[-3000:]}")
        else:
            results.append(read_json(out))
    assert not failures, "\n".join(failures)
    return results


def compare(native, got, what):
    """Fails on the first batch whose sample ids or tensors differ from native."""
    assert len(native) == len(got), f"{what}: {len(got)} ranks, native {len(native)}"
    for rank, (n, g) in enumerate(zip(native, got)):
        assert len(n["epochs"]) == len(g["epochs"]), f"{what}: rank {rank}: epoch count"
        for epoch, (ne, ge) in enumerate(zip(n["epochs"], g["epochs"])):
            assert len(ne) == len(ge), f"{what}: rank {rank} epoch {epoch}: batch count"
            for b, (nb, gb) in enumerate(zip(ne, ge)):
                assert nb[0] == gb[0], f"{what}: rank {rank} epoch {epoch} batch {b}: sample ids"
                for name, nd, gd in zip(("cont", "gz", "label"), nb[1], gb[1]):
                    if nd != gd:
                        pytest.fail(f"{what}: rank {rank} epoch {epoch} batch {b} dataset "
                                    f"'{name}' (samples {gb[0]}) differs from native",
                                    pytrace=False)

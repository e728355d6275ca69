"""Starts R ranks of the loop at once on this node and waits for all of them.

Each rank is `python3 loop.py CONFIG RESULT_r` with RANK=r, PRESCIENT_RANK=r, WORLD_SIZE=R,
LOCAL_RANK=r and LOCAL_WORLD_SIZE=R (what torchrun gives), in its own process group, so that a
run that passes its deadline is ended whole: the rank and its DataLoader workers, and nothing else.
"""

import json
import os
import signal
import subprocess
import sys
import time

LOOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loop.py")


def rank_env(base, rank, ranks):
    """`base` plus the variables a launcher gives rank `rank` of `ranks` on one node."""
    env = dict(base)
    env.update(RANK=str(rank), PRESCIENT_RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK=str(rank),
               LOCAL_WORLD_SIZE=str(ranks))
    return env


def launch(config_paths, ranks, env_for_rank, out_dir, timeout_s):
    """Runs rank r with config_paths[r] and the environment env_for_rank(r), all at once. Returns
    ([{'rank', 'returncode', 'stderr', 'result' (dict or None)}, ...], whether the deadline ended it)."""
    procs = []
    for r in range(ranks):
        result_path = os.path.join(out_dir, f"result-r{r}.json")
        if os.path.exists(result_path):
            os.remove(result_path)
        err = open(os.path.join(out_dir, f"stderr-r{r}.txt"), "w+")
        p = subprocess.Popen([sys.executable, LOOP, config_paths[r], result_path], env=env_for_rank(r),
                             stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        procs.append((r, p, err, result_path))
    deadline = time.monotonic() + timeout_s
    timed_out = False
    for _, p, _, _ in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            break
    if timed_out:
        for _, p, _, _ in procs:
            _end_group(p)
    out = []
    for r, p, err, result_path in procs:
        err.seek(0)
        stderr = err.read()
        err.close()
        result = None
        if os.path.exists(result_path):
            try:
                result = json.load(open(result_path))
            except ValueError:
                result = None
        out.append({"rank": r, "returncode": p.returncode, "stderr": stderr, "result": result})
    return out, timed_out


def _end_group(p):
    """Ends the rank's process group (the rank and its workers): SIGTERM, then SIGKILL."""
    if p.poll() is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    except ProcessLookupError:
        pass

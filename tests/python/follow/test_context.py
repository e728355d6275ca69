"""python/prescient/_context.py: which job directory a followed process uses."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "python"))

from prescient import _context  # noqa: E402

KEY_OF_CHILD = ("import sys; sys.path.insert(0, sys.argv[1]); from prescient import _context; "
                "print(_context._job_key({'TORCHELASTIC_RUN_ID': 'none'}))")


def child_key():
    return subprocess.run([sys.executable, "-c", KEY_OF_CHILD, str(REPO / "python")],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_torchruns_default_run_id_is_replaced_by_the_agent_that_started_the_ranks():
    # torchrun without --rdzv-id sets TORCHELASTIC_RUN_ID=none for every job: two jobs one after
    # the other on a node must not share a directory, the ranks of one job must.
    first, second = child_key(), child_key()  # two ranks of one agent (this process)
    assert first == second and first.startswith(f"torchrun-{os.getpid()}.")
    assert _context._job_key({"TORCHELASTIC_RUN_ID": "none"}) != first  # another agent
    start = open(f"/proc/{os.getpid()}/stat").read().rsplit(")", 1)[1].split()[19]
    assert first == f"torchrun-{os.getpid()}.{start}"


def test_a_run_id_given_to_torchrun_is_kept_and_a_restarted_group_starts_afresh():
    assert _context._job_key({"TORCHELASTIC_RUN_ID": "job42"}) == "job42"
    assert _context._job_key({"TORCHELASTIC_RUN_ID": "job42", "TORCHELASTIC_RESTART_COUNT": "0"}) == "job42"
    assert _context._job_key({"TORCHELASTIC_RUN_ID": "job42",
                              "TORCHELASTIC_RESTART_COUNT": "2"}) == "job42.restart2"


def test_the_launchers_ids_in_order():
    assert _context._job_key({"PRESCIENT_FOLLOW_JOB": "mine", "TORCHELASTIC_RUN_ID": "t",
                              "SLURM_JOB_ID": "7"}) == "mine"
    assert _context._job_key({"PMIX_NAMESPACE": "ns", "SLURM_JOB_ID": "7"}) == "ns"
    assert _context._job_key({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "3"}) == "slurm-7.3"
    assert _context._job_key({}) == f"pid{os.getpid()}"


def test_resolve_names_the_directory_after_the_key(tmp_path):
    context = _context.resolve({"PRESCIENT_SHM_DIR": str(tmp_path), "PRESCIENT_NODE_ID": "n0",
                                "TORCHELASTIC_RUN_ID": "job42", "TORCHELASTIC_RESTART_COUNT": "1",
                                "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})
    assert context.directory == str(tmp_path / f"prescient-follow-u{os.getuid()}" / "n0" / "job42.restart1")
    assert (context.rank, context.local_ranks) == (1, 2)
    assert os.stat(context.directory).st_mode & 0o777 == 0o700


FOLLOWED = ("import os, signal, sys, time\n"
            "from prescient import _follower\n"
            "directory = _follower.get().context.directory\n"
            "print(directory, sorted(os.listdir(directory)), flush=True)\n"
            "if sys.argv[1] == 'fork':\n"
            "    pid = os.fork()\n"
            "    if pid == 0:\n"
            "        sys.exit(0)  # a normal exit runs the inherited atexit handlers\n"
            "    os.waitpid(pid, 0)\n"
            "    print(os.path.isdir(directory), flush=True)\n"
            "elif sys.argv[1] == 'hang':\n"
            "    time.sleep(60)\n")


def followed(tmp_path, job, how="exit"):
    env = dict(os.environ, PRESCIENT_FOLLOW="1", PYTHONPATH=str(REPO / "python"),
               PRESCIENT_SHM_DIR=str(tmp_path), PRESCIENT_NODE_ID="n0", PRESCIENT_FOLLOW_JOB=job)
    env.pop("PRESCIENT_SCHEDULE", None)
    return subprocess.Popen([sys.executable, "-c", FOLLOWED, how], env=env, stdout=subprocess.PIPE, text=True)


def test_a_followed_job_leaves_no_directory_behind(tmp_path):
    proc = followed(tmp_path, "j1", "fork")
    directory, files = proc.stdout.readline().split(" ", 1)
    assert files.strip() == f"['{_context.MEMBER_PREFIX}{_context._identity(proc.pid)}']"
    assert proc.stdout.readline().strip() == "True"  # a forked child's exit left the parent's directory
    assert proc.wait(timeout=60) == 0
    # Nor the node's directory, nor the user's (the last job there): only what was there before.
    assert not os.path.exists(os.path.dirname(directory)) and os.listdir(tmp_path) == []


def test_jobs_whose_processes_all_died_are_removed_when_the_next_job_starts(tmp_path):
    killed = followed(tmp_path, "killed", "hang")
    killed_dir = killed.stdout.readline().split(" ", 1)[0]
    killed.kill()  # SIGKILL: no atexit, the directory stays with its member's mark
    killed.wait(timeout=60)
    assert os.path.isdir(killed_dir)
    node_dir = os.path.dirname(killed_dir)
    alive = _context.resolve({"PRESCIENT_SHM_DIR": str(tmp_path), "PRESCIENT_NODE_ID": "n0",
                              "PRESCIENT_FOLLOW_JOB": "alive"})
    mark = _context.join(alive)  # this process: a live member
    assert not os.path.exists(killed_dir)  # removed by the next job's start
    unmarked_new, unmarked_old = os.path.join(node_dir, "older"), os.path.join(node_dir, "oldest")
    for d in (unmarked_new, unmarked_old):
        os.mkdir(d, 0o700)
        open(os.path.join(d, "schedule"), "w").close()
    three_days_ago = os.stat(unmarked_old).st_mtime - 3 * 24 * 3600
    os.utime(unmarked_old, (three_days_ago, three_days_ago))
    _context.resolve({"PRESCIENT_SHM_DIR": str(tmp_path), "PRESCIENT_NODE_ID": "n0",
                      "PRESCIENT_FOLLOW_JOB": "next"})
    # A live job stays, a job without marks stays until it is two days old.
    assert sorted(os.listdir(node_dir)) == ["alive", "next", "older"]
    _context.leave(mark)
    assert not os.path.exists(alive.directory)
    assert os.path.isdir(node_dir)  # other jobs' directories are still in it


def test_a_node_directory_removed_while_a_job_is_set_up_is_made_again(tmp_path, monkeypatch):
    """The last job of a node to leave removes the node's directory; a job being set up at that
    moment (its node directory made, its own not yet) makes it again."""
    env = {"PRESCIENT_SHM_DIR": str(tmp_path), "PRESCIENT_NODE_ID": "n0",
           "PRESCIENT_FOLLOW_JOB": "late"}
    real = _context._private_directory
    removed = []

    def racing(path):
        if os.path.basename(path) == "late" and not removed:
            removed.append(path)  # another job's leave() empties and removes the parents here
            os.rmdir(os.path.dirname(path))
            os.rmdir(os.path.dirname(os.path.dirname(path)))
        real(path)

    monkeypatch.setattr(_context, "_private_directory", racing)
    context = _context.resolve(env)
    assert removed and os.path.isdir(context.directory)
    assert os.stat(context.directory).st_mode & 0o777 == 0o700

"""Where a followed job keeps its files, and which rank this process is.

Every process of a job on a node (each rank's training process, its DataLoader
workers, forked or spawned) must agree on one directory, private to the user:

    <PRESCIENT_SHM_DIR or /dev/shm>/prescient-follow-u<uid>/<node id>/<job key>/

The job key comes from the launcher (PRESCIENT_FOLLOW_JOB, TORCHELASTIC_RUN_ID
with its restart count, or torchrun's agent when the run id is its default
"none", PMIX_NAMESPACE, SLURM_JOB_ID.SLURM_STEP_ID), else from the first process
that enables following (its pid), and is exported so that spawned children
agree. It must name one launch: files left by another job under the same key
would be read as this job's (orders, learned rows).
The connector reads the schedule at PRESCIENT_SCHEDULE, which is exported here
too, before h5py loads the connector.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import stat
import time
from typing import List, Mapping, Optional

SCHEDULE_NAME = "schedule"
# Each process that follows in a job directory marks itself there with an
# empty file "member-<pid>.<start time>" (join); the last one to leave removes
# the directory (leave), and a job whose members all died is removed when the
# next job starts on the node (_remove_stale_jobs). Its files live in memory
# (/dev/shm), a few hundred bytes per sample, and a node runs many jobs.
MEMBER_PREFIX = "member-"
# A job directory without a member file (made by an older version, or between
# its creation and its first member) is removed when untouched for this long.
_STALE_SECONDS = 2 * 24 * 3600


class FollowSetupError(RuntimeError):
    """Following cannot be enabled (the message says why)."""


@dataclasses.dataclass(frozen=True)
class FollowContext:
    directory: str         # the job's private directory on this node
    rank: int              # this process's rank in the node's followed schedule
    local_ranks: int       # ranks of the job on this node (at least rank + 1)
    # PRESCIENT_LOG at info or debug: the follower says what it could not follow
    # and why (the connector warns about an unknown value, once).
    verbose: bool = False

    @property
    def schedule_path(self) -> str:
        return os.path.join(self.directory, SCHEDULE_NAME)


def _first_int(env: Mapping[str, str], names) -> Optional[int]:
    for name in names:
        value = env.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def _start_time(pid: int) -> Optional[str]:
    """The process's start time (clock ticks after boot), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            # Field 22 (start time), counted after the ")" that ends the command name.
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _identity(pid: int) -> str:
    """A process as "<pid>.<start time>" (a pid alone may be reused by a later job)."""
    start = _start_time(pid)
    return str(pid) if start is None else f"{pid}.{start}"


def _parent_identity() -> str:
    """This process's parent: torchrun's agent for its ranks."""
    return _identity(os.getppid())


def _alive(identity: str) -> bool:
    pid, _, start = identity.partition(".")
    if not pid.isdigit():
        return False
    now = _start_time(int(pid))
    return now is not None and (not start or now == start)


def _torchrun_key(env: Mapping[str, str]) -> str:
    """torchrun's run id names one job only when given (`--rdzv-id`, or a
    random one with `--standalone`): its default is "none" for every job, and
    consecutive jobs of a node would share (and misread) one directory. The
    agent that started this rank stands for the job then. A restarted worker
    group starts its epochs anew: it gets a directory of its own."""
    run_id = env["TORCHELASTIC_RUN_ID"]
    key = f"torchrun-{_parent_identity()}" if run_id == "none" else run_id
    restart = env.get("TORCHELASTIC_RESTART_COUNT", "0")
    return key if restart in ("", "0") else f"{key}.restart{restart}"


def _job_key(env: Mapping[str, str]) -> str:
    if env.get("PRESCIENT_FOLLOW_JOB"):
        return env["PRESCIENT_FOLLOW_JOB"]
    if env.get("TORCHELASTIC_RUN_ID"):
        return _torchrun_key(env)
    if env.get("PMIX_NAMESPACE"):
        return env["PMIX_NAMESPACE"]
    if env.get("SLURM_JOB_ID"):
        return f"slurm-{env['SLURM_JOB_ID']}.{env.get('SLURM_STEP_ID', '0')}"
    return f"pid{os.getpid()}"


def _safe_component(text: str) -> str:
    kept = "".join(c if c.isalnum() or c in "._-" else "_" for c in text)
    return kept[:64] or "_"


def _private_directory(path: str) -> None:
    """Creates `path` (0700) or accepts it only when it is the user's own
    directory, reached without a symbolic link, that nobody else can write."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:
        raise  # its parent was removed meanwhile (see _make_directories)
    except OSError as e:
        raise FollowSetupError(f"cannot create {path}: {e.strerror}") from None
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise FollowSetupError(
            f"{path} is not a private directory of this user (another user's, a link, or "
            "open to others); set PRESCIENT_SHM_DIR to a directory of your own")


def _members(directory: str) -> List[str]:
    """The identities of the processes marked as following in `directory`."""
    try:
        return [e.name[len(MEMBER_PREFIX):] for e in os.scandir(directory)
                if e.name.startswith(MEMBER_PREFIX)]
    except OSError:
        return []


def _remove_job(directory: str) -> None:
    """Removes a job directory and its files; whatever cannot be removed (a
    process of the job still writing, another remover first) is left."""
    try:
        for f in os.scandir(directory):
            try:
                os.unlink(f.path)
            except OSError:
                pass
        os.rmdir(directory)
    except OSError:
        pass


def _remove_stale_jobs(node_dir: str, keep: str) -> None:
    """Removes the node's job directories whose members all died (a job
    killed, or ended by os._exit), and those without members untouched for
    _STALE_SECONDS."""
    now = time.time()
    try:
        entries = list(os.scandir(node_dir))
    except OSError:
        return
    for entry in entries:
        if entry.name == keep or not entry.is_dir(follow_symlinks=False):
            continue
        members = _members(entry.path)
        if members:
            if not any(_alive(m) for m in members):
                _remove_job(entry.path)
            continue
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime < _STALE_SECONDS:
                continue
        except OSError:
            continue
        _remove_job(entry.path)


def join(context: FollowContext) -> Optional[str]:
    """Marks this process as following in the job's directory; returns its
    mark, for leave() (None if it could not be made: the directory is then
    left for the stale rule)."""
    mark = os.path.join(context.directory, MEMBER_PREFIX + _identity(os.getpid()))
    try:
        os.close(os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
    except OSError:
        return None
    return mark


def leave(mark: str) -> None:
    """Unmarks this process (at its exit); the last member to leave removes
    the job's directory. Nothing in a forked child, which inherited the mark
    of its parent (os.fork() followed by a normal exit runs atexit there)."""
    identity = os.path.basename(mark)[len(MEMBER_PREFIX):]
    if identity.partition(".")[0] != str(os.getpid()):
        return
    try:
        os.unlink(mark)
    except OSError:
        return  # removed with the directory by another job's sweep, or never made
    directory = os.path.dirname(mark)
    if not any(_alive(m) for m in _members(directory)):
        _remove_job(directory)
        # The node's and the user's directories too, when this was their last
        # job (rmdir removes only an empty directory; a job that is being set
        # up meanwhile makes them again: _make_directories).
        node_dir = os.path.dirname(directory)
        for path in (node_dir, os.path.dirname(node_dir)):
            try:
                os.rmdir(path)
            except OSError:
                break


def _make_directories(paths) -> None:
    """Makes (or accepts) each private directory of `paths`, parent first. A
    job that leaves removes its node's directory when it was the last there:
    if that happens between two of these steps, they are made again."""
    for attempt in range(8):
        try:
            for path in paths:
                _private_directory(path)
            return
        except FileNotFoundError:
            continue
    raise FollowSetupError(f"cannot create {paths[-1]}: its parent keeps being removed")


def resolve(env: Optional[Mapping[str, str]] = None) -> FollowContext:
    """The context of this process from its environment (no side effects
    other than creating the directories)."""
    env = os.environ if env is None else env
    base = env.get("PRESCIENT_SHM_DIR") or "/dev/shm"
    node = _safe_component(env.get("PRESCIENT_NODE_ID") or socket.gethostname())
    user_dir = os.path.join(base, f"prescient-follow-u{os.getuid()}")
    node_dir = os.path.join(user_dir, node)
    job = _safe_component(_job_key(env))
    directory = os.path.join(node_dir, job)
    _make_directories((user_dir, node_dir, directory))
    _remove_stale_jobs(node_dir, keep=job)
    # The node-local rank when the launcher says it (torchrun, Open MPI, Slurm),
    # else the global one (processes started by hand with RANK), else 0.
    local = _first_int(env, ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                             "SLURM_LOCALID"))
    if local is not None:
        rank = local
        size = _first_int(env, ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE")) or 1
    else:
        rank = _first_int(env, ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")) or 0
        size = _first_int(env, ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                "SLURM_NTASKS")) or 1
    verbose = env.get("PRESCIENT_LOG", "").strip().lower() in ("info", "debug")
    return FollowContext(directory=directory, rank=rank, local_ranks=max(size, rank + 1),
                         verbose=verbose)


def export(context: FollowContext, env=None) -> None:
    """Tells the connector (and spawned children) what this process follows."""
    env = os.environ if env is None else env
    env["PRESCIENT_FOLLOW"] = "1"
    env["PRESCIENT_FOLLOW_JOB"] = os.path.basename(context.directory)
    env["PRESCIENT_SCHEDULE"] = context.schedule_path
    env["PRESCIENT_RANK"] = str(context.rank)

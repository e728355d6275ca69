"""PRESCIENT_STATS under hostile conditions, with the faults made for real.

* a full filesystem (a small tmpfs mounted by the test and filled up): the job runs on, with
  one warning naming PRESCIENT_STATS, where it used to die of SIGBUS, even with
  PRESCIENT_ENABLE=0;
* another user's symbolic link at the statistics path, in a shared directory that is not
  sticky (where the kernel's protected_symlinks does not help): the link's target is left
  untouched;
* another user's regular file at the path: left alone;
* the file the job creates is private (0600).

Mounting needs CAP_SYS_ADMIN and the second user needs root (tests/run runs as root inside
the project environment); elsewhere these tests skip, unless PRESCIENT_REQUIRE_PLUGIN=1 says
that the whole suite must run.
"""

import os
import subprocess
import sys
import textwrap

import pytest

OTHER_UID = 4242  # a second local user: needs no passwd entry for the kernel's checks

READ = textwrap.dedent("""
    import sys, h5py, numpy as np
    with h5py.File(sys.argv[1], "w") as f:
        f["x"] = np.arange(64, dtype=np.float32).reshape(8, 8)
    with h5py.File(sys.argv[1], "r") as f:
        print(float(f["x"][3].sum()))
""")


def require(condition, why):
    if condition:
        return
    if os.environ.get("PRESCIENT_REQUIRE_PLUGIN") == "1":
        pytest.fail(f"cannot run: {why} (PRESCIENT_REQUIRE_PLUGIN=1 requires every test)")
    pytest.skip(why)


@pytest.fixture
def full_tmpfs(tmp_path):
    require(os.geteuid() == 0, "mounting a tmpfs needs root")
    mount_point = tmp_path / "full"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    require(done.returncode == 0, f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        # Unbuffered: a buffered file would raise ENOSPC again when closed (Python 3.14 does).
        with open(mount_point / "filler", "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError:
                pass
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


@pytest.mark.parametrize("enable", ["1", "0"])
def test_full_filesystem_is_a_warning_not_a_crash(prescient, tmp_path, full_tmpfs, enable):
    proc = prescient.run([sys.executable, "-c", READ, tmp_path / "data.h5"], "connector", tmp_path,
                         stats=full_tmpfs / "stats.json", extra={"PRESCIENT_ENABLE": enable},
                         check=False)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.split() == ["220.0"]
    warnings = [line for line in proc.stderr.splitlines() if "PRESCIENT_STATS" in line]
    assert len(warnings) == 1, proc.stderr
    assert "No space left" in warnings[0], warnings


def as_other_user(fn):
    """Runs fn in a child process as OTHER_UID (a real second user) and waits for it."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(OTHER_UID)
            os.setuid(OTHER_UID)
            fn()
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.fixture
def shared_dir(tmp_path):
    require(os.geteuid() == 0, "acting as a second user needs root")
    # World-writable and not sticky, reachable by the other user (a project directory).
    os.chmod(tmp_path, 0o755)
    for parent in tmp_path.parents:
        if str(parent) in ("/", "/tmp"):
            break
        os.chmod(parent, os.stat(parent).st_mode | 0o011)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    return shared


def test_symbolic_link_of_another_user_is_refused(prescient, tmp_path, shared_dir):
    secret = tmp_path / "root-only"
    secret.write_text("precious\n")
    os.chmod(secret, 0o600)
    stats = shared_dir / "p.json"
    as_other_user(lambda: os.symlink(secret, stats))
    proc = prescient.run([sys.executable, "-c", READ, tmp_path / "data.h5"], "connector", tmp_path,
                         stats=stats)
    assert secret.read_text() == "precious\n"
    assert os.path.islink(stats)
    assert "symbolic link" in proc.stderr, proc.stderr


def test_file_of_another_user_is_left_alone(prescient, tmp_path, shared_dir):
    stats = shared_dir / "p.json"

    def plant():
        with open(stats, "w") as f:
            f.write("theirs\n")

    as_other_user(plant)
    proc = prescient.run([sys.executable, "-c", READ, tmp_path / "data.h5"], "connector", tmp_path,
                         stats=stats)
    assert stats.read_text() == "theirs\n"
    assert os.stat(stats).st_uid == OTHER_UID
    assert "owned by another user" in proc.stderr, proc.stderr


def test_statistics_file_is_private(prescient, tmp_path):
    stats = tmp_path / "p.json"
    prescient.run([sys.executable, "-c", READ, tmp_path / "data.h5"], "connector", tmp_path,
                  stats=stats)
    assert os.stat(stats).st_mode & 0o777 == 0o600
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]

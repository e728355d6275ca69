"""python/ installs with pip (`pip install ./python`): the package and its start-up hook
(prescient-follow.pth), which enables the follower with PRESCIENT_FOLLOW=1 and nothing else.
Built offline, against the environment's setuptools, into a fresh virtual environment."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

PROBE = """
import os, sys
import prescient._follower as follower
print(follower.get() is not None, os.environ.get("PRESCIENT_SCHEDULE", ""))
print(os.path.dirname(__import__("prescient").__file__))
"""


def test_pip_install_brings_the_package_and_its_start_up_hook(tmp_path):
    pytest.importorskip("setuptools")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, timeout=120)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PRESCIENT_", "PYTHON", "HDF5_"))}
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-build-isolation",
                              "--no-deps", "--no-index", str(REPO / "python")],
                             env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-3000:]

    def probe(extra):
        proc = subprocess.run([str(python), "-c", PROBE], env=dict(env, **extra), cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout.splitlines()

    off = probe({})
    assert off[0] == "False "
    assert off[1].startswith(str(venv))  # the installed copy, not the source tree
    on = probe({"PRESCIENT_FOLLOW": "1", "PRESCIENT_SHM_DIR": str(tmp_path)})
    assert on[0].startswith("True ") and on[0].endswith("/schedule")
    assert on[0].split(" ", 1)[1].startswith(str(tmp_path / f"prescient-follow-u{os.getuid()}"))

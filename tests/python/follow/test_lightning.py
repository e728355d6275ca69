"""PyTorch Lightning, unmodified, followed by environment only (PRESCIENT_FOLLOW=1).

Lightning builds the loop itself: the module returns its DataLoader (shuffle=True, two workers),
the Trainer iterates it, and `seed_everything(workers=True)` seeds the workers. The same script
(lightning_train.py) runs natively and with the connector and the follower enabled by the
environment, over three epochs with a node cache of half the data. Checked: the batches of every
epoch, the trained weights and every random generator's state are the same; from the second
epoch on at least 99% of the reads are where the followed order says, and rows were prefetched.

Lightning is not in the environment's Debian packages: tests/python/make_venv installs the pinned
requirements-lightning.txt from the Python package index into a venv that sees the environment's
own torch and h5py (made once, reused). The test runs in the default flavor of the environment
only: what it checks does not depend on the HDF5 or MPI of the others.
"""

import json
import os
import subprocess

import pytest

from test_follow import EPOCHS, clean_env, epoch_totals, follow_env

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "lightning_train.py")
READS_PER_EPOCH = 2 * 4096  # lightning_train.SAMPLES, images and labels

pytestmark = pytest.mark.skipif(os.environ.get("PRESCIENT_ENV_FLAVOR", "default") != "default",
                                reason="Lightning is tested in the default flavor of the environment")


@pytest.fixture(scope="module")
def lightning_python():
    proc = subprocess.run([os.path.join(HERE, "..", "make_venv"),
                           os.path.join(HERE, "requirements-lightning.txt"), "--system-site-packages"],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        message = f"cannot make the Lightning venv:\n{proc.stderr[-3000:]}"
        if os.environ.get("PRESCIENT_REQUIRE_PLUGIN") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return proc.stdout.strip()


def train(python, data, out, env):
    # Lightning looks for an MPI launcher by importing mpi4py, which initialises MPI (a singleton:
    # no mpirun), and Open MPI 5 leaves a singleton's shared-memory segment behind: in the test's
    # directory, not in /dev/shm.
    env = {**env, "OMPI_MCA_btl_sm_backing_directory": str(os.path.dirname(out))}
    proc = subprocess.run([python, SCRIPT, "train", str(data), str(EPOCHS), str(out)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    with open(out) as f:
        return json.load(f)


def test_a_lightning_trainer_is_followed_and_trains_the_same(lightning_python, tmp_path):
    data = tmp_path / "images.h5"
    subprocess.run([lightning_python, SCRIPT, "make", str(data)], check=True, env=clean_env(), timeout=120)
    native = train(lightning_python, data, tmp_path / "native.json", clean_env())
    shm = tmp_path / "shm"
    shm.mkdir()
    env = follow_env(tmp_path, shm)
    env["PRESCIENT_CACHE_SIZE"] = "32MiB"  # half the images
    followed = train(lightning_python, data, tmp_path / "followed.json", env)
    assert followed == native

    per_epoch = epoch_totals(tmp_path)
    for epoch in range(1, EPOCHS):
        totals = per_epoch.get(epoch, {})
        assert totals.get("reads") == READS_PER_EPOCH, per_epoch
        assert totals["schedule_matches"] >= 0.99 * READS_PER_EPOCH, per_epoch
    assert sum(t["rows_prefetched"] for e, t in per_epoch.items() if e >= 1) > 0, per_epoch

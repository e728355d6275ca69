"""Read sequences of files opened for SWMR reading (h5py's swmr=True), run natively and through
the connector.

    python3 voltest_swmr.py write FILE              a file in h5py's default format
    python3 voltest_swmr.py episodes FILE OUT.json  windows of its episodes, swmr=True
    python3 voltest_swmr.py with-writer FILE OUT.json

`write` keeps episodes as robomimic does (data/demo_<k>/obs/image, data/demo_<k>/actions, a
group per episode), in h5py's default file format. `episodes` opens it with swmr=True as
robomimic's SequenceDataset does and reads windows of 10 steps of both datasets of every
episode in shuffled order, twice (the second pass from the cache).

`with-writer` starts a real SWMR writer (this script's `writer`, in a process of its own
without the connector: the test is of the reader) that creates FILE in the latest format and
starts SWMR writing; then it opens FILE with swmr=True, reads every row twice, lets the writer
overwrite rows 0-9 of every dataset in place (the file's size unchanged), reads again (after
refresh(), as a SWMR reader does), and again after a second round of the writer's overwrites
that also appends 10 rows to the extensible dataset. OUT holds, for each of those four passes, a digest of every read and every shape,
or the error a read raised.
"""

import json
import os
import subprocess
import sys
import time

import h5py
import numpy as np

from voltest_serving import attempt  # a read's digest, or the error it raised

EPISODES = 12
STEPS = 40
WINDOW = 10
IMAGE = (12, 12, 3)
ROWS = 200  # rows of the writer's datasets
CHUNK_ROWS = 16
WAIT_S = 60.0


def write(path):
    rng = np.random.default_rng(5)
    with h5py.File(path, "w") as f:
        for k in range(EPISODES):
            demo = f.create_group(f"data/demo_{k}")
            demo.attrs["num_samples"] = STEPS
            demo["obs/image"] = rng.integers(0, 255, (STEPS, *IMAGE), dtype=np.uint8)
            demo["actions"] = rng.random((STEPS, 7))


def episodes(path, out):
    windows = [(k, s) for k in range(EPISODES) for s in range(0, STEPS - WINDOW + 1, 3)]
    rng = np.random.default_rng(9)
    results = []
    with h5py.File(path, "r", swmr=True, libver="latest") as f:
        for _ in range(2):
            for i in rng.permutation(len(windows)):
                k, s = windows[i]
                for name in ("obs/image", "actions"):
                    results.append(attempt(lambda: f[f"data/demo_{k}/{name}"][s:s + WINDOW]))
    json.dump(results, open(out, "w"))


def _touch(directory, name):
    open(os.path.join(directory, name), "w").close()


def _wait_for(directory, name, proc=None):
    deadline = time.monotonic() + WAIT_S
    while not os.path.exists(os.path.join(directory, name)):
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the writer exited ({proc.returncode}) before '{name}'")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no '{name}' in {WAIT_S} s")
        time.sleep(0.01)


def _values(rows, round_, width):
    return np.full((rows, width), 1000.0 * round_ + 1, dtype=np.float64) + np.arange(rows)[:, None]


def writer(path, control):
    """A SWMR writer: creates the file, starts SWMR writing, then on each 'go<n>' overwrites rows
    0-9 of every dataset in place (and, the second time, appends 10 rows to the extensible one),
    flushes, and answers 'done<n>'."""
    with h5py.File(path, "w", libver="latest") as f:
        grown = f.create_dataset("grown", data=_values(ROWS, 0, 7), maxshape=(None, 7),
                                 chunks=(CHUNK_ROWS, 7))
        fixed = f.create_dataset("fixed", data=_values(ROWS, 0, 64))  # contiguous, in place
        f.swmr_mode = True
        _touch(control, "ready")
        for round_ in (1, 2):
            _wait_for(control, f"go{round_}")
            grown[0:10] = _values(10, round_, 7)
            fixed[0:10] = _values(10, round_, 64)
            if round_ == 2:  # the first round leaves the file's size as it was
                grown.resize(ROWS + 10, axis=0)
                grown[ROWS:] = _values(10, 9, 7)
            grown.flush()
            fixed.flush()
            f.flush()
            _touch(control, f"done{round_}")
        _wait_for(control, "quit")


def with_writer(path, out):
    control = os.path.dirname(os.path.abspath(out))
    for name in ("ready", "go1", "done1", "go2", "done2", "quit"):
        if os.path.exists(os.path.join(control, name)):
            os.unlink(os.path.join(control, name))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HDF5_VOL_CONNECTOR", "HDF5_PLUGIN_PATH", "PRESCIENT_"))}
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "writer", path, control],
                            env=env)
    results = []
    try:
        _wait_for(control, "ready", proc)
        with h5py.File(path, "r", swmr=True) as f:
            grown, fixed = f["grown"], f["fixed"]

            def read_all():
                reads = []
                for d in (grown, fixed):
                    d.refresh()
                    reads.append(list(d.shape))
                    for s in range(0, d.shape[0], 5):
                        reads.append(attempt(lambda: d[s:s + 5]))
                    reads.append(attempt(lambda: d[3]))
                results.append(reads)

            read_all()
            read_all()  # hits, unless the file changed meanwhile
            for round_ in (1, 2):
                _touch(control, f"go{round_}")
                _wait_for(control, f"done{round_}", proc)
                read_all()
        _touch(control, "quit")
        if proc.wait(timeout=WAIT_S) != 0:
            raise RuntimeError(f"the writer failed ({proc.returncode})")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    json.dump(results, open(out, "w"))


if __name__ == "__main__":
    command, path = sys.argv[1], sys.argv[2]
    if command == "write":
        write(path)
    elif command == "episodes":
        episodes(path, sys.argv[3])
    elif command == "writer":
        writer(path, sys.argv[3])
    elif command == "with-writer":
        with_writer(path, sys.argv[3])
    else:
        sys.exit(f"unknown command {command}")

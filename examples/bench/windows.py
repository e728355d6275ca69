"""Sliding windows over a time series: native h5py against the connector, alternated, cold.

    env/run python3 examples/bench/windows.py [--rounds 2] [--epochs 3] [--plugin-dir DIR]
        [--variants native default quarter follow follow-quarter] [--rows 1000000]
        [--window 64] [--stride 16] [--stats-dir DIR]

The layout of forecasting and sequence models' data: one series `x` (ROWS steps of 16 float32
channels, 64 bytes a step: 64 MB by default) and `y` (int64, a label per step) in one file. The
loop is the sliding-window Dataset such models train with: index i reads the WINDOW steps
`x[i * STRIDE : i * STRIDE + WINDOW]` and the label at the window's last step, opening the file
once per worker process; DataLoader(shuffle=True, batch_size=32, num_workers=2), the file dropped
from the page cache before every epoch ("cold"). With the default window of 64 steps every 16,
every step is read by four indices an epoch, and each index's read is 64 rows of the dataset. Runs,
in this order in every round:

  native          no connector variables (HDF5's defaults)
  default         the connector's defaults, no schedule (its cache holds the series)
  quarter         as default, with PRESCIENT_CACHE_SIZE a quarter of the series
  follow          the sampler followed (PRESCIENT_FOLLOW=1, the repository's python/ on PYTHONPATH):
                  the learned map makes an index 64 samples of one row each, every 16
  follow-quarter  followed, at a quarter cache (the later epochs read ahead)

It prints one line per run and epoch (seconds, CPU seconds of the job's processes, the ratio of
the round's native epoch to the run's), then the median ratio per variant and epoch. Every
window's bytes are checked: channel 0 of step t holds t, which the window's label gives back.
"""

import json
import os

from torch.utils.data import Dataset

from per_sample import (alternate, alternation_arguments, check_alternation_arguments,
                        variant_env)

HERE = os.path.dirname(os.path.abspath(__file__))
CHANNELS = 16
VARIANTS = ("native", "default", "quarter", "follow", "follow-quarter")

# The loop's process: the Dataset is this module's (`Windows`), so that DataLoader workers started
# by a forkserver (Python 3.14's default) can import it.
CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[4])
from torch.utils.data import DataLoader
from per_sample import timed_epochs
from windows import Windows

paths, epochs = json.loads(sys.argv[1]), int(sys.argv[2])
window, stride = int(sys.argv[5]), int(sys.argv[6])
loader = DataLoader(Windows(paths[0], window, stride), batch_size=32, shuffle=True, num_workers=2)
json.dump(timed_epochs(loader, paths, epochs), open(sys.argv[3], "w"))
"""


class Windows(Dataset):
    """Index i: the window x[i * stride : i * stride + window] and the label at its last step,
    given back as the window's first (what timed_epochs checks); the file opened once a process."""

    def __init__(self, path, window, stride):
        import h5py
        self.path, self.window, self.stride, self.file = path, window, stride, None
        with h5py.File(path, "r") as f:
            self.n = (len(f["y"]) - window) // stride + 1

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.file is None:
            import h5py
            self.file = h5py.File(self.path, "r")
        start = i * self.stride
        x = self.file["x"][start:start + self.window]
        return x, int(self.file["y"][start + self.window - 1]) - (self.window - 1)


def generate(workdir, rows):
    """The series file, once (written under a temporary name, renamed when complete)."""
    import h5py
    import numpy as np
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, f"series-{rows}.h5")
    if os.path.exists(path):
        return [path]
    rng = np.random.default_rng(0)
    with h5py.File(path + ".tmp", "w") as f:
        x = f.create_dataset("x", (rows, CHANNELS), "<f4")
        for start in range(0, rows, 1 << 20):
            n = min(1 << 20, rows - start)
            block = rng.standard_normal((n, CHANNELS), dtype=np.float32)
            block[:, 0] = np.arange(start, start + n, dtype=np.float32)  # exact below 2**24
            x[start:start + n] = block
        f["y"] = np.arange(rows, dtype=np.int64)
    os.rename(path + ".tmp", path)
    return [path]


def main():
    p = alternation_arguments(__doc__, VARIANTS, "windows")
    p.add_argument("--rows", type=int, default=1_000_000, help="steps of the series (1,000,000)")
    p.add_argument("--window", type=int, default=64, help="steps a window (64)")
    p.add_argument("--stride", type=int, default=16, help="steps between windows (16)")
    args = p.parse_args()
    if not 0 < args.window <= args.rows or args.stride <= 0 or args.rows > 1 << 24:
        p.error("needs 0 < --window <= --rows <= 2**24 and --stride > 0")
    check_alternation_arguments(args, "windows")
    paths = generate(args.workdir, args.rows)
    quarter = f"{max(1, args.rows * CHANNELS * 4 // 4 >> 20)}MiB"

    def env_of(r, v):
        return variant_env("follow" if v.startswith("follow") else
                           "native" if v == "native" else "connector", args.plugin_dir,
                           f"windows{r}{v}", args.stats_dir,
                           quarter if v.endswith("quarter") else None)

    alternate(CHILD, [json.dumps(paths), str(args.epochs)],
              [HERE, str(args.window), str(args.stride)],
              args.variants, args.rounds, args.epochs, "windows", env_of)


if __name__ == "__main__":
    main()

"""A virtual dataset over many source files: native h5py against the connector, alternated, cold.

    env/run python3 examples/bench/virtual.py [--rounds 2] [--epochs 3] [--plugin-dir DIR]
        [--variants native off default quarter] [--files 16] [--per-file 2500] [--held]
        [--filter gzip|bitshuffle|lzf|lz4|blosc|blosc2|bzip2] [--stats-dir DIR]

The layout of a dataset written in parts (one file per writer or per day of an instrument) and
joined by a virtual dataset: `images` (64x64 float32, 16 KiB a sample) maps FILES source files
of PER_FILE samples each (16 x 2,500 samples, 655 MB), `labels` (int64) is an ordinary dataset
beside it in the joining file. With --filter the sources are stored as detectors write them, a
chunk per image of photon counts (Poisson, mean 2; the first pixel holds the index), filtered:
  gzip        shuffle + deflate (--chunked), 15% of the raw size
  bitshuffle  bitshuffle + LZ4 (HDF5 filter 32008, as Eiger detectors write frames; the reads
              import bitshuffle.h5 to register it; --bitshuffle)
  lzf         shuffle + LZF (h5py's own filter, 32000)
  lz4         shuffle + HDF5's LZ4 filter (32004, a plugin in HDF5's plugin directory)
  blosc       Blosc with LZ4 and its byte shuffle (32001, a plugin in HDF5's plugin directory)
  blosc2      Blosc2 with LZ4 and its byte shuffle (32026, B2ND frames of one image; PyTables's
              filter, registered by importing tables in every process)
  bzip2       shuffle + bzip2 at level 9 (307, PyTables's; a plugin in HDF5's plugin directory)
The loop: a map-style Dataset that opens the joining file once
per process and reads `f["images"][i]` and `f["labels"][i]` (opening the datasets for every
sample, as most loaders do; --held keeps them open), DataLoader(shuffle=True,
batch_size=32, num_workers=2), every file written back and dropped from the page cache before
every epoch ("cold"). Runs, in this order in every round:

  native      no connector variables (HDF5's defaults)
  off         PRESCIENT_CACHE_VIRTUAL=0: the virtual dataset's reads forwarded, the labels cached
  default     the connector's defaults, no schedule: the virtual dataset cached too, its rows
              read raw from the source files (PRESCIENT_CACHE_VIRTUAL=raw; the cache holds it)
  quarter     as default, with PRESCIENT_CACHE_SIZE a quarter of the images (every epoch mixes
              hits and misses)

It prints one line per run and epoch (seconds, CPU seconds of the job's processes, the ratio of
the round's native epoch to the run's), then the median ratio per variant and epoch. Every
sample's bytes are checked (its image holds its index, as does its label).
"""

import json
import os
import sys

from per_sample import (alternate, alternation_arguments, check_alternation_arguments,
                        variant_env)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SIDE = 64
VARIANTS = ("native", "off", "default", "quarter")

CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[4])
import h5py
if sys.argv[6] == "bitshuffle":
    import bitshuffle.h5
if sys.argv[6] == "blosc2":
    import tables  # registers PyTables's Blosc2 filter with HDF5
from torch.utils.data import DataLoader, Dataset
from per_sample import timed_epochs

class Joined(Dataset):
    def __init__(self, path, held):
        self.path, self.held, self.file = path, held, None
        with h5py.File(path, "r") as f:
            self.n = len(f["labels"])
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        if self.file is None:
            self.file = h5py.File(self.path, "r")
            if self.held:
                self.file = {n: self.file[n] for n in ("images", "labels")}
        return self.file["images"][i], self.file["labels"][i]

paths, epochs = json.loads(sys.argv[1]), int(sys.argv[2])
loader = DataLoader(Joined(paths[0], sys.argv[5] == "held"), batch_size=32, shuffle=True,
                    num_workers=2)
json.dump(timed_epochs(loader, paths, epochs), open(sys.argv[3], "w"))
"""


def storage_of(filter_name):
    """create_dataset's keywords for a source stored with FILTER_NAME (None: contiguous)."""
    frame = {"chunks": (1, SIDE, SIDE)}
    if filter_name is None:
        return {}
    if filter_name == "gzip":
        return {**frame, "compression": "gzip", "shuffle": True}
    if filter_name == "bitshuffle":
        import bitshuffle.h5 as bsh
        return {**frame, "compression": bsh.H5FILTER,
                "compression_opts": (0, bsh.H5_COMPRESS_LZ4)}
    if filter_name == "lzf":
        return {**frame, "compression": "lzf", "shuffle": True}
    if filter_name == "lz4":
        return {**frame, "compression": 32004, "shuffle": True}
    if filter_name == "blosc":  # level 5, byte shuffle, LZ4
        return {**frame, "compression": 32001, "compression_opts": (0, 0, 0, 0, 5, 1, 1)}
    if filter_name == "blosc2":  # level 5, byte shuffle, LZ4
        return {**frame, "compression": 32026, "compression_opts": (0, 0, 0, 0, 5, 1, 1)}
    if filter_name == "bzip2":
        return {**frame, "compression": 307, "compression_opts": (9,), "shuffle": True}
    raise ValueError(filter_name)


def generate(workdir, files, per_file, filter_name):
    """The joining file first in the list, then its sources; written once (under temporary names,
    the joining file renamed last, when all is complete)."""
    import h5py
    import numpy as np
    if filter_name == "bitshuffle":
        import bitshuffle.h5  # noqa: F401 (registers the filter)
    if filter_name == "blosc2":
        import tables  # noqa: F401 (registers the filter)
    # The directory names of the first runs (gzip, bitshuffle) are kept.
    directory = os.path.join(workdir, f"files{files}-per{per_file}" +
                             (f"-{filter_name}" if filter_name else ""))
    os.makedirs(directory, exist_ok=True)
    joined = os.path.join(directory, "joined.h5")
    sources = [os.path.join(directory, f"part{k}.h5") for k in range(files)]
    if os.path.exists(joined):
        return [joined, *sources]
    layout = h5py.VirtualLayout((files * per_file, SIDE, SIDE), "<f4")
    for k, source in enumerate(sources):
        rng = np.random.default_rng(k)
        with h5py.File(source, "w") as h:
            first = k * per_file
            h.create_dataset("images", (per_file, SIDE, SIDE), "<f4", **storage_of(filter_name))
            for j in range(0, per_file, 500):  # 32 MB at a time
                n = min(500, per_file - j)
                rows = np.arange(first + j, first + j + n, dtype="<f4")
                if filter_name:
                    images = rng.poisson(2.0, (n, SIDE, SIDE)).astype("<f4")
                    images[:, 0, 0] = rows
                else:
                    images = np.broadcast_to(rows[:, None, None], (n, SIDE, SIDE))
                h["images"][j:j + n] = images
        # Named relative to the joining file, as a relocatable dataset is.
        layout[k * per_file:(k + 1) * per_file] = h5py.VirtualSource(
            os.path.basename(source), "images", shape=(per_file, SIDE, SIDE))
    with h5py.File(joined + ".tmp", "w") as h:
        h.create_virtual_dataset("images", layout)
        h["labels"] = np.arange(files * per_file, dtype=np.int64)
    os.rename(joined + ".tmp", joined)
    return [joined, *sources]


def main():
    p = alternation_arguments(__doc__, VARIANTS, "virtual")
    p.add_argument("--files", type=int, default=16, help="source files (16)")
    p.add_argument("--per-file", type=int, default=2500, help="samples per source file (2500)")
    p.add_argument("--held", action="store_true", help="keep the datasets open in each worker")
    p.add_argument("--filter", choices=("gzip", "bitshuffle", "lzf", "lz4", "blosc", "blosc2",
                                           "bzip2"),
                   help="sources chunked per image and filtered (see above); default contiguous")
    p.add_argument("--chunked", action="store_const", dest="filter", const="gzip",
                   help="the same as --filter gzip")
    p.add_argument("--bitshuffle", action="store_const", dest="filter", const="bitshuffle",
                   help="the same as --filter bitshuffle")
    args = p.parse_args()
    check_alternation_arguments(args, "virtual")
    paths = generate(args.workdir, args.files, args.per_file, args.filter)
    quarter = f"{args.files * args.per_file * SIDE * SIDE * 4 // 4 // (1 << 20)}MiB"
    def env_of(r, v):
        settings = {"PRESCIENT_CACHE_VIRTUAL": "0"} if v == "off" else {}
        return variant_env("native" if v == "native" else "connector", args.plugin_dir,
                           f"virtual{r}{v}", args.stats_dir, quarter if v == "quarter" else None,
                           settings)

    alternate(CHILD, [json.dumps(paths), str(args.epochs)],
              [HERE, "held" if args.held else "per-sample",
               args.filter if args.filter in ("bitshuffle", "blosc2") else "-"],
              args.variants, args.rounds, args.epochs, "virtual", env_of)

if __name__ == "__main__":
    main()

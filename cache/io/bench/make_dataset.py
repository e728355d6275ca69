"""Make the cache/io benchmark dataset and its raw layout.

    python3 make_dataset.py {contiguous|gzip} FILE.h5 LAYOUT.txt [--rows 20000]

20,000 float32 samples of 128x128 (64 KiB each, 1.25 GiB), as in
/work/shared/research/environment.md: contiguous, or gzip level 1 in chunks
of 32 samples. The data is a smooth field plus noise, so gzip has work to do.
"""
import argparse
import pathlib
import sys

import h5py
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tool"))
from raw_layout_h5py import raw_layout_text  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["contiguous", "gzip"])
    parser.add_argument("file")
    parser.add_argument("layout")
    parser.add_argument("--rows", type=int, default=20000)
    args = parser.parse_args()

    side = 128
    rng = np.random.default_rng(4)
    yy, xx = np.mgrid[0:side, 0:side].astype(np.float32)
    with h5py.File(args.file, "w") as f:
        kwargs = {}
        if args.kind == "gzip":
            kwargs = dict(chunks=(32, side, side), compression="gzip", compression_opts=1)
        dset = f.create_dataset("samples", shape=(args.rows, side, side), dtype="<f4", **kwargs)
        block = 1024  # a multiple of the chunk rows: each chunk is written once
        for start in range(0, args.rows, block):
            n = min(block, args.rows - start)
            phase = rng.uniform(0, 6.28, (n, 1, 1)).astype(np.float32)
            field = np.sin(xx / 9.0 + phase) * np.cos(yy / 13.0 - phase)
            noise = rng.normal(0, 0.05, (n, side, side)).astype(np.float32)
            dset[start:start + n] = np.round(field + noise, 3)
    with h5py.File(args.file, "r") as f:
        text = raw_layout_text(str(pathlib.Path(args.file).resolve()), f["samples"])
    pathlib.Path(args.layout).write_text(text)
    size = pathlib.Path(args.file).stat().st_size
    print(f"{args.kind}: {args.file} {size / 2**20:.1f} MiB, {args.rows} samples")


if __name__ == "__main__":
    main()

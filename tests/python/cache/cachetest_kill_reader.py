"""A reader for the kill tests: random whole-row reads of a slow (gzip, 256 KiB chunks)
dataset, one digest per line, flushed after every read so that progress is visible and a
SIGKILLed reader's work so far can still be checked.

    python3 cachetest_kill_reader.py FILE OUT.txt --reads N [--seed S] [--start K]
                                     [--laps L]
    python3 cachetest_kill_reader.py FILE --make ROWS

Every reader with the same seed reads the same rows in the same order (they contend for the
same loads); --start K begins K reads into that sequence (wrapping around); --laps L goes round it L times, so
that a reader meant to be killed is still running when its kill comes, however fast it started.
"""

import argparse
import hashlib

import numpy as np

ROW_SHAPE = (32, 1024)  # 64 KiB rows of int16
CHUNK_ROWS = 4


def make(path, rows):
    import h5py

    rng = np.random.default_rng(5)
    with h5py.File(path, "w") as f:
        data = rng.integers(0, 40, (rows, *ROW_SHAPE), dtype=np.int16)
        data[:, :, ::3] = np.arange(rows, dtype=np.int16)[:, None, None]  # every row differs
        f.create_dataset("x", data=data, chunks=(CHUNK_ROWS, *ROW_SHAPE), compression="gzip",
                         compression_opts=6, shuffle=True)


def plan(rows, reads, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(reads):
        if rng.random() < 0.5:
            a = int(rng.integers(0, rows - 8))
            out.append(list(range(a, a + int(rng.integers(1, 9)))))
        else:
            out.append(sorted(int(i) for i in rng.choice(rows, 8, replace=False)))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("out", nargs="?")
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--laps", type=int, default=1)
    parser.add_argument("--make", type=int)
    args = parser.parse_args()
    if args.make:
        make(args.file, args.make)
        return
    import h5py

    with h5py.File(args.file, "r") as f, open(args.out, "w", buffering=1) as out:
        x = f["x"]
        reads = plan(x.shape[0], args.reads, args.seed)
        for k in range(len(reads) * args.laps):
            i = (k + args.start) % len(reads)
            value = x[reads[i]]
            h = hashlib.sha1(f"{value.dtype.str}|{value.shape}|".encode())
            h.update(np.ascontiguousarray(value).tobytes())
            out.write(f"{i} {h.hexdigest()}\n")


if __name__ == "__main__":
    main()

"""One rank of the soak test (test_vol_soak.py): reads its schedule's rows and checks every byte.

    python3 voltest_soak_reader.py DATA SCHEDULE RANK WORKERS REPORT SECONDS

The rank's main process opens DATA (as a DataLoader's main process does for len()), then forks
WORKERS children that read like DataLoader workers: worker w reads steps w, w+W, ... of the rank's
epoch lists in the schedule (stored lists), epoch after epoch until SECONDS have passed, some
steps one row at a time and some as one sorted batch read. Every row is checked: row i of
version v of the file holds pattern(i, v); a row that is no version at all is wrong. What each
read saw is reported with its start time, so the test can check that no read starting well after
a rewrite of the file saw an older version.

Each worker writes its own report (REPORT.w<k>, rewritten every half second, so a killed worker
leaves one): rows checked, rows that were no version (with their start times: a read that raced
with a rewrite may see a torn row, as native HDF5 would), reads slower than 0.25 s (start,
duration), and the (time, row, version) of its reads.
"""

import json
import os
import sys
import time

import h5py
import numpy as np

from prescient_sampler import ScheduleFile

ROW = 1024  # float32 elements per row (4 KiB)
VERSIONS = 64


def offset(row, version):
    return float((row * 7 + version * 100003) % 65521)


def pattern(row, version):
    """Row `row` of version `version`: distinct for every row and version."""
    return np.arange(ROW, dtype=np.float32) + np.float32(offset(row, version))


def version_of(row, values):
    """Which version `values` is of row `row`, or None (no version: wrong bytes)."""
    if not np.array_equal(values, np.arange(ROW, dtype=np.float32) + values[0]):
        return None
    for v in range(VERSIONS):
        if offset(row, v) == float(values[0]):
            return v
    return None


def write_report(path, report):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as out:
        json.dump(report, out)
    os.replace(tmp, path)


def worker(data, schedule, rank, worker_index, workers, report_path, deadline):
    report = {"pid": os.getpid(), "rows": 0, "wrong": [], "errors": 0, "slow": [], "reads": []}
    sched = ScheduleFile(schedule)
    f = h5py.File(data, "r")
    d = f["x"]
    last_write = 0.0
    epoch = 0
    while time.monotonic() < deadline:
        samples, bounds = sched.part(rank, epoch % sched.header.epochs)
        for step in range(worker_index, len(bounds) - 1, workers):
            if time.monotonic() >= deadline:
                break
            rows = [int(s) for s in samples[bounds[step]:bounds[step + 1]]]
            batches = [sorted(set(rows))] if step % 3 == 0 else [[r] for r in rows]
            for batch in batches:
                start = time.time()
                t0 = time.monotonic()
                try:
                    values = d[batch] if len(batch) > 1 else d[batch[0]][None, :]
                except Exception:  # a truncated file makes HDF5 fail: not a wrong byte
                    report["errors"] += 1
                    continue
                took = time.monotonic() - t0
                if took > 0.25:  # the test sets these against the reader's own stops
                    report["slow"].append([start, took])
                for row, v in zip(batch, values):
                    seen = version_of(row, v)
                    report["rows"] += 1
                    if seen is None:
                        report["wrong"].append([start, row, v[:4].tolist()])
                    elif len(report["reads"]) < 50000:
                        report["reads"].append([start, row, seen])
            if time.monotonic() - last_write > 0.5:
                last_write = time.monotonic()
                write_report(report_path, report)
        epoch += 1
    write_report(report_path, report)


def main():
    data, schedule, rank, workers, report, seconds = sys.argv[1:7]
    rank, workers, deadline = int(rank), int(workers), time.monotonic() + float(seconds)
    with h5py.File(data, "r") as f:  # what a DataLoader's main process does for len()
        len(f["x"])
    pids = []
    for w in range(workers):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                worker(data, schedule, rank, w, workers, f"{report}.w{w}", deadline)
            except BaseException:
                code = 1
            os._exit(code)
        pids.append(pid)
    for pid in pids:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


if __name__ == "__main__":
    main()

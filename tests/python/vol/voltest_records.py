"""What a client read, recorded for a differential test: per read, its name, the dtype, the
shape and a digest of the values (with the mask of a masked array). The scripts that read
(voltest_netcdf.py, voltest_pytables.py) run in subprocesses, natively and with the connector,
and pickle their records (script_main); the tests load both and report the first difference
(voltest_support.check_client_reads)."""

import hashlib
import os
import pickle

import numpy as np


class Recorder:
    def __init__(self):
        self.records = []

    def add(self, name, value):
        value = np.asarray(value)
        mask = np.ma.getmaskarray(value) if np.ma.isMaskedArray(value) else None
        data = np.ma.getdata(value)
        if data.dtype.kind == "O":
            digest = hashlib.sha256(repr(data.tolist()).encode()).hexdigest()
        else:
            digest = hashlib.sha256(np.ascontiguousarray(data).tobytes()).hexdigest()
        if mask is not None:
            digest += hashlib.sha256(np.packbits(mask).tobytes()).hexdigest()[:16]
        self.records.append((name, str(data.dtype), data.shape, digest))

    def save(self, path):
        with open(path, "wb") as f:
            pickle.dump(self.records, f)


def load(path):
    with open(path, "rb") as f:
        return pickle.load(f)


def first_difference(expected, actual):
    """None when the two runs recorded the same reads; else what differs first."""
    if len(expected) != len(actual):
        return f"{len(expected)} reads natively, {len(actual)} through the connector"
    for want, got in zip(expected, actual):
        if want != got:
            return f"native {want}\nconnector {got}"
    return None


def in_forked_workers(rec, directory, items, read, workers=2):
    """As a DataLoader's forked workers: each child runs read(its recorder, item) for its share
    of `items` (every workers-th, through whatever handles the parent opened), saves its records
    in `directory` and leaves with os._exit; the parent adds them to `rec`, worker by worker."""
    children = []
    for w in range(workers):
        out = os.path.join(directory, f"worker-{w}.pkl")
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                mine = Recorder()
                for item in items[w::workers]:
                    read(mine, item)
                mine.save(out)
                status = 0
            finally:
                os._exit(status)
        children.append((pid, out))
    for pid, out in children:
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise RuntimeError(f"worker {pid} failed ({status})")
        rec.records.extend(load(out))
        os.unlink(out)


def script_main(argv, write, readers):
    """A client script's command line: `write DIR`, or `read CLIENT DIR OUT.pkl` with
    readers[CLIENT](DIR, recorder)."""
    if argv[1] == "write":
        write(argv[2])
        return 0
    rec = Recorder()
    readers[argv[2]](argv[3], rec)
    rec.save(argv[4])
    return 0

"""Clairvoyance for real loader shapes (issue 8), end to end and byte for byte.

Each case runs the benchmark's unmodified torch + h5py training loop (examples/bench/loop.py: a
map-style Dataset over sorted files, DistributedSampler, DataLoader with two workers) on a small
workload, with a schedule whose sample map names every file and field, and checks what a user
cares about: every sample of every field equals what was written (the loop checks each one
against the sums saved at generation), the schedule matched every read (no mismatches), the
prefetcher read ahead (rows_prefetched), and each field's rows counted on their own.

Cases: labels beside images (one file, two fields, a cache of a tenth of the data); labels in a
file of their own (PatchCamelyon's layout, format version 3); a schedule
made for `records_1` among same-shaped `records_0`/`records_1` (binds to records_1 only); batch
reads (`d[sorted(batch)]`); many gzip files of 128 samples with two fields (CosmoFlow-like, files
the main process never opens are prepared by the prefetch leader); one sample per file (read
into the page cache ahead of the loader, not prepared); 2 ranks
that do not move in lockstep. Timing is not checked here (examples/bench measures it).
"""

import os
import subprocess
import sys

import pytest

from voltest_support import read_stats, schedule_tool

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "..", "examples", "bench")
sys.path.insert(0, BENCH)




@pytest.fixture(scope="module")
def bench(runner, tmp_path_factory):
    if runner.stand_in:
        pytest.skip("tests prescient's schedules; the pass_through stand-in has none")
    import cachesize  # examples/bench (needs numpy, present in the environment)
    import runner as runner_mod
    import schedtool
    import workloads
    out = tmp_path_factory.mktemp("maps")
    tool = schedule_tool()
    caps = schedtool.capabilities(tool)
    assert caps["sample_maps"], "prescient-schedule generate takes --dataset once only"
    run = runner_mod.Runner(plugin_dir=runner.plugin_dir, out_dir=str(out), timeout_s=300,
                            log=lambda *_: None)
    return {"out": out, "tool": tool, "caps": caps, "runner": run, "workloads": workloads,
            "schedtool": schedtool, "runner_mod": runner_mod, "cachesize": cachesize}


def run_case(bench, name, recipe, *, fields=None, share=None, ranks=1, mode="sample", epochs=2,
             slowdown=(1.0,), compute_s=0.0, map_flags=None):
    w = bench["workloads"].ensure(str(bench["out"] / "workloads"), recipe, log=lambda *_: None)
    st = bench["schedtool"]
    flags = map_flags(w) if map_flags else st.map_args(w, bench["caps"], fields)[0]
    layout = st.layout_args(samples=w.samples, epochs=epochs, ranks=ranks, workers=2, batch=16,
                            seed=42)
    schedule = st.generate(bench["tool"], str(bench["out"] / f"{name}.sched"), layout, flags, None)
    cache_bytes = None
    if share is not None:
        cache_bytes = bench["cachesize"].segment_for_share(w, share)
    spec = bench["runner_mod"].Run(key=name, label=name, workload=w, mode=mode, ranks=ranks,
                                   workers=2, batch=16, epochs=epochs, connector=True,
                                   cache_bytes=cache_bytes, schedule=schedule, slowdown=slowdown,
                                   compute_s=compute_s)
    record = bench["runner"].run(spec)
    assert not record["failed_ranks"], record["warnings"]
    assert record["wrong_samples"] == 0
    # Nothing of HDF5's error stack reaches the job (a file the prefetch leader prepares while
    # the loader opens and closes it once printed "H5VLunwrap_object(): invalid object").
    assert not [w for w in record["warnings"] if "HDF5-DIAG" in w], record["warnings"]
    totals = record["stats"]["totals"]
    return record, totals


def fields_of(record):
    return record["stats"].get("fields") or {}


def test_labels_beside_images_small_cache(bench):
    w = bench["workloads"].recipe("imglab", samples=1024)
    record, totals = run_case(bench, "imglab", w, share=0.1)
    assert totals["schedule_mismatches"] == 0, totals
    assert totals["rows_prefetched"] > 0, totals
    fields = fields_of(record)
    assert set(fields) == {"images", "labels"}, fields
    # Labels are small: a handful of entries, not one storage read per label.
    assert fields["labels"]["rows_loaded"] + fields["labels"]["rows_prefetched"] <= 4 * 1024, fields


def test_schedule_for_records_1_binds_records_1_only(bench):
    w = bench["workloads"].recipe("dlio", files=2, samples_per_file=64)
    record, totals = run_case(bench, "records1", w, fields=["records_1"])
    assert totals["schedule_mismatches"] == 0, totals
    fields = fields_of(record)
    assert set(fields) == {"records_1"}, fields
    assert fields["records_1"]["rows_hit"] + fields["records_1"]["rows_loaded"] + \
        fields["records_1"]["rows_waited"] > 0, fields


def test_batch_reads_match_and_prefetch(bench):
    w = bench["workloads"].recipe("imglab", samples=1024)
    record, totals = run_case(bench, "batch", w, share=0.25, mode="batch")
    assert totals["schedule_mismatches"] == 0, totals
    assert totals["schedule_matches"] > 0, totals
    assert totals["rows_prefetched"] > 0, totals


def test_many_gzip_files_two_fields(bench):
    w = bench["workloads"].recipe("cosmo", files=4)
    record, totals = run_case(bench, "cosmo", w, share=0.5)
    assert totals["schedule_mismatches"] == 0, totals
    assert totals["rows_prefetched"] > 0, totals
    assert set(fields_of(record)) == {"full", "unitPar"}


def test_one_sample_per_file(bench):
    # A training step takes time (10 ms here): the prefetch leader reads ahead while it runs. With
    # none, 120 tiny files are read by the workers before a loaded machine schedules the leader.
    w = bench["workloads"].recipe("onefile", files=120)
    record, totals = run_case(bench, "onefile", w, compute_s=0.01)
    assert totals["schedule_mismatches"] == 0, totals
    # A file of one sample is not prepared through HDF5 ahead of the loader (its own open would
    # cost as much again): the leader reads it into the page cache instead, with no HDF5 call.
    assert totals["files_warmed"] > 0, totals


def test_labels_in_a_file_of_their_own(bench):
    """PatchCamelyon's layout: images in one file, labels in another (a schedule of format
    version 3). Each field binds to its own file, every read matches, and both are prefetched."""
    assert bench["caps"]["field_files"], "prescient-schedule cannot keep a field in a file of its own"
    w = bench["workloads"].recipe("pcam", samples=1024)

    def labels_first(workload):
        # The map's files are then the labels' and the images are the field kept elsewhere: the
        # prefetcher must open each field in its own file to read the images ahead.
        return ["--dataset", f"{workload.dir}/pcam_labels.h5:labels",
                "--dataset", f"{workload.dir}/pcam_images.h5:images", "--row-bytes", "8",
                "--row-bytes", "16384"]

    for name, flags in (("pcam", None), ("pcam-labels-first", labels_first)):
        record, totals = run_case(bench, name, w, share=0.25, map_flags=flags)
        assert totals["schedule_mismatches"] == 0, (name, totals)
        assert totals["schedule_matches"] > 0, (name, totals)
        fields = fields_of(record)
        assert set(fields) == {"images", "labels"}, (name, fields)
        assert fields["images"]["rows_prefetched"] > 0, (name, fields)
        # The labels (8 KB in all) are cached whole on their first read, or prefetched: every
        # read of them is counted as the bound field's.
        labels = fields["labels"]
        assert labels["rows_hit"] + labels["rows_loaded"] + labels["rows_waited"] >= 2 * 1024 - 1, \
            (name, fields)


# Reads every image of 4 files in order, a few milliseconds each, opening each file only when
# its first sample comes; the labels' files are never opened by the job.
_IMAGES_ONLY = """
import sys, time, h5py, numpy as np
directory, files, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for k in range(files):
    with h5py.File(f"{directory}/x_{k}.h5", "r") as f:
        for r in range(rows):
            assert int(f["x"][r][0]) == k * rows + r
            time.sleep(0.004)
"""


def test_the_prefetcher_opens_a_field_in_its_own_file(bench, runner, hdf5_threadsafe, tmp_path):
    """The prefetch leader prepares the datasets of files the job has not opened yet. A field kept
    in a file of its own is opened there: the labels, in files the job never opens, are read
    ahead all the same (and from the right file: the images' files have no `y`). With an HDF5
    that is not thread-safe the leader opens nothing itself: those labels are then not read
    ahead, and every read is still right."""
    h5py = pytest.importorskip("h5py")
    np = pytest.importorskip("numpy")
    files, rows = 4, 48
    for k in range(files):
        with h5py.File(tmp_path / f"x_{k}.h5", "w") as f:
            f["x"] = np.arange(k * rows, (k + 1) * rows, dtype=np.int64)[:, None] * np.ones(512, np.int64)
        with h5py.File(tmp_path / f"y_{k}.h5", "w") as f:
            f["y"] = np.full((rows, 512), k, dtype=np.int64)
    schedule = tmp_path / "pair.sched"
    subprocess.run([schedule_tool(), "generate", "--source", "sequential", "--epochs", "1",
                    "--dataset", f"{tmp_path}/x_*.h5:x", "--dataset", f"{tmp_path}/y_*.h5:y",
                    "--rows-per-file", str(rows), "--output", str(schedule), "--quiet"],
                   check=True, capture_output=True)
    stats = tmp_path / "stats"
    stats.mkdir()
    runner.python(_IMAGES_ONLY, [tmp_path, files, rows], "connector", tmp_path,
                  stats=stats / "stats.json",
                  extra={"PRESCIENT_NODE_ID": f"own-file-{os.getpid()}", "PRESCIENT_CACHE_SIZE": "64MiB",
                         "PRESCIENT_SCHEDULE": str(schedule)})
    (doc,) = read_stats(stats).values()
    fields = {f["field"]: f for f in doc["fields"]}
    assert doc["schedule_mismatches"] == 0 and doc["schedule_matches"] == files * rows, doc
    if hdf5_threadsafe:
        # The labels of the files after the first, at least, came in ahead of their (absent) reads.
        assert fields["y"]["rows_prefetched"] >= (files - 1) * rows, fields
    else:
        assert fields["y"]["rows_prefetched"] == 0, fields


# Reads the files in the order given, every row of each, until argv[3] seconds have passed, then
# exits (HDF5 terminates at exit, and the connector with it).
_READ_FOR_A_WHILE = """
import sys, time, h5py
paths, seconds = sys.argv[1].split(","), float(sys.argv[2])
end = time.monotonic() + seconds
for k, path in enumerate(paths):
    if time.monotonic() >= end:
        break
    with h5py.File(path, "r") as f:
        d = f["x"]
        for r in range(d.shape[0]):
            assert int(d[r][0]) == int(path.rsplit("_", 1)[1][:-3])
"""


@pytest.mark.parametrize("order", ["scheduled", "other"])
def test_a_process_never_hangs_while_its_prefetch_thread_opens_files(
        prescient, hdf5_threadsafe, tmp_path, order):
    """The prefetch thread opens files the job has not opened yet (one dataset per file), taking
    HDF5's lock for each. HDF5's termination at exit holds that lock and stops the connector,
    and a read that leaves the schedule stops following it from inside a read callback, under
    the same lock: neither may join a thread that waits for it (that hung the process). Each
    run ends at a different moment of the prefetching, the files read in the schedule's order
    (exit mid-prefetch) or in another (the schedule left mid-prefetch, then exit)."""
    if not hdf5_threadsafe:
        pytest.skip("the prefetch thread opens files only where HDF5 is thread-safe")
    h5py = pytest.importorskip("h5py")
    np = pytest.importorskip("numpy")
    files, rows = 1000, 64
    for k in range(files):
        with h5py.File(tmp_path / f"x_{k}.h5", "w") as f:
            f["x"] = np.full((rows, 512), k, dtype=np.int64)
    schedule = tmp_path / "files.sched"
    subprocess.run([schedule_tool(), "generate", "--source", "sequential", "--epochs", "1",
                    "--dataset", f"{tmp_path}/x_*.h5:x", "--rows-per-file", str(rows),
                    "--output", str(schedule), "--quiet"], check=True, capture_output=True)
    paths = sorted(str(tmp_path / f"x_{k}.h5") for k in range(files))  # the schedule's order
    if order == "other":
        paths = [str(tmp_path / f"x_{k}.h5") for k in range(files)]
    for run, seconds in enumerate([0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7]):
        try:
            prescient.python(_READ_FOR_A_WHILE, [",".join(paths), seconds], "connector", tmp_path,
                             timeout=60,
                             extra={"PRESCIENT_NODE_ID": f"exit-{order}-{run}-{os.getpid()}",
                                    "PRESCIENT_CACHE_SIZE": "256MiB",
                                    "PRESCIENT_SCHEDULE": str(schedule)})
        except subprocess.TimeoutExpired:
            pytest.fail(f"the process reading for {seconds} s hung (run {run})", pytrace=False)


# PatchCamelyon as loaders commonly read it (torchvision's PCAM among them): the images in
# `..._x.h5` (N, 96, 96, 3) and the labels in `..._y.h5` (N, 1, 1, 1), both files opened in
# every __getitem__, the label read as y[i, 0, 0, 0]. Prints a digest of every batch. A script
# file with a main guard: spawned and forkserver workers (Python 3.14's default) import it.
_PCAM_LOADER = """
import hashlib, sys, h5py, torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

class PatchCamelyon(Dataset):
    def __init__(self, root):
        self.root = root
    def __len__(self):
        with h5py.File(f"{self.root}/camelyonpatch_level_2_split_train_y.h5", "r") as f:
            return len(f["y"])
    def __getitem__(self, i):
        with h5py.File(f"{self.root}/camelyonpatch_level_2_split_train_x.h5", "r") as f:
            image = torch.from_numpy(f["x"][i])
        with h5py.File(f"{self.root}/camelyonpatch_level_2_split_train_y.h5", "r") as f:
            label = int(f["y"][i, 0, 0, 0])
        return image, label

if __name__ == "__main__":
    root, epochs = sys.argv[1], int(sys.argv[2])
    ds = PatchCamelyon(root)
    sampler = DistributedSampler(ds, num_replicas=1, rank=0, shuffle=True, seed=7)
    loader = DataLoader(ds, batch_size=16, sampler=sampler, num_workers=2)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        digest = hashlib.sha256()
        for images, labels in loader:
            digest.update(images.numpy().tobytes()); digest.update(labels.numpy().tobytes())
        print(epoch, digest.hexdigest())
"""


def test_patchcamelyon_as_its_loaders_read_it(bench, runner, tmp_path):
    """PatchCamelyon's own layout and file names, read the way its public loaders read it (both
    files opened per sample, the label as y[i, 0, 0, 0]), with a schedule made by
    prescient-schedule for the loader's DistributedSampler: the same batches as native, every
    read where the schedule says, both fields read ahead."""
    h5py = pytest.importorskip("h5py")
    np = pytest.importorskip("numpy")
    n, epochs = 512, 2
    rng = np.random.default_rng(3)
    with h5py.File(tmp_path / "camelyonpatch_level_2_split_train_x.h5", "w") as f:
        f.create_dataset("x", data=rng.integers(0, 256, (n, 96, 96, 3), dtype=np.uint8),
                         chunks=(1, 96, 96, 3))
    with h5py.File(tmp_path / "camelyonpatch_level_2_split_train_y.h5", "w") as f:
        f.create_dataset("y", data=rng.integers(0, 2, (n, 1, 1, 1), dtype=np.uint8))
    schedule = tmp_path / "pcam.sched"
    subprocess.run([schedule_tool(), "generate", "--source", "torch-distributed", "--epochs", str(epochs),
                    "--ranks", "1", "--workers", "2", "--batch-size", "16", "--seed", "7",
                    "--dataset", f"{tmp_path}/*_train_x.h5:x", "--dataset", f"{tmp_path}/*_train_y.h5:y",
                    "--rows", str(n), "--output", str(schedule), "--quiet"],
                   check=True, capture_output=True)
    script = tmp_path / "pcam_loader.py"
    script.write_text(_PCAM_LOADER)
    native = runner.run([script, tmp_path, epochs], "native", tmp_path).stdout
    stats = tmp_path / "stats"
    stats.mkdir()
    served = runner.run([script, tmp_path, epochs], "connector", tmp_path,
                        stats=stats / "stats.json",
                        extra={"PRESCIENT_NODE_ID": f"pcam-{os.getpid()}",
                               "PRESCIENT_CACHE_SIZE": "8MiB",  # a quarter of the images
                               "PRESCIENT_SCHEDULE": str(schedule)}).stdout
    assert served == native and len(native.splitlines()) == epochs
    totals, fields = {}, {}
    for doc in read_stats(stats).values():
        for key, value in doc.items():
            if isinstance(value, int) and not isinstance(value, bool):
                totals[key] = totals.get(key, 0) + value
        for f in doc["fields"]:
            fields.setdefault(f["field"], {})
            for key, value in f.items():
                if key != "field":
                    fields[f["field"]][key] = fields[f["field"]].get(key, 0) + value
    assert totals["schedule_mismatches"] == 0, totals
    assert totals["schedule_matches"] == 2 * n * epochs, totals  # an image and a label per sample
    assert fields["x"]["rows_prefetched"] > 0, fields
    assert totals["reads_forwarded"] == 0, totals


def test_ranks_not_in_lockstep(bench):
    w = bench["workloads"].recipe("imglab", samples=1024)
    record, totals = run_case(bench, "ranks", w, share=0.25, ranks=2, slowdown=(1.0, 1.5))
    assert totals["schedule_mismatches"] == 0, totals
    assert totals["rows_prefetched"] > 0, totals


def test_a_schedule_of_other_files_is_named_in_one_warning_per_process(bench):
    """A schedule file made for other data than the job reads is a user's mistake: each reading
    process says so once, and every read stays correct (LRU, no prefetch). A followed schedule
    (PRESCIENT_FOLLOW) names only what the followed loader read, so there the same finding is
    not a warning (tests/python/follow: a validation loader over another file)."""
    made_for = bench["workloads"].ensure(str(bench["out"] / "workloads"),
                                         bench["workloads"].recipe("imglab", samples=256),
                                         log=lambda *_: None)
    st = bench["schedtool"]
    flags, _ = st.map_args(made_for, bench["caps"], None)
    layout = st.layout_args(samples=made_for.samples, epochs=1, ranks=1, workers=2, batch=16,
                            seed=42)
    schedule = st.generate(bench["tool"], str(bench["out"] / "other.sched"), layout, flags, None)
    read = bench["workloads"].ensure(str(bench["out"] / "workloads"),
                                     bench["workloads"].recipe("imglab", samples=512),
                                     log=lambda *_: None)
    spec = bench["runner_mod"].Run(key="other", label="other", workload=read, mode="sample",
                                   ranks=1, workers=2, batch=16, epochs=1, connector=True,
                                   schedule=schedule)
    record = bench["runner"].run(spec)
    assert not record["failed_ranks"], record["warnings"]
    assert record["wrong_samples"] == 0
    named = [w for w in record["warnings"] if "but this process reads" in w]
    assert len(named) == 2, record["warnings"]  # one per worker (the main process reads nothing)
    assert all("warning" in w and "is not one of the schedule's files" in w for w in named), named
    assert record["stats"]["totals"]["schedule_matches"] == 0

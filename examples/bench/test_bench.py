"""Tests of the suites' pure parts and of one tiny run (pytest, inside the project environment):

    env/run python3 -m pytest -q -p no:cacheprovider examples/bench/test_bench.py

Workload recipes and generation, the loop's datasets against the saved sums, the statistics
arithmetic (per-field rows, bounds), cache sizes, the tool's capability detection, the Markdown
tables, and the rank launcher (a deadline ends a run whole). The tests marked `built` also run the
connector and need build/bench (examples/bench/run builds it; PRESCIENT_BUILD_DIR overrides); they
are skipped without it, or fail when PRESCIENT_REQUIRE_PLUGIN=1.
"""

import argparse
import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import cachesize  # noqa: E402
import counters  # noqa: E402
import runner  # noqa: E402
import schedtool  # noqa: E402
import result_tables  # noqa: E402
import workloads  # noqa: E402

BUILD = os.environ.get("PRESCIENT_BUILD_DIR", os.path.join(REPO, "build", "bench"))
PLUGINS = os.path.join(BUILD, "plugins")
TOOL = os.path.join(BUILD, "scheduler", "tool", "prescient-schedule")
_HAVE_BUILD = os.path.isdir(PLUGINS) and os.access(TOOL, os.X_OK)
if not _HAVE_BUILD and os.environ.get("PRESCIENT_REQUIRE_PLUGIN") == "1":
    raise RuntimeError(f"no connector build in {BUILD} (PRESCIENT_REQUIRE_PLUGIN=1 requires every test)")
built = pytest.mark.skipif(not _HAVE_BUILD, reason=f"needs a connector build in {BUILD} (set PRESCIENT_BUILD_DIR)")

# Every test runs without the connector unless it sets it up itself.
for _k in [k for k in os.environ if k.startswith("HDF5_VOL") or k.startswith("PRESCIENT_")]:
    if _k not in ("PRESCIENT_IN_ENV", "PRESCIENT_BUILD_DIR", "PRESCIENT_REQUIRE_PLUGIN"):
        del os.environ[_k]


# -- workloads ------------------------------------------------------------------------------------------

def test_recipes_describe_the_layouts_of_the_brief():
    img = workloads.recipe("imglab", samples=100)
    assert img.files == 1 and img.samples == 100
    assert [(f.name, f.row_bytes) for f in img.fields] == [("images", 16384), ("labels", 8)]
    cosmo = workloads.recipe("cosmo", files=3)
    assert cosmo.samples == 384 and cosmo.fields[0].row_bytes == 65536 and cosmo.fields[0].gzip == 1
    assert [f.name for f in cosmo.fields] == ["full", "unitPar"] and cosmo.fields[1].row_bytes == 16
    one = workloads.recipe("onefile", files=7)
    assert one.rows_per_file == 1 and one.samples == 7
    dlio = workloads.recipe("dlio", files=2, samples_per_file=5)
    assert [f.name for f in dlio.fields] == ["records_0", "records_1", "labels"] and dlio.samples == 10
    with pytest.raises(ValueError):
        workloads.recipe("imagenet", samples=1)


def test_recipe_keys_and_file_order():
    a = workloads.recipe("cosmo", files=12)
    assert a.key() == workloads.recipe("cosmo", files=12).key()
    assert a.key() != workloads.recipe("cosmo", files=13).key()
    names = a.file_names()
    assert names == sorted(names) and len(set(names)) == 12  # zero-padded: sorted order is id order
    big = workloads.recipe("onefile", files=12345).file_names()
    assert big == sorted(big)


def test_generated_workload_numbers_samples_over_sorted_files(tmp_path):
    w = workloads.ensure(str(tmp_path), workloads.recipe("dlio", files=3, samples_per_file=4), log=lambda m: None)
    assert w.samples == 12 and [os.path.basename(p) for p in w.files] == sorted(os.listdir(w.dir))[:3]
    assert w.locate(0) == (0, 0) and w.locate(5) == (1, 1) and w.locate(11) == (2, 3)
    with pytest.raises(IndexError):
        w.locate(12)
    import glob

    assert sorted(glob.glob(w.glob())) == w.files
    import h5py

    sums = np.load(w.sums_path)
    labels = []
    for i in range(w.samples):
        k, row = w.locate(i)
        with h5py.File(w.files[k], "r") as f:
            for field in w.fields:
                value = f[field.name][row]
                assert workloads.sample_sums(value, 1)[0] == sums[field.name][i]
            labels.append(int(f["labels"][row]))
    assert len(set(labels)) == w.samples  # a label served for another sample shows


def test_pcam_keeps_each_field_in_a_file_of_its_own(tmp_path):
    import h5py

    w = workloads.ensure(str(tmp_path), workloads.recipe("pcam", samples=30), log=lambda m: None)
    assert [os.path.basename(p) for p in w.files] == ["pcam_images.h5", "pcam_labels.h5"]
    assert w.samples == 30 and w.field_files == [w.files]
    sums = dict(np.load(w.sums_path))
    for path, field in zip(w.files, w.fields):
        with h5py.File(path, "r") as f:
            assert list(f) == [field.name] and len(f[field.name]) == 30
            for i in (0, 17, 29):
                assert workloads.sample_sums(f[field.name][i], 1)[0] == sums[field.name][i]


def test_generation_is_reused_for_the_same_recipe(tmp_path):
    messages = []
    rec = workloads.recipe("imglab", samples=40)
    w1 = workloads.ensure(str(tmp_path), rec, log=messages.append)
    mtime = os.path.getmtime(w1.files[0])
    w2 = workloads.ensure(str(tmp_path), rec, log=messages.append)
    assert w2.dir == w1.dir and os.path.getmtime(w2.files[0]) == mtime
    assert sum("generating" in m for m in messages) == 1
    w3 = workloads.ensure(str(tmp_path), workloads.recipe("imglab", samples=41), log=messages.append)
    assert w3.dir != w1.dir and w3.samples == 41
    workloads.remove_all(str(tmp_path))
    assert not os.listdir(tmp_path)


def test_cosmo_compresses_about_twice(tmp_path):
    w = workloads.ensure(str(tmp_path), workloads.recipe("cosmo", files=1), log=lambda m: None)
    assert 1.6 < w.raw_bytes / w.bytes < 2.6
    import h5py

    with h5py.File(w.files[0], "r") as f:
        assert f["full"].chunks == (1, 16, 16, 16, 4) and f["full"].compression == "gzip"
        assert f["unitPar"].chunks is None


# -- the loop's datasets (native h5py) ------------------------------------------------------------------

def _loop():
    import loop

    return loop


@pytest.mark.parametrize("kind", ["imglab", "cosmo", "onefile", "dlio", "pcam"])
def test_loop_dataset_returns_the_generated_bytes(tmp_path, kind):
    loop = _loop()
    kwargs = {"imglab": dict(samples=50), "cosmo": dict(files=1), "onefile": dict(files=9),
              "dlio": dict(files=3, samples_per_file=7), "pcam": dict(samples=50)}[kind]
    w = workloads.ensure(str(tmp_path), workloads.recipe(kind, **kwargs), log=lambda m: None)
    names = [f.name for f in w.fields]
    sums = dict(np.load(w.sums_path))
    ds = loop.Samples(w.field_files, w.rows_per_file, names, open_per_sample=kind == "onefile")
    items = [ds[i] for i in range(w.samples)]
    batch = loop._stack(items)
    assert loop.wrong_samples(batch, sums, names) == (0, w.samples)
    # A swapped sample is caught.
    swapped = (batch[0][::-1].copy(),) + batch[1:]
    assert loop.wrong_samples(swapped, sums, names)[0] > 0


def test_loop_batch_and_slice_reads(tmp_path):
    loop = _loop()
    w = workloads.ensure(str(tmp_path), workloads.recipe("imglab", samples=64), log=lambda m: None)
    names = [f.name for f in w.fields]
    sums = dict(np.load(w.sums_path))
    ds = loop.Samples(w.field_files, w.rows_per_file, names)
    batch = ds[[9, 3, 40, 3]]  # unsorted, with a duplicate (DistributedSampler's padding)
    assert batch[0].tolist() == [3, 3, 9, 40]
    assert loop.wrong_samples(batch, sums, names) == (0, 4)
    slices = loop.Slices(ds, 24)
    assert len(slices) == 3 and slices[2][0].tolist() == list(range(48, 64))
    assert loop.wrong_samples(slices[1], sums, names) == (0, 24)
    seen = []
    for b in loop.rows_in_process(ds, range(10), 4):
        assert loop.wrong_samples(b, sums, names)[0] == 0
        seen += b[0].tolist()
    assert seen == list(range(10))



@pytest.mark.parametrize("order", ["index-table", "file-then-row", "random-batches", "shuffled-blocks",
                                   "concat-unsorted", "random"])
def test_public_orders_read_every_sample_once_per_epoch(tmp_path, order):
    loop = _loop()
    several = order in ("file-then-row", "concat-unsorted")
    kind = dict(kind="dlio", files=4, samples_per_file=24) if several else dict(kind="imglab", samples=96)
    w = workloads.ensure(str(tmp_path), workloads.recipe(kind.pop("kind"), **kind), log=lambda m: None)
    names = [f.name for f in w.fields]
    sums = dict(np.load(w.sums_path))
    ds = loop.Samples(w.field_files, w.rows_per_file, names)
    config = {"mode": loop.PUBLIC_ORDERS[order], "sampler": order, "batch_size": 8, "workers": 0, "seed": 5}
    sampler, loader = loop.make_loader(config, ds, 0, 1)
    epochs = []
    for _ in range(2):
        ids = []
        for batch in loader:
            assert loop.wrong_samples(batch, sums, names)[0] == 0
            ids += np.asarray(batch[0]).tolist()
        assert sorted(ids) == list(range(w.samples))
        epochs.append(ids)
    # The index table is shuffled once: its order repeats, as the published loader's does.
    assert (epochs[0] == epochs[1]) == (order == "index-table")
    assert epochs[0] != sorted(epochs[0])
    if order == "file-then-row":  # each file's rows come together
        files = [i // 24 for i in epochs[0]]
        assert [k for j, k in enumerate(files) if j == 0 or files[j - 1] != k] == sorted(set(files), key=files.index)
    if order == "concat-unsorted":  # index i is the i-th row of the files taken 1, 3, 0, 2
        parts = loop.unsorted_concat(ds)
        assert [parts[i][0] for i in (0, 23, 24, 48, 72, 95)] == [24, 47, 72, 0, 48, 71]
    with pytest.raises(ValueError, match="one rank"):
        loop.make_loader(config, ds, 0, 2)
    with pytest.raises(ValueError, match="reads in mode"):
        loop.make_loader(dict(config, mode="rows"), ds, 0, 1)

# -- statistics arithmetic ------------------------------------------------------------------------------

def test_fields_are_merged_per_name():
    docs = [{"fields": [{"field": "images", "rows_loaded": 3, "rows_prefetched": 4},
                        {"field": "labels", "rows_loaded": 1}]},
            {"fields": [{"field": "images", "rows_read_around": 2, "rows_hit": 9}]},
            {"fields": []}, {}]
    merged = counters.merge_fields(docs)
    assert merged["images"]["rows_loaded"] == 3 and merged["images"]["rows_hit"] == 9
    assert counters.storage_rows(merged["images"]) == 9 and counters.storage_rows(merged["labels"]) == 1


def test_field_rows_exact_or_bounded():
    totals = {"rows_loaded": 1000, "rows_prefetched": 200, "rows_read_around": 0, "storage_bytes": 300 * 16384}
    exact = {"totals": totals, "fields": {"images": {"rows_loaded": 100, "rows_prefetched": 150}}}
    assert counters.field_storage_rows(exact, "images", ["labels"]) == (250, True, "fields block")
    qualified = {"totals": totals, "fields": {"/images": {"rows_loaded": 7}}}
    assert counters.field_storage_rows(qualified, "images", ["labels"])[:2] == (7, True)
    minus = {"totals": totals, "fields": {"labels": {"rows_loaded": 700}}}
    assert counters.field_storage_rows(minus, "images", ["labels"])[:2] == (500, True)
    none = {"totals": totals, "fields": {}}
    assert counters.field_storage_rows(none, "images", [])[:2] == (1200, True)
    rows, exact_, source = counters.field_storage_rows(none, "images", ["labels"], 16384)
    assert (rows, exact_) == (300, False) and "storage bytes" in source
    rows, exact_, source = counters.field_storage_rows(none, "full", ["unitPar"], None)  # compressed
    assert (rows, exact_) == (1200, False) and "totals" in source
    assert counters.stall_split({"stall_storage_ns": 2e9, "stall_wait_ns": 1e9, "stall_ns": 3e9}) == (2, 1, 3)
    assert counters.fallbacks({"fallback_written": 0, "fallback_file_changed": 2, "reads": 5}) == {
        "fallback_file_changed": 2}


# -- cache sizes ----------------------------------------------------------------------------------------

def test_cache_shares_hold_their_samples():
    w = workloads.Workload("/nonexistent", workloads.recipe("imglab", samples=8000))
    assert cachesize.blocks_per_sample(w.fields) == pytest.approx(4 + 8 / 4096)
    previous = 0
    for share in (0.05, 0.10, 0.25, 0.5, 1.0):
        size = cachesize.segment_for_share(w, share)
        cap = cachesize.capacity(size, w)
        assert cap["samples"] >= share * 8000
        # Within the 1 MiB rounding of the segment: no more than 64 samples of 16 KiB over.
        assert cap["samples"] < share * 8000 + 66
        assert size > previous
        previous = size
    cosmo = workloads.Workload("/nonexistent", workloads.recipe("cosmo", files=4))
    assert cachesize.blocks_per_sample(cosmo.fields) == pytest.approx(16 + 16 / 4096)
    assert cachesize.capacity(cachesize.segment_for_share(cosmo, 1.0), cosmo)["samples"] >= 512


# -- prescient-schedule capabilities --------------------------------------------------------------------

TODAY = """Options:
  --dataset FILE:NAME    fingerprint the HDF5 file FILE (size, mtime) and dataset NAME
  --rows N               dataset rows (default: --samples)
"""
MAPS = """Options:
  --dataset FILE_OR_GLOB:NAME   a field (repeat for more fields, in order);
                                every --dataset must name the same files
  --rows-per-file K             every file K rows, the last possibly fewer
"""


def test_capability_detection_from_help_texts():
    assert not schedtool._repeatable_dataset(TODAY)
    assert schedtool._repeatable_dataset(MAPS)
    assert not schedtool._repeatable_dataset("")


def test_map_arguments_follow_the_capabilities():
    img = workloads.Workload("/d", workloads.recipe("imglab", samples=10))
    cosmo = workloads.Workload("/d", workloads.recipe("cosmo", files=2))
    args, note = schedtool.map_args(img, {"sample_maps": False})
    assert args == ["--dataset", "/d/imglab.h5:images", "--row-bytes", "16384"] and "one field" in note
    assert schedtool.map_args(cosmo, {"sample_maps": False})[0] is None
    args, _ = schedtool.map_args(cosmo, {"sample_maps": True})
    # Files of a fixed number of samples say so: the map then needs no file opened to be built.
    assert args == ["--dataset", "/d/univ_*.h5:full", "--dataset", "/d/univ_*.h5:unitPar", "--row-bytes", "65536",
                    "--row-bytes", "16", "--rows-per-file", "128"]
    # PatchCamelyon's layout needs a tool that keeps a field in files of its own.
    pcam = workloads.Workload("/d", workloads.recipe("pcam", samples=10))
    assert schedtool.map_args(pcam, {"sample_maps": True})[0] is None
    args, note = schedtool.map_args(pcam, {"sample_maps": True, "field_files": True})
    assert args == ["--dataset", "/d/pcam_images.h5:images", "--dataset", "/d/pcam_labels.h5:labels",
                    "--row-bytes", "16384", "--row-bytes", "8"] and "file of its own" in note


def test_simulate_gives_the_cache_in_samples_or_in_bytes(tmp_path):
    # A stand-in for prescient-schedule that records its arguments and answers like `simulate --json`.
    fake = tmp_path / "fake-tool"
    fake.write_text("#!" + sys.executable + "\n"
                    "import json, sys\n"
                    "args = sys.argv[1:]\n"
                    "open(%r, 'a').write(json.dumps(args) + '\\n')\n"
                    "out = args[args.index('--json') + 1]\n"
                    "json.dump({'cache_samples': 7, 'bounds': {'belady': 3}, 'policies': [\n"
                    "    {'policy': 'belady', 'storage': 3, 'epochs': [{'storage': 2}, {'storage': 1}]},\n"
                    "    {'policy': 'lru', 'storage': 4, 'epochs': [{'storage': 2}, {'storage': 2}]}]}, open(out, 'w'))\n"
                    % str(tmp_path / "calls"))
    fake.chmod(0o755)
    sim = schedtool.simulate(str(fake), "s.sched", cache_samples=7)
    assert sim["policies"]["belady"] == {"storage": 3, "epochs": [2, 1]} and sim["policies"]["lru"]["storage"] == 4
    schedtool.simulate(str(fake), "s.sched", cache_bytes=8 << 20, block_bytes=4096)
    calls = [json.loads(line) for line in open(tmp_path / "calls")]
    first, second = calls
    assert first[first.index("--cache") + 1] == "7" and "--block-bytes" not in first
    # Bytes carry a unit: a bare number would be read as a count of samples.
    assert second[second.index("--cache") + 1] == "8192KiB"
    assert second[second.index("--block-bytes") + 1] == "4096"


# -- tables ---------------------------------------------------------------------------------------------

def _record(key, label, *, connector, epochs, tags, stats=None, mode="sample", ranks=1, prefetch=True):
    return {"key": key, "label": label, "workload": "imglab", "mode": mode, "ranks": ranks, "prefetch": prefetch,
            "connector": connector, "cache_bytes": 1 << 20, "cache_default": False, "schedule": "s" if connector
            else None, "schedule_note": "", "tags": tags, "stats": stats, "wrong_samples": 0, "timed_out": False,
            "failed_ranks": [], "shm_leftover": [],
            "workload_info": {"fields": [{"name": "images", "row_bytes": 16384, "gzip": 0},
                                         {"name": "labels", "row_bytes": 8, "gzip": 0}]},
            "epochs": [dict(epoch=i, seconds=s, wait_s=s / 2, bad_samples=0,
                            counters={"stall_storage_ns": 1e8, "stall_wait_ns": 2e8}) for i, s in enumerate(epochs)]}


def test_clairvoyance_table_judges_exact_and_bounded_figures():
    sim = {"policies": {"belady": {"storage": 1000}, "lru": {"storage": 1500}}, "capacity": {"samples": 400},
           "cache_counted": "samples"}
    tags = {"share": 0.05, "primary_field": "images", "other_fields": ["labels"], "simulation": sim}
    exact = _record("a", "exact", connector=True, epochs=[1.0, 0.5], tags=tags,
                    stats={"totals": {"schedule_matches": 10}, "fields": {"images": {"rows_loaded": 1040}}})
    off = _record("b", "off", connector=True, epochs=[1.0], tags=tags,
                  stats={"totals": {}, "fields": {"images": {"rows_loaded": 1100}}})
    bound = _record("c", "bound", connector=True, epochs=[1.0], tags=tags,
                    stats={"totals": {"rows_loaded": 90000, "storage_bytes": 2000 * 16384}, "fields": {}})
    results = {"suite": "clairvoyance", "config": {"quick": True}, "tool": {"sample_maps": False,
               "block_bytes": False}, "runs": [exact, off, bound]}
    rows = [result_tables.clairvoyance_row(r) for r in results["runs"]]
    assert [r["verdict"] for r in rows] == ["met", "MISSED", "unknown"]
    assert rows[0]["ratio"] == "1.040" and rows[2]["field_rows"] == 2000
    text = "\n".join(result_tables.markdown(results))
    assert "| <= 2,000 (images) |" in text and "met in 1 of 3 runs, unknown in 1" in text
    wrong = copy.deepcopy(exact)
    wrong["wrong_samples"] = 1
    assert result_tables.clairvoyance_row(wrong)["verdict"] == "MISSED"


def test_never_slower_table_pairs_every_prescient_epoch_with_its_baselines():
    base = _record("n", "native", connector=False, epochs=[2.0, 2.0], tags={"case": "cosmo", "role": "baseline",
                                                                            "baseline": "native"})
    base2 = _record("n2", "native rdcc", connector=False, epochs=[1.0, 1.0],
                    tags={"case": "cosmo", "role": "baseline", "baseline": "native-rdcc"})
    pre = _record("p", "Prescient", connector=True, epochs=[1.6, 1.0],
                  tags={"case": "cosmo", "role": "prescient", "baselines": ["native", "native-rdcc"]})
    results = {"suite": "never-slower", "config": {}, "tool": {}, "runs": [base, base2, pre], "notes": ["n1"]}
    rows = result_tables.never_slower_rows(results)
    assert [(r["baseline"], r["epoch"], round(r["ratio"], 2), r["verdict"]) for r in rows] == [
        ("native", 0, 1.25, "met"), ("native", 1, 2.0, "met"), ("native rdcc", 0, 0.62, "MISSED"),
        ("native rdcc", 1, 1.0, "met")]
    text = "\n".join(result_tables.markdown(results))
    assert "met in 3 of 4 epochs" in text and "- n1" in text


def test_never_slower_compares_each_run_with_the_native_runs_around_it():
    def native(bracket, seconds):
        return _record(f"n{bracket}", "native", connector=False, epochs=seconds,
                       tags={"case": "dlio", "role": "baseline", "baseline": "native", "bracket": bracket})

    def prescient(key, seconds, brackets):
        return _record(key, key, connector=True, epochs=seconds,
                       tags={"case": "dlio", "role": "prescient", "baselines": ["native"], "brackets": brackets})

    # Storage drifts slower over the case: each run is judged against its neighbours, not run 0.
    runs = [native(0, [1.0]), prescient("a", [1.1], [0, 1]), native(1, [1.2]), prescient("b", [1.5], [1, 2]),
            native(2, [1.6])]
    # CPU time the hypervisor stole during each epoch (machine noise), the native runs' averaged.
    for run, steal in zip(runs, [0.02, 0.0, 0.04, 2.5, 0.0]):
        run["epochs"][0]["steal_s"] = steal
    rows = result_tables.never_slower_rows({"suite": "never-slower", "runs": runs})
    assert [(r["run"], round(r["native_s"], 2), r["verdict"]) for r in rows] == [("a", 1.1, "met"),
                                                                                  ("b", 1.4, "MISSED")]
    assert rows[0]["baseline"] == "native (mean of the 2 runs around it)"
    assert [(round(r["native_steal_s"], 2), r["prescient_steal_s"], r["disturbed"]) for r in rows] == [
        (0.03, 0.0, False), (0.02, 2.5, True)]
    text = "\n".join(result_tables.never_slower_tables({"suite": "never-slower", "runs": runs}))
    assert "| MISSED (disturbed) |" in text and "| 0.02 | 2.50 | 0 |" in text
    # A disturbed native run is left out of its epoch's baseline when the other is calm.
    runs[2]["epochs"][0]["steal_s"] = 0.5
    rows = result_tables.never_slower_rows({"suite": "never-slower", "runs": runs})
    assert [round(r["native_s"], 2) for r in rows] == [1.0, 1.6]


def test_tables_command_prints_a_results_file(tmp_path):
    base = _record("n", "native", connector=False, epochs=[1.0], tags={"case": "dlio", "role": "baseline",
                                                                       "baseline": "native"})
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"suite": "never-slower", "config": {}, "tool": {}, "runs": [base]}))
    out = subprocess.run([sys.executable, os.path.join(HERE, "result_tables.py"), str(path)], capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith("### Suite never-slower")


# -- runs -----------------------------------------------------------------------------------------------

def test_a_native_run_and_a_deadline_that_ends_it_whole(tmp_path):
    w = workloads.ensure(str(tmp_path / "wl"), workloads.recipe("imglab", samples=64), log=lambda m: None)
    run = runner.Runner(plugin_dir="/nonexistent", out_dir=str(tmp_path / "out"), timeout_s=120)
    rec = run.run(runner.Run("ok", "native", w, epochs=2, workers=1, batch=16, ranks=2))
    assert not rec["timed_out"] and not rec["failed_ranks"] and rec["wrong_samples"] == 0
    assert [e["samples"] for e in rec["epochs"]] == [64, 64] and rec["stats"] is None
    assert all(e["steal_s"] >= 0.0 for e in rec["epochs"])
    run.timeout_s = 3
    rec = run.run(runner.Run("slow", "native", w, epochs=1, workers=1, batch=16, compute_s=30.0))
    assert rec["timed_out"]
    # Nothing of the run is left: no process still runs loop.py with the run's configuration.
    config = os.path.join(str(tmp_path / "out"), "runs", "slow")
    left = subprocess.run(["pgrep", "-f", config], capture_output=True, text=True).stdout.split()
    assert left == []


def test_a_warm_run_is_configured_warm_and_filed_apart(tmp_path):
    w = workloads.ensure(str(tmp_path / "wl"), workloads.recipe("imglab", samples=32), log=lambda m: None)
    run = runner.Runner(plugin_dir="/nonexistent", out_dir=str(tmp_path / "out"), timeout_s=120)
    for key, cold in (("cold", True), ("warm", False)):
        rec = run.run(runner.Run(key, "native", w, epochs=1, workers=0, batch=16, cold=cold))
        assert rec["cold"] is cold and rec["wrong_samples"] == 0 and not rec["failed_ranks"]
        config = json.load(open(tmp_path / "out" / "runs" / key / "config-r0.json"))
        assert config["cold"] is cold  # loop.py drops the files before an epoch only when cold
    # (suites.py is not imported here: it clears PRESCIENT_* from the environment, as a bench run must.)
    assert result_tables.output_name("never-slower", True) == "never-slower-warm"
    assert result_tables.output_name("never-slower", False) == "never-slower"


@built
def test_a_scheduled_run_through_the_connector(tmp_path):
    w = workloads.ensure(str(tmp_path / "wl"), workloads.recipe("imglab", samples=256), log=lambda m: None)
    caps = schedtool.capabilities(TOOL)
    flags, _ = schedtool.map_args(w, caps)
    layout = schedtool.layout_args(samples=w.samples, epochs=2, ranks=2, workers=1, batch=16, seed=3)
    sched = schedtool.generate(TOOL, str(tmp_path / "s.sched"), layout, flags, None)
    run = runner.Runner(plugin_dir=PLUGINS, out_dir=str(tmp_path / "out"), timeout_s=300)
    size = cachesize.segment_for_share(w, 1.0)
    rec = run.run(runner.Run("pre", "Prescient", w, epochs=2, workers=1, batch=16, ranks=2, seed=3, connector=True,
                             cache_bytes=size, schedule=sched))
    assert not rec["timed_out"] and not rec["failed_ranks"] and rec["wrong_samples"] == 0
    assert rec["stats"]["totals"]["reads"] >= 2 * w.samples
    assert rec["stats"]["totals"]["schedule_matches"] > 0
    assert all(e["counters"] for e in rec["epochs"])
    assert not [p for p in os.listdir("/dev/shm") if f"bench-{os.getpid()}-" in p]
    sim = schedtool.simulate(TOOL, sched, cache_samples=cachesize.capacity(size, w)["samples"])
    assert sim["policies"]["belady"]["storage"] == w.samples  # the cache holds everything: compulsory only


def test_never_slower_variants_are_narrowed_and_alternated_with_another_build():
    import never_slower
    args = argparse.Namespace(follow=True, quick=False, variants=None, against=None)
    suite = never_slower.Suite.__new__(never_slower.Suite)
    suite.args = args
    keys = lambda case, sched, r=0: [v.key for v in suite.round_variants(case, sched, r)]
    assert keys("imglab-dl", "s.sched") == list(never_slower.VARIANT_KEYS)
    assert keys("imglab-rows", "s.sched") == ["lru-default", "lru-quarter", "sched-default", "sched-quarter"]
    assert keys("imglab-dl", None) == ["lru-default", "lru-quarter", "follow-default", "follow-quarter"]
    assert keys("shape-list", None) == ["follow-default", "follow-quarter"]
    args.variants = ["follow-default", "lru-quarter"]
    assert keys("imglab-batch", "s.sched") == ["lru-quarter", "follow-default"]
    args.against = ["/other/plugins", "PRESCIENT_PREFETCH=0"]
    assert keys("imglab-batch", "s.sched", 0) == ["lru-quarter", "lru-quarter-against", "follow-default",
                                                  "follow-default-against"]
    assert keys("imglab-batch", "s.sched", 1) == ["lru-quarter-against", "lru-quarter", "follow-default-against",
                                                  "follow-default"]
    runs = suite.round_variants("imglab-batch", "s.sched", 0)
    assert [v.plugin_dir for v in runs] == [None, "/other/plugins"] * 2
    assert [v.env for v in runs] == [None, {"PRESCIENT_PREFETCH": "0"}] * 2
    assert runs[0].label == "Prescient, no schedule, quarter cache"
    assert runs[1].label == "Prescient (--against), no schedule, quarter cache"
    assert never_slower.against_of(["A=1", "B=x=y"]) == (None, {"A": "1", "B": "x=y"})
    with pytest.raises(ValueError):
        never_slower.against_of(["/a", "/b"])
    assert runs[2].schedule is never_slower.FOLLOW and runs[1].share == 0.25


def test_never_slower_warms_the_machine_up_with_a_native_epoch_no_table_judges(tmp_path):
    import never_slower

    class FakeRunner:
        def __init__(self):
            self.specs = []

        def run(self, spec):
            self.specs.append(spec)
            seconds = [9.0] * spec.epochs if spec.key == "warm-up" else [1.0] * spec.epochs
            return _record(spec.key, spec.label, connector=spec.connector, epochs=seconds, tags=spec.tags)

    def suite_with(warm_up):
        args = argparse.Namespace(follow=False, quick=False, variants=["follow-default"], against=None,
                                  warm_up=warm_up, cases=["shape-list", "shape-files"], batch=32, epochs=2,
                                  seed=1, persistent_workers=False, compute_ms=0.0, main_opens=False,
                                  rounds=1, out=str(tmp_path))
        suite = never_slower.Suite(args, FakeRunner(), None, {}, str(tmp_path), lambda *_: None)
        suite.workload = lambda case: argparse.Namespace(samples=4, files=["f"], bytes=1 << 20, case=case)
        return suite, suite.run()

    suite, extra = suite_with(True)
    specs = suite.runner.specs
    assert specs[0].key == "warm-up" and specs[0].epochs == 1 and not specs[0].connector
    assert specs[0].tags == {"case": "shape-list", "role": "warm-up"} and specs[0].sampler == "index-table"
    assert [s.key for s in specs[1:4]] == ["shape-list-native", "shape-list-follow-default", "shape-list-native-1"]
    assert sum(s.key == "warm-up" for s in specs) == 1  # once per invocation, not per case
    assert any(n.startswith("warm-up:") for n in extra["notes"])
    # The warm-up's 9 s epoch is nobody's baseline: every ratio is 1.0 s / 1.0 s.
    records = [FakeRunner().run(s) for s in specs]
    rows = result_tables.never_slower_rows({"suite": "never-slower", "config": {}, "tool": {}, "runs": records})
    assert rows and all(r["ratio"] == 1.0 for r in rows)
    suite, _ = suite_with(False)
    assert all(s.key != "warm-up" for s in suite.runner.specs)


def test_never_slower_rounds_are_judged_by_their_median_ratio():
    def native(bracket, seconds):
        return _record(f"n{bracket}", "native", connector=False, epochs=seconds,
                       tags={"case": "dlio", "role": "baseline", "baseline": "native", "bracket": bracket})

    def prescient(key, seconds, brackets, round_, bad=0):
        r = _record(key, "Prescient A", connector=True, epochs=seconds,
                    tags={"case": "dlio", "role": "prescient", "baselines": ["native"], "brackets": brackets,
                          "round": round_})
        r["wrong_samples"] = bad
        return r

    # Epoch 0: ratios 1.2, 0.9, 1.1 (median 1.1, met); epoch 1: 0.8, 1.05, 0.9 (median 0.9, missed).
    runs = [native(0, [1.2, 1.0]), prescient("a", [1.0, 1.25], [0, 1], 0), native(1, [1.2, 1.0]),
            prescient("a-r1", [1.0 / 0.9 * 1.2, 1.0 / 1.05], [1, 2], 1), native(2, [1.2, 1.0]),
            prescient("a-r2", [1.2 / 1.1, 1.0 / 0.9], [2, 3], 2), native(3, [1.2, 1.0])]
    results = {"suite": "never-slower", "config": {}, "tool": {}, "runs": runs}
    medians = result_tables.never_slower_medians(result_tables.never_slower_rows(results))
    assert [(m["epoch"], m["rounds"], round(m["median"], 2), round(m["low"], 2), m["rounds_met"], m["verdict"])
            for m in medians] == [(0, 3, 1.1, 0.9, 2, "met"), (1, 3, 0.9, 0.8, 1, "MISSED")]
    text = "\n".join(result_tables.markdown(results))
    assert "met in 1 of 2 epochs" in text and "| 3 | 3 | 1.10 | 0.90 | 1.20 | 2 of 3 | met |" in text
    # The summary: one line per Prescient run, its epochs' medians side by side.
    assert "| case | Prescient run | cache | epoch 0 | epoch 1 |" in text
    assert "| dlio | Prescient A | 1 MiB | 1.10 | 0.90 |" in text
    # An epoch is judged on its rounds the hypervisor did not disturb: round 1's Prescient run lost
    # 30% of the (2-CPU) machine in epoch 0; round 2's native run after it lost 10% in epoch 1, so
    # that round's baseline is the native run before it alone.
    results["machine_before"] = {"cpus": 2}
    results["tool"] = {"sample_maps": True, "block_bytes": True}
    runs[3]["epochs"][0]["steal_s"] = 0.3 * 2 * runs[3]["epochs"][0]["seconds"]
    runs[6]["epochs"][1]["steal_s"] = 0.1 * 2 * 1.0
    runs[0]["epochs"][1]["steal_s"] = 0.04 * 2 * 1.0  # below the limit
    medians = result_tables.never_slower_medians(result_tables.never_slower_rows(results))
    assert [(m["epoch"], m["judged"], round(m["median"], 2), m["verdict"]) for m in medians] == [
        (0, 2, 1.15, "met"), (1, 3, 0.9, "MISSED")]
    text = "\n".join(result_tables.markdown(results))
    assert "| 3 | 2 | 1.15 | 1.10 | 1.20 | 2 of 3 | met |" in text and "| MISSED (disturbed) |" in text
    # Every round disturbed: judged on all of them, and said so.
    for r in runs:
        for e in r["epochs"]:
            e["steal_s"] = e["seconds"]
    medians = result_tables.never_slower_medians(result_tables.never_slower_rows(results))
    assert [(m["judged"], round(m["median"], 2)) for m in medians] == [(0, 1.1), (0, 0.9)]
    text = "\n".join(result_tables.markdown(results))
    assert "(2 judged on disturbed rounds only)" in text and "| dlio | Prescient A | 1 MiB | 1.10* | 0.90* |" in text
    for r in runs:
        for e in r["epochs"]:
            e.pop("steal_s")
    del results["machine_before"]
    # A wrong byte in any round misses the epoch whatever the median.
    runs[3] = prescient("a-r1", [1.0 / 0.9 * 1.2, 1.0 / 1.05], [1, 2], 1, bad=1)
    medians = result_tables.never_slower_medians(result_tables.never_slower_rows({"suite": "never-slower", "runs": runs}))
    assert [m["verdict"] for m in medians] == ["MISSED", "MISSED"]
    assert result_tables.never_slower_summary(medians)[2] == "| dlio | Prescient A | 1 MiB | 1.10! | 0.90! |"


# -- a public loader, side by side -----------------------------------------------------------------------

def test_public_loader_ratio_table_pairs_each_round_with_its_native_run():
    import public_loader
    runs = [{"variant": "native", "round": 0, "epochs": [{"seconds": 2.0}, {"seconds": 2.0}]},
            {"variant": "lru", "round": 0, "epochs": [{"seconds": 2.5}, {"seconds": 1.0}]},
            {"variant": "native", "round": 1, "epochs": [{"seconds": 4.0}, {"seconds": 2.0}]},
            {"variant": "lru", "round": 1, "epochs": [{"seconds": 4.0}, {"seconds": 4.0}]}]
    table = public_loader.ratio_table(runs, 2).splitlines()
    # epoch 0: 2.0 / 2.5 = 0.8 and 4.0 / 4.0 = 1.0, median 0.9; epoch 1: 2.0 and 0.5, median 1.25
    assert table[2] == "| lru | 0.90 (2.50, 4.00 s) | 1.25 (1.00, 4.00 s) |", table
    assert table[3] == "| native | 2.00, 4.00 s | 2.00, 2.00 s |", table


def test_public_loader_variant_with_settings_runs_beside_the_plain_one():
    import public_loader
    name = "lru:PRESCIENT_BUSY_UNKEPT_RUN=256KiB,PRESCIENT_LOG=info"
    assert public_loader.variant_name(name) == name
    env = public_loader.variant_env(name, "/plugins", "/stats.json")
    assert env["PRESCIENT_BUSY_UNKEPT_RUN"] == "256KiB" and env["PRESCIENT_LOG"] == "info"
    assert env["HDF5_VOL_CONNECTOR"] == "prescient"
    assert "PRESCIENT_BUSY_UNKEPT_RUN" not in public_loader.variant_env("lru", "/plugins", "/s.json")
    # HDF5's own pass-through connector: no Prescient variable, nothing of ours loaded.
    env = public_loader.variant_env("hdf5-pass-through", "/plugins", "/s.json")
    assert env["HDF5_VOL_CONNECTOR"].startswith("pass_through under_vol=0;")
    assert "HDF5_PLUGIN_PATH" not in env and not any(k.startswith("PRESCIENT_") for k in env)
    for bad in ("native:PRESCIENT_LOG=info", "lru:LOG=info", "lru:PRESCIENT_LOG", "fast",
                "hdf5-pass-through:PRESCIENT_LOG=info"):
        with pytest.raises(argparse.ArgumentTypeError):
            public_loader.variant_name(bad)
    # Each variant its own row of the table, in the order run.
    runs = [{"variant": v, "round": 0, "epochs": [{"seconds": 2.0}]} for v in ("native", name, "lru")]
    rows = public_loader.ratio_table(runs, 1).splitlines()
    assert rows[2].startswith(f"| {name} | 1.00") and rows[3].startswith("| lru | 1.00"), rows


def test_public_loader_stands_in_for_modules_a_loader_imports_and_never_calls():
    import public_loader
    public_loader._stand_in_modules({"prescient_absent.colour": ["label2rgb"],
                                     "json": ["not_there"]})
    from prescient_absent.colour import label2rgb  # the parent was made too
    with pytest.raises(RuntimeError, match="stand-in"):
        label2rgb()
    assert not hasattr(json, "not_there")  # an installed module is left alone
    del sys.modules["prescient_absent.colour"], sys.modules["prescient_absent"]


@built
def test_public_loader_harness_runs_a_deepcam_shaped_loader_exactly(tmp_path):
    """The harness end to end with its stand-in of DeepCAM's shape (the public source is not
    fetched in tests): every variant's batches equal native's, the follower followed. Its `data`
    (48x64x16 float32, 192 KiB a file) is above PRESCIENT_MIN_DATASET_BYTES' 128 KiB, so cached."""
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, os.path.join(HERE, "public_loader.py"), "deepcam", "--src",
                           "stand-in", "--files", "24", "--height", "48", "--width", "64", "--epochs", "2",
                           "--rounds", "1", "--plugin-dir", PLUGINS, "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "every batch equal to native's" in proc.stdout
    with open(out / "public-loader.json") as f:
        report = json.load(f)
    assert report["wrong"] == []
    by_variant = {r["variant"]: r for r in report["runs"]}
    assert set(by_variant) == {"native", "lru", "follow"}
    assert by_variant["lru"]["stats"]["reads_served"] > 0
    # Followed, with the default start method's workers: forked (Python 3.13) or from a
    # forkserver (3.14). The stand-in imports h5py in __getitem__, so a forkserver's workers load
    # the connector in their first fetch (the follower once never looked for it again: 0 matches).
    assert by_variant["follow"]["stats"]["schedule_matches"] > 0


def test_read_cost_takes_the_read_and_the_total_from_callgrind_annotate():
    import read_cost
    text = """--------------------------------------------------------------------------------
1,469,576,199 (100.0%)  PROGRAM TOTALS
--------------------------------------------------------------------------------
  524,227,271 (35.67%)  ???:0x000000000001ed80 [/usr/lib/python3/dist-packages/h5py/defs.so]
  501,287,271 (34.11%)  ???:H5Dread [/usr/lib/x86_64-linux-gnu/libhdf5_serial.so.310.5.0]
  482,027,459 (32.80%)  ???:H5VL_dataset_read [/usr/lib/x86_64-linux-gnu/libhdf5_serial.so]
"""
    assert read_cost.parse_annotate(text) == (501_287_271, 1_469_576_199)
    assert read_cost.parse_annotate(text.replace(":H5Dread ", ":H5Dwrite ")) is None


def test_read_cost_loader_child_runs_and_only_followed_enables_the_follower(tmp_path):
    import h5py
    import numpy as np
    import read_cost
    path = str(tmp_path / "imglab.h5")
    with h5py.File(path, "w") as f:
        f["images"] = np.arange(40 * 8, dtype=np.float32).reshape(40, 8)
        f["labels"] = np.arange(40, dtype=np.int64)
    native = read_cost.variant_env("native", "/nowhere", None)
    subprocess.run([sys.executable, "-c", read_cost.LOADER_CHILD, path, "2"], env=native,
                   check=True, capture_output=True, timeout=300)
    followed = read_cost.variant_env("followed", "/plugins", None)
    assert followed["PRESCIENT_FOLLOW"] == "1"
    assert followed["PYTHONPATH"].split(os.pathsep)[0] == os.path.join(read_cost.REPO, "python")
    assert followed["HDF5_VOL_CONNECTOR"] == "prescient"
    loader = read_cost.variant_env("loader", "/plugins", None)
    assert "PRESCIENT_FOLLOW" not in loader and loader["HDF5_VOL_CONNECTOR"] == "prescient"


def test_public_loader_well_layout_has_what_the_wells_module_reads(tmp_path):
    import h5py
    import yaml

    import public_loader
    d = str(tmp_path)
    train = public_loader.make_well_files(d, 2, 3, 8, 4, 6, log=lambda *_: None)
    root = os.path.join(d, public_loader.WELL_NAME)
    # The data module's training split is the harness's train directory (made cold per epoch).
    assert os.path.samefile(os.path.join(root, "data", "train"), train)
    names = sorted(os.listdir(train))
    assert len(names) == 2 and all(n.endswith(".hdf5") for n in names)
    for split in ("valid", "test"):
        assert len(os.listdir(os.path.join(root, "data", split))) == 1
    with open(os.path.join(root, "stats.yaml")) as f:
        stats = yaml.safe_load(f)
    assert {"mean", "std", "mean_delta", "std_delta"} <= stats.keys()
    with h5py.File(os.path.join(train, names[0]), "r") as f:
        assert f.attrs["n_trajectories"] == 3 and f.attrs["n_spatial_dims"] == 2
        assert f["dimensions"]["time"].shape == (8,)
        assert [f["dimensions"][d].shape[-1] for d in f["dimensions"].attrs["spatial_dims"]] == [4, 6]
        assert f["t0_fields/density"].shape == (3, 8, 4, 6)
        assert f["t1_fields/velocity"].shape == (3, 8, 4, 6, 2)
        assert list(f["t1_fields"].attrs["field_names"]) == ["velocity"]
        for bc in f["boundary_conditions"].values():
            assert bc.attrs["bc_type"] in ("OPEN", "PERIODIC") and bc["mask"][0]
    # The same recipe again reuses the files.
    before = os.stat(os.path.join(train, names[0])).st_mtime_ns
    public_loader.make_well_files(d, 2, 3, 8, 4, 6, log=lambda *_: None)
    assert os.stat(os.path.join(train, names[0])).st_mtime_ns == before


def test_public_loader_h5torch_layout_is_a_csr_matrix_with_its_attributes(tmp_path):
    """What h5torch's Dataset reads of a csr central object and an aligned array: the
    attributes its File and Dataset check, and rows whose indices are distinct genes in
    increasing order (a dense row is filled from them)."""
    import h5py
    import numpy as np

    import public_loader
    d = str(tmp_path)
    train = public_loader.make_h5torch_files(d, 300, 500, log=lambda *_: None)
    with h5py.File(os.path.join(train, public_loader.H5TORCH_FILE), "r") as f:
        central = f["central"]
        assert list(central.attrs["shape"]) == [300, 500] and central.attrs["mode"] == "csr"
        assert list(central.attrs["dtypes"]) == ["float32", "float32"]
        assert central.attrs["filled_to"] == 300 and not central.attrs["load_sparse"]
        indptr, indices, data = central["indptr"][:], central["indices"][:], central["data"][:]
        assert indptr[0] == 0 and indptr[-1] == len(indices) == len(data)
        per_cell = np.diff(indptr)
        assert per_cell.min() >= 50 and per_cell.max() <= 500
        for i in range(300):
            row = indices[indptr[i]:indptr[i + 1]]
            assert (np.diff(row) > 0).all() and row[0] >= 0 and row[-1] < 500
        assert (data >= 1).all() and data.dtype == np.float32 and indices.dtype == np.int32
        label = f["0/celltype"]
        assert label.shape == (300,) and label.attrs["mode"] == "N-D"
        assert label.attrs["filled_to"] == 300 and list(label.attrs["shape"]) == [300]


def test_public_loader_robomimic_layout_is_a_group_per_demonstration(tmp_path):
    """What robomimic's SequenceDataset reads of a robosuite image dataset: each demonstration's
    group with its num_samples attribute, the cameras as uint8 images and the low-dimensional
    keys in obs and next_obs, the actions, rewards and dones it holds in memory, the train mask."""
    import h5py
    import numpy as np

    import public_loader
    train = public_loader.make_robomimic_files(str(tmp_path), 3, 7, log=lambda *_: None)
    with h5py.File(os.path.join(train, public_loader.ROBOMIMIC_FILE), "r") as f:
        assert sorted(f["data"]) == ["demo_0", "demo_1", "demo_2"]
        assert f["data"].attrs["total"] == 21 and "env_args" in f["data"].attrs
        for k in range(3):
            demo = f[f"data/demo_{k}"]
            assert demo.attrs["num_samples"] == 7
            assert demo["actions"].shape == (7, 7) and demo["dones"][-1] == 1
            for prefix in ("obs", "next_obs"):
                for camera in public_loader.ROBOMIMIC_CAMERAS:
                    image = demo[f"{prefix}/{camera}"]
                    assert image.shape == (7, 84, 84, 3) and image.dtype == np.uint8
                for key, width in public_loader.ROBOMIMIC_LOW_DIM.items():
                    assert demo[f"{prefix}/{key}"].shape == (7, width)
        assert [d.decode() for d in f["mask/train"][:]] == ["demo_0", "demo_1", "demo_2"]


def test_public_loader_salt_layout_is_compound_jets_and_tracks(tmp_path):
    """What salt's SaltDataset reads with GN2's configuration: compound jets and tracks with
    every variable and label it asks for, tracks padded past each jet's count (valid False,
    zeros), chunks of 100 jets, and the fields it reads fewer than those stored (so each read
    is of some of the stored members)."""
    import h5py
    import numpy as np

    import public_loader
    train = public_loader.make_salt_files(str(tmp_path), 250, "lzf", log=lambda *_: None)
    with h5py.File(os.path.join(train, public_loader.SALT_FILE), "r") as f:
        jets, tracks = f["jets"], f["tracks"]
        assert jets.shape == (250,) and tracks.shape == (250, public_loader.SALT_TRACKS)
        assert tracks.chunks == (100, public_loader.SALT_TRACKS)
        assert tracks.compression == "lzf" and jets.compression == "lzf"
        for name in ("pt_btagJes", "eta_btagJes", "flavour_label"):
            assert name in jets.dtype.names
        read = set(public_loader.SALT_GN2_TRACK_INPUTS) | {
            "ftagTruthOriginLabel", "ftagTruthVertexIndex", "valid"}
        assert len(public_loader.SALT_GN2_TRACK_INPUTS) == 19
        assert read < set(tracks.dtype.names)
        t, count = tracks[:], jets["n_tracks"]
        assert (t["valid"].sum(axis=1) == count).all()
        assert (t["d0"][~t["valid"]] == 0).all() and t["d0"][t["valid"]].std() > 0.5


def test_public_loader_well_by_path_opens_the_path_of_a_local_file_object(tmp_path):
    import h5py
    import numpy as np

    import public_loader
    path = str(tmp_path / "f.hdf5")
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(6)

    class LocalFileObject:  # what fsspec's local file system hands out: a file and its path
        def __init__(self, path):
            self.path, self.raw = path, open(path, "rb")

        def read(self, n=-1):
            return self.raw.read(n)

        def seek(self, *args):
            return self.raw.seek(*args)

        def tell(self):
            return self.raw.tell()

        def close(self):
            self.raw.close()

    by_path = public_loader._ByPath(h5py)
    assert by_path.Dataset is h5py.Dataset  # everything but File() is h5py's own
    obj = LocalFileObject(path)
    with by_path.File(obj, "r", driver_kwds={"rdcc_nbytes": 1 << 20}) as f:
        assert f.driver == "sec2" and f.filename == path and list(f["x"][:]) == list(range(6))
    assert obj.raw.closed
    # A file object without a local path stays a file object.
    with open(path, "rb") as raw, by_path.File(raw, "r") as f:
        assert f.driver == "fileobj" and list(f["x"][:]) == list(range(6))


def test_public_loader_credit_layout_is_what_its_era5_dataset_reads(tmp_path):
    xarray = pytest.importorskip("xarray")
    pytest.importorskip("netCDF4")
    import numpy as np

    import public_loader
    d = str(tmp_path)
    train = public_loader.make_credit_files(d, 2, 6, 3, 4, 5, log=lambda *_: None)
    names = sorted(os.listdir(train))
    assert names == ["era5_2018.nc", "era5_2019.nc"]  # a year in each file's name
    with xarray.open_dataset(os.path.join(train, names[1])) as ds:
        assert ds["T"].dims == ("time", "level", "latitude", "longitude")
        assert ds["T"].shape == (6, 3, 4, 5) and ds["t2m"].shape == (6, 4, 5)
        assert ds["time"].dtype == np.dtype("datetime64[ns]")
        assert str(ds["time"].values[1]).startswith("2019-01-01T06")
    with xarray.open_dataset(os.path.join(d, "static.nc")) as ds:
        assert set(ds.data_vars) == set(public_loader.CREDIT_STATIC)
    # The transform stacks the levels of the upper-air variables, and the surface ones.
    state = xarray.Dataset({
        **{v: (("time", "level", "latitude", "longitude"), np.zeros((1, 3, 4, 5), np.float32))
           for v in public_loader.CREDIT_UPPER},
        **{v: (("time", "latitude", "longitude"), np.ones((1, 4, 5), np.float32))
           for v in public_loader.CREDIT_SURFACE}})
    out = public_loader._credit_to_tensors({"historical_ERA5_images": state,
                                            "target_ERA5_images": state})
    assert tuple(out["x"].shape) == (1, 12, 4, 5) and tuple(out["y_surf"].shape) == (1, 2, 4, 5)


def test_public_loader_digests_nested_batches_in_order_and_dicts_by_key():
    import torch

    import public_loader
    a = {"x": torch.arange(4), "datetime": [torch.tensor([1, 2]), torch.tensor([3, 4])]}
    b = {"x": torch.arange(4), "datetime": [torch.tensor([3, 4]), torch.tensor([1, 2])]}
    assert public_loader._digest(a, 0) == public_loader._digest(dict(a), 0)
    assert public_loader._digest(a, 0) == public_loader._digest(dict(reversed(a.items())), 0)
    assert public_loader._digest(a, 0) != public_loader._digest({"y": a["x"], **a}, 0)
    assert public_loader._digest(a, 0) != public_loader._digest(b, 0)
    assert public_loader._digest(("name", torch.zeros(2)), 0) != public_loader._digest(
        ("other", torch.zeros(2)), 0)


def test_public_loader_source_must_hold_the_loaders_module(tmp_path, monkeypatch):
    import public_loader
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(SystemExit, match=r"no a/b\.py in .*github\.com/owner/repo"):
        public_loader._public_source(str(tmp_path), "a/b.py", "owner/repo")
    assert str(tmp_path) not in sys.path
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "b.py").write_text("")
    public_loader._public_source(str(tmp_path), "a/b.py", "owner/repo")
    assert sys.path[0] == str(tmp_path)


def test_public_loader_mace_layout_is_what_its_hdf5_dataset_reads(tmp_path):
    """MACE's sharded layout (save_configurations_as_HDF5), and the harness's stand-ins for the
    modules its HDF5Dataset imports, through a module of the same imports and reads (the public
    source is not fetched in tests): one process per run, so the stand-ins stay in it."""
    import h5py

    import public_loader
    d = str(tmp_path / "data")
    train = public_loader.make_mace_files(d, 2, 7, log=lambda *_: None)
    assert sorted(os.listdir(train)) == ["train_0.h5", "train_1.h5"]
    with h5py.File(os.path.join(train, "train_1.h5"), "r") as f:
        assert list(f) == ["config_batch_0"] and len(f["config_batch_0"]) == 7
        g = f["config_batch_0/config_3"]
        n = g["atomic_numbers"].shape[0]
        assert 8 <= n <= 64 and g["positions"].shape == (n, 3)
        assert g["properties/forces"].shape == (n, 3) and g["properties/energy"].shape == ()
        assert g["properties/virials"][()] == b"None" and g["config_type"][()] == b"Default"
        assert g["pbc"].dtype == bool and g["cell"].shape == (3, 3) and g["weight"][()] == 1.0
        assert set(g["property_weights"]) == set(g["properties"])
    src = tmp_path / "src"
    (src / "mace" / "data").mkdir(parents=True)
    (src / "mace" / "data" / "hdf5_dataset.py").write_text('''
from glob import glob

import h5py
from torch.utils.data import ConcatDataset, Dataset

from mace.data.atomic_data import AtomicData
from mace.data.utils import Configuration
from mace.tools.utils import AtomicNumberTable


class HDF5Dataset(Dataset):
    def __init__(self, path):
        self.file = h5py.File(path, "r")
        self.batch_size = len(self.file["config_batch_0"])

    def __len__(self):
        return len(self.file) * self.batch_size

    def __getitem__(self, index):
        g = self.file["config_batch_0"]["config_" + str(index)]
        properties = {k: unpack(g["properties"][k][()]) for k in g["properties"]}
        weights = {k: g["property_weights"][k][()] for k in g["property_weights"]}
        config = Configuration(atomic_numbers=g["atomic_numbers"][()], positions=g["positions"][()],
                               properties=properties, property_weights=weights,
                               weight=g["weight"][()], config_type=unpack(g["config_type"][()]),
                               pbc=g["pbc"][()], cell=g["cell"][()])
        return AtomicData.from_config(config, z_table=None, cutoff=5.0)


def unpack(value):
    value = value.decode() if isinstance(value, bytes) else value
    return None if str(value) == "None" else value


def dataset_from_sharded_hdf5(files, z_table, r_max, **kwargs):
    return ConcatDataset([HDF5Dataset(f) for f in sorted(glob(files + "/*"))])
''')
    result = tmp_path / "result.json"
    proc = subprocess.run([sys.executable, os.path.join(HERE, "public_loader.py"), "_run", "--loader",
                           "mace", "--src", str(src), "--data", d, "--epochs", "2", "--result",
                           str(result), "--workers", "0"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(result) as f:
        epochs = json.load(f)
    # 14 samples in batches of 10, the last one dropped; a new order each epoch.
    assert len(epochs) == 2 and epochs[0]["digest"] != epochs[1]["digest"]


@built
def test_windows_runs_every_variant_and_checks_every_window(tmp_path):
    """examples/bench/windows.py, tiny: the series is written once with step t in channel 0, and
    every variant (native, cached, followed) reads windows whose first step its label gives back
    (a wrong window ends the run)."""
    script = os.path.join(HERE, "windows.py")
    args = [sys.executable, script, "--rows", "3000", "--window", "32", "--stride", "8",
            "--rounds", "1", "--epochs", "2", "--workdir", str(tmp_path / "data"),
            "--plugin-dir", PLUGINS]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for variant in ("native", "default", "quarter", "follow", "follow-quarter"):
        assert f"| 0 | {variant} | 1 |" in proc.stdout, proc.stdout
    import h5py
    with h5py.File(tmp_path / "data" / "series-3000.h5", "r") as f:
        assert f["x"].shape == (3000, 16)
        assert (f["x"][:, 0] == np.arange(3000, dtype=np.float32)).all()
        assert (f["y"][:] == np.arange(3000)).all()

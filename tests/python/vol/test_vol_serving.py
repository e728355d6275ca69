"""Serving from the node cache: small rows (labels) and files that change under an open handle.

Every sequence runs natively and through the connector; the digests of every read must be
equal. The statistics show how it was served: labels are cached a block's worth of rows to an
entry (a few storage reads for 3,000 labels, not one per label), and a file rewritten or
truncated under an open handle is noticed within the connector's change-check interval, after
which its reads are forwarded (the stale rows are never served). A miss on the application's
thread reads through HDF5's own descriptor of the file until the file's handle is closed.
"""

import importlib.util
import json
import os
import subprocess

import numpy as np
import pytest

from voltest_support import forwarded_for, schedule_tool, totals_of

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "voltest_serving.py")


def run_both(runner, tmp_path, args, name, writer="write", cache_size="64MiB", env=None,
             writer_args=()):
    data = tmp_path / f"{name}.h5"
    results = {}
    for mode in ("native", "connector"):
        # a fresh file for each run
        runner.run([SCRIPT, writer, data, *writer_args], "native", tmp_path)
        out = tmp_path / f"{name}-{mode}.json"
        stats = tmp_path / f"{name}-stats"
        stats.mkdir(exist_ok=True)
        extra = {"PRESCIENT_NODE_ID": f"serving-{name}-{os.getpid()}",
                 "PRESCIENT_CACHE_SIZE": cache_size, **(env or {})}
        runner.run([SCRIPT, args[0], data, out, *args[1:]], mode, tmp_path,
                   stats=stats / "stats.json" if mode == "connector" else None, extra=extra)
        results[mode] = json.loads(out.read_text())
    return results, tmp_path / f"{name}-stats"


def test_labels_beside_images_are_exact_and_grouped(runner, tmp_path):
    results, stats_dir = run_both(runner, tmp_path, ["labels"], "labels")
    assert results["connector"] == results["native"]
    if runner.stand_in:
        return
    totals = totals_of(stats_dir)
    assert totals["reads_forwarded"] == 0, totals
    # 3,000 images of 256 bytes, 3,000 8-byte labels and 1-byte flags are all small, so
    # they are cached in entries of a 4 KiB block's worth of rows (16, 512 and 3,000 rows):
    # at most 188 + 6 + 1 storage reads, where one per distinct row read would be ~7,000.
    assert totals["storage_reads"] <= 195, totals
    assert totals["rows_read_around"] == 0, totals


def test_row_parts_are_cut_from_cached_rows_exactly(runner, tmp_path):
    """`fields[i, channels]` and the like: the same part of every row, at least half of it, is
    served from whole cached rows, and so is a smaller part of rows already cached; rows that
    share cache entries are forwarded. Every read's bytes equal native's."""
    results, stats_dir = run_both(runner, tmp_path, ["row-parts"], "parts", writer="write-fields")
    assert results["connector"] == results["native"]
    if runner.stand_in:
        return
    totals = totals_of(stats_dir)
    # Two passes over two datasets of 24 x 8 single reads and 3 more, and 4 reads of `pairs`:
    # every one takes the same part of each row it reads.
    assert totals["reads"] == 2 * (2 * (24 * 8 + 3) + 4), totals
    assert totals["reads_row_parts"] == totals["reads"], totals
    # The two reads of under half a row per 24 rows, each pass and dataset: counted as such.
    assert totals["reads_row_parts_narrow"] == 2 * 2 * 24 * 2, totals
    # Served: the 8 single reads, of which 2 take under half of their row (2 of 5 channels, and 2
    # of 5 channels of every third column), served as the row is cached by the reads before
    # them, and both batches. Forwarded: read_direct into a selection of the buffer (as for
    # whole rows), and `pairs`, whose small rows share entries.
    assert totals["reads_row_parts_narrow_served"] == 2 * 2 * 24 * 2, totals
    assert totals["reads_served"] == 2 * 2 * (24 * 8 + 2), totals
    assert forwarded_for(totals) == {"memory": 2 * 2, "small_row_part": 2 * 4}, totals
    assert totals["rows_hit"] > 0, totals


def test_overlapping_patches_are_served_once_whole_rows_pay(runner, tmp_path):
    """3-D patches of a volume (a ninth of each z-plane they touch, overlapping): forwarded
    until the reads of a dataset have asked for as many bytes as its z-planes hold, then served
    from whole cached planes; two channels of sixteen, each row once, are never served (a miss
    would read eight times their bytes). Every read's bytes equal native's."""
    results, stats_dir = run_both(runner, tmp_path, ["patches"], "patches", writer="write-volume")
    assert results["connector"] == results["native"]
    if runner.stand_in:
        return
    totals = totals_of(stats_dir)
    patches, channels = 2 * 2 * 125, 200
    assert totals["reads_row_parts_narrow"] == patches + channels, totals
    # A dataset's 24 planes of 36 KiB are asked for in 8 x 4 KiB per patch: from the 27th patch
    # of each on, and all of the second pass (the planes are cached by then).
    served = totals["reads_row_parts_narrow_served"]
    assert 2 * (125 + 125 - 27) <= served <= patches, totals
    assert totals["reads_served"] == served, totals
    assert forwarded_for(totals) == {"narrow": patches - served, "small_row_part": channels}, totals
    # Each plane loaded from storage once (the chunked volume's 4-plane chunks whole).
    assert totals["rows_loaded"] + totals["rows_read_around"] <= 2 * 24, totals


def test_patches_of_a_volume_the_cache_cannot_keep_are_forwarded(runner, tmp_path):
    """The same reads with a cache that cannot keep both volumes (1.5 MiB of blocks for 1.7
    MiB): planes loaded whole would be evicted before the other parts are read, so once the
    cache has evicted, a patch loads no plane: it is served from its planes that are cached,
    the others' parts read through HDF5, or forwarded when fewer than half are. Bytes equal
    native's; no plane loaded again."""
    results, stats_dir = run_both(runner, tmp_path, ["patches"], "patches-small",
                                  writer="write-volume", cache_size="2MiB")
    assert results["connector"] == results["native"]
    if runner.stand_in:
        return
    totals = totals_of(stats_dir)
    assert totals["reads_row_parts_narrow"] == 2 * 2 * 125 + 200, totals
    assert 0 < totals["reads_row_parts_narrow_served"] < 2 * 2 * 125, totals
    assert totals["reads_row_parts_narrow_split"] > 0, totals
    # (A plane evicted between a read's check that its planes are cached and its copy is loaded
    # again: a few at most.)
    assert totals["rows_loaded"] + totals["rows_read_around"] <= 2 * 24 + 8, totals


def test_patches_of_partly_cached_planes_read_only_the_rest_through_hdf5(runner, tmp_path):
    """Patches of datasets larger than the cache, whose planes are cached in part (read whole
    before): the cached planes are served and the parts of the others read through HDF5, a read
    per run of them, when at least half are cached in at most 4 runs; else the patch is
    forwarded whole. Contiguous and chunked gzip data, strided, edge and whole-line patches.
    Bytes equal native's."""
    # The reader places the planes it read whole before it returns (no admission thread),
    # so that what each patch finds cached is known.
    results, stats_dir = run_both(runner, tmp_path, ["partly-cached"], "partly",
                                  writer="write-volume", cache_size="2MiB",
                                  env={"PRESCIENT_ADMIT_BEHIND": "0"})
    assert results["connector"] == results["native"]
    if runner.stand_in:
        return
    totals = totals_of(stats_dir)
    passes, datasets = 2, 2
    # Per dataset and pass (voltest_serving.PARTLY_CACHED_PATCHES): 9 patches, 6 split, 1 all
    # cached, 2 forwarded; the split ones read 2 + 4 + 4 + 2 + 2 + 2 planes' parts through HDF5.
    assert totals["reads_row_parts_narrow"] == passes * datasets * 9, totals
    assert totals["reads_row_parts_narrow_served"] == passes * datasets * 7, totals
    assert totals["reads_row_parts_narrow_split"] == passes * datasets * 6, totals
    # Of the two forwarded, the patch of 11 planes (396 KiB) asks for more rows than a quarter
    # of the 1.5 MiB of blocks a read may take; the other finds none of its planes cached.
    assert forwarded_for(totals) == {"large": passes * datasets, "narrow": passes * datasets}, totals
    assert totals["rows_narrow_through_hdf5"] == passes * datasets * 16, totals
    # Nothing loaded for a patch: the planes read whole (13 per dataset) are the only loads.
    assert totals["rows_loaded"] + totals["rows_read_around"] == datasets * 13, totals


@pytest.mark.parametrize("cache_size", ["64MiB", "24MiB", "6MiB"])
def test_contiguous_rows_read_around_only_while_the_cache_can_keep_them(runner, tmp_path,
                                                                         cache_size):
    """A cold pass over two datasets of 1,024 contiguous 16 KiB rows each (16 MiB), in
    shuffled order, then a warm one. A miss reads the 256 KiB slab of rows around it and keeps
    them while they can stay until used: with a cache that holds both datasets the cold pass
    takes ~128 storage reads, not ~2,048; with one that holds one dataset and a half, reading
    around stops at the first eviction (what is read in vain is bounded by the cache); with
    one smaller than a dataset, rows are read one by one."""
    name = f"samples-{cache_size}"
    results, stats_dir = run_both(runner, tmp_path, ["samples"], name, writer="write-samples",
                                  cache_size=cache_size)
    assert results["connector"] == results["native"]
    if runner.stand_in:
        return
    totals = totals_of(stats_dir)
    assert totals["reads_forwarded"] == 0, totals
    rows, slab_rows = 2 * 1024, 16
    if cache_size == "64MiB":
        assert totals["storage_reads"] <= rows // slab_rows + 32, totals
        assert totals["rows_read_around"] >= rows - rows // slab_rows - 32, totals
    elif cache_size == "24MiB":
        # The first dataset and part of the second read around; then evictions start.
        assert 1024 - 64 <= totals["rows_read_around"] <= (24 << 20) // (16 << 10), totals
        assert totals["storage_reads"] >= 1024 // 2, totals
    else:
        assert totals["rows_read_around"] == 0, totals


def run_scheduled(prescient, tmp_path, writer, reader, datasets, order_rows, extra=None):
    """Writes FILE with `writer`, imports a schedule of two epochs over 1,024 samples of FILE's
    `datasets` (each a permutation of `order_rows`), and runs `reader` in its order natively
    and through the connector with it: both runs' digests, and the connector's totals."""
    order = tmp_path / "order.txt"
    rng = np.random.default_rng(5)
    order.write_text("".join(" ".join(map(str, rng.permutation(order_rows))) + "\n"
                             for _ in range(2)))
    data = tmp_path / "data.h5"
    prescient.run([SCRIPT, writer, data], "native", tmp_path)
    schedule = tmp_path / "job.sched"
    subprocess.run([schedule_tool(), "import", str(order), "--samples", "1024",
                    *[a for d in datasets for a in ("--dataset", f"{data}:{d}")],
                    "--output", str(schedule), "--quiet"], check=True, capture_output=True)
    results = {}
    stats = tmp_path / "stats"
    stats.mkdir()
    for mode in ("native", "connector"):
        out = tmp_path / f"{mode}.json"
        prescient.run([SCRIPT, reader, data, out, order], mode, tmp_path,
                      stats=stats / "stats.json" if mode == "connector" else None,
                      extra={"PRESCIENT_NODE_ID": f"serving-sched-{os.getpid()}",
                             "PRESCIENT_CACHE_SIZE": "64MiB", "PRESCIENT_SCHEDULE": str(schedule),
                             **(extra or {})})
        results[mode] = json.loads(out.read_text())
    return results, totals_of(stats)


def test_a_scheduled_miss_reads_around_the_rows_the_schedule_reads(prescient, tmp_path):
    """Two datasets of 1,024 contiguous 16 KiB rows, a schedule whose epochs read samples 0-999
    (rows 1,000 and up are in its sample map but never read), read cold in its order with
    prefetching off, so that every row comes in through a reader's miss, as at the start of an
    epoch before the prefetcher is ahead. A miss reads its 256 KiB slab as without a schedule
    (~63 storage reads a dataset, not 1,000), but not the slab's rows the schedule never reads
    (rows 1,000-1,007 of slab 62)."""
    results, totals = run_scheduled(prescient, tmp_path, "write-samples", "scheduled-samples",
                                    ["a", "b"], 1000, {"PRESCIENT_PREFETCH": "0"})
    assert results["connector"] == results["native"]
    assert totals["schedule_matches"] >= 2 * 2 * 1000 - 8, totals
    assert totals["reads_forwarded"] == 0, totals
    # Every scheduled row came in once, most of them beside a miss; no other row did.
    assert totals["rows_loaded"] + totals["rows_read_around"] == 2 * 1000, totals
    assert totals["rows_read_around"] >= 2 * (1000 - 1000 // 16 - 16), totals
    assert totals["storage_reads"] <= 2 * (1000 // 16 + 16), totals


@pytest.mark.parametrize("mode", ["same-size", "truncate"])
def test_file_changed_under_an_open_handle(runner, tmp_path, mode):
    results, stats_dir = run_both(runner, tmp_path, ["rewrite", mode], f"rewrite-{mode}")
    assert results["connector"] == results["native"], results
    assert results["native"][0] != results["native"][3]  # the test really changed the bytes
    if runner.stand_in:
        return
    totals = totals_of(stats_dir)
    assert totals["fallback_file_changed"] == 3, totals
    assert forwarded_for(totals) == {"file_changed": 3}, totals
    assert totals["reads_served"] == 3, totals


def test_a_file_written_here_is_served_once_its_writes_are_behind_it(runner, tmp_path):
    """A process that writes its data and then reads it (a notebook, with forked workers too):
    reads through a handle that shares the writable open are forwarded, exact with the bytes
    HDF5 has not flushed yet; once every handle closed, a read-only open made anew is served,
    with the new bytes, in the process and in a child forked after the writes. Every read's
    bytes equal native's, also right after an in-place rewrite made at once."""
    results, stats_dir = run_both(runner, tmp_path, ["written-here"], "written-here")
    assert results["connector"] == results["native"], results
    assert results["native"][3] != results["native"][0]  # the writes really changed row 3
    if runner.stand_in:
        return
    totals = totals_of(stats_dir)
    # The four reads through the shared handle, and nothing else but perhaps the three after
    # the quick rewrite (forwarded when the file's status-change time did not move).
    assert 4 <= totals["forwarded"]["written"] <= 7, totals
    assert totals["fallback_written"] >= 1, totals
    # Served: the first three, the five after the writes, the child's four (forked before the
    # quick rewrite, whose reads may be served or not).
    assert totals["reads_served"] >= 3 + 5 + 4, totals
    assert totals["rows_hit"] > 0, totals


def test_datasets_whose_bytes_live_in_other_files_are_forwarded_with_virtual_caching_off(
        runner, tmp_path):
    """The reads of `test_datasets_whose_bytes_live_in_other_files_follow_their_sources`
    with PRESCIENT_CACHE_VIRTUAL=0: none is served, every one equals native's."""
    results, stats_dir = run_both(runner, tmp_path, ["elsewhere"], "elsewhere",
                                  writer="write-elsewhere", env={"PRESCIENT_CACHE_VIRTUAL": "0"})
    assert results["connector"] == results["native"], results
    if runner.stand_in:
        return
    totals = totals_of(stats_dir)
    assert totals["reads_served"] == 0, totals
    assert forwarded_for(totals) == {"dataset": 36}, totals


@pytest.mark.parametrize("setting", ["raw", "1"])
def test_datasets_whose_bytes_live_in_other_files_follow_their_sources(runner, tmp_path, setting):
    """Two virtual datasets and one in external storage, read, their source files changed
    (replaced, rewritten in place) and read again: through a new handle, through a handle kept
    open across the change, and in a new process. The file that names them is unchanged, so
    its own identity cannot tell. Every read's bytes equal native's. The virtual datasets' rows
    are read raw from their sources, by default (raw) as with PRESCIENT_CACHE_VIRTUAL=1."""
    env = {} if setting == "raw" else {"PRESCIENT_CACHE_VIRTUAL": setting}
    results, stats_dir = run_both(runner, tmp_path, ["elsewhere"], "elsewhere",
                                  writer="write-elsewhere", env=env)
    assert results["connector"] == results["native"], results
    # The sources really changed: every row read after the change differs from before it.
    native = results["native"]
    before = [native[i] for i in (0, 1, 2, 6, 7, 8, 3, 4, 5)]  # virtual_a, external, virtual_b
    assert all(old != new for old, new in zip(before, native[18:27])), native
    if runner.stand_in:
        return
    totals = totals_of(stats_dir)
    # The virtual datasets' twelve reads before the change and six in the new process are
    # served (the new process keys the new sources); the six after the change in the first
    # process are forwarded, through a new file handle and through the one kept open: each
    # dataset open checks the sources its rows come from.
    # External storage is always forwarded.
    assert totals["reads_served"] == 18, totals
    assert forwarded_for(totals) == {"dataset": 12, "file_changed": 6}, totals
    # Both prepared in the first process and again in the new one, with the new sources.
    assert totals["virtual_datasets_raw"] == 4, totals
    assert totals["virtual_datasets_through_hdf5"] == 0, totals


@pytest.mark.parametrize("setting", ["raw", "1", "0"])
def test_virtual_datasets_are_read_raw_where_their_mappings_allow(runner, tmp_path, setting):
    """Virtual datasets of every kind of mapping, read by rows, slices, lists and whole, twice.
    Whole rows of contiguous sources of the same type (also from the naming file itself, out of
    order, a part of a source, rows left to the fill value) and whole chunks of sources chunked
    and compressed alike are read raw from the sources; a chunked source beside a contiguous
    one, sources of another byte order and rows filled from two sources are forwarded by
    default, and cached through HDF5 with PRESCIENT_CACHE_VIRTUAL=1. Every read's bytes equal
    native's."""
    env = {} if setting == "raw" else {"PRESCIENT_CACHE_VIRTUAL": setting}
    results, stats_dir = run_both(runner, tmp_path, ["mappings"], "mappings",
                                  writer="write-mappings", env=env)
    assert results["connector"] == results["native"], results
    assert not any(r.startswith("error") for r in results["native"]), results["native"]
    if runner.stand_in:
        return
    totals = totals_of(stats_dir)
    reads_each = 2 * 7
    raw = {"raw": 4, "1": 4, "0": 0}[setting]
    through_hdf5 = {"raw": 0, "1": 3, "0": 0}[setting]
    assert totals["virtual_datasets_raw"] == raw, totals
    assert totals["virtual_datasets_through_hdf5"] == through_hdf5, totals
    assert totals["reads_served"] == reads_each * (raw + through_hdf5), totals
    forwarded = reads_each * (7 - raw - through_hdf5)
    assert forwarded_for(totals) == ({"dataset": forwarded} if forwarded else {}), totals


@pytest.mark.parametrize("setting", ["raw", "1"])
def test_data_never_written_and_read_as_nothing_is_forwarded(runner, tmp_path, setting):
    """Where a dataset was never written and has no fill value to give (fill time never), HDF5
    leaves the reader's buffer as it was: such a dataset is forwarded, and so is a virtual
    dataset of its rows, also with PRESCIENT_CACHE_VIRTUAL=1 (read into buffers of 0x55 bytes,
    the connector's reads equal native's). A chunked dataset of fill time never written whole,
    and one written in half with a fill value, are cached."""
    env = {} if setting == "raw" else {"PRESCIENT_CACHE_VIRTUAL": setting}
    results, stats_dir = run_both(runner, tmp_path, ["unwritten"], "unwritten",
                                  writer="write-unwritten", env=env)
    assert results["connector"] == results["native"], results
    if runner.stand_in:
        return
    totals = totals_of(stats_dir)
    reads_each = 2 * 5
    assert forwarded_for(totals) == {"dataset": 3 * reads_each}, totals
    assert totals["reads_served"] == 2 * reads_each, totals


def test_bitshuffled_chunks_are_decoded_without_hdf5(runner, tmp_path):
    """Chunks of the bitshuffle filter (32008), as detectors store frames: with LZ4 and without,
    several element sizes, block sizes, edge chunks and tails of fewer than 8 elements. Read
    through h5py natively and with the connector: every read's bytes are equal, and the rows
    came in raw (decoded by the connector, not loaded through HDF5)."""
    if importlib.util.find_spec("bitshuffle") is None:
        pytest.skip("bitshuffle is not installed (the default environment has it: "
                    "env/packages.txt)")
    results, stats_dir = run_both(runner, tmp_path, ["bitshuffled"], "bitshuffled",
                                  writer="write-bitshuffled")
    assert results["connector"] == results["native"], results
    assert not any(r.startswith("error") for r in results["native"]), results["native"]
    if runner.stand_in:
        return
    totals = totals_of(stats_dir)
    assert totals["reads_forwarded"] == 0, totals
    assert totals["reads_served"] == 2 * 5 * 6, totals
    assert totals["datasets_through_hdf5"] == 0, totals


@pytest.mark.parametrize("kind", ["lzf", "lz4", "blosc", "blosc2", "bzip2", "bitshuffle-zstd",
                                  "fletcher32"])
def test_chunks_of_other_filters_are_decoded_without_hdf5(runner, tmp_path, kind):
    """Chunks of h5py's LZF filter, HDF5's LZ4, Blosc and bzip2 plugins, PyTables's Blosc2
    filter (flat and B2ND frames), bitshuffle with
    Zstandard and HDF5's Fletcher-32 checksum (voltest_serving.filtered_datasets): read through
    h5py natively and with the connector, every read's bytes are equal, and the rows came in raw
    (decoded by the connector from chunks it read itself, not loaded through HDF5). The connector
    runs with its plugin directory alone on HDF5_PLUGIN_PATH, as a user sets it: HDF5's own plugin
    directory (where Debian's filter plugins are) must stay searched."""
    filter_id = {"lzf": 32000, "lz4": 32004, "blosc": 32001, "blosc2": 32026, "bzip2": 307,
                 "bitshuffle-zstd": 32008, "fletcher32": 3}[kind]
    if kind.startswith("bitshuffle") and importlib.util.find_spec("bitshuffle") is None:
        pytest.skip("bitshuffle is not installed (the default environment has it)")
    if kind == "blosc2" and importlib.util.find_spec("tables") is None:
        pytest.skip("PyTables is not installed (the default environment has it)")
    registers = {"bitshuffle-zstd": "import bitshuffle.h5\n", "blosc2": "import tables\n"}
    probe = runner.python(
        "import sys, h5py\n" + registers.get(kind, "")
        + f"sys.exit(0 if h5py.h5z.filter_avail({filter_id}) else 3)", [], "native", tmp_path,
        check=False)
    if probe.returncode == 3:
        pytest.skip(f"HDF5 here has no {kind} filter plugin (the default environment has it: "
                    "env/packages.txt)")
    results, stats_dir = run_both(runner, tmp_path, ["filtered", kind], f"filtered-{kind}",
                                  writer="write-filtered", writer_args=(kind,))
    assert not any(r.startswith("error") for r in results["native"]), results["native"]
    assert results["connector"] == results["native"], results
    if runner.stand_in:
        return
    totals = totals_of(stats_dir)
    assert totals["reads_forwarded"] == 0, {k: v for k, v in totals.items() if v}
    assert totals["datasets_through_hdf5"] == 0, totals
    datasets = {"lzf": 3, "lz4": 3, "blosc": 5, "blosc2": 4, "bzip2": 2, "bitshuffle-zstd": 2,
                "fletcher32": 3}[kind]
    assert totals["reads_served"] == 2 * 6 * datasets, totals


def test_a_scheduled_virtual_dataset_is_prefetched_from_its_sources(prescient, tmp_path):
    """A virtual dataset of 1,024 16 KiB rows over four source files, named in a schedule and
    read in its order: the schedule binds it, and the prefetcher reads its rows raw from the
    sources ahead of the reads. Every read's bytes equal native's."""
    results, totals = run_scheduled(prescient, tmp_path, "write-virtual-samples",
                                    "scheduled-virtual", ["v"], 1024)
    assert results["connector"] == results["native"]
    assert totals["virtual_datasets_raw"] >= 1, totals
    assert totals["reads_forwarded"] == 0, totals
    assert totals["schedule_matches"] >= 2 * 1024 - 8, totals
    assert totals["rows_prefetched"] > 0, totals


def test_misses_borrow_hdf5s_descriptor_until_the_file_handle_closes(runner, tmp_path):
    results, stats_dir = run_both(runner, tmp_path, ["file-closed"], "file-closed")
    assert results["connector"] == results["native"], results
    if runner.stand_in:
        return
    totals = totals_of(stats_dir)
    assert totals["reads_served"] == 6, totals
    assert totals["storage_reads"] == 5, totals
    # Rows 5 and 2000 of both files were read through HDF5's descriptors; after the first
    # file's handle closed (HDF5 may close its descriptor with the last object), its row 2500
    # through a descriptor of the connector's own: one open in all, where without borrowing
    # each file would need one.
    assert totals["raw_file_opens"] == 1, totals


WHOLE_ENTRIES = r"""
import hashlib, json, sys, h5py, numpy as np
path, out = sys.argv[1], sys.argv[2]
if sys.argv[3] == "write":
    with h5py.File(path, "w") as f:
        # 1 KiB rows: 64 to a 64 KiB entry. 256 rows fill 4 entries; 255 rows are 4 entries
        # of 64 rows, the last one row short of the dataset's end. 40 rows are one entry.
        for n in (256, 255, 40):
            f[f"d{n}"] = np.random.default_rng(n).random((n, 256), dtype="<f4")
        # 4-byte rows, 16,384 to an entry: slices of a 1-D array (a sparse matrix's indices)
        # are runs of thousands of rows, within an entry or across several.
        f["flat"] = np.random.default_rng(7).integers(0, 1 << 30, 50000, dtype="<i4")
    sys.exit(0)
reads = []
with h5py.File(path, "r") as f:
    for _ in range(2):  # misses, then hits
        for n in (256, 255, 40):
            d = f[f"d{n}"]
            # Whole entries, runs inside and across entries, single rows (a hit copies only
            # the rows asked for out of its entry), point lists, one with a gap.
            for sel in (slice(None), slice(0, 128), slice(64, 192), slice(4, 8), slice(60, 70),
                        slice(1, 9), slice(252, 256), slice(240, None), slice(3, 4),
                        slice(39, 40), slice(130, 131)):
                if sel.start is None or sel.start < n:
                    reads.append(hashlib.sha256(d[sel].tobytes()).hexdigest())
            for points in ([4, 5, 6, 7], [0, 1, 2, 3, 8, 9, 10, 11], [2, 30, 31, 63]):
                points = [p for p in points if p < n]
                reads.append(hashlib.sha256(d[points].tobytes()).hexdigest())
        flat = f["flat"]
        for sel in (slice(10, 1010), slice(16000, 17000), slice(100, 40000), slice(5, 45000, 7),
                    slice(49000, None), [1, 2, 3, 20000, 20001, 40000], slice(16383, 16385)):
            reads.append(hashlib.sha256(flat[sel].tobytes()).hexdigest())
json.dump(reads, open(out, "w"))
"""


def test_small_rows_read_as_whole_entries_land_in_place_exactly(runner, tmp_path):
    """A dataset of small rows read whole, or in runs of whole entries, is copied into the
    caller's buffer entry by entry; runs that start or end inside an entry, a last entry the
    dataset does not fill, and whole entries with a gap between them go through the scratch
    buffer. Every read's bytes equal native's, missed and hit."""
    data = tmp_path / "whole.h5"
    runner.python(WHOLE_ENTRIES, [data, tmp_path / "unused.json", "write"], "native", tmp_path)
    results = {}
    stats = tmp_path / "stats.json"
    for mode in ("native", "connector"):
        out = tmp_path / f"{mode}.json"
        runner.python(WHOLE_ENTRIES, [data, out, "read"], mode, tmp_path,
                      stats=stats if mode == "connector" else None,
                      extra={"PRESCIENT_NODE_ID": f"whole-entries-{os.getpid()}"})
        results[mode] = json.loads(out.read_text())
    assert results["connector"] == results["native"]
    if runner.stand_in:
        return
    totals = totals_of(tmp_path)
    assert totals["reads_forwarded"] == 0, totals
    assert totals["reads_served"] == len(results["native"]), totals
    assert totals["rows_hit"] > 0, totals

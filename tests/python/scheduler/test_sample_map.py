"""Sample maps (issue 8 section 2): `generate --dataset` over many files and
fields, `inspect`, and the Python sampler's view of the map, on the layouts of
the README's worked examples: one sample per file (thousands of files), 128
samples per file with two fields (CosmoFlow), several fields per file (DLIO),
labels in the same file, and an explicit order from --files-from."""

import glob
import os

import pytest

np = pytest.importorskip("numpy", reason="numpy is missing: run this suite inside env/run")

from conftest import run_tool  # noqa: E402
from prescient_sampler import (DatasetFingerprint, DatasetMismatchError,  # noqa: E402
                               ScheduleBatchSampler, ScheduleFile, ScheduleSampler,
                               fingerprint_dataset)


def make_files(directory, names, size=100):
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_bytes(b"\0" * size)
    return directory


def gen(tool, out, *args, samples=None, epochs=2, extra=()):
    cmd = ["generate", "--source", "torch-distributed", "--epochs", epochs, "--ranks", 2,
           "--batch-size", 4, "--seed", 3, "--store", "lists", "--quiet", "--output", out]
    if samples is not None:
        cmd += ["--samples", samples]
    return run_tool(tool, *cmd, *args, *extra)


def test_one_sample_per_file_thousands_of_files(tool, tmp_path):
    d = make_files(tmp_path / "data", [f"s{i:05d}.h5" for i in range(3000)])
    out = tmp_path / "a.sched"
    gen(tool, out, "--dataset", f"{d}/s*.h5:x", "--rows-per-file", 1, "--row-bytes", 4096)
    m = ScheduleFile(out).header.map
    assert len(m.files) == 3000 and m.num_samples == 3000
    assert [f.path for f in m.files] == sorted(glob.glob(f"{d}/s*.h5"))
    assert m.locate(1234) == (1234, 0)
    text = run_tool(tool, "inspect", out).stdout
    assert "map:         3000 files, 1 rows per file, 3000 samples" in text
    assert f"first:     '{d}/s00000.h5': 1 rows" in text
    assert f"last:      '{d}/s02999.h5': 1 rows" in text


def test_cosmoflow_128_per_file_two_fields_short_last_file(tool, tmp_path):
    d = make_files(tmp_path / "cosmo", [f"univ_{i}.h5" for i in range(8)])
    out = tmp_path / "c.sched"
    gen(tool, out, "--dataset", f"{d}/univ_*.h5:full", "--dataset", f"{d}/univ_*.h5:unitPar",
        "--rows-per-file", 128, "--row-bytes", 4 * 128 ** 3, "--row-bytes", 16,
        samples=7 * 128 + 50)
    h = ScheduleFile(out).header
    m = h.map
    assert h.num_samples == 946
    assert [f.rows for f in m.files] == [128] * 7 + [50]
    assert [(f.dataset, f.row_bytes) for f in m.fields] == [("full", 4 * 128 ** 3),
                                                             ("unitPar", 16)]
    assert m.bytes_per_sample == 4 * 128 ** 3 + 16
    assert m.locate(945) == (7, 49) and m.first_sample(3) == 384
    files, rows = m.locate_many([0, 127, 128, 945])
    assert files.tolist() == [0, 0, 1, 7] and rows.tolist() == [0, 127, 0, 49]
    text = run_tool(tool, "inspect", out).stdout
    assert "8 files, 50..128 rows per file, 946 samples" in text
    assert "fields:      full (8388608 bytes per row), unitPar (16 bytes per row)" in text


def test_dlio_records_and_labels_in_the_same_files(tool, tmp_path):
    d = make_files(tmp_path / "dlio", [f"img_{i}_of_4.h5" for i in range(4)])
    out = tmp_path / "d.sched"
    fields = [f"records_{k}" for k in range(3)] + ["labels"]
    args = []
    for f in fields:
        args += ["--dataset", f"{d}/img_*_of_4.h5:{f}"]
    gen(tool, out, *args, "--rows-per-file", 32, "--row-bytes", 1024)
    m = ScheduleFile(out).header.map
    assert [f.dataset for f in m.fields] == fields
    assert m.field_index("/records_1") == 1  # a dataset of the same shape is not records_0
    assert m.bytes_per_sample == 4 * 1024 and m.num_samples == 128


def test_files_from_gives_any_order_and_rows(tool, tmp_path, monkeypatch):
    d = make_files(tmp_path / "l", ["a.h5", "b.h5", "c.h5"])
    listing = tmp_path / "files.txt"
    monkeypatch.chdir(tmp_path)
    listing.write_text("# a per-epoch file order computed elsewhere\n"
                       "l/c.h5 10\n\nl/a.h5 7\n" + f"{d}/b.h5   5\n")
    out = tmp_path / "f.sched"
    gen(tool, out, "--files-from", listing, "--dataset", "images", "--dataset", ":labels")
    m = ScheduleFile(out).header.map
    assert [os.path.basename(f.path) for f in m.files] == ["c.h5", "a.h5", "b.h5"]
    assert [f.rows for f in m.files] == [10, 7, 5] and m.num_samples == 22
    assert m.locate(10) == (1, 0)


def test_glob_order_is_bytewise_and_paths_are_resolved(tool, tmp_path):
    d = make_files(tmp_path / "o", ["b.h5", "B.h5", "a10.h5", "a9.h5", "é.h5"])
    os.symlink(d, tmp_path / "link")
    out = tmp_path / "o.sched"
    gen(tool, out, "--dataset", f"{tmp_path}/link/*.h5:x", "--rows-per-file", 2)
    m = ScheduleFile(out).header.map
    names = [os.path.basename(f.path) for f in m.files]
    assert names == [os.path.basename(p) for p in sorted(glob.glob(f"{d}/*.h5"))]
    assert names == ["B.h5", "a10.h5", "a9.h5", "b.h5", "é.h5"]
    assert all(f.path.startswith(str(d) + "/") for f in m.files)  # the link is resolved


def test_labels_in_files_of_their_own_pair_in_sorted_order(tool, tmp_path):
    """PatchCamelyon's layout: each field in a file of its own. A later
    --dataset's k-th file keeps that field of the first --dataset's k-th file
    (format version 3); inspect lists it and --check-dataset finds the field
    a file holds."""
    x = make_files(tmp_path / "x", ["camelyon_x_0.h5", "camelyon_x_1.h5"], size=300)
    y = make_files(tmp_path / "y", ["camelyon_y_0.h5", "camelyon_y_1.h5"], size=20)
    out = tmp_path / "p.sched"
    gen(tool, out, "--dataset", f"{x}/*_x_*.h5:x", "--dataset", f"{y}/*_y_*.h5:y",
        "--dataset", f"{x}/*_x_*.h5:meta", "--rows-per-file", 4)
    assert open(out, "rb").read()[8] == 3  # the format version
    text = run_tool(tool, "inspect", out).stdout
    assert (f"first:     '{x}/camelyon_x_0.h5': 4 rows, 300 B, modified" in text and
            f"; y in '{y}/camelyon_y_0.h5' (20 B, modified" in text), text
    assert f"last:      '{x}/camelyon_x_1.h5'" in text and f"'{y}/camelyon_y_1.h5'" in text
    for path in (f"{x}/camelyon_x_1.h5", f"{y}/camelyon_y_1.h5"):
        assert "matches the map" in run_tool(tool, "inspect", out, "--check-dataset", path).stdout
    # A labels file rewritten since is named.
    (y / "camelyon_y_1.h5").write_bytes(b"\1" * 21)
    result = run_tool(tool, "inspect", out, "--check-dataset", f"{y}/camelyon_y_1.h5", check=False)
    assert result.returncode != 0 and "file size is 21" in result.stdout, result.stdout
    # The same files for every field: version 2, readable by older builds.
    gen(tool, out, "--dataset", f"{x}/*_x_*.h5:x", "--dataset", f"{x}/*_x_*.h5:y",
        "--rows-per-file", 4)
    assert open(out, "rb").read()[8] == 2
    # Pairs that would put one file in two places of the map are refused.
    result = run_tool(tool, "generate", "--source", "sequential", "--epochs", 1, "--quiet",
                      "--output", tmp_path / "bad.sched", "--dataset", f"{x}/*_x_*.h5:x",
                      "--dataset", f"{tmp_path}/[xy]/camelyon_[xy]_1.h5:y", "--rows-per-file", 4, check=False)
    assert result.returncode == 2 and "listed twice" in result.stderr, result.stderr


@pytest.mark.parametrize("args,message", [
    (["--dataset", "{d}/*.h5:x", "--dataset", "{d}/a*.h5:y", "--rows-per-file", "2"],
     "names 1 file and --dataset"),
    (["--dataset", "{d}/*.h5:x"], "matches 3 files: say how many rows"),
    (["--dataset", "{d}/*.h5:x", "--dataset", "{d}/*.h5:y", "--rows-per-file", "2",
      "--row-bytes", "1", "--row-bytes", "2", "--row-bytes", "3"],
     "--row-bytes is given 3 times for 2"),
    (["--dataset", "{d}/nothing*.h5:x", "--rows-per-file", "2"], "no file matches"),
    (["--dataset", "{d}/missing.h5:x", "--samples", "4"], "missing.h5"),
    (["--dataset", "{d}/*.h5:x", "--rows-per-file", "2", "--samples", "7"],
     "holds 5 to 6 samples, not --samples 7"),
    (["--dataset", "{d}/*.h5:x", "--dataset", "{d}/*.h5:/x", "--rows-per-file", "2"],
     "listed twice"),
    (["--files-from", "{d}/a.h5", "--dataset", "{d}/a.h5:x"], "give only the dataset NAME"),
    (["--rows-per-file", "4", "--samples", "8"], "--rows-per-file needs --dataset"),
])
def test_map_usage_errors_name_the_flag_and_file(tool, tmp_path, args, message):
    d = make_files(tmp_path / "e", ["a.h5", "b.h5", "c.h5"])
    args = [a.replace("{d}", str(d)) for a in args]
    result = run_tool(tool, "generate", "--source", "sequential", "--epochs", 1, "--quiet",
                      "--output", tmp_path / "x.sched", *args, check=False)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr, result.stderr


def test_sampler_yields_global_ids_that_locate_real_rows(tool, tmp_path):
    """The sampler over a multi-file map yields global sample ids; the map's
    locate gives the (file, row) whose bytes the loader reads."""
    h5py = pytest.importorskip("h5py")
    d = tmp_path / "h5"
    d.mkdir()
    for i in range(5):
        with h5py.File(d / f"part_{i}.h5", "w") as f:
            rows = 6 if i < 4 else 3
            base = 6 * i
            f["x"] = np.arange(base, base + rows, dtype=np.int64)[:, None] * np.ones((1, 3),
                                                                                    np.int64)
            f["label"] = np.arange(base, base + rows, dtype=np.int32)
    out = tmp_path / "h.sched"
    gen(tool, out, "--dataset", f"{d}/part_*.h5:x", "--dataset", f"{d}/part_*.h5:label",
        "--rows-per-file", 6, "--row-bytes", 24, "--row-bytes", 4, samples=27)
    f = ScheduleFile(out)
    m = f.header.map
    sampler = ScheduleBatchSampler(f, rank=1)
    sampler.set_epoch(1)
    assert sampler.sample_map == m and sampler.locate(13) == (2, 1)
    seen = []
    for batch in sampler:
        files, rows = m.locate_many(batch)
        for sample, fi, row in zip(batch, files.tolist(), rows.tolist()):
            with h5py.File(m.files[fi].path, "r") as h:
                assert h[m.fields[0].dataset][row].tolist() == [sample] * 3
                assert int(h[m.fields[1].dataset][row]) == sample
            seen.append(sample)
    assert len(seen) == 14  # 27 samples padded to 28, over 2 ranks
    # The fingerprint check picks the file by path among several.
    with h5py.File(d / "part_2.h5", "r") as h:
        ScheduleSampler(f, rank=0, dataset=h["label"])
    with h5py.File(d / "part_4.h5", "r") as h:
        ScheduleSampler(f, rank=0, dataset=h["x"])  # the short last file
    other = fingerprint_dataset(str(d / "part_2.h5"), "x", 7, 24)
    with pytest.raises(DatasetMismatchError, match="row count is 7"):
        ScheduleSampler(f, rank=0, dataset=other)
    with pytest.raises(DatasetMismatchError, match="files are"):
        f.check_dataset(DatasetFingerprint(str(tmp_path / "h.sched"), "x", 6, 24))


def test_simulate_sizes_the_cache_by_the_fields_in_blocks(tool, tmp_path):
    """--cache in bytes: all fields of a sample are cached together, each row
    in whole blocks of --block-bytes; storage rows = storage reads x fields."""
    import json
    d = make_files(tmp_path / "s", [f"f{i}.h5" for i in range(4)])
    out = tmp_path / "s.sched"
    gen(tool, out, "--dataset", f"{d}/f*.h5:images", "--dataset", f"{d}/f*.h5:labels",
        "--rows-per-file", 25, "--row-bytes", 5000, "--row-bytes", 8, epochs=3)

    def simulate(*args):
        j = tmp_path / "sim.json"
        text = run_tool(tool, "simulate", out, "--policy", "lru,belady", "--model", "none",
                        "--quiet", "--json", j, *args).stdout
        return text, json.load(open(j))

    text, doc = simulate("--cache", "1MiB")
    slot = 8192 + 4096  # ceil(5000 / 4096) and ceil(8 / 4096) blocks
    assert doc["slot_bytes"] == slot and doc["row_bytes"] == 5008
    assert doc["cache_samples"] == (1 << 20) // slot
    assert doc["fields"] == ["images", "labels"] and doc["rows_per_sample"] == 2
    for p in doc["policies"]:
        assert p["storage_rows"] == 2 * p["storage"]
    assert "storage rows" in text and "fields: 2 (images, labels)" in text
    _, doc = simulate("--cache", "1MiB", "--block-bytes", "1")
    assert doc["cache_samples"] == (1 << 20) // 5008
    _, doc = simulate("--cache", "1MiB", "--row-bytes", "1000")  # one field of 1000 bytes
    assert doc["cache_samples"] == (1 << 20) // 4096 and doc["rows_per_sample"] == 1

"""Cross-check: rows decoded by cache/io (prescient-rawread, no HDF5) are
byte-for-byte what h5py reads, on real HDF5 files made here: contiguous,
chunked, chunked+gzip, chunked+shuffle+gzip, several dtypes, partial edge
chunks, chunks that split inner dimensions, unwritten chunks with a fill
value, and chunks whose filter mask skips pipeline stages."""
import json
import subprocess
import zlib

import h5py
import numpy as np
import pytest

from raw_layout_h5py import raw_layout_text

RNG_SEED = 20261121


def _smooth(rng, shape, dtype):
    """Compressible data (a smooth field plus noise), cast to dtype."""
    n = int(np.prod(shape))
    base = np.sin(np.arange(n, dtype=np.float64) / 37.0) * 100 + rng.normal(0, 3, n)
    return base.reshape(shape).astype(dtype)


def _make_file(path):
    rng = np.random.default_rng(RNG_SEED)
    with h5py.File(path, "w") as f:
        f.create_dataset("contig_f4", data=_smooth(rng, (500, 16, 16), "<f4"))
        f.create_dataset("contig_i2", data=_smooth(rng, (300, 7), "<i2"))
        f.create_dataset("contig_be_i4", data=_smooth(rng, (64, 5, 3), ">i4"))
        f.create_dataset("chunk_u1_edge", data=_smooth(rng, (250, 10, 9), "u1"), chunks=(32, 10, 9))
        f.create_dataset("chunk_f8_inner", data=_smooth(rng, (200, 13, 11), "<f8"), chunks=(16, 5, 4))
        f.create_dataset(
            "gzip_i4", data=_smooth(rng, (300, 20, 20), "<i4"), chunks=(32, 20, 20), compression="gzip",
            compression_opts=4)
        f.create_dataset(
            "shuffle_gzip_f4_inner", data=_smooth(rng, (257, 33, 17), "<f4"), chunks=(10, 16, 8),
            compression="gzip", shuffle=True)
        f.create_dataset(
            "shuffle_gzip_be_i8", data=_smooth(rng, (100, 6), ">i8"), chunks=(7, 4), compression="gzip",
            shuffle=True)
        f.create_dataset("gzip_rank1_f8", data=_smooth(rng, (1000,), "<f8"), chunks=(64,), compression="gzip")
        # Unwritten chunks read as the fill value.
        partial = f.create_dataset("partial_fill_i4", shape=(100, 8), dtype="<i4", chunks=(10, 8),
                                   fillvalue=-7, compression="gzip")
        partial[20:43] = _smooth(rng, (23, 8), "<i4")
        # Per-chunk filter masks (HDF5 sets them when an optional filter fails;
        # written here directly): chunk k skips the pipeline stages in k % 4
        # (bit 0 = shuffle, bit 1 = deflate).
        masked = f.create_dataset("masked_shuffle_gzip_u2", shape=(100, 32), dtype="<u2",
                                  chunks=(16, 32), compression="gzip", shuffle=True)
        data = _smooth(rng, (112, 32), "<u2")  # full-size chunks, the edge one included
        for k in range(7):
            chunk = np.ascontiguousarray(data[16 * k:16 * (k + 1)])
            stored = chunk.tobytes()
            mask = k % 4
            if not mask & 1:
                stored = chunk.view("u1").reshape(-1, 2).T.tobytes()  # HDF5 shuffle
            if not mask & 2:
                stored = zlib.compress(stored, 6)
            masked.id.write_direct_chunk((16 * k, 0), stored, filter_mask=mask)


DATASETS = [
    "contig_f4", "contig_i2", "contig_be_i4", "chunk_u1_edge", "chunk_f8_inner", "gzip_i4",
    "shuffle_gzip_f4_inner", "shuffle_gzip_be_i8", "gzip_rank1_f8", "partial_fill_i4",
    "masked_shuffle_gzip_u2",
]


@pytest.fixture(scope="module")
def h5file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cache_io") / "layouts.h5"
    _make_file(str(path))
    return path


def _rawread(rawread, tmp_path, layout_text, rows, extra):
    layout = tmp_path / "layout.txt"
    layout.write_text(layout_text)
    rows_file = tmp_path / "rows.txt"
    rows_file.write_text(" ".join(str(r) for r in rows))
    out = tmp_path / "out.bin"
    done = subprocess.run(
        [str(rawread), "--layout", str(layout), "--rows", str(rows_file), "--out", str(out), *extra],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return out.read_bytes(), json.loads(done.stdout)


@pytest.mark.parametrize("name", DATASETS)
def test_rows_match_h5py(rawread, h5file, tmp_path, name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    with h5py.File(h5file, "r") as f:
        dset = f[name]
        layout_text = raw_layout_text(str(h5file), dset)
        n = dset.shape[0]
        row_sets = [
            rng.integers(0, n, 40).tolist(),                 # random, with repeats
            sorted(rng.choice(n, min(n, 25), replace=False).tolist()),
            [n - 1, 0, n - 1],                               # edge rows
            list(range(n)),                                  # everything
        ]
        settings = [
            ["--max-gap", "0", "--max-run", "0", "--threads", "1"],
            ["--threads", "3"],
            ["--max-gap", "100000000", "--max-run", "100000000", "--threads", "2"],
        ]
        for rows in row_sets:
            expected = b"".join(np.ascontiguousarray(dset[r]).tobytes() for r in rows)
            for extra in settings:
                got, stats = _rawread(rawread, tmp_path, layout_text, rows, extra)
                assert stats["rows"] == len(set(rows))
                assert got == expected, f"{name}: rows {rows[:8]}... differ with {extra}"


def test_filter_mask_case_really_has_masked_chunks(h5file):
    with h5py.File(h5file, "r") as f:
        dset = f["masked_shuffle_gzip_u2"]
        masks = {dset.id.get_chunk_info(i).filter_mask for i in range(dset.id.get_num_chunks())}
    assert masks == {0, 1, 2, 3}, masks


def test_partial_dataset_has_unwritten_chunks(h5file):
    with h5py.File(h5file, "r") as f:
        dset = f["partial_fill_i4"]
        assert dset.id.get_num_chunks() < 10


def test_unsupported_filter_is_refused(rawread, tmp_path):
    path = tmp_path / "scaleoffset.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("d", data=np.arange(100, dtype="<i4").reshape(20, 5), chunks=(4, 5),
                         scaleoffset=0)
    with h5py.File(path, "r") as f:
        layout_text = raw_layout_text(str(path), f["d"])
    layout = tmp_path / "layout.txt"
    layout.write_text(layout_text)
    rows = tmp_path / "rows.txt"
    rows.write_text("1 2")
    done = subprocess.run([str(rawread), "--layout", str(layout), "--rows", str(rows), "--out",
                           str(tmp_path / "o.bin")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "unsupported" in done.stderr and "filter id 6" in done.stderr


def test_corrupt_chunk_is_a_clear_error(rawread, tmp_path):
    path = tmp_path / "corrupt.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("d", data=_smooth(np.random.default_rng(1), (64, 32), "<f4"), chunks=(16, 32),
                         compression="gzip")
    with h5py.File(path, "r") as f:
        layout_text = raw_layout_text(str(path), f["d"])
        info = f["d"].id.get_chunk_info(1)
    with open(path, "r+b") as raw:
        raw.seek(info.byte_offset + 10)
        raw.write(b"\xff" * 32)
    layout = tmp_path / "layout.txt"
    layout.write_text(layout_text)
    rows = tmp_path / "rows.txt"
    rows.write_text("20")
    done = subprocess.run([str(rawread), "--layout", str(layout), "--rows", str(rows), "--out",
                           str(tmp_path / "o.bin")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "corruption" in done.stderr and "chunk 1" in done.stderr, done.stderr


def test_file_with_userblock(rawread, tmp_path):
    """Offsets from h5py (H5Dget_offset, H5Dget_chunk_info) must be absolute
    file offsets even when a user block shifts HDF5's base address."""
    path = tmp_path / "userblock.h5"
    rng = np.random.default_rng(5)
    with h5py.File(path, "w", userblock_size=4096) as f:
        f.create_dataset("c", data=_smooth(rng, (50, 9), "<f4"))
        f.create_dataset("z", data=_smooth(rng, (50, 9), "<f4"), chunks=(8, 9), compression="gzip")
    with h5py.File(path, "r") as f:
        for name in ("c", "z"):
            rows = [49, 0, 17, 17, 33]
            got, _ = _rawread(rawread, tmp_path, raw_layout_text(str(path), f[name]), rows, [])
            assert got == b"".join(f[name][r].tobytes() for r in rows), name

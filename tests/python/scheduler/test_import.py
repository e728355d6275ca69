"""prescient-schedule import (issue 12): schedules from explicit orders computed
offline, in .npy files written by NumPy itself and in text files; compared
with the same lists split and batched in Python."""

import pytest

np = pytest.importorskip("numpy", reason="numpy is missing: run this suite inside env/run")

from conftest import batch, batches_from_file, run_tool, split_like_distributed_sampler  # noqa: E402
from prescient_sampler import ScheduleFile  # noqa: E402


def do_import(tool, order_file, out, *args, check=True):
    return run_tool(tool, "import", order_file, "--output", out, "--quiet", *map(str, args),
                    check=check)


@pytest.mark.parametrize("dtype", ["<i8", "<i4", "<u4", "<i2", "u1"])
def test_per_rank_lists_from_numpy(tool, tmp_path, dtype):
    rng = np.random.default_rng(1)
    epochs, ranks, per_rank = 4, 3, 40
    # SOLAR-like: every epoch a permutation, epochs in a reordered sequence.
    perms = [rng.permutation(120) for _ in range(epochs)][::-1]
    arr = np.stack([p.reshape(ranks, per_rank, order="F") for p in perms]).astype(dtype)
    assert arr.shape == (epochs, ranks, per_rank)
    np.save(tmp_path / "order.npy", arr)
    out = tmp_path / "o.sched"
    do_import(tool, tmp_path / "order.npy", out, "--ranks", ranks, "--ranks-per-node", 3,
              "--batch-size", 7, "--workers", 2)
    f = ScheduleFile(out)
    assert f.header.source == "import" and f.header.num_samples == 120
    assert f.header.parameters.startswith("format=npy,split=0")
    for e in range(epochs):
        for r in range(ranks):
            assert batches_from_file(out, r, e) == batch(arr[e, r].tolist(), 7, False)


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("drop_last_batch", [False, True])
def test_global_orders_split_like_distributed_sampler(tool, tmp_path, drop_last,
                                                      drop_last_batch):
    rng = np.random.default_rng(2)
    n, ranks, epochs = 101, 4, 3
    arr = np.stack([rng.permutation(n) for _ in range(epochs)]).astype(np.uint32)
    np.save(tmp_path / "g.npy", arr)
    out = tmp_path / "g.sched"
    flags = ["--ranks", ranks, "--batch-size", 8, "--samples", n]
    flags += ["--drop-last"] if drop_last else []
    flags += ["--drop-last-batch"] if drop_last_batch else []
    do_import(tool, tmp_path / "g.npy", out, *flags)
    for e in range(epochs):
        for r in range(ranks):
            want = batch(split_like_distributed_sampler(arr[e].tolist(), ranks, r, drop_last), 8,
                         drop_last_batch)
            assert batches_from_file(out, r, e) == want


def test_text_files_per_rank_and_split(tool, tmp_path):
    lines = ["# epoch 0", "0 1 2 3", "4 5 6 7", "7 6 5 4", "3 2 1 0"]
    (tmp_path / "o.txt").write_text("\n".join(lines) + "\n")
    out = tmp_path / "t.sched"
    do_import(tool, tmp_path / "o.txt", out, "--ranks", 2, "--batch-size", 3)
    assert batches_from_file(out, 1, 0) == [[4, 5, 6], [7]]
    assert batches_from_file(out, 0, 1) == [[7, 6, 5], [4]]
    (tmp_path / "s.txt").write_text("5 4 3 2 1 0\n0 1 2 3 4 5\n")
    do_import(tool, tmp_path / "s.txt", out, "--split", "--ranks", 2, "--batch-size", 2)
    assert batches_from_file(out, 0, 0) == [[5, 3], [1]]
    assert batches_from_file(out, 1, 1) == [[1, 3], [5]]
    assert ScheduleFile(out).header.epochs == 2


def test_import_with_a_sample_map_and_simulate(tool, tmp_path):
    d = tmp_path / "files"
    d.mkdir()
    for i in range(4):
        (d / f"f{i}.h5").write_bytes(b"\0" * 10)
    arr = np.stack([np.random.default_rng(e).permutation(40) for e in range(3)])
    np.save(tmp_path / "o.npy", arr)
    out = tmp_path / "m.sched"
    do_import(tool, tmp_path / "o.npy", out, "--ranks", 2, "--batch-size", 4, "--dataset",
              f"{d}/f*.h5:x", "--rows-per-file", 10, "--row-bytes", 100)
    m = ScheduleFile(out).header.map
    assert len(m.files) == 4 and m.num_samples == 40
    result = run_tool(tool, "simulate", out, "--cache", "10", "--policy", "lru,belady",
                      "--quiet")
    assert "belady" in result.stdout


@pytest.mark.parametrize("make,args,message", [
    (lambda p: np.save(p, np.zeros((2, 3, 4), np.int64)), ["--ranks", 2], "for 3 ranks"),
    (lambda p: np.save(p, np.arange(8).reshape(2, 4)), ["--samples", 5], "sample id 5"),
    (lambda p: np.save(p, -np.ones((1, 4), np.int64)), [], "sample id -1"),
    (lambda p: np.save(p, np.zeros((2, 4), np.float32)), [], "must be integers"),
    (lambda p: np.save(p, np.zeros((2, 4), ">i4")), [], "big-endian"),
    (lambda p: np.save(p, np.asfortranarray(np.zeros((2, 4), np.int64))), [], "Fortran"),
    (lambda p: np.save(p, np.zeros(4, np.int64)), [], "dimensions"),
])
def test_bad_numpy_files(tool, tmp_path, make, args, message):
    path = tmp_path / "bad.npy"
    make(path)
    result = do_import(tool, path, tmp_path / "x.sched", *args, check=False)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_ranks_with_different_step_counts_are_refused(tool, tmp_path):
    (tmp_path / "o.txt").write_text("0 1 2 3\n4 5\n")
    result = do_import(tool, tmp_path / "o.txt", tmp_path / "x.sched", "--ranks", 2,
                       "--batch-size", 1, check=False)
    assert result.returncode == 2
    assert "same number of steps" in result.stderr

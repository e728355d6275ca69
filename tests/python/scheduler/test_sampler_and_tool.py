"""The Python sampler (prescient_sampler) and the prescient-schedule CLI:
fingerprints, error classes, DataLoader integration, help and usage errors."""

import os
import struct
import zlib

import pytest

np = pytest.importorskip("numpy", reason="numpy is missing: run this suite inside env/run")
torch = pytest.importorskip("torch", reason="torch is missing: run this suite inside env/run")

from conftest import batches_from_dump, batches_from_file, generate, run_tool  # noqa: E402
from prescient_sampler import (DatasetFingerprint, DatasetMismatchError,  # noqa: E402
                               ScheduleBatchSampler, ScheduleFile, ScheduleFileError,
                               ScheduleSampler, fingerprint_dataset)


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "train.bin"
    path.write_bytes(b"x" * 4000)
    return path


@pytest.fixture
def sched(tool, tmp_path, data_file):
    return generate(tool, tmp_path / "s.sched", "torch-distributed", 100, 3, ranks=4,
                    batch_size=8, seed=9,
                    extra=["--dataset", f"{data_file}:images", "--row-bytes", "40"])


def test_sampler_follows_the_file(sched):
    s = ScheduleSampler(sched, rank=2, num_replicas=4)
    b = ScheduleBatchSampler(sched, rank=2)
    for epoch in range(3):
        s.set_epoch(epoch)
        b.set_epoch(epoch)
        batches = batches_from_file(sched, 2, epoch)
        assert list(b) == batches
        assert list(s) == [x for bt in batches for x in bt]
        assert len(s) == 25 and len(b) == 4


def test_batch_sampler_in_a_dataloader(sched):
    ds = torch.utils.data.TensorDataset(torch.arange(100) * 10)
    b = ScheduleBatchSampler(sched, rank=1)
    b.set_epoch(1)
    loader = torch.utils.data.DataLoader(ds, batch_sampler=b)
    got = [t[0].tolist() for t in loader]
    assert got == [[x * 10 for x in bt] for bt in batches_from_file(sched, 1, 1)]


def test_rank_from_environment(sched, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    assert ScheduleSampler(sched).rank == 3


def test_fingerprint_checks(sched, data_file):
    good = fingerprint_dataset(str(data_file), "/images", 100, 40)  # h5py names start with /
    ScheduleSampler(sched, rank=0, dataset=good)
    with pytest.raises(DatasetMismatchError, match="row count is 101"):
        ScheduleSampler(sched, rank=0, dataset=fingerprint_dataset(str(data_file), "images", 101,
                                                                   40))
    with pytest.raises(DatasetMismatchError, match="dataset name"):
        ScheduleSampler(sched, rank=0, dataset=fingerprint_dataset(str(data_file), "labels", 100,
                                                                   40))
    data_file.write_bytes(b"y" * 4001)  # the dataset changed after planning
    changed = fingerprint_dataset(str(data_file), "images", 100, 40)
    with pytest.raises(DatasetMismatchError, match="file size"):
        ScheduleSampler(sched, rank=0, dataset=changed)
    ScheduleSampler(sched, rank=0, dataset=changed, check_dataset={"file_stat": False})
    ScheduleSampler(sched, rank=0, dataset=changed, check_dataset=False)


def test_h5py_dataset_fingerprint(tool, tmp_path):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "d.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("images", data=np.zeros((20, 3, 4), dtype=np.float32))
    out = generate(tool, tmp_path / "h.sched", "torch-distributed", 20, 1, ranks=2,
                   extra=["--dataset", f"{path}:images", "--row-bytes", str(3 * 4 * 4)])
    with h5py.File(path, "r") as f:
        ScheduleSampler(out, rank=0, dataset=f["images"])
    with h5py.File(path, "a") as f:
        f.create_dataset("more", data=np.zeros(1000))
    with h5py.File(path, "r") as f, pytest.raises(DatasetMismatchError):
        ScheduleSampler(out, rank=0, dataset=f["images"])


def test_wrong_rank_count_and_epoch(sched):
    with pytest.raises(ScheduleFileError, match="4 ranks"):
        ScheduleSampler(sched, rank=0, num_replicas=8)
    with pytest.raises(ScheduleFileError) as e:
        ScheduleSampler(sched, rank=4)
    assert e.value.code == "out-of-range"
    s = ScheduleSampler(sched, rank=0)
    with pytest.raises(ScheduleFileError, match="epochs 0..2"):
        s.set_epoch(3)


def test_recipe_files_are_refused_with_advice(tool, tmp_path):
    path = generate(tool, tmp_path / "r.sched", "torch-distributed", 100, 2, ranks=2,
                    store="recipe")
    with pytest.raises(ScheduleFileError, match="DistributedSampler") as e:
        ScheduleSampler(path, rank=0)
    assert e.value.code == "unsupported"


def corrupt(path, offset, xor=0x10):
    data = bytearray(path.read_bytes())
    data[offset] ^= xor
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("case,code", [
    ("truncated", "truncated"), ("empty", "truncated"), ("magic", "bad-magic"),
    ("version", "bad-version"), ("preamble", "bad-checksum"), ("header", "bad-checksum"),
    ("index", "bad-checksum"), ("part", "bad-checksum"), ("trailing", "corrupt")])
def test_corrupt_files_give_specific_errors(tool, sched, case, code):
    data = bytearray(sched.read_bytes())
    index_offset = struct.unpack_from("<Q", data, 40)[0]
    if case == "truncated":
        data = data[:-7]
    elif case == "empty":
        data = bytearray()
    elif case == "magic":
        data[2] ^= 1
    elif case == "version":
        struct.pack_into("<I", data, 8, 7)
        struct.pack_into("<I", data, 76, zlib.crc32(bytes(data[:76])))
    elif case == "preamble":
        data[30] ^= 1
    elif case == "header":
        data[100] ^= 1
    elif case == "index":
        data[index_offset + 3] ^= 1
    elif case == "part":
        data[-20] ^= 1
    elif case == "trailing":
        data += b"\0" * 8
    sched.write_bytes(bytes(data))
    # Python reader: a ScheduleFileError with the right code, at open or on
    # first use of the damaged part.
    with pytest.raises(ScheduleFileError) as e:
        f = ScheduleFile(sched)
        for epoch in range(3):
            for rank in range(4):
                f.part(rank, epoch)
    assert e.value.code == code, str(e.value)
    # The C++ reader through the tool: exit status 1 and the same diagnosis.
    result = run_tool(tool, "inspect", sched, check=False)
    assert result.returncode == 1
    expected = {"truncated": "truncated", "bad-magic": "bad magic", "bad-version": "version 7",
                "bad-checksum": "checksum", "corrupt": "unexpected bytes"}[code]
    assert expected in result.stdout + result.stderr


def test_index_file(tool, sched, tmp_path):
    out = tmp_path / "node1.nextuse"
    run_tool(tool, "index", sched, "--node", 1, "--read-table", "--quiet", "--output", out)
    assert out.read_bytes()[:8] == b"\x89PNUI\r\n\x1a"
    bad = run_tool(tool, "index", sched, "--node", 9, "--output", out, check=False)
    assert bad.returncode == 2 and "4 nodes" in bad.stderr


def test_inspect_summary(tool, sched, data_file):
    out = run_tool(tool, "inspect", sched).stdout
    for needle in ["torch-distributed", "seed=9", "4 ranks", "batch 8", "epochs:      3",
                   "checksums:   ok", "map:         1 file, 100 rows per file, 100 samples",
                   f"first:     '{os.path.realpath(data_file)}': 100 rows, 4000 B",
                   "fields:      images (40 bytes per row); 40 bytes per sample",
                   "rank 0, epoch 0, first 16:"]:
        assert needle in out, needle
    assert run_tool(tool, "inspect", sched, "--check-dataset", data_file).returncode == 0
    os.utime(data_file, ns=(1, 1))
    bad = run_tool(tool, "inspect", sched, "--check-dataset", data_file, check=False)
    assert bad.returncode == 1 and "MISMATCH" in bad.stdout


@pytest.mark.parametrize("command", ["generate", "import", "inspect", "dump", "index", "simulate"])
def test_help(tool, command):
    result = run_tool(tool, command, "--help", check=False)
    assert result.returncode == 0
    assert "usage" in result.stdout.lower()


@pytest.mark.parametrize("args,message", [
    (["generate", "--source", "torch", "--samples", "5", "--epochs", "1", "--output", "x"],
     "unknown loader source"),
    (["generate", "--source", "numpy", "--samples", "5", "--epochs", "1", "--output", "x",
      "--seed", "-1"], "negative"),
    (["generate", "--source", "torch-loader", "--samples", "5", "--epochs", "1", "--ranks", "2",
      "--output", "x"], "one rank"),
    (["generate", "--source", "numpy", "--samples", "five", "--epochs", "1", "--output", "x"],
     "unsigned integer"),
    (["generate", "--source", "numpy", "--samples", "5", "--epochs", "1", "--output", "x",
      "--frobnicate"], "unknown option --frobnicate"),
    (["generate", "--source", "numpy", "--samples", "5", "--epochs", "1", "--output", "x",
      "--dataset", "nocolon"], "FILE:NAME"),
    (["bogus"], "unknown command"),
])
def test_usage_errors(tool, args, message):
    result = run_tool(tool, *args, check=False)
    assert result.returncode == 2
    assert message in result.stderr


def test_plan_source_writes_a_readable_schedule(tool, tmp_path):
    path = tmp_path / "p.sched"
    result = run_tool(tool, "generate", "--source", "plan", "--samples", 1000, "--epochs", 3,
                      "--ranks", 4, "--ranks-per-node", 2, "--batch-size", 10, "--seed", 5,
                      "--plan", "order=global,cache=25%,solar=on", "--quiet", "--output", path,
                      check=False)
    if result.returncode == 2 and "no planner" in result.stderr:
        pytest.skip("this build has no planner")
    assert result.returncode == 0, result.stderr
    f = ScheduleFile(path)
    assert f.header.source == "plan" and f.header.seed == 5
    for epoch in range(3):
        seen = []
        steps = None
        for rank in range(4):
            s = ScheduleBatchSampler(f, rank=rank)
            s.set_epoch(epoch)
            batches = list(s)
            steps = steps or len(batches)
            assert len(batches) == steps  # every rank has the same number of steps
            seen += [x for b in batches for x in b]
            assert batches == batches_from_dump(tool, path, rank, epoch)  # C++ reader agrees
        assert sorted(seen) == list(range(1000))

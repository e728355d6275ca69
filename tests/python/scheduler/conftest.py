"""Fixtures for the scheduler's pytest suite (run inside env/run).

The suite compares prescient-schedule against real torch and numpy. It finds
the built tool through PRESCIENT_BUILD_DIR (default /work/main/build/dev) and
the Python sampler in scheduler/python of this checkout.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scheduler" / "python"))

BUILD_DIR = Path(os.environ.get("PRESCIENT_BUILD_DIR", "/work/main/build/dev"))
TOOL = BUILD_DIR / "scheduler" / "tool" / "prescient-schedule"


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: the n >= 214,748,364 randperm cases (minutes, "
                            "~3 GiB); deselect with -m 'not slow'")


@pytest.fixture(scope="session")
def tool() -> Path:
    if not TOOL.exists():
        pytest.fail(f"prescient-schedule not found at {TOOL}: build it "
                    f"(env/run cmake --build {BUILD_DIR}) or set PRESCIENT_BUILD_DIR")
    return TOOL


def run_tool(tool: Path, *args, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([str(tool), *map(str, args)], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"prescient-schedule {' '.join(map(str, args))} failed "
                             f"({result.returncode}):\n{result.stderr}")
    return result


def generate(tool: Path, out: Path, source: str, samples: int, epochs: int, *, ranks=1,
             ranks_per_node=1, workers=0, batch_size=1, seed=0, store="lists", extra=()):
    run_tool(tool, "generate", "--source", source, "--samples", samples, "--epochs", epochs,
             "--ranks", ranks, "--ranks-per-node", ranks_per_node, "--workers", workers,
             "--batch-size", batch_size, "--seed", seed, "--store", store, "--quiet",
             "--output", out, *extra)
    return out


def batches_from_file(path: Path, rank: int, epoch: int):
    """A rank's batches of one epoch as lists, through the Python reader."""
    from prescient_sampler import ScheduleFile
    samples, bounds = ScheduleFile(path).part(rank, epoch)
    ids, b = samples.tolist(), bounds.tolist()
    return [ids[b[s]:b[s + 1]] for s in range(len(b) - 1)]


def batches_from_dump(tool: Path, path: Path, rank: int, epoch: int):
    """The same through the C++ reader (regenerates recipe files)."""
    out = run_tool(tool, "dump", path, "--rank", rank, "--epoch", epoch).stdout
    return [[int(x) for x in line.split()] for line in out.splitlines()]


def split_like_distributed_sampler(order, ranks, rank, drop_last):
    """DistributedSampler's padding / truncation and stride split applied to
    an arbitrary epoch order (the numpy and sequential sources)."""
    import math
    n = len(order)
    indices = list(order)
    if drop_last and n % ranks:
        num = math.ceil((n - ranks) / ranks)
    else:
        num = math.ceil(n / ranks)
    total = num * ranks
    if not drop_last:
        padding = total - n
        if padding <= n:
            indices += indices[:padding]
        else:
            indices += (indices * math.ceil(padding / n))[:padding]
    else:
        indices = indices[:total]
    return indices[rank:total:ranks]


def batch(lst, size, drop_last):
    out = [lst[i:i + size] for i in range(0, len(lst), size)]
    if drop_last and out and len(out[-1]) < size:
        out.pop()
    return out

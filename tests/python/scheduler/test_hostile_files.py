"""The Python reader under hostile files (issue 10, items 2 and 7): a schedule
truncated or rewritten in place under an open ScheduleFile gives a
ScheduleFileError, never a SIGBUS; a FIFO is refused without blocking. Each
case runs in a subprocess so that a signal or a hang shows as a failure."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numpy", reason="numpy is missing: run this suite inside env/run")

from conftest import REPO, generate  # noqa: E402


def run_child(code: str, timeout: float = 30) -> subprocess.CompletedProcess:
    script = f"import sys\nsys.path.insert(0, {str(REPO / 'scheduler' / 'python')!r})\n" + \
        textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def sched(tool, tmp_path):
    return generate(tool, tmp_path / "a.sched", "torch-distributed", 4000, 6, ranks=4,
                    batch_size=16, seed=1)


def test_truncated_under_an_open_reader(sched):
    result = run_child(f"""
        import os
        from prescient_sampler import ScheduleFile, ScheduleFileError
        f = ScheduleFile({str(sched)!r})
        samples, _ = f.part(3, 5)              # the last part: past the new end below
        before = samples.tolist()
        os.truncate({str(sched)!r}, os.path.getsize({str(sched)!r}) // 2)
        assert samples.tolist() == before      # a part read before stays whole
        errors = 0
        for epoch in range(6):
            for rank in range(4):
                try:
                    f.part(rank, epoch)[0].sum()
                except ScheduleFileError as e:
                    assert e.code == "truncated", e
                    errors += 1
        assert errors > 0
        print("ok", errors)
        """)
    assert result.returncode == 0, (result.returncode, result.stderr)
    assert result.stdout.startswith("ok")


def test_overwritten_in_place_under_an_open_reader(tool, sched, tmp_path):
    other = generate(tool, tmp_path / "b.sched", "torch-distributed", 4000, 6, ranks=4,
                     batch_size=16, seed=2)
    short = tmp_path / "short"
    short.write_bytes(b"not a schedule")
    for source, code in ((other, "bad-checksum"), (short, "truncated")):
        shutil.copy(tmp_path / "a.sched", tmp_path / "c.sched")
        result = run_child(f"""
            import shutil
            from prescient_sampler import ScheduleFile, ScheduleFileError
            f = ScheduleFile({str(tmp_path / 'c.sched')!r})
            with open({str(source)!r}, "rb") as src, open({str(tmp_path / 'c.sched')!r}, "r+b") as dst:
                dst.truncate(0)                     # as cp does: O_TRUNC, then write
                shutil.copyfileobj(src, dst)
            codes = set()
            for epoch in range(6):
                for rank in range(4):
                    try:
                        f.part(rank, epoch)
                    except ScheduleFileError as e:
                        codes.add(e.code)
            print(sorted(codes))
            """)
        assert result.returncode == 0, (result.returncode, result.stderr)
        assert result.stdout.strip() == str([code])


def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    result = run_child(f"""
        from prescient_sampler import ScheduleFile, ScheduleFileError
        try:
            ScheduleFile({str(fifo)!r})
        except ScheduleFileError as e:
            assert e.code == "io" and {str(fifo)!r} in str(e) and "not a regular file" in str(e), e
            print("refused")
        """, timeout=20)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "refused"


def test_fifo_is_refused_by_the_tool(tool, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    result = subprocess.run([str(tool), "inspect", str(fifo)], capture_output=True, text=True,
                            timeout=20)
    assert result.returncode == 1
    assert "not a regular file" in result.stderr

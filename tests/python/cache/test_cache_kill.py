"""SIGKILL tests (issue 4, section 5): readers of one node share a cache smaller than a slow
gzip dataset, so they load (and wait for each other's loads) most of the time. One reader is
killed mid-run: the loading reader, or the process that created the segment. The others must
finish with native data within a bounded delay, and the next run on the node must start clean
and leave nothing in /dev/shm."""

import os
import signal
import subprocess
import sys
import time

import pytest

from cachetest_support import HERE, read_json, run, segment_leftovers, wait_for

READER = os.path.join(HERE, "cachetest_kill_reader.py")
ROWS, READS, SEED = 800, 140, 1
CACHE_SIZE = "16MiB"  # well below the 50 MiB dataset: the readers keep loading
GRACE = 30.0  # seconds a kill may add to the survivors' run
VICTIM_LAPS = 1000  # a victim is still reading when its kill comes, however early it started


def digests(path):
    out = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2:  # a killed reader's last line may be cut
                    out[int(parts[0])] = parts[1]
    return out


@pytest.fixture(scope="module")
def kill_data(tmp_path_factory, cache):
    root = tmp_path_factory.mktemp("cache-kill")
    data = root / "slow.h5"
    run([READER, data, "--make", ROWS], cache.native_env(), root)
    run([READER, data, root / "native.txt", "--reads", READS, "--seed", SEED], cache.native_env(),
        root)
    native = digests(root / "native.txt")
    assert len(native) == READS
    return root, data, native


class Readers:
    def __init__(self, cache, data, node_id, tmp_path):
        self.cache, self.data, self.node_id, self.dir = cache, data, node_id, tmp_path
        self.procs = {}

    def start(self, name, start_at=0, laps=1):
        env = self.cache.connector_env(self.node_id, stats=self.dir / f"stats-{name}.json",
                                       extra={"PRESCIENT_CACHE_SIZE": CACHE_SIZE})
        self.procs[name] = subprocess.Popen(
            [sys.executable, READER, self.data, self.dir / f"{name}.txt", "--reads", str(READS),
             "--seed", str(SEED), "--start", str(start_at), "--laps", str(laps)],
            env=env, cwd=self.dir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def progress(self, name):
        """Reads done so far (a victim goes round its plan more than once)."""
        path = self.dir / f"{name}.txt"
        if not os.path.exists(path):
            return 0
        with open(path) as f:
            return sum(1 for line in f if len(line.split()) == 2)

    def kill(self, name):
        proc = self.procs[name]
        assert proc.poll() is None, f"{name} ended (exit {proc.returncode}) before its kill"
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def finish(self, names, timeout):
        """Waits for names; returns their run time after this call. Fails on a hang or crash."""
        start = time.monotonic()
        for name in names:
            proc = self.procs[name]
            try:
                _, err = proc.communicate(timeout=max(1.0, start + timeout - time.monotonic()))
            except subprocess.TimeoutExpired:
                for p in self.procs.values():
                    p.kill()
                pytest.fail(f"reader {name} did not finish within {timeout:.0f} s of the kill "
                            f"(progress {self.progress(name)}/{READS} reads)", pytrace=False)
            assert proc.returncode == 0, f"reader {name} exit {proc.returncode}: {err[-3000:]}"
        return time.monotonic() - start

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


def _check(native, got, what):
    for i, d in got.items():
        assert d == native[i], f"{what}: read {i} (plan seed {SEED}) differs from native"


def _kill_scenario(cache, kill_data, node_id, tmp_path, creator_first, victims):
    root, data, native = kill_data
    readers = Readers(cache, data, node_id, tmp_path)
    names = ["r0", "r1", "r2", "r3"]
    try:
        if creator_first:
            readers.start("r0", laps=VICTIM_LAPS if "r0" in victims else 1)
            assert wait_for(lambda: segment_leftovers(node_id), 60), "no segment appeared"
        for k, name in enumerate(names):
            if name not in readers.procs:
                readers.start(name, start_at=[0, 0, 40, 80][k],
                              laps=VICTIM_LAPS if name in victims else 1)
        # Let every reader get going, measure their pace, then kill the victims one after the
        # other in the middle of their runs.
        assert wait_for(lambda: all(readers.progress(n) >= 8 for n in names), 120), \
            {n: readers.progress(n) for n in names}
        t0, p0 = time.monotonic(), {n: readers.progress(n) for n in names}
        alive = list(names)
        before = {}
        for victim in victims:
            stats_path = tmp_path / f"stats-{victim}.json"
            assert wait_for(lambda: stats_path.exists() and
                            read_json(stats_path)["rows_loaded"] > 0, 60), \
                "the victim never loaded a row"
            assert wait_for(lambda: all(readers.progress(n) >= p0[n] + 4 for n in alive), 120)
            before[victim] = readers.progress(victim)
            readers.kill(victim)
            alive.remove(victim)
        # Bound: the survivors' remaining work at their pace before the kill (doubled) + GRACE.
        pace = (time.monotonic() - t0) / min(readers.progress(n) - p0[n] for n in alive)
        remaining = max(READS - readers.progress(n) for n in alive)  # survivors go round once
        bound = GRACE + 2 * pace * remaining
        took = readers.finish(alive, bound)
    finally:
        readers.stop_all()

    for victim in victims:
        got = digests(tmp_path / f"{victim}.txt")
        assert got, f"{victim} was killed before its first read"
        _check(native, got, f"killed reader {victim} before the kill")
    for name in alive:
        got = digests(tmp_path / f"{name}.txt")
        assert len(got) == READS, f"{name} read {len(got)} of {READS}"
        _check(native, got, f"reader {name} (survived the kill of {victims})")
    left_after_kill = segment_leftovers(node_id)

    # The next run on the node starts clean and, ending normally, leaves nothing behind.
    run([READER, data, tmp_path / "next.txt", "--reads", 40, "--seed", SEED],
        cache.connector_env(node_id, stats=tmp_path / "stats-next.json",
                            extra={"PRESCIENT_CACHE_SIZE": CACHE_SIZE}), tmp_path, timeout=120)
    nxt = digests(tmp_path / "next.txt")
    assert len(nxt) == 40
    _check(native, nxt, "the run after the kill")
    assert read_json(tmp_path / "stats-next.json")["reads_served"] > 0
    assert segment_leftovers(node_id) == [], "the run after the kill left its segment behind"
    print(f"killed {before} (reads done of {READS}); survivors finished {took:.1f} s later "
          f"(bound {bound:.0f} s); segment after the killed run: "
          f"{'kept' if left_after_kill else 'removed'}")


def test_sigkill_a_loading_reader(cache, kill_data, node_id, tmp_path):
    _kill_scenario(cache, kill_data, node_id, tmp_path, creator_first=False, victims=["r1", "r2"])


def test_sigkill_the_segment_creator(cache, kill_data, node_id, tmp_path):
    _kill_scenario(cache, kill_data, node_id, tmp_path, creator_first=True, victims=["r0"])

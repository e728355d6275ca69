"""The node agent, prescient-node, across 4 emulated nodes of 2 ranks each (every rank a DataLoader
with 2 workers), on a dataset 2.5 times one node's cache (aggregate 160%): exact bytes, each sample
read from storage about once with the agents (several times without), and faults: an agent killed
with SIGKILL or stopped with SIGSTOP mid-epoch costs at most its peers' 2 s timeout per batch, never
a wrong byte or a hang. The numbers of the same job at full size are the benchmark's
(examples/bench/agents.py, RESULTS.md)."""

import glob
import os
import signal
import time

import pytest

import emulated_nodes as emu

NODES, RANKS_PER_NODE, WORKERS = 4, 2, 2
FILES, ROWS_PER_FILE, WIDTH = 8, 500, 16384
SAMPLES = FILES * ROWS_PER_FILE
EPOCHS, BATCH, SEED = 3, 16, 1
CACHE_BYTES = int(0.4 * SAMPLES * (WIDTH + 8))
# The peers' timeout is 2 s per batch of requests; a batch of the loader may also wait for its
# own node's processes to take the prefetch over (1.5 s) on a busy 2-core machine.
WORST_BATCH_SECONDS = 6.0


@pytest.fixture(scope="module")
def dataset(build, tmp_path_factory):
    root = tmp_path_factory.mktemp("agent")
    pattern = emu.make_dataset(str(root / "data"), FILES, ROWS_PER_FILE, WIDTH)
    schedule = emu.make_schedule(build.tool, str(root / "job.sched"), pattern=pattern,
                                 samples=SAMPLES, rows_per_file=ROWS_PER_FILE, width=WIDTH,
                                 epochs=EPOCHS, ranks=NODES * RANKS_PER_NODE,
                                 ranks_per_node=RANKS_PER_NODE, workers=WORKERS, batch=BATCH,
                                 seed=SEED)
    return root, pattern, schedule


def new_job(build, dataset, compute_seconds=0.02, batch_reads=False, pause_seconds=0,
            rank_compute_seconds=None):
    root, pattern, schedule = dataset
    config = {"glob": pattern, "rows_per_file": ROWS_PER_FILE, "seed": SEED, "batch": BATCH,
              "workers": WORKERS, "epochs": EPOCHS, "compute_seconds": compute_seconds,
              "batch_reads": batch_reads, "pause_seconds": pause_seconds,
              "rank_compute_seconds": rank_compute_seconds or {}}
    return emu.Job(workdir=str(root), plugin_dir=build.plugin_dir, agent=build.agent,
                   config=config, nodes=NODES, ranks_per_node=RANKS_PER_NODE,
                   cache_size=str(CACHE_BYTES), schedule=schedule)


def check_bytes(results):
    assert sum(r["wrong"] for r in results) == 0, "wrong bytes"
    assert sum(r["read"] for r in results) == EPOCHS * SAMPLES


def run_to_end(job, with_agents):
    try:
        if with_agents:
            job.start_agents()
            assert job.wait_agents_ready(), job.agent_output()
        job.start_ranks()
        results = job.wait_ranks(timeout=600)
        if with_agents:
            assert job.wait_agents(timeout=60) == 0, job.agent_output()
        return results, job.stats()
    finally:
        job.kill()
        emu.remove_segments(job.tag, NODES)


def wait_for_reads(job, share, timeout=120):
    """Until the ranks have read `share` of the job's samples (their live statistics say)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        docs = job.stats()
        if emu.total(docs, "rows_hit") + emu.total(docs, "rows_loaded") >= share * EPOCHS * SAMPLES:
            return
        time.sleep(0.05)
    raise AssertionError("the job made no progress")


def test_agents_read_each_sample_from_storage_about_once(build, dataset):
    job = new_job(build, dataset)
    results, docs = run_to_end(job, with_agents=True)
    check_bytes(results)
    uid = os.geteuid()
    left = [p for n in range(NODES)
            for p in glob.glob(f"/dev/shm/prescient-u{uid}*/*-{emu.node_id(job.tag, n)}.owners")]
    assert not left, f"the agents left their ownership files: {left}"
    with_agents = emu.storage_rows(docs)
    assert emu.total(docs, "rows_remote") > 0, "no row came from a peer"
    # Every row fetched was served by a peer (a reply that came after its request's deadline is
    # served but not taken).
    assert emu.total(docs, "rows_remote") <= emu.total(docs, "rows_served")
    # One read per sample is the bound. The agents read each about once; a loader that runs
    # ahead of its agent reads the rows it misses itself, which on this 2-core machine (29
    # processes) costs 0-9% more depending on the load (examples/bench/RESULTS.md); without
    # agents the same job reads 2.3 times the bound.
    assert with_agents <= 1.3 * SAMPLES, \
        f"{with_agents} storage rows for {SAMPLES} samples\n" + emu.storage_report(docs, EPOCHS)
    # The training processes find what they read prefetched, also where the DataLoader starts
    # its workers from a forkserver (Python 3.14's default, the hdf5-2 flavor's Python): there
    # some ranks begin reading seconds after the others of their node, and their workers are
    # not forked from the rank. Before a late rank held its node's step back from its first
    # report, and before its reports named the process that outlives each epoch's workers, its
    # rows were swept as stale before it read them: the training processes read 7-22% of the
    # images themselves (examples/bench/RESULTS.md).
    _, training = emu.split_agents(docs)
    missed = emu.field_counter(training, "images", "rows_loaded")
    assert missed <= 0.1 * SAMPLES, f"training processes read {missed} images themselves"

    results, docs = run_to_end(new_job(build, dataset), with_agents=False)
    check_bytes(results)
    alone = emu.storage_rows(docs)
    assert alone >= 1.8 * SAMPLES, f"without agents only {alone} storage rows"
    assert emu.total(docs, "rows_remote") == 0


def test_agents_serve_batch_reads(build, dataset):
    """Workers that read a batch at a time (one sorted selection per file and field): the agents
    still place, fetch and serve every row; exact bytes, storage read about once per sample."""
    results, docs = run_to_end(new_job(build, dataset, batch_reads=True), with_agents=True)
    check_bytes(results)
    assert emu.total(docs, "rows_remote") > 0, "no row came from a peer"
    with_agents = emu.storage_rows(docs)
    # Clearly fewer than the 2.3 times the bound the job reads without agents (the test above).
    # How close to the bound a run gets depends on how far its loaders run ahead of their agents
    # on this loaded 2-core machine: 1.03-1.11 in the agents benchmark (--batch-reads), and
    # 1.45-1.48 in 2 of 5 runs of the hdf5-2 flavor's tests; the ratio is the benchmark's to
    # measure (examples/bench/agents.py), not this test's.
    assert with_agents <= 1.7 * SAMPLES, \
        f"{with_agents} storage rows for {SAMPLES} samples\n" + emu.storage_report(docs, EPOCHS)
    # The batch reads were served from the cache, not forwarded to HDF5 whole.
    assert emu.total(docs, "rows_hit") >= 0.5 * EPOCHS * SAMPLES


def test_agents_outlast_a_pause_between_epochs(build, dataset):
    """A validation pass or a checkpoint between epochs: no DataLoader worker is alive, and the
    training processes never open the files themselves (the loader opens them in its workers), so
    for 7 s no process of the job is attached to its node's segment; only the keeper that holds
    it for each training process is. Before the agents counted the keepers, each agent took the
    job for over 5 s into the pause and left: the later epochs read without them (1.7 times the
    bound where this test asks for 1.3), and the workers took over the node's prefetching."""
    results, docs = run_to_end(new_job(build, dataset, pause_seconds=7), with_agents=True)
    check_bytes(results)
    with_agents = emu.storage_rows(docs)
    assert with_agents <= 1.3 * SAMPLES, \
        f"{with_agents} storage rows for {SAMPLES} samples\n" + emu.storage_report(docs, EPOCHS)


def test_a_node_done_early_serves_its_rows_until_its_peers_are_done(build, dataset):
    """Node 0's ranks take no training step and finish well before the others (a third of the
    run). Its agent says goodbye and goes on serving: the other nodes' ranks still read the
    samples node 0 owns (a quarter of their reads). Before, its peers stopped asking it at its
    goodbye and read its rows from storage: 1.18 times the bound where the others' reads
    alone need 1.0."""
    fast = {str(r): 0.0 for r in range(RANKS_PER_NODE)}
    job = new_job(build, dataset, compute_seconds=0.08, rank_compute_seconds=fast)
    results, docs = run_to_end(job, with_agents=True)
    check_bytes(results)
    seconds = [sum(r["epoch_seconds"]) for r in sorted(results, key=lambda r: r["rank"])]
    # The scenario took place: node 0's ranks were done while every other rank still read. (Not
    # by how much: fixed costs such as starting forkserver workers shrink the gap on a loaded
    # machine; one run of the hdf5-2 flavor had 24.7 s against 30.5 s, where 0.8 was asked.)
    assert max(seconds[:RANKS_PER_NODE]) < min(seconds[RANKS_PER_NODE:]), \
        f"node 0 did not finish early: {seconds}"
    # What goodbye-and-serve decides is where the other nodes' reads of node 0's rows come from:
    # from its agent (each of those nodes reads its own quarter from storage, 1.0x) or from
    # storage (1.18x of the bound in all, before). Node 0's own ranks, taking no training step,
    # may outrun their agent's prefetch on a loaded 2-core machine and read some rows of their
    # own twice (one CI run: node 0 1,552 rows, the others 1,000, 999 and 1,000): a race of the
    # fast node with itself, bounded loosely over the whole job.
    by_node = emu.storage_rows_by_node(docs)
    report = f"{by_node}\n" + emu.storage_report(docs, EPOCHS)
    peers = sum(rows for node, rows in by_node.items() if node != "n0")
    peers_share = SAMPLES * (NODES - 1) // NODES
    assert peers <= 1.1 * peers_share, \
        f"the other nodes read {peers} rows from storage for their {peers_share}\n{report}"
    with_agents = emu.storage_rows(docs)
    assert with_agents <= 1.25 * SAMPLES, \
        f"{with_agents} storage rows for {SAMPLES} samples\n{report}"
    assert emu.total(docs, "fallback_peer_failed") == 0


@pytest.mark.parametrize("fault", ["SIGKILL", "SIGSTOP"])
def test_an_agent_lost_mid_epoch_costs_a_timeout_not_a_byte(build, dataset, fault):
    job = new_job(build, dataset, compute_seconds=0.02)
    stopped = None
    try:
        job.start_agents()
        assert job.wait_agents_ready(), job.agent_output()
        job.start_ranks()
        wait_for_reads(job, 0.4)
        victims = [pid for pid, node in job.agent_pids() if node.endswith("-n1")]
        assert victims, "no agent of node 1 found"
        os.kill(victims[0], getattr(signal, fault))
        if fault == "SIGSTOP":
            stopped = victims[0]
        results = job.wait_ranks(timeout=600)
        check_bytes(results)
        # Every batch but an epoch's first (which also waits for the workers to start).
        worst = max(max(r["max_batch_seconds"]) for r in results)
        slowest = {r["rank"]: [round(x, 1) for x in r["max_batch_seconds"]] for r in results}
        assert worst <= WORST_BATCH_SECONDS, \
            f"a batch waited {worst:.1f} s (slowest batch by rank and epoch: {slowest})"
        docs = job.stats()
        if fault == "SIGKILL":
            # Node 1's own processes took their node's prefetching back. (A stopped agent is
            # overtaken once one process has seen it make no progress for 1.5 s: longer than
            # a DataLoader worker of this short job lives. Its node's ranks read their misses
            # themselves meanwhile.)
            training = [d for d in docs if d.get("rows_served", 0) == 0]
            assert emu.total(training, "rows_prefetched") > 0, "nobody took the leadership back"
        else:
            assert emu.total(docs, "fallback_peer_failed") > 0, "no request to the stopped peer failed"
            # The other agents cannot drain their sends to the stopped one: they exit without
            # MPI_Finalize, and mpirun may end the stopped agent before this line (seen in the
            # hdf5-2 flavor's CI run). Either way the agents must all be gone in the end.
            try:
                os.kill(stopped, signal.SIGCONT)
            except ProcessLookupError:
                pass
            stopped = None
            assert job.wait_agents(timeout=90) is not None
    finally:
        if stopped:
            try:
                os.kill(stopped, signal.SIGCONT)
            except ProcessLookupError:
                pass
        job.kill()
        emu.remove_segments(job.tag, NODES)

"""Parallel HDF5 through the connector: a SOLAR-style loader under `mpirun -n 4`
(h5py.File(..., driver='mpio', comm=MPI.COMM_WORLD), a DistributedSampler order, independent
reads of each sample and its label) is served from the node cache and prefetched by the
schedule, byte for byte equal to native parallel HDF5; collective transfers are exact and
forwarded to the native connector."""

import pytest

from partest_support import (LOADER, RANKS, new_node_id, read_ranks, read_stats, remove_segments,
                             total)

SAMPLES, EPOCHS, BATCH, SEED = 1536, 3, 16, 5
IMAGE_ROW_BYTES = 32 * 64 * 4  # partest_solar_loader.make: 'images', float32 rows of 32 x 64


@pytest.fixture(scope="module")
def data(tmp_path_factory, mpi):
    root = tmp_path_factory.mktemp("mpio")
    path = root / "solar.h5"
    import subprocess
    import sys
    subprocess.run([sys.executable, LOADER, str(path), "--make", str(SAMPLES)], check=True,
                   env=mpi.native_env(), cwd=root)
    # The oracle: the same job on native parallel HDF5.
    mpi.run([LOADER, path, root / "native", "--epochs", EPOCHS, "--batch", BATCH, "--seed", SEED,
             "--collective"], mpi.native_env(), root)
    return root, path, read_ranks(root / "native")


@pytest.fixture
def node_id(request):
    nid = new_node_id(request.node.name.replace("test_", "")[:20].replace("[", "-").strip("]"))
    remove_segments(nid)
    yield nid
    remove_segments(nid)


def schedule_file(mpi, path, out):
    import subprocess
    subprocess.run([mpi.schedule_tool(), "generate", "--source", "torch-distributed", "--samples",
                    str(SAMPLES), "--epochs", str(EPOCHS), "--ranks", str(RANKS),
                    "--ranks-per-node", str(RANKS), "--batch-size", str(BATCH), "--seed",
                    str(SEED), "--dataset", f"{path}:images", "--row-bytes",
                    str(IMAGE_ROW_BYTES), "--quiet", "--output", str(out)],
                   check=True, env=mpi.native_env(), capture_output=True)
    return out


def run_connector(mpi, data, node_id, tmp_path, schedule, collective=False):
    root, path, _ = data
    extra = {}
    if schedule:
        extra["PRESCIENT_SCHEDULE"] = str(schedule_file(mpi, path, tmp_path / "solar.sched"))
    env = mpi.connector_env(node_id, tmp_path / "stats-%p.json", extra)
    mpi.run([LOADER, path, tmp_path / "prescient", "--epochs", EPOCHS, "--batch", BATCH, "--seed",
             SEED, *(["--collective"] if collective else [])], env, tmp_path)
    stats = read_stats(tmp_path)
    assert len(stats) == RANKS, f"expected one statistics file per rank, found {len(stats)}"
    assert all(s["files_opened"] >= 1 for s in stats), "a rank did not open the file through Prescient"
    return read_ranks(tmp_path / "prescient"), stats


def compare(native, got):
    for rank, (n, g) in enumerate(zip(native, got)):
        assert g["ranks"] == RANKS and g["rank"] == rank
        assert len(n["epochs"]) == len(g["epochs"])
        for epoch, (ne, ge) in enumerate(zip(n["epochs"], g["epochs"])):
            assert len(ne) == len(ge), f"rank {rank} epoch {epoch}: batch count"
            for b, (nb, gb) in enumerate(zip(ne, ge)):
                assert nb[0] == gb[0], f"rank {rank} epoch {epoch} batch {b}: sample ids"
                for name, nd, gd in zip(("images", "fields", "labels"), nb[1], gb[1]):
                    assert nd == gd, (f"rank {rank} epoch {epoch} batch {b}: '{name}' differs "
                                      f"from native parallel HDF5 (samples {gb[0]})")


@pytest.mark.parametrize("schedule", [False, True], ids=["no-schedule", "schedule"])
def test_solar_mpio_loader_is_served_from_the_node_cache(mpi, data, node_id, tmp_path, schedule):
    _, _, native = data
    got, stats = run_connector(mpi, data, node_id, tmp_path, schedule)
    compare(native, got)

    reads = total(stats, "reads")
    # images, fields and labels: three reads per sample, every sample once per epoch.
    assert reads == 3 * SAMPLES * EPOCHS
    assert total(stats, "reads_forwarded") == 0, "independent whole-row reads were forwarded"
    assert total(stats, "reads_served") == reads, "not every independent read was served"
    # Four ranks share one node cache: later epochs are hits, rows are stored once per node.
    assert total(stats, "rows_hit") >= 3 * SAMPLES * (EPOCHS - 1)
    if schedule:
        assert total(stats, "schedule_mismatches") == 0
        assert total(stats, "schedule_matches") > 0
        assert total(stats, "rows_prefetched") > 0, "the schedule's prefetch loaded nothing"


def test_collective_read_is_exact(mpi, data, node_id, tmp_path):
    _, _, native = data
    got, _ = run_connector(mpi, data, node_id, tmp_path, schedule=False, collective=True)
    for rank, (n, g) in enumerate(zip(native, got)):
        assert n["collective"] == g["collective"], f"rank {rank}: collective read differs"
        assert n["collective_slice"] == g["collective_slice"], f"rank {rank}: slice read differs"


def test_collective_transfers_are_forwarded(mpi, data, node_id, tmp_path):
    """A collective transfer needs every rank inside MPI-IO: it goes to native parallel HDF5,
    never to the cache (the read path's transfer-property rule). h5py 3.13 sends a numeric
    `dset[...]` inside `with dset.collective:` through its fast reader with the default,
    independent transfer list, so HDF5 receives an independent read, which the cache serves;
    `read_direct` inside `collective` is the collective transfer."""
    _, stats = run_connector(mpi, data, node_id, tmp_path, schedule=False, collective=True)
    # Per rank: the loader's independent reads, the slice (independent) and one collective read.
    assert total(stats, "reads_forwarded_transfer") == RANKS
    assert total(stats, "reads_forwarded") == RANKS
    assert total(stats, "reads_served") == total(stats, "reads") - RANKS

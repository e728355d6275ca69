"""hdf5plugin's filters in a pip-wheel process (`pip install h5py hdf5plugin`, pinned in
requirements.txt): the way most users read Zstandard, Blosc2 and bitshuffle data.

hdf5plugin's own builds of the filters write the chunks; the connector (plugins-wheel/) must
decode every one of them itself, exactly as the wheel's HDF5 with hdf5plugin reads them.
"""

import json
import os

import pytest

from test_wheel_h5py import clean_env, connector_env, run, stats, total

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "wheeltest_hdf5plugin.py")
SAMPLES, EPOCHS = 97, 2  # 97: the last chunk of every dataset is cut by the dataset's edge
FILTERED_DATASETS = 9


@pytest.fixture(scope="module")
def plugin_data(tmp_path_factory, wheel_python):
    root = tmp_path_factory.mktemp("hdf5plugin")
    path = root / "filtered.h5"
    run([wheel_python, SCRIPT, path, "--make", SAMPLES], clean_env(), root)
    native = root / "native.json"
    run([wheel_python, SCRIPT, path, native, "--epochs", EPOCHS], clean_env(), root)
    with open(native) as f:
        return path, json.load(f)


def test_hdf5plugin_chunks_are_decoded_by_the_connector(wheel_python, build_dir, plugin_data,
                                                        tmp_path):
    path, native = plugin_data
    assert native["connector"] == "native"
    assert len(native["digests"]) == FILTERED_DATASETS * EPOCHS
    out = tmp_path / "out.json"
    run([wheel_python, SCRIPT, path, out, "--epochs", EPOCHS],
        connector_env(os.path.join(build_dir, "plugins-wheel"), tmp_path), tmp_path)
    with open(out) as f:
        got = json.load(f)
    assert got["connector"] == "prescient", "HDF5 did not load the connector"
    assert got["libhdf5"] == native["libhdf5"]
    differ = sorted(k for k in native["digests"] if got["digests"].get(k) != native["digests"][k])
    assert not differ, f"reads through the connector differ from native's: {differ}"
    s = stats(tmp_path)
    assert s, "no statistics file: the connector did not run"
    # Every dataset's rows came in raw, decoded by the connector (none loaded through HDF5),
    # and every read was served: sample + label per visit, one slice per dataset and epoch.
    assert total(s, "datasets_through_hdf5") == 0, s
    assert total(s, "reads_forwarded") == 0, s
    reads = FILTERED_DATASETS * EPOCHS * (2 * SAMPLES + 1)
    assert total(s, "reads") == reads
    assert total(s, "reads_served") == reads
    assert total(s, "rows_hit") > 0, "the second epoch was not served from the cache"

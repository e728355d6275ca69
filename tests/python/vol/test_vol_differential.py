"""Byte-for-byte comparison of h5py scenarios, native versus through the connector.

For each scenario of voltest_scenarios.py: the native process writes native.h5, the connector
process writes conn.h5 (including r+ writes and resizes); then both files are read natively
and through the connector. All four readings must be identical to native-reads-native, and
the two files must dump identically with h5dump.
"""

import os
import pickle

import pytest

from voltest_scenarios import SCENARIOS

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "voltest_scenarios.py")


def load(path):
    with open(path, "rb") as f:
        return pickle.load(f)


def describe_difference(expected, actual):
    expected_map, actual_map = dict(expected), dict(actual)
    lines = []
    if [n for n, _ in expected] != [n for n, _ in actual]:
        lines.append(f"record names differ: {sorted(set(expected_map) ^ set(actual_map))}")
    for name, value in expected:
        if actual_map.get(name) != value:
            lines.append(f"{name}:\n    native:    {str(value)[:300]}\n    connector: "
                         f"{str(actual_map.get(name, '<missing>'))[:300]}")
    return "\n".join(lines[:12])


def h5dump(path, runner, mode, cwd):
    proc = runner.run(["h5dump", os.path.basename(path)], mode, cwd, check=False)
    assert proc.returncode == 0, f"h5dump ({mode}) failed: {proc.stderr[-2000:]}"
    return proc.stdout


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario_matches_native(scenario, runner, tmp_path):
    native_file, conn_file = tmp_path / "native.h5", tmp_path / "conn.h5"
    runner.run([SCRIPT, scenario, "write", native_file], "native", tmp_path)
    runner.run([SCRIPT, scenario, "write", conn_file], "connector", tmp_path,
               stats=tmp_path / "stats-write.json")
    runner.run([SCRIPT, scenario, "read", tmp_path / "conn-read", native_file, conn_file],
               "connector", tmp_path, stats=tmp_path / "stats-read.json")
    runner.run([SCRIPT, scenario, "read", tmp_path / "native-read", native_file, conn_file],
               "native", tmp_path)

    reference = load(tmp_path / "native-read.0.pkl")
    assert reference, "the scenario recorded nothing"
    readings = {
        "native reads the connector-written file": load(tmp_path / "native-read.1.pkl"),
        "the connector reads the native file": load(tmp_path / "conn-read.0.pkl"),
        "the connector reads its own file": load(tmp_path / "conn-read.1.pkl"),
    }
    for what, records in readings.items():
        if records != reference:
            pytest.fail(f"{what} differs from native:\n" + describe_difference(reference, records),
                        pytrace=False)

    # Same structure and contents on disk: h5dump of both files (natively) must agree, once
    # the file names are made equal.
    dump_native = h5dump(native_file, runner, "native", tmp_path)
    dump_conn = h5dump(conn_file, runner, "native", tmp_path).replace("conn.h5", "native.h5")
    assert dump_conn == dump_native


def test_h5dump_and_h5ls_with_connector(runner, hdf5_tools, tmp_path):
    """The HDF5 tools work with the variables set and print exactly what they print natively."""
    path = tmp_path / "tools.h5"
    for scenario in ("compound_vlen", "groups_links", "chunked"):
        runner.run([SCRIPT, scenario, "write", path], "native", tmp_path)
        for tool in (["h5dump", path.name], ["h5dump", "-p", "-H", path.name],
                     ["h5dump", "-d", "/c", "-s", "3", "-c", "5", path.name],
                     ["h5ls", "-r", path.name], ["h5ls", "-v", "-r", path.name]):
            if scenario != "compound_vlen" and "/c" in tool:
                continue
            native = runner.run(tool, "native", tmp_path, check=False)
            conn = runner.run(tool, "connector", tmp_path, check=False,
                              stats=tmp_path / "stats-tools.json")
            assert native.returncode == 0, native.stderr
            assert (conn.returncode, conn.stdout) == (native.returncode, native.stdout), (
                f"{' '.join(tool)} ({scenario}) differs with the connector:\n{conn.stderr[-2000:]}")
            assert conn.stderr == native.stderr


def test_h5ls_reports_connector_activity(prescient, hdf5_tools, tmp_path):
    """h5ls really went through prescient: the stats file shows the file it opened."""
    path = tmp_path / "tools.h5"
    prescient.run([SCRIPT, "basic", "write", path], "native", tmp_path)
    prescient.run(["h5dump", "-d", "/x", path.name], "connector", tmp_path,
                  stats=tmp_path / "stats.json")
    from voltest_support import read_stats

    stats = read_stats(tmp_path)
    assert stats, "h5dump with the connector wrote no PRESCIENT_STATS file"
    assert sum(s["files_opened"] for s in stats.values()) >= 1
    assert sum(s["reads"] for s in stats.values()) >= 1


def test_files_written_through_connector_are_identical(runner, tmp_path):
    """A pass-through must not change what lands on disk: the files are byte-identical."""
    for scenario in ("basic", "chunked", "resizable"):
        native_file, conn_file = tmp_path / f"n-{scenario}.h5", tmp_path / f"c-{scenario}.h5"
        runner.run([SCRIPT, scenario, "write", native_file], "native", tmp_path)
        runner.run([SCRIPT, scenario, "write", conn_file], "connector", tmp_path)
        assert native_file.read_bytes() == conn_file.read_bytes(), scenario


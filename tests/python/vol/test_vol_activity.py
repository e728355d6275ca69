"""The connector is really loaded, its switches work, and bad settings are handled gracefully.

A test suite that passes while the connector silently failed to load proves nothing, so the
connector's name is asked from HDF5 itself (H5VLget_connector_name through ctypes on the
libhdf5 h5py uses), and its statistics must show the reads.
"""

import json
import os
import pickle
import re
import shutil
import sys
import textwrap

import pytest

from voltest_support import read_stats

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = os.path.join(HERE, "voltest_scenarios.py")

NAME_SCRIPT = textwrap.dedent("""
    import json, sys, h5py
    from voltest_h5probe import connector_name
    with h5py.File(sys.argv[1], "r") as f:
        d, root = f["x"], f["/"]
        d[5]
        print(json.dumps({"file": connector_name(f.id.id), "dataset": connector_name(d.id.id),
                          "group": connector_name(root.id.id)}))
""")


@pytest.fixture(scope="module")
def data_file(runner, tmp_path_factory):
    directory = tmp_path_factory.mktemp("activity")
    path = directory / "data.h5"
    runner.run([SCENARIOS, "selections", "write", path], "native", directory)
    return path


def names(runner, mode, path, cwd, **kwargs):
    """{file, dataset, group: connector name} as HDF5 reports them in a subprocess."""
    return json.loads(runner.run([sys.executable, "-c", NAME_SCRIPT, path], mode, cwd,
                                 **kwargs).stdout)


def test_connector_is_active(runner, data_file, tmp_path):
    native = names(runner, "native", data_file, tmp_path)
    assert set(native.values()) == {"native"}
    conn = names(runner, "connector", data_file, tmp_path, stats=tmp_path / "stats.json")
    assert set(conn.values()) == {runner.connector}, conn


def test_stats_show_the_reads(prescient, data_file, tmp_path):
    names(prescient, "connector", data_file, tmp_path, stats=tmp_path / "stats.json")
    stats = read_stats(tmp_path)
    assert len(stats) == 1, sorted(stats)
    (s,) = stats.values()
    assert s["prescient_stats_version"] == 1 and s["enabled"] is True
    assert s["pid"] > 0
    assert s["files_opened"] == 1 and s["datasets_opened"] >= 1
    assert s["reads"] == 1 and s["rows"] == 1 and s["selections"]["regular"] == 1, s


def test_plain_connector_name_works(prescient, data_file, tmp_path):
    """HDF5_VOL_CONNECTOR=prescient without an info string: native underneath."""
    conn = names(prescient, "connector", data_file, tmp_path, connector_string="prescient",
                 stats=tmp_path / "stats.json")
    assert set(conn.values()) == {"prescient"}
    (s,) = read_stats(tmp_path).values()
    assert s["reads"] == 1


def read_selection_records(runner, mode, data_file, tmp_path, tag, **kwargs):
    out = tmp_path / tag
    proc = runner.run([SCENARIOS, "selections", "read", out, data_file], mode, tmp_path, **kwargs)
    with open(f"{out}.0.pkl", "rb") as f:
        return pickle.load(f), proc


def test_enable_0_is_pure_pass_through(prescient, data_file, tmp_path):
    reference, _ = read_selection_records(prescient, "native", data_file, tmp_path, "native")
    records, proc = read_selection_records(prescient, "connector", data_file, tmp_path, "off",
                                           stats=tmp_path / "stats.json",
                                           extra={"PRESCIENT_ENABLE": "0"})
    assert records == reference
    assert proc.stderr == ""
    conn = names(prescient, "connector", data_file, tmp_path, extra={"PRESCIENT_ENABLE": "0"})
    assert set(conn.values()) == {"prescient"}, "PRESCIENT_ENABLE=0 must still load the connector"
    stats = read_stats(tmp_path)
    assert stats and all(s["enabled"] is False for s in stats.values()), stats


INVALID = [
    ("PRESCIENT_LOG", "loud", ["error", "warn", "info", "debug"]),
    ("PRESCIENT_ENABLE", "maybe", ["0", "1"]),
]

FORK_READ = textwrap.dedent("""
    import os, sys, h5py
    for _ in range(3):
        with h5py.File(sys.argv[1], "r") as f:
            f["x"][[3, 17, 42]]
    pid = os.fork()
    if pid == 0:
        with h5py.File(sys.argv[1], "r") as f:
            f["y"][5]
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
""")


@pytest.mark.parametrize("variable,value,accepted", INVALID, ids=[v for v, _, _ in INVALID])
def test_invalid_value_warns_once_and_stays_correct(prescient, data_file, tmp_path, variable,
                                                    value, accepted):
    reference, _ = read_selection_records(prescient, "native", data_file, tmp_path, "native")
    records, proc = read_selection_records(prescient, "connector", data_file, tmp_path, "bad",
                                           stats=tmp_path / "stats.json",
                                           extra={variable: value})
    assert records == reference, "results changed with an invalid setting"
    warnings = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(warnings) == 1, f"expected exactly one warning line on stderr, got:\n{proc.stderr}"
    (warning,) = warnings
    assert variable in warning and value in warning, warning
    missing = [a for a in accepted if not re.search(rf"\b{re.escape(a)}\b", warning)]
    assert not missing, f"the warning does not name the accepted values {missing}: {warning}"
    stats = read_stats(tmp_path)
    assert stats and all(s["enabled"] is False for s in stats.values()), (
        "after an invalid setting Prescient must continue as a pure pass-through")

    # Several file opens and a forked child: still exactly one warning.
    proc = prescient.run([sys.executable, "-c", FORK_READ, data_file], "connector", tmp_path,
                         extra={variable: value})
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and variable in lines[0], proc.stderr


def test_valid_settings_print_nothing(prescient, data_file, tmp_path):
    for extra in ({"PRESCIENT_LOG": "error"}, {"PRESCIENT_LOG": "warn"},
                  {"PRESCIENT_ENABLE": "1"}, {}):
        _, proc = read_selection_records(prescient, "connector", data_file, tmp_path, "ok",
                                         stats=tmp_path / "ok.json", extra=extra)
        assert proc.stderr == "", (extra, proc.stderr)


def test_info_string_settings_win_over_environment(prescient, data_file, tmp_path):
    """Settings appended to the info string override the PRESCIENT_* variables."""
    info_stats = tmp_path / "info" / "stats.json"
    info_stats.parent.mkdir()
    conn = names(prescient, "connector", data_file, tmp_path,
                 connector_string=f"prescient under_vol=0;under_info={{}};enable=0;stats={info_stats}",
                 stats=tmp_path / "env-stats.json", extra={"PRESCIENT_ENABLE": "1"})
    assert set(conn.values()) == {"prescient"}
    assert not read_stats(tmp_path), "the PRESCIENT_STATS path was used although the info string names one"
    stats = read_stats(info_stats.parent)
    assert len(stats) == 1, stats
    (s,) = stats.values()
    assert s["enabled"] is False, "enable=0 in the info string must win over PRESCIENT_ENABLE=1"


def test_invalid_info_string_setting_warns_once(prescient, data_file, tmp_path):
    reference, _ = read_selection_records(prescient, "native", data_file, tmp_path, "native")
    records, proc = read_selection_records(
        prescient, "connector", data_file, tmp_path, "bad",
        connector_string="prescient under_vol=0;under_info={};log=loud")
    assert records == reference
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "loud" in lines[0], proc.stderr
    assert all(a in lines[0] for a in ("error", "warn", "info", "debug")), lines[0]


def test_unwritable_stats_path_does_not_break_reads(prescient, data_file, tmp_path):
    """A stats file that cannot be written costs at most one warning, never the job."""
    reference, _ = read_selection_records(prescient, "native", data_file, tmp_path, "native")
    records, proc = read_selection_records(prescient, "connector", data_file, tmp_path, "nostats",
                                           stats=tmp_path / "no" / "such" / "dir" / "s.json")
    assert records == reference
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) <= 1, f"expected at most one warning:\n{proc.stderr}"
    if lines:
        assert "PRESCIENT_STATS" in lines[0] or "stats" in lines[0], lines[0]


# The connector starts in this process (h5py's import initialises HDF5), and the file is opened
# only in a forked child, as a DataLoader worker opens it: the child opens the node cache for its
# parent and must start a keeper that holds the cache for the next generation of workers.
FORKED_READ_SCRIPT = textwrap.dedent("""
    import os, sys, h5py
    pid = os.fork()
    if pid == 0:
        with h5py.File(sys.argv[1], "r") as f:
            f["x"][3]
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
""")


def test_what_opening_the_cache_took_is_one_warning(prescient, data_file, tmp_path):
    """The node cache's notices reach the user. A plugin directory without the segment keeper
    (a partial install) leaves the cache to die with every generation of workers: one warning in
    the process that needed the keeper, none where it is installed."""
    lone = tmp_path / "plugins"
    lone.mkdir()
    shutil.copy(os.path.join(prescient.plugin_dir, "libprescient_vol.so"), lone)
    for plugins, expected in ((prescient.plugin_dir, 0), (str(lone), 1)):
        proc = prescient.python(FORKED_READ_SCRIPT, [data_file], "connector", tmp_path,
                                extra={"HDF5_PLUGIN_PATH": plugins,
                                       "PRESCIENT_NODE_ID": f"notices-{tmp_path.name}-{expected}"})
        lines = [line for line in proc.stderr.splitlines() if "prescient:" in line]
        assert len(lines) == expected, proc.stderr
        for line in lines:
            assert "warning" in line and "keeper" in line, line

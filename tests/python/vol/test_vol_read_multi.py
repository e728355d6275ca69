"""H5Dread_multi: several datasets in one call, each served from the cache or forwarded.

voltest_multi.py makes each case's H5Dread_multi call twice (the second finds in the cache what
the first kept) and records a digest of every buffer, or that the call failed. Every call must
return what native HDF5 returns; each dataset's rows must be the ones h5py reads alone; and
the statistics must show the servable datasets served and the others forwarded for their own
reason, a converted dataset beside them not holding them back.
"""

import json
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "voltest_multi.py")
CASES = ["all_servable", "one_converted", "same_dataset_twice", "forwarded_fails",
         "all_converted"]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory, runner):
    tmp = tmp_path_factory.mktemp("multi")
    data = tmp / "data.h5"
    runner.run([SCRIPT, "write", data], "native", tmp)
    native, connector, stats = tmp / "native.json", tmp / "connector.json", tmp / "stats.json"
    runner.run([SCRIPT, "read", data, native], "native", tmp)
    extra = None if runner.stand_in else {"PRESCIENT_CACHE_SIZE": "64MiB",
                                          "PRESCIENT_NODE_ID": f"multi-{os.getpid()}"}
    args = [SCRIPT, "read", data, connector] + ([] if runner.stand_in else [stats])
    runner.run(args, "connector", tmp, stats=None if runner.stand_in else stats, extra=extra)
    return json.loads(native.read_text()), json.loads(connector.read_text())


@pytest.mark.parametrize("case", CASES)
def test_same_bytes_as_native(outcomes, case):
    native, connector = outcomes
    assert connector[case]["calls"] == native[case]["calls"]
    assert connector[case]["singles"] == native[case]["singles"]


@pytest.mark.parametrize("case", CASES)
def test_each_buffer_holds_its_datasets_rows(outcomes, case):
    """Guards the comparison itself: a multi read returns, per dataset, what a read of that
    dataset alone returns (and fails where one of them fails)."""
    native, _ = outcomes
    for call in native[case]["calls"]:
        if "error" in native[case]["singles"]:
            assert call == "error"
        else:
            assert call == native[case]["singles"]


def delta(record, *path):
    def get(stats):
        value = stats
        for key in path:
            value = value[key] if value is not None else 0
        return value or 0
    return get(record["stats"]) - get(record.get("stats_before"))


def counts(connector, case):
    record = connector[case]
    return {"reads": delta(record, "reads"), "served": delta(record, "reads_served"),
            "forwarded": delta(record, "reads_forwarded"),
            "forwarded_type": delta(record, "forwarded", "type"),
            "forwarded_async": delta(record, "forwarded", "async"),
            "hits": delta(record, "rows_hit")}


def test_servable_datasets_are_served_and_hit_the_second_time(prescient, outcomes):
    _, connector = outcomes
    c = counts(connector, "all_servable")
    assert c["reads"] == 6 and c["served"] == 6 and c["forwarded"] == 0, c
    assert c["hits"] > 0, c


def test_a_converted_dataset_is_forwarded_alone(prescient, outcomes):
    _, connector = outcomes
    c = counts(connector, "one_converted")
    assert c["reads"] == 6 and c["served"] == 4, c
    assert c["forwarded"] == 2 and c["forwarded_type"] == 2, c
    c = counts(connector, "all_converted")
    assert c["reads"] == 4 and c["served"] == 0 and c["forwarded_type"] == 4, c
    c = counts(connector, "same_dataset_twice")
    assert c["reads"] == 4 and c["served"] == 4, c


def test_a_failed_forward_fails_the_call(prescient, outcomes):
    native, connector = outcomes
    assert native["forwarded_fails"]["calls"] == ["error", "error"]
    c = counts(connector, "forwarded_fails")
    assert c["reads"] == 4 and c["forwarded"] >= 2, c
    assert c["forwarded_async"] == 0, c

"""Reads of some fields of compound datasets: served from the cache where HDF5's conversion is a
copy of the members, forwarded where HDF5 converts, and the same bytes as native's either way.

HEP files keep their objects as compound rows (ATLAS's flavour-tagging files: jets, tracks per
jet), and their loaders read a few fields of them: salt reads a batch of rows with `read_direct`
into a structured array of the fields its model takes; h5py's `d["x"]` and `d.fields([...])` read
one or several. HDF5 matches such a read's members to the stored ones by name and converts each;
where every member is a stored one of an equal type and the members leave no byte of the memory
element unwritten, that conversion is a copy, and the connector serves the read from whole
stored rows (vol/objects/compound_fields.h). Every read runs natively and through the connector
(voltest_compound_fields.py says what each is); the digests must be equal.
"""

import collections
import json
import os

from voltest_support import forwarded_for, totals_of

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "voltest_compound_fields.py")


def test_fields_of_compound_rows_are_served_where_hdf5_copies_them(runner, tmp_path):
    data = tmp_path / "compound.h5"
    runner.run([SCRIPT, "write", data], "native", tmp_path)
    results = {}
    stats = tmp_path / "stats"
    stats.mkdir()
    for mode in ("native", "connector"):
        out = tmp_path / f"{mode}.json"
        runner.run([SCRIPT, "read", data, out], mode, tmp_path,
                   stats=stats / "stats.json" if mode == "connector" else None,
                   extra={"PRESCIENT_NODE_ID": f"fields-{os.getpid()}"})
        results[mode] = json.loads(out.read_text())
    native, connector = results["native"], results["connector"]
    assert len(native) == len(connector) > 200
    differ = [(n[1], n[2], c[2]) for n, c in zip(native, connector) if n != c]
    assert not differ, f"{len(differ)} reads differ from native's, first {differ[:3]}"
    assert not any(r[2].startswith("error") for r in native), [r for r in native if "error" in r[2]]
    if runner.stand_in:
        return
    expected = collections.Counter(r[0] for r in native)
    totals = totals_of(stats)
    assert totals["reads"] == len(native), totals
    # Every field read served and gathered; the stored type's reads served as before; every
    # read HDF5 converts forwarded for its type; the parts of small rows left to HDF5.
    assert totals["reads_compound_fields"] == expected["fields"], (totals, expected)
    assert totals["reads_served"] == expected["fields"] + expected["stored"], (totals, expected)
    assert forwarded_for(totals) == {"type": expected["type"],
                                     "small_row_part": expected["any"]}, totals
    assert totals["rows_hit"] > 0, totals

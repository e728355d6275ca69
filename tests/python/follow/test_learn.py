"""python/prescient/_learn.py without a connector: what the follower learns from recorded reads,
and the pattern that predicts the indices not read yet."""

import gc
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(REPO / "scheduler" / "python"))

from prescient._learn import LearnedMap, format_record  # noqa: E402


def record(learned, key, lines):
    assert learned.add_records(format_record(key, "".join(lines).encode()).decode()) == 1


def test_images_and_labels_of_one_file_row_equals_index():
    learned = LearnedMap()
    for i in range(0, 400, 7):  # a few dozen indices of a 1,000-row file, read so far
        record(learned, [i], [f"/d/a.h5\t/x\t1000\t{i}+1\n", f"/d/a.h5\t/y\t1000\t{i}+1\n"])
    m = learned.sample_map()
    assert m.fields == ("x", "y") and m.num_samples == 1000
    assert learned.samples_of(7) == (7,)
    assert learned.predicts()
    assert learned.samples_of(999) == (999,)  # never read: predicted
    assert learned.samples_of(1000) == ()     # outside the map


def test_a_permuted_index_table_is_learned_but_not_predicted():
    learned = LearnedMap()
    table = [(i * 37) % 1000 for i in range(1000)]
    for i in range(100):
        record(learned, [i], [f"/d/a.h5\t/x\t1000\t{table[i]}+1\n"])
    assert learned.samples_of(5) == (table[5],)
    assert not learned.predicts()
    assert learned.samples_of(500) == ()


def test_a_map_without_a_pattern_is_not_rebuilt_for_every_new_index(monkeypatch):
    learned = LearnedMap()
    table = [(i * 37) % 1000 for i in range(1000)]
    for i in range(40):
        record(learned, [i], [f"/d/a.h5\t/x\t1000\t{table[i]}+1\n"])
    assert learned.sample_map() is not None and not learned.predicts()
    builds = []
    build = LearnedMap._build_map
    monkeypatch.setattr(LearnedMap, "_build_map", lambda self: builds.append(1) or build(self))
    for i in range(40, 1000):  # what the workers record over the first epoch, looked at often
        record(learned, [i], [f"/d/a.h5\t/x\t1000\t{table[i]}+1\n"])
        if i % 50 == 0:
            learned.sample_map()
    assert builds == []
    assert [learned.samples_of(i) for i in (5, 500, 999)] == [(table[5],), (table[500],), (table[999],)]
    # A record outside the map (another file), or an index read again at other rows, rebuilds it.
    record(learned, [1000], ["/d/b.h5\t/x\t10\t3+1\n"])
    assert learned.samples_of(1000) == (1003,) and len(builds) == 1
    record(learned, [7], [f"/d/a.h5\t/x\t1000\t{table[8]}+1\n"])
    assert learned.samples_of(7) == (table[8],) and len(builds) == 2


def test_too_few_learned_indices_end_a_translation_before_the_loop(monkeypatch):
    import numpy as np
    from prescient import _publish

    learned = LearnedMap()
    table = [(i * 37) % 1000 for i in range(1000)]
    for i in range(500):
        record(learned, [i], [f"/d/a.h5\t/x\t1000\t{table[i]}+1\n"])
    looked = []
    monkeypatch.setattr(LearnedMap, "samples_of", lambda self, i: looked.append(i) or ())
    order = np.arange(1000, dtype=np.int64)[::-1]  # an epoch of every index, half of them learned
    assert _publish._translate(learned, np.full(40, 25), order) is None
    assert looked == []
    # Every index of the order learned: translated (samples_of as the map has it).
    monkeypatch.undo()
    samples, bounds = _publish._translate(learned, np.full(20, 25), order[500:])
    assert samples.tolist() == [table[i] for i in order[500:]] and bounds[-1] == 500

    # With a pattern, indices not learned are predicted: an order with a few indices past
    # the map (here 5 of 1,005) is still translated, index by index.
    rows = LearnedMap()
    for i in range(100):
        record(rows, [i], [f"/d/a.h5\t/x\t1000\t{i}+1\n"])
    assert rows.predicts()
    order = np.arange(1005, dtype=np.int64)
    samples, bounds = _publish._translate(rows, np.full(201, 5), order)
    assert samples.tolist() == list(range(1000)) and bounds[-1] == 1000


def test_whole_contiguous_batches_and_sorted_batch_reads():
    blocks = LearnedMap()
    for b in range(0, 40, 1):
        record(blocks, [b], [f"/d/a.h5\t/x\t1000\t{b * 25}+25\n"])
    assert blocks.predicts()
    assert blocks.samples_of(39) == tuple(range(975, 1000))
    batches = LearnedMap()
    record(batches, [9, 3, 5], ["/d/a.h5\t/x\t100\t3+1,5+1,9+1\n"])
    assert batches.samples_of(9) == (9,) and batches.samples_of(3) == (3,)


def test_many_files_numbered_in_sorted_order():
    learned = LearnedMap()
    for f in range(4):
        for row in range(0, 100, 9):
            record(learned, [f * 100 + row], [f"/d/part_{f}.h5\t/x\t100\t{row}+1\n"])
    assert [x.path for x in learned.sample_map().files] == [f"/d/part_{f}.h5" for f in range(4)]
    assert learned.predicts()
    assert learned.samples_of(250) == (250,)


def test_learned_reads_are_left_to_reference_counting():
    # The training process holds a record per index (40,000 in a first epoch
    # of an index table); the cyclic collector must stop tracking them in its
    # young generations (one level of tuples a collection), or they count
    # towards full collections of a heap torch has filled (~90 ms each).
    learned = LearnedMap()
    for i in range(200):
        record(learned, [i], [f"/d/a.h5\t/x\t1000\t{(i * 37) % 1000}+1\n",
                              f"/d/a.h5\t/y\t1000\t{(i * 37) % 1000}+1\n"])
    record(learned, [200], ["/d/a.h5\t/x\t1000\t5+20\n"])  # a block
    record(learned, [201, 202], ["/d/a.h5\t/x\t1000\t7+1,3+1\n"])  # a batch, split
    record(learned, [203], ["/d/a.h5\t/x\t1000\t5+3,9+1\n"])  # rows apart: a tuple
    gc.collect(0)
    gc.collect(1)
    # Only the rows apart may still be tracked (CPython 3.13 keeps them; 3.14's
    # collector untracks them too).
    assert {i for i, reads in learned._reads.items() if gc.is_tracked(reads)} <= {203}


def test_the_same_rows_in_other_runs_are_the_same_read():
    learned = LearnedMap()
    record(learned, [4], ["/d/a.h5\t/x\t1000\t3+2\n"])
    record(learned, [4], ["/d/a.h5\t/x\t1000\t3+1,4+1\n"])
    record(learned, [5], ["/d/a.h5\t/x\t1000\t9+1,7+1\n"])
    record(learned, [5], ["/d/a.h5\t/x\t1000\t9+1,7+1\n"])
    assert learned.rechecked == 2 and learned.changed == 0
    assert learned.sample_map() is not None
    assert learned.samples_of(4) == (3, 4) and learned.samples_of(5) == (9, 7)


def test_a_read_again_record_with_fewer_reads_looked_at_is_no_change():
    """A process leaves a file's small datasets unlooked at past the first 32 it sees (the
    connector's census), so a re-checked index may come back without its small reads: not a
    change (it once made a group-per-sample loader "unstable" and unfollowed), and the fuller
    record is kept. Other rows of a dataset both read, or no dataset in common, are changes."""
    learned = LearnedMap()
    full = ["/d/s.h5\t/0007/data\t16\t0+16\n", "/d/s.h5\t/0007/grid/x\t32\t0+32\n"]
    record(learned, [7], full)
    record(learned, [7], full[:1])  # its grid left to HDF5 this time
    assert (learned.rechecked, learned.changed) == (1, 0)
    assert len(learned._reads[7]) == 2
    record(learned, [7], full)
    assert (learned.rechecked, learned.changed) == (2, 0)
    record(learned, [7], ["/d/s.h5\t/0007/data\t16\t0+8\n"])  # other rows of its data
    record(learned, [8], ["/d/s.h5\t/0008/data\t16\t0+16\n"])
    record(learned, [8], ["/d/s.h5\t/0009/data\t16\t0+16\n"])  # another dataset entirely
    assert (learned.rechecked, learned.changed) == (4, 2)
    assert learned._reads[8][0][1] == "0009/data"


def test_an_overflowed_bracket_teaches_nothing():
    learned = LearnedMap()
    record(learned, [1], ["overflow\n"])
    assert len(learned) == 0 and learned.unlearnable == 1


def _one_sample_files(directory, count, extra=()):
    directory.mkdir()
    for i in range(count):
        (directory / f"s{i:04d}.h5").write_bytes(b"x")
    for name in extra:
        (directory / name).write_bytes(b"x")
    return str(directory.resolve())


def test_one_sample_per_file_is_predicted_from_the_sibling_files(tmp_path):
    d = _one_sample_files(tmp_path / "data", 500, extra=["notes.txt"])
    learned = LearnedMap()
    for i in range(7, 500, 11):  # 46 files read so far, scattered
        record(learned, [i], [f"{d}/s{i:04d}.h5\t/x\t1\t0+1\n", f"{d}/s{i:04d}.h5\t/y\t1\t0+1\n"])
    assert learned.predicts()
    m = learned.sample_map()
    assert m.num_samples == 500 and len(m.files) == 500 and m.fields == ("x", "y")
    assert m.files[3].path == f"{d}/s0003.h5"
    assert learned.samples_of(3) == (3,)  # never read: predicted


def test_a_group_per_index_is_a_map_of_groups():
    """A group per sample (PDEBench's seeds: `f[key]["data"]`, `f[key]["grid"]["x"]`): every
    index reads datasets no other index reads, in a group of its own. Each group is a file
    of the map, its datasets fields named in the group. An index that reads a part of its
    group stands for the rows it reads: index 7 for rows 4-11 of the 16 of "0007/data".
    (Such records once gave a map of the first sample's dataset alone, its 16 rows standing
    for 16 samples of index 0, and then no map.)"""
    learned = LearnedMap()
    order = (7, 3, 90, 41) + tuple(range(10, 40))  # 34 indices, in no order
    for i in order:
        record(learned, [i], [f"/d/seeds.h5\t/{i:04d}/data\t16\t4+8\n",
                              f"/d/seeds.h5\t/{i:04d}/grid/t\t16\t4+8\n",
                              f"/d/seeds.h5\t/{i:04d}/grid/x\t32\t0+32\n"])
    m = learned.sample_map()
    assert not learned.datasets_of_their_own
    # grid/t has the rows of data, grid/x does not: it is not a field.
    assert m.fields == ("data", "grid/t") and m.num_samples == 34 * 16
    groups = sorted(f"{i:04d}" for i in order)
    assert [(f.file_path, f.group, f.rows, f.rows_per_sample) for f in m.files] == [
        ("/d/seeds.h5", g, 16, 1) for g in groups]
    first = 16 * groups.index("0007")
    assert learned.samples_of(7) == tuple(range(first + 4, first + 12))
    assert learned.samples_of(8) == ()  # a group not read yet is not known
    # An index read again (workers re-check) keeps its group.
    record(learned, [7], ["/d/seeds.h5\t/0007/data\t16\t4+8\n",
                          "/d/seeds.h5\t/0007/grid/t\t16\t4+8\n"])
    assert learned.samples_of(7) == tuple(range(first + 4, first + 12))
    # A new index's group joins the map.
    record(learned, [8], ["/d/seeds.h5\t/0008/data\t16\t0+8\n"])
    assert learned.sample_map().num_samples == 35 * 16 and len(learned.samples_of(8)) == 8


def _seeds_file(path, seeds, parent="", rows=16):
    """A file of a group per seed (PDEBench's layout): `<parent>/<seed>/data`, and a dataset
    beside the groups that is no seed."""
    import h5py
    import numpy as np

    with h5py.File(path, "w") as f:
        where = f.create_group(parent) if parent else f
        for seed in range(seeds):
            where[f"{seed:04d}/data"] = np.zeros((rows, 4), np.float32)
        where["notes"] = np.zeros(3)
    return str(path)


def test_the_first_epoch_of_a_group_per_seed_is_predicted_from_the_files_groups(tmp_path):
    """PDEBench's FNODatasetMult: index i reads keys[i + offset] whole, keys the file's groups
    sorted (its training split starts a tenth in). The groups read so far are a scattering of
    the file's, so only the file's other groups beside them, listed, make the numbering a
    pattern: the seeds not read yet are predicted, and their datasets assumed to have the
    rows of those read (the connector checks each before binding it)."""
    import h5py  # noqa: F401 - the application's: the learner lists groups only through it

    path = _seeds_file(tmp_path / "seeds.h5", 200, parent="train")
    learned = LearnedMap()
    for i in range(3, 180, 5):  # 36 of the 180 training seeds, in no order
        record(learned, [i], [f"{path}\t/train/{i + 20:04d}/data\t16\t0+16\n"])
    assert learned.predicts()
    m = learned.sample_map()
    assert m.whole_groups and m.num_samples == 200 and len(m.files) == 200
    assert m.files[0].group == "train/0000" and m.files[0].rows_per_sample == 16
    assert learned.samples_of(3) == (23,)
    assert learned.samples_of(4) == (24,)  # never read: predicted
    assert learned.samples_of(180) == ()  # past the file's last group


def test_groups_in_another_order_than_sorted_are_not_predicted(tmp_path):
    """Seeds a loader shuffled once (index i reads a random group): no pattern over the
    file's groups, so nothing not read is predicted, and what was read stays learned."""
    import random

    import h5py  # noqa: F401

    path = _seeds_file(tmp_path / "seeds.h5", 200)
    keys = [f"{s:04d}" for s in range(200)]
    random.Random(5).shuffle(keys)
    learned = LearnedMap()
    for i in range(0, 120, 3):
        record(learned, [i], [f"{path}\t/{keys[i]}/data\t16\t0+16\n"])
    assert not learned.predicts()
    assert learned.sample_map().num_samples == 40 and learned.samples_of(1) == ()


def test_a_group_each_index_reads_whole_is_one_sample():
    """Indices that read their group's datasets whole (PDEBench's seeds, read whole and
    sliced in Python) make each group one sample of all its rows: index 7 is one sample,
    groups of 16 or 100 rows alike. A later index that reads a part of its group makes
    the rows samples again (its prefetch would read the whole group otherwise)."""
    learned = LearnedMap()
    order = (7, 3, 90, 41) + tuple(range(10, 40))
    for i in order:
        rows = 100 if i % 2 else 16
        record(learned, [i], [f"/d/seeds.h5\t/{i:04d}/data\t{rows}\t0+{rows}\n",
                              f"/d/seeds.h5\t/{i:04d}/grid/t\t{rows}\t0+{rows}\n"])
    m = learned.sample_map()
    assert not learned.datasets_of_their_own and m.whole_groups
    assert m.fields == ("data", "grid/t") and m.num_samples == 34
    assert all(f.rows_per_sample == f.rows for f in m.files)
    groups = sorted(f"{i:04d}" for i in order)
    assert learned.samples_of(7) == (groups.index("0007"),)
    # Read whole in two parts: still one sample.
    record(learned, [8], ["/d/seeds.h5\t/0008/data\t16\t0+10\n",
                          "/d/seeds.h5\t/0008/data\t16\t10+6\n"])
    assert learned.sample_map().num_samples == 35 and len(learned.samples_of(8)) == 1
    # A part of a group: every row a sample.
    record(learned, [9], ["/d/seeds.h5\t/0009/data\t16\t0+8\n"])
    m = learned.sample_map()
    assert not m.whole_groups and m.num_samples == sum(f.rows for f in m.files)
    first = m.first_sample["/d/seeds.h5\0" + "0009"]
    assert learned.samples_of(9) == tuple(range(first, first + 8))
    assert len(learned.samples_of(7)) == 100
    record(learned, [9], ["/d/seeds.h5\t/0009/data\t16\t0+16\n"])
    assert learned.sample_map().num_samples == 36


def test_windows_of_episodes_a_group_each_are_a_map_of_groups():
    """robomimic's SequenceDataset: a group per demonstration (`data/demo_<k>`), each index a
    window of 10 steps of its demonstration's cameras (`obs/<camera>[t:t+10]`, shorter at the
    end), read by the indices of that demonstration only. No dataset is read by most indices,
    yet each reads the same datasets of its group: a map of groups whose rows are samples, an
    index standing for the rows of its window. (Such records once gave a map of one
    demonstration's dataset, a hundredth of the reads.)"""
    learned = LearnedMap()
    steps, demos = 40, 12
    index = {}
    for k in range(demos):
        for t in range(steps):
            index[len(index)] = (k, t)
    order = list(index)[::-1][::3]  # 160 of the 480 indices, in no order of the file's
    for i in order:
        k, t = index[i]
        n = min(10, steps - t)
        record(learned, [i], [f"/d/demos.hdf5\t/data/demo_{k}/obs/{camera}\t{steps}\t{t}+{n}\n"
                              for camera in ("agentview_image", "eye_in_hand_image")])
    m = learned.sample_map()
    assert not learned.datasets_of_their_own
    assert m.fields == ("agentview_image", "eye_in_hand_image")
    groups = sorted(f"data/demo_{k}/obs" for k in range(demos))
    assert [(f.file_path, f.group, f.rows, f.rows_per_sample) for f in m.files] == [
        ("/d/demos.hdf5", g, steps, 1) for g in groups]
    i = order[5]
    k, t = index[i]
    first = steps * groups.index(f"data/demo_{k}/obs") + t
    assert learned.samples_of(i) == tuple(range(first, first + min(10, steps - t)))

    # Datasets of the root read by half the indices each (no group to share): the map of the
    # most read one, as before.
    halves = LearnedMap()
    for i in range(64):
        record(halves, [i], [f"/d/h.h5\t/{'even' if i % 2 == 0 else 'odd'}\t64\t{i}+1\n"])
    assert halves.sample_map().fields == ("even",) and not halves.datasets_of_their_own


def test_groups_of_more_rows_than_a_map_of_groups_takes_are_no_map():
    """An index that reads more rows than _MAX_GROUP_ROWS of its group, in part or whole:
    such groups are cached without a schedule (following them measured slower)."""
    from prescient._learn import _MAX_GROUP_ROWS

    for rows, mapped in ((_MAX_GROUP_ROWS, True), (_MAX_GROUP_ROWS + 1, False)):
        for total in (2 * rows, rows):  # a part of the group, then the whole of it
            learned = LearnedMap()
            for i in range(40):
                record(learned, [i], [f"/d/s.h5\t/s{i:06d}/data\t{total}\t0+{rows}\n"])
            assert (learned.sample_map() is not None) == mapped, rows
            assert learned.datasets_of_their_own != mapped
            if mapped:
                assert learned.sample_map().num_samples == (40 if total == rows else 40 * total)


def test_datasets_of_their_own_without_groups_are_no_map():
    """Every index reads a dataset of its own in the root ("/x_0007"), or datasets of two
    groups: no group stands for the index, so no map (reads are cached without a
    schedule). The same records over datasets that the indices share are one."""
    for lines in (lambda i: [f"/d/flat.h5\t/x_{i:04d}\t16\t0+16\n"],
                  lambda i: [f"/d/two.h5\t/a{i}/x\t16\t0+16\n", f"/d/two.h5\t/b{i}/x\t16\t0+16\n"]):
        learned = LearnedMap()
        for i in (7, 3, 90, 41) + tuple(range(10, 40)):
            record(learned, [i], lines(i))
            if len(learned) == 20:
                assert learned.sample_map() is not None  # too few indices to tell yet
        assert learned.sample_map() is None and learned.datasets_of_their_own
        assert learned.samples_of(7) == () and not learned.predicts()

    shared = LearnedMap()
    for i in range(34):  # the same count of indices, one row each of shared datasets
        record(shared, [i], [f"/d/all.h5\t/data\t96\t{i}+1\n", f"/d/all.h5\t/y\t96\t{i}+1\n"])
    assert shared.sample_map().fields == ("data", "y") and not shared.datasets_of_their_own


def test_a_map_of_groups_is_published_as_groups_of_its_file(tmp_path):
    """The schedule of a map of groups names each group of the file (format version 4; 5
    with each group one sample, read whole), as the connector's reader reads it."""
    from prescient import _publish
    from prescient_sampler._format import ScheduleFile

    data = tmp_path / "seeds.h5"
    data.write_bytes(b"\0" * 64)
    with open(tmp_path / "learn-1", "ab") as f:
        for i in range(40):
            f.write(format_record([i], f"{data}\t/{i:04d}/data\t101\t0+101\n".encode()))
    schedule = tmp_path / "schedule.bin"
    publisher = _publish.Publisher(str(tmp_path), str(schedule), 1)
    order = [[i] for i in reversed(range(40))]
    _publish.save_order(str(tmp_path), 0, 0, order, 2)
    assert publisher.publish() and publisher.covered == {(0, 0)}
    read = ScheduleFile(str(schedule))
    m = read.header.map
    assert m.has_groups and [f.group for f in m.files] == [f"{i:04d}" for i in range(40)]
    assert {f.path for f in m.files} == {str(data)} and m.num_samples == 40
    assert read.format_version == 5 and {f.rows_per_sample for f in m.files} == {101}
    assert m.find(str(data), "/0039/data") == (39, 0) and m.dataset_of(39, 0) == "0039/data"
    assert m.locate(39) == (39, 0) and m.sample_of(39, 100) == 39
    samples, _ = read.part(0, 0)
    assert list(samples) == list(reversed(range(40)))  # index 39 first, one sample each


def test_siblings_that_break_the_numbering_are_not_believed(tmp_path):
    # Another .h5 file sorts among the samples: after it, index i is the (i+1)-th file.
    d = _one_sample_files(tmp_path / "data", 300, extra=["s0100-extra.h5"])
    learned = LearnedMap()
    for i in range(5, 300, 7):
        record(learned, [i], [f"{d}/s{i:04d}.h5\t/x\t1\t0+1\n"])
    assert not learned.predicts()
    assert learned.samples_of(6) == ()
    assert learned.sample_map().num_samples == len(range(5, 300, 7))


def test_records_that_break_the_pattern_keep_their_rows_and_more_of_them_stop_the_prediction():
    learned = LearnedMap()
    for i in range(0, 400, 9):  # 45 records
        record(learned, [i], [f"/d/a.h5\t/x\t1000\t{i}+1\n"])
    assert learned.predicts() and learned.samples_of(500) == (500,)
    record(learned, [401], [f"/d/a.h5\t/x\t1000\t7+1\n"])  # index 401 reads row 7
    assert learned.predicts()  # one in 16 may break it (a loader's boundary case) ...
    assert learned.samples_of(401) == (7,)  # ... and reads its own rows
    assert learned.samples_of(500) == (500,)
    assert learned.exceptions() == {401: (7,)}
    for i in range(402, 406):  # more than one in 16: the pattern is not believed
        record(learned, [i], [f"/d/a.h5\t/x\t1000\t{i - 394}+1\n"])
    assert not learned.predicts()
    assert learned.samples_of(401) == (7,)
    assert learned.samples_of(500) == ()


def test_boundary_indices_that_read_a_row_twice_do_not_hide_the_pattern():
    """FourCastNet's last step of a year reads that step as input and target (rows 63 and
    63): such records are exceptions from the start, not a reason to find no pattern."""
    import numpy as np
    from prescient._publish import _translate

    def reads(i):
        year, t = divmod(i, 64)
        target = t if t == 63 else t + 1
        return [f"/d/{2015 + year}.h5\t/fields\t64\t{t}+1\n",
                f"/d/{2015 + year}.h5\t/fields\t64\t{target}+1\n"]

    learned = LearnedMap()
    for i in list(range(0, 256, 3)) + [63, 127]:
        record(learned, [i], reads(i))
    assert learned.predicts()
    assert learned.samples_of(100) == (100, 101)  # predicted
    assert learned.samples_of(63) == (63, 63) and learned.samples_of(127) == (127, 127)
    indices = np.array([63, 100, 127, 5])
    samples, _ = _translate(learned, np.array([1, 1, 1, 1]), indices)
    assert samples.tolist() == [63, 63, 100, 101, 127, 127, 5, 6]


def test_an_order_translates_the_same_with_and_without_the_pattern():
    import numpy as np
    from prescient._publish import _translate
    learned = LearnedMap()
    for b in range(0, 40):
        record(learned, [b], [f"/d/a.h5\t/x\t1000\t{b * 25}+25\n"])
    pattern = learned.pattern()
    assert (pattern.per, pattern.offsets, pattern.ranges()) == (25, (0,), ((0, 40),))
    indices = np.random.default_rng(3).permutation(40)
    lengths = np.array([3] * 13 + [1])
    fast = _translate(learned, lengths, indices)
    learned.pattern = lambda: None  # the record-by-record path
    slow = _translate(learned, lengths, indices)
    assert np.array_equal(fast[0], slow[0]) and np.array_equal(fast[1], slow[1])
    assert fast[0].dtype == slow[0].dtype and fast[1].dtype == slow[1].dtype


def test_labels_kept_in_another_file_are_read_with_their_images():
    """PatchCamelyon's layout: images in x.h5, labels in y.h5, read at the same row."""
    import numpy as np
    from prescient._publish import _translate
    learned = LearnedMap()
    order = np.random.default_rng(5).permutation(1000)
    for i in order[:100].tolist():
        record(learned, [i], [f"/d/x.h5\t/x\t1000\t{i}+1\n", f"/d/y.h5\t/y\t1000\t{i}+1\n"])
    m = learned.sample_map()
    assert [(f.path, f.rows) for f in m.files] == [("/d/x.h5", 1000), ("/d/y.h5", 1000)]
    assert m.fields == ("x", "y") and m.num_samples == 2000
    assert learned.predicts() and learned.predicted_indices() == ((0, 1000),)
    assert learned.samples_of(int(order[0])) == (order[0], 1000 + order[0])  # learned
    assert learned.samples_of(int(order[-1])) == (order[-1], 1000 + order[-1])  # predicted
    lengths = np.array([25] * 40)
    fast = _translate(learned, lengths, order)
    assert fast[0].tolist()[:4] == [order[0], 1000 + order[0], order[1], 1000 + order[1]]
    assert fast[1].tolist()[:3] == [0, 50, 100]
    learned.pattern = lambda: None  # the index-by-index path (an index table's)
    learned._samples.clear()
    later = np.array(order[:100])  # only learned indices: no pattern needed
    slow = _translate(learned, np.array([25] * 4), later)
    del learned.pattern
    fast = _translate(learned, np.array([25] * 4), later)
    assert np.array_equal(fast[0], slow[0]) and np.array_equal(fast[1], slow[1])


def test_each_file_of_images_has_its_file_of_labels():
    learned = LearnedMap()
    for f in range(4):
        for row in range(0, 100, 3):
            record(learned, [f * 100 + row], [f"/d/img_{f}.h5\t/image\t100\t{row}+1\n",
                                              f"/d/lbl_{f}.h5\t/label\t100\t{row}+1\n"])
    m = learned.sample_map()
    assert [f.path for f in m.files] == ([f"/d/img_{f}.h5" for f in range(4)]
                                         + [f"/d/lbl_{f}.h5" for f in range(4)])
    assert m.fields == ("image", "label") and m.companions == tuple((f"/d/lbl_{f}.h5",)
                                                                    for f in range(4))
    assert learned.predicts()
    assert learned.samples_of(250) == (250, 650)  # predicted: img_2 and lbl_2, row 50
    assert learned.samples_of(3) == (3, 403)      # learned


def test_batch_reads_of_images_and_labels_in_two_files_are_split_and_paired():
    import numpy as np
    learned = LearnedMap()
    order = np.random.default_rng(9).permutation(1000)
    for b in range(0, 400, 25):  # BatchSampler's batches, each one read of d[sorted(batch)] a file
        batch = order[b:b + 25].tolist()
        runs = ",".join(f"{r}+1" for r in sorted(batch))
        record(learned, batch, [f"/d/x.h5\t/x\t1000\t{runs}\n", f"/d/y.h5\t/y\t1000\t{runs}\n"])
    m = learned.sample_map()
    assert m.companions == (("/d/y.h5",),) and learned.predicts()
    assert learned.samples_of(int(order[3])) == (order[3], 1000 + order[3])


def test_a_file_read_beside_only_some_images_or_at_other_rows_is_no_companion():
    learned = LearnedMap()
    for i in range(0, 1000, 7):
        lines = [f"/d/x.h5\t/x\t1000\t{i}+1\n"]
        if i % 2:  # half the indices read a mask beside the image
            lines.append(f"/d/mask.h5\t/m\t1000\t{i}+1\n")
        if i % 5:  # a row of as many, another than the image's
            lines.append(f"/d/meta.h5\t/t\t1000\t{999 - i}+1\n")
        if i % 5 != 1:  # the image's row of a dataset of other length
            lines.append(f"/d/big.h5\t/b\t2000\t{i}+1\n")
        record(learned, [i], lines)
    m = learned.sample_map()
    assert [f.path for f in m.files] == ["/d/x.h5"] and m.fields == ("x",) and not m.companions
    assert learned.samples_of(7) == (7,) and learned.samples_of(8) == (8,)
    learned = LearnedMap()
    for i in range(0, 1000, 7):  # a mask beside one image in ten, and nothing else elsewhere
        mask = [f"/d/mask.h5\t/m\t1000\t{i}+1\n"] if i % 10 == 3 else []
        record(learned, [i], [f"/d/x.h5\t/x\t1000\t{i}+1\n"] + mask)
    assert not learned.sample_map().companions and learned.samples_of(3) == (3,)


def test_learn_files_read_during_the_epoch_are_not_read_again_at_its_publication(tmp_path):
    from prescient import _follower, _publish
    from prescient._context import FollowContext

    data = tmp_path / "a.h5"
    data.write_bytes(b"\0" * 64)

    def append(first, count):
        with open(tmp_path / "learn-1", "ab") as f:
            for i in range(first, first + count):
                f.write(format_record([i], f"{data}\t/x\t1000\t{i}+1\n".encode()))

    publisher = _publish.Publisher(str(tmp_path), str(tmp_path / "schedule.bin"), 1)
    append(0, 300)
    assert publisher.absorb() == 300 and publisher.learned.predicts()
    assert publisher.absorb() == 0  # nothing appended since
    append(300, 200)
    _publish.save_order(str(tmp_path), 0, 0, [[i] for i in range(500)], 2)
    read = []
    real_read_files = publisher.learned.read_files
    publisher.learned.read_files = lambda d: read.append(real_read_files(d)) or read[-1]
    assert publisher.publish()
    assert read == [200] and len(publisher.learned) == 500

    # The follower reads them on a thread of its own once the epoch is described.
    context = FollowContext(directory=str(tmp_path), rank=0, local_ranks=1)
    follower = _follower.Follower(context)
    follower._publisher = publisher
    publisher.covered = {(0, 0)}
    append(500, 100)
    follower.epoch_progressed(0)
    assert follower._looking is not None
    follower._looking.join(60)
    assert len(publisher.learned) == 600 and publisher.absorb() == 0

    # An epoch not described yet is published by the look, on its thread too: the
    # training's main thread, which feeds the workers, does not parse.
    publisher.covered = set()
    _publish.save_order(str(tmp_path), 0, 1, [[i] for i in range(600)], 2)
    append(600, 50)
    main = threading.get_ident()
    publishing = []
    real_publish = publisher.publish
    publisher.publish = lambda: publishing.append(threading.get_ident()) or real_publish()
    follower.epoch_progressed(1)
    follower._looking.join(60)
    assert publishing and main not in publishing and (0, 1) in publisher.covered


def test_no_schedule_is_written_before_it_describes_a_read(tmp_path):
    """A map without a pattern, learned during the first epoch: its looks write no schedule
    (the connector would bind one that describes nothing) until the epoch is learned."""
    from prescient import _publish

    data = tmp_path / "a.h5"
    data.write_bytes(b"\0" * 64)
    table = [(i * 37) % 1000 for i in range(1000)]

    def append(indices):
        with open(tmp_path / "learn-1", "ab") as f:
            for i in indices:
                f.write(format_record([i], f"{data}\t/x\t1000\t{table[i]}+1\n".encode()))

    schedule = tmp_path / "schedule.bin"
    publisher = _publish.Publisher(str(tmp_path), str(schedule), 1)
    _publish.save_order(str(tmp_path), 0, 0, [[i] for i in range(1000)], 2)
    append(range(600))
    assert not publisher.publish() and not schedule.exists()
    assert _publish.load_known(str(tmp_path)) == frozenset(range(600))  # for workers forked now
    append(range(600, 1000))
    assert publisher.publish() and schedule.exists() and publisher.covered == {(0, 0)}
    # Once a version exists, one that describes nothing is written: it withdraws the last
    # (epoch 1's indices are not learned, epoch 0 is over).
    _publish.save_order(str(tmp_path), 0, 1, [[i] for i in range(1000, 1500)], 2)
    assert publisher.publish() and publisher.covered == set() and publisher.published == 2


def test_a_second_epoch_is_published_with_the_indices_drop_last_left_unread(tmp_path):
    """An index table of 776 samples read in batches of 16 with drop_last (the Well's): each
    epoch reads 768 indices, and the next epoch's order holds the 8 its first never read.
    From a rank's second epoch on, up to one index in 16 may stay undescribed: the epoch is
    published at its start instead of not at all (it was, for the Well, from the third)."""
    import numpy as np
    from prescient import _publish

    data = tmp_path / "a.h5"
    data.write_bytes(b"\0" * 64)
    table = np.random.default_rng(9).permutation(776)  # index -> row: no pattern

    def append(indices):
        with open(tmp_path / "learn-1", "ab") as f:
            for i in indices:
                f.write(format_record([i], f"{data}\t/x\t776\t{table[i]}+1\n".encode()))

    first = np.random.default_rng(10).permutation(776)
    left_out = sorted(first[768:].tolist())
    publisher = _publish.Publisher(str(tmp_path), str(tmp_path / "schedule.bin"), 1)
    _publish.save_order(str(tmp_path), 0, 0, [[i] for i in first[:768].tolist()], 2)
    append(first[:768].tolist())
    assert publisher.publish() and publisher.covered == {(0, 0)}
    assert not publisher.learned.predicts()
    # The second epoch: 768 indices again, among them the 8 never read.
    second = [i for i in np.random.default_rng(11).permutation(776).tolist() if i not in left_out]
    second = left_out + second[: 768 - len(left_out)]
    _publish.save_order(str(tmp_path), 0, 1, [[i] for i in second], 2)
    assert publisher.publish() and (0, 1) in publisher.covered
    samples, bounds = _publish._translate(publisher.learned, np.ones(768, np.int64),
                                          np.array(second), after_an_epoch=True)
    described = np.diff(bounds.astype(np.int64))
    assert described.tolist() == [0] * 8 + [1] * 760
    assert samples.tolist() == [int(table[i]) for i in second[8:]]
    # Within a first epoch the rule stays: an order 8 short of learned is not published.
    assert _publish._translate(publisher.learned, np.ones(768, np.int64), np.array(second)) is None


def test_the_indices_a_pattern_predicts():
    learned = LearnedMap()
    assert learned.predicted_indices() is None
    for i in range(5, 300, 3):  # index i reads row i - 5 of 1,000
        record(learned, [i], [f"/d/a.h5\t/x\t1000\t{i - 5}+1\n"])
    assert learned.predicted_indices() == ((5, 1005),)
    blocks = LearnedMap()
    for b in range(0, 40):  # whole contiguous batches of 25 rows
        record(blocks, [b], [f"/d/a.h5\t/x\t1010\t{b * 25}+25\n"])
    assert blocks.predicted_indices() == ((0, 40),)  # the last 10 rows make no whole batch


def test_workers_learn_one_predicted_index_in_32_until_the_pattern_breaks(tmp_path):
    from prescient import _follower, _publish
    from prescient._context import FollowContext
    from prescient._learn import load_predicted

    data = tmp_path / "a.h5"
    data.write_bytes(b"\0" * 64)

    def append(indices, row_of=lambda i: i):
        with open(tmp_path / "learn-1", "ab") as f:
            for i in indices:
                f.write(format_record([i], f"{data}\t/x\t1000\t{row_of(i)}+1\n".encode()))

    # The training process shares what the pattern predicts as soon as it finds it.
    publisher = _publish.Publisher(str(tmp_path), str(tmp_path / "schedule.bin"), 1)
    append(range(0, 100))
    publisher.absorb()
    assert load_predicted(str(tmp_path)).ranges == ((0, 1000),)

    # A worker (here without a connector: a stand-in recorder) then learns 1 index in 32.
    class Recorder:
        pass

    follower = _follower.Follower(FollowContext(directory=str(tmp_path), rank=0, local_ranks=1))
    follower._recorder_here = lambda: Recorder()
    assert sum(follower.learns(i) for i in range(100, 740)) == 20
    assert sum(follower.learns([i, i + 1]) for i in range(200, 520, 2)) == 5  # batch keys too
    assert follower.learns(1000) and follower.learns([999, 1000])  # outside: always learned

    # A learned record that leaves the pattern withdraws the prediction, and the worker
    # learns every index again at its next look (_PREDICTED_CHECK_SECONDS after the last).
    append(range(300, 308), row_of=lambda i: 7)  # more than one record in 16
    publisher.absorb()
    assert load_predicted(str(tmp_path)) is None
    time.sleep(_follower._PREDICTED_CHECK_SECONDS)
    assert all(follower.learns(i) for i in range(400, 464))


def test_a_batch_is_learned_in_one_append_and_a_failed_fetch_teaches_nothing(tmp_path):
    from prescient import _follower
    from prescient._context import FollowContext

    data = tmp_path / "a.h5"
    data.write_bytes(b"\0" * 64)

    class Recorder:  # stands in for the connector's: what the dataset "read" since begin()
        lines = b""

        def begin(self):
            Recorder.lines = b""
            return True

        def end(self):
            return Recorder.lines

    class Dataset:
        def __getitem__(self, i):
            if i == 13:
                Recorder.lines += f"{data}\t/x\t1000\t999+1\n".encode()  # read, then failed
                raise KeyError(i)
            Recorder.lines += f"{data}\t/x\t1000\t{i}+1\n{data}\t/y\t1000\t{i}+1\n".encode()
            return i

    follower = _follower.Follower(FollowContext(directory=str(tmp_path), rank=0, local_ranks=1))
    recorder = Recorder()
    follower._recorder_here = lambda: recorder
    follower._recorder_pid = 1
    appends = []
    real_append = follower._append
    follower._append = lambda records: (appends.append(records), real_append(records))

    assert follower.fetch_each(Dataset(), [4, 2, 7]) == [4, 2, 7]
    assert len(appends) == 1  # one write for the batch's three records
    try:
        follower.fetch_each(Dataset(), [5, 13, 6])
        raise AssertionError("the failed fetch must raise")
    except KeyError:
        pass
    assert len(appends) == 2  # the sample fetched before the failure is still learned

    learned = LearnedMap()
    assert learned.read_files(str(tmp_path)) == 4
    assert learned.known() == {2, 4, 5, 7}  # not 13 (failed) nor 6 (never fetched)
    assert learned.sample_map().fields == ("x", "y")
    assert [learned.samples_of(i) for i in (2, 4, 5, 7)] == [(2,), (4,), (5,), (7,)]


def test_a_batch_of_known_indices_is_fetched_whole_but_for_one_index_in_32(tmp_path):
    """fetch_each's path for a batch whose every index is known (a later epoch) records the
    same fetches as the per-index one, one in _RECHECK, counting across batches, and fetches
    every sample in order; a batch with an unknown index is learned index by index."""
    from prescient import _follower
    from prescient._context import FollowContext

    data = tmp_path / "a.h5"
    data.write_bytes(b"\0" * 64)

    class Recorder:
        lines = b""

        def begin(self):
            Recorder.lines = b""
            return True

        def end(self):
            return Recorder.lines

    fetched = []

    class Dataset:
        def __getitem__(self, i):
            fetched.append(i)
            Recorder.lines += f"{data}\t/x\t1000\t{int(i)}+1\n".encode()
            return i * 10

    follower = _follower.Follower(FollowContext(directory=str(tmp_path), rank=0, local_ranks=1))
    recorder = Recorder()
    follower._recorder_here = lambda: recorder
    follower._recorder_pid = 1
    follower._known = frozenset(range(100))
    recorded = []
    follower._append = lambda records: recorded.extend(
        int(line[2:]) for line in records.decode().splitlines() if line.startswith("K "))

    order = [(7 * k) % 100 for k in range(100)]
    batches = [order[k:k + 32] for k in range(0, 96, 32)] + [order[96:], order[:20], order[20:90]]
    for batch in batches:
        assert follower.fetch_each(Dataset(), batch) == [i * 10 for i in batch]
    every = [i for batch in batches for i in batch]
    assert fetched == every
    assert recorded == every[_follower._RECHECK - 1::_follower._RECHECK]  # the 32nd, 64th, ...
    assert follower._fetches == len(every)

    # Not all known (100 is not): every unknown index is recorded, the known ones keep counting.
    fetched.clear()
    recorded.clear()
    follower._fetches = 0
    assert follower.fetch_each(Dataset(), [100, *range(40), 101]) == [i * 10 for i in [100, *range(40), 101]]
    assert recorded == [100, 31, 101] and follower._fetches == 40
    # Items equal to known indices but not indices (3.0) are fetched, never recorded.
    follower._fetches = _follower._RECHECK - 1
    recorded.clear()
    assert follower.fetch_each(Dataset(), [3.0, 4]) == [30.0, 40]
    assert recorded == []
    # A batch given as a tuple (a custom batch sampler's) takes the same path.
    follower._fetches = _follower._RECHECK - 2
    assert follower.fetch_each(Dataset(), (5, 6, 7)) == [50, 60, 70] and recorded == [6]


def test_malformed_records_teach_nothing_and_do_not_stop_the_reading(tmp_path):
    with open(tmp_path / "learn-1", "wb") as f:
        f.write(b"K 1\n/d/a.h5\t/x\t1000\t1+x\nE\n")      # rows that are not numbers
        f.write(b"K one\n/d/a.h5\t/x\t1000\t2+1\nE\n")     # a key that is not one
        f.write(b"K 3\n/d/a.h5\t/x\tmany\t3+1\nE\n")       # a length that is not one
        f.write(b"K 4\n/d/a.h5\t/x\t1000\t4+1,6+2\nE\n")  # a well-formed record
    learned = LearnedMap()
    learned.read_files(str(tmp_path))
    assert learned.known() == {4}
    assert learned.unlearnable == 3


def concatenated(order, rows=100):
    """Reads of a ConcatDataset over files /d/f<kk>.h5 of `rows` rows, in the
    file order `order` (an unsorted glob): index i -> (file, row)."""
    def reads(i):
        f, row = order[i // rows], i % rows
        return [f"/d/f{f:02d}.h5\t/x\t{rows}\t{row}+1\n", f"/d/f{f:02d}.h5\t/y\t{rows}\t{row}+1\n"]
    return reads


def test_files_concatenated_in_another_order_than_sorted_are_predicted_piece_by_piece():
    import numpy as np
    from prescient._publish import _translate
    order = [3, 0, 5, 1, 7, 2, 6, 4]  # the k-th 100 indices read file f<order[k]>
    reads = concatenated(order)
    learned = LearnedMap()
    for i in np.random.default_rng(5).permutation(800)[:64].tolist():  # 8 per file on average
        record(learned, [i], reads(i))
    assert learned.predicts()
    assert learned.sample_map().fields == ("x", "y")
    for i in range(800):  # every index, read or not: the file's row, numbered over sorted files
        f, row = order[i // 100], i % 100
        assert learned.samples_of(i) == (f * 100 + row,), i
    assert learned.predicted_indices() == ((0, 800),)
    # The publication translates a whole order by the pieces at once.
    indices = np.random.default_rng(6).permutation(800)
    samples, bounds = _translate(learned, np.array([2] * 400), indices)
    assert samples.tolist() == [order[i // 100] * 100 + i % 100 for i in indices.tolist()]
    assert bounds.tolist() == list(range(0, 801, 2))


def credit_reads(i, steps=96, files=2):
    """NCAR CREDIT's ERA5_and_Forcing_SingleStep over yearly files of `steps` time steps: index
    i stands for steps t and t + 1 of a file's variables, the files' indices one apart (each
    year's numbering starts one past the last's end), and the last indices of a year read its
    last window again (clamped)."""
    f, start = (0, 0) if i < steps + 1 else (1, steps + 1)
    t = min(i - start, steps - 2)
    return [f"/d/era5_{2018 + f}.nc\t/{name}\t{steps}\t{t}+2\n" for name in ("T", "U")]


def test_files_whose_indices_skip_one_and_clamp_at_the_end_are_predicted_piece_by_piece():
    """No pattern over the whole map fits (the second file's indices are one further on), and
    each year's boundary indices (95 and 96 read rows 94-95 of the first file) fit no piece:
    they are exceptions, and each file still gets its piece."""
    import numpy as np
    from prescient._publish import _translate

    def samples(i):  # over the two files' 192 rows, sorted by path
        f, start = (0, 0) if i < 97 else (1, 97)
        t = min(i - start, 94)
        return (96 * f + t, 96 * f + t + 1)

    learned = LearnedMap()
    for i in np.random.default_rng(3).permutation(192)[:70].tolist() + [95, 96]:
        record(learned, [i], credit_reads(i))
    assert learned.sample_map().fields == ("T", "U")
    assert learned.predicts()
    assert learned.predicted_indices() == ((0, 95), (97, 192))
    assert learned.exceptions() == {95: (94, 95), 96: (94, 95)}
    for i in range(192):  # every index, learned or predicted
        assert learned.samples_of(i) == samples(i), i
    # The whole epoch translates at once, the boundary indices by what they read.
    order = np.random.default_rng(4).permutation(192)
    translated, bounds = _translate(learned, np.array([2] * 96), order)
    assert translated.reshape(-1, 2).tolist() == [list(samples(i)) for i in order.tolist()]
    assert bounds.tolist() == list(range(0, 385, 4))


def test_an_epoch_is_published_before_its_boundary_indices_are_read():
    """While the first epoch is read, the pattern predicts the rest of it; its boundary
    indices, not read yet, are left undescribed (one in 16 at most) instead of holding back
    the whole epoch's schedule."""
    import numpy as np
    from prescient._publish import _translate

    learned = LearnedMap()
    for i in [i for i in range(0, 192, 3) if i not in (95, 96)]:
        record(learned, [i], credit_reads(i))
    assert learned.predicts() and 95 not in learned.known() and 96 not in learned.known()
    order = np.random.default_rng(5).permutation(192)
    translated, bounds = _translate(learned, np.array([1] * 192), order)
    described = np.diff(bounds.astype(np.int64))
    assert sorted(order[described == 0].tolist()) == [95, 96]
    assert (described[~np.isin(order, [95, 96])] == 2).all()
    # Without a pattern the rule stays (almost) every index learned: a table's unread
    # indices would describe only its past.
    table = LearnedMap()
    for i in range(0, 150):
        record(table, [i], [f"/d/a.h5\t/x\t1000\t{(i * 37) % 1000}+1\n"])
    assert not table.predicts()
    assert _translate(table, np.array([1] * 192), order) is None


def test_pieces_wait_for_files_read_often_enough():
    order = list(range(40))[::-1]  # 40 files of 100 rows, concatenated backwards
    reads = concatenated(order)
    learned = LearnedMap()
    for i in range(0, 4000, 100):  # one index per file: no file has evidence of its own
        record(learned, [i], reads(i))
    assert not learned.predicts()
    import numpy as np
    for i in np.random.default_rng(8).permutation(4000)[:600].tolist():  # 15 per file
        if learned.samples_of(i) and i not in learned.known():
            assert learned.samples_of(i) == reads_to_samples(order, i)  # predicted right
        record(learned, [i], reads(i))
    assert learned.predicted_indices() == ((0, 4000),)
    assert learned.samples_of(150) == (3850,)


def reads_to_samples(order, i, rows=100):
    return (order[i // rows] * rows + i % rows,)


def test_a_file_read_too_few_times_gets_its_piece_at_a_later_look():
    order = [2, 0, 1]
    reads = concatenated(order)
    learned = LearnedMap()
    for i in list(range(0, 100, 5)) + list(range(100, 200, 5)) + [201, 202]:  # f2, f0: 20 each; f1: 2
        record(learned, [i], reads(i))
    assert learned.predicted_indices() == ((0, 200),)  # f1's indices (200-299) not yet
    assert learned.samples_of(250) == ()
    assert learned.samples_of(201) == (101,)  # learned all the same
    # Records in no piece are let in without a rebuild until they are as many as
    # the map was built from (42); the look after that gives f1 its piece.
    for i in range(203, 300, 2):
        record(learned, [i], reads(i))
        learned.samples_of(i)
    assert learned.predicted_indices() == ((0, 300),)
    assert learned.samples_of(250) == (150,)


def test_a_shuffled_table_over_many_files_is_not_taken_for_pieces():
    import numpy as np
    table = np.random.default_rng(7).permutation(800)  # index -> a random row of 8 files
    learned = LearnedMap()
    for i in range(400):
        f, row = divmod(int(table[i]), 100)
        record(learned, [i], [f"/d/f{f}.h5\t/x\t100\t{row}+1\n"])
    assert not learned.predicts()
    assert learned.samples_of(500) == ()
    # ... and the verdict stands: the next records are taken without a rebuild.
    builds = []
    original = learned._build_map
    learned._build_map = lambda: builds.append(1) or original()
    for i in range(400, 800):
        f, row = divmod(int(table[i]), 100)
        record(learned, [i], [f"/d/f{f}.h5\t/x\t100\t{row}+1\n"])
        learned.samples_of(i)
    assert builds == [] and not learned.predicts()


def test_a_record_that_breaks_a_piece_stops_the_prediction():
    order = [1, 0]
    reads = concatenated(order)
    learned = LearnedMap()
    for i in range(0, 200, 4):
        record(learned, [i], reads(i))
    assert learned.predicted_indices() == ((0, 200),)
    for i in (1, 2, 3, 5):  # more than one record in 16
        record(learned, [i], [f"/d/f01.h5\t/x\t100\t50+1\n", f"/d/f01.h5\t/y\t100\t50+1\n"])
    assert not learned.predicts()
    assert learned.samples_of(6) == ()


def test_predicted_ranges_are_shared_with_the_workers(tmp_path):
    from prescient._learn import load_predicted
    from prescient._publish import save_predicted
    save_predicted(str(tmp_path), ((0, 100), (200, 300)))
    predicted = load_predicted(str(tmp_path))
    assert predicted.ranges == ((0, 100), (200, 300))
    assert [i in predicted for i in (0, 99, 100, 150, 199, 200, 299, 300, -1)] == [
        True, True, False, False, False, True, True, False, False]
    (tmp_path / "predicted").write_text("0 100 50 150\n")  # overlapping: not believed
    assert load_predicted(str(tmp_path)) is None
    save_predicted(str(tmp_path), None)
    assert load_predicted(str(tmp_path)) is None


def test_files_of_workers_whose_iterator_is_quiet_are_not_read(tmp_path):
    """A worker's learn file is named with its iterator's base seed; once the training process
    lists that seed as quiet (a validation loader, or the loader that gave way to training's),
    nothing of the file is read, also what its persistent workers append later."""
    from prescient import _learn

    def append(name, index, path):
        with open(tmp_path / name, "ab") as f:
            f.write(format_record([index], f"{path}\t/x\t1000\t{index}+1\n".encode()))

    append("learn-100.s7", 1, "/val.h5")  # validation's worker (base seed 7)
    append("learn-200.s9", 1, "/train.h5")  # training's (base seed 9)
    append("learn-300", 2, "/train.h5")  # the training process itself (no workers)
    (tmp_path / _learn.QUIET_SEEDS).write_text("7\n")
    learned = LearnedMap()
    assert learned.read_files(str(tmp_path)) == 2
    append("learn-100.s7", 3, "/val.h5")  # appended after the listing: not read either
    append("learn-200.s9", 3, "/train.h5")
    assert learned.read_files(str(tmp_path)) == 1
    assert sorted(learned.known()) == [1, 2, 3] and learned.changed == 0
    assert {read[0] for i in (1, 2, 3) for read in learned._reads[i]} == {"/train.h5"}


def test_windows_of_two_steps_one_step_apart_are_predicted_file_by_file():
    """FourCastNet's shape: year files of 32 time steps; index i is step t = i % 31 of year
    i // 31 and reads steps t and t + 1 (input and target) of `fields`. Consecutive indices'
    windows overlap (stride 1, two samples each), and each file holds one index fewer than
    it has rows, so the files' offsets differ: one piece per file."""
    import numpy as np
    from prescient._publish import _translate
    years, steps = 4, 32
    per_year = steps - 1

    def reads(i):
        year, t = divmod(i, per_year)
        path = f"/d/{2015 + year}.h5\t/fields\t{steps}\t"
        return [path + f"{t}+1\n", path + f"{t + 1}+1\n"]

    learned = LearnedMap()
    for i in np.random.default_rng(11).permutation(years * per_year)[:48].tolist():
        record(learned, [i], reads(i))
    assert learned.predicts()
    for i in range(years * per_year):  # every index, read or not
        year, t = divmod(i, per_year)
        assert learned.samples_of(i) == (year * steps + t, year * steps + t + 1), i
    assert learned.predicted_indices() == ((0, years * per_year),)
    indices = np.random.default_rng(12).permutation(years * per_year)
    samples, bounds = _translate(learned, np.array([1] * len(indices)), indices)
    expected = [s for i in indices.tolist() for s in learned.samples_of(i)]
    assert samples.tolist() == expected
    assert bounds.tolist() == list(range(0, 2 * len(indices) + 1, 2))


def test_one_file_of_overlapping_windows_is_one_piece():
    """A single file read in windows of three rows, one row apart (index i reads rows
    i .. i + 2 in one read): the whole map is one piece with stride 1."""
    learned = LearnedMap()
    for i in range(0, 300, 7):
        record(learned, [i], [f"/d/a.h5\t/x\t1000\t{i}+3\n"])
    assert learned.predicts()
    assert learned.samples_of(500) == (500, 501, 502)
    assert learned.samples_of(997) == (997, 998, 999)
    assert learned.samples_of(998) == ()  # its window would leave the file
    assert learned.predicted_indices() == ((0, 998),)

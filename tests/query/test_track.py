"""Following particles across steps by id, against a NumPy dictionary lookup."""

from __future__ import annotations

import json
import subprocess
import sys

import h5py
import numpy as np
import pytest

import quarry
from quarry.errors import TrackingError

STEPS = 4
N = 701


def rows_of(ds, var, ids, tables=None):
    """``find_rows`` of the ids ``ids`` (an array) in the id variable ``var``."""
    from quarry.query.track import WantedIds, find_rows

    return find_rows(ds, var, WantedIds.of(np.asarray(ids), var.dtype), tables)


def write_run(path, seed=5, drop=0.1):
    """H5Part-like steps; particles shuffle between steps and some leave."""
    rng = np.random.default_rng(seed)
    truth = {}
    with h5py.File(path, "w") as f:
        for s in range(STEPS):
            ids = rng.permutation(N)
            ids = ids[rng.random(N) >= drop] if s else ids
            energy = rng.exponential(1.0, len(ids))
            x = rng.normal(size=len(ids)).astype("f4")
            f[f"Step#{s}/id"], f[f"Step#{s}/energy"], f[f"Step#{s}/x"] = ids, energy, x
            truth[s] = (ids, energy, x)
    return truth


@pytest.mark.parametrize("indexed", [False, True])
@pytest.mark.parametrize("cut", [0.5, 4.0])
def test_tracks_match_numpy(tmp_path, indexed, cut):
    path = str(tmp_path / "run.h5")
    truth = write_run(path)
    if indexed:
        with quarry.open(path) as ds:
            ds.build_index(block_len=128)
    with quarry.open_series(path) as series:
        tracks = series.track(f"energy > {cut}", 1, "id", ["energy", "x"])
    ids1, e1, _ = truth[1]
    want_ids = ids1[e1 > cut]
    np.testing.assert_array_equal(tracks.ids, want_ids)
    for step, got in zip(range(STEPS), tracks.steps, strict=True):
        ids, energy, x = truth[step]
        row_of = {int(i): r for r, i in enumerate(ids)}
        rows = np.array([row_of.get(int(i), -1) for i in want_ids], dtype=np.int64)
        np.testing.assert_array_equal(got.rows, rows)
        found = rows >= 0
        np.testing.assert_array_equal(got.values["energy"][found], energy[rows[found]])
        assert np.isnan(got.values["energy"][~found]).all()
        np.testing.assert_array_equal(got.values["x"][found], x[rows[found]].astype("f8"))
        d = got.to_dict()
        assert (d["step"], d["found"], d["missing"]) == (
            step,
            int(found.sum()),
            int((~found).sum()),
        )


def test_tracking_errors(tmp_path):
    path = str(tmp_path / "run.h5")
    write_run(path)
    with quarry.open_series(path) as series:
        with pytest.raises(TrackingError, match="no step 9"):
            series.track("energy > 1", 9)
        with pytest.raises(TrackingError, match="ids must be integers"):
            series.track("energy > 1", 0, "energy")
    dup = str(tmp_path / "dup.h5")
    with h5py.File(dup, "w") as f:
        f["Step#0/id"], f["Step#0/e"] = np.array([1, 1, 2]), np.array([5.0, 5.0, 0.0])
    with quarry.open_series(dup) as series, pytest.raises(TrackingError, match="id 1 appears 2"):
        series.track("e > 1", 0)


def test_track_cli_json_and_h5(tmp_path):
    path = str(tmp_path / "run.h5")
    truth = write_run(path)
    out = str(tmp_path / "tracks.h5")
    cli = [sys.executable, "-m", "quarry.cli.main", "track", path, "energy > 3"]
    proc = subprocess.run(
        [*cli, "--at-step", "2", "--values", "energy", "--json", "--out", out],
        capture_output=True,
        text=True,
        check=True,
    )
    doc = json.loads(proc.stdout)
    ids2, e2, _ = truth[2]
    assert doc["ids"] == ids2[e2 > 3].tolist()
    assert [s["step"] for s in doc["steps"]] == list(range(STEPS))
    assert doc["steps"][2]["missing"] == 0
    with h5py.File(out) as f:
        assert f.attrs["query"] == "energy > 3" and f.attrs["at_step"] == 2
        assert sorted(f) == [f"Step#{s}" for s in range(STEPS)]
        np.testing.assert_array_equal(f["Step#2/energy"][()], e2[e2 > 3])
        assert f["Step#0/quarry_found"][()].all()  # nobody has left at step 0
        np.testing.assert_array_equal(f["Step#2/id"][()], ids2[e2 > 3])
        rows = f["Step#2/quarry_row"][()]
        np.testing.assert_array_equal(ids2[rows], ids2[e2 > 3])
    text = subprocess.run([*cli, "--at-step", "0"], capture_output=True, text=True, check=True)
    assert text.stdout.splitlines()[1] == "file,step,found,missing"
    bad = subprocess.run([*cli, "--at-step", "7"], capture_output=True, text=True)
    assert bad.returncode == 1 and "no step 7" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("indexed", [False, True])
def test_ids_are_matched_exactly_across_dtypes(tmp_path, indexed):
    """A uint64 id past 2**63 and the int64 of the same 64 bits are other
    particles (a cast made them one, and with an index the lookup raised
    OverflowError); ids come back as written, not wrapped."""
    path = str(tmp_path / "u.h5")
    big = 2**63 + 5
    with h5py.File(path, "w") as f:
        f["Step#0/id"], f["Step#0/e"] = np.array([big, 7], "u8"), np.array([5.0, 5.0])
        f["Step#1/id"], f["Step#1/e"] = np.array([big - 2**64, 7], "i8"), np.array([1.0, 2.0])
        f["Step#2/id"], f["Step#2/e"] = np.array([7, big], "u8"), np.array([3.0, 4.0])
    if indexed:
        with quarry.open(path) as ds:
            ds.build_index()
    with quarry.open_series(path) as series:
        tracks = series.track("e > 4", at_step=0, id_var="id", names=["e"])
    assert tracks.ids.tolist() == [big, 7]
    assert [s.rows.tolist() for s in tracks.steps] == [[0, 1], [-1, 1], [1, 0]]
    assert tracks.to_dict()["steps"][1]["values"]["e"] == [None, 2.0]


def test_a_missing_particles_integer_value_is_0_and_quarry_found_says_so(tmp_path):
    """The README: where quarry_found is false a float value is NaN and an
    integer one 0 (an integer column has no NaN); --json gives null."""
    path = str(tmp_path / "q.h5")
    with h5py.File(path, "w") as f:
        f["Step#0/id"], f["Step#0/q"] = np.array([1, 2, 3]), np.array([10, 11, 12], "i4")
        f["Step#1/id"], f["Step#1/q"] = np.array([2]), np.array([-5], "i4")
    out = str(tmp_path / "t.h5")
    cli = [sys.executable, "-m", "quarry.cli.main", "track", path, "q > 0", "--at-step", "0"]
    done = subprocess.run(
        [*cli, "--id-var", "id", "--values", "q", "--json", "--out", out],
        capture_output=True,
        text=True,
        check=True,
    )
    steps = json.loads(done.stdout)["steps"]
    assert steps[1]["values"]["q"] == [None, -5, None]
    with h5py.File(out) as f:
        assert f["Step#1/q"][()].tolist() == [0, -5, 0]
        assert f["Step#1/quarry_found"][()].tolist() == [False, True, False]
        assert f["Step#1/quarry_row"][()].tolist() == [-1, 0, -1]


def test_a_variable_of_another_length_than_the_ids_is_an_error(tmp_path):
    """y shorter than id in step 1: its values were read at the ids' rows as
    if the two lined up (or past y's end, an IndexError traceback), and a
    query on y at the anchor read ids at y's rows."""
    from quarry.errors import SeriesMemberError

    path = str(tmp_path / "len.h5")
    with h5py.File(path, "w") as f:
        f["Step#0/id"], f["Step#0/y"] = np.arange(10), np.arange(10.0)
        f["Step#1/id"], f["Step#1/y"] = np.arange(10)[::-1].copy(), np.arange(4.0)
    with quarry.open_series(path) as series:
        for query in ("y > 5", "y < 2"):
            with pytest.raises(SeriesMemberError, match=r"step 1: /Step#1/y has shape \(4,\) but"):
                series.track(query, 0, "id", ["y"])
        with pytest.raises(SeriesMemberError, match=r"/Step#1/id has shape \(10,\) but the query"):
            series.track("y > 1", 1, "id")
        tracks = series.track("y > 5", 0, "id")  # no values asked: the ids alone are found
        assert [s.rows.tolist() for s in tracks.steps] == [[6, 7, 8, 9], [3, 2, 1, 0]]
    cli = [sys.executable, "-m", "quarry.cli.main", "track", path, "y < 2", "--at-step", "0"]
    run = subprocess.run([*cli, "--values", "y"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    said = "step 1: /Step#1/y has shape (4,) but the ids (/Step#1/id) have shape (10,)"
    assert said in run.stderr


@pytest.mark.parametrize("through_index", [False, True])
@pytest.mark.parametrize("dtype", ["i1", "u1", ">i2", "u2", "i4", ">u4", "i8", ">i8", "u8"])
def test_rows_of_ids_match_a_dictionary_whichever_way_they_are_found(
    tmp_path, monkeypatch, dtype, through_index
):
    """find_rows against a dict lookup, for ids of every integer dtype: the
    dtype's extremes, ids alike in their low 32 bits (hashed alike unless
    the hash mixes every bit), ids the variable cannot hold, absent ones,
    asked as int64 and as uint64; through the whole column and through the
    index, on 1,037 rows."""
    from quarry.query import track as tracking

    rng = np.random.default_rng(sum(map(ord, dtype)) + through_index)
    own = np.dtype(dtype)
    info = np.iinfo(own)
    pool = {int(info.min), int(info.max), 0, 1, 2}
    native = own.newbyteorder("=")
    pool |= set(rng.integers(info.min, info.max, 3000, dtype=native, endpoint=True).tolist())
    if info.bits == 64:
        pool |= {int(np.array(k << 32 | 7).astype(own)) for k in range(1, 40)}
    values = rng.permutation(np.array(sorted(pool), dtype=own))[:1037]
    path = str(tmp_path / "ids.h5")
    with h5py.File(path, "w") as f:
        f["id"] = values
    if through_index:
        with quarry.open(path) as ds:
            ds.build_index(block_len=128)
        monkeypatch.setattr(tracking, "ROWS_PER_LOOKUP", 1)
        monkeypatch.setattr(tracking, "INDEX_LOOKUP_SHARE", 1e9)
    row_of = {v: r for r, v in enumerate(values.tolist())}
    present = rng.choice(values, 60, replace=False).tolist()
    absent = [2**64 - 1, -(2**63), 2**63 + 5, -129, 256, int(info.max) - 1, int(info.min) + 1]
    asked = present + [v for v in absent if v not in row_of]
    with quarry.open(path) as ds:
        assert ds.has_index == through_index
        for kind in ("i8", "u8"):
            bounds = np.iinfo(kind)
            ids = np.array([v for v in asked if bounds.min <= v <= bounds.max], kind)
            got = rows_of(ds, ds.variable("id"), ids)
            assert got.tolist() == [row_of.get(v, -1) for v in ids.tolist()]


def test_hashing_ids_keeps_every_wanted_one_and_few_others():
    from quarry.query.track import maybe_wanted

    rng = np.random.default_rng(3)
    values = rng.integers(-(2**63), 2**63 - 1, 200_000, dtype=np.int64)
    values[::1000] = np.arange(200) << 40  # low bits all zero
    wanted = np.unique(np.concatenate([values[::997], np.arange(50) << 40]))
    maybe = maybe_wanted(values, wanted)
    assert np.isin(values, wanted).nonzero()[0].tolist() == [
        int(i) for i in maybe if values[i] in set(wanted.tolist())
    ]
    assert len(maybe) < 2 * np.isin(values, wanted).sum() + len(values) // 100


@pytest.mark.parametrize("end", ["bottom", "top"])
@pytest.mark.parametrize("dtype", ["i1", "u1", ">i2", "i4", ">u4", "i8", "u8"])
def test_a_series_tables_of_ids_match_a_dictionary(tmp_path, dtype, end):
    """Dense ids at either end of their dtype (offsets that wrap in 8 bits,
    uint64 ids past 2**63), 10 % of them missing: the first two lookups
    hash the column, the second keeps its table, the third and fourth use
    it; all four agree with a dict, for ids present, missing, below and
    above the table's range, asked as int64 and as uint64."""
    from quarry.query.track import IdTables

    info = np.iinfo(np.dtype(dtype))
    n = min(200, info.max - info.min + 1)
    start = info.min if end == "bottom" else info.max - n + 1
    rng = np.random.default_rng(n + len(dtype))
    values = rng.permutation(np.arange(n, dtype="u8").astype(object) + start)
    values = np.array(values[rng.random(n) > 0.1].tolist(), dtype=dtype)
    path = str(tmp_path / "ids.h5")
    with h5py.File(path, "w") as f:
        f["id"] = values
    row_of = {v: r for r, v in enumerate(values.tolist())}
    near = [start - 3, start - 1, start, start + n // 2, start + n - 1, start + n, start + n + 9]
    tables = IdTables()
    with quarry.open(path) as ds:
        var = ds.variable("id")
        for _ in range(4):
            for kind in ("i8", "u8"):
                bounds = np.iinfo(kind)
                ids = np.array([v for v in near if bounds.min <= v <= bounds.max], kind)
                got = rows_of(ds, var, ids, tables)
                assert got.tolist() == [row_of.get(v, -1) for v in ids.tolist()]
    assert tables.rows((path, "/id"), values[:1]) is not None  # the table was kept


def test_id_tables_keep_only_unique_dense_ids_within_their_budget(tmp_path, monkeypatch):
    from quarry.query.track import IdTables

    path = str(tmp_path / "ids.h5")
    with h5py.File(path, "w") as f:
        f["dense"] = np.random.default_rng(1).permutation(1000)
        f["sparse"] = np.arange(1000) * 5  # span 4,996: over 4 times the rows
        f["twice"] = np.array([*range(999), 7])
    tables = IdTables(budget=6000)  # one int32 table of 1,000 rows, not two
    with quarry.open(path) as ds:
        for name in ("dense", "sparse", "twice", "dense"):
            for _ in range(2):
                rows_of(ds, ds.variable(name), np.array([3, 10]), tables)
        assert [
            tables.rows((path, f"/{k}"), np.array([3])) is not None
            for k in ("dense", "sparse", "twice")
        ] == [True, False, False]
        for _ in range(3):  # the repeated id is refused however often it is asked
            with pytest.raises(TrackingError, match="id 7 appears 2 times"):
                rows_of(ds, ds.variable("twice"), np.array([7]), tables)
        from quarry.query import track as tracking

        made = []  # and a column refused once is not made a table again
        offsets = tracking._offsets
        monkeypatch.setattr(tracking, "_offsets", lambda *a: made.append(a) or offsets(*a))
        for name in ("sparse", "twice"):
            rows_of(ds, ds.variable(name), np.array([3]), tables)
        assert made == []
        monkeypatch.undo()
        with h5py.File(str(tmp_path / "more.h5"), "w") as f:
            f["dense"] = np.arange(1000)[::-1]
    with quarry.open(str(tmp_path / "more.h5")) as other:
        for _ in range(2):
            rows_of(other, other.variable("dense"), np.array([3]), tables)
    assert tables.rows((path, "/dense"), np.array([3])) is None  # dropped: the budget holds one
    assert tables.rows((str(tmp_path / "more.h5"), "/dense"), np.array([3])).tolist() == [996]


def test_tracking_again_gives_the_same_answer_and_a_closed_series_forgets_its_tables(
    tmp_path, monkeypatch
):
    path = str(tmp_path / "run.h5")
    write_run(path)
    with quarry.open_series(path) as series:
        first = series.track("energy > 1", 1, "id", ["energy"]).to_dict()
        for _ in range(3):
            assert series.track("energy > 1", 1, "id", ["energy"]).to_dict() == first
        key = (series.members[0].file, "/Step#0/id")
        assert series.id_tables.rows(key, np.array([0])) is not None
        driver = series.dataset(series.members[0].file).driver
        whole_reads = []
        read = driver.read
        monkeypatch.setattr(
            driver, "read", lambda var, a, b: whole_reads.append(var) or read(var, a, b)
        )
        assert series.track("energy > 1", 1, "id", ["energy"]).to_dict() == first
        # The README: ids looked up without reading the column (the query reads energy).
        assert whole_reads == ["/Step#1/energy"]
    assert series.id_tables.rows(key, np.array([0])) is None

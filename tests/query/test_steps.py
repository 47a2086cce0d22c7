"""One file with step groups answers as a series of one file: counts, ids,
values, histograms and long tables, against NumPy on random multi-step
files (random step counts and sizes that do not divide the block length,
NaNs), for one file and for a glob of files."""

from __future__ import annotations

import os
import re
import tempfile

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import quarry
from oracle import oracle_ids
from quarry.errors import MixedDtypeError

BLOCK = 16
QUERIES = ["px > 0.05", "px > 0.5 && q < 3", "!(px > 0) || q >= 8", "sqrt(px**2 + py**2) > 1"]


def step_columns(rng: np.random.Generator, n: int, dtype: str) -> dict[str, np.ndarray]:
    px = rng.normal(0, 1, n).astype(dtype)
    px[rng.random(n) < 0.1] = np.nan  # missing values follow SQL logic
    return {"px": px, "py": rng.normal(0, 1, n), "q": rng.integers(0, 10, n).astype("i4")}


def write_steps(path: str, steps: list[dict[str, np.ndarray]]) -> None:
    with h5py.File(path, "w") as f:
        for s, cols in enumerate(steps):
            for name, values in cols.items():
                f[f"Step#{s}/{name}"] = values


@st.composite
def runs(draw, n_files=1):
    """``n_files`` files' steps: 2 to 5 steps each, 0 to 70 rows per step."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dtype = draw(st.sampled_from(["f4", "f8"]))
    files = []
    for _ in range(n_files):
        sizes = draw(st.lists(st.integers(0, 70), min_size=2, max_size=5))
        files.append([step_columns(rng, n, dtype) for n in sizes])
    return files, draw(st.booleans())


def written(tmp: str, files: list[list[dict[str, np.ndarray]]], indexed: bool) -> list[str]:
    paths = []
    for k, steps in enumerate(files, 1):
        path = os.path.join(tmp, f"sim_{k}.h5")
        write_steps(path, steps)
        if indexed:
            with quarry.open(path) as ds:
                ds.build_index(block_len=BLOCK)
        paths.append(path)
    return paths


def check_answer(sel, steps, query, files=None):
    """``sel`` answers ``query`` over ``steps`` (one dict of columns per member)."""
    want = [oracle_ids(query, cols) for cols in steps]
    assert sel.counts() == [len(w) for w in want]
    assert sel.count() == sum(len(w) for w in want)
    for got, w in zip(sel.ids(), want, strict=True):
        np.testing.assert_array_equal(got, w)
    for got, w, cols in zip(sel.values("px"), want, steps, strict=True):
        np.testing.assert_array_equal(got, cols["px"][w])
    if files is not None:
        assert [(r["file"], r["step"]) for r in sel.per_step()] == files
    return want


@settings(max_examples=25)
@given(case=runs(), query=st.sampled_from(QUERIES))
def test_one_file_queried_as_a_series_of_one_file(case, query):
    (steps,), indexed = case
    with tempfile.TemporaryDirectory() as tmp:
        (path,) = written(tmp, [steps], indexed)
        members = [(path, s) for s in range(len(steps))]
        with quarry.open(path) as ds:
            sel = ds.query(query)
            assert isinstance(sel, quarry.SeriesSelection)
            check_answer(sel, steps, query, members)
            assert ds.query_many([query, query]) == [sel.count()] * 2
        with quarry.open_series(path) as series:
            check_answer(series.query(query), steps, query, members)


@settings(max_examples=15)
@given(case=runs(n_files=2), query=st.sampled_from(QUERIES))
def test_a_glob_of_files_with_steps(case, query):
    files, indexed = case
    with tempfile.TemporaryDirectory() as tmp:
        paths = written(tmp, files, indexed)
        members = [(p, s) for p, steps in zip(paths, files, strict=True) for s in range(len(steps))]
        with quarry.open_series(os.path.join(tmp, "sim_*.h5")) as series:
            sel = series.query(query)
            check_answer(sel, [cols for steps in files for cols in steps], query, members)


def selected(steps, query, name):
    """The values of ``name`` at the hits of every step, laid end to end."""
    return np.concatenate(
        [cols[name][oracle_ids(query, cols)] if query else cols[name] for cols in steps]
    )


def present(*columns):
    keep = np.ones(len(columns[0]), dtype=bool)
    for c in columns:
        if c.dtype.kind == "f":
            keep &= ~np.isnan(c)
    return [c[keep] for c in columns]


BINS = st.sampled_from(
    [(7, None), (3, (-1.0, 1.5)), ([-2.0, -0.5, 0.0, 0.05, 1.0, 4.0], None), (1, None)]
)


@settings(max_examples=30)
@given(
    case=runs(),
    bins=BINS,
    where=st.sampled_from([None, "q >= 3", "px > 0.5 && q < 3", "q > 100"]),
    name=st.sampled_from(["px", "q"]),
)
def test_histograms_over_steps_match_numpy(case, bins, where, name):
    (steps,), indexed = case
    bins, value_range = bins
    with tempfile.TemporaryDirectory() as tmp:
        (path,) = written(tmp, [steps], indexed)
        with quarry.open(path) as ds:
            h = ds.histogram(name, where=where, bins=bins, range=value_range)
            (px,) = present(selected(steps, where, name))
            counts, edges = np.histogram(px, bins=bins, range=value_range)
            np.testing.assert_array_equal(h.counts, counts)
            np.testing.assert_array_equal(h.edges, edges)
            if indexed and where is None:
                assert h.path in ("index", "index+data")
            # two variables, and weights: the values read and binned together
            h2 = ds.histogram(["px", "py"], where=where, bins=3)
            pxs, pys = present(selected(steps, where, "px"), selected(steps, where, "py"))
            counts2, edges2 = np.histogramdd(np.stack([pxs, pys], axis=1), bins=3)
            np.testing.assert_array_equal(h2.counts, counts2)
            for got, want in zip(h2.edges, edges2, strict=True):
                np.testing.assert_array_equal(got, want)
            hw = ds.histogram("py", where=where, bins=bins, range=value_range, weights="px")
            pys, pxs = present(selected(steps, where, "py"), selected(steps, where, "px"))
            wanted = np.histogram(pys, bins=bins, range=value_range, weights=pxs)[0]
            np.testing.assert_array_equal(hw.counts, wanted)
        if where is not None:
            with quarry.open_series(path) as series:
                h = series.query(where).histogram(name, bins=bins, range=value_range)
            np.testing.assert_array_equal(h.counts, counts)


def test_the_index_answers_a_series_histogram_with_known_edges(tmp_path):
    rng = np.random.default_rng(7)
    steps = [step_columns(rng, n, "f8") for n in (37, 50, 1)]
    path = str(tmp_path / "sim.h5")
    write_steps(path, steps)
    with quarry.open(path) as ds:
        ds.build_index(block_len=BLOCK)
        h = ds.query("q >= 2").histogram("px", bins=[-1.0, 0.0, 1.0])
        h_all = ds.histogram("px", bins=20)
    assert h.path in ("index", "index+data") and h.values_read < sum(len(c["px"]) for c in steps)
    px = selected(steps, "q >= 2", "px")
    np.testing.assert_array_equal(h.counts, np.histogram(px[~np.isnan(px)], [-1.0, 0.0, 1.0])[0])
    assert h_all.path == "index"
    (every,) = present(selected(steps, None, "px"))
    np.testing.assert_array_equal(h_all.counts, np.histogram(every, bins=20)[0])
    np.testing.assert_array_equal(h_all.edges, np.histogram(every, bins=20)[1])


@pytest.mark.parametrize("convert", ["to_pandas", "to_arrow"])
def test_long_tables_name_the_file_and_step(tmp_path, convert):
    pytest.importorskip("pandas" if convert == "to_pandas" else "pyarrow")
    rng = np.random.default_rng(8)
    files = [[step_columns(rng, n, "f4") for n in sizes] for sizes in ((33, 0, 40), (17,))]
    paths = written(str(tmp_path), files, indexed=True)
    query = "px > 0.2"
    with quarry.open_series(str(tmp_path / "sim_*.h5")) as series:
        table = getattr(series.query(query), convert)(["px", "q"])
    frame = table if convert == "to_pandas" else table.to_pandas()
    assert list(frame.columns[:2]) == ["quarry_file", "quarry_step"]
    rows = [
        (path, s, int(i), cols["px"][i], int(cols["q"][i]))
        for path, steps in zip(paths, files, strict=True)
        for s, cols in enumerate(steps)
        for i in oracle_ids(query, cols)
    ]
    assert len(frame) == len(rows)
    assert frame["quarry_file"].tolist() == [r[0] for r in rows]
    assert frame["quarry_step"].tolist() == [r[1] for r in rows]
    assert frame["quarry_row"].tolist() == [r[2] for r in rows]  # the hits' rows in their member
    np.testing.assert_array_equal(frame["px"].to_numpy(), np.array([r[3] for r in rows], "f4"))
    assert frame["q"].tolist() == [r[4] for r in rows]


def test_a_variable_called_quarry_step_keeps_its_column(tmp_path):
    pytest.importorskip("pandas")
    path = str(tmp_path / "sim.h5")
    write_steps(path, [{"e": np.array([1.0, 5.0]), "quarry_step": np.array([7, 8])}] * 2)
    with quarry.open(path) as ds:
        frame = ds.query("e > 2").to_pandas(["quarry_step"])
    assert frame["quarry_step_"].tolist() == [0, 1] and frame["quarry_step"].tolist() == [8, 8]


def test_a_file_without_steps_is_one_member(tmp_path):
    pytest.importorskip("pandas")
    path = str(tmp_path / "flat.h5")
    with h5py.File(path, "w") as f:
        f["e"] = np.array([1.0, 3.0, np.nan, 4.0])
    with quarry.open_series(path) as series:
        frame = series.query("e > 2").to_pandas(["e"])
    assert frame["quarry_step"].isna().all() and frame["e"].tolist() == [3.0, 4.0]
    with quarry.open(path) as ds:
        assert isinstance(ds.query("e > 2"), quarry.Selection)  # as before


def test_what_resolves_outside_the_steps_stays_one_table(tmp_path):
    rng = np.random.default_rng(9)
    steps = [step_columns(rng, 30, "f8") for _ in range(3)]
    path = str(tmp_path / "sim.h5")
    write_steps(path, steps)
    with h5py.File(path, "a") as f:
        f["px"] = np.arange(30.0)  # a root px: the shortest path wins
        f["a/w"], f["b/w"] = np.zeros(30), np.ones(30)  # two w outside any step
    with quarry.open(path) as ds:
        sel = ds.query("px > 10")
        assert isinstance(sel, quarry.Selection) and sel.count() == 19
        one = ds.query("py > 0", path="Step#1")  # a context naming one step
        assert isinstance(one, quarry.Selection)
        assert one.count() == int((steps[1]["py"] > 0).sum())
        with pytest.raises(quarry.AmbiguousNameError, match=r"--path GROUP \(path= in Python\)$"):
            ds.query("w > 0")  # really ambiguous, and not a matter of steps
        # a name in every step, with a context that names them all
        sel = ds.query("px > 0", path="Step#*")
        assert sel.counts() == [int((c["px"] > 0).sum()) for c in steps]


def test_a_root_name_the_steps_also_hold_is_ambiguous_step_by_step(tmp_path):
    """A root /x beside Step#N/x: the file's query answers /x (one table), and
    --per-step (open_series) answered each step's x instead, another count."""
    import subprocess
    import sys

    path = str(tmp_path / "root.h5")
    root, s0, s1 = np.array([1.0, 2, 3, -1, -2]), np.array([1.0, 1, 1]), np.array([5.0, -5])
    with h5py.File(path, "w") as f:
        f["x"], f["Step#0/x"], f["Step#1/x"] = root, s0, s1
    with quarry.open(path) as ds:
        assert ds.query("x > 0").count() == 3  # /x: the shortest path wins
    message = r"'x' matches 3 variables .*: /x, /Step#0/x, /Step#1/x; .* --path 'Step#\*'"
    with (
        quarry.open_series(path) as series,
        pytest.raises(quarry.AmbiguousNameError, match=message),
    ):
        series.query("x > 0")
    with quarry.open_series(path, path="Step#*") as series:
        assert series.query("x > 0").counts() == [3, 1]
    cli = [sys.executable, "-m", "quarry.cli.main", "query", path, "x > 0", "--per-step"]
    run = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "/x alone is one table, without --per-step" in run.stderr


def test_a_name_missing_from_one_step_names_it(tmp_path):
    rng = np.random.default_rng(10)
    steps = [step_columns(rng, 30, "f8") for _ in range(3)]
    del steps[2]["py"]
    path = str(tmp_path / "sim.h5")
    write_steps(path, steps)
    with quarry.open(path) as ds:
        with pytest.raises(quarry.SeriesMemberError, match=r"sim.h5, step 2: no variable 'py'"):
            ds.query("py > 0")
        with pytest.raises(quarry.SeriesMemberError, match="step 2"):
            ds.histogram("py", bins=3)


def test_a_name_in_every_step_is_indexed_in_every_step(tmp_path):
    rng = np.random.default_rng(11)
    steps = [step_columns(rng, 40, "f8") for _ in range(3)]
    path = str(tmp_path / "sim.h5")
    write_steps(path, steps)
    with quarry.open(path) as ds:
        manifest = ds.build_index(["px"], block_len=BLOCK)
        assert sorted(manifest.variables) == [f"/Step#{s}/px" for s in range(3)]
        h = ds.histogram("px", bins=4)
    assert h.path == "index"
    (px,) = present(selected(steps, None, "px"))
    np.testing.assert_array_equal(h.counts, np.histogram(px, bins=4)[0])


def test_members_of_other_dtypes_make_one_table_only_where_every_value_is_kept(tmp_path):
    """float32 beside float64 is one float64 column in Parquet and Arrow;
    uint64 beside float64 has no such column: Parquet and Arrow refuse it
    saying what to do, pandas keeps the values as Python numbers."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("pandas")
    import pyarrow.parquet

    path = str(tmp_path / "m.h5")
    with h5py.File(path, "w") as f:
        f["Step#0/e"], f["Step#0/u"] = np.array([1.0, 3.0], "f4"), np.array([1, 2**64 - 1], "u8")
        f["Step#1/e"], f["Step#1/u"] = np.array([4.0, 0.5], "f8"), np.array([0.5, 9.0], "f8")
    with quarry.open_series(path) as series:
        sel = series.query("e > 2")
        out = str(tmp_path / "e.parquet")
        sel.extract(out, ["e"])
        table = pyarrow.parquet.read_table(out)
        assert str(table.schema.field("e").type) == "double"
        assert table.column("e").to_pylist() == [3.0, 4.0]
        assert sel.to_arrow(["e"]).column("e").to_pylist() == [3.0, 4.0]
        target = str(tmp_path / "u.parquet")  # named, not the temporary written to
        mixed = rf"^cannot write {re.escape(target)}: u is uint64 in Step#0 and float64 in Step#1"
        with pytest.raises(MixedDtypeError, match=mixed):
            sel.extract(target, ["u"])
        assert sorted(os.listdir(tmp_path)) == ["e.parquet", "m.h5"]  # nothing left behind
        with pytest.raises(MixedDtypeError, match="to_pandas"):
            sel.to_arrow(["u"])
        frame = sel.to_pandas(["u"])
        assert frame["u"].tolist() == [2**64 - 1, 0.5]  # not 2**64 (float64)
        sel.extract(str(tmp_path / "u.h5"), ["u"])  # HDF5 keeps each group's dtype
        with h5py.File(tmp_path / "u.h5") as f:
            assert f["Step#0/u"].dtype == np.uint64 and f["Step#0/u"][0] == 2**64 - 1


def test_a_parquet_of_files_without_steps_has_a_null_step(tmp_path):
    """README: quarry_step is null in Parquet for a file without step groups,
    as to_arrow gives it; the .h5 group's step attribute is -1."""
    pytest.importorskip("pyarrow")
    import pyarrow.parquet

    for k in (1, 2):
        with h5py.File(tmp_path / f"run_{k}.h5", "w") as f:
            f["e"] = np.arange(4.0) * k
    with quarry.open_series(str(tmp_path / "run_*.h5")) as series:
        sel = series.query("e > 2")
        sel.extract(str(tmp_path / "hits.parquet"), ["e"])
        sel.extract(str(tmp_path / "hits.h5"), ["e"])
        arrow = sel.to_arrow(["e"])
    table = pyarrow.parquet.read_table(str(tmp_path / "hits.parquet"))
    assert table.column("quarry_step").to_pylist() == [None, None, None]
    assert arrow.column("quarry_step").to_pylist() == [None, None, None]
    with h5py.File(tmp_path / "hits.h5") as f:
        assert [int(f[g].attrs["step"]) for g in f] == [-1, -1]


def test_a_name_in_two_families_of_numbered_groups_is_ambiguous_not_half_answered(tmp_path):
    """ions_0, ions_1 beside electrons_0, electrons_1: the steps are one family
    (electrons_*, the first of two as large), and answering energy per step
    silently left the ions out (14 of 24 rows). It is ambiguous, as info says."""
    import h5py

    from quarry.errors import AmbiguousNameError

    path = str(tmp_path / "fam.h5")
    with h5py.File(path, "w") as f:
        for s in range(2):
            f[f"ions_{s}/energy"] = np.full(5, 2.0)
            f[f"electrons_{s}/energy"] = np.full(7, 2.0)
    with quarry.open(path) as ds:
        with pytest.raises(AmbiguousNameError, match="matches 4 variables"):
            ds.query("energy > 1").count()
        with pytest.raises(AmbiguousNameError, match="matches 4 variables"):
            ds.histogram("energy", bins=1)
        assert ds.query("energy > 1", "ions_*").count() == 10
    ambiguous = pytest.raises(AmbiguousNameError, match="matches 4 variables")
    with quarry.open_series(path) as series, ambiguous:  # quarry query --per-step's way
        series.query("energy > 1")
    in_batch = pytest.raises(quarry.BatchQueryError, match="matches 4 variables")
    with quarry.open_series(path) as series, in_batch:  # --batch's way
        series.query_many(["energy > 1", "energy > 3"])
    with quarry.open_series(path, path="ions_*") as series:
        assert series.query("energy > 1").counts() == [5, 5]
        assert [s.counts() for s in series.query_many(["energy > 1", "energy > 3"])] == [
            [5, 5],
            [0, 0],
        ]


@pytest.mark.parametrize("how", [[], ["--json"], ["--out", "OUT.h5"]])
def test_values_of_another_shape_in_one_step_name_the_file_and_step(tmp_path, how):
    """README: a member's error is prefixed with its file and step; --values
    of a variable whose shape differs in one step said neither."""
    import subprocess
    import sys

    path = str(tmp_path / "len.h5")
    with h5py.File(path, "w") as f:
        f["Step#0/x"], f["Step#0/y"] = np.arange(10.0), np.arange(10.0)
        f["Step#1/x"], f["Step#1/y"] = np.arange(10.0), np.arange(12.0)
    how = [str(tmp_path / a) if a == "OUT.h5" else a for a in how]
    cli = [sys.executable, "-m", "quarry.cli.main", "query", path, "x > 5", "--values", "y"]
    run = subprocess.run([*cli, *how], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    said = f"{path}, step 1: /Step#1/y has shape (12,) but the query ran over shape (10,)"
    assert said in run.stderr

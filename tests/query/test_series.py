"""Time series and many files against NumPy: every member's count, ids and
values, the total, the order of files and steps, and per-file indexes."""

from __future__ import annotations

import os

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import quarry
from oracle import oracle_ids

FILES = (10, 2, 1)  # written out of order: members follow natural order
STEPS = (0, 5, 10, 15)  # numeric order, not text order (Step#10 < Step#5 as text)
BLOCK = 64

QUERIES = [
    "energy > 1.3",
    "energy > 1.3 && x < 0.25",
    "sqrt(x**2 + y**2) > 1.5",
    "!(energy > 1) || id < 20",
    "100 <= id < 180 && y >= -0.5",
    "x * y > 0.5 && energy <= 2",
]


def step_columns(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    energy = rng.exponential(1.0, n)
    energy[rng.random(n) < 0.05] = np.nan  # missing values follow SQL logic
    return {
        "x": rng.normal(0, 1, n).astype("f4"),
        "y": rng.normal(0, 1, n),
        "energy": energy,
        "id": rng.permutation(n).astype("i8"),
    }


def write_h5part(path: str, steps: dict[int, dict[str, np.ndarray]]) -> None:
    with h5py.File(path, "w") as f:
        f.attrs["NumSteps"] = len(steps)
        for s, cols in steps.items():
            for k, v in cols.items():
                f[f"Step#{s}/{k}"] = v


@pytest.fixture(scope="module")
def series_dir(tmp_path_factory):
    """Three H5Part files of four steps each; particle counts differ by step
    and none is a multiple of the block length."""
    d = tmp_path_factory.mktemp("series")
    rng = np.random.default_rng(2024)
    truth = {}
    for k in FILES:
        steps = {s: step_columns(rng, 250 - 7 * i - k) for i, s in enumerate(STEPS)}
        path = str(d / f"run_{k}.h5")
        write_h5part(path, steps)
        truth[path] = steps
    with quarry.open_series(str(d / "run_*.h5")) as series:
        reports = list(series.build_indexes(block_len=BLOCK))
    assert [r.status for r in reports] == ["built"] * 3
    return str(d), truth


def expected_members(truth):
    order = sorted(truth, key=lambda p: int(os.path.basename(p)[4:-3]))
    return [(path, s) for path in order for s in STEPS]


@pytest.mark.parametrize("query", QUERIES)
def test_every_member_matches_numpy(series_dir, query):
    d, truth = series_dir
    with quarry.open_series(os.path.join(d, "run_*.h5")) as series:
        assert [(m.file, m.step) for m in series.members] == expected_members(truth)
        assert [m.group for m in series.members][:4] == [f"/Step#{s}" for s in STEPS]
        sel = series.query(query)
        want = [oracle_ids(query, truth[f][s]) for f, s in expected_members(truth)]
        assert sel.counts() == [len(w) for w in want]
        assert sel.count() == sum(len(w) for w in want)
        assert sel.per_step() == [
            {"file": f, "step": s, "count": len(w)}
            for (f, s), w in zip(expected_members(truth), want, strict=True)
        ]
        for got, w in zip(sel.ids(), want, strict=True):
            np.testing.assert_array_equal(got, w)
        energies = sel.values("energy")
        for (f, s), got, w in zip(expected_members(truth), energies, want, strict=True):
            np.testing.assert_array_equal(got, truth[f][s]["energy"][w])


@settings(max_examples=25)
@given(
    lo=st.floats(-3, 3, allow_nan=False),
    width=st.floats(0, 4, allow_nan=False),
    var=st.sampled_from(["x", "y", "energy"]),
)
def test_random_ranges_match_numpy(series_dir, lo, width, var):
    d, truth = series_dir
    query = f"{lo!r} <= {var} < {lo + width!r}"
    with quarry.open_series(d) as series:
        got = series.query(query).counts()
    assert got == [len(oracle_ids(query, truth[f][s])) for f, s in expected_members(truth)]


def test_sources_as_a_list_a_directory_or_one_file(series_dir):
    d, truth = series_dir
    lexical = sorted(truth)  # run_1, run_10, run_2: the shell's order
    with quarry.open_series(lexical) as series:
        assert [m.file for m in series.members[::4]] == [f for f, _ in expected_members(truth)][::4]
    with quarry.open_series(d) as series:
        assert len(series.members) == 12
    one = os.path.join(d, "run_2.h5")
    with quarry.open_series(one) as series:
        assert [(m.file, m.step) for m in series.members] == [(one, s) for s in STEPS]


def test_a_context_path_chooses_the_members(series_dir):
    d, truth = series_dir
    with quarry.open_series(os.path.join(d, "run_*.h5"), path="Step#1*") as series:
        assert [m.step for m in series.members] == [10, 15] * 3
        counts = series.query("energy > 1").counts()
    want = [int(np.sum(truth[f][s]["energy"] > 1)) for f, s in expected_members(truth) if s >= 10]
    assert counts == want
    with quarry.open_series(os.path.join(d, "run_1.h5"), path="Step#5") as series:
        assert [(m.step, m.group) for m in series.members] == [(5, "/Step#5")]
    with pytest.raises(quarry.UnknownPathError, match="Step#7"):
        _ = quarry.open_series(os.path.join(d, "run_1.h5"), path="Step#7").members


def test_files_without_steps_are_one_member_each(tmp_path):
    rng = np.random.default_rng(1)
    cols = {}
    for k in (3, 12):
        cols[k] = rng.normal(size=130)
        with h5py.File(tmp_path / f"flat_{k}.h5", "w") as f:
            f["v"] = cols[k]
            f["notes/v2"] = cols[k]  # a group without a number is no step
    with quarry.open_series(str(tmp_path / "flat_*.h5")) as series:
        sel = series.query("v > 0.5")
        assert sel.per_step() == [
            {"file": str(tmp_path / f"flat_{k}.h5"), "step": None, "count": int((c > 0.5).sum())}
            for k, c in cols.items()
        ]


def test_a_name_missing_from_one_step_names_the_file_and_step(tmp_path):
    rng = np.random.default_rng(4)
    steps = {s: step_columns(rng, 90) for s in range(3)}
    del steps[2]["y"]
    path = str(tmp_path / "lossy.h5")
    write_h5part(path, steps)
    with quarry.open_series(path) as series:
        assert series.query("x > 0").count() == sum(int((c["x"] > 0).sum()) for c in steps.values())
        with pytest.raises(
            quarry.SeriesMemberError, match=r"lossy.h5, step 2: no variable 'y'"
        ) as err:
            series.query("y > 0")
        assert err.value.step == 2 and err.value.file == path
        assert isinstance(err.value.error, quarry.UnknownVariableError)
        with pytest.raises(quarry.QuerySyntaxError):
            series.query("y > > 0")


def test_a_stale_index_of_one_file_is_named(tmp_path):
    rng = np.random.default_rng(5)
    paths = []
    for k in (1, 2):
        path = str(tmp_path / f"run_{k}.h5")
        write_h5part(path, {0: step_columns(rng, 70)})
        paths.append(path)
    with quarry.open_series(paths) as series:
        list(series.build_indexes(block_len=BLOCK))
    with h5py.File(paths[1], "a") as f:
        f["Step#0/extra"] = np.zeros(70)
    with (
        quarry.open_series(paths) as series,
        pytest.raises(quarry.SeriesMemberError, match=r"run_2\.h5: .*changed") as err,
    ):
        series.query("x > 0").count()
    # The file's index serves every step: its staleness is not told of step 0.
    assert "step 0" not in str(err.value) and err.value.step == 0


def test_indexes_are_per_file_and_skipped_when_up_to_date(tmp_path):
    rng = np.random.default_rng(6)
    for k in (1, 2):
        write_h5part(str(tmp_path / f"run_{k}.h5"), {0: step_columns(rng, 80)})
    idx = str(tmp_path / "indexes")
    pattern = str(tmp_path / "run_*.h5")
    with quarry.open_series(pattern, index=idx) as series:
        assert [r.status for r in series.build_indexes(block_len=32)] == [
            "built",
            "built",
        ]
    assert sorted(os.listdir(idx)) == ["run_1.h5.qidx", "run_2.h5.qidx"]
    before = os.stat(os.path.join(idx, "run_1.h5.qidx")).st_mtime_ns
    cols3 = step_columns(rng, 80)
    write_h5part(str(tmp_path / "run_3.h5"), {0: cols3})  # a new file arrives
    with quarry.open_series(pattern, index=idx) as series:
        reports = list(series.build_indexes(block_len=32))
        assert [r.status for r in reports] == ["up to date", "up to date", "built"]
        # asking for other options, or forcing, rebuilds
        assert {r.status for r in series.build_indexes(block_len=16)} == {"built"}
        assert {r.status for r in series.build_indexes(force=True)} == {"built"}
        assert series.query("energy > 1").counts()[2] == int((cols3["energy"] > 1).sum())
    assert os.stat(os.path.join(idx, "run_1.h5.qidx")).st_mtime_ns != before
    assert not any(n.endswith(".qidx") for n in os.listdir(tmp_path))


def test_bad_sources(tmp_path):
    with pytest.raises(quarry.SourceError, match="no files match"):
        quarry.open_series(str(tmp_path / "run_*.h5"))
    (tmp_path / "notes.txt").write_text("not data")
    with pytest.raises(quarry.SourceError, match="no data files"):
        quarry.open_series(str(tmp_path))
    a, b = tmp_path / "a", tmp_path / "b"
    for sub in (a, b):
        sub.mkdir()
        with h5py.File(sub / "run.h5", "w") as f:
            f["v"] = np.zeros(3)
    with pytest.raises(quarry.SeriesError, match=r"would share the index run\.h5\.qidx"):
        quarry.open_series([str(a / "run.h5"), str(b / "run.h5")], index=str(tmp_path / "ix"))


def test_adios2_steps_are_members(tmp_path):
    adios2 = pytest.importorskip("adios2", reason="adios2 is not installed")
    path = str(tmp_path / "run.bp")
    rng = np.random.default_rng(8)
    energies = []
    with adios2.Stream(path, "w") as stream:
        for _ in stream.steps(3):
            e = rng.exponential(1.0, 150)
            stream.write("energy", e, [150], [0], [150])
            energies.append(e)
    with quarry.open(path) as ds:
        ds.build_index(block_len=BLOCK)
    with quarry.open_series(path) as series:
        sel = series.query("energy > 1.5")
        assert [(m.step, c) for m, c in zip(series.members, sel.counts(), strict=True)] == [
            (s, int((e > 1.5).sum())) for s, e in enumerate(energies)
        ]


def test_derived_variables_in_every_file_and_step(tmp_path):
    rng = np.random.default_rng(9)
    truth = {}
    for k in (1, 2):
        steps = {s: step_columns(rng, 120 + s) for s in range(2)}
        write_h5part(str(tmp_path / f"run_{k}.h5"), steps)
        truth[k] = steps
    derive = ["r=sqrt(x**2 + y**2)"]
    with quarry.open_series(str(tmp_path / "run_*.h5")) as series:
        reports = list(series.build_indexes(block_len=BLOCK, derive=derive))
        assert [r.status for r in reports] == ["built", "built"]
        assert all("/Step#1/r" in r.variables for r in reports)
        again = series.build_indexes(block_len=BLOCK, derive=derive)
        assert [r.status for r in again] == ["up to date", "up to date"]
        counts = series.query("r > 1.5 && energy < 2").counts()
    want = []
    for k in (1, 2):
        for s in range(2):
            c = truth[k][s]
            r = np.sqrt(c["x"].astype("f8") ** 2 + c["y"] ** 2)
            want.append(int(((r > 1.5) & (c["energy"] < 2)).sum()))
    assert counts == want
    with quarry.open_series(str(tmp_path / "run_*.h5")) as series:
        other = ["r=sqrt(x**2 + y**2 + 1)"]
        assert {r.status for r in series.build_indexes(derive=other)} == {"built"}


def test_garbage_collection_is_paused_over_the_members_and_resumed_as_it_was(tmp_path):
    """Opening, planning and counting the members pause Python's cyclic
    collector (see quarry.query.series.few_collections) and leave it as the
    caller had it: running afterwards, also after an error, and paused where
    the caller paused it; the counts are NumPy's either way."""
    import gc

    path = str(tmp_path / "g.h5")
    steps = [np.random.default_rng(s).normal(0, 1, 999) for s in range(4)]
    with h5py.File(path, "w") as f:
        for s, x in enumerate(steps):
            f[f"Step#{s}/x"] = x
    want = [int(np.count_nonzero(x > 0.5)) for x in steps]
    seen = []
    with quarry.open_series(path) as series:
        series.build_indexes(block_len=128)
    with quarry.open_series(path) as series:
        real = series.dataset(path).query_table
        series.dataset(path).query_table = lambda *a: seen.append(gc.isenabled()) or real(*a)
        assert series.query("x > 0.5").counts() == want
        assert series.query_many(["x > 0.5"])[0].counts() == want
        assert seen == [False] * 4 and gc.isenabled()
        with pytest.raises(quarry.SeriesMemberError):
            series.query("nothing > 1").counts()
        assert gc.isenabled()
    gc.disable()
    try:
        with quarry.open_series(path) as series:
            assert series.query("x > 0.5").counts() == want
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_closed_series_leaves_no_cycles_for_the_collector(tmp_path):
    """Opening, planning (an aggregate included) and counting every member,
    then closing, frees Quarry's objects by reference counting alone: over
    720 members, cycles left to the cyclic collector cost 12 ms of a cold
    halo (recursive closures in the plan compiler, and the index reading the
    source through its dataset)."""
    import gc

    path = str(tmp_path / "c.h5")
    with h5py.File(path, "w") as f:
        for s in range(3):
            f[f"Step#{s}/x"] = np.random.default_rng(s).normal(0, 1, 500)
            f[f"Step#{s}/y"] = np.random.default_rng(s + 9).normal(0, 1, 500)
    with quarry.open_series(path) as series:
        list(series.build_indexes(block_len=128, derive=["r=sqrt(x**2 + y**2)"]))
    queries = ["r > 2*rms(r)", "x > mean(x) && y < 0.5"]
    with quarry.open_series(path) as series:  # warm the caches (parsing) once
        for q in queries:
            series.query(q).counts()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        with quarry.open_series(path) as series:
            for q in queries:
                series.query(q).counts()
            series.query_many(["x > 0.1", "x > 0.2"])
        gc.collect()
        ours = [
            o
            for o in gc.garbage
            if (getattr(o, "__module__", None) or type(o).__module__ or "").startswith("quarry")
        ]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert ours == []

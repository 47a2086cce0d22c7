"""A query asked again over a series of small steps counts every step's box in one
call of the core (:class:`quarry.query.boxes.StepBoxes`), planning no member
again: the same counts as NumPy and as the first asking, for every dtype, NaN,
fill values, empty ranges, steps of sizes that are no multiple of 64, and steps
whose columns are not memory-mapped (answered by their own selections); a
rebuilt index or a closed series makes the boxes anew."""

from __future__ import annotations

import os

import h5py
import netCDF4
import numpy as np
import pytest
from tests.query.test_small_box import DTYPES, box, column

import quarry
from quarry import _core
from quarry.dataset import Dataset

SIZES = [1, 63, 64, 1037, 2000, 4093]
#: A last step too large for a box (40,000 rows of two or three ranges).
BIG = 40_000


@pytest.fixture
def core_calls(monkeypatch):
    """The calls of ``_core.count_boxes`` and of ``Dataset.query_table`` (a
    member planned), counted."""
    calls = {"count_boxes": 0, "query_table": 0}
    count_boxes, query_table = _core.count_boxes, Dataset.query_table

    def counting_boxes(boxes):
        calls["count_boxes"] += 1
        return count_boxes(boxes)

    def counting_plans(self, *args, **kwargs):
        calls["query_table"] += 1
        return query_table(self, *args, **kwargs)

    monkeypatch.setattr(_core, "count_boxes", counting_boxes)
    monkeypatch.setattr(Dataset, "query_table", counting_plans)
    return calls


def write_steps(
    path: str, seed: int, chunked: set[int] = frozenset(), swapped: set[int] = frozenset()
) -> list[dict]:
    """Steps of every size in SIZES, twice, then one of BIG rows, each
    variable of its own dtype, each dataset at a 64-byte boundary of the
    file (one at an odd offset would be copied out of the map); the steps in
    ``chunked`` stored compressed (no memory map), those in ``swapped``
    big-endian (copied out of the map in native order)."""
    rng = np.random.default_rng(seed)
    steps = []
    with h5py.File(path, "w", alignment_threshold=1, alignment_interval=64) as f:
        for s, n in enumerate([*SIZES, *SIZES, BIG]):
            dtypes = [">f4", ">i8", "i2", ">u4", "i1"] if s in swapped else DTYPES[:5]
            data = {f"v{k}": column(rng, dtype, n) for k, dtype in enumerate(dtypes)}
            for name, values in data.items():
                if s in chunked:
                    f.create_dataset(f"Step#{s}/{name}", data=values, chunks=True, compression=1)
                else:
                    f[f"Step#{s}/{name}"] = values
            steps.append(data)
    return steps


def everything(names: list[str]) -> str:
    return " && ".join(f"{name} > -1000" for name in names)


@pytest.mark.parametrize(
    ("chunked", "swapped"),
    [(frozenset(), frozenset()), (frozenset({0, 5, 9}), frozenset()), ({2}, {3, 11})],
)
def test_a_query_asked_again_counts_every_step_in_one_call(tmp_path, core_calls, chunked, swapped):
    path = str(tmp_path / "steps.h5")
    steps = write_steps(path, seed=len(chunked), chunked=set(chunked), swapped=set(swapped))
    names = list(steps[0])
    rng = np.random.default_rng(7)
    with quarry.open(path) as ds:
        ds.build_index()
    with quarry.open_series(path) as series:
        series.query(everything(names)).counts()  # proves each step's index
        for _ in range(12):
            query, _ = box(rng, names, steps[0])
            want = [int(np.count_nonzero(box_mask(query, data))) for data in steps]
            first = series.query(query).counts()
            assert first == want, query
            before = dict(core_calls)
            again = series.query(query)
            assert again.counts() == want, query
            # One core call for the steps with a box, whether read in place
            # from a memory map or copied out of the file; the step too large
            # for one is planned and answered on its own.
            kept = series._kept._held[query]
            scanned = any(b is not None and not b.empty for b in kept.boxes)
            assert core_calls["count_boxes"] - before["count_boxes"] == int(scanned)
            unkept = [k for k, b in enumerate(kept.boxes) if b is None]
            assert unkept == [len(steps) - 1]
            assert core_calls["query_table"] - before["query_table"] == 1
            assert again.count() == sum(want)
            # Rows, when asked, come from each member's own selection.
            member = 3
            np.testing.assert_array_equal(
                again.ids()[member], np.flatnonzero(box_mask(query, steps[member]))
            )


def box_mask(query: str, data: dict[str, np.ndarray]) -> np.ndarray:
    """NumPy's mask of ``query``, an AND of ``name op literal`` terms."""
    mask = np.ones(len(next(iter(data.values()))), dtype=bool)
    ops = {">": np.greater, ">=": np.greater_equal, "<": np.less, "<=": np.less_equal}
    for term in query.split(" && "):
        name, op, literal = term.split()
        with np.errstate(invalid="ignore"):
            mask &= ops[op](data[name].astype(np.float64), float(literal))
    return mask


def test_fill_values_and_empty_ranges_asked_again(tmp_path, core_calls):
    """NetCDF's fill values are missing when a query over its steps is asked
    again as the first time; a range holding nothing makes each step's count 0."""
    rng = np.random.default_rng(5)
    path = str(tmp_path / "filled.nc")
    steps = []
    with netCDF4.Dataset(path, "w") as f:
        for s, n in enumerate([777, 64, 1, 2001]):
            group = f.createGroup(f"Step#{s}")
            group.createDimension("row", n)
            t = rng.integers(-10, 10, n).astype("f4")
            k = rng.integers(-10, 10, n).astype("i2")
            t[rng.random(n) < 0.2], k[rng.random(n) < 0.2] = -999, -32767
            group.createVariable("t", "f4", ("row",), fill_value=-999.0)[:] = t
            group.createVariable("k", "i2", ("row",), fill_value=-32767)[:] = k
            steps.append((t, k))
    with quarry.open(path) as ds:
        ds.build_index()
    with quarry.open_series(path) as series:
        series.query("t > -1000 && k > -40000").counts()  # proves each step's index
        for query, mask in (
            ("t > -1000 && k > -40000", lambda t, k: np.ones(len(t), bool)),
            ("t < 3 && k >= -5", lambda t, k: (t < 3) & (k >= -5)),
            ("t > 3 && t < 2 && k > 0", lambda t, k: np.zeros(len(t), bool)),
        ):
            want = [
                int(np.count_nonzero(mask(t, k) & (t != -999) & (k != -32767))) for t, k in steps
            ]
            assert series.query(query).counts() == want, query
            assert series.query(query).counts() == want, query


def test_an_empty_range_is_counted_with_nothing_scanned(tmp_path, core_calls, monkeypatch):
    path = str(tmp_path / "steps.h5")
    steps = write_steps(path, seed=3)
    with quarry.open(path) as ds:
        ds.build_index()
    with quarry.open_series(path) as series:
        series.query(everything(list(steps[0]))).counts()
        query = "v0 > 3 && v0 < 2 && v3 > 0"
        assert series.query(query).counts() == [0] * len(steps)
        scanned = []
        monkeypatch.setattr(_core, "count_boxes", lambda boxes: scanned.append(boxes) or [])
        assert series.query(query).counts() == [0] * len(steps)
        assert not any(scanned)  # no box handed to the core holds a column


@pytest.mark.parametrize("budget", [0, 10_000, 10**9])
def test_boxes_holding_copied_values_are_kept_within_a_budget(tmp_path, monkeypatch, budget):
    """Boxes whose columns are copies (compressed steps) are kept while they
    hold at most the budget's bytes, the oldest let go first; boxes of
    memory-mapped columns hold none. Every count is NumPy's, kept or not."""
    import quarry.query.boxes

    assert quarry.query.boxes.KEPT_BYTES == 64 << 20  # as the README says
    monkeypatch.setattr(quarry.query.boxes, "KEPT_BYTES", budget)
    mapped, copied = str(tmp_path / "mapped.h5"), str(tmp_path / "copied.h5")
    steps = write_steps(mapped, seed=4)
    assert write_steps(copied, seed=4, chunked=set(range(len(steps)))) is not None
    queries = ["v0 > -3 && v3 < 7", "v1 >= 2 && v2 < 9", "v4 > -5 && v0 <= 1"]
    for path in (mapped, copied):
        with quarry.open(path) as ds:
            ds.build_index()
        with quarry.open_series(path) as series:
            series.query(everything(list(steps[0]))).counts()
            for query in queries * 2:
                want = [int(np.count_nonzero(box_mask(query, data))) for data in steps]
                assert series.query(query).counts() == want, query
            held = series._kept._held
            assert sum(b.nbytes for b in held.values()) <= budget
            if path == mapped:
                assert list(held)[-3:] == queries and {b.nbytes for b in held.values()} == {0}
            elif budget == 0:
                assert not held
            elif budget == 10**9:
                assert list(held)[-3:] == queries


def test_a_rebuilt_index_or_a_closed_series_makes_the_boxes_anew(tmp_path, core_calls):
    path = str(tmp_path / "steps.h5")
    steps = write_steps(path, seed=1)
    names = list(steps[0])
    query = "v0 > -3 && v3 < 7"
    with quarry.open(path) as ds:
        ds.build_index()
    series = quarry.open_series(path)
    series.query(everything(names)).counts()
    want = [int(np.count_nonzero(box_mask(query, data))) for data in steps]
    assert series.query(query).counts() == want
    # The file replaced by one of other values, and indexed again.
    steps = write_steps(str(tmp_path / "new.h5"), seed=2)
    os.replace(tmp_path / "new.h5", path)
    list(series.build_indexes())
    want = [int(np.count_nonzero(box_mask(query, data))) for data in steps]
    before = core_calls["query_table"]
    assert series.query(query).counts() == want
    assert core_calls["query_table"] - before == len(steps)  # planned again
    series.close()
    before = core_calls["query_table"]
    assert series.query(query).counts() == want
    assert core_calls["query_table"] - before == len(steps)
    series.close()


@pytest.mark.parametrize("n_boxes", [0, 1, 31, 32, 33, 100])
def test_the_core_counts_many_boxes_over_views_of_one_array(n_boxes):
    """Boxes over views of one base array (a file's memory map), more than
    the core borrows at once, each counted as NumPy counts it."""
    rng = np.random.default_rng(n_boxes)
    base = rng.normal(size=(n_boxes + 1) * 1000).astype("f4")
    base[rng.random(len(base)) < 0.05] = np.nan
    ints = rng.integers(-50, 50, len(base)).astype("i2")
    boxes, want = [], []
    for b in range(n_boxes):
        n = int(rng.integers(0, 1000))
        start = b * 1000
        x, k = base[start : start + n], ints[start : start + n]
        lo, hi = sorted(rng.normal(size=2).tolist())
        boxes.append(([x, k], [lo, -10], [bool(b % 2), True], [hi, 20], [True, bool(b % 3)]))
        with np.errstate(invalid="ignore"):
            inside_x = (x >= lo if b % 2 else x > lo) & (x <= hi)
        inside_k = (k >= -10) & ((k <= 20) if b % 3 else (k < 20))
        want.append(int(np.count_nonzero(inside_x & inside_k)))
    assert _core.count_boxes(boxes) == want


def test_a_box_the_core_cannot_count_is_an_error():
    x = np.arange(10.0)
    with pytest.raises(ValueError, match="2 columns but 1, 1, 1, 1 bounds"):
        _core.count_boxes([([x, x], [0.0], [True], [1.0], [True])])
    with pytest.raises(ValueError, match="a column holds 4 values, the table 10 rows"):
        _core.count_boxes([([x, x[:4]], [0.0, 0.0], [True] * 2, [1.0, 1.0], [True] * 2)])
    with pytest.raises(ValueError, match="at least one condition"):
        _core.count_boxes([([], [], [], [], [])])


def test_threads_asking_at_once_keep_and_let_go_of_boxes_safely(tmp_path, monkeypatch):
    """Threads of one process (a service's) asking many queries of one open
    series at once, with room kept for two: every count is NumPy's."""
    from concurrent.futures import ThreadPoolExecutor

    import quarry.query.boxes

    monkeypatch.setattr(quarry.query.boxes, "MAX_KEPT_QUERIES", 2)
    path = str(tmp_path / "steps.h5")
    steps = write_steps(path, seed=6)
    with quarry.open(path) as ds:
        ds.build_index()
    queries = [f"v0 > {lo} && v3 < {lo + 9}" for lo in range(-12, 12)]
    wants = {q: [int(np.count_nonzero(box_mask(q, data))) for data in steps] for q in queries}
    with quarry.open_series(path) as series:
        series.query(everything(list(steps[0]))).counts()
        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(lambda q: (q, series.query(q).counts()), queries * 4))
        assert all(counts == wants[q] for q, counts in got)
        assert len(series._kept.queries()) <= 2


def test_the_queries_kept_longest_are_let_go_first(tmp_path, monkeypatch):
    import quarry.query.boxes

    monkeypatch.setattr(quarry.query.boxes, "MAX_KEPT_QUERIES", 2)
    path = str(tmp_path / "steps.h5")
    steps = write_steps(path, seed=8)
    with quarry.open(path) as ds:
        ds.build_index()
    queries = ["v0 > -3 && v3 < 7", "v1 >= 2 && v2 < 9", "v4 > -5 && v0 <= 1"]
    with quarry.open_series(path) as series:
        series.query(everything(list(steps[0]))).counts()
        for query in queries:
            series.query(query).counts()
        assert series._kept.queries() == queries[1:]
        series.query(queries[1]).counts()  # asked again: answered from its boxes
        series.query(queries[0]).counts()  # kept again, in place of the one kept longest
        assert series._kept.queries() == [queries[2], queries[0]]

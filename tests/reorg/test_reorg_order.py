"""The core's clustering (MDBin numbers binned in one pass, a counting or radix sort)
orders every part exactly as NumPy's stable argsort of the MDBin numbers that
:meth:`Axis.assign` gives: the copy the faster path builds is the one the
NumPy path built, rows ascending within a bin, offset tables included."""

from __future__ import annotations

import math
import os
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import quarry
from generators import DTYPES, column, write
from quarry import _core
from quarry.reorg import open_copy
from quarry.reorg.binning import Axis, extent_of, make_axis
from quarry.reorg.build import mdbin_numbers
from quarry.reorg.read import check_copy


def numpy_mdbin(columns: list[np.ndarray], axes: list[Axis]) -> np.ndarray:
    """The row-major MDBin number by NumPy alone (:meth:`Axis.assign`)."""
    number = np.zeros(len(columns[0]), np.int64)
    for axis, values in zip(axes, columns, strict=True):
        number = number * axis.slots + axis.assign(values)
    return number


@st.composite
def tables(draw):
    n_vars = draw(st.integers(1, 4))
    size = draw(st.integers(1, 3000))
    dtypes = [draw(st.sampled_from([*DTYPES, ">f4", ">f8", ">i4"])) for _ in range(n_vars)]
    columns = [column(draw, dt.lstrip("<>"), size).astype(dt) for dt in dtypes]
    if draw(st.booleans()):
        sizes = []
        for values in columns:
            finite = values[np.isfinite(values.astype(np.float64))].astype(np.float64)
            span = float(finite.max() - finite.min()) if finite.size else 0.0
            width = span / draw(st.sampled_from([0.5, 3, 40, 300]))
            ok = math.isfinite(width) and width > 0
            sizes.append(max(width, 1.0) if values.dtype.kind in "iu" or not ok else width)
        binning = {"bin_size": sizes, "bins": None}
    else:
        binning = {"bin_size": None, "bins": draw(st.integers(1, 400))}
    return columns, binning


@given(tables())
def test_core_mdbin_numbers_equal_numpy(table):
    columns, binning = table
    axes = []
    for k, values in enumerate(columns):
        size = binning["bin_size"][k] if binning["bin_size"] else None
        bins = None if size is not None else binning["bins"]
        try:
            axes.append(make_axis(f"/v{k}", values.dtype, extent_of(values), size, bins))
        except quarry.errors.ReorgError:
            return  # too many bins, or too small for the dtype: refused before binning
    np.testing.assert_array_equal(mdbin_numbers(columns, axes), numpy_mdbin(columns, axes))


@given(st.lists(st.integers(0, 2**40), max_size=300), st.integers(1, 70_000))
def test_core_order_is_numpys_stable_argsort(keys, modulus):
    for wide in (np.array(keys, np.uint64), np.array(keys, np.uint64) % np.uint64(modulus)):
        order, bins, starts = _core.stable_order(wide)
        np.testing.assert_array_equal(order, np.argsort(wide, kind="stable"))
        present, first = np.unique(wide[order], return_index=True)
        np.testing.assert_array_equal(bins, present)
        np.testing.assert_array_equal(starts, first)


@given(st.lists(st.sampled_from(["f4", "f8", "i4", "u2"]), min_size=1, max_size=3), st.data())
def test_the_copy_is_the_numpy_ordering(dtypes, draw):
    """Each part of the copy: rows in NumPy's stable order of the MDBin
    numbers, values the source's at those rows, its offset table the bins
    present and where each starts."""
    size = draw.draw(st.integers(1, 2500))
    data = {f"v{k}": column(draw.draw, dt, size) for k, dt in enumerate(dtypes)}
    bins = draw.draw(st.lists(st.integers(1, 300), min_size=len(dtypes), max_size=len(dtypes)))
    part_rows = draw.draw(st.sampled_from([7, 100, 1000, 1 << 22]))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.h5")
        write(path, data, "contiguous")
        with quarry.open(path, jobs=2) as ds:
            ds.reorganize(list(data), bins=bins, part_rows=part_rows)
        assert_numpy_ordering(path, data)


def assert_numpy_ordering(path: str, data: dict[str, np.ndarray]) -> None:
    """Each part of the copy of ``path`` (of ``data``'s variables): rows in
    NumPy's stable order of the MDBin numbers, values the source's at those
    rows, its offset table the bins present and where each starts."""
    member = open_copy(path).members[0]
    axes = list(member.entry.axes)
    columns = [v.reshape(-1) for v in data.values()]
    rows = np.asarray(member.column("rows"))
    layout = member._layout
    for part in member.entry.parts:
        span = slice(part.first, part.first + part.rows)
        number = numpy_mdbin([c[span] for c in columns], axes)
        order = np.argsort(number, kind="stable")
        np.testing.assert_array_equal(rows[span], order + part.first)
        for axis, values in zip(axes, columns, strict=True):
            got = np.asarray(member.column(axis.path))[span]
            np.testing.assert_array_equal(got, values[span][order])
        first, count = part.table
        present, starts = np.unique(number[order], return_index=True)
        np.testing.assert_array_equal(layout.bins[first : first + count], present)
        np.testing.assert_array_equal(layout.starts[first : first + count], starts)


@pytest.mark.parametrize("bins", [[3, 5], [2000, 2000]])
def test_narrow_and_wide_key_ranges(tmp_path, bins):
    """A part whose MDBin numbers span few values is ordered by a counting
    sort, one whose numbers span many more values than it has rows by a
    radix sort: both give NumPy's stable order."""
    rng = np.random.default_rng(7)
    data = {"a": rng.normal(size=5000).astype("f4"), "b": rng.random(5000)}
    data["b"][::97] = np.nan
    path = str(tmp_path / "t.h5")
    write(path, data, "contiguous")
    with quarry.open(path, jobs=2) as ds:
        ds.reorganize(list(data), bins=bins, part_rows=1500)
    assert_numpy_ordering(path, data)


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("bins", [[3, 5, 2, 4], [300, 300, 1, 300]])
def test_parts_of_several_spans_written_a_span_at_a_time(tmp_path, jobs, bins):
    """Parts longer than the span the core writes at a time
    (``SPAN_ROWS``), neither a multiple of it, in columns of every width,
    counted and radix sorted: NumPy's stable order, CRCs that verify, and a
    rebuild that replaces the copy (the old one freed after the rename)."""
    span = 1 << 16
    n = 3 * span + 4321
    rng = np.random.default_rng(jobs)
    data = {
        "a": rng.normal(size=n).astype("f4"),
        "b": rng.random(n),
        "c": rng.integers(0, 200, n).astype("u1"),
        "d": rng.integers(-(2**15), 2**15, n).astype("i2"),
    }
    data["b"][::1001] = np.nan
    path = str(tmp_path / "t.h5")
    write(path, data, "contiguous")
    for part_rows in (span + 777, 1 << 22):
        with quarry.open(path, jobs=jobs) as ds:
            ds.reorganize(list(data), bins=bins, part_rows=part_rows)
        assert_numpy_ordering(path, data)
        assert check_copy(path, path + ".qmd").ok
        assert open_copy(path).manifest.part_rows == part_rows
    assert [f for f in os.listdir(tmp_path) if f.endswith(".tmp")] == []


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([*DTYPES, ">f8", ">i4"]), st.integers(0, 3 * (1 << 16) + 5), st.data())
def test_extents_reduced_a_slice_at_a_time_equal_numpy(dtype, size, draw):
    """Pass 1 reduces long parts a slice at a time: the same least and
    greatest value, NaN or not, least and greatest finite value as NumPy's
    reductions over the whole part."""
    values = column(draw.draw, dtype.lstrip("<>"), size).astype(dtype)
    got = extent_of(values)
    if values.dtype.kind == "f":
        real = values[~np.isnan(values)]
        assert got.has_nan == (real.size < size)
        finite = real[np.isfinite(real)]
        if not real.size:
            assert (got.low, got.high) == (None, None)
            return
        assert (got.finite_low, got.finite_high) == (
            (finite.min(), finite.max()) if finite.size else (0.0, 0.0)
        )
    else:
        real = values
    if real.size:
        assert (got.low, got.high) == (real.min(), real.max())
    else:
        assert (got.low, got.high, got.has_nan) == (None, None, False)

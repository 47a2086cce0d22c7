"""Subarrays in conditions against NumPy slicing: views of different
variables with one shape form one table, position by position."""

from __future__ import annotations

import os
import tempfile

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import quarry
from generators import DTYPES, column, conditions, write
from oracle import oracle_ids


def subscript_text(parts: list[object]) -> str:
    def one(p: object) -> str:
        if isinstance(p, int):
            return str(p)
        start, stop, step = p  # type: ignore[misc]
        text = f"{'' if start is None else start}:{'' if stop is None else stop}"
        return text + ("" if step is None else f":{step}")

    return "[" + ", ".join(one(p) for p in parts) + "]"


@st.composite
def view_of_length(draw, length: int | None):
    """(axis length, subscript) giving ``length`` elements (None: an index)."""
    if length is None:
        n = draw(st.integers(1, 6))
        i = draw(st.integers(-n, n - 1))
        return n, i
    step = draw(st.sampled_from([None, 1, 2, 3]))
    s = step or 1
    start = draw(st.integers(0, 4))
    n = start + (length - 1) * s + 1 + draw(st.integers(0, 3)) if length else start + 2
    stop = start + length * s if length else start
    # write the same view in the forms NumPy accepts: negative or omitted ends
    form = draw(st.sampled_from(["plain", "negative", "omit"]))
    if form == "negative" and start > 0:
        return n, (start - n, (stop - n) if stop < n else None, step)
    if form == "omit" and start == 0 and stop >= n:
        return n, (None, None, step)
    return n, (start, min(stop, n), step)


@st.composite
def scenarios(draw):
    rank = draw(st.integers(1, 3))
    kept = [draw(st.booleans()) or axis == 0 for axis in range(rank)]
    lengths = [draw(st.integers(0, 7)) if k else None for k in kept]
    views = {}
    data = {}
    for name in ("a", "b"):
        axes = [draw(view_of_length(n)) for n in lengths]
        shape = tuple(n for n, _ in axes)
        dtype = draw(st.sampled_from(DTYPES))
        data[name] = column(draw, dtype, int(np.prod(shape))).reshape(shape)
        views[name] = [sub for _, sub in axes]
    indexed = draw(st.booleans())
    block_len = draw(st.sampled_from([1, 3, 8, 1000]))
    parts = {
        n.upper(): data[n][tuple(slice(*s) if isinstance(s, tuple) else s for s in views[n])]
        for n in data
    }
    query = draw(conditions(parts))
    return data, views, parts, indexed, block_len, query


@given(scenarios())
def test_subarray_queries_match_numpy_slicing(scenario):
    data, views, parts, indexed, block_len, query = scenario
    text = query.replace("A", "a" + subscript_text(views["a"])).replace(
        "B", "b" + subscript_text(views["b"])
    )
    expect = oracle_ids(query, parts)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.h5")
        write(path, data, "chunked")
        with quarry.open(path) as ds:
            if indexed:
                ds.build_index(bins=draw_bins(block_len), block_len=block_len)
            sel = ds.query(text)
            assert sel.shape == parts["A"].shape, text
            np.testing.assert_array_equal(sel.ids(), expect, err_msg=text)
            assert sel.count() == len(expect)
            a_view = "a" + subscript_text(views["a"])
            np.testing.assert_array_equal(
                sel.values(a_view), parts["A"].reshape(-1)[expect], err_msg=text
            )
            # absolute coordinates in a's own array
            base = np.array(np.unravel_index(np.arange(data["a"].size), data["a"].shape)).T.reshape(
                *data["a"].shape, -1
            )
            index = tuple(slice(*s) if isinstance(s, tuple) else s for s in views["a"])
            want = base[index].reshape(-1, data["a"].ndim)[expect]
            np.testing.assert_array_equal(sel.coords_of(a_view), want, err_msg=text)


def draw_bins(block_len: int) -> int:
    return 3 if block_len < 8 else 1024


def test_bare_name_means_the_queried_part_and_errors_name_shapes(tmp_path):
    path = str(tmp_path / "m.h5")
    x = np.arange(24.0).reshape(4, 6)
    write(path, {"x": x, "y": -x}, "contiguous")
    with quarry.open(path) as ds:
        sel = ds.query("x[1:3, ::2] > 8")
        assert sel.values("x").tolist() == [10.0, 12.0, 14.0, 16.0]
        assert sel.coords_of("x").tolist() == [[1, 4], [2, 0], [2, 2], [2, 4]]
        assert sel.coords().tolist() == [[0, 2], [1, 0], [1, 1], [1, 2]]
        assert sel.values("y[1:3, ::2]").tolist() == [-10.0, -12.0, -14.0, -16.0]
        try:
            ds.query("x[0:2] > 1 && y > 1")
        except quarry.ShapeMismatchError as exc:
            assert "/group/x[0:2, 0:6] (2, 6)" in str(exc) and "/group/y (4, 6)" in str(exc)
        else:
            raise AssertionError("shapes differ")
        for bad, caret in (("x[9] > 1", 0), ("x[::-1] > 1", 0), ("x[1.5] > 1", 2)):
            try:
                ds.query(bad)
            except quarry.QuerySyntaxError as exc:
                assert exc.position == caret, bad
            else:
                raise AssertionError(bad)

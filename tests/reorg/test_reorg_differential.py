"""Box queries answered from a reorganised copy equal the NumPy oracle's, for
random data of every dtype (NaN, infinities, integer extremes), sizes that do
not divide the parts, any number of threads, and random boxes: empty, whole,
degenerate (``==``), one-sided, and on values present in the data."""

from __future__ import annotations

import itertools
import math
import os
import tempfile

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import quarry
from generators import DTYPES, column, literal, shapes, write
from oracle import oracle_ids
from quarry.expr.keys import key_kind
from quarry.expr.plan import Interval, everything, float_interval, int_interval
from quarry.reorg import open_copy

OPS = ["<", "<=", ">", ">=", "=="]


def number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


def interval(values: np.ndarray, op: str, text: str) -> Interval | None:
    kind = key_kind(values.dtype)
    lit = number(text)
    if kind == "f64":
        return float_interval(op, lit)
    return int_interval(op, lit, kind)


@st.composite
def cases(draw):
    n_vars = draw(st.integers(1, 3))
    shape = draw(shapes())
    size = int(np.prod(shape))
    names = ["a", "b", "c"][:n_vars]
    data = {n: column(draw, draw(st.sampled_from(DTYPES)), size).reshape(shape) for n in names}
    if draw(st.booleans()):
        binning = {"bins": draw(st.lists(st.integers(1, 7), min_size=n_vars, max_size=n_vars))}
    else:
        sizes = []
        for values in data.values():
            flat = values.reshape(-1).astype(np.float64)
            finite = flat[np.isfinite(flat)]
            span = float(finite.max() - finite.min()) if finite.size else 0.0
            pieces = draw(st.sampled_from([0.5, 1, 2.5, 7]))
            width = span / pieces if math.isfinite(span) and span > 0 else 1.0
            sizes.append(max(width, 1.0) if values.dtype.kind in "iu" else max(width, 1e-300))
        binning = {"bin_size": sizes}
    part_rows = draw(st.sampled_from([1, 3, 64, 100, 1000, 1 << 22]))
    jobs = draw(st.sampled_from([1, 3]))
    return data, binning, part_rows, jobs


@st.composite
def boxes(draw, data):
    conditions = []
    for name in draw(st.lists(st.sampled_from(list(data)), max_size=4)):
        op = draw(st.sampled_from(OPS))
        text = literal(draw, data[name])
        if text.lower() != "nan":  # a NaN literal selects nothing: no box to give
            conditions.append((name, op, text))
    return conditions


@given(cases(), st.data())
def test_box_answers_equal_numpy(case, draw):
    data, binning, part_rows, jobs = case
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.h5")
        write(path, data, draw.draw(st.sampled_from(["contiguous", "chunked"])))
        with quarry.open(path, jobs=jobs) as ds:
            ds.reorganize(list(data), part_rows=part_rows, **binning)
        member = open_copy(path).members[0]
        flat = {n: v.reshape(-1) for n, v in data.items()}
        n_rows = len(next(iter(flat.values())))
        _check_clustering(member, flat, n_rows)
        for _ in range(3):
            conditions = draw.draw(boxes(data))
            box: dict[str, Interval] = {}
            for name, op, text in conditions:
                iv = interval(flat[name], op, text)
                assert iv is not None
                key = f"/group/{name}"
                box[key] = box.get(key, everything(iv.kind)).intersect(iv)
            answer = member.select(box, [f"/group/{n}" for n in data])
            if conditions:
                query = " && ".join(f"{n} {op} {text}" for n, op, text in conditions)
                expected = oracle_ids(query, flat)
            else:
                expected = np.arange(n_rows)
            np.testing.assert_array_equal(answer.ids, expected)
            for name, values in flat.items():
                got = answer.values[f"/group/{name}"]
                assert got.dtype == values.dtype.newbyteorder("=")
                np.testing.assert_array_equal(got, values[expected])
            runs = member.runs(box)
            assert runs.whole_rows <= len(expected) <= runs.whole_rows + runs.boundary_rows


def _check_clustering(member, flat, n_rows):
    """The copy holds every row once, each part ordered by MDBin number and
    within a bin by ascending row; its values are the source's at its rows."""
    rows = np.asarray(member.column("rows"))
    np.testing.assert_array_equal(np.sort(rows), np.arange(n_rows))
    for name, values in flat.items():
        np.testing.assert_array_equal(np.asarray(member.column(f"/group/{name}")), values[rows])
    starts = member._layout.starts
    for part in member.entry.parts:
        first, count = part.table
        own = rows[part.first : part.first + part.rows]
        assert sorted(own.tolist()) == list(range(part.first, part.first + part.rows))
        bounds = [*starts[first : first + count].tolist(), part.rows]
        for a, b in itertools.pairwise(bounds):
            assert np.all(np.diff(own[a:b]) > 0)

"""Queries with aggregates (``r > 4*rms(r)``) are planned once per shape over a
series' members (quarry.query.planner): each member binds the plan's names to
its own variables, computes its own aggregates and re-derives the bounds from
them. Its plan and aggregates are those planning the member from scratch
gives, bit for bit, and its rows those NumPy finds with the member's
aggregate values written in, in every dtype, with missing values, in steps
of other sizes, dtypes or variables where nothing may be shared."""

from __future__ import annotations

import math
import os
import tempfile

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import quarry
from generators import DTYPES, column
from oracle import oracle_ids
from quarry.errors import SeriesMemberError
from quarry.expr import plan as plan_module
from quarry.query import planner

#: Shapes of queries with aggregates: ``{a}``, ``{b}`` are names, ``{k}``
#: numbers, and each aggregate is in brackets (for writing its value in).
SHAPES = [
    "{a} > {k}*[rms({a})]",
    "[mean({a})] + {k} <= {a}",
    "{a} > [mean({a})] && {b} < [std({b})]",
    "{a} >= [min({b})] || !({a} < [max({a})] - {k})",
    "[count({a})] > {k} && {a} != [sum({b})] / {k}",
    "{a} < [mean({a} * 2)] + {k}",
    "{a} > [mean({a} - [mean({a})])]",
    "[mean({a})] > {k} && {b} < {k}",
    "-{k} < {a} - 0 || {a} <= -[std({a})]",
    "sqrt({a}) > [mean({a})]",
    "{k} * {k} < [max({a})] && {a} == [min({a})]",
]
NAMES = "abc"


def numbers(draw) -> str:
    value = draw(
        st.one_of(
            st.sampled_from(["0.5", "4", "2", "0", "1e30", "-3", "0.1", "7"]),
            st.floats(-100, 100, allow_nan=False).map(repr),
        )
    )
    return f"({value})" if value.startswith("-") else value


def shape_of(draw) -> str:
    """A query with its aggregates in brackets (see :data:`SHAPES`)."""
    shape = draw(st.sampled_from(SHAPES))
    a, b = draw(st.sampled_from(NAMES)), draw(st.sampled_from(NAMES))
    while "{k}" in shape:
        shape = shape.replace("{k}", numbers(draw), 1)
    return shape.format(a=a, b=b)


def query_text(shape: str) -> str:
    return shape.replace("[", "").replace("]", "")


def written_out(shape: str, aggregates: list) -> str:
    """The query with each aggregate replaced by the value Quarry computed for
    it, as NumPy's oracle reads numbers. Quarry computes them innermost
    first, left to right: in the order their brackets close."""
    spans, opened = [], []
    for i, char in enumerate(shape):
        if char == "[":
            opened.append(i)
        elif char == "]":
            spans.append((opened.pop(), i))
    assert len(spans) == len(aggregates), (shape, aggregates)
    values = dict(zip(spans, (a.value for a in aggregates), strict=True))
    outermost = [s for s in spans if not any(o[0] < s[0] and s[1] < o[1] for o in spans)]
    text = shape
    for start, stop in sorted(outermost, reverse=True):
        text = text[:start] + _literal(values[(start, stop)]) + text[stop + 1 :]
    return text


def _literal(value: float | int) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    text = repr(value)
    return f"({text})" if text.startswith("-") else text


def write_steps(path: str, steps: list[dict[str, np.ndarray]]) -> None:
    with h5py.File(path, "w") as f:
        for s, columns in enumerate(steps):
            for name, values in columns.items():
                f[f"Step#{s}/{name}"] = values


def _step_columns(draw, dtypes: tuple[str, ...], rows: int) -> dict[str, np.ndarray]:
    return {n: column(draw, dt, rows) for n, dt in zip(NAMES, dtypes, strict=True)}


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_aggregate_plans_shared_by_members_equal_plans_made_alone_and_numpy(data):
    draw = data.draw
    first = tuple(draw(st.sampled_from(DTYPES)) for _ in NAMES)
    # Steps 0-2 alike (their plans are shared), then one of other dtypes and
    # one of another size: plans made there must not come from the others.
    other = tuple(draw(st.sampled_from(DTYPES)) for _ in NAMES)
    plan = [(first, 257), (first, 257), (first, 257), (other, 257), (first, 130)]
    steps = [_step_columns(draw, dtypes, rows) for dtypes, rows in plan]
    shapes = [shape_of(draw) for _ in range(3)]
    indexed = draw(st.booleans())
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "steps.h5")
        write_steps(path, steps)
        if indexed:
            with quarry.open(path) as ds:
                ds.build_index(block_len=64, bins=16)
        planner._TEMPLATES.clear()
        with quarry.open_series(path) as series, quarry.open(path) as ds:
            shared = [series.query(query_text(shape)) for shape in shapes]
            counts = [answer.counts() for answer in shared]
            for shape, answer, got in zip(shapes, shared, counts, strict=True):
                q = query_text(shape)
                for s, sel in enumerate(answer.selections):
                    planner._TEMPLATES.clear()  # this member alone, nothing shared
                    alone = ds.query_table(q, f"Step#{s}")
                    # By repr: bounds bit for bit (-0.0 is not 0.0), NaN as NaN.
                    assert repr(sel.plan) == repr(alone.plan), (q, s)
                    assert [a.to_dict() for a in sel.aggregates] == [
                        a.to_dict() for a in alone.aggregates
                    ], (q, s)
                    expected = oracle_ids(written_out(shape, sel.aggregates), steps[s])
                    assert np.array_equal(sel.ids(), expected), (q, s)
                    assert got[s] == len(expected), (q, s)


def test_the_halo_is_planned_once_for_every_step(tmp_path, monkeypatch):
    rng = np.random.default_rng(7)
    steps = [{"r": np.abs(rng.normal(0, 1 + s, 300))} for s in range(6)]
    path = str(tmp_path / "beam.h5")
    write_steps(path, steps)
    with quarry.open(path) as ds:
        ds.build_index(block_len=64, bins=16)
    compiled = []
    real = plan_module.compile_plan

    def counting(*args, **kwargs):
        compiled.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(planner, "compile_plan", counting)
    planner._TEMPLATES.clear()
    with quarry.open_series(path) as series:
        answer = series.query("r > 4*rms(r)")
        counts = answer.counts()
        aggregates = [sel.aggregates for sel in answer.selections]
    assert len(compiled) == 1  # planned in the first step, re-derived in the others
    for s, (r,) in enumerate(step.values() for step in steps):
        rms = aggregates[s][0]
        assert rms.expr == f"rms(/Step#{s}/r)" and rms.source == "index"
        assert rms.value == pytest.approx(np.sqrt(np.mean(r * r)), rel=1e-12)
        assert counts[s] == int(np.count_nonzero(r > 4 * rms.value))
    # Every step's bound is the one the full planner folds: 4 * rms, in float64.
    for s, sel in enumerate(answer.selections):
        assert sel.plan.interval.lo == 4.0 * aggregates[s][0].value


def test_a_step_missing_a_variable_is_named_and_the_others_answer(tmp_path):
    rng = np.random.default_rng(3)
    steps = [{"t": rng.normal(0, 1, 100), "u": rng.normal(0, 1, 100)} for _ in range(3)]
    del steps[1]["u"]
    path = str(tmp_path / "gap.h5")
    write_steps(path, steps)
    planner._TEMPLATES.clear()
    with quarry.open_series(path) as series:
        t = [step["t"] for step in steps]
        counts = series.query("t > mean(t) + 0.5").counts()
        assert counts == [int(np.count_nonzero(x > np.mean(x) + 0.5)) for x in t]
        with pytest.raises(SeriesMemberError, match="Step#1"):
            series.query("t > mean(u)")

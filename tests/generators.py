"""Random data for the property tests: shapes, columns of every dtype, files."""

from __future__ import annotations

import os
import subprocess
import sys

import h5py
import numpy as np
import pytest
from hypothesis import strategies as st

#: The standard data sets' generator, beside the repository (absent in a user's clone).
MAKE_DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "bench", "make_data.py")
needs_make_data = pytest.mark.skipif(
    not os.path.exists(MAKE_DATA),
    reason="tests on the team's standard data sets (VPIC-like particles, an IMPACT-T beam, "
    "a NetCDF climate file) are skipped: their generator, ../shared/bench/make_data.py "
    "beside the repository, is not part of a clone",
)


def make_data(*args: str) -> None:
    """Run make_data.py with ``args`` (a data set, its path, its options)."""
    subprocess.run([sys.executable, MAKE_DATA, *args], check=True, capture_output=True)


DTYPES = ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8"]
NAMES = ["a", "b", "c"]


@st.composite
def shapes(draw):
    rank = draw(st.integers(1, 4))
    dims = draw(st.lists(st.integers(0 if rank == 1 else 1, 9), min_size=rank, max_size=rank))
    if rank == 1:
        dims = [draw(st.sampled_from([0, 1, 2, 7, 63, 64, 65, 257, 1000, 2049]))]
    return tuple(dims)


def column(draw, dtype: str, size: int) -> np.ndarray:
    dt = np.dtype(dtype)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dt.kind == "f":
        style = draw(st.sampled_from(["normal", "few", "wide"]))
        if style == "normal":
            v = rng.normal(0, 10, size)
        elif style == "few":
            v = rng.choice([-1.5, 0.0, 0.1, 2.0, 1e30], size)
        else:
            v = rng.standard_cauchy(size) * 1e3
        v = v.astype(dt)
        if size and draw(st.booleans()):
            v[rng.random(size) < 0.1] = np.nan
        if size and draw(st.booleans()):
            v[rng.integers(0, size)] = np.inf
            v[rng.integers(0, size)] = -np.inf
        return v
    info = np.iinfo(dt)
    style = draw(st.sampled_from(["small", "full", "extremes"]))
    if style == "small":
        lo = max(info.min, -20)
        return rng.integers(lo, lo + 40, size, endpoint=False).astype(dt)
    if style == "full":
        return rng.integers(info.min, info.max, size, dtype=dt, endpoint=True)
    return rng.choice(np.array([info.min, info.min + 1, 0, info.max - 1, info.max], dtype=dt), size)


def write(path: str, data: dict[str, np.ndarray], storage: str) -> None:
    with h5py.File(path, "w") as f:
        for name, values in data.items():
            kw: dict = {}
            if storage != "contiguous" and values.size:
                kw["chunks"] = tuple(max(1, s // 2) for s in values.shape)
                if storage == "gzip":
                    kw["compression"] = "gzip"
            f.create_dataset(f"group/{name}", data=values, **kw)


def literal(draw, values: np.ndarray) -> str:
    finite = values[np.isfinite(values.astype(np.float64))] if values.size else values
    choice = draw(st.sampled_from(["value", "beside", "float", "int", "special"]))
    if choice in ("value", "beside") and finite.size:
        v = finite.flat[draw(st.integers(0, finite.size - 1))]
        if values.dtype.kind != "f":
            return str(int(v))
        if choice == "beside":  # a float64 step off a stored value (of any float width)
            return repr(float(np.nextafter(float(v), draw(st.sampled_from([-np.inf, np.inf])))))
        return repr(float(v))
    if choice == "int" or (choice == "value" and values.dtype.kind in "iu"):
        return str(draw(st.integers(-(2**63), 2**64 - 1)))
    if choice == "special":
        return draw(st.sampled_from(["inf", "-inf", "nan", "0", "0.1", "-0.0", "1e308", "2.5"]))
    return repr(draw(st.floats(allow_nan=False, allow_infinity=False, width=64)))


@st.composite
def conditions(draw, data: dict[str, np.ndarray], depth: int = 0):
    kind = draw(st.sampled_from(["cmp"] * 4 + ["chain", "arith"] + ["bool"] * (depth < 3) * 3))
    name = draw(st.sampled_from(list(data)))
    op = draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
    if kind == "cmp":
        lit = literal(draw, data[name])
        if lit.startswith("-"):
            lit = f"({lit})" if draw(st.booleans()) else lit
        return f"{name} {op} {lit}" if draw(st.booleans()) else f"{lit} {op} {name}"
    if kind == "chain":
        lo, hi = sorted(
            [literal(draw, data[name]), literal(draw, data[name])],
            key=lambda s: float(s.strip("()")) if "nan" not in s else 0,
        )
        op2 = draw(st.sampled_from(["<", "<="]))
        op1 = draw(st.sampled_from(["<", "<="]))
        return f"{lo} {op1} {name} {op2} {hi}"
    if kind == "arith":
        other = draw(st.sampled_from(list(data)))
        expr = draw(
            st.sampled_from(
                [
                    f"{name}*{name} + {other}",
                    f"abs({name} - {other})",
                    f"{name} / 3",
                    f"max({name}, {other})",
                    f"sqrt(abs({name}))",
                    f"{name}",
                    f"-{name}**2",
                ]
            )
        )
        return f"{expr} {op} {literal(draw, data[name])}"
    joiner = draw(st.sampled_from(["&&", "||", "and", "or"]))
    parts = draw(st.lists(conditions(data, depth + 1), min_size=2, max_size=3))
    text = f" {joiner} ".join(f"({p})" for p in parts)
    if draw(st.booleans()):
        text = f"!({text})" if draw(st.booleans()) else f"not ({text})"
    return text

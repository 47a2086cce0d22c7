"""Two variables compared as they are (``a == b``, ``n > x``) compare their
stored values exactly, whatever their dtypes: against an exact oracle
(Python integers and ``Fraction``), on random columns of every dtype holding
values float64 cannot tell apart (near 2**53, 2**63, 2**64), NaN and
infinities, alone and under an AND, with and without an index. Through
float64 (as arithmetic is), ``a == b`` matched int64 values 1 apart."""

from __future__ import annotations

import itertools
import math
import operator
from fractions import Fraction

import h5py
import numpy as np
import pytest

import quarry

DTYPES = ["i1", "u1", "i2", "u4", "i8", ">i8", "u8", "f4", "f8", ">f8"]
OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
OPS |= {"==": operator.eq, "!=": operator.ne}
N = 1037  # not a multiple of the block length


def column(rng: np.random.Generator, dtype: str) -> np.ndarray:
    kind = np.dtype(dtype)
    if kind.kind == "f":
        pool = [2.0**53, 2.0**53 + 2, 2.0**63, -(2.0**63), 2.0**64, 0.5, -0.5, 0.0, 5e-324]
        pool += [np.nan, np.inf, -np.inf, 7.0, 2.0**53 - 1]
        if kind.itemsize == 4:
            pool = [float(np.float32(v)) for v in pool]
        values = rng.choice(np.array(pool, dtype=kind), N)
        return np.where(rng.random(N) < 0.5, rng.normal(0, 1e3, N).round(), values).astype(kind)
    info = np.iinfo(kind)
    near = [info.min, info.max, info.max - 1, 0, 7, 5]
    near += [v for v in (2**53 - 1, 2**53, 2**53 + 1, 2**63 - 2) if info.min <= v <= info.max]
    native = kind.newbyteorder("=")
    picked = rng.choice(np.array(near, dtype=native), N)
    small = rng.integers(max(info.min, -1000), min(info.max, 1000), N, endpoint=True)
    return np.where(rng.random(N) < 0.5, small.astype(native), picked).astype(kind)


def exact(value: object) -> Fraction | None:
    """The stored value as an exact number (None: NaN; infinities as ±2**2000)."""
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return Fraction(2**2000 if value > 0 else -(2**2000))
    return Fraction(value)


@pytest.mark.parametrize("indexed", [False, True])
def test_two_variables_compare_their_stored_values_exactly(tmp_path, indexed):
    rng = np.random.default_rng(7 + indexed)
    path = str(tmp_path / "pairs.h5")
    columns = {f"v{k}": column(rng, dtype) for k, dtype in enumerate(DTYPES)}
    with h5py.File(path, "w") as f:
        for name, values in columns.items():
            f[name] = values
    as_exact = {name: [exact(v) for v in values.tolist()] for name, values in columns.items()}
    gate = rng.random(N) < 0.7
    with h5py.File(path, "a") as f:
        f["gate"] = gate.astype("u1")
    if indexed:
        with quarry.open(path) as ds:
            ds.build_index(block_len=128)
    pairs = list(itertools.permutations(columns, 2))
    checked = 0
    with quarry.open(path) as ds:
        for a, b in [pairs[i] for i in rng.choice(len(pairs), 30, replace=False)]:
            for op, holds in OPS.items():
                want = [
                    i
                    for i, (x, y) in enumerate(zip(as_exact[a], as_exact[b], strict=True))
                    if x is not None and y is not None and holds(x, y)
                ]
                assert ds.query(f"{a} {op} {b}").ids().tolist() == want, (a, op, b)
                under = [i for i in want if gate[i]]  # the scan within a domain
                assert ds.query(f"gate == 1 && {a} {op} {b}").ids().tolist() == under
                checked += 2
    assert checked == 30 * 6 * 2

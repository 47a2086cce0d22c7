"""A comparison of ``stored * factor`` carried back to the stored values
(``si=True``) selects exactly what NumPy's float64 product selects."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from quarry.expr.plan import Const, OrNode, RangeLeaf
from quarry.expr.scaled import scaled_range_leaf
from quarry.formats.base import VariableInfo

OPS = {
    ">": np.greater,
    ">=": np.greater_equal,
    "<": np.less,
    "<=": np.less_equal,
    "==": np.equal,
    "!=": np.not_equal,
}
DTYPES = ("f4", "f8", "i1", "i4", "i8", "u8")


def _mask(node, stored):
    if isinstance(node, RangeLeaf):
        present = ~np.isnan(stored) if stored.dtype.kind == "f" else np.ones(len(stored), bool)
        return node.interval.mask(stored) & present
    assert isinstance(node, OrNode) and not isinstance(node, Const)
    return np.logical_or.reduce([_mask(item, stored) for item in node.items])


@given(
    dtype=st.sampled_from(DTYPES),
    seed=st.integers(0, 2**32 - 1),
    factor=st.one_of(
        st.sampled_from([1e-6, 2.5e-3, 1.0, -3.0, 1e300, 5e-324, 0.1]),
        st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != 0),
    ),
    op=st.sampled_from(list(OPS)),
    pick=st.integers(0, 2),
)
def test_scaled_ranges_match_numpy(dtype, seed, factor, op, pick):
    rng = np.random.default_rng(seed)
    if dtype[0] == "f":
        stored = rng.normal(0, 10.0 ** rng.integers(-5, 30), 41).astype(dtype)
        stored[rng.random(41) < 0.1] = np.nan
        stored[0] = np.inf
    else:
        info = np.iinfo(dtype)
        stored = rng.integers(info.min, info.max, 41, dtype=dtype, endpoint=True)
    with np.errstate(all="ignore"):
        products = stored.astype(np.float64) * factor
    finite = products[np.isfinite(products)]
    literal = float(rng.choice(finite)) if len(finite) else 0.0
    with np.errstate(over="ignore"):  # the next float after the greatest is inf
        literal = [
            literal,
            float(np.nextafter(literal, np.inf)),
            float(np.nextafter(literal, -np.inf)),
        ][pick]
    var = VariableInfo("/x", stored.shape, stored.dtype)
    got = _mask(scaled_range_leaf(var, op, literal, factor), stored)
    with np.errstate(invalid="ignore"):
        expected = OPS[op](products, literal) & ~np.isnan(products)
    np.testing.assert_array_equal(got, expected)

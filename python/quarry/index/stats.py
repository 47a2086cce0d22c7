"""Whole-variable statistics from the per-block statistics an index keeps.

Blocks store count, sum, M2 (sum of squared deviations from the block's
mean), min and max of their non-missing values; blocks combine with Chan's
parallel formulas, so mean and standard deviation come without reading data
and without the cancellation of a raw sum of squares.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from quarry.records import as_dict, record

if TYPE_CHECKING:
    from quarry import _core


@record
class VariableStats:
    count: int
    """Non-missing values."""
    missing: int
    min: float | int | None
    max: float | int | None
    mean: float | None
    std: float | None
    """Population standard deviation (ddof=0)."""
    sum: float = 0.0
    """Sum of the non-missing values, in float64."""

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)


def combine(blocks: list[tuple[int, float, float, Any, Any]], n_rows: int) -> VariableStats:
    """Combine per-block ``(count, sum, m2, min, max)``.

    Examples
    --------
    >>> s = combine([(2, 3.0, 0.5, 1.0, 2.0), (2, 7.0, 0.5, 3.0, 4.0)], n_rows=5)
    >>> s.count, s.missing, s.mean, round(s.std**2, 12), s.min, s.max, s.sum
    (4, 1, 2.5, 1.25, 1.0, 4.0, 10.0)
    """
    n, mean, m2, whole = 0, 0.0, 0.0, 0.0
    lo: Any = None
    hi: Any = None
    for count, total, block_m2, block_min, block_max in blocks:
        if count == 0:
            continue
        block_mean = total / count
        delta = block_mean - mean
        merged = n + count
        mean += delta * count / merged
        m2 += block_m2 + delta * delta * n * count / merged
        n = merged
        whole += total
        lo = block_min if lo is None else min(lo, block_min)
        hi = block_max if hi is None else max(hi, block_max)
    if n == 0:
        return VariableStats(0, n_rows, None, None, None, None)
    if not math.isfinite(whole):
        # An infinite value: Chan's update would turn inf - inf into NaN where
        # the mean is +-inf (or NaN for both signs), as NumPy has it.
        mean, m2 = whole / n, math.nan
    std = math.sqrt(m2 / n) if m2 >= 0 else math.nan
    return VariableStats(n, n_rows - n, lo, hi, mean, std, whole)


def column_stats(column: _core.Column) -> VariableStats:
    """Statistics of an indexed variable, from its block headers alone."""
    return combine(column.stats(), column.n_rows)

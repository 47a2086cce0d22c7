"""Aggregates inside conditions: ``mean(x)``, ``std(x)``, ``rms(x)``,
``min(x)``, ``max(x)``, ``sum(x)`` and ``count(x)`` over a whole variable or
an expression of variables, missing values (and NaN results) left out.

A plain indexed variable is answered from its index's block statistics
(count, sum, M2, min and max per block, combined with Chan's formulas)
without reading data. Anything else takes one pass over the values, span by
span, through the same per-span statistics and the same combination, so the
two paths agree up to the float64 rounding of sums. ``std`` is the
population standard deviation (ddof=0); ``rms`` is ``sqrt(mean(v**2))``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from quarry import _core
from quarry.errors import ShapeMismatchError
from quarry.expr.ast import Arith, Var, to_text, variables
from quarry.expr.postfix import postfix
from quarry.index.stats import column_stats
from quarry.records import record

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from quarry.formats.base import Driver, VariableInfo
    from quarry.index.stats import VariableStats
    from quarry.index.store import IndexStore

Number = int | float

#: Rows read per step of a one-pass aggregate.
SPAN = 1 << 22


@record
class AggregateValue:
    """One aggregate a query used, and whether the index or the data gave it."""

    expr: str
    value: Number
    source: str
    """``"index"`` (block statistics, no data read) or ``"data"`` (one pass)."""

    def to_dict(self) -> dict[str, Any]:
        from quarry.outputs.json_text import json_number

        # JSON has no NaN or inf: null and "inf", as every --json prints them.
        return {"expr": self.expr, "value": json_number(self.value), "from": self.source}


class Aggregator:
    """Computes the aggregates of one query against one file and its index.

    Examples
    --------
    >>> import numpy as np
    >>> import h5py, tempfile, os
    >>> from quarry.formats.hdf5 import HDF5Driver
    >>> from quarry.expr.ast import Var
    >>> path = os.path.join(tempfile.mkdtemp(), "a.h5")
    >>> with h5py.File(path, "w") as f:
    ...     _ = f.create_dataset("x", data=np.array([1.0, 2.0, np.nan, 6.0]))
    >>> drv = HDF5Driver(path)
    >>> agg = Aggregator(drv, None, {v.path: v for v in drv.variables()})
    >>> agg("mean", Var("/x", 0)), agg("count", Var("/x", 0))
    (3.0, 3)
    >>> [a.to_dict() for a in agg.used]  # doctest: +NORMALIZE_WHITESPACE
    [{'expr': 'mean(/x)', 'value': 3.0, 'from': 'data'},
     {'expr': 'count(/x)', 'value': 3, 'from': 'data'}]
    >>> drv.close()
    """

    def __init__(
        self,
        driver: Driver,
        store: IndexStore | None,
        by_key: dict[str, VariableInfo],
        stats: dict[str, tuple[VariableStats, str]] | None = None,
    ) -> None:
        self.driver = driver
        self.store = store
        self.by_key = by_key
        """Resolved variables (and subarrays) by the names the plan gives them."""
        self._values: dict[str, AggregateValue] = {}
        self._stats = {} if stats is None else stats
        """Statistics by expression; the caller may share it between queries."""

    @property
    def used(self) -> list[AggregateValue]:
        """Every aggregate computed, in the order first asked for."""
        return list(self._values.values())

    def __call__(self, func: str, over: Arith) -> Number:
        key = over.name if isinstance(over, Var) else to_text(over)
        text = f"{func}({key})"
        known = self._values.get(text)
        if known is None:
            stats, source = self.statistics(over, key)
            known = AggregateValue(text, pick(func, stats), source)
            self._values[text] = known
        return known.value

    def statistics(self, over: Arith, key: str | None = None) -> tuple[VariableStats, str]:
        """Statistics of ``over`` (resolved arithmetic; ``key`` its text, if
        known) and where they came from."""
        key = to_text(over) if key is None else key
        cached = self._stats.get(key)
        if cached is None:
            if (
                isinstance(over, Var)
                and self.store is not None
                and over.name in self.store.variables
            ):
                cached = column_stats(self.store.column(over.name)), "index"
            else:
                cached = self._one_pass(over), "data"
            self._stats[key] = cached
        return cached

    def _one_pass(self, over: Arith) -> VariableStats:
        from quarry.formats.subarray import read_view
        from quarry.index.stats import combine

        infos = list({v.name: self.by_key[v.name] for v in variables(over)}.values())
        shapes = {info.shape for info in infos}
        if len(shapes) > 1:
            listing = ", ".join(f"{i.path} {i.shape}" for i in infos)
            raise ShapeMismatchError(
                f"an aggregate's variables must share one shape, row by row: {listing}"
            )
        size = infos[0].size
        slot = {info.key: i for i, info in enumerate(infos)}
        program = None if isinstance(over, Var) else postfix(over, slot)
        # A subarray is read whole (its rows are not a span of the file).
        parts_read = {i.key: read_view(self.driver, i) for i in infos if i.subarray is not None}

        def read(info: VariableInfo, start: int, stop: int) -> npt.NDArray[np.generic]:
            if info.subarray is not None:
                return parts_read[info.key][start:stop]
            return self.driver.read(info.path, start, stop)

        parts = []
        for start in range(0, size, SPAN):
            stop = min(start + SPAN, size)
            columns = [read(info, start, stop) for info in infos]
            values = (
                columns[0] if program is None else _core.evaluate(columns, program, stop - start)
            )
            parts.append(span_stats(values))
        return combine(parts, size)


def span_stats(values: npt.NDArray[np.generic]) -> tuple[int, float, float, Any, Any]:
    """``(count, sum, m2, min, max)`` of the non-missing values, as a block of
    the index keeps them (integers keep exact minimum and maximum).

    Examples
    --------
    >>> import numpy as np
    >>> span_stats(np.array([1.0, np.nan, 3.0]))
    (2, 4.0, 2.0, 1.0, 3.0)
    >>> span_stats(np.array([], dtype="i4"))
    (0, 0.0, 0.0, None, None)
    """
    import numpy as np

    if values.dtype.kind == "f":
        values = values[~np.isnan(values)]
    n = len(values)
    if n == 0:
        return 0, 0.0, 0.0, None, None
    wide = values.astype(np.float64, copy=False)
    with np.errstate(all="ignore"):  # infinities give inf/NaN sums, as NumPy's
        total = float(np.sum(wide))
        m2 = float(np.sum(np.square(wide - total / n)))
    return n, total, m2, values.min().item(), values.max().item()


def pick(func: str, stats: VariableStats) -> Number:
    """The aggregate ``func`` from a variable's statistics; NaN when there are
    no values (``count`` is then 0 and ``sum`` 0.0, as NumPy's nansum)."""
    if func == "count":
        return stats.count
    if func == "sum":
        return stats.sum
    if stats.count == 0:
        return math.nan
    assert stats.mean is not None and stats.std is not None
    if func == "mean":
        return stats.mean
    if func == "std":
        return stats.std
    if func == "rms":
        if not math.isfinite(stats.sum):
            return math.inf  # the mean of squares of anything with an inf
        return math.sqrt(stats.std**2 + stats.mean**2)
    value = stats.min if func == "min" else stats.max
    assert value is not None
    return value

"""Conditional histograms, exactly equal to NumPy's on the selected values.

1-D histograms of an indexed variable come from the index: each block's bins
whose in-block range falls inside one histogram bin add their count (free
for all rows, an intersection count under a selection); only the rows of
bins that straddle a histogram edge are read. Edges are computed the way
``numpy.histogram_bin_edges`` computes them, with the data's min and max
from the index when there is no selection. Weighted and 2-D/3-D histograms
read the selected values. Missing values are never counted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from quarry import _core
from quarry.errors import HistogramError, QuarryError
from quarry.index.stats import column_stats

if TYPE_CHECKING:
    import numpy.typing as npt

    from quarry.formats.base import VariableInfo
    from quarry.query.execute import Executor

Bins = int | Sequence[float] | Sequence[int | Sequence[float]]
Range = tuple[float, float] | Sequence[tuple[float, float]] | None


@dataclass(frozen=True)
class Histogram:
    """Counts and edges, like ``numpy.histogram`` (1-D: edges is one array)
    or ``numpy.histogramdd`` (N-d: a list of arrays); ``path`` says whether
    counts came from the ``index``, the index plus ``values_read`` checked
    values, or the ``data``."""

    counts: npt.NDArray[Any]
    edges: npt.NDArray[Any] | list[npt.NDArray[Any]]
    path: str
    values_read: int

    def __iter__(self) -> Iterator[Any]:
        yield self.counts
        yield self.edges

    def to_json(self) -> dict[str, Any]:
        edges = (
            [e.tolist() for e in self.edges]
            if isinstance(self.edges, list)
            else self.edges.tolist()
        )
        return {
            "counts": self.counts.tolist(),
            "edges": edges,
            "path": self.path,
            "values_read": self.values_read,
        }


def compute(
    executor: Executor,
    rows: _core.RowSet | None,
    variables: list[VariableInfo],
    bins: Bins = 10,
    range: Range = None,
    weights: VariableInfo | None = None,
) -> Histogram:
    """The histogram of ``variables`` over ``rows`` (all rows when None)."""
    with _bins_errors():
        if len(variables) == 1 and weights is None:
            column = executor._column(variables[0])
            if column is not None:
                fast = _from_index(executor, column, rows, variables[0], bins, range)
                if fast is not None:
                    return fast
        return _from_data(executor, rows, variables, bins, range, weights)


@contextlib.contextmanager
def _bins_errors() -> Iterator[None]:
    """NumPy's complaints about bins (infinite data range, edges that do not
    increase) as a HistogramError saying what to give instead."""
    try:
        yield
    except ValueError as exc:
        if isinstance(exc, QuarryError):
            raise
        hint = "; give --range/--edges (range=/bins= in Python)" if "range" in str(exc) else ""
        raise HistogramError(f"cannot make the histogram bins: {exc}{hint}") from None


def _from_index(
    executor: Executor,
    column: _core.Column,
    rows: _core.RowSet | None,
    var: VariableInfo,
    bins: Bins,
    range: Range,
) -> Histogram | None:
    if isinstance(bins, int) and range is None:
        if rows is not None:
            return None  # the selection's min and max need its values
        stats = column_stats(column)
        probe = np.array([stats.min, stats.max] if stats.count else [], dtype=var.dtype)
        edges = np.histogram_bin_edges(probe, bins=bins)
    else:
        edges = np.histogram_bin_edges(np.empty(0, dtype=var.dtype), bins=bins, range=range)  # type: ignore[arg-type]
    with executor._reading(var):
        counts, candidates = column.histogram(np.asarray(edges, dtype=np.float64), rows)
    total = np.asarray(counts, dtype=np.int64)
    read = len(candidates)
    if read:
        values = executor.values_at(var, candidates.to_ids())
        total += np.histogram(_present(values), bins=edges)[0]
    return Histogram(total, edges, "index" if read == 0 else "index+data", read)


def _present(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    return values[~np.isnan(values)] if values.dtype.kind == "f" else values


def _from_data(
    executor: Executor,
    rows: _core.RowSet | None,
    variables: list[VariableInfo],
    bins: Bins,
    range: Range,
    weights: VariableInfo | None,
) -> Histogram:
    ids = rows.to_ids() if rows is not None else None
    n = executor.table.n_rows

    def at(var: VariableInfo) -> npt.NDArray[Any]:
        if ids is None:
            return executor.values_at(var, np.arange(n, dtype=np.int64))
        return executor.values_at(var, ids)

    columns = [at(v) for v in variables]
    w = at(weights) if weights is not None else None
    keep = np.ones(len(columns[0]), dtype=bool)
    for c in [*columns, *([w] if w is not None else [])]:
        if c.dtype.kind == "f":
            keep &= ~np.isnan(c)
    columns = [c[keep] for c in columns]
    w = w[keep] if w is not None else None
    if len(columns) == 1:
        counts, edges = np.histogram(columns[0], bins=bins, range=range, weights=w)  # type: ignore[arg-type]
        return Histogram(counts, edges, "data", len(columns[0]))
    counts_dd, edges_dd = np.histogramdd(
        np.stack(columns, axis=1),
        bins=bins,
        range=range,  # type: ignore[arg-type]
        weights=w,
    )
    return Histogram(counts_dd, list(edges_dd), "data", len(columns[0]))

"""Conditional histograms, exactly equal to NumPy's on the selected values.

1-D histograms of an indexed variable come from the index: each block's bins
whose in-block range falls inside one histogram bin add their count (free
for all rows, an intersection count under a selection); only the rows of
bins that straddle a histogram edge are read. Edges are computed the way
``numpy.histogram_bin_edges`` computes them, with the data's min and max
from the index when there is no selection. Weighted and 2-D/3-D histograms
read the selected values. Missing values are never counted.

Over several tables (the steps of a series, :func:`combine`) the edges are
shared: computed once, as NumPy would from all the tables' values laid end
to end, then each table's counts come by the same paths and are summed.
Where the edges need the selected values (automatic bins under a selection)
or the values themselves are binned (weights, 2-D/3-D), the tables' values
are read and binned together, so the answer is NumPy's on the concatenation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from quarry import _core
from quarry.errors import HistogramError, QuarryError
from quarry.index.stats import column_stats
from quarry.records import record

if TYPE_CHECKING:
    import numpy.typing as npt

    from quarry.formats.base import VariableInfo
    from quarry.query.execute import Executor

Bins = int | str | Sequence[float] | Sequence[int | Sequence[float]]
Range = tuple[float, float] | Sequence[tuple[float, float]] | None


@record
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


@record
class Part:
    """What one table gives a histogram: its executor, the rows (None: all),
    the variables to bin and the weight variable."""

    executor: Executor
    rows: _core.RowSet | None
    variables: list[VariableInfo]
    weights: VariableInfo | None = None


def combine(parts: Sequence[Part], bins: Bins = 10, range: Range = None) -> Histogram:
    """The histogram of several tables' rows together, with shared edges;
    one part is :func:`compute`'s answer.

    Examples
    --------
    >>> import quarry, h5py, numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "s.h5")
    >>> with h5py.File(path, "w") as f:
    ...     f["Step#0/e"], f["Step#1/e"] = np.arange(4.0), np.arange(4.0) + 4
    >>> with quarry.open(path) as ds:
    ...     _ = ds.build_index(block_len=2)
    ...     h = ds.histogram("e", bins=4)  # over both steps
    >>> h.counts.tolist(), h.edges.tolist(), h.path
    ([2, 2, 2, 2], [0.0, 1.75, 3.5, 5.25, 7.0], 'index')
    """
    import numpy as np

    if parts:
        _estimator_of_one(bins, len(parts[0].variables))
    if len(parts) == 1:
        (one,) = parts
        return compute(one.executor, one.rows, one.variables, bins, range, one.weights)
    with _bins_errors():
        if all(len(p.variables) == 1 and p.weights is None for p in parts):
            edges = _shared_edges(parts, bins, range)
            if edges is not None:
                shared = cast("Bins", edges)
                each = [compute(p.executor, p.rows, p.variables, shared) for p in parts]
                paths = {h.path for h in each}
                path = paths.pop() if len(paths) == 1 else "index+data"
                counts = np.asarray(np.sum([h.counts for h in each], axis=0, dtype=np.int64))
                return Histogram(counts, edges, path, sum(h.values_read for h in each))
        read = [_read(p) for p in parts]
        columns = [np.concatenate(axis) for axis in zip(*(c for c, _ in read), strict=True)]
        weights = None if read[0][1] is None else np.concatenate([w for _, w in read])
        return _numpy(columns, weights, bins, range)


def _shared_edges(parts: Sequence[Part], bins: Bins, range: Range) -> npt.NDArray[Any] | None:
    """Edges for every part of a 1-D histogram, or None where only the
    values themselves give them (automatic bins over selected rows, or a
    table without an index)."""
    import numpy as np

    dtype = np.result_type(*(p.variables[0].dtype for p in parts))
    if isinstance(bins, str):
        return None  # NumPy's estimators ("auto", "fd", ...) need the values
    if not (isinstance(bins, int) and range is None):
        return np.histogram_bin_edges(np.empty(0, dtype=dtype), bins=bins, range=range)  # type: ignore[arg-type]
    ends: list[Any] = []  # the stored values' type: exact for every int64
    for p in parts:
        column = p.executor._column(p.variables[0])
        if p.rows is not None or column is None or p.executor.scales(p.variables[0]) is not None:
            return None
        stats = column_stats(column)
        if stats.count:
            ends += [stats.min, stats.max]
    probe = np.array([min(ends), max(ends)] if ends else [], dtype=dtype)
    return np.histogram_bin_edges(probe, bins=bins)


def compute(
    executor: Executor,
    rows: _core.RowSet | None,
    variables: list[VariableInfo],
    bins: Bins = 10,
    range: Range = None,
    weights: VariableInfo | None = None,
) -> Histogram:
    """The histogram of ``variables`` over ``rows`` (all rows when None)."""
    _estimator_of_one(bins, len(variables))
    with _bins_errors():
        # The index bins stored values: values in other units are binned as read.
        if len(variables) == 1 and weights is None and executor.scales(variables[0]) is None:
            column = executor._column(variables[0])
            if column is not None:
                fast = _from_index(executor, column, rows, variables[0], bins, range)
                if fast is not None:
                    return fast
        return _from_data(executor, rows, variables, bins, range, weights)


def _estimator_of_one(bins: Bins, n_variables: int) -> None:
    """A :class:`HistogramError` for one of NumPy's bin estimators (``"fd"``)
    asked of several variables, which ``numpy.histogramdd`` has none of.

    Examples
    --------
    >>> try:
    ...     _estimator_of_one("fd", 2)
    ... except HistogramError as exc:
    ...     print(exc)
    bins='fd': NumPy's estimators bin one variable, not 2; give a number of bins or edges for each
    """
    if isinstance(bins, str) and n_variables > 1:
        raise HistogramError(
            f"bins={bins!r}: NumPy's estimators bin one variable, not {n_variables}; give a "
            "number of bins or edges for each"
        )


@contextlib.contextmanager
def _bins_errors() -> Iterator[None]:
    """NumPy's complaints about bins (infinite data range, edges that do not
    increase) as a HistogramError saying what to give instead."""
    try:
        yield
    except ValueError as exc:
        if isinstance(exc, QuarryError):
            raise
        said = str(exc).rstrip(".")
        if "autodetected" in said:  # the data's own range (an infinite value)
            hint = "; give --range/--edges (range=/bins= in Python)"
        elif "range" in said:  # the range given
            hint = "; --range takes two finite numbers, the lower first (range=(lo, hi))"
        else:
            hint = ""
        raise HistogramError(f"cannot make the histogram bins: {said}{hint}") from None


def _from_index(
    executor: Executor,
    column: _core.Column,
    rows: _core.RowSet | None,
    var: VariableInfo,
    bins: Bins,
    range: Range,
) -> Histogram | None:
    import numpy as np

    if isinstance(bins, str):
        return None  # NumPy's estimators ("auto", "fd", ...) need the values
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
    import numpy as np

    return values[~np.isnan(values)] if values.dtype.kind == "f" else values


def _from_data(
    executor: Executor,
    rows: _core.RowSet | None,
    variables: list[VariableInfo],
    bins: Bins,
    range: Range,
    weights: VariableInfo | None,
) -> Histogram:
    columns, w = _read(Part(executor, rows, variables, weights))
    return _numpy(columns, w, bins, range)


def _read(part: Part) -> tuple[list[npt.NDArray[Any]], npt.NDArray[Any] | None]:
    """The part's variables and weight at its rows (every row when None)."""
    import numpy as np

    executor = part.executor
    ids = part.rows.to_ids() if part.rows is not None else None
    n = executor.table.n_rows

    def at(var: VariableInfo) -> npt.NDArray[Any]:
        if ids is None:
            return executor.values_at(var, np.arange(n, dtype=np.int64))
        return executor.values_at(var, ids)

    columns = [at(v) for v in part.variables]
    return columns, at(part.weights) if part.weights is not None else None


def _numpy(
    columns: list[npt.NDArray[Any]], w: npt.NDArray[Any] | None, bins: Bins, range: Range
) -> Histogram:
    """NumPy's histogram of the rows where no column (nor the weight) is missing."""
    import numpy as np

    keep = np.ones(len(columns[0]), dtype=bool)
    for c in [*columns, *([w] if w is not None else [])]:
        if c.dtype.kind == "f":
            keep &= ~np.isnan(c)
    columns = [c[keep] for c in columns]
    w = w[keep] if w is not None else None

    def histogram(weights: npt.NDArray[Any] | None) -> tuple[npt.NDArray[Any], Any]:
        if len(columns) == 1:
            return np.histogram(columns[0], bins=bins, range=range, weights=weights)  # type: ignore[arg-type]
        return np.histogramdd(np.stack(columns, axis=1), bins=bins, range=range, weights=weights)  # type: ignore[arg-type]

    if w is not None and w.dtype.kind in "biu":
        counts, edges = _integer_sums(histogram, w)
    else:
        counts, edges = histogram(w)
    return Histogram(counts, edges if len(columns) == 1 else list(edges), "data", len(columns[0]))


def _integer_sums(
    histogram: Callable[[npt.NDArray[Any]], tuple[npt.NDArray[Any], Any]], w: npt.NDArray[Any]
) -> tuple[npt.NDArray[Any], Any]:
    """``histogram(weights)`` for the integer weights ``w``, each bin's sum
    exact, as int64 (uint64 for unsigned and bool weights). NumPy sums
    weights in float64 (rounding past 2**53) and casts the sums back, which
    wrapped past 2**63 (3 * 2**63 gave 0): here the weights are summed in
    pieces of 22 bits (fewer past 2**31 rows), each exact in float64, joined
    as Python integers; a sum that ``w``'s 64-bit dtype cannot hold is a
    :class:`~quarry.errors.HistogramError`.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([0.1, 0.2, 0.9])
    >>> hist = lambda weights: np.histogram(x, bins=2, weights=weights)
    >>> _integer_sums(hist, np.array([2**62 + 1, 2**62 - 7, -3], "i8"))[0].tolist()
    [9223372036854775802, -3]
    >>> _integer_sums(hist, np.array([2**63, 2**63, 1], "u8"))[0].tolist()
    Traceback (most recent call last):
    ...
    quarry.errors.HistogramError: the uint64 weights of one bin sum to 18446744073709551616, ...
    """
    import numpy as np

    out = np.dtype(np.int64 if w.dtype.kind == "i" else np.uint64)
    if float(np.abs(w.astype(np.float64)).sum()) < 2.0**53:  # every sum exact in float64
        counts, edges = histogram(w.astype(np.float64))
        return counts.astype(out), edges
    wide = w.astype(out)
    # Pieces of ``bits`` bits, len(w) of them summing below 2**53: exact in float64.
    bits = 53 - len(w).bit_length()
    mask = out.type((1 << bits) - 1)
    total: Any = 0
    edges = None
    for at in range(0, 64, bits):
        piece = wide >> out.type(at)
        if at + bits < 64:  # the last piece keeps the sign
            piece = piece & mask
        summed, edges = histogram(piece.astype(np.float64))
        total = total + summed.astype(np.int64).astype(object) * (1 << at)
    info = np.iinfo(out)
    low, high = min(total.flat, default=0), max(total.flat, default=0)
    if low < info.min or high > info.max:
        worst = high if high > info.max else low
        raise HistogramError(
            f"the {out} weights of one bin sum to {worst}, past what {out} holds "
            f"({info.min}..{info.max}): use more bins, or weights of a float dtype"
        )
    return np.asarray(total.tolist(), dtype=out).reshape(total.shape), edges

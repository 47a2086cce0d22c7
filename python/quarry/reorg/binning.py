"""One axis of a multi-dimensional binning: a variable's 1-D bins.

An :class:`Axis` cuts a variable's range (its non-missing values over the
whole table) into ``count`` bins of width ``size`` from ``origin``, its least
finite value: bin ``c`` takes the values ``v`` with ``floor((v - origin) /
size) = c``, the first bin also everything below and the last everything
above (infinities included). A float variable that holds NaN has one bin
more, after the last, holding its NaN rows (a range on the variable never
selects them: they are unknown).

Float bin numbers are computed in the variable's own dtype, ``(v - origin) /
size`` rounded down and clipped: one subtraction and one division per value,
no widening. Each step rounds monotonically, so the bin number
never decreases as the value grows, and bin ``c`` starts exactly at the
least value of the dtype whose bin number is ``c`` or more, found by
bisection over the dtype's values (:meth:`Axis.edges`). So every value of bin
``c`` lies, exactly, within ``[low[c], high[c]]`` (:meth:`Axis.bounds`),
whatever the rounding: all a reader needs to know that a whole bin lies
inside a range.

Bins of a given size (``--bin-size``) have their edges on the size's
decimal multiples, as a query types them: bin ``c`` starts at the least
value of the dtype at or above the float nearest ``(k0 + c) * size`` worked
out in decimal (``size`` as Python writes it, ``0.1``; ``k0`` the multiple
``origin`` lies on). The formula alone would not: in float64 ``0.3 / 0.1`` is
``2.9999999999999996``, so ``0.3`` would lie inside bin 2 and a range ending
at it would check that bin's rows. A value's bin is the formula's, moved by
one where it lies on the other side of its bin's decimal edge (they never
differ by more: :func:`make_axis` keeps the formula's edges for an axis
whose bins are too narrow for its dtype to tell them apart that well).
Copies made before this record no ``decimal`` and keep the formula's edges.

Integer variables get integer bin sizes (at least 1, a fractional size
rounded up) and exact integer arithmetic, so their edges are
``origin + c * size`` exactly.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from quarry.errors import ReorgError
from quarry.expr.keys import key_kind
from quarry.records import record, replace

# NumPy is imported where it is used: a copy's manifest holds axes, and
# reading one (to prove a copy fresh, or to plan a query) imports no NumPy.
if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from quarry.formats.base import VariableInfo

#: The most 1-D bins one variable may have: edges stay small, and the
#: product over four variables still fits a 64-bit MDBin number.
MAX_AXIS_BINS = 1 << 24
#: Equal bins per variable when neither bin sizes nor bins are given: four
#: variables make 65,536 MDBins.
DEFAULT_BINS = 16


@record
class Extent:
    """What a pass over a variable finds: its least and greatest non-missing
    value (None when it has none), whether it holds NaN, and its least and
    greatest finite value (the same as the others but where infinities are)."""

    low: int | float | None
    high: int | float | None
    has_nan: bool
    finite_low: int | float | None = None
    finite_high: int | float | None = None

    def merge(self, other: Extent) -> Extent:
        """Both extents as one (of the rows of both).

        Examples
        --------
        >>> Extent(1.0, 2.0, False, 1.0, 2.0).merge(Extent(-1.0, 1.5, True, -1.0, 1.5))
        Extent(low=-1.0, high=2.0, has_nan=True, finite_low=-1.0, finite_high=2.0)
        """

        def pick(f: Any, a: int | float | None, b: int | float | None) -> int | float | None:
            both = [v for v in (a, b) if v is not None]
            return f(both) if both else None

        return Extent(
            pick(min, self.low, other.low),
            pick(max, self.high, other.high),
            self.has_nan or other.has_nan,
            pick(min, self.finite_low, other.finite_low),
            pick(max, self.finite_high, other.finite_high),
        )

    @staticmethod
    def of_statistics(
        count: int, missing: int, low: float | None, high: float | None, integer: bool
    ) -> Extent | None:
        """The extent of a variable whose statistics are known (an index's):
        ``count`` values not NaN, ``missing`` NaN, the least and greatest of
        them. None where those cannot tell it: an infinity among them (the
        least and greatest finite values are not known), or an integer
        variable said to miss values (an index's integers never do; NaN is
        the only missing value :func:`extent_of` knows). A zero end may be
        ``0.0`` where the values' own least is ``-0.0``: the same bins.

        Examples
        --------
        >>> Extent.of_statistics(3, 1, -2.0, 5.0, False)
        Extent(low=-2.0, high=5.0, has_nan=True, finite_low=-2.0, finite_high=5.0)
        >>> Extent.of_statistics(2, 0, -1, 9, True)
        Extent(low=-1, high=9, has_nan=False, finite_low=-1, finite_high=9)
        >>> Extent.of_statistics(0, 4, None, None, False)
        Extent(low=None, high=None, has_nan=True, finite_low=None, finite_high=None)
        >>> Extent.of_statistics(3, 0, 1.0, math.inf, False) is None
        True
        """
        if integer and missing:
            return None
        if count == 0 or low is None or high is None:
            return Extent(None, None, missing > 0)
        if integer:
            return Extent(int(low), int(high), False, int(low), int(high))
        if not (math.isfinite(low) and math.isfinite(high)):
            return None
        return Extent(float(low), float(high), missing > 0, float(low), float(high))


#: Values reduced at a time by :func:`extent_of`: a slice (256 KiB of
#: float32) stays in the second-level cache between its minimum and its
#: maximum, so a part is read from memory once, not twice.
REDUCE_ROWS = 1 << 16


def _least_and_greatest(values: npt.NDArray[Any]) -> tuple[Any, Any]:
    """``values.min()`` and ``values.max()`` (NaN if any is NaN), a slice at a time.

    Examples
    --------
    >>> import numpy as np
    >>> _least_and_greatest(np.arange(200_000.0)[::-1])
    (np.float64(0.0), np.float64(199999.0))
    """
    import numpy as np

    if values.size <= REDUCE_ROWS:
        return values.min(), values.max()
    lows, highs = [], []
    for at in range(0, values.size, REDUCE_ROWS):
        piece = values[at : at + REDUCE_ROWS]
        lows.append(piece.min())
        highs.append(piece.max())
    return np.array(lows).min(), np.array(highs).max()


def extent_of(values: npt.NDArray[Any]) -> Extent:
    """The :class:`Extent` of one span of values.

    Examples
    --------
    >>> import numpy as np
    >>> extent_of(np.array([2.0, np.nan, -1.0, -np.inf]))
    Extent(low=-inf, high=2.0, has_nan=True, finite_low=-1.0, finite_high=2.0)
    >>> extent_of(np.array([], dtype="i4"))
    Extent(low=None, high=None, has_nan=False, finite_low=None, finite_high=None)
    """
    import numpy as np

    if values.size == 0:
        return Extent(None, None, False)
    low, high = _least_and_greatest(values.reshape(-1))
    if values.dtype.kind in "iu":
        return Extent(int(low), int(high), False, int(low), int(high))
    has_nan = bool(np.isnan(low) or np.isnan(high))  # min and max keep NaN
    if has_nan:
        values = values[~np.isnan(values)]
        if not values.size:
            return Extent(None, None, True)
        low, high = values.min(), values.max()
    finite_low, finite_high = low, high
    if np.isinf(low) or np.isinf(high):
        finite = values[np.isfinite(values)]
        finite_low, finite_high = (finite.min(), finite.max()) if finite.size else (0.0, 0.0)
    return Extent(float(low), float(high), has_nan, float(finite_low), float(finite_high))


@record
class Axis:
    """The 1-D bins of one variable (see the module notes): ``low`` and
    ``high`` are its least and greatest value (infinities included), and
    edges start from ``origin``, its least finite value."""

    path: str
    dtype: str
    low: int | float
    high: int | float
    origin: int | float
    size: int | float
    count: int
    nan_bin: bool
    decimal: bool = False
    """Whether a float axis' edges are the size's decimal multiples (see the
    module notes), else the formula's."""

    @property
    def kind(self) -> str:
        """The key domain (``f64``, ``i64``, ``u64``) of the variable."""
        import numpy as np

        return key_kind(np.dtype(self.dtype))

    @property
    def slots(self) -> int:
        """Bin numbers this axis uses: its bins, and the NaN bin if any."""
        return self.count + int(self.nan_bin)

    @property
    def float_dtype(self) -> np.dtype[Any]:
        """The native dtype a float variable's bin numbers are computed in."""
        import numpy as np

        return np.dtype(self.dtype).newbyteorder("=")

    def edges(self) -> npt.NDArray[Any]:
        """The inner edges ``e_1 .. e_{count-1}``: bin ``c`` holds the values
        ``e_c <= v < e_{c+1}`` (a float variable's in its own dtype, whose
        values they are; an integer variable's in its key domain).

        Examples
        --------
        >>> Axis("/x", "<f4", 0.0, 1.0, 0.0, 0.1, 10, False).edges()[:3].tolist()
        [0.10000000149011612, 0.20000000298023224, 0.30000001192092896]
        """
        import numpy as np

        from quarry.expr.keys import KEY_DTYPES

        if self.kind == "f64":
            return _decimal_edges(self) if self.decimal else _float_edges(self)
        keys = KEY_DTYPES[self.kind]
        # Exact integers, in wrapping 64-bit arithmetic: every edge lies in
        # [low, high], so the wrapped sum is the true one.
        offsets = np.arange(1, self.count, dtype=np.uint64) * np.uint64(int(self.size))
        return (offsets + np.uint64(int(self.origin) % 2**64)).view(keys)

    def bounds(self) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """``(low, high)``: every value of bin ``c`` lies in ``[low[c],
        high[c]]`` (key domain; the NaN bin is not included).

        Examples
        --------
        >>> axis = Axis("/x", "<f8", 0.0, 1.0, 0.0, 0.5, 2, False)
        >>> [a.tolist() for a in axis.bounds()]
        [[0.0, 0.5], [0.49999999999999994, 1.0]]
        >>> [a.tolist() for a in Axis("/i", "<i4", 0, 9, 0, 5, 2, False).bounds()]
        [[0, 5], [4, 9]]
        """
        import numpy as np

        from quarry.expr.keys import KEY_DTYPES

        edges = self.edges()
        keys = KEY_DTYPES[self.kind]
        low = np.concatenate([np.array([self.low], keys), edges.astype(keys)])
        # The greatest value below each edge: the bins' inclusive upper bounds.
        if self.kind == "f64":
            # Below the dtype's lowest finite edge lies only -inf: overflow is the answer.
            with np.errstate(over="ignore"):
                below = np.nextafter(edges, edges.dtype.type(-np.inf)).astype(keys)
        else:
            below = edges - keys.type(1)
        high = np.concatenate([below, np.array([self.high], keys)])
        return low, high

    def assign(self, values: npt.NDArray[Any], dtype: Any = "i8") -> npt.NDArray[Any]:
        """The bin number of each value (NaN: ``count``, the NaN bin), as ``dtype``.

        Examples
        --------
        >>> import numpy as np
        >>> axis = Axis("/x", "<f4", -np.inf, 1.0, 0.0, 0.25, 4, True)
        >>> axis.assign(np.array([0.0, 0.25, 0.3, 1.0, np.nan, -np.inf], "f4")).tolist()
        [0, 1, 1, 3, 4, 0]
        """
        import numpy as np

        if self.count == 1:
            bins = np.zeros(len(values), dtype)
            if self.nan_bin:
                bins[np.isnan(values)] = 1
            return bins
        if self.kind == "f64":
            scaled = self._scaled(values)
            if self.decimal_table() is not None:
                scaled = self._to_decimal_bins(values, scaled)
            if self.nan_bin:
                scaled[np.isnan(scaled)] = self.count
            return scaled.astype(dtype)
        keys = values.astype(np.uint64)  # wraps; the difference below is exact mod 2**64
        keys -= np.uint64(int(self.origin) % 2**64)
        keys //= np.uint64(int(self.size))
        np.minimum(keys, self.count - 1, out=keys)
        return keys.astype(dtype)

    def _scaled(self, values: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """Float bin numbers, NaN for NaN: monotone in the value (see the module notes)."""
        import numpy as np

        kind = self.float_dtype.type
        # Values far outside the bins overflow to an infinity, which the
        # clip below puts in the end bins: as the core does, silently.
        with np.errstate(over="ignore", invalid="ignore"):
            scaled: npt.NDArray[Any] = np.subtract(
                values, kind(self.origin), dtype=self.float_dtype
            )
            scaled /= kind(self.size)  # a division: multiples of the size land on edges
        np.floor(scaled, out=scaled)
        np.clip(scaled, 0, self.count - 1, out=scaled)
        return scaled

    def _to_decimal_bins(
        self, values: npt.NDArray[Any], scaled: npt.NDArray[Any]
    ) -> npt.NDArray[Any]:
        """The formula's bins ``scaled`` (floats, NaN for NaN) moved by one
        where a value lies across its bin's decimal edge."""
        import numpy as np

        table = self.decimal_table()
        assert table is not None
        at = np.where(np.isnan(scaled), self.count, scaled).astype(np.int64)
        x = values.astype(np.float64)
        with np.errstate(invalid="ignore"):  # NaN compares false: ends and NaN stay
            moved = (x >= table[at + 1]).astype(np.int64) - (x < table[at])
        return np.where(np.isnan(scaled), scaled, at + moved)

    def decimal_table(self) -> npt.NDArray[np.float64] | None:
        """The decimal edges as bins are corrected by them: ``count + 2``
        float64 values, the inner edges between NaN at each end and one more
        NaN for the NaN bin (every value compares false with NaN, so the
        first and last bins, infinities included, and the NaN bin stay).
        None where no bin needs it: the formula's edges, or decimal ones that
        are the formula's (``10`` and its multiples).

        Examples
        --------
        >>> Axis("/x", "<f8", 0.0, 0.35, 0.0, 0.1, 4, False, True).decimal_table().tolist()
        [nan, 0.1, 0.2, 0.3, nan, nan]
        >>> Axis("/x", "<f8", 0.0, 35.0, 0.0, 10.0, 4, False, True).decimal_table() is None
        True
        """
        return _decimal_table(self) if self.decimal else None

    def to_json(self) -> dict[str, Any]:
        doc = {
            "path": self.path,
            "dtype": self.dtype,
            "min": self.low,
            "max": self.high,
            "origin": self.origin,
            "bin_size": self.size,
            "bins": self.count,
            "nan_bin": self.nan_bin,
        }
        return {**doc, "decimal": True} if self.decimal else doc

    @staticmethod
    def from_json(doc: dict[str, Any]) -> Axis:
        low, high, origin, size = (doc[k] for k in ("min", "max", "origin", "bin_size"))
        for v in (low, high, origin, size):
            if not isinstance(v, int | float) or isinstance(v, bool):
                raise ValueError(f"the axis of {doc.get('path')} holds {v!r}, not a number")
        return Axis(
            str(doc["path"]),
            str(doc["dtype"]),
            low,
            high,
            origin,
            size,
            int(doc["bins"]),
            bool(doc["nan_bin"]),
            doc.get("decimal") is True,
        )


@functools.lru_cache(maxsize=64)
def _float_edges(axis: Axis) -> npt.NDArray[Any]:
    """The least value of the axis' dtype in each bin 1 .. count-1, by
    bisection over the dtype's values in order (all bins at once)."""
    import numpy as np

    dtype = axis.float_dtype
    bits = np.dtype(f"i{dtype.itemsize}")
    sign = np.int64(1) << np.int64(8 * dtype.itemsize - 1)

    def value(ordered: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
        # Ordered integers back to floats: negatives carry the sign bit.
        raw = np.where(ordered >= 0, ordered, (-ordered) | sign)
        return raw.astype(bits).view(dtype)

    wanted = np.arange(1, axis.count, dtype=np.float64)
    top = int(np.array(np.inf, dtype).view(bits))
    lo = np.full(len(wanted), -top, np.int64)  # -inf: bin 0
    hi = np.full(len(wanted), top, np.int64)  # +inf: the last bin
    while bool(np.any(lo < hi)):
        mid = (lo >> 1) + (hi >> 1) + (lo & hi & 1)  # (lo + hi) // 2 without overflow
        reached = axis._scaled(value(mid)) >= wanted
        hi = np.where(reached, mid, hi)
        lo = np.where(reached, lo, mid + 1)
    edges = value(hi)
    edges.setflags(write=False)
    return edges


@functools.lru_cache(maxsize=64)
def _decimal_edges(axis: Axis) -> npt.NDArray[Any]:
    """The least value of the axis' dtype at or above each decimal multiple
    ``(k0 + c) * size``, c = 1 .. count-1 (see the module notes)."""
    import numpy as np

    wanted = decimal_multiples(round(axis.origin / axis.size), axis.count, axis.size)
    assert wanted is not None, "make_axis gives decimal edges only where they are known"
    edges = wanted.astype(axis.float_dtype)  # nearest; moved up where that lies below
    below = edges.astype(np.float64) < wanted
    edges[below] = np.nextafter(edges[below], axis.float_dtype.type(np.inf))
    edges.setflags(write=False)
    return edges


@functools.lru_cache(maxsize=64)
def _decimal_table(axis: Axis) -> npt.NDArray[np.float64] | None:
    import numpy as np

    wanted = np.arange(1, axis.count)
    at, under = _formula_at_edges(axis)
    if np.all(at >= wanted) and np.all(under < wanted):
        return None  # each edge is the formula's already: nothing to move
    nan = np.array([np.nan])
    table = np.concatenate([nan, axis.edges().astype(np.float64), nan, nan])
    table.setflags(write=False)
    return table


def _formula_at_edges(axis: Axis) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """The formula's bin of each decimal edge of ``axis``, and of the value
    of its dtype just below each."""
    import numpy as np

    edges = _decimal_edges(axis)
    below = np.nextafter(edges, axis.float_dtype.type(-np.inf))
    with np.errstate(all="ignore"):
        return axis._scaled(edges), axis._scaled(below)


def decimal_multiples(first: int, count: int, size: float) -> npt.NDArray[np.float64] | None:
    """The float64 nearest each decimal ``(first + c) * size``, c = 1 ..
    count-1, ``size`` read as Python writes it (``0.1``, not the float's
    exact binary value); None where one rounding cannot give them exactly
    (more than 2^53 in the integers, or a power of ten beyond 10^22).

    Examples
    --------
    >>> decimal_multiples(0, 8, 0.1).tolist()
    [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]
    >>> (3 * 0.1, 7 * 0.1)
    (0.30000000000000004, 0.7000000000000001)
    >>> decimal_multiples(-3, 3, 2.5e3).tolist()
    [-5000.0, -2500.0]
    """
    import decimal

    import numpy as np

    sign, digits, exponent = decimal.Decimal(repr(float(size))).as_tuple()
    if sign or not isinstance(exponent, int) or abs(exponent) > 22:
        return None
    unit = int("".join(map(str, digits)))
    reach = max(abs(first + 1), abs(first + count)) * unit
    if reach >= 2**53:
        return None
    whole = (np.arange(first + 1, first + count, dtype=np.int64) * unit).astype(np.float64)
    # Exact integers and an exact power of ten: one correctly rounded operation.
    return whole / 10.0**-exponent if exponent < 0 else whole * 10.0**exponent


def _decimal_edges_fit(axis: Axis) -> bool:
    """Whether the decimal edges of ``axis`` rise strictly and each lies within
    one bin of the formula's, so a value's bin is the formula's moved by at
    most one (see the module notes)."""
    import numpy as np

    edges = _decimal_edges(axis)
    if len(edges) > 1 and not bool(np.all(edges[1:] > edges[:-1])):
        return False
    wanted = np.arange(1, axis.count)
    at, under = _formula_at_edges(axis)
    return bool(np.all(at >= wanted - 1) and np.all(under <= wanted))


def make_axis(
    path: str, dtype: np.dtype[Any], extent: Extent, size: float | None, bins: int | None
) -> Axis:
    """The axis of a variable over ``extent``, with bins of ``size`` (their
    edges on multiples of it, so that ranges on round numbers fall on edges)
    or ``bins`` equal bins over its range (exactly one of the two). Bins cut
    the finite range; infinities go to the first and last bins.

    Examples
    --------
    >>> import numpy as np
    >>> a = make_axis("/e", np.dtype("f8"), Extent(3.5, 41.0, False, 3.5, 41.0), 10, None)
    >>> a.origin, a.count, a.edges().tolist()
    (0.0, 5, [10.0, 20.0, 30.0, 40.0])
    >>> make_axis("/e", np.dtype("f4"), Extent(0.0, 1.0, False, 0.0, 1.0), 0.25, None).count
    5
    >>> make_axis("/e", np.dtype("f4"), Extent(0.0, np.inf, True, 0.0, 1.0), None, 16).slots
    17
    >>> a = make_axis("/n", np.dtype("i8"), Extent(-5, 10, False, -5, 10), None, 4)
    >>> a.size, a.count, a.assign(np.array([-5, 10])).tolist()
    (4, 4, [0, 3])
    """
    import numpy as np

    kind = key_kind(dtype)
    low = extent.low if extent.low is not None else 0
    high = extent.high if extent.high is not None else low
    origin = extent.finite_low if extent.finite_low is not None else 0
    top = extent.finite_high if extent.finite_high is not None else origin
    step: int | float
    if kind == "f64":
        low, high, origin = float(low), float(high), float(origin)
        span = float(top) - origin
        if size is not None:
            step = float(size)
            quotient = origin / step  # infinite: far too many bins, refused below
            aligned = math.floor(quotient) * step if math.isfinite(quotient) else math.nan
            if math.isfinite(aligned):  # edges on multiples of the size
                origin = aligned if aligned <= origin else aligned - step
            span = float(top) - origin
            # A span past float64's range (values near ±1.8e308) is cut all the
            # same: its bins counted from each end's share, which cannot overflow.
            ratio = span / step if math.isfinite(span) else top / step - origin / step
            count = math.floor(ratio) + 1 if math.isfinite(ratio) else MAX_AXIS_BINS + 1
        else:
            assert bins is not None
            step = span / bins if math.isfinite(span) else top / bins - origin / bins
            count = bins
        if count <= MAX_AXIS_BINS and not (step > 0 and math.isfinite(step)):
            step, count = 1.0, 1  # nothing to cut: one bin
    else:
        low, high, origin = int(low), int(high), int(low)
        width = high - low + 1
        step = max(1, math.ceil(size)) if size is not None else -(-width // (bins or 1))
        step = min(step, 2**64 - 1)  # one bin at most as wide as 64 bits hold
        if size is not None and origin // step * step >= -(2**63):
            origin = origin // step * step  # edges on multiples of the size
        count = -(-(high - origin + 1) // step)
    if count > MAX_AXIS_BINS:
        # Bins cut the finite values: a range shown with an infinity would say
        # nothing of how many bins it takes.
        cut = f"[{low}, {high}]"
        if kind == "f64" and not (math.isfinite(low) and math.isfinite(high)):
            least = extent.finite_low if extent.finite_low is not None else low
            cut = (
                f"its finite values [{float(least)}, {float(top)}] (infinities go to the end bins)"
            )
        raise ReorgError(
            f"{path} would have more than {MAX_AXIS_BINS} bins of size {step} over "
            f"{cut}: give a larger --bin-size or fewer --bins"
        )
    if kind == "f64":
        origin, count = _within_dtype(np.dtype(dtype), origin, step, count)
        native = np.dtype(dtype).type
        with np.errstate(over="ignore", under="ignore"):
            size_in_dtype, origin_in_dtype = native(step), native(origin)
        if count > 1 and not size_in_dtype > 0:
            raise ReorgError(
                f"bins of size {step} are too small for {path}'s dtype {dtype}: "
                "give a larger --bin-size or fewer --bins"
            )
        if count == 1:
            # One bin takes every value, but a size of 0 or inf, or an origin of
            # -inf, in the values' own dtype would make (v - origin) / size NaN
            # (the NaN bin's number) for some of them.
            if not (size_in_dtype > 0 and math.isfinite(size_in_dtype)):
                step = 1.0
            if not math.isfinite(origin_in_dtype):
                origin = float(top)
    nan_bin = extent.has_nan and kind == "f64"
    axis = Axis(path, dtype.str, low, high, origin, step, count, nan_bin)
    if size is not None and kind == "f64" and count > 1:
        first = round(origin / float(step))
        if decimal_multiples(first, count, float(step)) is not None:
            decimal = replace(axis, decimal=True)
            if _decimal_edges_fit(decimal):
                return decimal
    return axis


def _within_dtype(
    dtype: np.dtype[Any], origin: float, step: float, count: int
) -> tuple[float, int]:
    """``origin`` and ``count`` of float bins of ``step`` moved up by whole
    bins until the origin is a value of ``dtype`` (its first bin then takes
    every value below, as it takes them anyway): an origin past the dtype's
    lowest value, -inf in it, made ``-inf - origin`` NaN, the NaN bin's
    number, and every other value's bin the last.

    Examples
    --------
    >>> import numpy as np
    >>> _within_dtype(np.dtype("f4"), -3.5e38, 1e37, 69)
    (-3.4e+38, 68)
    >>> _within_dtype(np.dtype("f4"), -1e39, 1e39, 2)
    (0.0, 1)
    >>> _within_dtype(np.dtype("f8"), -50.0, 10.0, 21)
    (-50.0, 21)
    """
    import numpy as np

    native = dtype.type
    with np.errstate(over="ignore"):
        while count > 1 and not math.isfinite(native(origin)):  # once, but for rounding
            origin, count = origin + step, count - 1
    return origin, count


@record
class Binning:
    """How each variable is cut: bins of a size (``sizes``) or a number of
    equal bins (``counts``), one value per variable, as ``--bin-size`` or
    ``--bins`` asked (a copy's manifest records it, to build it again alike)."""

    sizes: tuple[float, ...] | None
    counts: tuple[int, ...] | None

    @staticmethod
    def of(
        n_vars: int, bin_size: Sequence[float] | float | None, bins: Sequence[int] | int | None
    ) -> Binning:
        """The binning ``bin_size`` or ``bins`` asks for (one value for every
        variable, or one per variable; neither: :data:`DEFAULT_BINS` each).

        Examples
        --------
        >>> Binning.of(2, [0.5, 10], None)
        Binning(sizes=(0.5, 10.0), counts=None)
        >>> Binning.of(3, None, 8).counts
        (8, 8, 8)
        >>> Binning.of(2, [1.0, 2.0, 3.0], None)
        Traceback (most recent call last):
        quarry.errors.ReorgError: give one bin size for every variable (2), not 3
        """
        if bin_size is not None and bins is not None:
            raise ReorgError("give bin sizes or a number of bins, not both")
        if bin_size is None:
            counts = _per_variable(n_vars, DEFAULT_BINS if bins is None else bins, "number of bins")
            if any(int(c) != c or c < 1 for c in counts):
                raise ReorgError(
                    f"numbers of bins must be whole numbers of 1 or more: {_shown(counts)}"
                )
            return Binning(None, tuple(int(c) for c in counts))
        sizes = _per_variable(n_vars, bin_size, "bin size")
        if not all(math.isfinite(s) and s > 0 for s in sizes):
            raise ReorgError(f"bin sizes must be positive numbers: {_shown(sizes)}")
        return Binning(tuple(float(s) for s in sizes), None)

    def axis(self, k: int, var: VariableInfo, extent: Extent) -> Axis:
        size = self.sizes[k] if self.sizes is not None else None
        count = self.counts[k] if self.counts is not None else None
        return make_axis(var.path, var.dtype, extent, size, count)

    def options(self) -> list[str]:
        """The command-line options asking for this binning.

        Examples
        --------
        >>> Binning((0.1, 10.0, 10.0), None).options(), Binning(None, (16, 16)).options()
        (['--bin-size', '0.1,10,10'], ['--bins', '16'])
        """
        if self.sizes is not None:
            return ["--bin-size", _listed(self.sizes)]
        assert self.counts is not None
        return ["--bins", _listed(self.counts)]

    def to_json(self) -> dict[str, Any]:
        return {
            "bin_size": None if self.sizes is None else list(self.sizes),
            "bins": None if self.counts is None else list(self.counts),
        }

    @staticmethod
    def from_json(doc: dict[str, Any]) -> Binning:
        sizes, counts = doc["bin_size"], doc["bins"]
        return Binning(
            None if sizes is None else tuple(float(s) for s in sizes),
            None if counts is None else tuple(int(c) for c in counts),
        )


def _listed(values: Sequence[float]) -> str:
    """Values as an option lists them: one if all are equal, shortest spellings."""
    spelled = [f"{v:g}" if float(v) == float(f"{v:g}") else repr(v) for v in values]
    return spelled[0] if len(set(spelled)) == 1 else ",".join(spelled)


def _per_variable(n_vars: int, given: Sequence[Any] | Any, what: str) -> list[float]:
    """One number per variable: ``given`` for all, or one each (a list, a
    tuple, an array); anything but real numbers is refused.

    Examples
    --------
    >>> _per_variable(1, [1, 2], "bin size")
    Traceback (most recent call last):
    quarry.errors.ReorgError: give one bin size for the variable, not 2
    """
    given = [given] if isinstance(given, str) or not hasattr(given, "__len__") else list(given)
    values: list[float] = []
    for value in given:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ReorgError(f"{what}: expected a number, got {value!r}")
        values.append(int(value) if isinstance(value, numbers.Integral) else float(value))
    if len(values) == 1:
        values = values * n_vars
    if len(values) != n_vars:
        every = "the variable" if n_vars == 1 else f"every variable ({n_vars})"
        raise ReorgError(f"give one {what} for {every}, not {len(values)}")
    return values


def _shown(values: list[float]) -> str:
    """The values given, each once (one given for all is repeated per variable)."""
    return ", ".join(map(str, dict.fromkeys(values)))


def mdbin_strides(axes: list[Axis]) -> list[int]:
    """The multiplier of each axis' bin number in the row-major MDBin number
    ``c_n + C_n (c_{n-1} + C_{n-1} (... + C_2 c_1))``.

    Examples
    --------
    >>> axes = [Axis(p, "<f8", 0.0, 1.0, 0.0, 0.5, 2, False) for p in "ab"]
    >>> mdbin_strides(axes + [Axis("c", "<f8", 0.0, 1.0, 0.0, 0.5, 2, True)])
    [6, 3, 1]
    >>> wide = Axis("w", "<f8", 0.0, 1.0, 0.0, 0.5, 2**21 - 1, True)
    >>> mdbin_strides([wide] * 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    quarry.errors.ReorgError: the variables' bins multiply to 2097152 x 2097152 x 2097152 = \
9223372036854775808 multi-dimensional bins (a variable holding NaN has one bin more, for them), ...
    """
    strides = [1] * len(axes)
    for k in range(len(axes) - 2, -1, -1):
        strides[k] = strides[k + 1] * axes[k + 1].slots
    total = strides[0] * axes[0].slots if axes else 1
    if total >= 2**63:
        counts = " x ".join(str(a.slots) for a in axes)
        nan = " (a variable holding NaN has one bin more, for them)" * any(a.nan_bin for a in axes)
        raise ReorgError(
            f"the variables' bins multiply to {counts} = {total} multi-dimensional bins"
            f"{nan}, more than the 2**63 - 1 a bin number may be: give larger --bin-size or "
            "fewer --bins"
        )
    return strides

"""Where a field's values lie: one coordinate per index along each axis.

Axis order is the array's C order: axis 0 first. ``at=("x", "y", "z")``
(``--at x,y,z``) pairs the particles' ``x`` with axis 0 of the field, ``y``
with axis 1 and ``z`` with axis 2; ``--grid`` lists origin and spacing in
the same order. A value sits *on* its grid point (node-centred): element
``[i, j, k]`` is at ``(origin[0] + i*spacing[0], origin[1] + j*spacing[1],
origin[2] + k*spacing[2])``.

Coordinates come from the field's file where it has them (its coordinate
variables, by each format's conventions: see :mod:`quarry.join.coords`),
else from ``--grid``; ``--grid`` given wins.
A grid describes the variable as stored: a subarray (``bx[:, 64, 64]``)
takes the coordinates of the indices it keeps. Coordinates may be unevenly
spaced and may decrease; they must be strictly monotonic.

Locating a particle (:meth:`Axis.locate`): the cell ``i`` with
``c[i] <= p < c[i+1]``, except that the last coordinate belongs to the last
cell, so a point on the far edge interpolates in it with weight 1 on its
last node. A point on a grid line gets weight 0 on the node past it, so its
value is the line's. Points outside ``[c[0], c[-1]]`` (and NaN positions)
are *outside*: NaN, or with ``clamp`` moved to the nearest edge first.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from quarry.errors import JoinArgumentError, JoinError
from quarry.records import record

if TYPE_CHECKING:
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]
    BoolArray = npt.NDArray[np.bool_]


@record
class GridSpec:
    """A regular grid as ``--grid`` writes it: the coordinate of element 0
    and the step between neighbours, per axis (axis 0 first).

    Examples
    --------
    >>> g = GridSpec((0.0, 10.0), (2.5, -1.0))
    >>> g.coordinates(1, 4).tolist()
    [10.0, 9.0, 8.0, 7.0]
    """

    origin: tuple[float, ...]
    spacing: tuple[float, ...]

    @property
    def rank(self) -> int:
        return len(self.origin)

    def coordinates(self, axis: int, n: int) -> FloatArray:
        """The coordinates of the ``n`` points along ``axis``; a grid whose
        last point there lies past float64's range, or whose neighbouring
        points float64 cannot tell apart, is refused.

        Examples
        --------
        >>> GridSpec((2.0**53,), (1.0,)).coordinates(0, 3)
        Traceback (most recent call last):
        quarry.errors.JoinArgumentError: --grid 'origin=9007199254740992.0 spacing=1.0': \
along axis 0, points 0 and 1 (origin + 0 * spacing and origin + 1 * spacing) are the \
same float64: the spacing is below float64's resolution there
        """
        with np.errstate(over="ignore", invalid="ignore"):
            coords = self.origin[axis] + self.spacing[axis] * np.arange(n, dtype=np.float64)
        if not np.all(np.isfinite(coords)):
            raise JoinArgumentError(
                f"--grid {self.text!r}: along axis {axis}, origin + {n - 1} * spacing lies "
                "past the largest float64"
            )
        steps = np.diff(coords) * np.sign(self.spacing[axis])
        if len(steps) and not steps.min() > 0:
            i = int(np.argmin(steps))
            raise JoinArgumentError(
                f"--grid {self.text!r}: along axis {axis}, points {i} and {i + 1} (origin + "
                f"{i} * spacing and origin + {i + 1} * spacing) are the same float64: the "
                "spacing is below float64's resolution there"
            )
        return coords

    @property
    def text(self) -> str:
        """The grid as ``--grid`` takes it."""

        def numbers(values: tuple[float, ...]) -> str:
            return ",".join(repr(v) for v in values)

        return f"origin={numbers(self.origin)} spacing={numbers(self.spacing)}"


def parse_grid(text: str) -> GridSpec:
    """``--grid`` text: ``origin=O0,O1,.. spacing=S0,S1,..`` (axis 0 first;
    the two parts in either order, separated by spaces).

    Examples
    --------
    >>> parse_grid("origin=0,0,0 spacing=2.6,2.6,1.04")
    GridSpec(origin=(0.0, 0.0, 0.0), spacing=(2.6, 2.6, 1.04))
    >>> parse_grid("origin=0,0 spacing=1")
    Traceback (most recent call last):
    ...
    quarry.errors.JoinArgumentError: --grid 'origin=0,0 spacing=1': origin has 2 numbers \
but spacing has 1; give one of each per axis of the field, axis 0 first
    >>> parse_grid("spacing=0")
    Traceback (most recent call last):
    ...
    quarry.errors.JoinArgumentError: --grid 'spacing=0': give origin=... and spacing=..., \
e.g. --grid "origin=0,0,0 spacing=2.6,2.6,1.04"
    """
    example = 'e.g. --grid "origin=0,0,0 spacing=2.6,2.6,1.04"'
    parts: dict[str, tuple[float, ...]] = {}
    for word in text.split():
        key, equals, numbers = word.partition("=")
        if not equals or key not in ("origin", "spacing") or key in parts:
            raise JoinArgumentError(
                f"--grid {text!r}: cannot read {word!r}; write origin=... spacing=..., {example}"
            )
        try:
            values = tuple(float(v) for v in numbers.split(","))
        except ValueError:
            raise JoinArgumentError(
                f"--grid {text!r}: {key} takes numbers separated by commas, got {numbers!r}"
            ) from None
        if not all(math.isfinite(v) for v in values):
            raise JoinArgumentError(f"--grid {text!r}: {key} must be finite numbers")
        parts[key] = values
    if set(parts) != {"origin", "spacing"}:
        raise JoinArgumentError(f"--grid {text!r}: give origin=... and spacing=..., {example}")
    origin, spacing = parts["origin"], parts["spacing"]
    if len(origin) != len(spacing):
        raise JoinArgumentError(
            f"--grid {text!r}: origin has {len(origin)} numbers but spacing has "
            f"{len(spacing)}; give one of each per axis of the field, axis 0 first"
        )
    if any(s == 0 for s in spacing):
        raise JoinArgumentError(f"--grid {text!r}: a spacing of 0 puts every point in one place")
    return GridSpec(origin, spacing)


@record
class Axis:
    """The coordinates of one axis of a field, kept increasing: a decreasing
    axis is stored negated (``descending``), and so are the positions
    located on it, which leaves every weight exactly as it was.

    Examples
    --------
    >>> axis = Axis.of(np.array([0.0, 1.0, 2.0, 3.0]), "x")
    >>> lower, t, inside = axis.locate(np.array([0.0, 1.5, 3.0, 3.5, np.nan]), clamp=False)
    >>> lower.tolist(), t.tolist(), inside.tolist()
    ([0, 1, 2, 2, 0], [0.0, 0.5, 1.0, 1.5, nan], [True, True, True, False, False])
    >>> Axis.of(np.array([3.0, 2.0, 0.0]), "y").locate(np.array([2.5]), clamp=False)[:2]
    (array([0]), array([0.5]))
    """

    coords: FloatArray
    descending: bool = False

    @staticmethod
    def of(coords: FloatArray, where: str) -> Axis:
        """The axis with ``coords`` (at least two, strictly monotonic);
        ``where`` names it in errors."""
        coords = np.asarray(coords, dtype=np.float64)
        if len(coords) < 2:
            raise JoinArgumentError(
                f"{where} has {len(coords)} point(s); interpolating needs 2 or more along "
                "each axis (drop a single-point axis with an integer subscript, e.g. [:, 64])"
            )
        if not np.all(np.isfinite(coords)):
            raise JoinError(f"{where}: its coordinates hold NaN or infinite values")
        steps = np.diff(coords)
        if np.all(steps > 0):
            return Axis(coords)
        if np.all(steps < 0):
            return Axis(-coords, descending=True)
        raise JoinError(
            f"{where}: its coordinates are not strictly increasing or decreasing, "
            "so they do not make a grid"
        )

    def __len__(self) -> int:
        return len(self.coords)

    def locate(self, positions: FloatArray, clamp: bool) -> tuple[IntArray, FloatArray, BoolArray]:
        """For each position: the lower node of its cell, its fraction ``t``
        of the way to the upper node, and whether it is inside the grid
        (always, with ``clamp``, but for NaN). Outside positions get a
        cell too (the nearest), and a ``t`` beyond ``[0, 1]``: the caller
        masks them."""
        c = self.coords
        p = -positions if self.descending else positions
        if clamp:
            p = np.clip(p, c[0], c[-1])  # NaN stays NaN
        inside: BoolArray = (p >= c[0]) & (p <= c[-1])
        lower = self._cells(p)
        low = c[lower]
        with np.errstate(over="ignore"):  # far outside a fine grid: masked by the caller
            t: FloatArray = (p - low) / (c[lower + 1] - low)
        return lower, t, inside

    def _cells(self, p: FloatArray) -> IntArray:
        """The largest ``i`` with ``c[i] <= p``, within ``[0, len - 2]``
        (``searchsorted(c, p, "right") - 1``, clipped). A first guess from
        the mean step is right for every point of an evenly spaced axis but
        for rounding at cell borders; the points it misses (those, and most
        points of an uneven axis) are searched for."""
        c = self.coords
        last = len(c) - 2
        with np.errstate(over="ignore", invalid="ignore"):  # a step so fine it overflows
            guess = np.floor((p - c[0]) * ((len(c) - 1) / (c[-1] - c[0])))
        # fmax/fmin put NaN positions in cell 0 (they are masked later)
        lower: IntArray = np.fmin(np.fmax(guess, 0), last).astype(np.int64)
        wrong = ((p < c[lower]) & (lower > 0)) | ((p >= c[lower + 1]) & (lower < last))
        if wrong.any():
            found = np.searchsorted(c, p[wrong], side="right").astype(np.int64) - 1
            lower[wrong] = np.clip(found, 0, last)
        return lower

"""Subarrays: the part of a variable a query addresses with NumPy slicing,
``x[0:100, :, 5]`` or ``x[::2]``.

A subarray is a view of its variable: its own shape (integer subscripts drop
their axis) and its own row-major row numbers. Rows of the view map to rows
of the whole variable one to one and in the same order (steps are positive),
so ids convert in both directions with a little index arithmetic and an
index built over the whole variable still answers for a part of it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from quarry.errors import SubarrayError
from quarry.records import record, replace

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from quarry.formats.base import Driver, VariableInfo

#: One written subscript: an index, or a slice's (start, stop, step), any part omitted.
Subscript = int | tuple[int | None, int | None, int | None]


@record
class Subarray:
    """A normalised basic index of an array of ``base_shape``: per axis a
    ``range`` (kept) or an ``int`` (dropped).

    Examples
    --------
    >>> import numpy as np
    >>> sub = Subarray.of((4, 6), ((1, None, 2), 3))
    >>> sub.shape, sub.text
    ((2,), '[1:4:2, 3]')
    >>> sub.base_ids(np.array([0, 1])).tolist()  # rows (1, 3) and (3, 3)
    [9, 21]
    >>> inside, ids = sub.view_ids(np.array([9, 10, 21]))
    >>> inside.tolist(), ids.tolist()
    ([True, False, True], [0, 1])
    """

    base_shape: tuple[int, ...]
    axes: tuple[range | int, ...]

    @staticmethod
    def of(base_shape: tuple[int, ...], subscripts: tuple[Subscript, ...]) -> Subarray:
        """Normalise written subscripts against the variable's shape, as NumPy
        does (negative positions count from the end; missing trailing axes are
        whole); raise :class:`SubarrayError` for what NumPy would refuse."""
        if len(subscripts) > len(base_shape):
            raise SubarrayError(
                f"{len(subscripts)} subscripts for an array of {len(base_shape)} "
                f"dimension(s), shape {base_shape}"
            )
        axes: list[range | int] = []
        for axis, n in enumerate(base_shape):
            sub = subscripts[axis] if axis < len(subscripts) else (None, None, None)
            if isinstance(sub, int):
                if not -n <= sub < n:
                    raise SubarrayError(
                        f"index {sub} is out of bounds for axis {axis} of length {n}"
                    )
                axes.append(sub % n)
                continue
            start, stop, step = sub
            if step is not None and step <= 0:
                raise SubarrayError(
                    f"step {step} on axis {axis}: only positive steps are supported"
                )
            axes.append(range(*slice(start, stop, step).indices(n)))
        return Subarray(base_shape, tuple(axes))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(a) for a in self.axes if isinstance(a, range))

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def is_whole(self) -> bool:
        """Whether the view is the whole variable (``x[:]``)."""
        return all(
            isinstance(a, range) and a.step == 1 and len(a) == n
            for a, n in zip(self.axes, self.base_shape, strict=True)
        )

    @property
    def text(self) -> str:
        def one(a: range | int) -> str:
            if isinstance(a, int):
                return str(a)
            return f"{a.start}:{a.stop}" + (f":{a.step}" if a.step != 1 else "")

        return "[" + ", ".join(one(a) for a in self.axes) + "]"

    def numpy_index(self, first_row: int = 0) -> tuple[slice | int, ...]:
        """The NumPy index of the view in an array of whole leading-axis rows
        starting at ``first_row``."""
        out: list[slice | int] = []
        for axis, a in enumerate(self.axes):
            shift = first_row if axis == 0 else 0
            if isinstance(a, int):
                out.append(a - shift)
            else:
                out.append(slice(a.start - shift, a.start - shift + len(a) * a.step, a.step))
        return tuple(out)

    def _starts_steps(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        import numpy as np

        starts = np.array([a if isinstance(a, int) else a.start for a in self.axes], np.int64)
        steps = np.array([0 if isinstance(a, int) else a.step for a in self.axes], np.int64)
        return starts, steps

    def base_coords(self, ids: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], ...]:
        """N-d indices in the whole variable of the view's flat ``ids``."""
        import numpy as np

        view = iter(np.unravel_index(ids, self.shape) if self.shape else ())
        starts, steps = self._starts_steps()
        out = []
        for axis, a in enumerate(self.axes):
            if isinstance(a, int):
                out.append(np.full(len(ids), a, dtype=np.int64))
            else:
                out.append(starts[axis] + steps[axis] * next(view).astype(np.int64))
        return tuple(out)

    def base_ids(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Flat ids in the whole variable of the view's flat ``ids`` (ascending
        stays ascending)."""
        import numpy as np

        if len(ids) == 0:
            return np.empty(0, dtype=np.int64)
        return np.ravel_multi_index(self.base_coords(ids), self.base_shape).astype(np.int64)

    def view_ids(
        self, base_ids: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
        """Which whole-variable ``base_ids`` lie in the view, and the view ids
        of those that do."""
        import numpy as np

        coords = np.unravel_index(base_ids, self.base_shape)
        inside = np.ones(len(base_ids), dtype=bool)
        view: list[npt.NDArray[np.int64]] = []
        for c, a in zip(coords, self.axes, strict=True):
            c = c.astype(np.int64)
            if isinstance(a, int):
                inside &= c == a
                continue
            offset = c - a.start
            inside &= (offset >= 0) & (offset % a.step == 0) & (offset < len(a) * a.step)
            view.append(offset // a.step)
        if not view:  # every axis indexed: a single element
            return inside, np.zeros(int(inside.sum()), dtype=np.int64)
        kept = tuple(v[inside] for v in view)
        return inside, np.ravel_multi_index(kept, self.shape).astype(np.int64)

    def base_span(self) -> tuple[int, int]:
        """The whole-variable flat ids ``[first, last + 1)`` the view lies in."""
        import numpy as np

        if self.size == 0:
            return 0, 0
        first = self.base_ids(np.array([0], dtype=np.int64))[0]
        last = self.base_ids(np.array([self.size - 1], dtype=np.int64))[0]
        return int(first), int(last) + 1


def view_of(var: VariableInfo, subscripts: tuple[Subscript, ...]) -> VariableInfo:
    """``var`` as the subarray ``subscripts`` addresses: its shape and
    dimension names are the view's, its path stays the variable's (the
    view's ``key`` tells views apart). ``x[:]`` is ``x`` itself.

    Examples
    --------
    >>> import numpy as np
    >>> from quarry.formats.base import VariableInfo
    >>> x = VariableInfo("/x", (10, 4), np.dtype("f4"), dims=("t", "c"))
    >>> v = view_of(x, ((0, 5, None), 2))
    >>> v.shape, v.dims, v.key
    ((5,), ('t',), '/x[0:5, 2]')
    """
    sub = Subarray.of(var.shape, subscripts)
    if sub.is_whole:
        return var
    dims = None
    if var.dims:
        dims = tuple(d for d, a in zip(var.dims, sub.axes, strict=True) if isinstance(a, range))
    return replace(var, shape=sub.shape, dims=dims, chunks=None, subarray=sub)


def read_view(driver: Driver, var: VariableInfo) -> npt.NDArray[np.generic]:
    """Every value of a view (or of a whole variable), flat and row-major.
    Reads the whole leading-axis rows the view spans, then slices."""
    import numpy as np

    sub = var.subarray
    if sub is None:
        return driver.read(var.path, 0, var.size)
    first = sub.axes[0]
    r0 = first if isinstance(first, int) else first.start
    r1 = (first + 1) if isinstance(first, int) else r0 + max(len(first) - 1, 0) * first.step + 1
    if sub.size == 0:
        return driver.read(var.path, 0, 0)
    row = math.prod(sub.base_shape[1:])
    rows = driver.read(var.path, r0 * row, r1 * row).reshape((r1 - r0, *sub.base_shape[1:]))
    return np.ascontiguousarray(rows[sub.numpy_index(r0)]).reshape(-1)

"""A mesh field to interpolate: a variable (or a subarray of one) in any
file Quarry reads, its grid, and reads of only the region particles touch.

A field is written ``FILE``, ``FILE:VAR``, and either with subscripts:
``field/bx.bin``, ``fields.nc:bx``, ``field/bx.bin[:, 64, 64]``. Without
``:VAR`` the file's only variable is meant, or, in a file of several, the
one the field's name resolves to (``bx=fields.h5`` reads ``bx``), by the
rules of every other name (:func:`quarry.expr.names.resolve`).

Reading (:meth:`Field.read_box`): the box of the field that the particles'
cells cover, through the driver's flat reads: one read per index along
axis 0 of the box (per index a subarray picks there), of the rows of axis 1
the box spans (or one read of the whole slab when the box spans every other
axis), so the field outside the box is never read, but for the rest of those
rows. A subarray that picks within them has its nodes alone gathered where
the driver reads in place and that reads far less (:data:`NARROW`).

Threads (:mod:`quarry.join.workers`) may read one field at once: where its
driver does not declare ``concurrent_reads``
(:func:`~quarry.formats.base.reads_concurrently`), each read is made under
one lock per driver class (netCDF-C, say, must not be entered by two threads
whichever files they read), so only the interpolation runs side by side.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from quarry.errors import (
    AmbiguousNameError,
    JoinArgumentError,
    JoinError,
    QuerySyntaxError,
    SourceError,
    SubarrayError,
    UnknownVariableError,
    caret_line,
)
from quarry.expr.names import resolve
from quarry.expr.parser import parse_variable
from quarry.formats import open_source
from quarry.formats.base import gathers_in_place, reads_concurrently
from quarry.formats.subarray import Subarray, Subscript
from quarry.index.locate import index_dirs
from quarry.join.coords import coordinate_variables
from quarry.join.grid import Axis, GridSpec
from quarry.records import record

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt

    from quarry.formats.base import Driver, VariableInfo


@record
class FieldSource:
    """Where a field is: the file, the variable (None: see the module), and
    the subscripts of a subarray (None: the whole variable).

    Examples
    --------
    >>> FieldSource.parse("/dev/null[:, 64, 64]")
    FieldSource(file='/dev/null', variable=None, subscripts=((None, None, None), 64, 64))
    >>> FieldSource.parse("/dev/null:g/bx").variable
    'g/bx'
    """

    file: str
    variable: str | None = None
    subscripts: tuple[Subscript, ...] | None = None

    @staticmethod
    def parse(text: str) -> FieldSource:
        """``FILE[:VAR][SUBSCRIPTS]``; a file that exists as written is a
        file, whatever characters its name holds."""
        head, subscripts = text, None
        if text.endswith("]") and not os.path.exists(text):
            opening = text.rfind("[")
            if opening > 0:
                head = text[:opening]
                subscripts = _subscripts(text, opening)
        if os.path.exists(head):
            return FieldSource(head, None, subscripts)
        opening = head.rfind("[")
        named = head[:opening]
        if (
            opening > 0
            and "]" not in head[opening:]
            and (os.path.exists(named) or os.path.exists(named.rpartition(":")[0]))
        ):
            shown, caret = caret_line(text, opening)
            raise JoinArgumentError(f"field {text}: its '[' is not closed\n  {shown}\n  {caret}^")
        file, colon, variable = head.rpartition(":")
        if colon and file and variable and os.path.exists(file):
            return FieldSource(file, variable, subscripts)
        raise SourceError(
            f"no such field file: {head} (a field is FILE, FILE:VARIABLE or either with "
            "subscripts, e.g. field/bx.bin or fields.nc:bx[:, 64, 64])"
        )

    @property
    def text(self) -> str:
        sub = ""
        if self.subscripts is not None:

            def one(s: Subscript) -> str:
                if isinstance(s, int):
                    return str(s)
                start, stop, step = ("" if v is None else str(v) for v in s)
                return f"{start}:{stop}" + (f":{step}" if step else "")

            sub = "[" + ", ".join(one(s) for s in self.subscripts) + "]"
        return self.file + (f":{self.variable}" if self.variable else "") + sub


def _subscripts(text: str, opening: int) -> tuple[Subscript, ...] | None:
    """The subscripts written from ``text[opening]`` (a ``[``) on; a
    :class:`JoinArgumentError` with a caret under the bad spot of ``text``."""
    try:
        return parse_variable("v" + text[opening:]).index
    except QuerySyntaxError as exc:
        shown, caret = caret_line(text, opening + exc.position - 1)
        raise JoinArgumentError(f"field {text}: {exc.message}\n  {shown}\n  {caret}^") from None


class Field:
    """A field opened for interpolation: the variable, the part of it
    (``subarray``), one :class:`~quarry.join.grid.Axis` per kept axis, and
    the bytes read so far (``bytes_read``).

    Examples
    --------
    >>> import tempfile, os
    >>> from quarry.formats.raw import RawLayout, register
    >>> path = os.path.join(tempfile.mkdtemp(), "bx.bin")
    >>> np.arange(24, dtype="<f4").tofile(path)
    >>> _ = register(path, RawLayout("bx", "<f4", (2, 3, 4)))
    >>> field = Field.open("bx", path + "[1]", GridSpec((0, 0, 0), (1, 1, 1)))
    >>> field.shape, [a.coords.tolist() for a in field.axes]
    ((3, 4), [[0.0, 1.0, 2.0], [0.0, 1.0, 2.0, 3.0]])
    >>> field.read_box((1, 2), (3, 4)).tolist(), field.bytes_read
    ([[18.0, 19.0], [22.0, 23.0]], 32)
    >>> field.close()
    """

    def __init__(
        self,
        name: str,
        source: FieldSource,
        driver: Driver,
        info: VariableInfo,
        subarray: Subarray,
        axes: list[Axis],
    ) -> None:
        self.name = name
        self.source = source
        self.driver = driver
        self.info = info
        self.subarray = subarray
        self.axes = axes
        self.bytes_read = 0
        self._counting = threading.Lock()  # bytes_read, added to from several threads
        self._one_at_a_time: contextlib.AbstractContextManager[Any] = (
            contextlib.nullcontext() if reads_concurrently(driver) else _format_lock(driver)
        )

    @staticmethod
    def open(name: str, text: str, grid: GridSpec | None, at: Sequence[str] = ()) -> Field:
        """The field ``name`` at ``text`` (``FILE[:VAR][SUBSCRIPTS]``), its
        coordinates from ``grid`` when given, else from its file (``at``:
        the particles' position variables, which may name them)."""
        source = FieldSource.parse(text)
        # A raw field's description: beside it, or in QUARRY_INDEX_PATH (read-only data).
        driver = open_source(source.file, tuple(index_dirs()))
        try:
            info = _variable(name, source, driver)
            try:
                subarray = Subarray.of(info.shape, source.subscripts or ())
            except SubarrayError as exc:  # the command line's subscripts, as a query's
                raise JoinArgumentError(f"field {name} ({source.text}): {exc}") from None
            axes = _axes(name, source, driver, info, subarray, grid, at)
        except BaseException:
            driver.close()
            raise
        return Field(name, source, driver, info, subarray, axes)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.subarray.shape

    @property
    def where(self) -> str:
        """The field as the user wrote it, for messages: ``bx (field/bx.bin)``."""
        return f"{self.name} ({self.source.text})"

    def read_box(self, lo: tuple[int, ...], hi: tuple[int, ...]) -> npt.NDArray[np.generic]:
        """Values of the field's box ``[lo, hi)`` (per kept axis), shaped like it."""
        picked: list[npt.NDArray[np.int64]] = []  # the stored indices, per stored axis
        shape: list[int] = []
        kept = iter(zip(lo, hi, strict=True))
        for axis in self.subarray.axes:
            if isinstance(axis, int):
                picked.append(np.array([axis], np.int64))
                continue
            first, stop = next(kept)
            picked.append(axis.start + np.arange(first, stop, dtype=np.int64) * axis.step)
            shape.append(stop - first)
        if not all(len(p) for p in picked):
            return np.zeros(shape, self.info.dtype)
        return np.ascontiguousarray(self._read_nodes(picked).reshape(shape))

    def read_units(self, units: npt.NDArray[np.int64], width: int) -> npt.NDArray[np.generic]:
        """The stored variable's rows ``units`` (ascending; row ``u`` is its
        flat values ``[u * width, (u + 1) * width)``), end to end: each run
        of consecutive rows in one read.

        Examples
        --------
        >>> from quarry.formats.hdf5 import HDF5Driver
        >>> import h5py, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "u.h5")
        >>> with h5py.File(path, "w") as f:
        ...     f["bx"] = np.arange(12.0)
        >>> field = Field.open("bx", path, GridSpec((0,), (1,)))
        >>> field.read_units(np.array([0, 1, 4]), 2).tolist(), field.bytes_read
        ([0.0, 1.0, 2.0, 3.0, 8.0, 9.0], 48)
        >>> field.close()
        """
        if not len(units):
            return np.zeros(0, self.info.dtype)
        breaks = np.flatnonzero(np.diff(units) != 1) + 1
        firsts = units[np.r_[0, breaks]]
        stops = units[np.r_[breaks - 1, len(units) - 1]] + 1
        runs = zip(firsts.tolist(), stops.tolist(), strict=True)
        return np.concatenate([self._read(a * width, b * width) for a, b in runs])

    def _read_nodes(self, picked: list[npt.NDArray[np.int64]]) -> npt.NDArray[np.generic]:
        """The stored variable's values at every combination of the ascending
        stored indices ``picked`` (one array per axis), shaped by them. Read
        by rows: per picked index along axis 0, the rows of axis 1 from the
        first picked to the last (one read of the slab where every other
        axis is read whole and axis 0 has no gaps). Gathered instead where a
        subarray picks (one index along an axis, or every n-th), its nodes
        are at most 1/NARROW of what the rows hold, and the driver reads them
        in place."""
        shape = self.info.shape
        nodes = math.prod(len(p) for p in picked)
        lo = [int(p[0]) for p in picked]
        hi = [int(p[-1]) + 1 for p in picked]
        row = math.prod(shape[2:])
        one_run = len(shape) == 1  # what reading by rows would bring:
        rows_cost = hi[0] - lo[0] if one_run else len(picked[0]) * (hi[1] - lo[1]) * row
        # Only for a part that picks (one index, every n-th): the grouped
        # reads of a whole variable read whole rows, never more than its box.
        picks = any(isinstance(a, int) or a.step != 1 for a in self.subarray.axes)
        narrow = picks and NARROW * nodes <= rows_cost
        if narrow and gathers_in_place(self.driver, self.info.path):
            strides = [math.prod(shape[k + 1 :]) for k in range(len(shape))]
            offsets = np.ix_(*[p * n for p, n in zip(picked, strides, strict=True)])
            flat = np.asarray(sum(offsets, start=np.zeros((), np.int64)))
            return self._gather(flat.ravel()).reshape(flat.shape)
        if len(shape) == 1:
            return self._read(lo[0], hi[0])[picked[0] - lo[0]]
        plane = math.prod(shape[1:])
        full = all(a == 0 and b == n for a, b, n in zip(lo[1:], hi[1:], shape[1:], strict=True))
        if full and hi[0] - lo[0] == len(picked[0]):
            dense = self._read(lo[0] * plane, hi[0] * plane).reshape((hi[0] - lo[0], *shape[1:]))
        else:
            first, stop = lo[1] * row, hi[1] * row
            rows = [self._read(i * plane + first, i * plane + stop) for i in picked[0].tolist()]
            dense = np.stack(rows).reshape((len(picked[0]), hi[1] - lo[1], *shape[2:]))
        within = [np.arange(len(picked[0])), picked[1] - lo[1], *picked[2:]]
        return dense[np.ix_(*within)]

    def _read(self, start: int, stop: int) -> npt.NDArray[np.generic]:
        with self._one_at_a_time:
            values = self.driver.read(self.info.path, start, stop)
        with self._counting:
            self.bytes_read += values.nbytes
        return values

    def _gather(self, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.generic]:
        """The stored variable's flat values at ``positions`` (ascending)."""
        with self._one_at_a_time:
            values = self.driver.gather(self.info.path, positions)
        with self._counting:
            self.bytes_read += values.nbytes
        return values

    def close(self) -> None:
        self.driver.close()


#: A box whose nodes are at most 1/NARROW of the values its rows hold has them
#: gathered (``driver.gather``) instead of its rows read whole.
NARROW = 4

#: One lock per driver class whose reads must be made one at a time.
_FORMAT_LOCKS: dict[type, threading.Lock] = {}
_FORMAT_LOCKS_LOCK = threading.Lock()


def _step_template(paths: Sequence[str]) -> str | None:
    """``paths`` as one path with ``{step}`` where they differ, when that is
    a number ending one group's name (``Step#0``, ``Step#1``); else None.

    Examples
    --------
    >>> _step_template(["/Step#0/bx", "/Step#1/bx"]), _step_template(["/a/bx", "/b/bx"])
    ('/Step#{step}/bx', None)
    """
    split = [p.split("/") for p in paths]
    if len({len(parts) for parts in split}) != 1:
        return None
    differ = [k for k, names in enumerate(zip(*split, strict=True)) if len(set(names)) > 1]
    steps = [re.fullmatch(r"(.*?)(\d+)", parts[differ[0]]) for parts in split] if differ else []
    if len(differ) != 1 or not all(steps) or len({m.group(1) for m in steps if m}) != 1:
        return None
    parts = list(split[0])
    parts[differ[0]] = steps[0].group(1) + "{step}" if steps[0] else parts[differ[0]]
    return "/".join(parts)


def _format_lock(driver: Driver) -> threading.Lock:
    """The lock every read through a driver of ``driver``'s class takes."""
    with _FORMAT_LOCKS_LOCK:
        return _FORMAT_LOCKS.setdefault(type(driver), threading.Lock())


def _variable(name: str, source: FieldSource, driver: Driver) -> VariableInfo:
    """The variable a field names; refused if it cannot be read as numbers."""
    listed = driver.variables()
    wanted = source.variable if source.variable is not None else name
    try:
        info = (
            listed[0]
            if source.variable is None and len(listed) == 1
            else resolve(wanted, listed, source.file)
        )
    except UnknownVariableError as exc:
        held = [v.path for v in listed if v.problem is None]
        if source.variable is not None or not held:
            raise
        # The field's own name was tried as its variable: say what the file holds.
        shown = ", ".join(held[:8]) + (f" and {len(held) - 8} more" if len(held) > 8 else "")
        raise UnknownVariableError(
            wanted,
            f"{source.file}, which holds {len(held)} variables ({shown}); name one with "
            f"--field {name}={source.file}:VAR",
            exc.suggestions,
        ) from None
    except AmbiguousNameError as exc:
        # The particles' --path and --per-step do not reach into a field's file.
        picks = " or ".join(f"{name}={source.file}:{path}" for path in exc.candidates[:2])
        per_step = _step_template(exc.candidates)
        each = f", or each step's own with {name}={source.file}:{per_step}" if per_step else ""
        raise JoinArgumentError(
            f"field {name}: {wanted!r} matches {len(exc.candidates)} variables of "
            f"{source.file} in separate groups; name one with --field {picks}{each}"
        ) from None
    if info.problem is not None:
        raise JoinError(f"cannot interpolate {info.path} in {source.file}: {info.problem}")
    return info


def _axes(
    name: str,
    source: FieldSource,
    driver: Driver,
    info: VariableInfo,
    subarray: Subarray,
    grid: GridSpec | None,
    at: Sequence[str],
) -> list[Axis]:
    """The coordinates of each kept axis: from ``grid``, else from the
    file's coordinate variables (:func:`coordinate_variables`); an error
    naming ``--grid`` where neither."""
    where = f"field {name} ({source.text})"
    rank = len(info.shape)
    if grid is not None and grid.rank != rank:
        raise JoinArgumentError(
            f"--grid {grid.text!r} gives {grid.rank} axes but {info.path} in {source.file} "
            f"has {rank} (shape {info.shape}); the grid describes the stored variable, "
            "axis 0 first, also when a subarray of it is interpolated"
        )
    kept = [k for k, axis in enumerate(subarray.axes) if not isinstance(axis, int)]
    zeros, ones = ",".join(["0"] * rank), ",".join(["1"] * rank)
    give_grid = (
        f"give its grid, one number per axis of {info.path} (shape {info.shape}), axis 0 "
        f'first: --grid "origin={zeros} spacing={ones}" (grid= in Python)'
    )
    try:
        coordinates = None if grid is not None else coordinate_variables(driver, info, kept, at)
    except JoinArgumentError as exc:
        raise JoinArgumentError(f"{where}: {exc}; or {give_grid}") from None
    if grid is None and coordinates is None:
        raise JoinArgumentError(f"{where} has no coordinate variables; {give_grid}")
    axes = []
    for k, (n, axis) in enumerate(zip(info.shape, subarray.axes, strict=True)):
        if isinstance(axis, int):
            continue
        if grid is not None:
            whole = grid.coordinates(k, n)
        else:
            assert coordinates is not None
            whole = _read_all(driver, coordinates[k])
        axes.append(Axis.of(whole[axis.start : axis.stop : axis.step], f"axis {k} of {where}"))
    return axes


def _read_all(driver: Driver, info: VariableInfo) -> npt.NDArray[np.float64]:
    return np.asarray(driver.read(info.path, 0, info.size), dtype=np.float64)

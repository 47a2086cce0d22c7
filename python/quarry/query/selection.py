"""A query's answer: the rows where it is true, and what can be read at them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from quarry import _core
from quarry.errors import ClosedDatasetError, QuarryError, ShapeMismatchError
from quarry.expr.names import name_list
from quarry.pool import jobs, on_own_threads
from quarry.query.execute import Executor, SmallBox, Table, counted
from quarry.query.stats import Access, QueryStats
from quarry.records import replace

if TYPE_CHECKING:
    import os

    import numpy as np
    import numpy.typing as npt

    from quarry.dataset import Dataset
    from quarry.formats.base import VariableInfo
    from quarry.join import GridSpec, Interpolated
    from quarry.outputs.columns import OutputTable
    from quarry.query.aggregate import AggregateValue
    from quarry.query.boxes import StepBoxes
    from quarry.query.histogram import Histogram, Part
    from quarry.query.planner import PlannedQuery
    from quarry.reorg.binning import Axis as BinAxis


class Runner(Protocol):
    """Answers selections now (see :mod:`quarry.parallel.runners`): the
    counts, or with ``rows`` the hits and the values of ``names`` at them.
    Returns whether this process holds the whole answer (an MPI rank other
    than the root does not). A batch's counts are answered member by
    member (:meth:`count_members`)."""

    def answer(
        self, selections: Sequence[Selection], rows: bool = False, names: Sequence[str] = ()
    ) -> bool: ...

    def count_members(
        self, count: Callable[[int], list[int]], n_members: int, width: int
    ) -> list[list[int]]:
        """``count(i)`` (``width`` counts: a batch's, in member ``i``) for
        every member, on every process that takes part."""
        ...


class Selection:
    """Rows of a logical table where a query is true. Evaluated lazily, once.

    Examples
    --------
    >>> import quarry, h5py, numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "d.h5")
    >>> with h5py.File(path, "w") as f:
    ...     _ = f.create_dataset("energy", data=np.array([0.5, 1.5, np.nan, 2.5]))
    ...     _ = f.create_dataset("x", data=np.array([10, 20, 30, 40]))
    >>> with quarry.open(path) as ds:
    ...     sel = ds.query("energy > 1 && x < 35")
    ...     print(sel.count(), sel.ids(), sel.values("x"))
    1 [1] [20]
    """

    def __init__(
        self,
        dataset: Dataset,
        query: str,
        executor: Executor | Callable[[], Executor],
        planned: PlannedQuery | None = None,
        *,
        path: str | None = None,
        rows: _core.RowSet | None = None,
        boxes: StepBoxes | None = None,
        keep: Callable[[list[SmallBox | None]], None] | None = None,
    ) -> None:
        self.dataset = dataset
        self.query = query
        self.plan = planned.plan if planned is not None else None
        self._planned = planned
        self._made = executor if isinstance(executor, Executor) else None
        self._make = executor
        """What makes the executor, when first needed: a query answered by a
        kept box may need none."""
        self._boxes = boxes
        """The box this query gave before in this table and state of its
        file (:mod:`quarry.query.boxes`): it counts the query, unplanned."""
        self._keep = keep
        """Where the box a count is made from goes to be kept."""
        self._counted_by_box = False
        self._opened = dataset.opened
        """The open of the file this selection reads through."""
        self._rows = rows
        """The hits: known from the start for a saved selection (no plan)."""
        self._count: int | None = None
        self._ids: tuple[_core.RowSet, npt.NDArray[np.int64]] | None = None
        """The hits' ids and the rows they were converted from (see :meth:`ids`)."""
        self._values: dict[str, npt.NDArray[np.generic]] = {}
        self.aggregates: list[AggregateValue] = planned.aggregates if planned else []
        """The aggregates the query used (``mean(x)``...), their values, and
        whether the index or a pass over the data gave each."""
        self.variables: list[VariableInfo] = planned.variables if planned else []
        """The variables (or subarrays) the query compared row by row."""
        self.resolved: dict[str, str] = planned.resolved if planned else {}
        """Each name as written in the query -> the full path it resolved to."""
        self.path = path
        """The context bare names resolve in (``Dataset.query(q, path=...)``)."""

    def _check_current(self) -> None:
        """Raise :class:`~quarry.errors.ClosedDatasetError` where the dataset
        was closed, or its file opened again (it changed), since this
        selection was made: its file can no longer be read through it."""
        if self.dataset.opened is not self._opened:
            self.dataset.check_open()
            raise ClosedDatasetError(
                f"{self.dataset.path} was opened again since {self.query!r} was asked "
                "(the file changed): ask it again"
            )

    @property
    def _reading(self) -> Executor:
        """The executor, for work that reads the file (checked first)."""
        self._check_current()
        return self._executor

    @property
    def _executor(self) -> Executor:
        if self._made is None:
            assert not isinstance(self._make, Executor)
            self._made = self._make()
            if self._counted_by_box and self.plan is not None:
                self._made.box_counted(self.plan)
        return self._made

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the logical table the query ran over."""
        return self._executor.table.shape

    @property
    def table(self) -> Table:
        """The logical table the query ran over (shape, block length)."""
        return self._executor.table

    def set_answer(
        self,
        *,
        count: int | None = None,
        rows: _core.RowSet | None = None,
        values: dict[str, npt.NDArray[np.generic]] | None = None,
    ) -> None:
        """Take an answer found elsewhere (by MPI ranks, each on its share):
        the count, or the rows and the values of some variables at them."""
        if rows is not None:
            self._rows = rows
            count = len(rows)
        self._count = count
        for name, column in (values or {}).items():
            self._values[self._table_variable(name).key] = column

    def answer(self, runner: Runner, rows: bool = False, names: Sequence[str] = ()) -> bool:
        """Answer now with ``runner`` (:mod:`quarry.parallel.runners`): the
        count, or with ``rows`` the hits and the values of ``names``. Returns
        whether this process holds the answer.

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> from quarry.parallel.runners import Local
        >>> path = os.path.join(tempfile.mkdtemp(), "a.h5")
        >>> with h5py.File(path, "w") as f:
        ...     f["x"] = np.arange(10.0)
        >>> with quarry.open(path) as ds:
        ...     sel = ds.query("x > 6")
        ...     sel.answer(Local(jobs=1), rows=True, names=["x"]), sel.values("x").tolist()
        (True, [7.0, 8.0, 9.0])
        """
        return runner.answer([self], rows, names)

    @property
    def jobs(self) -> int | None:
        """Threads the selection's work runs on: its dataset's ``jobs``."""
        return self.dataset.jobs

    @property
    @on_own_threads
    def rows(self) -> _core.RowSet:
        if self._rows is None:
            assert self.plan is not None, "a loaded selection comes with its rows"
            self._rows = self._reading.rows(self.plan)
        return self._rows

    def stats(self) -> QueryStats:
        """What answering has done so far, as ``EXPLAIN ANALYZE`` shows it:
        candidate rows checked, bitmaps decoded, bytes read from the data file,
        rows and blocks scanned, blocks skipped by zone maps (see
        :class:`quarry.query.stats.QueryStats`).

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "s.h5")
        >>> with h5py.File(path, "w") as f:
        ...     _ = f.create_dataset("x", data=np.arange(100.0))
        >>> with quarry.open(path) as ds:
        ...     sel = ds.query("x * 2 > 150")          # arithmetic: a scan
        ...     sel.count(), sel.stats().rows_scanned, sel.stats().bytes_read
        (24, 100, 800)
        """
        return self._executor.stats()

    def access(self) -> list[Access]:
        """How each condition answered so far was answered, ``"index"`` or
        ``"scan"``, and the estimate that chose it (rows the index would
        check against a scan of the column; see
        :meth:`quarry.query.execute.Executor.estimate`).

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "a.h5")
        >>> with h5py.File(path, "w") as f:
        ...     _ = f.create_dataset("x", data=np.linspace(0, 1, 100_000))
        >>> with quarry.open(path) as ds:
        ...     _ = ds.build_index()
        ...     sel = ds.query("x > 0.123456")
        ...     n = sel.count()
        ...     [(a.condition, a.path) for a in sel.access()]
        [('/x > 0.123456', 'index')]
        """
        return self._executor.access()

    def save(self, path: str) -> None:
        """Keep the rows on disk (compact: a Roaring bitmap per block) to fetch
        more variables later with :meth:`quarry.Dataset.load_selection`."""
        from quarry.query.saved import save

        save(self, path)

    @on_own_threads
    def count(self) -> int:
        """Number of rows where the query is true."""
        if self._count is None:
            if self._rows is not None or self.plan is None:
                self._count = len(self.rows)
            elif self._boxes is not None:
                self._check_current()
                self._count = self._boxes.counts()[0]
                self._counted_by_box = True
                if self._made is not None:  # else noted when it is made
                    self._made.box_counted(self.plan)
            else:
                answer = self._reading.count_or_box(self.plan)
                if isinstance(answer, SmallBox) and self._keep is not None:
                    self._keep([answer])
                self._count = counted(answer)
        return self._count

    def count_or_box(self) -> int | SmallBox:
        """:meth:`count`, or the small box that gives it (see
        :meth:`Executor.count_or_box <quarry.query.execute.Executor.count_or_box>`),
        for a series to count its steps' boxes in one call."""
        if self._count is not None or self._rows is not None or self.plan is None:
            return self.count()
        return self._reading.count_or_box(self.plan)

    @on_own_threads
    def ids(self) -> npt.NDArray[np.int64]:
        """Flat row-major positions of the hits, ascending: converted from the
        rows once, then the same read-only array on every call (the values,
        outputs and joins of a selection all ask for it). An answer taken
        later (:meth:`set_answer`) is converted afresh.

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "i.h5")
        >>> with h5py.File(path, "w") as f:
        ...     f["x"] = np.arange(6.0)
        >>> with quarry.open(path) as ds:
        ...     sel = ds.query("x > 3")
        ...     sel.ids().tolist(), sel.ids() is sel.ids(), sel.ids().flags.writeable
        ([4, 5], True, False)
        """
        rows = self.rows
        if self._ids is None or self._ids[0] is not rows:
            ids = self._executor.ids_of(rows)
            ids.flags.writeable = False  # one array shared by every caller
            self._ids = (rows, ids)
        return self._ids[1]

    def coords(self) -> npt.NDArray[np.int64]:
        """N-d indices of the hits, one row per hit (shape ``(count, ndim)``)."""
        import numpy as np

        ids = self.ids()
        if not self.shape:  # one element picked (x[2]): a hit is at no index, as argwhere says
            return np.zeros((len(ids), 0), np.int64)
        return np.stack(np.unravel_index(ids, self.shape), axis=1).astype(np.int64)

    @on_own_threads
    def values(self, name: str) -> npt.NDArray[np.generic]:
        """Values of variable ``name`` at the hits (any variable of the table's shape)."""
        import numpy as np

        var = self._table_variable(name)
        cached = self._values.get(var.key)
        if cached is None:
            ids = self.ids()
            if len(ids) == 0:
                cached = self._reading.physical(var, np.empty(0, dtype=var.dtype))
            else:
                cached = self._reading.values_at(var, ids)
            self._values[var.key] = cached
        return cached

    def evaluate(self, rows: bool, progress: Callable[[int], object]) -> None:
        """Answer now, a run of blocks at a time (four per thread, so every
        thread stays busy), calling ``progress`` with the rows answered after
        each run (a progress bar's ``update``): the rows with ``rows``, else
        only the count. The answer is the one :meth:`rows` or :meth:`count`
        gives in one go.

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "p.h5")
        >>> with h5py.File(path, "w") as f:
        ...     _ = f.create_dataset("x", data=np.arange(100.0))
        >>> with quarry.open(path, jobs=1) as ds:
        ...     _ = ds.build_index(block_len=10)
        ...     sel = ds.query("x >= 55")
        ...     sel.evaluate(rows=False, progress=print)
        ...     sel.count()
        40
        40
        20
        45
        """
        table = self.table
        n_blocks = -(-table.n_rows // table.block_len)
        step = 4 * (self.jobs or jobs())
        found = _core.RowSet.empty(table.n_rows, table.block_len)
        count = 0
        for first in range(0, n_blocks, step):
            part = self.share(first, first + step)
            if rows:
                found = found | part.rows
            else:
                count += part.count()
            progress(min(table.n_rows, (first + step) * table.block_len) - first * table.block_len)
        if rows:
            self.set_answer(rows=found)
        else:
            self.set_answer(count=count)

    def share(self, first: int, stop: int) -> Selection:
        """The same query answered only on blocks ``[first, stop)`` of the
        table (rows ``first * block_len`` up to ``stop * block_len``): a
        rank's share of the work. Its hits are the whole answer's hits there.

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "b.h5")
        >>> with h5py.File(path, "w") as f:
        ...     _ = f.create_dataset("x", data=np.arange(10.0))
        >>> with quarry.open(path) as ds:
        ...     _ = ds.build_index(block_len=4)
        ...     ds.query("x > 2").share(1, 2).ids().tolist()
        [4, 5, 6, 7]
        """
        part = self._reading.share(first, stop)
        assert part.part is not None
        rows = None
        if self.plan is None:  # a loaded selection: its rows are known
            rows = self.rows & part.part
        elif part.part.is_empty():  # nothing to evaluate
            rows = part.part
        return Selection(self.dataset, self.query, part, self._planned, path=self.path, rows=rows)

    @on_own_threads
    def histogram(
        self,
        names: str | list[str],
        bins: Any = 10,
        range: Any = None,
        weights: str | None = None,
    ) -> Histogram:
        """Histogram of the selected rows' values, like ``numpy.histogram`` (one
        name) or ``numpy.histogramdd`` (two or three), unpacking as
        ``counts, edges``; see :mod:`quarry.query.histogram` for when the
        index answers without reading data."""
        from quarry.query.histogram import combine

        return combine([self.histogram_part(names, weights)], bins, range)

    def histogram_part(self, names: str | list[str], weights: str | None = None) -> Part:
        """What :meth:`histogram` bins: the hits of ``names`` (and ``weights``)."""
        from quarry.query.histogram import Part

        variables = [
            self._table_variable(n) for n in ([names] if isinstance(names, str) else names)
        ]
        weight = self._table_variable(weights) if weights is not None else None
        return Part(self._reading, self.rows, variables, weight)

    def coords_of(self, name: str) -> npt.NDArray[np.int64]:
        """N-d indices of the hits in variable ``name``'s own array: where a
        query compared a subarray (``x[10:20, 5]``), its rows' positions in
        the whole of ``x``."""
        import numpy as np

        var = self._table_variable(name)
        ids = self.ids()
        if var.subarray is None:
            return self.coords()
        coords = var.subarray.base_coords(ids)
        return np.stack(coords, axis=1).astype(np.int64).reshape(len(ids), len(coords))

    def check_columns(self, names: list[str]) -> None:
        """Raise the error :meth:`values` would raise for any of ``names``
        (unknown, ambiguous, of another shape), reading nothing: a command
        says so before its work begins.

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "c.h5")
        >>> with h5py.File(path, "w") as f:
        ...     f["x"], f["y"] = np.arange(4.0), np.arange(4.0)
        >>> with quarry.open(path) as ds:
        ...     ds.query("x > 1").check_columns(["y", "z"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        quarry.errors.UnknownVariableError: no variable 'z' in ...
        """
        for name in names:
            self._table_variable(name)

    def _table_variable(self, name: str) -> VariableInfo:
        """The variable (or subarray) ``name`` refers to, as a column of the
        table: a bare name the query used with subscripts means that subarray."""
        var = self.dataset.variable(name, self.path)
        table = self._executor.table
        if var.shape == self.shape or table.axis_of(var) is not None:
            return var
        parts = [v for v in self.variables if v.path == var.path]
        if len(parts) == 1 and var.subarray is None:
            return parts[0]
        raise ShapeMismatchError(
            f"{var.key} has shape {var.shape} but the query ran over shape {self.shape}"
            + (f"; name one of {', '.join(v.key for v in parts)}" if parts else "")
        )

    def output_table(self, names: list[str], indices: bool = True) -> OutputTable:
        """The hits as columns (see :mod:`quarry.outputs.columns` for the
        names): ``quarry_row``, one ``quarry_index_<dim>`` per axis (left out
        with ``indices=False``), then each named variable's values at the
        hits with its attributes; a variable named twice appears once.

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "ids.h5")
        >>> with h5py.File(path, "w") as f:
        ...     f["e"], f["id"] = np.arange(5.0), np.arange(5) * 100
        ...     f["e"].attrs["units"] = "GeV"
        >>> with quarry.open(path) as ds:
        ...     table = ds.query("e > 2").output_table(["e", "id"], indices=False)
        >>> {k: v.tolist() for k, v in table.columns.items()}
        {'quarry_row': [3, 4], 'e': [3.0, 4.0], 'id': [300, 400]}
        >>> table.attrs["e"]["units"]
        'GeV'
        """
        import numpy as np

        from quarry.expr.names import within_context
        from quarry.outputs.columns import INDEX, ROW, build_table

        ids = self.ids()
        own: list[tuple[str, npt.NDArray[np.generic]]] = [(ROW, ids)]
        if indices:
            dims = self._executor.table.dims or tuple(str(i) for i in range(len(self.shape)))
            for dim, along in zip(dims, np.unravel_index(ids, self.shape), strict=True):
                own.append((INDEX + dim, along.astype(np.int64)))
        chosen: dict[str, tuple[str, VariableInfo, npt.NDArray[np.generic]]] = {}
        for name in names:
            var = self._table_variable(name)
            # A part of a variable named with its subscripts is its own column.
            key = var.key if "[" in name else var.path
            if key not in chosen:
                if self._executor.scales(var) is not None:  # the values are in SI units now
                    var = replace(var, attrs={**var.attrs, "unitSI": 1.0})
                chosen[key] = (key, var, self.values(name))
        # Named from the context's group (a step's), as bare names resolve:
        # every step of a series then gives the same columns.
        within = [within_context(key, self.path) for key in chosen]
        if None not in within and len(set(within)) == len(within):
            chosen = {
                key: (str(inner), var, values)
                for inner, (key, (_, var, values)) in zip(within, chosen.items(), strict=True)
            }
        return build_table(own, list(chosen.values()))

    def columns(self, names: list[str], indices: bool = True) -> dict[str, npt.NDArray[np.generic]]:
        """The columns of :meth:`output_table`, by name."""
        return self.output_table(names, indices).columns

    def extract(self, path: str, names: list[str]) -> None:
        """Write the hits (``quarry_row``, per-axis indices, values of
        ``names`` with their attributes) to ``path``: ``.h5``, ``.nc`` or
        ``.parquet`` with the query, the source and its checksum, and the
        Quarry version recorded, and the group the query ran in (``path``,
        a step's); ``.npy`` and ``.csv`` keep their flat form (``quarry_row``
        then the values)."""
        from quarry.outputs.writers import provenance, refuse_inputs, write_values

        refuse_inputs(path, [self.dataset.path])
        flat = path.lower().endswith((".npy", ".csv"))
        table = self.output_table(names, indices=not flat)
        picked = {"path": self.path} if self.path else {}
        write_values(path, table, {**provenance(self.dataset.path, self.query), **picked})

    def interpolate(
        self,
        fields: Mapping[str, str | os.PathLike[str]],
        at: Sequence[str] = ("x", "y", "z"),
        *,
        grid: str | GridSpec | None = None,
        method: str | None = None,
        outside: str = "nan",
        values: Sequence[str] = (),
    ) -> Interpolated:
        """Mesh fields interpolated at the hits' positions (the variables
        ``at``, one per field axis, axis 0 first): ``fields`` maps a column
        name to ``FILE``, ``FILE:VAR`` or either with subscripts
        (``"bx.bin[:, 64, 64]"``); ``grid`` is ``"origin=.. spacing=.."``
        where the file has no coordinate variables; ``method`` (``linear``,
        ``bilinear``, ``trilinear``) is the one ``at`` calls for when None;
        ``outside="clamp"`` moves points outside the grid to its edge
        instead of giving NaN. The table holds ``quarry_row``, ``values``
        and one column per field; see :mod:`quarry.join`. A field written
        for a series (``"bx_{step}.bin"``, ``"bx_*.bin"``, see
        :mod:`quarry.join.series`) takes this selection's step: the step
        group its ``path`` names (``Step#5`` reads ``bx_5.bin``).

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> d = tempfile.mkdtemp()
        >>> with h5py.File(os.path.join(d, "p.h5"), "w") as f:
        ...     f["x"], f["e"] = np.array([0.5, 2.0, 9.0]), np.array([1.0, 2.0, 3.0])
        >>> with h5py.File(os.path.join(d, "f.h5"), "w") as f:
        ...     f["bx"] = np.array([0.0, 10.0, 20.0])
        >>> with quarry.open(os.path.join(d, "p.h5")) as ds:
        ...     t = ds.query("e > 1").interpolate({"bx": os.path.join(d, "f.h5")}, at=["x"],
        ...                                       grid="origin=0 spacing=1", values=["e"])
        >>> {k: v.tolist() for k, v in t.columns.items()}
        {'quarry_row': [1, 2], 'e': [2.0, 3.0], 'bx': [20.0, nan]}
        """
        from quarry.join import interpolate
        from quarry.join.series import member_fields

        at = name_list(at)
        # A series' member gets its fields filled in already: filling them
        # again leaves them as they are.
        return interpolate(
            self,
            member_fields(fields, [self.step()])[0],
            at,
            grid=grid,
            method=method,
            outside=outside,
            values=values,
            clusters=self._clusters(at),
        )

    def step(self) -> int:
        """This selection's step: that of the step group its ``path`` names,
        else 0 (a file without steps is a series' member at position 0)."""
        from quarry.query.series import step_named

        if self.path is None:
            return 0
        step, _ = step_named(self.dataset.variables(), self.path)
        return 0 if step is None else step

    def _clusters(self, at: Sequence[str]) -> list[BinAxis] | None:
        """The bins of each variable of ``at`` in a fresh reorganised copy of
        this table that holds them all (see :mod:`quarry.join.groups`); None
        where there is none. A stale or damaged copy is refused, as a query
        refuses it."""
        try:
            paths = [self._table_variable(a) for a in at]
        except QuarryError:
            return None  # the join says what is wrong with them
        if any(v.subarray is not None for v in paths):
            return None
        copy = self.dataset._reorganised([v.path for v in paths])
        if copy is None:
            return None
        for member in copy.members:
            axes = {axis.path: axis for axis in member.entry.axes}
            if member.entry.rows == self.table.n_rows and all(v.path in axes for v in paths):
                return [axes[v.path] for v in paths]
        return None

    def to_pandas(self, names: list[str]) -> Any:
        """The hits as a ``pandas.DataFrame`` indexed by ``quarry_row``."""
        pandas = _optional("pandas", "pandas")
        table = self.output_table(names)
        return pandas.DataFrame(table.columns).set_index(table.row)

    def to_arrow(self, names: list[str]) -> Any:
        """The hits as a ``pyarrow.Table`` (``quarry_row``, per-axis indices,
        values), each variable's attributes as its field's metadata."""
        _optional("pyarrow", "pyarrow")
        from quarry.outputs.columns import arrow_table

        return arrow_table(self.output_table(names))

    def to_xarray(self, names: list[str]) -> Any:
        """The hits as an ``xarray.Dataset`` along a ``quarry_hit``
        dimension, with ``quarry_row`` and the per-axis indices as
        coordinates and each variable's attributes (its fill value in
        ``encoding``, as xarray keeps it)."""
        xarray = _optional("xarray", "xarray")
        table = self.output_table(names)
        coords = {k: (table.dim, table.columns[k]) for k in table.own}
        data = {}
        for name, values in table.columns.items():
            if name in table.own:
                continue
            attrs = dict(table.attrs.get(name, {}))
            encoding = {k: attrs.pop(k) for k in ("_FillValue", "missing_value") if k in attrs}
            data[name] = xarray.Variable(table.dim, values, attrs, encoding)
        return xarray.Dataset(
            data, coords=coords, attrs={"query": self.query, "source": self.dataset.path}
        )

    def __len__(self) -> int:
        return self.count()

    def __repr__(self) -> str:
        return f"Selection({self.query!r}, shape={self.shape})"


def _optional(module: str, package: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(
            f"this needs {package}, which is not installed: pip install {package}"
        ) from None

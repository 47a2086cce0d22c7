"""Series dispatch: one query over every member of a series, and the answers
gathered per member.

A *member* is one (file, step group) of a series (see :mod:`quarry.series`):
the steps of a file are its groups whose names end in a number and share one
prefix (``Step#0 … Step#719``, the H5Part layout; ADIOS2 steps read the same
way), or openPMD's iterations, or the groups a context path names. A query
is evaluated in each member, its bare names resolving inside the member's
step group (see :mod:`quarry.expr.names`), and gives per-member results in
order (:class:`SeriesSelection`); a failure names the member's file and step.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, overload

from quarry.errors import QuarryError, QuerySyntaxError, SeriesMemberError
from quarry.formats.sources import natural_key
from quarry.outputs.columns import FILE, STEP, common_dtypes, own_name
from quarry.records import record

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from quarry.formats.base import VariableInfo
    from quarry.join import GridSpec, Interpolated
    from quarry.query.boxes import StepBoxes
    from quarry.query.execute import SmallBox
    from quarry.query.histogram import Bins, Histogram, Range
    from quarry.query.selection import Runner, Selection

_STEP_NAME = re.compile(r"^(.*?)(\d+)$")


@record
class Member:
    """One (file, step group) of a series; ``group`` is the full path of the
    step group, the context its names resolve in (``None``: the whole file)."""

    file: str
    step: int | None
    group: str | None

    def label(self, several_files: bool) -> str:
        """This member's group in an output file: its step group (``Step#3``),
        under the file's name when the series spans files.

        Examples
        --------
        >>> Member("/d/run_2.h5", 3, "/Step#3").label(several_files=True)
        'run_2.h5/Step#3'
        """
        inner = self.group.strip("/") if self.group else None
        if several_files or inner is None:
            base = os.path.basename(self.file.rstrip("/"))
            return f"{base}/{inner}" if inner else base
        return inner


def step_groups(
    variables: Sequence[VariableInfo], context: str | None = None
) -> list[tuple[int, str]]:
    """(step number, group path) of a file's step groups, in step order: the
    groups the format's ``context`` names (openPMD's ``/data/*``) if given, else
    the top-level groups whose names end in a number and share one prefix (the
    prefix most groups share, if several do).

    Examples
    --------
    >>> import numpy as np
    >>> from quarry.formats.base import VariableInfo
    >>> paths = ["/Step#10/x", "/Step#2/x", "/Step#2/y", "/mesh3/m", "/notes"]
    >>> step_groups([VariableInfo(p, (1,), np.dtype("f4")) for p in paths])
    [(2, '/Step#2'), (10, '/Step#10')]
    >>> pmd = ["/data/10/particles/e/x", "/data/2/particles/e/x"]
    >>> step_groups([VariableInfo(p, (1,), np.dtype("f4")) for p in pmd], "/data/*")
    [(2, '/data/2'), (10, '/data/10')]
    """
    if context is not None:
        return groups_named(variables, context)
    by_prefix: dict[str, dict[str, int]] = {}
    # Each top-level group once: a step holds many variables.
    tops = {_top_group(info.path) for info in variables}
    for top in filter(None, tops):
        match = _STEP_NAME.match(top)
        if match:
            by_prefix.setdefault(match.group(1), {})[top] = int(match.group(2))
    if not by_prefix:
        return []
    prefix = max(sorted(by_prefix), key=lambda p: len(by_prefix[p]))
    return sorted((step, "/" + name) for name, step in by_prefix[prefix].items())


def steps_holding(candidates: Sequence[str], groups: set[str]) -> set[str] | None:
    """The step groups (of ``groups``, paths without a trailing ``/``) that
    hold the ambiguous name's ``candidates``; None where one of them lies
    outside every step: answered step by step, that one would be left out,
    so the name is ambiguous (``ions_0/energy`` beside the steps
    ``electrons_*``).

    Examples
    --------
    >>> sorted(steps_holding(["/Step#0/x", "/Step#1/x"], {"/Step#0", "/Step#1"}))
    ['/Step#0', '/Step#1']
    >>> steps_holding(["/e_0/x", "/e_1/x", "/i_0/x"], {"/e_0", "/e_1"}) is None
    True
    """
    held: set[str] = set()
    for candidate in candidates:
        parts = candidate.split("/")
        above = {"/".join(parts[:k]) for k in range(2, len(parts))} & groups
        if not above:
            return None
        held |= above
    return held


def step_named(variables: Sequence[VariableInfo], path: str) -> tuple[int | None, str | None]:
    """(step number, group path) of the one step group the context ``path``
    names (``Step#2``, ``/Step#2``), or (None, None) where it names none or
    several, or a group that is not a step.

    Examples
    --------
    >>> import numpy as np
    >>> from quarry.formats.base import VariableInfo
    >>> paths = ["/Step#0/x", "/Step#2/x", "/mesh/m"]
    >>> vs = [VariableInfo(p, (1,), np.dtype("f4")) for p in paths]
    >>> step_named(vs, "Step#2"), step_named(vs, "mesh"), step_named(vs, "Step#*")
    ((2, '/Step#2'), (None, None), (None, None))
    """
    named = groups_named(variables, path)
    steps = dict((group, step) for step, group in step_groups(variables))
    if len(named) == 1 and named[0][1] in steps:
        group = named[0][1]
        return steps[group], group
    return None, None


def _top_group(path: str) -> str | None:
    """The top-level group holding the variable ``path``; None for a
    variable at the root."""
    head, inside, _ = path.strip("/").partition("/")
    return head if inside else None


def groups_named(
    variables: Sequence[VariableInfo], path: str, steps: str | None = None
) -> list[tuple[int, str]]:
    """(step number, group path) of the groups a context path names; the step
    is that of the step group holding it where the format names them
    (``steps``: openPMD's iterations), else the number ending the deepest
    group name that ends in one, else the group's position."""
    from quarry.expr.names import matching_groups

    holders = step_groups(variables, steps) if steps is not None else []
    out = []
    for k, group in enumerate(matching_groups(variables, path)):
        step = k
        held = [s for s, g in holders if group == g or group.startswith(g + "/")]
        for part in [] if held else reversed([p for p in group.split("/") if p]):
            match = _STEP_NAME.match(part)
            if match:
                step = int(match.group(2))
                break
        out.append((held[0] if held else step, group))
    return sorted(out, key=lambda sg: (sg[0], natural_key(sg[1])))


def _exact_columns(frames: list[Any]) -> None:
    """Give each column one dtype across the members' ``frames`` (in place)
    that keeps every value: pandas would make uint64 beside float64 float64,
    rounding values past 2**53."""
    import numpy as np

    from quarry.outputs.columns import exact_common_dtype

    names = dict.fromkeys(name for frame in frames for name in frame.columns)
    for name in names:
        held = [f for f in frames if name in f.columns]
        dtypes = {f[name].dtype for f in held}
        if len(dtypes) < 2 or not all(isinstance(d, np.dtype) for d in dtypes):
            continue
        common = exact_common_dtype(dtypes)
        for frame in held:
            frame[name] = frame[name].astype(object if common is None else common)


@contextlib.contextmanager
def few_collections() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a series' members are
    opened, planned or counted one after another, and resumed at the end.

    Each member makes thousands of small objects (its manifest, names,
    plan), freed by reference counting as it goes; their allocations would
    otherwise run the collector hundreds of times over every object the
    process holds: a third of a cold count over 720 files. Where collection
    was paused already (by the caller, or another thread) it is left so.

    Examples
    --------
    >>> import gc
    >>> with few_collections():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def at_member(member: Member, work: Callable[[], Any]) -> Any:
    """``work()``, its errors (other than syntax) told which member they came from."""
    try:
        return work()
    except QuerySyntaxError:
        raise
    except QuarryError as exc:
        raise SeriesMemberError(member.file, member.step, exc) from exc


class MemberSelections(Sequence["Selection"]):
    """Each member's selection, made when first read: a batch's counts come
    without them (:meth:`quarry.Series.query_many`), and a query whose rows
    are asked for afterwards is planned in its members then.

    Examples
    --------
    >>> made = MemberSelections([Member("a.h5", 0, None)], lambda m: m.file)
    >>> made[0], len(made)
    ('a.h5', 1)
    """

    def __init__(self, members: list[Member], select: Callable[[Member], Selection]) -> None:
        self._members = members
        self._select = select
        self._made: dict[int, Selection] = {}

    @overload
    def __getitem__(self, i: int) -> Selection: ...
    @overload
    def __getitem__(self, i: slice) -> list[Selection]: ...
    def __getitem__(self, i: int | slice) -> Selection | list[Selection]:
        if isinstance(i, slice):
            return [self[k] for k in range(len(self))[i]]
        k = range(len(self))[i]  # an IndexError past the end, as a list's
        if k not in self._made:
            self._made[k] = self._select(self._members[k])
        return self._made[k]

    def __len__(self) -> int:
        return len(self._members)


def _member_counts(
    members: Sequence[Member], selections: Sequence[Selection], kept: StepBoxes | None
) -> tuple[list[int], list[SmallBox | None]]:
    """Each member's count, and its box where one gave it: the boxes counted
    in one call of the core, the members ``kept`` holds no box for asked of
    their selection (made only then)."""
    from quarry import _core
    from quarry.query.execute import SmallBox

    answers: list[int | SmallBox] = []
    specs = []
    for k, member in enumerate(members):
        box = kept.boxes[k] if kept is not None else None
        if box is None:
            answer = at_member(member, selections[k].count_or_box)
            if isinstance(answer, SmallBox) and not answer.empty:
                specs.append(answer.spec)
            answers.append(answer)
        else:
            spec = kept.specs[k] if kept is not None else None
            if spec is not None:
                specs.append(spec)
            answers.append(box)
    counted = iter(_core.count_boxes(specs) if specs else [])
    counts = [a if isinstance(a, int) else 0 if a.empty else next(counted) for a in answers]
    boxes = [a if isinstance(a, SmallBox) else None for a in answers]
    return counts, boxes


class SeriesSelection:
    """A query's answer over a series: one :class:`quarry.Selection` per member,
    in order. Iterating gives ``(member, selection)`` pairs.

    Examples
    --------
    >>> import quarry, h5py, numpy as np, tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> for k in (1, 2):
    ...     with h5py.File(os.path.join(d, f"run_{k}.h5"), "w") as f:
    ...         for s in (0, 1):
    ...             f[f"Step#{s}/e"] = np.arange(10.0) + 3 * s + k
    >>> with quarry.open_series(os.path.join(d, "run_*.h5")) as series:  # doctest: +ELLIPSIS
    ...     sel = series.query("e > 8")
    ...     print(sel.count(), sel.counts())
    ...     print(sel.per_step()[1])
    ...     print([ids.tolist() for ids in sel.ids()][3])
    16 [2, 5, 3, 6]
    {'file': '.../run_1.h5', 'step': 1, 'count': 5}
    [4, 5, 6, 7, 8, 9]
    """

    def __init__(
        self,
        query: str,
        members: list[Member],
        selections: Sequence[Selection],
        counts: list[int] | None = None,
        boxes: StepBoxes | None = None,
        keep: Callable[[list[SmallBox | None]], None] | None = None,
    ) -> None:
        self.query = query
        self.members = members
        self.selections = selections
        self._counts = counts
        """Hits per member, when known already (a batch counts without
        making each member's selection; see :class:`MemberSelections`)."""
        self._boxes = boxes
        """The members' boxes the series kept from this query asked before."""
        self._keep = keep
        """Where the boxes the counts are made from go to be kept."""

    def answer(self, runner: Runner, rows: bool = False, names: Sequence[str] = ()) -> bool:
        """Answer every member now with ``runner`` (:mod:`quarry.parallel.runners`):
        the counts, or with ``rows`` the hits and the values of ``names``.
        Returns whether this process holds the answer."""
        return runner.answer(self.selections, rows, names)

    def counts(self) -> list[int]:
        """Hits per member, in order."""
        if self._counts is None:
            if self._boxes is not None and self._boxes.whole:  # the core's alone
                self._counts = self._boxes.counts()
                return self._counts
            with few_collections():
                self._counts, boxes = _member_counts(self.members, self.selections, self._boxes)
            if self._keep is not None and any(b is not None for b in boxes):
                self._keep(boxes)
        return self._counts

    def count(self) -> int:
        """Hits over the whole series."""
        return sum(self.counts())

    def per_step(self) -> list[dict[str, Any]]:
        """``{"file", "step", "count"}`` per member, in order (JSON-ready; ``step``
        is ``None`` for a file without step groups)."""
        return [
            {"file": m.file, "step": m.step, "count": c}
            for m, c in zip(self.members, self.counts(), strict=True)
        ]

    def ids(self) -> list[npt.NDArray[np.int64]]:
        """Flat row-major ids of the hits in each member."""
        return [at_member(m, sel.ids) for m, sel in self]

    def values(self, name: str) -> list[npt.NDArray[np.generic]]:
        """Values of ``name`` (resolved in each member's step group) at each
        member's hits."""
        return [at_member(m, partial(sel.values, name)) for m, sel in self]

    def extract(self, path: str, names: Sequence[str]) -> None:
        """Write the hits to ``path`` with one group per member (``/Step#3``,
        or ``/run_2.h5/Step#3`` over several files), each holding
        ``quarry_row``, the per-axis indices and the values of ``names``
        (named as :mod:`quarry.outputs.columns` says); the query and every
        source's size, time and checksum are root attributes. HDF5 (``.h5``)
        and NetCDF-4 (``.nc``) hold groups; Parquet (``.parquet``) holds one
        table with ``quarry_group``, ``quarry_file`` and ``quarry_step``
        columns (see :func:`quarry.outputs.writers.write_groups`)."""
        from quarry.outputs.writers import refuse_inputs, sources_provenance, write_groups

        files = list(dict.fromkeys(m.file for m in self.members))
        refuse_inputs(path, files)
        groups = {}
        for m, sel in self:
            table = at_member(m, partial(sel.output_table, list(names)))
            step = -1 if m.step is None else m.step
            groups[m.label(len(files) > 1)] = (table, {"file": m.file, "step": step})
        write_groups(path, groups, sources_provenance(files, self.query))

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
        """Mesh fields interpolated at every member's hits, as
        :meth:`quarry.Selection.interpolate` does for one, in one table led
        by ``quarry_step``: each member's step (its position in the series
        for a file without steps), then its rows in ascending order; over
        several files ``quarry_file``, the member's file, comes first. A field
        is one for all members or one per member: ``{step}`` in its text is
        the member's step (``"bx_{step}.bin"``), a ``*`` in its file name
        takes the matching files in natural order, one per member (see
        :mod:`quarry.join.series`).

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> d = tempfile.mkdtemp()
        >>> with h5py.File(os.path.join(d, "p.h5"), "w") as f:
        ...     f["Step#0/x"], f["Step#1/x"] = np.array([0.5, 1.5]), np.array([1.0, 9.0])
        >>> for step in (0, 1):
        ...     with h5py.File(os.path.join(d, f"f{step}.h5"), "w") as f:
        ...         f["bx"] = np.array([0.0, 10.0, 20.0]) * (step + 1)
        >>> with quarry.open_series(os.path.join(d, "p.h5")) as series:
        ...     t = series.query("x > 0.6").interpolate(
        ...         {"bx": os.path.join(d, "f{step}.h5")}, at=["x"], grid="origin=0 spacing=1")
        >>> {k: v.tolist() for k, v in t.columns.items()}
        {'quarry_step': [0, 1, 1], 'quarry_row': [1, 0, 1], 'bx': [15.0, 20.0, nan]}
        """
        from quarry.errors import JoinArgumentError
        from quarry.join.series import concatenate, field_texts, member_fields, member_steps

        if not self.members:
            raise JoinArgumentError("the series has no members to interpolate at")
        steps = member_steps([m.step for m in self.members])
        texts = field_texts(fields)
        per_member = member_fields(texts, steps)
        tables = []
        for (m, sel), own in zip(self, per_member, strict=True):
            join = partial(
                sel.interpolate, own, at, grid=grid, method=method, outside=outside, values=values
            )
            try:
                tables.append(join())
            except JoinArgumentError:
                raise  # the arguments are wrong for every member alike
            except QuarryError as exc:
                raise SeriesMemberError(m.file, m.step, exc) from exc
        return concatenate(tables, steps, [m.file for m in self.members], texts)

    def histogram(
        self,
        names: str | list[str],
        bins: Bins = 10,
        range: Range = None,
        weights: str | None = None,
    ) -> Histogram:
        """Histogram of the hits' values over every member, as
        :meth:`quarry.Selection.histogram` makes one: the edges are shared
        (NumPy's edges for all the members' values together) and the counts
        summed, each member's from its index where a single file's would be.

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> file = os.path.join(tempfile.mkdtemp(), "h.h5")
        >>> with h5py.File(file, "w") as f:
        ...     f["Step#0/e"], f["Step#1/e"] = np.arange(5.0), np.arange(5.0) + 5
        >>> with quarry.open_series(file) as series:
        ...     counts, edges = series.query("e > 2").histogram("e", bins=2)
        >>> counts.tolist(), edges.tolist()
        ([3, 4], [3.0, 6.0, 9.0])
        """
        from quarry.query.histogram import combine

        parts = [at_member(m, partial(sel.histogram_part, names, weights)) for m, sel in self]
        return combine(parts, bins, range)

    def _each(self, conversion: str, names: Sequence[str]) -> list[Any]:
        """Every member's selection converted by its method ``conversion``."""
        return [at_member(m, partial(getattr(sel, conversion), list(names))) for m, sel in self]

    def to_arrow(self, names: Sequence[str]) -> Any:
        """The hits of every member as one ``pyarrow.Table`` in long format:
        ``quarry_file`` and ``quarry_step`` columns (``quarry_step`` null for a
        file without step groups), then each member's own columns as
        :meth:`quarry.Selection.to_arrow` gives them (the hits' positions in
        the member, their coordinates, the values of ``names``).

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> file = os.path.join(tempfile.mkdtemp(), "a.h5")
        >>> with h5py.File(file, "w") as f:
        ...     f["Step#0/e"], f["Step#1/e"] = np.array([1.0, 3.0]), np.array([4.0, 0.0])
        >>> with quarry.open_series(file) as series:
        ...     table = series.query("e > 2").to_arrow(["e"])
        >>> table.column("quarry_step").to_pylist(), table.column("e").to_pylist()
        ([0, 1], [3.0, 4.0])
        """
        tables = []
        # Each member's conversion checks that pyarrow is installed, first.
        for m, table in zip(self.members, self._each("to_arrow", names), strict=True):
            pyarrow = importlib.import_module("pyarrow")

            file_name, step_name = (own_name(n, table.column_names) for n in (FILE, STEP))
            n = table.num_rows
            table = table.add_column(0, step_name, pyarrow.array([m.step] * n, pyarrow.int64()))
            table = table.add_column(0, file_name, pyarrow.array([m.file] * n, pyarrow.string()))
            tables.append(table)
        return pyarrow.concat_tables(self._same_types(tables))

    def _same_types(self, tables: list[Any]) -> list[Any]:
        """The members' Arrow tables with each column of one type, the one
        that keeps every value (see :func:`~quarry.outputs.columns.common_dtypes`)."""
        import numpy as np
        import pyarrow

        seen: dict[str, dict[str, Any]] = {}
        for m, table in zip(self.members, tables, strict=True):
            label = m.label(several_files=True)
            for f in table.schema:
                if pyarrow.types.is_integer(f.type) or pyarrow.types.is_floating(f.type):
                    seen.setdefault(f.name, {})[label] = np.dtype(f.type.to_pandas_dtype())
        mixed = {name: dtypes for name, dtypes in seen.items() if len(set(dtypes.values())) > 1}
        if not mixed:
            return tables
        instead = "take each member's table (Selection.to_arrow), or to_pandas"
        common = common_dtypes(mixed, "cannot make one Arrow table", instead)
        return [
            table.cast(
                pyarrow.schema(
                    [
                        f.with_type(pyarrow.from_numpy_dtype(common[f.name]))
                        if f.name in common
                        else f
                        for f in table.schema
                    ],
                    metadata=table.schema.metadata,
                )
            )
            for table in tables
        ]

    def to_pandas(self, names: Sequence[str]) -> Any:
        """The hits of every member as one ``pandas.DataFrame`` in long format:
        ``quarry_file`` and ``quarry_step`` columns (``quarry_step`` a nullable
        integer, missing for a file without step groups), then each member's own columns as
        :meth:`quarry.Selection.to_pandas` gives them, its index (the hits'
        positions in the member) made a column; one row per hit, in order.
        A variable of other dtypes in other members takes the dtype that
        holds all its values exactly, or where none does (uint64 beside
        float64) stays exact as Python numbers (``object``).

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> file = os.path.join(tempfile.mkdtemp(), "p.h5")
        >>> with h5py.File(file, "w") as f:
        ...     f["Step#0/e"], f["Step#1/e"] = np.array([1.0, 3.0]), np.array([4.0, 0.0])
        >>> with quarry.open_series(file) as series:
        ...     frame = series.query("e > 2").to_pandas(["e"])
        >>> frame["quarry_step"].tolist(), frame["e"].tolist()
        ([0, 1], [3.0, 4.0])
        """
        frames = []
        # Each member's conversion checks that pandas is installed, first.
        for m, member_frame in zip(self.members, self._each("to_pandas", names), strict=True):
            pandas = importlib.import_module("pandas")

            frame = member_frame.reset_index()
            file_name, step_name = (own_name(n, list(frame.columns)) for n in (FILE, STEP))
            frame.insert(0, step_name, pandas.array([m.step] * len(frame), dtype="Int64"))
            frame.insert(0, file_name, [m.file] * len(frame))
            frames.append(frame)
        _exact_columns(frames)
        return pandas.concat(frames, ignore_index=True)

    def __iter__(self) -> Iterator[tuple[Member, Selection]]:
        return iter(zip(self.members, self.selections, strict=True))

    def __len__(self) -> int:
        return len(self.members)

    def __repr__(self) -> str:
        return f"<SeriesSelection {self.query!r} over {len(self.members)} members>"

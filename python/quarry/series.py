"""Time series and many files: one query over every step of every file.

A series is a list of data files (given as paths, a glob pattern such as
``run_*.h5``, or a directory of data files), each file holding one step or
many step groups (``Step#0 … Step#719``, the H5Part layout; ADIOS2 steps read
the same way, as ``/Step#s/name``). Each (file, step group) is a *member*.
Members are ordered by file, in natural order (``run_2`` before ``run_10``),
then by step number.

Step groups are found by their names: the top-level groups whose names end in
a number (``^(.*?)(\\d+)$``) and share one prefix are the steps, in numeric
order. In an openPMD file the iterations are the steps (the groups its
``basePath`` names, ``/data/<iteration>``; see :mod:`quarry.formats.openpmd`),
the step being the iteration number. A file without them is one member whose
step is ``None``. A context ``path`` chooses the members instead: every group
it names is one (``Step#*``, ``run/Step#1*``, or a plain ``Step#3`` to pick
one step of every file).

A query is evaluated in each member, its bare names resolving inside the
member's step group (see :mod:`quarry.expr.names`), and gives per-member
results in order (:mod:`quarry.query.series`). Each file keeps its own
index (``run_3.h5.qidx`` beside it, or in an index directory), so files
added later need no rebuild of the others.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any

from quarry.errors import (
    BatchQueryError,
    QuarryError,
    SeriesError,
    SeriesMemberError,
    UnknownPathError,
)
from quarry.formats.sources import Sources, expand_sources
from quarry.index.layout import index_size, remove_debris
from quarry.index.maintain import IndexReport
from quarry.query.boxes import KeptBoxes, StepBoxes
from quarry.query.series import (
    Member,
    MemberSelections,
    SeriesSelection,
    at_member,
    few_collections,
    groups_named,
    step_groups,
    steps_holding,
)

if TYPE_CHECKING:
    from quarry.dataset import Dataset
    from quarry.expr.ast import Cond
    from quarry.formats.base import VariableInfo
    from quarry.index.verify import Verification
    from quarry.query.execute import SmallBox
    from quarry.query.histogram import Bins, Histogram, Range
    from quarry.query.selection import Runner, Selection
    from quarry.query.track import IdTables, Tracks
    from quarry.reorg.manifest import CopyManifest

__all__ = ["Series", "open_series"]


class Series:
    """Many files and step groups, queried as one; see :func:`open_series`.

    ``opened`` are datasets of some of the files, already open: the series
    uses them as they are and leaves closing them to their owner (a
    :class:`quarry.Dataset` whose steps answer a query as a series)."""

    def __init__(
        self,
        files: list[str],
        index: str | None = None,
        path: str | None = None,
        jobs: int | None = None,
        opened: Sequence[Dataset] = (),
        si: bool = False,
    ) -> None:
        self.files = files
        self.jobs = jobs
        self.si = si
        self.index = index
        self.path = path
        self._datasets: dict[str, Dataset] = {ds.path: ds for ds in opened}
        self._borrowed = frozenset(self._datasets)
        self._members: list[Member] | None = None
        self._id_tables: IdTables | None = None
        self._kept = KeptBoxes()
        """Each query's small boxes in the members, kept for the query asked again."""
        self._names_in_steps: set[tuple[str, str]] = set()
        """(file, name) pairs found held by the file's steps alone, checked once
        (:meth:`_check_outside_steps`: 3.6 ms a query over 720 steps, else)."""
        # One file may name its index file; otherwise ``index`` is a directory
        # holding each file's own index (made when first needed).
        self._index_dir = index is not None and not (len(files) == 1 and not os.path.isdir(index))
        self._made_index_dir = False
        if index is not None and len(files) > 1:
            if os.path.exists(index) and not os.path.isdir(index):
                raise SeriesError(
                    f"--index {index} is a file, but {len(files)} files each need their "
                    "own index: give a directory"
                )
            names: dict[str, str] = {}
            for file in files:
                base = os.path.basename(file.rstrip("/"))
                if base in names:
                    raise SeriesError(
                        f"{names[base]} and {file} would share the index {base}.qidx in "
                        f"{index}; index them into different directories"
                    )
                names[base] = file

    def dataset(self, file: str) -> Dataset:
        """The open :class:`quarry.Dataset` of one file of the series."""
        ds = self._datasets.get(file)
        if ds is None:
            from quarry.dataset import Dataset

            if self.index is not None and self._index_dir and not self._made_index_dir:
                os.makedirs(self.index, exist_ok=True)
                self._made_index_dir = True  # once, not once per file
            ds = Dataset(file, self.index, self.jobs, self.si)
            self._datasets[file] = ds
        return ds

    def verify(self) -> list[Verification]:
        """:meth:`quarry.Dataset.verify` of every file's index, in order."""
        return [self.dataset(file).verify() for file in self.files]

    @property
    def members(self) -> list[Member]:
        """Every (file, step group), in order; finding them opens every file."""
        if self._members is None:
            with few_collections():
                self._members = self._find_members()
        return self._members

    def _find_members(self) -> list[Member]:
        members: list[Member] = []
        for file in self.files:
            ds = self.dataset(file)
            variables = ds.variables()
            context = ds.driver.step_context
            if self.path is not None:
                groups = groups_named(variables, self.path, context)
                if not groups:
                    from quarry.expr.names import suggest_groups

                    raise UnknownPathError(self.path, file, suggest_groups(self.path, variables))
            else:
                groups = step_groups(variables, context)
            if groups:
                members.extend(Member(file, step, group) for step, group in groups)
            else:
                members.append(Member(file, None, None))
        return members

    def query(self, query: str, runner: Runner | None = None) -> SeriesSelection:
        """Rows where ``query`` is true in every member; see :class:`SeriesSelection`.

        The query is checked once for syntax; every member then resolves its
        names in its own step group. A member where that fails (a name missing
        from one step, a stale index of one file) raises
        :class:`~quarry.errors.SeriesMemberError` naming the file and step.
        With a ``runner`` (:mod:`quarry.parallel.runners`: threads, progress,
        MPI ranks) the counts are answered by it now; otherwise each member
        answers when read.
        """
        members = list(self.members)
        kept = self._kept.get(query, self._state()) if runner is None else None
        if kept is not None:
            # Planned in every member before, and nothing changed since.
            made = MemberSelections(members, partial(self._member_selection, query))
            return SeriesSelection(query, members, made, boxes=kept)
        from quarry.expr import parse

        tree = parse(query)  # a syntax error is the same in every member: say it once
        self._check_outside_steps(tree)
        selections = []
        with few_collections():
            for member in members:
                ds = self.dataset(member.file)
                selections.append(at_member(member, partial(ds.query_table, query, member.group)))
        if runner is not None:
            answer = SeriesSelection(query, members, selections)
            answer.answer(runner)
            return answer
        # The files as planned in (indexes opened): the boxes' columns are read
        # through the drivers of now.
        keep = partial(self._keep_boxes, query, self._state())
        return SeriesSelection(query, members, selections, keep=keep)

    def _state(self) -> tuple[tuple[object, ...], ...]:
        """What the files' plans and columns depend on (:meth:`quarry.Dataset.query_state`)."""
        return tuple(ds.query_state() for ds in self._datasets.values())

    def _keep_boxes(
        self, query: str, state: tuple[tuple[object, ...], ...], boxes: list[SmallBox | None]
    ) -> None:
        self._kept.keep(query, StepBoxes(boxes, state))

    def select_all(self, names: Sequence[str]) -> SeriesSelection:
        """Every row of each member's table that the variables ``names`` form
        (each member resolving them in its own step group): a selection with
        no condition, as :meth:`quarry.Dataset.select_all` of each step, for
        what takes a selection (values, extracts, interpolation).

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "steps.h5")
        >>> with h5py.File(path, "w") as f:
        ...     f["Step#0/x"], f["Step#1/x"] = np.array([1.0, 2.0]), np.array([3.0])
        >>> with quarry.open_series(path) as series:
        ...     sel = series.select_all(["x"])
        ...     sel.counts(), [step.tolist() for step in sel.values("x")]
        ([2, 1], [[1.0, 2.0], [3.0]])
        """
        from quarry.expr.names import names_to_select

        names = names_to_select(names)
        members = list(self.members)

        def every(m: Member) -> Selection:
            chosen: Selection = at_member(
                m, partial(self.dataset(m.file).select_table, names, m.group)
            )
            return chosen

        return SeriesSelection("", members, MemberSelections(members, every))

    def _check_outside_steps(self, tree: Cond) -> None:
        """The :class:`~quarry.errors.AmbiguousNameError` of a bare name of
        ``tree`` that a file's steps hold and that also names a variable
        outside every step of that file (two families of numbered groups): each
        member resolving it in its own step would leave that one out."""
        from quarry.errors import AmbiguousNameError
        from quarry.expr.ast import variables
        from quarry.expr.names import resolve

        names = {v.name for v in variables(tree) if not v.name.startswith("/")}
        by_file: dict[str, set[str]] = {}
        for m in self.members:
            if m.group is not None and self.path is None:
                by_file.setdefault(m.file, set()).add(m.group.rstrip("/"))
        for file, groups in by_file.items():
            todo = [n for n in names if (file, n) not in self._names_in_steps]
            listed = self.dataset(file).variables() if todo else []
            for name in todo:
                try:
                    found = resolve(name, listed, file)
                except AmbiguousNameError as exc:
                    if steps_holding(exc.candidates, groups) is None:
                        raise
                except QuarryError:
                    continue  # a member resolving it says what is wrong (each time)
                else:
                    _refuse_outside_steps(name, found.path, listed, groups)
                self._names_in_steps.add((file, name))

    def histogram(
        self,
        names: str | list[str],
        where: str | None = None,
        bins: Bins = 10,
        range: Range = None,
        weights: str | None = None,
    ) -> Histogram:
        """Histogram of variables over every member's rows where ``where`` is
        true (all rows when None), with edges shared by the members and counts
        summed; see :meth:`quarry.Dataset.histogram` and
        :meth:`SeriesSelection.histogram`.

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> file = os.path.join(tempfile.mkdtemp(), "h.h5")
        >>> with h5py.File(file, "w") as f:
        ...     f["Step#0/e"], f["Step#1/e"] = np.array([0.5, 1.5]), np.array([2.5, np.nan])
        >>> with quarry.open_series(file) as series:
        ...     series.histogram("e", bins=[0, 1, 2, 3]).counts.tolist()
        [1, 1, 1]
        """
        from quarry.query.histogram import combine

        if where is not None:
            return self.query(where).histogram(names, bins, range, weights)
        parts = [
            at_member(m, partial(self.dataset(m.file).histogram_part, names, weights, m.group))
            for m in self.members
        ]
        return combine(parts, bins, range)

    @property
    def id_tables(self) -> IdTables:
        """Id variables' tables, kept for tracks after the first (:meth:`track`)."""
        if self._id_tables is None:
            from quarry.query.track import IdTables  # NumPy: not for a count's start-up

            self._id_tables = IdTables()
        return self._id_tables

    def track(
        self, query: str, at_step: int, id_var: str = "id", names: Sequence[str] = ()
    ) -> Tracks:
        """Particles ``query`` selects at step ``at_step``, followed by their
        ``id_var`` through every member, with ``names`` read there; see
        :mod:`quarry.query.track`. Missing particles are reported, not dropped."""
        from quarry.query.track import track

        return track(self, query, at_step, id_var, names)

    def query_many(
        self,
        queries: Iterable[str],
        runner: Runner | None = None,
        *,
        labels: Sequence[str] | None = None,
    ) -> list[SeriesSelection]:
        """Each query over the series, every file opened and every index read
        once for all of them; see :mod:`quarry.query.batch`. A failure names the
        query, and the file and step.

        The batch is answered member by member (:meth:`Runner.count_members
        <quarry.query.selection.Runner.count_members>`): by a ``runner``
        (:mod:`quarry.parallel.runners`) when given, in this process
        otherwise. Under :class:`~quarry.parallel.runners.Mpi` each rank
        answers a contiguous run of members and one collective call sums
        the counts; ``labels`` name the queries in errors (default
        ``query 1``, ``query 2``, ...).

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> file = os.path.join(tempfile.mkdtemp(), "t.h5")
        >>> with h5py.File(file, "w") as f:
        ...     for s in range(2):
        ...         f[f"Step#{s}/t"] = np.arange(10.0) + s
        >>> with quarry.open_series(file) as series:
        ...     [sel.counts() for sel in series.query_many(["t < 2", "t >= 9"])]
        [[2, 1], [1, 2]]
        """
        import numpy as np

        from quarry.parallel.runners import Local
        from quarry.query.batch import batch_items, check_syntax
        from quarry.query.ranges import Shapes

        items = batch_items(queries, labels)
        check_syntax(items)
        shapes = Shapes([q for _, q in items])
        for group in shapes.groups:  # one query of a shape names every name of its group
            try:
                self._check_outside_steps(group.cond)
            except QuarryError as exc:
                raise BatchQueryError(*items[group.first], exc) from exc

        def member_counts(i: int) -> list[int]:
            m = self.members[i]
            ds = at_member(m, partial(self.dataset, m.file))

            def fail(k: int, exc: QuarryError) -> Exception:
                return BatchQueryError(*items[k], SeriesMemberError(m.file, m.step, exc))

            counts: list[int] = ds.count_table(shapes, m.group, fail)
            return counts

        runner = runner if runner is not None else Local()
        with few_collections():
            by_member = runner.count_members(member_counts, len(self.members), len(items))
        members = list(self.members)
        by_query = np.array(by_member, dtype=np.int64).reshape(len(members), len(items)).T
        return [
            SeriesSelection(
                query,
                members,
                MemberSelections(members, partial(self._member_selection, query)),
                counts=counts,
            )
            for (_, query), counts in zip(items, by_query.tolist(), strict=True)
        ]

    def _member_selection(self, query: str, member: Member) -> Selection:
        ds = self.dataset(member.file)
        selection: Selection = at_member(member, partial(ds.query_table, query, member.group))
        return selection

    def build_indexes(
        self,
        variables: list[str] | None = None,
        *,
        bins: int | None = None,
        precision: int | None = None,
        block_len: int | None = None,
        force: bool = False,
        progress: Callable[[str, int], Callable[[int], object] | None] | None = None,
        derive: list[str] | None = None,
        comm: Any = None,
        ranks_per_file: int | None = None,
    ) -> Iterator[IndexReport]:
        """Build each file's own index, one file at a time, skipping files whose
        index is up to date: built from the file as it is now, covering the
        variables asked for, with the options and derived variables (``derive``,
        see :meth:`quarry.Dataset.build_index`) asked for; ``force`` rebuilds all.

        ``progress(file, rows)`` may return a callback that is given rows as they
        are indexed. Yields one :class:`IndexReport` per file, in order.

        With an MPI communicator ``comm`` (collective: every rank calls this), the
        ranks form groups of ``ranks_per_file`` (default: ranks shared evenly
        over the files); files go to groups in turn, and a group's ranks build
        each of its files' index together (:mod:`quarry.parallel.build`). Each
        rank then yields the reports of its group's files only.

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> d = tempfile.mkdtemp()
        >>> for k in (1, 2):
        ...     with h5py.File(os.path.join(d, f"run_{k}.h5"), "w") as f:
        ...         f["e"] = np.arange(10.0)
        >>> with quarry.open_series(d) as series:
        ...     print([r.status for r in series.build_indexes(block_len=4)])
        ...     print([r.status for r in series.build_indexes(block_len=4)])
        ['built', 'built']
        ['up to date', 'up to date']
        """
        group, n_groups, group_comm = 0, 1, None
        if comm is not None and comm.size > 1:
            per_file = min(ranks_per_file or max(1, comm.size // len(self.files)), comm.size)
            group, n_groups = comm.rank // per_file, -(-comm.size // per_file)
            group_comm = comm.Split(group, comm.rank)
        for file in self.files[group::n_groups]:
            ds = self.dataset(file)
            start = time.perf_counter()
            chosen = ds.index_variables(variables, derive)
            status = "built"
            if force or not ds.index_up_to_date(chosen, bins, precision, block_len, derive):
                callback = progress(file, sum(v.size for v in chosen)) if progress else None
                ds.build_index(
                    variables,
                    bins=bins,
                    precision=precision,
                    block_len=block_len,
                    progress=callback,
                    derive=derive,
                    comm=group_comm,
                )
            else:
                status = "up to date"
                remove_debris(ds.index_path)  # what killed builds left, even when none is needed
            yield IndexReport(
                file,
                ds.index_path,
                status,
                [v.path for v in chosen],
                index_size(ds.index_path),
                round(time.perf_counter() - start, 3),
            )

    def reorganize(
        self,
        variables: list[str],
        bin_size: float | list[float] | None = None,
        bins: int | list[int] | None = None,
        *,
        part_rows: int | None = None,
        comm: Any = None,
    ) -> Iterator[tuple[str, CopyManifest]]:
        """:meth:`quarry.Dataset.reorganize` of each file, in order (names
        resolving under the series' path; each step group on its own);
        yields each file and its copy's manifest. With an MPI communicator
        ``comm`` (collective), all ranks reorganise each file together.

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> d = tempfile.mkdtemp()
        >>> for k in (1, 2):
        ...     with h5py.File(os.path.join(d, f"run_{k}.h5"), "w") as f:
        ...         f["e"] = np.arange(10.0) * k
        >>> with quarry.open_series(d) as series:
        ...     done = list(series.reorganize(["e"], bin_size=5.0))
        >>> [(os.path.basename(file), m.members[0].axes[0].count) for file, m in done]
        [('run_1.h5', 2), ('run_2.h5', 4)]
        """
        for file in self.files:
            ds = self.dataset(file)
            manifest = ds.reorganize(
                variables, bin_size, bins, self.path, part_rows=part_rows, comm=comm
            )
            yield file, manifest

    def close(self) -> None:
        """Close every file the series opened itself."""
        with few_collections():
            for file, ds in self._datasets.items():
                if file not in self._borrowed:
                    ds.close()
        self._datasets = {f: ds for f, ds in self._datasets.items() if f in self._borrowed}
        self._id_tables = None  # files opened again may have changed
        self._kept.clear()  # their columns are the closed files' maps

    def __enter__(self) -> Series:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"quarry.open_series({self.files!r})"


def open_series(
    sources: Sources,
    index: str | os.PathLike[str] | None = None,
    path: str | None = None,
    jobs: int | None = None,
    si: bool = False,
) -> Series:
    """Open many files and/or step groups as one series.

    ``sources`` is a file, a glob pattern (``"run_*.h5"``), a directory of data
    files, or a list of any of these. ``index`` is where the per-file indexes
    live (default: beside each file; a directory for read-only data). ``path``
    names the step groups (a glob such as ``Step#*``); by default they are found
    by name (see :func:`quarry.query.series.step_groups`). ``jobs``: threads per file's work, and
    ``si``: values in SI units (openPMD's ``unitSI``), as for :func:`quarry.open`.

    Examples
    --------
    >>> import quarry, h5py, numpy as np, tempfile, os
    >>> file = os.path.join(tempfile.mkdtemp(), "beam.h5")
    >>> with h5py.File(file, "w") as f:
    ...     for s in range(3):
    ...         f[f"Step#{s}/x"] = np.linspace(-1, 1, 50) * (s + 1)
    >>> with quarry.open_series(file) as series:
    ...     [(m.step, c) for m, c in zip(series.members, series.query("x > 1").counts())]
    [(0, 0), (1, 13), (2, 17)]
    """
    sidecars = () if index is None else (os.fspath(index),)
    files = expand_sources(sources, sidecars)
    return Series(files, None if index is None else os.fspath(index), path, jobs, si=si)


def _refuse_outside_steps(
    name: str, found: str, listed: Sequence[VariableInfo], groups: set[str]
) -> None:
    """Raise :class:`~quarry.errors.AmbiguousNameError` where the bare
    ``name``, which the whole file resolves to ``found`` outside every step
    (a root ``/x``), is also held by steps of ``groups``: answered step by
    step, each would take its own and the root's would be left out, so the
    count would differ from the same query without ``--per-step``.

    Examples
    --------
    >>> import numpy as np
    >>> from quarry.formats.base import VariableInfo
    >>> vs = [VariableInfo(p, (3,), np.dtype("f8")) for p in ("/x", "/Step#0/x", "/Step#1/x")]
    >>> _refuse_outside_steps("x", "/Step#0/x", vs, {"/Step#0", "/Step#1"})
    >>> _refuse_outside_steps("x", "/x", vs, {"/Step#0", "/Step#1"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    quarry.errors.AmbiguousNameError: 'x' matches 3 variables in separate groups: /x, \
/Step#0/x, /Step#1/x; write the one you mean, or ask for every step's with --path 'Step#*' \
(path= in Python); /x alone is one table, without --per-step
    """
    import re

    from quarry.errors import AmbiguousNameError

    if steps_holding([found], groups) is not None:
        return
    paths = {v.path for v in listed}
    held = [f"{g}/{name}" for g in sorted(groups) if f"{g}/{name}" in paths]
    if held:
        steps = re.sub(r"\d+$", "*", held[0][: -len(name) - 1].strip("/"))
        raise AmbiguousNameError(
            name,
            [found, *held],
            hint=f"or ask for every step's with --path '{steps}' (path= in Python); "
            f"{found} alone is one table, without --per-step",
        )

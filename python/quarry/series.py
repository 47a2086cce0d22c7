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
results in order. Each file keeps its own index (``run_3.h5.qidx`` beside it,
or in an index directory), so files added later need no rebuild of the others.
"""

from __future__ import annotations

import importlib
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any

from quarry.errors import (
    QuarryError,
    QuerySyntaxError,
    SeriesError,
    SeriesMemberError,
    UnknownPathError,
)
from quarry.formats.sources import Sources, expand_sources, natural_key
from quarry.index.layout import index_size, remove_debris
from quarry.outputs.columns import FILE, STEP, own_name

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from quarry.dataset import Dataset
    from quarry.formats.base import VariableInfo
    from quarry.index.verify import Verification
    from quarry.query.histogram import Bins, Histogram, Range
    from quarry.query.selection import Selection
    from quarry.query.track import Tracks

_STEP_NAME = re.compile(r"^(.*?)(\d+)$")


@dataclass(frozen=True)
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
        return _groups_named(variables, context)
    by_prefix: dict[str, dict[str, int]] = {}
    for info in variables:
        parts = [p for p in info.path.split("/") if p]
        if len(parts) < 2:
            continue
        match = _STEP_NAME.match(parts[0])
        if match:
            by_prefix.setdefault(match.group(1), {})[parts[0]] = int(match.group(2))
    if not by_prefix:
        return []
    prefix = max(sorted(by_prefix), key=lambda p: len(by_prefix[p]))
    return sorted((step, "/" + name) for name, step in by_prefix[prefix].items())


def _groups_named(
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
        # One file may name its index file; otherwise ``index`` is a directory
        # holding each file's own index (made when first needed).
        self._index_dir = index is not None and not (len(files) == 1 and not os.path.isdir(index))
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

            if self.index is not None and self._index_dir:
                os.makedirs(self.index, exist_ok=True)
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
            members: list[Member] = []
            for file in self.files:
                ds = self.dataset(file)
                variables = ds.variables()
                context = ds.driver.step_context
                if self.path is not None:
                    groups = _groups_named(variables, self.path, context)
                    if not groups:
                        from quarry.expr.names import _names, _suggest_groups

                        raise UnknownPathError(
                            self.path, file, _suggest_groups(self.path, _names(variables))
                        )
                else:
                    groups = step_groups(variables, context)
                if groups:
                    members.extend(Member(file, step, group) for step, group in groups)
                else:
                    members.append(Member(file, None, None))
            self._members = members
        return self._members

    def query(self, query: str) -> SeriesSelection:
        """Rows where ``query`` is true in every member; see :class:`SeriesSelection`.

        The query is checked once for syntax; every member then resolves its
        names in its own step group. A member where that fails (a name missing
        from one step, a stale index of one file) raises
        :class:`~quarry.errors.SeriesMemberError` naming the file and step.
        """
        from quarry.expr import parse

        parse(query)  # a syntax error is the same in every member: say it once
        selections = []
        for member in self.members:
            ds = self.dataset(member.file)
            selections.append(_at(member, partial(ds.query_table, query, member.group)))
        return SeriesSelection(query, list(self.members), selections)

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
            _at(m, partial(self.dataset(m.file).histogram_part, names, weights, m.group))
            for m in self.members
        ]
        return combine(parts, bins, range)

    def track(
        self, query: str, at_step: int, id_var: str = "id", names: Sequence[str] = ()
    ) -> Tracks:
        """Particles ``query`` selects at step ``at_step``, followed by their
        ``id_var`` through every member, with ``names`` read there; see
        :mod:`quarry.query.track`. Missing particles are reported, not dropped."""
        from quarry.query.track import track

        return track(self, query, at_step, id_var, names)

    def query_many(self, queries: Iterable[str]) -> list[SeriesSelection]:
        """Each query over the series, every file opened and every index read
        once for all of them; see :mod:`quarry.batch`. A failure names the
        query, and the file and step.

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
        from quarry.batch import evaluate

        items = [(f"query {k}", q) for k, q in enumerate(queries, 1)]
        return [sel for _, _, sel in evaluate(items, self._counted)]

    def _counted(self, query: str) -> SeriesSelection:
        sel = self.query(query)
        sel.counts()  # evaluated now, so a failure names this query
        return sel

    def close(self) -> None:
        """Close every file the series opened itself."""
        for file, ds in self._datasets.items():
            if file not in self._borrowed:
                ds.close()
        self._datasets = {f: ds for f, ds in self._datasets.items() if f in self._borrowed}

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


def _at(member: Member, work: Callable[[], Any]) -> Any:
    """``work()``, its errors (other than syntax) told which member they came from."""
    try:
        return work()
    except QuerySyntaxError:
        raise
    except QuarryError as exc:
        raise SeriesMemberError(member.file, member.step, exc) from exc


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

    def __init__(self, query: str, members: list[Member], selections: list[Selection]) -> None:
        self.query = query
        self.members = members
        self.selections = selections
        self._counts: list[int] | None = None

    def counts(self) -> list[int]:
        """Hits per member, in order."""
        if self._counts is None:
            self._counts = [
                _at(m, sel.count) for m, sel in zip(self.members, self.selections, strict=True)
            ]
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
        return [_at(m, sel.ids) for m, sel in self]

    def values(self, name: str) -> list[npt.NDArray[np.generic]]:
        """Values of ``name`` (resolved in each member's step group) at each
        member's hits."""
        return [_at(m, partial(sel.values, name)) for m, sel in self]

    def extract(self, path: str, names: Sequence[str]) -> None:
        """Write the hits to ``path`` with one group per member (``/Step#3``,
        or ``/run_2.h5/Step#3`` over several files), each holding
        ``quarry_row``, the per-axis indices and the values of ``names``
        (named as :mod:`quarry.outputs.columns` says); the query and every
        source's size, time and checksum are root attributes. HDF5 (``.h5``)
        and NetCDF-4 (``.nc``) hold groups; Parquet (``.parquet``) holds one
        table with ``quarry_group``, ``quarry_file`` and ``quarry_step``
        columns (see :func:`quarry.outputs.writers.write_groups`)."""
        from quarry.outputs.writers import sources_provenance, write_groups

        files = list(dict.fromkeys(m.file for m in self.members))
        groups = {}
        for m, sel in self:
            table = _at(m, partial(sel.output_table, list(names)))
            step = -1 if m.step is None else m.step
            groups[m.label(len(files) > 1)] = (table, {"file": m.file, "step": step})
        write_groups(path, groups, sources_provenance(files, self.query))

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

        parts = [_at(m, partial(sel.histogram_part, names, weights)) for m, sel in self]
        return combine(parts, bins, range)

    def _each(self, conversion: str, names: Sequence[str]) -> list[Any]:
        """Every member's selection converted by its method ``conversion``."""
        return [_at(m, partial(getattr(sel, conversion), list(names))) for m, sel in self]

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
        return pyarrow.concat_tables(tables)

    def to_pandas(self, names: Sequence[str]) -> Any:
        """The hits of every member as one ``pandas.DataFrame`` in long format:
        ``quarry_file`` and ``quarry_step`` columns (``quarry_step`` a nullable
        integer, missing for a file without step groups), then each member's own columns as
        :meth:`quarry.Selection.to_pandas` gives them, its index (the hits'
        positions in the member) made a column; one row per hit, in order.

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
        return pandas.concat(frames, ignore_index=True)

    def __iter__(self) -> Iterator[tuple[Member, Selection]]:
        return iter(zip(self.members, self.selections, strict=True))

    def __len__(self) -> int:
        return len(self.members)

    def __repr__(self) -> str:
        return f"<SeriesSelection {self.query!r} over {len(self.members)} members>"


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
    by name (see :func:`step_groups`). ``jobs``: threads per file's work, and
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


@dataclass
class IndexReport:
    """What indexing one file of a series did: ``built`` or ``up to date``."""

    file: str
    index: str
    status: str
    variables: list[str]
    bytes: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "index": self.index,
            "status": self.status,
            "variables": self.variables,
            "bytes": self.bytes,
            "seconds": self.seconds,
        }


def build_indexes(
    series: Series,
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
    ...     print([r.status for r in build_indexes(series, block_len=4)])
    ...     print([r.status for r in build_indexes(series, block_len=4)])
    ['built', 'built']
    ['up to date', 'up to date']
    """
    group, n_groups, group_comm = 0, 1, None
    if comm is not None and comm.size > 1:
        per_file = min(ranks_per_file or max(1, comm.size // len(series.files)), comm.size)
        group, n_groups = comm.rank // per_file, -(-comm.size // per_file)
        group_comm = comm.Split(group, comm.rank)
    for file in series.files[group::n_groups]:
        ds = series.dataset(file)
        start = time.perf_counter()
        chosen = ds.index_variables(variables, derive)
        status = "built"
        if force or not up_to_date(ds, chosen, bins, precision, block_len, derive):
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


def up_to_date(
    ds: Dataset,
    chosen: Iterable[VariableInfo],
    bins: int | None,
    precision: int | None,
    block_len: int | None,
    derive: list[str] | None,
) -> bool:
    """Whether ``ds``'s index is fresh and covers ``chosen`` with these
    options (None: any), so a build can be skipped."""
    if not ds.has_index:
        return False
    try:
        store = ds.index
        store.check()  # where the stat cannot prove the file unchanged: its CRCs
    except QuarryError:  # stale or damaged: rebuild
        return False
    if block_len is not None and store.block_len != block_len:
        return False
    if derive is not None:
        from quarry.index.derived import Derivation

        if store.derivations != [Derivation.parse(text) for text in derive]:
            return False
    entries = store.variables
    for var in chosen:
        entry = entries.get(var.path)
        if entry is None:
            return False
        if bins is not None and entry.bins != bins:
            return False
        if precision is not None and entry.precision != precision:
            return False
    return True

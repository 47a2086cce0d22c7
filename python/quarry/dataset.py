"""The public entry point: a data file, its variables, its index, and queries."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from quarry import _core
from quarry.errors import (
    AmbiguousNameError,
    BatchQueryError,
    ClosedDatasetError,
    IndexMissingError,
    QuarryError,
    ReorgError,
    StaleIndexError,
    UnknownVariableError,
)
from quarry.expr.names import name_list, names_to_select, resolve
from quarry.expr.parser import parse_variable
from quarry.formats import BACKENDS, backend_for
from quarry.formats.base import Driver, VariableInfo
from quarry.formats.listing import ListedDriver, Listing
from quarry.index import IndexStore
from quarry.index.locate import find_index, index_dirs, rebuild_command
from quarry.pool import on_own_threads
from quarry.query import Executor, Selection, Table
from quarry.query.boxes import KeptBoxes, StepBoxes
from quarry.query.planner import Planner

if TYPE_CHECKING:
    from quarry.index.derived import Derivation
    from quarry.query.execute import SmallBox
    from quarry.query.histogram import Histogram, Part
    from quarry.query.ranges import Shapes
    from quarry.query.selection import Runner
    from quarry.query.series import SeriesSelection
    from quarry.reorg.store import ReorgCopy
    from quarry.series import Series

if TYPE_CHECKING:
    from quarry.index.manifest import Manifest
    from quarry.index.verify import Verification
    from quarry.reorg.build import MemberPlan
    from quarry.reorg.manifest import CopyManifest


def open(
    path: str | os.PathLike[str],
    index: str | os.PathLike[str] | None = None,
    jobs: int | None = None,
    si: bool = False,
) -> Dataset:
    """Open a data file for indexing and querying.

    ``index`` is where its index lives: a file, or a directory holding
    ``<file name>.qidx`` (default: beside the file, ``<file>.qidx``, or in a
    directory of the ``QUARRY_INDEX_PATH`` environment variable; see
    :mod:`quarry.index.locate`). Give another place when the data directory
    is read-only. ``jobs`` is how
    many threads its builds and queries use (0: one per core; None: as the
    caller set with :func:`quarry.parallel.threads`, one per core by default).
    ``si=True`` makes every variable with openPMD's ``unitSI`` mean its
    values in SI units, ``stored * unitSI`` in float64, in queries, values,
    outputs and histograms; by default values are the stored ones (see
    :mod:`quarry.expr.scaled` for how the index still answers).

    Examples
    --------
    >>> import quarry, h5py, numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "run.h5")
    >>> with h5py.File(path, "w") as f:
    ...     _ = f.create_dataset("energy", data=np.linspace(0, 2, 101))
    >>> ds = quarry.open(path)
    >>> _ = ds.build_index()
    >>> ds.query("energy > 1.3").count()
    35
    >>> ds.close()
    """
    return Dataset(os.fspath(path), None if index is None else os.fspath(index), jobs, si)


def _units(attrs: dict[str, Any]) -> dict[str, Any]:
    """What a variable's attributes say of its units, for ``info``: CF's
    ``units``; openPMD's ``unitSI`` and ``unitDimension`` (with the latter
    written in SI base units, ``kg·m/s``).

    Examples
    --------
    >>> _units({"unitSI": 1e-6, "unitDimension": [1, 0, 0, 0, 0, 0, 0], "position": [0]})
    {'unitSI': 1e-06, 'unitDimension': [1, 0, 0, 0, 0, 0, 0], 'si_units': 'm'}
    """
    from quarry.formats import openpmd

    out: dict[str, Any] = {}
    if isinstance(attrs.get("units"), str):
        out["units"] = attrs["units"]
    factor = openpmd.unit_si(attrs)
    if factor is not None:
        out["unitSI"] = factor
    dimension = attrs.get("unitDimension")
    if isinstance(dimension, list) and len(dimension) == 7:
        out["unitDimension"] = dimension
        out["si_units"] = openpmd.unit_text(dimension)
    return out


def _outgrown(manifest: Manifest, path: str) -> bool:
    """Whether ``manifest`` is of an index ``quarry index --follow`` left
    before the run's writer closed it, and the writer has closed it since:
    the follower stopped early (an idle timeout, a kill), so the run holds
    steps its listing does not, and never will while the index stands."""
    follow = manifest.follow
    return follow is not None and not follow.closed and follow.writer_closed(path)


class Dataset:
    """One data file, opened read-only, with its index if it has one."""

    def __init__(
        self, path: str, index_path: str | None = None, jobs: int | None = None, si: bool = False
    ) -> None:
        self.path = path
        self.jobs = jobs
        """Threads for builds and queries (see :func:`quarry.open`)."""
        self.si = si
        """Whether values are in SI units (openPMD's ``unitSI``; see :func:`quarry.open`)."""
        # Given (a file, or a directory for indexes: the data's own may be
        # read-only), else found beside the file or in QUARRY_INDEX_PATH.
        self._index_given = index_path is not None
        self.index_path = find_index(path, index_path)
        # Raw-binary descriptions may also be kept beside the index, or in
        # QUARRY_INDEX_PATH before any index is built there.
        self._sidecars = (os.path.dirname(os.path.abspath(self.index_path)), *index_dirs())
        self._store: IndexStore | None = None
        self._opened_as = self._file_stat()
        """The file as it was when opened (see :meth:`_as_it_is_now`)."""
        self.opened: object | None = object()
        """What stands for this open of the file (None once closed): a
        selection made in another can no longer read through it (an
        attribute, not a property: every count of a kept box reads it)."""
        self._file_driver, self._backend = self._open_file()
        self.driver: Driver = self._file_driver
        """The file's driver; with the index's derived variables once it is open."""
        if self._store is not None:
            self.driver = self._with_derived(self._store.derivations)
        # Plans and what they resolved, for the file and index as now open.
        self._planner: Planner | None = None
        self._kept = KeptBoxes()
        """Each query's small box (:mod:`quarry.query.boxes`), by query and
        context, kept for the query asked again."""
        # This file's step groups as a series, per context path: found once.
        self._steps: dict[str | None, Series] = {}
        self._copy: ReorgCopy | None = None
        # The variables of each table of the file's copy, read once per open ([]: none).
        self._copy_tables: list[frozenset[str]] | None = None

    def _open_file(self) -> tuple[Driver, str]:
        """The file's driver and its format. Where a fresh index recorded the
        file's listing, the index is opened now and the driver answers from
        the listing, opening the file only to read values (see
        :mod:`quarry.formats.listing`); otherwise the file is opened."""
        try:
            store: IndexStore | None = IndexStore(self.index_path, self.path, self._read_source)
        except (QuarryError, OSError):
            store = None  # none, stale or damaged: reported when the index is used
        self._store = store  # opened once: queries use it as it is
        listing = store.manifest.listing if store is not None else None
        if store is not None and _outgrown(store.manifest, self.path):
            listing = None  # steps past the listing's: the file is walked, and they are scanned
        if store is not None and listing is not None and store.listing_trusted:
            for known in BACKENDS:
                if known.name == listing.backend:
                    opener = functools.partial(known.open, self.path, self._sidecars)
                    return ListedDriver(self.path, listing, opener), known.name
        backend = backend_for(self.path, self._sidecars)
        driver = backend.open(self.path, self._sidecars)
        if store is not None and listing is not None:
            # Walked now (as the first query would), the next open need not.
            store.confirm_listing(lambda: Listing.of(backend.name, driver) == listing)
        return driver, backend.name

    # -- variables -------------------------------------------------------
    def variables(self) -> list[VariableInfo]:
        """Every array in the file (unsupported ones carry a ``problem``), and
        the derived variables its index defines."""
        self.check_open()
        if self._store is None and self.has_index:
            with contextlib.suppress(QuarryError):  # a stale index is reported on use
                _ = self.index
        return self.driver.variables()

    def check_open(self) -> None:
        """Raise :class:`~quarry.errors.ClosedDatasetError` where this dataset
        was closed: its file can no longer be read through it.

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "c.h5")
        >>> with h5py.File(path, "w") as f:
        ...     f["x"] = np.arange(4.0)
        >>> with quarry.open(path) as ds:
        ...     ds.check_open()
        >>> ds.query("x > 1")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        quarry.errors.ClosedDatasetError: .../c.h5 is closed: open it again (quarry.open) to use it
        """
        if self.opened is None:
            raise ClosedDatasetError(
                f"{self.path} is closed: open it again (quarry.open) to use it"
            )

    def variable(self, name: str, path: str | None = None) -> VariableInfo:
        """The variable ``name`` refers to: a full path, or a bare name looked up
        under the context ``path`` (a group such as ``Step#3``, globs allowed,
        resolving only where one match's group holds the others; see
        :mod:`quarry.expr.names`), or a subarray
        of it (``x[0:10, 5]``)."""
        var = parse_variable(name)
        if var.index is not None:
            return self._planning(self._open_store()).variable(var, path)
        self.variables()  # opens the index, whose derived variables are names too
        # The planner of the file as now open resolves each name once.
        return self._planning(self._store).resolved(var.name, path)

    def _open_store(self) -> IndexStore | None:
        """The index, opened; None where the file has none (queries scan).
        An index already open is used as it is (no ``stat`` per query)."""
        self.check_open()
        if self._store is not None:
            return self._store
        return self.index if self.has_index else None

    def _planning(self, store: IndexStore | None) -> Planner:
        """The planner of the file with ``store`` (opened by :meth:`_open_store`,
        which puts its derived variables in the driver) as its index, kept
        while both stay open."""
        if self._planner is None or self._planner.store is not store:
            self._planner = Planner(self.path, self.driver, store, self._factor)
        return self._planner

    def si_factor(self, info: VariableInfo) -> float | None:
        """What ``si=True`` multiplies ``info``'s stored values by: its
        openPMD ``unitSI``; None where it has none."""
        from quarry.formats.openpmd import unit_si

        return unit_si(info.attrs)

    @property
    def _factor(self) -> Callable[[VariableInfo], float | None] | None:
        return self.si_factor if self.si else None

    @property
    def file_open(self) -> bool:
        """Whether the data file itself is open now: where a fresh index lists
        what it holds, the file is opened only once values are read.

        Examples
        --------
        >>> import h5py, numpy as np, tempfile, os, quarry
        >>> path = os.path.join(tempfile.mkdtemp(), "p.h5")
        >>> with h5py.File(path, "w") as f:
        ...     f["x"] = np.arange(4.0)
        >>> with quarry.open(path) as ds:  # no index: the file lists its variables
        ...     ds.file_open
        True
        """
        return bool(getattr(self._file_driver, "opened", True))

    # -- index -----------------------------------------------------------
    @property
    def has_index(self) -> bool:
        return os.path.exists(self.index_path)

    @property
    def has_copy(self) -> bool:
        """Whether the file has a reorganised copy (``quarry reorg``) where
        its index would be; fresh or not is learned when a query opens it."""
        return os.path.exists(self._copy_path())

    def _copy_path(self) -> str:
        from quarry.reorg.locate import beside_index, find_copy

        # A named index was resolved to its file when this dataset opened.
        given = self.index_path if self._index_given else None
        return beside_index(given) if given is not None else find_copy(self.path)

    @property
    def index(self) -> IndexStore:
        """The opened index; raises if missing, damaged, or stale."""
        if self._store is None:
            if not self.has_index:
                raise IndexMissingError(
                    f"{self.path} has no index at {self.index_path}; build one with: "
                    f"{rebuild_command(self.path, self.index_path)}"
                )
            self._store = IndexStore(self.index_path, self.path, self._read_source)
            self.driver = self._with_derived(self._store.derivations)
        return self._store

    def _read_source(self, path: str, start: int, stop: int) -> Any:
        """Values as the index's build read them (derived ones computed)."""
        return self.driver.read(path, start, stop)

    def verify(self) -> Verification:
        """Check every block the index recorded (its CRC-32) against the file
        as it is now, on this dataset's threads, and the file's reorganised
        copy whole (:func:`quarry.reorg.read.check_copy`); see
        :class:`quarry.index.verify.Verification`. When everything matches,
        the file's current times are recorded as checked, so an index or copy
        refused or checked only because they moved answers cheaply again.

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "v.h5")
        >>> with h5py.File(path, "w") as f:
        ...     _ = f.create_dataset("e", data=np.arange(10.0))
        >>> with quarry.open(path) as ds:
        ...     _ = ds.build_index(block_len=4)
        >>> with h5py.File(path, "r+") as f:
        ...     f["e"][5] = -1.0
        >>> with quarry.open(path) as ds:
        ...     report = ds.verify()
        >>> report.ok, report.changed
        (False, {'/e': [1]})
        """
        from quarry.index.layout import read
        from quarry.index.verify import Verification, verify
        from quarry.reorg.read import check_copy

        has_copy = self.has_copy
        if not self.has_index and not has_copy:
            raise IndexMissingError(
                f"{self.path} has no index at {self.index_path} and no reorganised copy; "
                f"build an index with: {rebuild_command(self.path, self.index_path)}"
            )
        if self.has_index:
            files, manifest = read(self.index_path)
            driver = self._with_derived(list(manifest.derived))
            self._store = None  # opened again, as the check may have recorded the file as checked
            self.driver = self._file_driver
            jobs = self.jobs or 0
            report = verify(self.path, self.index_path, manifest, driver, jobs, files)
        else:
            report = Verification(self.path, None, 0, 0)
        if has_copy:
            self._copy, self._copy_tables = None, None  # opened again, as for the index
            report.copy = check_copy(self.path, self._copy_path(), self._file_driver)
        return report

    def _with_derived(self, derivations: list[Derivation]) -> Driver:
        if not derivations:
            return self._file_driver
        from quarry.index.derived import DerivedDriver, expand

        return DerivedDriver(self._file_driver, expand(derivations, self._file_driver.variables()))

    def _file_stat(self) -> tuple[int, ...] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None  # opening says what is wrong
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def _as_it_is_now(self) -> None:
        """Open the file again where it was replaced or written since it was
        opened, before an index or a copy is made of it: the open file would
        give its values as they were then, and the index, stamped with the
        file as it is now, would pass for fresh."""
        self.check_open()
        now = self._file_stat()
        if now == self._opened_as:
            return
        self.close()
        self._copy_tables = None
        self._opened_as = now
        self._file_driver, self._backend = self._open_file()
        self.opened = object()  # the same dataset, on the file as it is now
        self.driver = self._file_driver
        if self._store is not None:
            self.driver = self._with_derived(self._store.derivations)

    def _whole_file(self) -> None:
        """Build from the file itself, not from the listing of an index that
        ``quarry index --follow`` published before the run's writer closed
        it: that listing holds only the steps indexed then."""
        follow = self._store.manifest.follow if self._store is not None else None
        if follow is None or follow.closed or not isinstance(self._file_driver, ListedDriver):
            return
        self._file_driver.close()
        backend = backend_for(self.path, self._sidecars)
        self._file_driver, self._backend = backend.open(self.path, self._sidecars), backend.name
        self.opened = object()
        self.driver = self._file_driver

    def index_variables(
        self, variables: list[str] | None = None, derive: list[str] | None = None
    ) -> list[VariableInfo]:
        """What :meth:`build_index` with these arguments indexes."""
        return self._build_plan(variables, derive)[0]

    def _build_plan(
        self, names: list[str] | None, derive: list[str] | None
    ) -> tuple[list[VariableInfo], Driver, list[Derivation]]:
        from quarry.index.derived import Derivation, DerivedDriver, previous_derivations

        self._as_it_is_now()
        self._whole_file()
        if derive is not None:
            derivations = [Derivation.parse(text) for text in derive]
        else:  # a rebuild keeps the derived variables the old index defined
            derivations = previous_derivations(self.index_path)
        driver = self._with_derived(derivations)
        if names is None:
            chosen = [v for v in self._file_driver.variables() if v.problem is None]
        else:
            # A derived variable named among them is indexed with the others.
            own = [n for n in name_list(names) if n not in {d.name for d in derivations}]
            chosen = [info for n in own for info in self._to_index(n)]
        if isinstance(driver, DerivedDriver):
            chosen += [d.info for d in driver.derived.values()]
        return chosen, driver, derivations

    def _to_index(self, name: str) -> list[VariableInfo]:
        """The variables ``name`` asks to index: the one it resolves to, or
        its variable in every step where each step holds one."""
        variables = self._file_driver.variables()
        try:
            return [resolve(name, variables, self.path)]
        except AmbiguousNameError as exc:
            steps = self._over_steps(None, exc).members
            return [resolve(name, variables, self.path, m.group) for m in steps]

    def index_up_to_date(
        self,
        variables: Iterable[VariableInfo],
        bins: int | None = None,
        precision: int | None = None,
        block_len: int | None = None,
        derive: list[str] | None = None,
    ) -> bool:
        """Whether this file's index is fresh and covers ``variables`` with
        these options (None: any), so :meth:`build_index` can be skipped;
        see :mod:`quarry.index.maintain`."""
        from quarry.index.maintain import up_to_date

        self._as_it_is_now()
        if not self.has_index:
            return False
        return up_to_date(lambda: self.index, variables, bins, precision, block_len, derive)

    @on_own_threads
    def build_index(
        self,
        variables: list[str] | None = None,
        *,
        bins: int | None = None,
        precision: int | None = None,
        block_len: int | None = None,
        progress: Callable[[int], object] | None = None,
        derive: list[str] | None = None,
        comm: Any = None,
    ) -> Manifest:
        """Index ``variables`` (default: every supported one); replaces any old index.

        ``derive`` adds derived variables (``["r=sqrt(x**2 + y**2)"]``), made
        in every group holding their inputs and queryable by name; without it a
        rebuild keeps those the old index defined. Returns the index's
        :class:`~quarry.index.manifest.Manifest`.
        See :class:`quarry.index.BuildOptions` for the options; ``progress`` is
        called with the rows indexed as the build goes. With an MPI
        communicator ``comm`` (mpi4py) of several ranks, all of them call this
        together and share the blocks out, each writing its own shard (see
        :mod:`quarry.parallel.build`).

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "beam.h5")
        >>> with h5py.File(path, "w") as f:
        ...     _ = f.create_dataset("x", data=np.array([3.0, 0.1, -6.0]))
        ...     _ = f.create_dataset("y", data=np.array([4.0, 0.1, 8.0]))
        >>> with quarry.open(path) as ds:
        ...     _ = ds.build_index(derive=["r=sqrt(x**2 + y**2)"])
        ...     ds.query("r > 4").ids().tolist(), ds.variable("r").path
        ([0, 2], '/r')
        """
        from quarry.index import BuildOptions
        from quarry.index.locate import place_new_index

        chosen, driver, derivations = self._build_plan(variables, derive)
        listing = Listing.of(self._backend, self._file_driver)
        self.index_path = place_new_index(self.path, self.index_path, self._index_given)
        defaults = BuildOptions()
        options = BuildOptions(
            bins=bins or defaults.bins,
            precision=defaults.precision if precision is None else precision,
            block_len=block_len or defaults.block_len,
        )
        self._store = None
        self.driver = self._file_driver
        # the block length, derived variables and statistics may change
        self._planner = None
        self._steps.clear()
        derived = list(derivations)
        if comm is not None and comm.size > 1:
            from quarry.parallel.build import build_shared

            return build_shared(
                comm, driver, chosen, self.index_path, options, progress, derived, listing
            )
        from quarry.index.build import build_index

        return build_index(driver, chosen, self.index_path, options, progress, derived, listing)

    @on_own_threads
    def reorganize(
        self,
        variables: list[str],
        bin_size: float | list[float] | None = None,
        bins: int | list[int] | None = None,
        path: str | None = None,
        *,
        part_rows: int | None = None,
        progress: Callable[[int], object] | None = None,
        comm: Any = None,
    ) -> CopyManifest:
        """Write a clustered copy of ``variables`` ordered by their
        multi-dimensional bin number (MDBin), with offset tables, beside the
        index (``<file>.qmd``); see :mod:`quarry.reorg`. Bins are ``bin_size``
        wide or ``bins`` equal ones per variable (one value, or one per
        variable; default 16 each). Names resolve under ``path``; a name held
        by every step group reorganises each step on its own. The source is
        never touched; the copy is written atomically. With an MPI
        communicator ``comm`` of several ranks, all of them call this together
        and share the parts out (see :mod:`quarry.parallel.reorg`).

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> file = os.path.join(tempfile.mkdtemp(), "p.h5")
        >>> with h5py.File(file, "w") as f:
        ...     f["Step#0/x"], f["Step#1/x"] = np.arange(6.0), np.arange(6.0)[::-1]
        >>> with quarry.open(file) as ds:
        ...     manifest = ds.reorganize(["x"], bin_size=2.0)
        >>> [(m.group, m.rows, m.axes[0].count) for m in manifest.members]
        [('/Step#0', 6, 3), ('/Step#1', 6, 3)]
        """
        from quarry.index.locate import place_new_index
        from quarry.reorg.binning import Binning
        from quarry.reorg.build import DEFAULT_PART_ROWS, reorganize
        from quarry.reorg.locate import SUFFIX, find_copy

        if variables is None:
            raise ReorgError("name the variables to reorganise, e.g. ['energy', 'x']")
        variables = name_list(variables)
        self._as_it_is_now()
        plans = self.reorganize_plan(variables, path)
        given = self.index_path if self._index_given else None
        target = place_new_index(self.path, find_copy(self.path, given), self._index_given, SUFFIX)
        binning = Binning.of(len(variables), bin_size, bins)
        rows = DEFAULT_PART_ROWS if part_rows is None else part_rows
        self._copy, self._copy_tables = None, None  # the next query opens the new copy
        index = None
        with contextlib.suppress(QuarryError, OSError):  # stale, unreadable: ranges read
            index = self._open_store()
        driver = self._file_driver
        if comm is not None and comm.size > 1:
            from quarry.parallel.reorg import reorganize_shared

            return reorganize_shared(
                comm, driver, plans, target, binning, rows, None, progress, index, path
            )
        return reorganize(driver, plans, target, binning, rows, None, progress, index, path)

    def reorganize_again(self, force: bool = False) -> CopyManifest | None:
        """Build this file's reorganised copy again as it was made (its
        variables, binning and ``path``), when it is stale (or with ``force``
        whatever it is: damage is found only where a query reads it); returns
        the new manifest, or None where there is no copy or it is fresh. What
        ``POST /api/v1/index`` does for a copy, whose refusal names that request.

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os, time
        >>> path = os.path.join(tempfile.mkdtemp(), "r.h5")
        >>> with h5py.File(path, "w") as f:
        ...     f["x"] = np.arange(8.0)
        >>> with quarry.open(path) as ds:
        ...     _ = ds.reorganize(["x"], bin_size=2.0)
        >>> with h5py.File(path, "a") as f:
        ...     f["x"][0] = 5.0
        >>> with quarry.open(path) as ds:
        ...     again = ds.reorganize_again()
        ...     ds.query("x > 4").count(), again.binning.sizes
        (4, (2.0,))
        """
        from quarry.errors import CorruptCopyError, StaleCopyError
        from quarry.reorg.locate import find_copy
        from quarry.reorg.store import read_copy, rebuilt_names

        if not self.has_copy:
            return None
        try:
            self._reorganised()
            if not force:
                return None
        except (StaleCopyError, CorruptCopyError):
            pass  # its manifest says how it was made (a damaged one raises here)
        given = self.index_path if self._index_given else None
        manifest = read_copy(find_copy(self.path, given)).manifest
        binning = manifest.binning
        return self.reorganize(
            rebuilt_names(manifest),
            bin_size=list(binning.sizes) if binning and binning.sizes else None,
            bins=list(binning.counts) if binning and binning.counts else None,
            path=manifest.context,
        )

    def reorganize_plan(self, variables: list[str], path: str | None = None) -> list[MemberPlan]:
        """The tables :meth:`reorganize` would write: the variables ``variables``
        name under ``path``, or their variables in each step group where each
        step holds one; raises what a name that does not resolve raises."""
        from quarry.query.series import step_named
        from quarry.reorg.build import MemberPlan

        listed = self._file_driver.variables()
        tables: list[tuple[int | None, str | None, list[VariableInfo]]]
        try:
            try:
                found = [resolve(n, listed, self.path, path) for n in variables]
                step, group = step_named(listed, path) if path else (None, None)
                tables = [(step, group, found)]
            except AmbiguousNameError as exc:  # one table per step group
                tables = [
                    (m.step, m.group, [resolve(n, listed, self.path, m.group) for n in variables])
                    for m in self._over_steps(path, exc).members
                ]
        except UnknownVariableError:
            self._refuse_derived(variables, listed, path)
            raise
        return [MemberPlan(f"m{k}", s, g, tuple(v)) for k, (s, g, v) in enumerate(tables)]

    def _refuse_derived(
        self, names: list[str], listed: list[VariableInfo], path: str | None
    ) -> None:
        """A :class:`ReorgError` for a name in ``names`` that is one of the
        index's derived variables: a copy holds stored values (the file's
        ``listed`` variables), and without this the name was not found."""
        try:
            every = self.variables()  # opens the index, which defines them
        except OSError:
            return  # an index that cannot be read defines none
        if self._store is None:
            return
        derived = {d.name: d for d in self._store.derivations}
        stored = {v.path for v in listed}
        for name in names:
            try:
                found = resolve(name, every, self.path, path)
            except QuarryError:
                continue  # resolving among the stored variables says what is wrong
            if found.path not in stored and found.name in derived:
                d = derived[found.name]
                raise ReorgError(
                    f"{name} is derived by the index ({d.name} = {d.expr}), not stored in "
                    f"{self.path}: a reorganised copy holds stored variables; reorganise "
                    f"those {d.name} is computed from"
                )

    # -- queries ---------------------------------------------------------
    @on_own_threads
    def query(
        self, query: str, path: str | None = None, runner: Runner | None = None
    ) -> Selection | SeriesSelection:
        """Rows where ``query`` is true; see :class:`quarry.query.Selection`.

        Variables must share one shape (they form one table, position by
        position). Indexed variables are answered from the index, others by
        reading the data; a stale or damaged index is an error, never a wrong answer.
        Bare names resolve under the context ``path`` (e.g. ``Step#3``).

        A file with step groups (``Step#0``, ``Step#1``, ...) whose bare names
        mean one variable in each step is a series of one file: the query runs
        in every step, as :func:`quarry.open_series` runs it, and the answer
        is a :class:`quarry.SeriesSelection` (``count()`` is the total).
        A name that resolves outside the steps (a root ``/x``), or a ``path``
        naming one step, gives a :class:`~quarry.query.Selection` as before.
        With a ``runner`` (:mod:`quarry.parallel.runners`: threads, progress,
        MPI ranks) the count is answered by it now; otherwise when read.

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "steps.h5")
        >>> with h5py.File(path, "w") as f:
        ...     for s in range(3):
        ...         f[f"Step#{s}/px"] = np.arange(10.0) * (s + 1)
        >>> with quarry.open(path) as ds:
        ...     sel = ds.query("px > 10")
        ...     sel.count(), sel.counts(), ds.query("px > 10", path="Step#2").count()
        (10, [0, 4, 6], 6)
        """
        try:
            answer: Selection | SeriesSelection = self.query_table(query, path)
        except AmbiguousNameError as exc:
            answer = self._over_steps(path, exc).query(query)
        if runner is not None:
            answer.answer(runner)
        return answer

    def query_state(self) -> tuple[object, ...]:
        """What a query's plan and the columns it scans depend on, compared
        by identity: the driver (made anew with an index built, opened or
        checked, or the file opened again), the index and the reorganised
        copies found. A dataset or series keeps its queries' boxes while this
        stays the same (:class:`quarry.query.boxes.StepBoxes`).

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "q.h5")
        >>> with h5py.File(path, "w") as f:
        ...     f["x"] = np.arange(4.0)
        >>> with quarry.open(path) as ds:
        ...     counted = ds.query("x > 1").count()
        ...     before = ds.query_state()
        ...     counted = ds.query("x > 2").count()
        ...     same = ds.query_state() == before
        ...     _ = ds.build_index()
        ...     counted = ds.query("x > 1").count()  # opens the new index
        ...     same, ds.query_state() == before
        (True, False)
        """
        return (self.driver, self._store, self._listed_copies())

    @on_own_threads
    def query_table(self, query: str, path: str | None = None) -> Selection:
        """Rows where ``query`` is true in one table of this file, its names
        resolved as written (under ``path``), never spread over step groups:
        what :meth:`query` and each member of a series run."""
        store = self._open_store()
        planned = self._planning(store).plan(query, path)
        make = functools.partial(
            Executor, self.driver, store, planned.table, self._factor, copies=self._reorganised
        )
        state = (self.query_state(),)
        kept = self._kept.get((query, path), state)
        if kept is not None:  # asked before, and nothing changed since
            return Selection(self, query, make, planned, path=path, boxes=kept)
        keep = functools.partial(self._keep_boxes, (query, path), state)
        return Selection(self, query, make, planned, path=path, keep=keep)

    def _keep_boxes(
        self,
        query: tuple[str, str | None],
        state: tuple[tuple[object, ...]],
        boxes: list[SmallBox | None],
    ) -> None:
        self._kept.keep(query, StepBoxes(boxes, state))

    def _reorganised(self, variables: Collection[str] = ()) -> ReorgCopy | None:
        """The file's reorganised copy (:mod:`quarry.reorg`), opened and
        checked once, when a query could read it: where a table of it holds
        all of ``variables`` (full paths); None where it has none. A stale or
        damaged copy is refused as a stale index is, by the queries it could
        answer alone: one of other variables is answered without it."""
        if self._copy is None:
            from quarry.reorg.store import open_copy

            wanted = set(variables)
            if not any(wanted <= table for table in self._listed_copies()):
                return None
            given = self.index_path if self._index_given else None
            self._copy = open_copy(self.path, given, self._file_driver)
        return self._copy

    def _listed_copies(self) -> list[frozenset[str]]:
        """The variables of each table of the file's reorganised copy (none
        without one), looked for once per open of the copy."""
        if self._copy_tables is None:
            from quarry.reorg.store import copy_tables

            given = self.index_path if self._index_given else None
            self._copy_tables = copy_tables(self.path, given) if self.has_copy else []
        return self._copy_tables

    def select_all(
        self, names: Sequence[str], path: str | None = None
    ) -> Selection | SeriesSelection:
        """Every row of the table the variables ``names`` form (bare names
        resolving under ``path``): a selection with no condition, for what
        takes a selection (values, extracts, :meth:`~quarry.Selection.interpolate`).
        Where the bare names mean one variable in each step group, every row
        of every step, as :meth:`query` spreads over them: a
        :class:`quarry.SeriesSelection`.

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "all.h5")
        >>> with h5py.File(path, "w") as f:
        ...     f["x"] = np.array([1.0, np.nan, 3.0])
        ...     f["Step#0/e"], f["Step#1/e"] = np.array([1.0]), np.array([2.0, 3.0])
        >>> with quarry.open(path) as ds:
        ...     sel, steps = ds.select_all(["x"]), ds.select_all(["e"])
        ...     sel.count(), sel.values("x").tolist(), steps.counts()
        (3, [1.0, nan, 3.0], [1, 2])
        """
        try:
            return self.select_table(names, path)
        except AmbiguousNameError as exc:
            return self._over_steps(path, exc).select_all(names)

    def select_table(self, names: Sequence[str], path: str | None = None) -> Selection:
        """Every row of one table of this file that the variables ``names``
        form, their names resolved as written (under ``path``), never spread
        over step groups: what :meth:`select_all` and each member of a
        series run."""
        names = names_to_select(names)
        store = self._open_store()
        planner = self._planning(store)
        table = planner.table([self.variable(n, path) for n in names])
        executor = Executor(self.driver, store, table, self._factor)
        rows = _core.RowSet.full(table.n_rows, table.block_len)
        return Selection(self, "", executor, path=path, rows=rows)

    def _over_steps(self, path: str | None, exc: AmbiguousNameError) -> Series:
        """This file's step groups (those ``path`` names, if given) as a series
        of one file, when the candidates of the ambiguous name ``exc`` lie in
        different steps; otherwise the name really is ambiguous: ``exc``."""
        series = self._steps.get(path)
        if series is None:
            from quarry.series import Series

            series = Series([self.path], self.index_path, path, self.jobs, [self], self.si)
            self._steps[path] = series
        from quarry.query.series import steps_holding

        groups = {m.group.rstrip("/") for m in series.members if m.group}
        spread = steps_holding(exc.candidates, groups)
        if spread is None or len(spread) < 2:
            raise exc
        return series

    @on_own_threads
    def query_many(
        self,
        queries: Iterable[str],
        path: str | None = None,
        *,
        labels: Sequence[str] | None = None,
    ) -> list[int]:
        """The count of each query, all against this open file and its index
        (opened once); see :mod:`quarry.query.batch`.

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> file = os.path.join(tempfile.mkdtemp(), "m.h5")
        >>> with h5py.File(file, "w") as f:
        ...     _ = f.create_dataset("t", data=np.arange(100.0))
        >>> with quarry.open(file) as ds:
        ...     _ = ds.build_index(block_len=32)
        ...     ds.query_many([f"{lo} <= t < {lo + 25}" for lo in (0, 25, 90)])
        [25, 25, 10]
        """
        from quarry.query.batch import batch_items, check_syntax, evaluate
        from quarry.query.ranges import Shapes

        items = batch_items(queries, labels)
        check_syntax(items)
        shapes = Shapes([q for _, q in items])
        try:
            return self.count_table(shapes, path, lambda k, exc: BatchQueryError(*items[k], exc))
        except BatchQueryError as exc:
            if not isinstance(exc.error, AmbiguousNameError):
                raise
        # A name spread over step groups: each query over the steps, as query() does.
        return [n for _, _, n in evaluate(items, lambda q: self.query(q, path).count())]

    def count_table(
        self,
        shapes: Shapes,
        path: str | None,
        fail: Callable[[int, QuarryError], Exception],
    ) -> list[int]:
        """The count of each query of a batch in one table of this file, its
        names resolved as written (under ``path``): what :meth:`query_many`
        and each member of a series' batch run (see
        :func:`quarry.query.batch.count_table`; ``fail(k, error)`` is raised
        for a failure in query ``k``)."""
        from quarry.query.batch import count_table

        store = self._open_store()
        return count_table(
            self._planning(store),
            lambda table: Executor(
                self.driver, store, table, self._factor, copies=self._reorganised
            ),
            shapes,
            path,
            fail,
        )

    @on_own_threads
    def histogram(
        self,
        names: str | list[str],
        where: str | None = None,
        bins: Any = 10,
        range: Any = None,
        weights: str | None = None,
        path: str | None = None,
    ) -> Histogram:
        """Histogram of variables over the rows where ``where`` is true (all rows
        when None); see :meth:`quarry.Selection.histogram`. Bare names resolve
        under the context ``path``.

        Examples
        --------
        >>> import quarry, h5py, numpy as np, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "h.h5")
        >>> with h5py.File(path, "w") as f:
        ...     _ = f.create_dataset("e", data=np.array([0.5, 1.5, 1.5, 2.5]))
        >>> with quarry.open(path) as ds:
        ...     _ = ds.build_index()
        ...     h = ds.histogram("e", bins=[0, 1, 2, 3])
        >>> h.counts.tolist(), h.path
        ([1, 2, 1], 'index')
        """
        from quarry.query.histogram import combine

        if where is not None:
            return self.query(where, path).histogram(names, bins, range, weights)
        try:
            part = self.histogram_part(names, weights, path)
        except AmbiguousNameError as exc:
            return self._over_steps(path, exc).histogram(names, None, bins, range, weights)
        return combine([part], bins, range)

    def histogram_part(
        self, names: str | list[str], weights: str | None = None, path: str | None = None
    ) -> Part:
        """What a histogram of every row of ``names`` (weighted by ``weights``)
        reads in this file, names resolving under ``path``; see
        :func:`quarry.query.histogram.combine`."""
        from quarry.query.histogram import Part

        variables = [self.variable(n, path) for n in ([names] if isinstance(names, str) else names)]
        weight = self.variable(weights, path) if weights is not None else None
        store = self._open_store()
        table = self._planning(store).table(variables + ([weight] if weight else []))
        return Part(Executor(self.driver, store, table, self._factor), None, variables, weight)

    def load_selection(self, path: str) -> Selection:
        """A selection saved with :meth:`quarry.Selection.save`, ready to give
        ids and values again; refused if this file changed since it was saved."""
        from quarry.query.saved import load

        header, rows = load(self, path)
        dims = tuple(header["dims"]) if header.get("dims") else None
        store = self._open_store()
        if store is not None and store.block_len != rows.block_len:
            # The index was rebuilt with other blocks: the same rows, re-cut.
            rows = _core.RowSet.from_ids(rows.to_ids(), rows.n_rows, store.block_len)
        table = Table(tuple(int(s) for s in header["shape"]), rows.block_len, dims)
        executor = Executor(self.driver, store, table, self._factor)
        return Selection(self, str(header["query"]), executor, path=header.get("path"), rows=rows)

    # -- description -----------------------------------------------------
    def info(self) -> dict[str, Any]:
        """Variables, shapes, dtypes, and what is indexed (JSON-ready)."""
        from quarry.index.layout import decode_edges
        from quarry.index.stats import column_stats

        indexed: Mapping[str, Any] = {}
        stats: dict[str, Any] = {}
        stale: dict[str, str] = {}
        listed = self.variables()
        index_state: dict[str, Any] = {"path": self.index_path, "exists": self.has_index}
        if self.has_index:
            try:
                indexed = self.index.variables
                index_state["block_len"] = self.index.block_len
                index_state["bytes"] = os.path.getsize(self.index_path)
                index_state["state"] = "ok"
            except QuarryError as exc:
                index_state["state"] = "unusable"
                index_state["error"] = str(exc)
        for v in listed:
            if v.path in indexed:
                # A column's statistics prove it fresh first: one changed behind
                # the file's stat is stale alone, as queries find it; the
                # others still answer from the index.
                try:
                    stats[v.path] = column_stats(self.index.column(v.path)).to_dict()
                except StaleIndexError as exc:
                    stale[v.path] = str(exc)
                except QuarryError as exc:  # a damaged column: refused, as queries refuse it
                    index_state.update(state="unusable", error=str(exc))
        if stale and index_state["state"] == "ok":
            index_state["state"] = "stale"
            index_state["error"] = next(iter(stale.values()))
        out = []
        for v in listed:
            entry: dict[str, Any] = {
                "path": v.path,
                "name": v.name,
                "shape": list(v.shape),
                "dtype": str(v.dtype),
                "chunks": list(v.chunks) if v.chunks else None,
                "compression": v.compression,
                "indexed": v.path in stats,
            }
            if v.path in stale:
                entry["stale"] = True
            if v.path in stats:
                entry["bins"] = len(decode_edges(indexed[v.path])) + 1
                entry["stats"] = stats[v.path]
            if v.decoding:
                entry["decoding"] = v.decoding
            if v.dims:
                entry["dims"] = list(v.dims)
            entry.update(_units(v.attrs))
            if v.attrs:
                entry["attrs"] = v.attrs
            if v.problem:
                entry["unsupported"] = v.problem
            out.append(entry)
        return {"file": self.path, "index": index_state, "variables": out}

    # -- lifetime --------------------------------------------------------
    def close(self) -> None:
        # The index reads the source through this dataset (a reference
        # cycle); dropping it and the planner frees them without waiting
        # for the cyclic collector.
        self._store = None
        self._planner = None
        self._copy = None  # its file closes with the last member read from it
        self._kept.clear()  # their columns are views of the file's map
        self._steps.clear()
        self._file_driver.close()
        self.opened = None

    def __enter__(self) -> Dataset:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"quarry.open({self.path!r})"

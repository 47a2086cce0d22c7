"""The reorganised copy on disk: one HDF5 file per data file (``run.h5.qmd``).

::

    (user block)          "quarry-mdbin OFFSET LENGTH CRC32": where the manifest lies
    /quarry_reorg         the manifest (JSON, below; uint8)
    /<member>/columns/<k> the k-th variable's values, clustered      (contiguous)
    /<member>/rows        each value's row in the source table (uint32, or int64 past 2**32)
    /<member>/table_bins  each part's non-empty MDBin numbers, ascending (uint64)
    /<member>/table_starts  where each of those bins starts in its part (int64)
    /<member>/block_crc32   the CRC-32 of each block of ``check_rows`` rows of each
                          column, then of ``rows`` (uint32, one row per column)

A *member* is one table of the source: the file, or one step group of it,
each reorganised on its own (its own ranges and bins). Its rows are cut into
*parts* of ``part_rows`` consecutive rows; each part is binned and sorted by
itself and written to the same rows of the copy's columns, so a part's
values stay in its own rows, clustered by MDBin number and, within a bin, in
ascending row order. A part's offset table is its slice of ``table_bins``
and ``table_starts`` (``parts[i].table``: first entry and count): bin
``table_bins[j]`` holds rows ``[table_starts[j], table_starts[j + 1])`` of
the part (the last one runs to the part's end). Builders never move data
between workers: each writes its parts' rows and hands back their tables.

The manifest (:mod:`quarry.reorg.manifest`) says what the copy holds, what
it was built from, and where each array lies, and the user block says where
the manifest lies, so that opening a copy reads them with plain reads, with
no HDF5 library and no walk of the file's groups and datasets. A member's
offset tables and block CRC-32s are read, and checked against their CRC-32,
when a query first needs them (:func:`read_member_layout`). A query checks
the CRC-32 of every block of ``check_rows`` rows (counted from each part's
first) of each column it reads from the copy, once per open copy, so values
or row numbers damaged in the copy are an error, never a wrong answer.

The columns are allocated when the file is made (``H5D_ALLOC_TIME_EARLY``,
never filled), so every worker writes its parts at the dataset's file
offset (the core's positioned writes on :meth:`CopyWriter.fileno`), without
HDF5's lock; the file is written under a
temporary name beside the copy, locked, and renamed into place when complete.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import secrets
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from quarry import _core
from quarry.errors import CorruptCopyError, ReorgError
from quarry.index.layout import own_temporary
from quarry.records import field, record, replace
from quarry.reorg.binning import Axis, mdbin_strides
from quarry.reorg.manifest import (
    HEADER,
    MANIFEST,
    USER_BLOCK,
    CopyManifest,
    MemberEntry,
    Mend,
    Placement,
)

if TYPE_CHECKING:
    import numpy.typing as npt

ROWS = "rows"


def rows_dtype(rows: int) -> np.dtype[Any]:
    """The dtype of a member's ``rows`` column: 32 bits while they suffice.

    Examples
    --------
    >>> rows_dtype(2**32).str, rows_dtype(2**32 + 1).str
    ('<u4', '<i8')
    """
    return np.dtype("<u4" if rows <= 2**32 else "<i8")


def column_dtype(axis: Axis) -> np.dtype[Any]:
    """The dtype a variable's values are kept in: its own, in native byte order."""
    return np.dtype(axis.dtype).newbyteorder("=")


def crc32(values: npt.NDArray[Any], start: int = 0) -> int:
    """The CRC-32 of an array's bytes (continuing from ``start``), as an
    index records a block's (:mod:`quarry.index.verify`): ``zlib.crc32``'s,
    computed by the core (several times faster on large parts).

    Examples
    --------
    >>> import zlib
    >>> crc32(np.arange(3.0)) == zlib.crc32(np.arange(3.0).tobytes())
    True
    """
    from quarry import _core

    data = np.ascontiguousarray(values).reshape(-1).view(np.uint8)
    return _core.crc32(data, start)


def table_crc(bins: npt.NDArray[np.uint64], starts: npt.NDArray[np.int64]) -> int:
    """The CRC-32 of a member's offset tables (their little-endian bytes)."""
    return crc32(starts.astype("<i8"), crc32(bins.astype("<u8")))


class CopyWriter:
    """A copy being written: a locked temporary beside ``path`` whose
    columns are allocated up front (see the module notes); workers call
    :meth:`write` for their parts, then :meth:`publish` renames it into place.
    Made by :meth:`create`; another process (an MPI rank) writing its own
    parts into the same temporary uses one from :meth:`attach`.
    """

    def __init__(
        self,
        path: str,
        temporary: str,
        offsets: dict[tuple[str, str], tuple[int | None, np.dtype[Any], int]],
        fd: int,
        owner: bool,
    ) -> None:
        self.path = path
        self.temporary = temporary
        #: (member, column) -> (file offset, dtype, rows); column ROWS for the rows.
        self.offsets = offsets
        self._fd = fd
        self._owner = owner

    @classmethod
    def create(cls, path: str, members: list[tuple[str, int, list[Axis]]]) -> CopyWriter:
        """Make the temporary, with every member's columns allocated."""
        import h5py

        directory = os.path.dirname(os.path.abspath(path))
        name = "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(8))
        temporary = os.path.join(directory, f".{os.path.basename(path)}.{name}.tmp")
        # Locked before its first byte and until published: a later build's
        # clean-up (quarry.index.layout.remove_debris) leaves it alone.
        fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
        own_temporary(temporary)  # removed if a SIGTERM ends the process
        writer = cls(path, temporary, {}, fd, owner=True)
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            with h5py.File(temporary, "w", locking=False, userblock_size=USER_BLOCK) as f:
                for member, rows, axes in members:
                    group = f.create_group(member)
                    group.create_group("columns")
                    for k, axis in enumerate(axes):
                        writer._allocate(group, f"columns/{k}", column_dtype(axis), rows)
                    writer._allocate(group, ROWS, rows_dtype(rows), rows)
            writer._reserve()
        except BaseException as exc:
            writer.abort()
            _refuse_no_room(path, exc)
            raise
        return writer

    @classmethod
    def attach(
        cls,
        path: str,
        temporary: str,
        offsets: dict[tuple[str, str], tuple[int | None, np.dtype[Any], int]],
    ) -> CopyWriter:
        """A writer of some parts of the temporary another process made."""
        return cls(path, temporary, offsets, os.open(temporary, os.O_RDWR), owner=False)

    def _allocate(self, group: Any, name: str, dtype: np.dtype[Any], rows: int) -> None:
        import h5py

        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
        dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
        space = h5py.h5s.create_simple((rows,))
        dataset = h5py.h5d.create(
            group.id, name.encode(), h5py.h5t.py_create(dtype), space, dcpl=dcpl
        )
        column = name.removeprefix("columns/")
        self.offsets[(group.name.lstrip("/"), column)] = (dataset.get_offset(), dtype, rows)

    def _reserve(self) -> None:
        """Reserve the disk blocks of the columns (the file is sparse so far):
        their write-back, started as parts are written, then places no blocks
        while the parts write on, and a full disk is refused here, at once."""
        size = os.fstat(self._fd).st_size
        try:
            _core.reserve_space(self._fd, size)
        except OSError as exc:
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            raise _cannot_write(
                self.path, f"{reason.lower()} (its columns take {size:,} bytes)"
            ) from None

    def fileno(self) -> int:
        """The temporary's descriptor: the core writes parts through it
        (open until :meth:`publish`, :meth:`close` or :meth:`abort`)."""
        return self._fd

    def part_offsets(self, member: str, columns: int, first: int) -> list[int]:
        """The file offsets of row ``first`` of a member's ``columns``
        variables' columns, then of its ``rows``: where a part's writes go."""
        names = [str(k) for k in range(columns)] + [ROWS]
        at = []
        for name in names:
            offset, dtype, rows = self.offsets[(member, name)]
            assert offset is not None and first <= rows
            at.append(offset + first * dtype.itemsize)
        return at

    def close(self) -> None:
        """An attached writer's end: its writes made durable, its file closed."""
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1

    def publish(
        self,
        manifest: CopyManifest,
        tables: dict[str, MemberTables],
    ) -> None:
        """Write the offset tables and the manifest, and rename the complete
        file over ``path`` (durably)."""
        import h5py

        try:
            with h5py.File(self.temporary, "r+", locking=False) as f:
                placed = []
                for entry in manifest.members:
                    own = tables[entry.name]
                    group = f[entry.name]
                    arrays: list[tuple[str, npt.NDArray[Any], str]] = [
                        ("table_bins", own.bins, "<u8"),
                        ("table_starts", own.starts, "<i8"),
                        ("block_crc32", own.blocks, "<u4"),
                    ]
                    made = [
                        group.create_dataset(name, data=data.astype(dtype))
                        for name, data, dtype in arrays
                    ]
                    names = [*(str(k) for k in range(len(entry.axes))), ROWS]
                    at = Placement(
                        tuple(self.offsets[(entry.name, name)][0] for name in names),
                        *(d.id.get_offset() for d in made),
                    )
                    placed.append(replace(entry, at=at))
                text = json.dumps(replace(manifest, members=tuple(placed)).to_json())
                where = _put_manifest(f, text)
            _point_to_manifest(self.temporary, where)
            os.fsync(self._fd)
            replaced = _hold(self.path)
            try:
                os.replace(self.temporary, self.path)
                own_temporary(self.temporary, owned=False)
            finally:
                if replaced is not None:
                    close_in_background(replaced)
            with contextlib.suppress(OSError):
                dir_fd = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
                try:
                    os.fsync(dir_fd)
                finally:
                    os.close(dir_fd)
        except BaseException as exc:
            self.abort()
            _refuse_no_room(self.path, exc)
            raise
        os.close(self._fd)
        self._fd = -1

    def abort(self) -> None:
        """Remove the temporary (after a failure; an attached writer only closes it)."""
        if self._owner:
            with contextlib.suppress(OSError):
                os.unlink(self.temporary)
            own_temporary(self.temporary, owned=False)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _hold(path: str) -> int | None:
    """A descriptor of the file at ``path`` (None if there is none), so that
    renaming over it does not free its blocks: see :func:`close_in_background`."""
    try:
        return os.open(path, os.O_RDONLY)
    except OSError:
        return None


def close_in_background(fd: int) -> threading.Thread:
    """Close ``fd`` on a thread of its own, and return that thread.

    Held open over the rename that replaces it, the previous copy is freed
    (its page-cache pages dropped, its blocks released and discarded, some
    70 ms for a copy of 300 MB) when this last descriptor closes, not inside
    the rename: the new copy is in place and usable meanwhile. The thread is
    not a daemon, so the interpreter waits for it before it exits and the old
    copy's space is always given back.

    Examples
    --------
    >>> import tempfile
    >>> fd = os.open(tempfile.mkstemp()[1], os.O_RDONLY)
    >>> close_in_background(fd).join()
    >>> os.fstat(fd)
    Traceback (most recent call last):
    OSError: [Errno 9] Bad file descriptor
    """
    closer = threading.Thread(target=os.close, args=(fd,), name="quarry-free-old-copy")
    closer.start()
    return closer


#: What a write that found no room fails with: the disk full, a quota, the
#: file size limit (``ulimit -f``).
NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _refuse_no_room(path: str, exc: BaseException) -> None:
    """Raise the :class:`ReorgError` that says so where ``exc`` is a write
    that found no room: an ``OSError`` with its errno, or HDF5's error (an
    ``OSError`` or ``RuntimeError`` whose text holds ``errno = N``)."""
    if not isinstance(exc, OSError | RuntimeError):
        return
    code = exc.errno if isinstance(exc, OSError) else None
    if code is None:
        found = re.search(r"errno = (\d+)", str(exc))
        code = int(found.group(1)) if found else None
    if code in NO_ROOM:
        raise _cannot_write(path, os.strerror(code).lower()) from None


def _cannot_write(path: str, reason: str) -> ReorgError:
    return ReorgError(
        f"cannot write the reorganised copy {path}: {reason}; make room there, or put the "
        "copy elsewhere with --index DIR"
    )


@contextlib.contextmanager
def writing(path: str, members: list[tuple[str, int, list[Axis]]]) -> Iterator[CopyWriter]:
    """A :class:`CopyWriter` that is aborted (temporary removed) on any error."""
    writer = CopyWriter.create(path, members)
    try:
        yield writer
    except BaseException:
        writer.abort()
        raise


@record
class MemberLayout:
    """Where one member's columns lie in the copy file, its offset tables,
    and its block CRC-32s (one row per column, then ``rows``)."""

    entry: MemberEntry
    columns: tuple[int | None, ...]  # file offsets of the variables' columns, then of ``rows``
    bins: npt.NDArray[np.uint64]
    starts: npt.NDArray[np.int64]
    blocks: npt.NDArray[np.uint32]
    check_rows: int
    mend: Mend = field(default_factory=Mend)
    """What a message of damage found later says to do."""


@record
class MemberTables:
    """What a member's parts hand back to be written beside its columns: its
    offset tables and its block CRC-32s, the parts' laid end to end."""

    bins: npt.NDArray[np.uint64]
    starts: npt.NDArray[np.int64]
    blocks: npt.NDArray[np.uint32]


def read_member_layout(
    fd: int, entry: MemberEntry, check_rows: int, where: str, mend: Mend | None = None
) -> MemberLayout:
    """Where the columns of the member ``entry`` of the copy open at ``fd``
    (``where`` names it) lie, and its offset tables and block CRC-32s, each
    checked: :class:`CorruptCopyError` names what is damaged, then ``mend``
    (what to do). The manifest says where every array lies (``at``), so they
    are read with plain reads, not through HDF5."""
    return _member_layout(fd, os.fstat(fd).st_size, entry, check_rows, where, mend or Mend())


def store_manifest(path: str, text: str) -> None:
    """Write ``text`` as the manifest of the copy at ``path`` (made with the
    user block), replacing any before it, and say in the user block where
    it lies."""
    import h5py

    with h5py.File(path, "r+", locking=False) as f:
        where = _put_manifest(f, text)
    _point_to_manifest(path, where)


def _put_manifest(f: Any, text: str) -> tuple[int, bytes]:
    """Write ``text`` as the manifest dataset of the open copy ``f``
    (replacing any before it): where it lies, and its bytes."""
    data = text.encode()
    if MANIFEST in f:
        del f[MANIFEST]
    offset = f.create_dataset(MANIFEST, data=np.frombuffer(data, np.uint8)).id.get_offset()
    assert offset is not None
    return offset, data


def _point_to_manifest(path: str, where: tuple[int, bytes]) -> None:
    """Say in the user block of the copy at ``path`` (closed to HDF5) where
    its manifest lies, with its length and CRC-32."""
    import zlib

    offset, data = where
    header = HEADER + f"{offset} {len(data)} {zlib.crc32(data)}\n".encode()
    assert len(header) <= USER_BLOCK
    with open(path, "r+b") as f:
        f.write(header.ljust(USER_BLOCK, b"\0"))


def _member_layout(
    fd: int, size: int, entry: MemberEntry, check_rows: int, where: str, mend: Mend
) -> MemberLayout:
    at = entry.at
    if at is None or len(at.columns) != len(entry.axes) + 1:
        raise damaged(where, entry, "the manifest does not say where the columns{of} lie", mend)
    dtypes = [*(column_dtype(a) for a in entry.axes), rows_dtype(entry.rows)]
    for offset, dtype in zip(at.columns, dtypes, strict=True):
        if entry.rows and (offset is None or offset + entry.rows * dtype.itemsize > size):
            raise damaged(where, entry, "the columns{of} are cut short", mend)
    entries = sum(p.table[1] for p in entry.parts)
    bins = _read_array(fd, size, at.table_bins, np.dtype("<u8"), entries)
    starts = _read_array(fd, size, at.table_starts, np.dtype("<i8"), entries)
    if bins is None or starts is None:
        raise damaged(where, entry, "the offset table{of} is cut short", mend)
    if table_crc(bins, starts) != entry.table_crc32:
        raise damaged(where, entry, "the offset table{of} is damaged (its CRC-32 differs)", mend)
    _check_tables(entry, bins, starts, where, mend)
    if check_rows < 1:
        raise CorruptCopyError(
            f"the manifest of {where} is damaged (check_rows {check_rows}); {mend}"
        )
    n_blocks = sum(-(-p.rows // check_rows) for p in entry.parts)
    columns = len(entry.axes) + 1
    blocks = _read_array(fd, size, at.block_crc32, np.dtype("<u4"), columns * n_blocks)
    if blocks is None:
        raise damaged(where, entry, "the block CRC-32s{of} are cut short", mend)
    return MemberLayout(
        entry,
        at.columns,
        bins.astype(np.uint64),
        starts.astype(np.int64),
        blocks.astype(np.uint32).reshape(columns, n_blocks),
        check_rows,
        mend,
    )


def _read_array(
    fd: int, size: int, offset: int | None, dtype: np.dtype[Any], count: int
) -> npt.NDArray[Any] | None:
    """``count`` values of ``dtype`` at ``offset`` of the file (``size``
    bytes), read in one go; None where the file is cut short of them."""
    nbytes = count * dtype.itemsize
    fits = not count or (offset is not None and offset + nbytes <= size)
    data = os.pread(fd, nbytes, offset) if count and fits and offset is not None else b""
    return np.frombuffer(data, dtype) if len(data) == nbytes else None


def damaged(
    where: str, entry: MemberEntry, what: str, mend: Mend | None = None
) -> CorruptCopyError:
    """The error for a damaged part of member ``entry`` of the copy ``where``
    names: ``what`` is wrong, its ``{of}`` naming the step the member holds.

    Examples
    --------
    >>> from quarry.reorg.manifest import MemberEntry
    >>> entry = MemberEntry("m3", 3, "/Step#3", 10, (), (), 0)
    >>> print(damaged("the copy run.h5.qmd", entry, "the offset table{of} is cut short"))
    the copy run.h5.qmd is damaged: the offset table of /Step#3 is cut short; \
build it again with quarry reorg
    """
    of = f" of {entry.group}" if entry.group else ""
    return CorruptCopyError(f"{where} is damaged: {what.format(of=of)}; {mend or Mend()}")


def _check_tables(
    entry: MemberEntry,
    bins: npt.NDArray[np.uint64],
    starts: npt.NDArray[np.int64],
    where: str,
    mend: Mend,
) -> None:
    """Every part's table must cover its rows, bins ascending: a table that
    passed its CRC but disagrees with the manifest is refused too."""
    total = mdbin_strides(list(entry.axes))[0] * entry.axes[0].slots if entry.axes else 1
    expected_first = 0
    for part in entry.parts:
        first, count = part.table
        own_bins, own_starts = bins[first : first + count], starts[first : first + count]
        ok = (
            part.first == expected_first
            and len(own_bins) == count
            and (count == 0) == (part.rows == 0)
            and (count == 0 or (own_starts[0] == 0 and int(own_starts[-1]) < part.rows))
            and bool(np.all(np.diff(own_starts) > 0))
            and bool(np.all(own_bins[1:] > own_bins[:-1]))
            and (count == 0 or int(own_bins[-1]) < total)
        )
        if not ok:
            raise damaged(where, entry, "the offset table{of} disagrees with the manifest", mend)
        expected_first += part.rows
    if expected_first != entry.rows:
        raise damaged(where, entry, "the parts{of} do not cover its rows", mend)

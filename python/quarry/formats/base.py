"""The array I/O interface every format driver implements.

A driver lists variables and reads flat, row-major element ranges of one of
them into NumPy arrays. Everything else (names, indexes, queries) is built on
these few calls, so a new format is one small module.
"""

from __future__ import annotations

import functools
import math
import os
import re
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from quarry.records import field, record

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from quarry.formats.subarray import Subarray

#: dtypes Quarry indexes and queries; float16, complex, strings and compounds are not.
SUPPORTED_DTYPES = frozenset(("i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8"))
MAX_RANK = 4


def queryable_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The dtype a driver reads values of ``dtype`` as: bool as uint8 (0 and
    1) and float16 as float32, both exact, so the core's integer and float
    kinds hold them; any other dtype is itself.

    Examples
    --------
    >>> import numpy as np
    >>> queryable_dtype(np.dtype(bool)), queryable_dtype(np.dtype("<f2"))
    (dtype('uint8'), dtype('float32'))
    >>> queryable_dtype(np.dtype(">f8"))
    dtype('>f8')
    """
    import numpy as np

    if dtype.kind == "b":
        return np.dtype("u1")
    if dtype.kind == "f" and dtype.itemsize == 2:
        return np.dtype("f4")
    return dtype


def native(values: Any) -> npt.NDArray[np.generic]:
    """A plain ndarray in native byte order, aligned and contiguous (copied
    only when it is not already: a memory map at an odd file offset is not
    aligned, and the core reads aligned memory); bool and float16 widened
    as :func:`queryable_dtype` says.

    Examples
    --------
    >>> import numpy as np
    >>> native(np.array([1.5, 2.0], dtype=">f2")).dtype
    dtype('float32')
    """
    import numpy as np

    dtype = queryable_dtype(values.dtype).newbyteorder("=")
    if type(values) is np.ndarray and values.dtype == dtype:
        flags = values.flags
        if flags.c_contiguous and flags.aligned:
            # As it is (np.require's checks cost more than a small step's scan).
            return values
    out: npt.NDArray[np.generic] = np.require(
        np.asarray(values).astype(dtype, copy=False), requirements=["C", "A"]
    )
    return out


#: Positions are read in spans of this many elements when a driver cannot
#: address single elements cheaply.
GATHER_SPAN = 1 << 18


@record
class VariableInfo:
    """What a driver knows of one variable, without reading its values."""

    path: str
    shape: tuple[int, ...]
    dtype: np.dtype[np.generic]
    chunks: tuple[int, ...] | None = None
    compression: str | None = None
    problem: str | None = None
    """Why Quarry cannot index or query this variable; ``None`` if it can."""
    decoding: str | None = None
    """How stored values become the values read (missing markers, packing), if at all."""
    attrs: dict[str, Any] = field(default_factory=dict, compare=False)
    """The variable's attributes (units, long_name, ...), as plain JSON values."""
    dims: tuple[str, ...] | None = None
    """Dimension names, where the format has them (NetCDF, Zarr): a 1-D variable
    over one of a table's dimensions (a coordinate such as ``lat``) broadcasts
    along it."""
    subarray: Subarray | None = None
    """Set when a query addresses part of the variable (``x[0:100, 5]``):
    ``shape`` and ``dims`` are then the part's; ``path`` stays the variable's."""

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def key(self) -> str:
        """The path, with the subarray written after it for a part of a variable."""
        return self.path + (self.subarray.text if self.subarray is not None else "")

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def plain_attrs(attrs: Any) -> dict[str, Any]:
    """Attributes as JSON-ready values (NumPy scalars and arrays to Python, bytes to text).

    Examples
    --------
    >>> import numpy as np
    >>> plain_attrs({"units": b"K", "scale": np.float32(0.5), "range": np.array([0, 9])})
    {'units': 'K', 'scale': 0.5, 'range': [0, 9]}
    >>> plain_attrs({"coordinates": np.array([b"/cx", b"/cy"])})  # as h5py stores a list of bytes
    {'coordinates': ['/cx', '/cy']}
    >>> plain_attrs({"units": b"\\xb0C", "long_name": "\\udcb0C"})  # Latin-1: bytes, h5py str
    {'units': '\\ufffdC', 'long_name': '\\ufffdC'}
    """
    import numpy as np

    out: dict[str, Any] = {}
    for key, value in dict(attrs).items():
        if isinstance(value, np.ndarray | np.generic):
            value = value.tolist()
        value = _as_text(value)
        if isinstance(value, str | int | float | bool | list) or value is None:
            out[_as_text(str(key))] = value
    return out


def _as_text(value: Any) -> Any:
    """``value`` with its bytes, and those of its nested lists, decoded as
    UTF-8, a byte that is not UTF-8 replaced by U+FFFD (as h5py decodes a
    fixed-length string); so is one h5py gave back as a lone surrogate
    (``surrogateescape``), which no UTF-8 writer (HDF5, Parquet, JSON) takes."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            try:
                raw = value.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:  # a surrogate that stands for no byte
                raw = value.encode("utf-8", "replace")
            return raw.decode("utf-8", "replace")
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list):
        return [_as_text(v) for v in value]
    return value


def fingerprint(path: str) -> dict[str, int]:
    """What an index records of a data file to notice change: its size,
    modification and status-change times and inode; for a directory store
    (Zarr, ADIOS2 BP) the total size, the latest times over every file and
    folder, the number of files and the store's own inode.

    A write moves the modification time, and ``touch -r`` can put it back,
    but only the kernel sets the status-change time (ctime): restoring a
    time, or renaming another file into place, moves ctime or the inode.
    ``fine_times`` (1 or 0) says whether those times are exact to a tick of
    this machine's clock: sub-second, on a local file system (see
    :mod:`quarry.index.fresh` for why it matters).

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with open(os.path.join(d, "a"), "wb") as f:
    ...     _ = f.write(b"1234")
    >>> stamp = fingerprint(d)
    >>> stamp["size"], stamp["files"], sorted(stamp)
    (4, 1, ['ctime_ns', 'files', 'fine_times', 'ino', 'mtime_ns', 'size'])
    """
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        stamp = {
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "ctime_ns": st.st_ctime_ns,
            "ino": st.st_ino,
        }
    else:
        size, latest, changed, files = 0, st.st_mtime_ns, st.st_ctime_ns, 0
        for root, _, names in os.walk(path):
            folder = os.stat(root)
            latest, changed = max(latest, folder.st_mtime_ns), max(changed, folder.st_ctime_ns)
            for name in names:
                entry = os.stat(os.path.join(root, name))
                size += entry.st_size
                latest, changed = max(latest, entry.st_mtime_ns), max(changed, entry.st_ctime_ns)
                files += 1
        stamp = {"size": size, "mtime_ns": latest, "ctime_ns": changed, "ino": st.st_ino}
        stamp["files"] = files
    stamp["fine_times"] = int(
        bool(stamp["mtime_ns"] % 10**9 and stamp["ctime_ns"] % 10**9)
        and file_system(path) in _LOCAL_FILE_SYSTEMS
    )
    return stamp


#: File systems whose timestamps come from this machine's own clock, so
#: that sub-second times are exact to a tick of it; a network file system's
#: come from a server whose clock may differ from ours.
_LOCAL_FILE_SYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", "f2fs", "bcachefs"}
)


def file_system(path: str) -> str:
    """The type of the file system holding ``path`` (``ext4``, ``nfs``,
    ``lustre``...), from the longest mount point above it in
    ``/proc/self/mountinfo``; ``""`` where that cannot be read.

    Examples
    --------
    >>> file_system("/proc") == "proc" or file_system("/proc") == ""
    True
    """
    return _file_system_of(os.path.abspath(path))


@functools.lru_cache(maxsize=4096)
def _file_system_of(path: str) -> str:
    # Once per path and process: every open of a file asks again, and the
    # mounts do not change under a running process.
    target = os.path.realpath(path)
    best, kind = -1, ""
    for point, fs_type in _mounts():
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) > best:
            best, kind = len(point), fs_type
    return kind


@functools.lru_cache(maxsize=1)
def _mounts() -> tuple[tuple[str, str], ...]:
    """(mount point, file system type) of every mount, read once per process."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:  # not Linux: every file system counts as remote
        return ()
    mounts = []
    for line in lines:
        before, _, after = line.partition(" - ")
        fields = before.split()
        if len(fields) >= 5 and after:
            # mountinfo escapes spaces and the like as octal (\040)
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            mounts.append((point, after.split()[0]))
    return tuple(mounts)


def variable_problem(shape: tuple[int, ...], dtype: np.dtype[np.generic]) -> str | None:
    """The reason a variable of this shape and dtype is unsupported, or ``None``.

    Examples
    --------
    >>> import numpy as np
    >>> variable_problem((10,), np.dtype("f4")) is None
    True
    >>> variable_problem((10,), np.dtype("c8"))
    'dtype complex64 is not supported (integers and float32/float64 are)'
    """
    if dtype.str[1:] not in SUPPORTED_DTYPES:
        return f"dtype {dtype} is not supported (integers and float32/float64 are)"
    if not 1 <= len(shape) <= MAX_RANK:
        return f"rank {len(shape)} is not supported (1 to {MAX_RANK} dimensions are)"
    return None


class Driver(Protocol):
    """One open data file.

    A driver may declare ``concurrent_reads`` (a class attribute): True
    where several threads may call its ``read`` at once, because its
    library is documented safe for that (or serialises itself); False,
    or not declared, where its calls must be made one at a time. See
    :func:`reads_concurrently`.
    """

    path: str
    step_context: str | None
    """The context path naming the file's step groups where its format says
    where they are (openPMD's iterations: ``/data/*``); None: found by name."""

    def variables(self) -> list[VariableInfo]:
        """Every array in the file, supported or not."""
        ...

    def read(self, var: str, start: int, stop: int) -> npt.NDArray[np.generic]:
        """Elements ``[start, stop)`` of ``var`` in flat row-major order: native byte
        order, aligned, contiguous."""
        ...

    def gather(self, var: str, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.generic]:
        """Elements at ascending flat ``positions``."""
        ...

    def close(self) -> None: ...


def reads_concurrently(driver: object) -> bool:
    """Whether ``driver``'s reads may run from several threads at once: its
    ``concurrent_reads``, False where it declares none (a driver that wraps
    another, or one of a format whose library is not safe to enter twice).

    Examples
    --------
    >>> from quarry.formats.raw import RawDriver
    >>> from quarry.formats.netcdf import NetCDFDriver
    >>> reads_concurrently(RawDriver), reads_concurrently(NetCDFDriver)
    (True, False)
    >>> reads_concurrently(object())  # declares nothing
    False
    """
    return getattr(driver, "concurrent_reads", False) is True


def gathers_in_place(driver: object, var: str) -> bool:
    """Whether ``driver.gather`` reads ``var``'s values where they lie, from a
    memory map, touching nothing around them: its ``maps(var)``, False
    where it declares none (its gather reads whole spans).

    Examples
    --------
    >>> import h5py, numpy as np, tempfile, os
    >>> from quarry.formats.hdf5 import HDF5Driver
    >>> path = os.path.join(tempfile.mkdtemp(), "v.h5")
    >>> with h5py.File(path, "w") as f:
    ...     f["a"] = np.arange(4.0)
    ...     _ = f.create_dataset("c", data=np.arange(4.0), chunks=(2,))
    >>> drv = HDF5Driver(path)
    >>> [gathers_in_place(drv, "/a"), gathers_in_place(drv, "/c"), gathers_in_place(None, "/a")]
    [True, False, False]
    >>> drv.close()
    """
    maps = getattr(driver, "maps", None)
    return bool(maps(var)) if callable(maps) else False


class Backend(Protocol):
    """A format Quarry reads, as the registry in :mod:`quarry.formats` asks it
    (in the style of xarray's backend entrypoints): whether a source looks
    like one of its files, and how to open one."""

    name: str
    """What :func:`quarry.formats.detect` answers: ``hdf5``, ``netcdf``, ..."""

    @property
    def recognised_by(self) -> str:
        """How it is told apart, for the message when no format is: ``HDF5
        (signature at byte 0, 512, 1024, ...)``."""
        ...

    directory: bool
    """Whether its sources are directories (a store) rather than files."""

    def guess_can_open(self, path: str, sidecar_dirs: tuple[str, ...] = ()) -> bool:
        """Whether ``path`` (an existing file or directory) is one of this
        format's, from cheap evidence: magic bytes, marker files, a
        description beside it (``sidecar_dirs``: other places to look).
        May raise :class:`OSError` when ``path`` cannot be read."""
        ...

    def open(self, path: str, sidecar_dirs: tuple[str, ...] = ()) -> Driver:
        """A driver for ``path``; raises :class:`~quarry.errors.SourceError`
        when it cannot be opened (or the format's package is missing)."""
        ...


def require(module: str, extra: str, path: str) -> None:
    """Refuse ``path`` with the install command when the package ``module``
    that reads its format is missing (``extra``: the optional dependency
    group that brings it).

    Examples
    --------
    >>> require("numpy", "any", "a.h5")
    >>> require("no_such_package_here", "netcdf", "a.nc")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    quarry.errors.SourceError: a.nc needs the no_such_package_here package, ...[netcdf]'
    """
    import importlib.util

    if importlib.util.find_spec(module) is None:
        from quarry.errors import SourceError

        raise SourceError(
            f"{path} needs the {module} package, which is not installed: "
            f"pip install 'quarry-index[{extra}]'"
        )


def gather_by_spans(
    driver: Driver, var: str, size: int, positions: npt.NDArray[np.int64]
) -> npt.NDArray[np.generic]:
    """Gather through ``driver.read`` one span at a time, reading only spans with hits.

    The fallback for storage that cannot address single elements cheaply
    (chunked or compressed data).
    """
    import numpy as np

    if len(positions) == size:
        return driver.read(var, 0, size)
    parts = []
    i = 0
    while i < len(positions):
        start = int(positions[i]) // GATHER_SPAN * GATHER_SPAN
        stop = min(start + GATHER_SPAN, size)
        j = i + int(np.searchsorted(positions[i:], stop))
        if j - i == 1:
            parts.append(driver.read(var, int(positions[i]), int(positions[i]) + 1))
        else:
            parts.append(driver.read(var, start, stop)[positions[i:j] - start])
        i = j
    if not parts:
        return driver.read(var, 0, 0)
    return np.concatenate(parts)


def read_flat(
    shape: tuple[int, ...], start: int, stop: int, rows: Callable[[int, int], Any]
) -> Any:
    """Flat row-major elements ``[start, stop)`` of an array of ``shape``, given
    ``rows(r0, r1)`` returning its leading-axis rows ``[r0, r1)``: every driver
    reads hyperslabs of whole rows, and only those that cover the span.

    Whatever ``rows`` returns (an ndarray, a masked array) comes back flattened.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.arange(20).reshape(4, 5)
    >>> read_flat(a.shape, 7, 13, lambda r0, r1: a[r0:r1])
    array([ 7,  8,  9, 10, 11, 12])
    """
    if stop <= start:
        return rows(0, 0).reshape(-1)[:0]
    row = math.prod(shape[1:])
    r0 = start // row
    r1 = -(-stop // row)
    skip = start - r0 * row
    return rows(r0, r1).reshape(-1)[skip : skip + (stop - start)]

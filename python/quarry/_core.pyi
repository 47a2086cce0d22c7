"""Type stubs for ``quarry._core``, the Rust core's Python binding."""

import os
from typing import Any, final

import numpy as np
import numpy.typing as npt

__all__ = [
    "CHECK_ROWS",
    "KEY_KINDS",
    "Column",
    "CorruptBlockError",
    "IndexFile",
    "RowSet",
    "Tally",
    "__version__",
    "add_bins",
    "box_runs",
    "build_blocks",
    "cluster_part",
    "corner_sum",
    "count_boxes",
    "count_ranges",
    "crc32",
    "evaluate",
    "jobs",
    "reserve_space",
    "scan_box",
    "scan_compare",
    "scan_range",
    "set_jobs",
    "stable_order",
    "variable_edges",
]

__version__: str
KEY_KINDS: tuple[str, ...]
"""The key domains values are indexed in (``f64``, ``i64``, ``u64``), in the core's tag order."""
CHECK_ROWS: int
"""Rows of a reorganised copy's column checked together (see :func:`cluster_part`)."""

class CorruptBlockError(Exception):
    """Index bytes that do not parse."""

@final
class RowSet:
    """Rows of a logical table, one Roaring bitmap per block."""

    @staticmethod
    def full(n_rows: int, block_len: int) -> RowSet: ...
    @staticmethod
    def empty(n_rows: int, block_len: int) -> RowSet: ...
    @staticmethod
    def full_blocks(n_rows: int, block_len: int, keep: list[bool]) -> RowSet: ...
    @staticmethod
    def from_ids(ids: npt.NDArray[np.int64], n_rows: int, block_len: int) -> RowSet: ...
    @staticmethod
    def from_bytes(data: bytes) -> RowSet: ...
    def to_bytes(self) -> bytes: ...
    @property
    def n_rows(self) -> int: ...
    @property
    def block_len(self) -> int: ...
    def __len__(self) -> int: ...
    def __and__(self, other: RowSet, /) -> RowSet: ...
    def __rand__(self, other: RowSet, /) -> RowSet: ...
    def __or__(self, other: RowSet, /) -> RowSet: ...
    def __ror__(self, other: RowSet, /) -> RowSet: ...
    def __sub__(self, other: RowSet, /) -> RowSet: ...
    def __rsub__(self, other: RowSet, /) -> RowSet: ...
    def __eq__(self, other: object, /) -> bool: ...
    def is_empty(self) -> bool: ...
    def block_counts(self) -> list[int]: ...
    def slice_blocks(self, first: int, stop: int) -> RowSet: ...
    def place_blocks(self, first: int, n_rows: int) -> RowSet: ...
    def to_ids(self) -> npt.NDArray[np.int64]: ...

@final
class Column:
    """All blocks of one indexed variable."""

    @staticmethod
    def open(
        files: list[IndexFile],
        kind: str,
        spans: list[tuple[int, int, int]],
        n_rows: int,
        block_len: int,
    ) -> Column: ...
    @property
    def n_rows(self) -> int: ...
    @property
    def block_len(self) -> int: ...
    def count(
        self,
        lo: float | int,
        lo_incl: bool,
        hi: float | int,
        hi_incl: bool,
        blocks: tuple[int, int] | None = None,
        tally: Tally | None = None,
    ) -> tuple[int, RowSet]: ...
    def leaf(
        self,
        lo: float | int,
        lo_incl: bool,
        hi: float | int,
        hi_incl: bool,
        domain: RowSet | None = None,
        tally: Tally | None = None,
    ) -> tuple[RowSet, RowSet]: ...
    def block_bounds(
        self, lo: float | int, lo_incl: bool, hi: float | int, hi_incl: bool
    ) -> list[int]: ...
    def range_rows(
        self, lo: float | int, lo_incl: bool, hi: float | int, hi_incl: bool
    ) -> tuple[int, int]:
        """Rows of the bins wholly inside the interval (what making its row
        set decodes), and of those straddling its ends (the candidates the
        index would check), from the headers alone."""
    def histogram(
        self,
        edges: npt.NDArray[np.float64],
        domain: RowSet | None = None,
        tally: Tally | None = None,
    ) -> tuple[list[int], RowSet]: ...
    def missing(self, tally: Tally | None = None) -> RowSet: ...
    def check_bitmaps(self) -> tuple[int, str] | None:
        """Every bitmap of every block decoded and checked: None when all are
        whole, else the first damaged block and why."""
    def stats(self) -> list[tuple[int, float, float, float | int, float | int]]:
        """Per block: (count, sum, M2, min, max) of the non-missing values."""

@final
class Tally:
    """What index calls did, added up over every call it is passed to."""

    def __new__(cls) -> Tally: ...
    @property
    def bitmaps_decoded(self) -> int: ...

@final
class IndexFile:
    """A memory-mapped index file."""

    def __new__(cls, path: str | os.PathLike[str]) -> IndexFile: ...
    def __len__(self) -> int: ...
    def read(self, offset: int, length: int) -> bytes: ...
    def crc32(self, offset: int, length: int) -> int: ...

def build_blocks(
    values: npt.NDArray[np.generic], edges: npt.NDArray[np.generic], block_len: int
) -> list[tuple[bytes, int]]: ...
def evaluate(
    columns: list[npt.NDArray[np.generic]], program: list[tuple[str, float]], n_rows: int
) -> npt.NDArray[np.float64]: ...
def scan_compare(
    columns: list[npt.NDArray[np.generic]],
    left: list[tuple[str, float]],
    cmp: str,
    right: list[tuple[str, float]],
    n_rows: int,
    block_len: int,
    domain: RowSet | None = None,
) -> tuple[RowSet, RowSet]: ...
def scan_box(
    columns: list[npt.NDArray[np.generic]],
    lo: list[float | int],
    lo_incl: list[bool],
    hi: list[float | int],
    hi_incl: list[bool],
    block_len: int,
) -> RowSet: ...
def count_boxes(
    boxes: list[
        tuple[
            list[npt.NDArray[np.generic]],
            list[float | int],
            list[bool],
            list[float | int],
            list[bool],
        ]
    ],
) -> list[int]: ...
def scan_range(
    values: npt.NDArray[np.generic],
    lo: float | int,
    lo_incl: bool,
    hi: float | int,
    hi_incl: bool,
    block_len: int,
    domain: RowSet | None = None,
) -> tuple[RowSet, RowSet]: ...
def variable_edges(
    sample: npt.NDArray[np.generic], nbins: int, digits: int
) -> npt.NDArray[np.generic]: ...
def set_jobs(jobs: int) -> int: ...
def jobs() -> int: ...
def add_bins(
    columns: list[npt.NDArray[np.floating[Any]]],
    axes: list[tuple[float, float, int, int, npt.NDArray[np.float64] | None]],
    keys: npt.NDArray[np.uint64],
) -> None:
    """Add to ``keys``, in place, each row's bin number in every column
    (float32 or float64) times its axis' stride; ``axes`` gives each column's
    ``(origin, size, count, stride, decimal)``: ``floor((v - origin) / size)``
    in the column's dtype, clipped to ``[0, count - 1]``, NaN in bin
    ``count``; moved by one to the edges ``decimal`` holds where given
    (``quarry.reorg.binning.Axis.decimal_table``: ``count + 2`` float64)."""

def stable_order(
    keys: npt.NDArray[np.uint64],
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
    """The rows in ascending key order, rows of one key ascending (a stable
    sort's order; uint64, to view as int64), with the keys present and where
    each one's rows start."""

def cluster_part(
    columns: list[npt.NDArray[np.unsignedinteger[Any]]],
    floats: list[npt.NDArray[np.floating[Any]]],
    axes: list[tuple[float, float, int, int, npt.NDArray[np.float64] | None]],
    keys: npt.NDArray[np.uint64] | None,
    first: int,
    wide_rows: bool,
    fd: int,
    offsets: list[int],
) -> tuple[
    list[int], list[int], npt.NDArray[np.uint32], npt.NDArray[np.uint64], npt.NDArray[np.int64]
]:
    """Cluster one part of a reorganised copy and write it, without the GIL.
    Each row's key is ``keys`` (None: zeros) plus the bins of ``floats`` (as
    :func:`add_bins`); the rows are put in stable key order; each of
    ``columns`` (viewed as uint8/16/32/64) is gathered in that order and
    written to the open file ``fd`` at its offset in ``offsets``, then the
    rows ``first + order`` (uint32, or int64 when ``wide_rows``) at the last.
    Returns the CRC-32 of each column as given, of each column and of the
    rows as written, of each block of :data:`CHECK_ROWS` rows of each of
    them as written (column after column, as many blocks each), the keys
    present and where each one's rows start."""

def reserve_space(fd: int, length: int) -> bool:
    """Reserve the disk blocks of bytes ``[0, length)`` of the open file
    ``fd`` (Linux ``fallocate``, its size and contents kept); whether they
    were. Where the file system cannot, nothing is done (no zeros written)."""

def corner_sum(
    values: npt.NDArray[np.generic],
    t: list[npt.NDArray[np.float64]],
    planes: list[npt.NDArray[np.int64]],
    corners: list[tuple[int, int]],
    out: npt.NDArray[np.float64],
) -> None:
    """Set ``out[i]`` to the sum over the ``2**len(t)`` corners of point
    ``i``'s cell (corner bits in order, the first axis' slowest) of the
    corner's weight, the product over the axes of ``1 - t[a][i]`` or
    ``t[a][i]``, times its node ``values[planes[p][i] + offset]``, corner
    ``k`` being ``corners[k] = (p, offset)``; in float64, as NumPy would."""

def box_runs(
    keys: npt.NDArray[np.uint64],
    starts: npt.NDArray[np.int64],
    ends: npt.NDArray[np.int64],
    parts: list[tuple[int, int]],
    strides: list[int],
    states: list[npt.NDArray[np.uint8]],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The runs of a reorganised copy's table that a box reads: ``keys``
    (MDBin numbers, ascending within each part), ``starts`` and ``ends``
    (each entry's rows within its part) every part's laid end to end,
    ``parts`` each part's ``(first, count)`` entries, ``strides`` each axis'
    and ``states`` each of its 1-D bins' (0 outside, 1 boundary, 2 inside).
    The ``(part, offset, length)`` runs of whole rows and of boundary rows,
    each an ``(n, 3)`` array, in table order."""

def crc32(data: npt.NDArray[np.uint8], start: int = 0) -> int:
    """The CRC-32 of ``data``'s bytes continuing from ``start`` (``zlib.crc32``'s)."""

def count_ranges(
    values: npt.NDArray[np.generic],
    lo: npt.NDArray[np.generic],
    lo_incl: npt.NDArray[np.bool_],
    hi: npt.NDArray[np.generic],
    hi_incl: npt.NDArray[np.bool_],
) -> npt.NDArray[np.uint64]:
    """How many values lie in each interval, compared exactly in the values'
    key domain (bounds as float64, int64 or uint64 arrays), in one pass."""

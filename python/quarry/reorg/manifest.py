"""A reorganised copy's manifest: what the copy holds and what it was built
from, read without NumPy or HDF5 (see :mod:`quarry.reorg.layout` for the
file it describes).

The manifest::

    {"format": "quarry-mdbin", "version": 2, "created_by": "quarry 0.1.0",
     "source": {"name": "run.h5", "size": ..., "mtime_ns": ..., "read_ns": ...},
     "part_rows": 4194304, "check_rows": 4096,
     "binning": {"bin_size": [0.1, 10.0], "bins": null}, "context": null,
     "members": [{"name": "m0", "step": 0, "group": "/Step#0", "rows": ...,
                  "axes": [{"path": "/Step#0/x", "dtype": "<f4", "min": ..., "max": ...,
                            "bin_size": ..., "bins": 16, "nan_bin": false}, ...],
                  "parts": [{"first": 0, "rows": ..., "table": [0, 812],
                             "source_crc32": [...], "copy_crc32": [...]}, ...],
                  "table_crc32": ...,
                  "at": {"columns": [2048, ...], "table_bins": ..., "table_starts": ...,
                         "block_crc32": ...}}]}

``source`` is what an index records of its source (see
:mod:`quarry.index.fresh`), and ``source_crc32`` the CRC-32 of each part of
each variable as read, so a copy whose source's stat cannot prove it
unchanged is checked the way an index is. ``copy_crc32`` covers each part of
each column and of ``rows`` (checked by :func:`quarry.reorg.read.check_copy`);
``table_crc32`` covers the offset tables, checked when they are first read.
``binning`` is what ``--bin-size`` or ``--bins`` asked, and ``context`` the
group the variables were named under (``--path``; null without one), so a
stale copy's message says how to build it again as it was.
``at`` is where each array's bytes begin in the file (the columns, then
``rows``; null for an empty one).

The user block (the copy file's first 512 bytes, before HDF5's own) says
where the manifest lies: ``quarry-mdbin OFFSET LENGTH CRC32``. So opening a
copy and proving it fresh reads two short runs of bytes, and a query that
the index answers better never imports NumPy for the copy's sake.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from quarry.errors import CorruptCopyError
from quarry.index.manifest import SourceRecord
from quarry.records import record
from quarry.reorg.binning import Axis, Binning

FORMAT = "quarry-mdbin"
VERSION = 2
#: The dataset holding the manifest.
MANIFEST = "quarry_reorg"
#: The HDF5 user block: the bytes before HDF5's own, which say where the
#: manifest lies, so opening a copy needs no HDF5 library.
USER_BLOCK = 512
HEADER = b"quarry-mdbin "
#: How a damaged copy is mended, as its messages say where they cannot name
#: the command (:func:`quarry.reorg.store.open_copy` gives that).
REBUILD = "build it again with quarry reorg"


class Mend:
    """What a message of a damaged copy says to do: ``make()`` (the command
    that builds the copy again, which takes a few stats to spell) made only
    when a message is, else :data:`REBUILD`.

    Examples
    --------
    >>> f"damaged; {Mend()}", f"damaged; {Mend(lambda: 'run this')}"
    ('damaged; build it again with quarry reorg', 'damaged; run this')
    """

    def __init__(self, make: Callable[[], str] | None = None) -> None:
        self._make = make

    def __str__(self) -> str:
        return self._make() if self._make is not None else REBUILD


@record
class PartEntry:
    """One part of a member: its rows ``[first, first + rows)``, its slice of
    the offset table, and the CRC-32s of its source values and of its copy
    (one per variable; the copy's also one for ``rows``, last)."""

    first: int
    rows: int
    table: tuple[int, int]
    source_crc32: tuple[int, ...]
    copy_crc32: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "first": self.first,
            "rows": self.rows,
            "table": list(self.table),
            "source_crc32": list(self.source_crc32),
            "copy_crc32": list(self.copy_crc32),
        }

    @staticmethod
    def from_json(doc: dict[str, Any]) -> PartEntry:
        table = doc["table"]
        return PartEntry(
            int(doc["first"]),
            int(doc["rows"]),
            (int(table[0]), int(table[1])),
            tuple(int(c) for c in doc["source_crc32"]),
            tuple(int(c) for c in doc["copy_crc32"]),
        )


@record
class Placement:
    """Where a member's arrays begin in the copy file, in bytes (None for
    one with no rows): its variables' columns then ``rows``, and its
    offset tables.

    Examples
    --------
    >>> at = Placement((2048, 4096, None), 8192, None, 9000)
    >>> Placement.from_json(at.to_json()) == at
    True
    """

    columns: tuple[int | None, ...]
    table_bins: int | None
    table_starts: int | None
    block_crc32: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "columns": list(self.columns),
            "table_bins": self.table_bins,
            "table_starts": self.table_starts,
            "block_crc32": self.block_crc32,
        }

    @staticmethod
    def from_json(doc: dict[str, Any]) -> Placement:
        def at(value: Any) -> int | None:
            return None if value is None else int(value)

        return Placement(
            tuple(at(c) for c in doc["columns"]),
            at(doc["table_bins"]),
            at(doc["table_starts"]),
            at(doc["block_crc32"]),
        )


@record
class MemberEntry:
    """One reorganised table: its HDF5 group ``name``, the step and step
    group it came from (None for a file without steps), its rows, its axes
    (one per variable, in the order of the MDBin number), its parts, and
    where its arrays lie in the file (None until the copy is published)."""

    name: str
    step: int | None
    group: str | None
    rows: int
    axes: tuple[Axis, ...]
    parts: tuple[PartEntry, ...]
    table_crc32: int
    at: Placement | None = None

    @property
    def variables(self) -> list[str]:
        return [a.path for a in self.axes]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "step": self.step,
            "group": self.group,
            "rows": self.rows,
            "axes": [a.to_json() for a in self.axes],
            "parts": [p.to_json() for p in self.parts],
            "table_crc32": self.table_crc32,
            "at": None if self.at is None else self.at.to_json(),
        }

    @staticmethod
    def from_json(doc: dict[str, Any]) -> MemberEntry:
        return MemberEntry(
            str(doc["name"]),
            None if doc["step"] is None else int(doc["step"]),
            None if doc["group"] is None else str(doc["group"]),
            int(doc["rows"]),
            tuple(Axis.from_json(a) for a in doc["axes"]),
            tuple(PartEntry.from_json(p) for p in doc["parts"]),
            int(doc["table_crc32"]),
            None if doc.get("at") is None else Placement.from_json(doc["at"]),
        )


@record
class CopyManifest:
    """What a reorganised copy holds and what it was built from."""

    created_by: str
    source: SourceRecord
    part_rows: int
    members: tuple[MemberEntry, ...]
    check_rows: int
    """Rows per block of ``block_crc32``."""
    binning: Binning | None = None
    """The bin sizes or numbers of bins asked for (None in a copy made before
    it was recorded)."""
    context: str | None = None
    """The group the variables were named under when the copy was built
    (``--path``, ``path=``); None without one."""

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "created_by": self.created_by,
            "source": self.source.to_json(),
            "part_rows": self.part_rows,
            "check_rows": self.check_rows,
            "binning": None if self.binning is None else self.binning.to_json(),
            "context": self.context,
            "members": [m.to_json() for m in self.members],
        }

    @staticmethod
    def from_json(text: str, where: str, mend: Mend | None = None) -> CopyManifest:
        """The manifest in ``text``; :class:`CorruptCopyError` naming
        ``where`` (and saying ``mend``) when it is not one this version reads."""
        try:
            doc = json.loads(text)
            if doc.get("format") != FORMAT:
                raise CorruptCopyError(f"{where} is not a reorganised copy")
            if doc.get("version") != VERSION:
                raise CorruptCopyError(
                    f"{where} is a reorganised copy of version {doc.get('version')}; this "
                    f"Quarry reads version {VERSION}: {mend or Mend()}"
                )
            return CopyManifest(
                str(doc["created_by"]),
                SourceRecord.from_json(doc["source"]),
                int(doc["part_rows"]),
                tuple(MemberEntry.from_json(m) for m in doc["members"]),
                int(doc["check_rows"]),
                None if doc.get("binning") is None else Binning.from_json(doc["binning"]),
                None if doc.get("context") is None else str(doc["context"]),
            )
        except CorruptCopyError:
            raise
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            raise CorruptCopyError(
                f"the manifest of {where} is damaged ({exc!r}); {mend or Mend()}"
            ) from None


def manifest_in(fd: int, where: str, mend: Mend | None = None) -> CopyManifest:
    """The manifest of the copy open at ``fd`` (``where`` names it), found
    through its user block and checked against its CRC-32:
    :class:`CorruptCopyError` (saying ``mend``) where it is not a copy this
    version reads."""
    size = os.fstat(fd).st_size
    return CopyManifest.from_json(manifest_text(fd, size, where, mend), where, mend)


def manifest_text(fd: int, size: int, where: str, mend: Mend | None = None) -> str:
    """The manifest of the copy open at ``fd`` (``size`` bytes), found
    through its user block and checked against its CRC-32."""
    import zlib

    rebuild = mend or Mend()
    head = os.pread(fd, USER_BLOCK, 0)
    if not head.startswith(HEADER):
        raise CorruptCopyError(f"{where} cannot be read: it is not a reorganised copy; {rebuild}")
    try:
        offset, length, crc = (int(v) for v in head[len(HEADER) :].split(b"\n")[0].split())
    except ValueError:
        raise CorruptCopyError(f"{where} has no manifest; {rebuild}") from None
    data = os.pread(fd, length, offset) if offset > 0 and offset + length <= size else b""
    if len(data) != length or zlib.crc32(data) != crc:
        raise CorruptCopyError(f"the manifest of {where} is damaged; {rebuild}")
    return data.decode("utf-8", "replace")

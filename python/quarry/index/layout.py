"""The index file on disk: a container of block indexes and a JSON manifest.

::

    "QUARRYIX" u32 version u32 0          16-byte header
    block bytes ...                       each block is self-checking (quarry-core)
    manifest (UTF-8 JSON)                 variables, edges, block spans, provenance
    u64 manifest offset, u64 length, u32 crc32, u32 version, "QIDXEND\\0"   32-byte trailer

The file is written under a temporary name in the same directory, flushed,
fsynced and renamed over the old one: a crash leaves the old index or the new
one, never a torn file.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO

from quarry import _core
from quarry.errors import CorruptIndexError

MAGIC = b"QUARRYIX"
END_MAGIC = b"QIDXEND\0"
VERSION = 2
_HEADER = struct.Struct("<8sII")
_TRAILER = struct.Struct("<QQII8s")


class IndexWriter:
    """Stream blocks into a new index file; :meth:`commit` publishes it atomically."""

    def __init__(self, path: str) -> None:
        import tempfile  # only writing needs it; queries should not pay the import

        self.path = path
        directory = os.path.dirname(os.path.abspath(path))
        fd, self._tmp = tempfile.mkstemp(
            prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory
        )
        # mkstemp makes the file private (0600); an index is shared like any
        # file the user creates, so give it the umask's usual permissions.
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        self._file: BinaryIO = os.fdopen(fd, "wb")
        self._file.write(_HEADER.pack(MAGIC, VERSION, 0))
        self._offset = _HEADER.size

    def add_all(self, blobs: list[bytes]) -> list[tuple[int, int]]:
        """Append blocks in order; returns each one's (offset, length).

        The data is flushed to disk as it goes (on the builder's writer
        thread, overlapping the indexing), so the fsync before the final
        rename has little left to do.
        """
        spans = []
        for blob in blobs:
            spans.append((self._offset, len(blob)))
            self._file.write(blob)
            self._offset += len(blob)
        self._file.flush()
        os.fdatasync(self._file.fileno())
        return spans

    def commit(self, manifest: dict[str, Any]) -> None:
        body = json.dumps(manifest, separators=(",", ":")).encode()
        self._file.write(body)
        self._file.write(
            _TRAILER.pack(self._offset, len(body), zlib.crc32(body), VERSION, END_MAGIC)
        )
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self._tmp, self.path)
        with contextlib.suppress(OSError):  # not every filesystem lets a directory be fsynced
            dir_fd = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()
        with contextlib.suppress(OSError):
            os.unlink(self._tmp)


@contextlib.contextmanager
def writing(path: str) -> Iterator[IndexWriter]:
    """An :class:`IndexWriter` that is aborted (temp file removed) on any error."""
    writer = IndexWriter(path)
    try:
        yield writer
    except BaseException:
        writer.abort()
        raise


def read(path: str) -> tuple[_core.IndexFile, dict[str, Any]]:
    """Map an index file and return it with its verified manifest."""
    index = _core.IndexFile(path)
    size = len(index)

    def damaged(why: str) -> CorruptIndexError:
        return CorruptIndexError(f"index {path} is damaged ({why}); rebuild it with 'quarry index'")

    if size < _HEADER.size + _TRAILER.size:
        raise damaged(f"{size} bytes is too short to be an index")
    magic, version, _ = _HEADER.unpack(index.read(0, _HEADER.size))
    if magic != MAGIC:
        raise damaged("not a Quarry index: wrong magic number")
    if version != VERSION:
        raise CorruptIndexError(
            f"index {path} has format version {version}; this Quarry reads version {VERSION}. "
            "Rebuild it with 'quarry index'"
        )
    offset, length, crc, tversion, end = _TRAILER.unpack(
        index.read(size - _TRAILER.size, _TRAILER.size)
    )
    if end != END_MAGIC or tversion != VERSION:
        raise damaged("the end marker is missing; the file is truncated or overwritten")
    if offset + length != size - _TRAILER.size or offset < _HEADER.size:
        raise damaged("the manifest location is inconsistent")
    body = index.read(offset, length)
    if zlib.crc32(body) != crc:
        raise damaged("manifest checksum mismatch")
    try:
        manifest = json.loads(body)
    except ValueError:
        raise damaged("manifest is not valid JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") != "quarry-index":
        raise damaged("manifest is not a Quarry manifest")
    return index, manifest

"""The index file on disk: a container of block indexes and a JSON manifest.

::

    "QUARRYIX" u32 version u32 0          16-byte header
    block bytes ...                       each block is self-checking (quarry-core)
    edges area                            every variable's bin edges (raw bytes)
    manifest (UTF-8 JSON)                 variables, block spans, provenance
                                          (typed in :mod:`quarry.index.manifest`)
    u64 manifest offset, u64 length, u32 crc32, u32 version, "QIDXEND\\0"   32-byte trailer

The file is written under a temporary name in the same directory, flushed,
fsynced and renamed over the old one: a crash leaves the old index or the new
one, never a torn file.

An index built by many MPI ranks keeps its blocks in *shards*, one file per
rank written by that rank alone (``run.h5.qidx.<build>-<rank>.qshard``: a
16-byte ``"QUARRYSH" u32 version u32 rank`` header, then blocks), and the
index file holds only the manifest. The manifest's ``"shards"`` lists them
(name relative to the index, size); a block's span is ``[file, offset,
length]``, file 0 being the index file itself and file k the k-th shard.
Shards carry the build's name, so a new build never touches the files the
published index uses; they are removed once the new manifest replaces it.

A build that is killed (SIGKILL, a node lost) leaves its temporary file or
shards behind. Each writer holds an exclusive ``flock`` on its file from
before its first byte until the manifest that uses it is published, so a
later build of the same index (:func:`remove_debris`) removes exactly the
temporaries and unpublished shards whose lock it can take: their builds
are no longer running. A file still empty may be a live build's that has
not taken its lock yet; it is left alone (a kill in that instant leaves an
empty file).

Format changes: the header's ``VERSION`` counts changes to the bytes; a
reader refuses versions it does not know (:data:`READS`). Version 4 moved
the bin edges out of the JSON into the edges area; version 3 is still
read. Fields added to the manifest's JSON do not change it when a reader
that ignores them still answers correctly, and a reader treats a missing
field as the older behaviour (``source.ctime_ns``, ``ino`` and ``read_ns``
arrived this way: an index without them is trusted
only after a CRC check, see :mod:`quarry.index.fresh`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO

from quarry import _core
from quarry.errors import CorruptIndexError
from quarry.index.manifest import Manifest, ManifestText, VariableEntry, edges_area

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

MAGIC = b"QUARRYIX"
SHARD_MAGIC = b"QUARRYSH"
END_MAGIC = b"QIDXEND\0"
VERSION = 4
#: The versions this reader reads (see the module notes).
READS = (3, 4)
SHARD_SUFFIX = ".qshard"
_HEADER = struct.Struct("<8sII")
_TEMPORARY_LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789_"
_TRAILER = struct.Struct("<QQII8s")


class BlockWriter:
    """Appends blocks to a file that only this writer touches, named ``path``
    (or a temporary name beside ``publish_as``, for :class:`IndexWriter`)."""

    #: The number blocks written here have in a manifest's ``[file, ...]`` spans.
    file_number = 0

    def __init__(self, path: str, header: bytes) -> None:
        self.path = path
        self._file: BinaryIO = _create(path)
        _OWN.add(path)
        self._file.write(header)
        self._file.flush()  # not empty once locked: see remove_debris
        self._offset = len(header)

    def add_all(self, blobs: list[bytes], sync: bool = True) -> list[tuple[int, int, int]]:
        """Append blocks in order; returns each one's ``[file, offset, length]``.

        The data is flushed to disk as it goes (on the builder's writer
        thread, overlapping the indexing), so the fsync at the end has
        little left to do; ``sync=False`` leaves that to the system, for a
        file that is never published (an in-situ index's staging file).
        """
        spans = []
        for blob in blobs:
            spans.append((self.file_number, self._offset, len(blob)))
            self._file.write(blob)
            self._offset += len(blob)
        self._file.flush()
        if sync:
            os.fdatasync(self._file.fileno())
        return spans

    def add_copied(self, source: int, extents: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
        """Append blocks that lie in the open file ``source`` at ``(offset,
        length)`` extents, in order; returns each one's ``[file, offset,
        length]`` as :meth:`add_all` does, and syncs them as it does. The
        bytes move inside the kernel (``copy_file_range``), adjacent extents
        in one call, and the disk writes what is copied while the rest is
        (a sync on another thread every :data:`COPY_SYNC_BYTES`), so copying
        a staged index costs about the disk's time to write it."""
        from concurrent.futures import Future, ThreadPoolExecutor

        self._file.flush()
        spans: list[tuple[int, int, int]] = []
        runs: list[list[int]] = []
        for offset, length in extents:
            spans.append((self.file_number, self._offset, length))
            self._offset += length
            if runs and runs[-1][0] + runs[-1][1] == offset:
                runs[-1][1] += length
            else:
                runs.append([offset, length])
        target = self._file.fileno()
        syncing: Future[None] | None = None
        with ThreadPoolExecutor(1, thread_name_prefix="quarry-sync") as syncer:
            unsynced = 0
            for offset, length in runs:
                for start in range(offset, offset + length, COPY_SYNC_BYTES):
                    piece = min(COPY_SYNC_BYTES, offset + length - start)
                    _copy_range(source, target, start, piece)
                    unsynced += piece
                    if unsynced >= COPY_SYNC_BYTES and (syncing is None or syncing.done()):
                        syncing, unsynced = syncer.submit(os.fdatasync, target), 0
            if syncing is not None:
                syncing.result()
        self._file.seek(self._offset)  # copy_file_range moved the descriptor, not the buffer
        os.fdatasync(target)
        return spans

    def finish(self) -> None:
        """Make every byte durable, keeping the file (and its lock) open."""
        self._file.flush()
        os.fsync(self._file.fileno())

    def release(self) -> None:
        """Close the file, which releases its lock: call once a published
        manifest uses it (or its name is no longer a temporary's)."""
        self._file.close()
        _OWN.discard(self.path)

    def close(self) -> None:
        self.finish()
        self.release()

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        _OWN.discard(self.path)


class ShardWriter(BlockWriter):
    """One rank's blocks of an index built in parallel (see the module notes)."""

    def __init__(self, index_path: str, build: str, rank: int, file_number: int) -> None:
        self.file_number = file_number
        super().__init__(
            shard_path(index_path, build, rank), _HEADER.pack(SHARD_MAGIC, VERSION, rank)
        )

    @property
    def size(self) -> int:
        return self._offset


#: Bytes moved per read and write where the kernel cannot copy between files.
_COPY_CHUNK = 16 << 20
#: Bytes :meth:`BlockWriter.add_copied` copies before it has the disk write them.
COPY_SYNC_BYTES = 32 << 20


def _copy_range(source: int, target: int, offset: int, length: int) -> None:
    """Append ``length`` bytes of ``source`` from ``offset`` at ``target``'s
    position: inside the kernel where it can (Linux), else read and written."""
    end = offset + length
    with contextlib.suppress(AttributeError, OSError):  # no copy_file_range here: below
        while offset < end:
            moved = os.copy_file_range(source, target, end - offset, offset)
            if moved == 0:
                raise EOFError(f"the file to copy from ends before byte {end}")
            offset += moved
    while offset < end:
        chunk = os.pread(source, min(_COPY_CHUNK, end - offset), offset)
        if not chunk:
            raise EOFError(f"the file to copy from ends before byte {end}")
        view = memoryview(chunk)
        while view:
            view = view[os.write(target, view) :]
        offset += len(chunk)


def encode_edges(edges: npt.NDArray[np.generic], key: str) -> bytes:
    """Bin edges as the index keeps them: their little-endian bytes in the
    key kind's edge dtype (in the edges area, see the module notes).

    Examples
    --------
    >>> import numpy as np
    >>> raw = encode_edges(np.array([0.5, 1.5]), "f64")
    >>> decode_edges(VariableEntry("<f8", (0,), "f64", 3, 2, raw, [], [])).tolist()
    [0.5, 1.5]
    """
    import numpy as np

    from quarry.expr.keys import EDGE_DTYPES

    return np.asarray(edges, dtype=EDGE_DTYPES[key]).tobytes()


def decode_edges(entry: VariableEntry) -> npt.NDArray[np.generic]:
    """The bin edges of a manifest's variable entry."""
    import numpy as np

    from quarry.expr.keys import EDGE_DTYPES

    return np.frombuffer(entry.edges, dtype=EDGE_DTYPES[entry.key])


def index_size(index_path: str) -> int:
    """Bytes the index at ``index_path`` takes on disk, shards included."""
    _, manifest = read_manifest(index_path)
    return os.path.getsize(index_path) + sum(s.size for s in manifest.shards)


def shard_path(index_path: str, build: str, rank: int) -> str:
    """Where rank ``rank`` of build ``build`` keeps its blocks of ``index_path``.

    Examples
    --------
    >>> shard_path("/data/run.h5.qidx", "3f9a2c", 7)
    '/data/run.h5.qidx.3f9a2c-0007.qshard'
    """
    return f"{index_path}.{build}-{rank:04d}{SHARD_SUFFIX}"


class IndexWriter(BlockWriter):
    """Stream blocks into a new index file; :meth:`commit` publishes it atomically."""

    def __init__(self, path: str) -> None:
        self.publish_as = path
        super().__init__(_temporary_beside(path), _HEADER.pack(MAGIC, VERSION, 0))

    def commit(
        self,
        manifest: Manifest,
        replaces: Manifest | None = None,
        text: ManifestText | None = None,
    ) -> None:
        """Write the manifest and put the file in place of any old index,
        whose shards (if it had any) are removed afterwards. For a caller
        that publishes again and again (a followed run, whose manifest grows
        with every step): ``replaces``, the manifest it published there, so
        that its shards are known without reading it again, and ``text``,
        the :class:`~quarry.index.manifest.ManifestText` that encoded it."""
        import numpy as np

        area, body = (text or ManifestText()).encode(manifest)
        crc = _core.crc32(np.frombuffer(body, np.uint8))  # zlib's, faster on a long manifest
        self._file.write(area)
        self._file.write(body)
        offset = self._offset + len(area)
        self._file.write(_TRAILER.pack(offset, len(body), crc, VERSION, END_MAGIC))
        self.finish()
        published = [s.name for s in replaces.shards] if replaces else _shards_of(self.publish_as)
        old_shards = set(published) - {s.name for s in manifest.shards}
        # Renamed while still locked: until then its name is a temporary's.
        _publish(self.path, self.publish_as)
        self.release()
        directory = os.path.dirname(os.path.abspath(self.publish_as))
        # A record of checks of the old index (quarry.index.fresh) says
        # nothing about the new one.
        for name in [*old_shards, os.path.basename(self.publish_as) + ".checked"]:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, name))


def _publish(tmp: str, path: str) -> None:
    """Rename ``tmp`` over ``path`` and make the rename durable."""
    os.replace(tmp, path)
    with contextlib.suppress(OSError):  # not every filesystem lets a directory be fsynced
        dir_fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _temporary_beside(path: str) -> str:
    """A new name in ``path``'s directory for a temporary (``.NAME.XXXXXXXX.tmp``)."""
    import secrets

    directory = os.path.dirname(os.path.abspath(path))
    random = "".join(secrets.choice(_TEMPORARY_LETTERS) for _ in range(8))
    return os.path.join(directory, f".{os.path.basename(path)}.{random}.tmp")


def replace_atomically(path: str, data: bytes) -> None:
    """Put ``data`` at ``path`` through a locked temporary beside it, as an
    index is published: readers see the old file or the new one."""
    writer = BlockWriter(_temporary_beside(path), data)
    try:
        writer.finish()
        _publish(writer.path, path)
        writer.release()
    except BaseException:
        writer.abort()
        raise


def _temporary_pattern(index_path: str) -> re.Pattern[str]:
    """Names of the temporaries and shards builds of ``index_path`` make.

    Examples
    --------
    >>> p = _temporary_pattern("/d/run.h5.qidx")
    >>> names = [".run.h5.qidx.k3_x9a0q.tmp", "run.h5.qidx.3f9a2c01-0007.qshard",
    ...          ".run.h5.qidx.checked.ab12cd34.tmp", ".run.h5.qidx.x.qidx.ab12cd34.tmp"]
    >>> [bool(p.fullmatch(n)) for n in names]
    [True, True, True, False]
    """
    base = re.escape(os.path.basename(index_path))
    temporary = rf"\.{base}(\.checked)?\.[a-z0-9_]{{8}}\.tmp"
    shard = rf"{base}\.[0-9a-f]+-[0-9]{{4,}}{re.escape(SHARD_SUFFIX)}"
    return re.compile(f"{temporary}|{shard}")


def remove_debris(index_path: str) -> list[str]:
    """Remove the temporaries and unpublished shards that killed builds of
    ``index_path`` left; returns their paths. A file is removed only when
    its lock can be taken (no running build holds it), it is not empty, and
    the published manifest does not use it (see the module notes).

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> left = os.path.join(d, ".run.h5.qidx.abcd1234.tmp")
    >>> with open(left, "wb") as f:
    ...     _ = f.write(b"QUARRYIX")
    >>> [os.path.basename(p) for p in remove_debris(os.path.join(d, "run.h5.qidx"))]
    ['.run.h5.qidx.abcd1234.tmp']
    """
    directory = os.path.dirname(os.path.abspath(index_path))
    pattern = _temporary_pattern(index_path)
    try:
        names = [n for n in os.listdir(directory) if pattern.fullmatch(n)]
    except OSError:
        return []
    removed = []
    for name in names:
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:  # gone (published or cleaned), or not ours to open
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a running build holds it, or locks are not supported here
            os.close(fd)
            continue
        try:
            # Checked under the lock: a shard's build publishes its manifest
            # before it lets the lock go.
            if os.fstat(fd).st_size > 0 and name not in _shards_of(index_path):
                os.unlink(path)
                removed.append(path)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def _create(path: str) -> BinaryIO:
    """Create ``path`` for writing, locked, with the permissions the umask
    gives any new file (an index is shared like its data)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    # Locked before the first byte, held until published: a later build
    # removes the file only if this process is gone (remove_debris). The
    # wait is only for a remove_debris looking at the still empty file.
    with contextlib.suppress(OSError):  # a file system without locks: never removed
        fcntl.flock(fd, fcntl.LOCK_EX)
    return os.fdopen(fd, "wb")


#: Files this process's writers have made and not yet published or removed.
_OWN: set[str] = set()


def own_temporary(path: str, owned: bool = True) -> None:
    """Note that this process is writing the temporary file ``path`` (or, with
    ``owned=False``, that it published or removed it): what
    :func:`remove_own_temporaries` removes. A reorganised copy's writer
    notes its temporary here too (:mod:`quarry.reorg.layout`)."""
    if owned:
        _OWN.add(path)
    else:
        _OWN.discard(path)


def remove_own_temporaries() -> None:
    """Remove the files this process's unfinished builds are writing (for a
    process about to end on a signal); a shard that a published manifest
    already uses is kept."""
    for path in list(_OWN):
        index = path.rsplit(".", 2)[0] if path.endswith(SHARD_SUFFIX) else None
        if index is not None and os.path.basename(path) in _shards_of(index):
            continue
        with contextlib.suppress(OSError):
            os.unlink(path)


def _shards_of(index_path: str) -> list[str]:
    """Shard names the index now at ``index_path`` uses (none if it is
    missing or unreadable: nothing to clean up then)."""
    try:
        _, manifest = read_manifest(index_path)
    except (OSError, CorruptIndexError):
        return []
    return [s.name for s in manifest.shards]


@contextlib.contextmanager
def writing(path: str) -> Iterator[IndexWriter]:
    """An :class:`IndexWriter` that is aborted (temp file removed) on any error."""
    writer = IndexWriter(path)
    try:
        yield writer
    except BaseException:
        writer.abort()
        raise


#: What a damaged index's message says to do where the caller gives no command.
REBUILD = "rebuild it with 'quarry index'"


def read(path: str, rebuild: str = REBUILD) -> tuple[list[_core.IndexFile], Manifest]:
    """Map an index file and its shards (the files block spans number) and
    return them with the verified manifest; a damaged one's error ends with
    ``rebuild`` (what to do: the caller that knows the source names the command)."""
    index, manifest = read_manifest(path, rebuild)
    files = [index]
    # Shards are named relative to the index (most indexes have none).
    directory = os.path.dirname(os.path.abspath(path)) if manifest.shards else ""
    for shard in manifest.shards:
        shard_file = os.path.join(directory, shard.name)
        try:
            mapped = _core.IndexFile(shard_file)
        except OSError as exc:
            raise CorruptIndexError(
                f"index {path} is incomplete: its shard {shard_file} cannot be read "
                f"({exc.strerror or exc}); {rebuild}"
            ) from None
        if len(mapped) != shard.size or mapped.read(0, 8) != SHARD_MAGIC:
            raise CorruptIndexError(
                f"index {path} is damaged: its shard {shard_file} is {len(mapped)} bytes "
                f"where {shard.size} were written, or is not a shard; {rebuild}"
            )
        files.append(mapped)
    return files, manifest


def read_manifest(path: str, rebuild: str = REBUILD) -> tuple[_core.IndexFile, Manifest]:
    """Map an index file and return it with its verified manifest (a damaged
    one's error ending with ``rebuild``)."""
    index = _core.IndexFile(path)
    size = len(index)

    def damaged(why: str) -> CorruptIndexError:
        return CorruptIndexError(f"index {path} is damaged ({why}); {rebuild}")

    if size < _HEADER.size + _TRAILER.size:
        raise damaged(f"{size} bytes is too short to be an index")
    magic, version, _ = _HEADER.unpack(index.read(0, _HEADER.size))
    if magic != MAGIC:
        raise damaged("not a Quarry index: wrong magic number")
    if version not in READS:
        raise CorruptIndexError(
            f"index {path} has format version {version}; this Quarry reads versions "
            f"{', '.join(map(str, READS))}; {rebuild}"
        )
    offset, length, crc, tversion, end = _TRAILER.unpack(
        index.read(size - _TRAILER.size, _TRAILER.size)
    )
    if end != END_MAGIC or tversion != version:
        raise damaged("the end marker is missing; the file is truncated or overwritten")
    if offset + length != size - _TRAILER.size or offset < _HEADER.size:
        raise damaged("the manifest location is inconsistent")
    if index.crc32(offset, length) != crc:
        raise damaged("manifest checksum mismatch")
    body = index.read(offset, length)
    try:
        doc = json.loads(body)
    except ValueError:
        raise damaged("manifest is not valid JSON") from None
    try:
        area_length, area_crc = edges_area(doc)
    except CorruptIndexError as exc:
        raise damaged(str(exc)) from None
    area_at = offset - area_length
    if area_at < _HEADER.size:
        raise damaged(f"its {area_length}-byte edges area does not fit before the manifest")
    if index.crc32(area_at, area_length) != area_crc:
        raise damaged("edges area checksum mismatch")
    try:
        return index, Manifest.from_json(doc, index.read(area_at, area_length), damaged)
    except CorruptIndexError as exc:
        raise damaged(str(exc)) from None

"""Opening a reorganised copy: its manifest read and the copy proven fresh,
without NumPy; each member's arrays are read when a query first needs them
(:mod:`quarry.reorg.read`).

Opening a copy checks it like an index (:mod:`quarry.index.fresh`): a source
whose size or mtime moved is refused (:class:`~quarry.errors.StaleCopyError`);
one whose stat cannot prove it unchanged (ctime or inode moved, times not
safely older than the build's reading) is checked against the CRC-32 of each
part of each variable, and refused if a part changed. A raw file described
again (``quarry register`` with another dtype, byte order or fill value)
reads other values though its stat is the same, so the copy records the
description's CRC-32 and is refused when it differs.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from quarry.errors import ReorgError, StaleCopyError, shell_command
from quarry.formats.base import fingerprint
from quarry.index.fresh import STAT_FIELDS, WRITE_FIELDS, read_checked, record_checked, same
from quarry.index.fresh import trusted as trusted_stamp
from quarry.reorg.locate import SUFFIX, find_copy
from quarry.reorg.manifest import CopyManifest, Mend, manifest_in

if TYPE_CHECKING:
    from quarry.formats.base import Driver
    from quarry.reorg.read import MemberCopy


class ReorgCopy:
    """An open reorganised copy, proven fresh: its manifest, and its members,
    each with its offset tables read (and checked) when first used, so that
    opening a copy reads no arrays and a file of 720 steps reads the tables
    of the steps queried.

    Examples
    --------
    >>> import quarry, h5py, numpy as np, tempfile, os
    >>> file = os.path.join(tempfile.mkdtemp(), "c.h5")
    >>> with h5py.File(file, "w") as f:
    ...     f["x"], f["y"] = np.arange(100.0), np.arange(100.0) % 7
    >>> with quarry.open(file) as ds:
    ...     _ = ds.reorganize(["x", "y"], bins=4)
    >>> copy = open_copy(file)
    >>> k = copy.holding(["/x"], 100)
    >>> k, copy.tables_read(k)
    (0, False)
    >>> copy.member_at(k).variables, copy.tables_read(k)
    (['/x', '/y'], True)
    """

    def __init__(self, path: str, manifest: CopyManifest, file: CopyFile) -> None:
        self.path = path
        self.manifest = manifest
        # Held open while the copy or a member of it is: a copy rebuilt
        # meanwhile (renamed over this one by another process) leaves this one
        # whole, its tables and columns still those its manifest describes.
        self._file = file
        #: What a message of damage found later says to do.
        self.mend = Mend()
        self._read: dict[int, MemberCopy] = {}
        # Each variable's members: a query in each of 720 steps finds its own at once.
        self._holders: dict[str, list[int]] = {}
        for k, entry in enumerate(manifest.members):
            for name in entry.variables:
                self._holders.setdefault(name, []).append(k)

    @property
    def members(self) -> list[MemberCopy]:
        """Every member, in the manifest's order (all their tables read)."""
        return [self.member_at(k) for k in range(len(self.manifest.members))]

    def member(self, group: str | None = None) -> MemberCopy:
        """The member of step group ``group`` (``/Step#3`` or ``Step#3``; None:
        or ``/``: of a file without steps)."""
        want = "/" + group.strip("/") if group and group.strip("/") else None
        for k, entry in enumerate(self.manifest.members):
            if (entry.group or None) == want:
                return self.member_at(k)
        held = ", ".join(m.group or "/ (the whole file)" for m in self.manifest.members)
        raise ReorgError(f"the reorganised copy {self.path} has no member {group} (it has {held})")

    def holding(self, variables: Collection[str], rows: int) -> int | None:
        """The first member (its place in the manifest) holding all of
        ``variables`` over a table of ``rows`` rows; None where none does."""
        names = list(variables)
        for k in self._holders.get(names[0], []) if names else range(len(self.manifest.members)):
            entry = self.manifest.members[k]
            if entry.rows == rows and set(names) <= set(entry.variables):
                return k
        return None

    def tables_read(self, k: int) -> bool:
        """Whether member ``k``'s offset tables have been read."""
        return k in self._read

    def member_at(self, k: int) -> MemberCopy:
        """Member ``k`` of the manifest, its tables read now if not yet."""
        if k not in self._read:
            from quarry.reorg.layout import read_member_layout
            from quarry.reorg.read import MemberCopy

            entry = self.manifest.members[k]
            where = f"the reorganised copy {self.path}"
            fd = self._file.fileno()
            layout = read_member_layout(fd, entry, self.manifest.check_rows, where, self.mend)
            self._read[k] = MemberCopy(self.path, layout, self._file)
        return self._read[k]


def open_copy(source: str, index: str | None = None, driver: Driver | None = None) -> ReorgCopy:
    """Open the reorganised copy of the data file ``source`` (found as
    :func:`~quarry.reorg.locate.find_copy` says), refusing a stale one
    or one whose manifest is damaged (a member's damaged tables are refused
    when first read). The source is read where its stat cannot prove it
    unchanged (through ``driver``, default the file opened by its format's)."""
    path = find_copy(source, index)
    try:
        copy = read_copy(path, mend_for(source, path))
    except FileNotFoundError:
        raise ReorgError(
            f"{source} has no reorganised copy at {path}; make one with: quarry reorg {source} "
            "--vars ..."
        ) from None
    check_fresh(source, path, copy.manifest, driver)
    # The manifest, not the copy, in the closure: no cycle to keep its file open.
    copy.mend = mend_for(source, path, copy.manifest)
    return copy


def copy_tables(source: str, index: str | None) -> list[frozenset[str]]:
    """The variables (full paths) of each table of the reorganised copy of
    ``source``, from its manifest alone (read once per state of its file),
    stale or not; none where the copy was removed since it was looked for.
    A damaged manifest is an error, as :func:`open_copy` makes it.

    Examples
    --------
    >>> import quarry, h5py, numpy as np, tempfile, os
    >>> file = os.path.join(tempfile.mkdtemp(), "h.h5")
    >>> with h5py.File(file, "w") as f:
    ...     f["x"], f["y"] = np.arange(10.0), np.arange(10.0)
    >>> with quarry.open(file) as ds:
    ...     _ = ds.reorganize(["x"], bins=2)
    >>> copy_tables(file, None), copy_tables(file + ".gone", None)
    ([frozenset({'/x'})], [])
    """
    path = find_copy(source, index)
    try:
        file, where = CopyFile(path), f"the reorganised copy {path}"
    except FileNotFoundError:  # removed since it was looked for
        return []
    try:
        manifest = _manifest_in(file.fileno(), where, mend_for(source, path))
    finally:
        file.close()
    return [frozenset(m.variables) for m in manifest.members]


def read_copy(path: str, mend: Mend | None = None) -> ReorgCopy:
    """The copy at ``path`` as it is: its file held open and its manifest
    read, not yet proven fresh (:func:`open_copy` does that); a manifest that
    cannot be read is an error saying ``mend``."""
    file = CopyFile(path)
    try:
        where = f"the reorganised copy {path}"
        return ReorgCopy(path, _manifest_in(file.fileno(), where, mend), file)
    except BaseException:
        file.close()
        raise


class CopyFile:
    """A copy's file, open for reading while a copy or a member of it holds
    it: closed with the last (or by :meth:`close`)."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_RDONLY)
        self._closing = weakref.finalize(self, os.close, self._fd)

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        self._closing()


#: Manifests read, by the identity of their file (see :func:`_manifest_in`).
_MANIFESTS: dict[tuple[int, ...], CopyManifest] = {}
_MANIFESTS_KEPT = 16


def _manifest_in(fd: int, where: str, mend: Mend | None) -> CopyManifest:
    """The manifest of the copy open at ``fd``, read once per state of the
    file (its device, inode, size, mtime and ctime: any write moves its
    ctime, a rebuild its inode), so a file opened again and again re-reads
    nothing but the stat."""
    stat = os.fstat(fd)
    identity = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
    manifest = _MANIFESTS.get(identity)
    if manifest is None:
        manifest = manifest_in(fd, where, mend)
        if len(_MANIFESTS) >= _MANIFESTS_KEPT:
            _MANIFESTS.pop(next(iter(_MANIFESTS)))
        _MANIFESTS[identity] = manifest
    return manifest


def mend_for(source: str, path: str, manifest: CopyManifest | None = None) -> Mend:
    """What a message about the copy of ``source`` at ``path`` says to do:
    the command that builds it again as ``manifest`` describes it (None: a
    manifest that cannot be read, its variables left for the user to name).

    Examples
    --------
    >>> print(mend_for("p.h5", "p.h5.qmd"))  # doctest: +NORMALIZE_WHITESPACE
    build it again with: quarry reorg p.h5 --vars VARIABLES
    (the variables it held cannot be read from it)
    """
    if manifest is None:
        return Mend(
            lambda: (
                f"build it again with: {rebuild_command(source, path, None)} "
                "(the variables it held cannot be read from it)"
            )
        )
    return Mend(lambda: f"build it again with: {rebuild_command(source, path, manifest)}")


def rebuild_command(source: str, path: str, manifest: CopyManifest | None) -> str:
    """The command that builds the copy at ``path`` again as it was (with no
    ``manifest``: its variables as ``VARIABLES``, for the user to name): each
    step's variables named as within its step (``energy,x``, which
    reorganises every step on its own), not by their full paths (which would
    make one table of all the steps'), with the binning, ``--path`` and
    ``--index`` it was built with.

    Examples
    --------
    >>> import quarry, h5py, numpy as np, tempfile, os
    >>> file = os.path.join(tempfile.mkdtemp(), "s.h5")
    >>> with h5py.File(file, "w") as f:
    ...     f["Step#0/x"], f["Step#1/x"] = np.arange(6.0), np.arange(6.0)
    >>> with quarry.open(file) as ds:
    ...     every = ds.reorganize(["x"], bin_size=2.0)
    ...     one = ds.reorganize(["x"], bins=3, path="Step#1")
    >>> rebuild_command(file, file + ".qmd", every).replace(file, "s.h5")
    'quarry reorg s.h5 --vars x --bin-size 2'
    >>> rebuild_command(file, file + ".qmd", one).replace(file, "s.h5")
    'quarry reorg s.h5 --vars x --bins 3 --path Step#1'
    >>> scratch = tempfile.mkdtemp()
    >>> elsewhere = rebuild_command(file, os.path.join(scratch, "s.h5.qmd"), one)
    >>> elsewhere.replace(file, "s.h5").replace(scratch, "SCRATCH")
    'quarry reorg s.h5 --vars x --bins 3 --path Step#1 --index SCRATCH'
    """

    if manifest is None:
        words = ["quarry", "reorg", source, "--vars", "VARIABLES"]
    else:
        words = ["quarry", "reorg", source, "--vars", ",".join(rebuilt_names(manifest))]
        if manifest.binning is not None:
            words += manifest.binning.options()
    if manifest is not None and manifest.context is not None:
        words += ["--path", manifest.context]
    where = os.path.dirname(os.path.abspath(path))
    if os.path.abspath(path) != os.path.abspath(find_copy(source)):
        # --index names a directory, or an index file the copy lies beside.
        named = find_copy(source, where) == path
        words += ["--index", where if named else path.removesuffix(SUFFIX) + ".qidx"]
    return shell_command(*words)


def rebuilt_names(manifest: CopyManifest) -> list[str]:
    """The variables that build the copy ``manifest`` describes again: each
    step's named as within its step (``energy``, which reorganises every step
    on its own), not by their full paths (one table of all the steps')."""

    def within(name: str, group: str | None) -> str:
        inner = group.rstrip("/") + "/" if group else None
        return name[len(inner) :] if inner and name.startswith(inner) else name

    return list(dict.fromkeys(within(a.path, m.group) for m in manifest.members for a in m.axes))


def described_again(source: str, path: str, manifest: CopyManifest) -> bool:
    """Whether ``source`` is a raw file described otherwise (``quarry
    register`` again) than when the copy at ``path`` was built: its values
    read otherwise, though nothing in the file's stat moved."""
    from quarry.formats.raw import described_otherwise

    return described_otherwise(source, path, manifest.source.stamp)


def fresh(source: str, path: str, manifest: CopyManifest) -> bool:
    """Whether the copy is known fresh from the source's stat alone (or a
    record of a CRC check at that stat), without reading the source."""
    if described_again(source, path, manifest):
        return False
    now = fingerprint(source)
    recorded = manifest.source.stamp
    if same(now, recorded, STAT_FIELDS) and trusted_stamp(recorded, manifest.source.read_ns):
        return True
    return {"copy"} <= read_checked(path, now)


def check_fresh(source: str, path: str, manifest: CopyManifest, driver: Driver | None) -> None:
    """Refuse a copy whose source was written; check the CRCs of one whose
    stat cannot prove it unchanged (see the module notes)."""
    if fresh(source, path, manifest):
        return
    if described_again(source, path, manifest):
        raise StaleCopyError(
            f"the description of {source} (quarry register) has changed since it was "
            f"reorganised, so its values read otherwise; build the copy again with: "
            f"{rebuild_command(source, path, manifest)}"
        )
    now = fingerprint(source)
    recorded = manifest.source.stamp
    if not same(now, recorded, WRITE_FIELDS):
        raise StaleCopyError(
            f"{source} has changed since it was reorganised (size or modification time "
            f"differs); build the copy again with: {rebuild_command(source, path, manifest)}"
        )
    read_ns = time.time_ns()  # the stat above is proof only if safely older than this
    changed = changed_parts(source, manifest, driver)
    if changed:
        raise StaleCopyError(
            f"{source} has changed since it was reorganised ({'; '.join(changed)}); build the "
            f"copy again with: {rebuild_command(source, path, manifest)}"
        )
    record_checked(path, now, read_ns, frozenset({"copy"}))


def changed_parts(source: str, manifest: CopyManifest, driver: Driver | None) -> list[str]:
    """Each variable whose values differ from those reorganised, with the
    parts that changed (their CRC-32 against the recorded ones), or that is
    gone from the file or holds other rows (read through ``driver``, default
    the file opened by its format's)."""
    import numpy as np

    from quarry.reorg.layout import crc32

    close: Callable[[], None] | None = None
    if driver is None:
        from quarry.formats import backend_for

        driver = backend_for(source).open(source)
        close = driver.close
    try:
        known = {v.path: v for v in driver.variables()}
        changed = []
        for member in manifest.members:
            for k, axis in enumerate(member.axes):
                now = known.get(axis.path)
                if now is None:
                    changed.append(f"{axis.path} is no longer in the file")
                    continue
                if now.size != member.rows:
                    changed.append(f"{axis.path} holds {now.size} values, not {member.rows}")
                    continue
                bad = [
                    i
                    for i, part in enumerate(member.parts)
                    if crc32(
                        np.ascontiguousarray(
                            driver.read(axis.path, part.first, part.first + part.rows)
                        )
                    )
                    != part.source_crc32[k]
                ]
                if bad:
                    changed.append(f"{axis.path} part(s) {', '.join(map(str, bad[:8]))} changed")
        return changed
    finally:
        if close is not None:
            close()

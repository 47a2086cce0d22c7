"""Data an HDF5 file reads from other files: external storage (raw bytes in
named files), virtual datasets (slices of datasets in other files) and
external links (a name standing for an object of another file); and a
directory store's (Zarr, ADIOS2 BP) entries that are symlinks.

Invariant: a served file reads nothing outside the roots. A file with a
dataset whose external or virtual source does not resolve (every symlink
followed) inside a root is not served at all: a scan leaves it out of the
catalog and a request that finds it changed so is answered as for an unknown
name (404), so nothing of what lies outside is read, indexed or described.
HDF5 resolves a relative source name against the process's working
directory or the file's own directory (depending on the library's prefix
settings), so a relative name must lie inside a root under both.
"""

from __future__ import annotations

import os

from quarry.service.config import inside


def leaving_source(real: str, roots: tuple[str, ...]) -> str | None:
    """The name of the first dataset of the HDF5 file ``real`` whose external
    storage, virtual dataset source or external link lies outside ``roots``; None when every
    one lies inside (or the file is not HDF5).

    Examples
    --------
    >>> import h5py, numpy as np, tempfile
    >>> root = os.path.realpath(tempfile.mkdtemp())
    >>> np.arange(4.0).tofile(os.path.join(root, "raw.bin"))
    >>> with h5py.File(os.path.join(root, "in.h5"), "w") as f:
    ...     _ = f.create_dataset("e", (4,), "f8", external=[(os.path.join(root, "raw.bin"), 0, 32)])
    ...     _ = f.create_dataset("o", (4,), "f8", external=[("/etc/hostname", 0, 32)])
    >>> leaving_source(os.path.join(root, "in.h5"), (root,))
    '/o'
    """
    import h5py

    if os.path.isdir(real):
        return _leaving_tree(real, roots)
    if not os.path.isfile(real) or not h5py.is_hdf5(real):
        return None
    here = os.path.dirname(real)

    def escapes(name: str) -> bool:
        if name == ".":  # a virtual dataset's source in the same file
            return False
        bases = [""] if os.path.isabs(name) else [os.getcwd(), here]
        return any(inside(os.path.join(base, name), roots) is None for base in bases)

    found: list[str] = []

    def visit(name: str, item: object) -> None:
        if found or not isinstance(item, h5py.Dataset):
            return
        names = [os.fsdecode(e[0]) for e in item.external or ()]
        if item.is_virtual:
            names += [os.fsdecode(m.file_name) for m in item.virtual_sources()]
        if any(escapes(n) for n in names):
            found.append("/" + name)

    def visit_link(name: str, link: object) -> None:
        if not found and isinstance(link, h5py.ExternalLink) and escapes(link.filename):
            found.append("/" + name)

    with h5py.File(real, "r") as f:
        f.visititems(visit)
        f.visititems_links(visit_link)
    return found[0] if found else None


def _leaving_tree(real: str, roots: tuple[str, ...]) -> str | None:
    """The first entry of the directory store ``real`` (Zarr, ADIOS2 BP) that
    is a symlink resolving outside ``roots``, relative to the store; None
    when none is. A chunk file or an array's folder linked from another
    store would otherwise be read as this one's.

    Examples
    --------
    >>> import tempfile
    >>> root, out = (os.path.realpath(tempfile.mkdtemp()) for _ in range(2))
    >>> store = os.path.join(root, "s.zarr")
    >>> os.makedirs(os.path.join(store, "t"))
    >>> os.symlink(os.path.join(out, "0"), os.path.join(store, "t", "0"))
    >>> _leaving_tree(store, (root,))
    't/0'
    """
    folders = [real]
    while folders:
        # scandir's entries know a link without a stat each: a store may hold
        # a hundred thousand chunk files, walked at every scan.
        with os.scandir(folders.pop()) as listing:
            for entry in sorted(listing, key=lambda e: e.name):
                if entry.is_symlink():
                    if inside(entry.path, roots) is None:
                        return os.path.relpath(entry.path, real)
                elif entry.is_dir():
                    folders.append(entry.path)
    return None

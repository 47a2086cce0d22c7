"""Which data files a source names: a file, a directory store, a glob
pattern, a folder of files, or a list of these.

A folder's data files are those whose format Quarry recognises
(:func:`quarry.formats.detect`), Quarry's own files (indexes, saved
selections, raw-binary descriptions) left out; files are taken in natural
order (``run_2`` before ``run_10``), each once.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from typing import Any

from quarry.errors import SourceError
from quarry.formats import detect, is_store

Sources = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]

_GLOB_CHARS = frozenset("*?[")
#: Files in a directory that are Quarry's own, never data.
_OWN_SUFFIXES = (
    ".qidx",
    ".qmd",
    ".qsel",
    ".qraw.json",
    ".tmp",
    ".qshard",
    ".qidx.checked",
    ".qmd.checked",
)


def natural_key(text: str) -> tuple[Any, ...]:
    """A sort key that orders the numbers inside names by value.

    Examples
    --------
    >>> sorted(["run_10.h5", "run_2.h5", "run_1.h5"], key=natural_key)
    ['run_1.h5', 'run_2.h5', 'run_10.h5']
    """
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text))


def is_many(source: str) -> bool:
    """Whether one command-line source stands for several files: a glob pattern
    that is not itself a file's name, or a directory that is not a data store
    (Zarr, ADIOS2 BP).

    Examples
    --------
    >>> import tempfile
    >>> is_many("run_*.h5"), is_many(tempfile.mkdtemp()), is_many("run.h5")
    (True, True, False)
    """
    if os.path.isdir(source):
        return not is_store(source)
    return not os.path.exists(source) and not _GLOB_CHARS.isdisjoint(source)


def expand_sources(sources: Sources, sidecar_dirs: tuple[str, ...] = ()) -> list[str]:
    """The data files ``sources`` stand for, in natural order, each once.

    Each source is a file (or a Zarr/ADIOS2 directory store), a glob pattern,
    or a directory whose data files (those whose format Quarry recognises)
    are taken; ``sidecar_dirs`` are where raw-binary descriptions may also be.

    Examples
    --------
    >>> import tempfile, os, h5py
    >>> d = tempfile.mkdtemp()
    >>> for n in (10, 2, 1):
    ...     h5py.File(os.path.join(d, f"run_{n}.h5"), "w").close()
    >>> [os.path.basename(p) for p in expand_sources(os.path.join(d, "run_*.h5"))]
    ['run_1.h5', 'run_2.h5', 'run_10.h5']
    >>> [os.path.basename(p) for p in expand_sources(d)]
    ['run_1.h5', 'run_2.h5', 'run_10.h5']
    >>> expand_sources(os.path.join(d, "nothing_*.h5"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    quarry.errors.SourceError: no files match .../nothing_*.h5
    """
    items = [sources] if isinstance(sources, str | os.PathLike) else list(sources)
    found: list[str] = []
    for item in items:
        source = os.fspath(item)
        if os.path.isdir(source) and not is_store(source):
            entries = sorted(os.listdir(source), key=natural_key)
            chosen = []
            for name in entries:
                full = os.path.join(source, name)
                if name.startswith(".") or name.endswith(_OWN_SUFFIXES):
                    continue
                try:
                    detect(full, sidecar_dirs)
                except (SourceError, OSError):
                    continue  # not a data file: a note, a picture, a script
                chosen.append(full)
            if not chosen:
                raise SourceError(f"no data files Quarry can read in directory {source}")
            found.extend(chosen)
        elif is_many(source):
            matched = [p for p in glob.glob(source) if not p.endswith(_OWN_SUFFIXES)]
            if not matched:
                raise SourceError(f"no files match {source}")
            found.extend(matched)
        else:
            found.append(source)
    return sorted(dict.fromkeys(found), key=natural_key)

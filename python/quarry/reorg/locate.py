"""Where a file's reorganised copy lives: by the index's rules, with its own
suffix. Kept apart from the copy's format so that looking for a copy (every
query that could read one) imports nothing heavy."""

from __future__ import annotations

import os

from quarry.index.locate import find_index

#: The file name suffix of a reorganised copy.
SUFFIX = ".qmd"


def find_copy(source: str, index: str | None = None) -> str:
    """Where the reorganised copy of ``source`` is, or would be made: by the
    index's rules (:mod:`quarry.index.locate`), ``<file name>.qmd`` beside
    the file, in the directory ``index`` or in ``QUARRY_INDEX_PATH``; where
    ``index`` names an index file, beside it (``.qidx`` becoming ``.qmd``).

    Examples
    --------
    >>> find_copy("/nowhere/run.h5"), find_copy("/nowhere/run.h5", "/scratch/run.qidx")
    ('/nowhere/run.h5.qmd', '/scratch/run.qmd')
    """
    if index is not None and not os.path.isdir(index):
        return beside_index(index)
    return find_index(source, index, SUFFIX)


def beside_index(index_file: str) -> str:
    """The copy that belongs beside the index file ``index_file`` (which
    need not exist): what :func:`find_copy` gives for a named index file,
    without asking the file system whether it is a directory.

    Examples
    --------
    >>> beside_index("/scratch/run.h5.qidx")
    '/scratch/run.h5.qmd'
    """
    return index_file.removesuffix(".qidx") + SUFFIX

"""Where a data file's index lives: beside it, where the user said, or in a
directory of ``QUARRY_INDEX_PATH``.

Read-only data (a shared archive, a colleague's run) cannot hold its index.
``--index DIR`` (``quarry.open(path, index=DIR)``) puts it elsewhere for one
command; ``QUARRY_INDEX_PATH``, directories separated by ``os.pathsep`` (``:``
on Unix) like ``PATH``, does so for every command:

- looking for an index, Quarry takes ``FILE.qidx`` beside the file, else the
  first ``DIR/<file name>.qidx`` that exists, in the variable's order (the
  name ``--index DIR`` gives it);
- building one where none exists, Quarry writes beside the file when its
  directory is writable, else into the first writable directory of
  ``QUARRY_INDEX_PATH``.

Opening only ``stat``s these paths; writability is tried (a temporary file
made and dropped, which root on a read-only mount and everyone else under
permission bits both feel) only when an index is about to be built.
"""

from __future__ import annotations

import contextlib
import os

from quarry.errors import IndexNotWritableError
from quarry.index.options import default_index_path

#: The environment variable of directories to find and put indexes in.
INDEX_PATH_VARIABLE = "QUARRY_INDEX_PATH"


def index_dirs() -> list[str]:
    """The directories of ``QUARRY_INDEX_PATH``, in order (``~`` expanded).

    Examples
    --------
    >>> import os
    >>> os.environ["QUARRY_INDEX_PATH"] = os.pathsep.join(["/scratch/idx", "", "/tmp/i"])
    >>> index_dirs()
    ['/scratch/idx', '/tmp/i']
    >>> del os.environ["QUARRY_INDEX_PATH"]
    >>> index_dirs()
    []
    """
    value = os.environ.get(INDEX_PATH_VARIABLE, "")
    return [os.path.expanduser(d) for d in value.split(os.pathsep) if d]


#: The suffix of an index file; files kept beside it by the same rules (a
#: reorganised copy, ``.qmd``) pass their own ``suffix`` to these functions.
INDEX_SUFFIX = ".qidx"


def in_directory(directory: str, source: str, suffix: str = INDEX_SUFFIX) -> str:
    """The index of ``source`` kept in ``directory``.

    Examples
    --------
    >>> in_directory("/scratch/idx", "/data/run.h5/")
    '/scratch/idx/run.h5.qidx'
    """
    return os.path.join(directory, os.path.basename(source.rstrip("/")) + suffix)


def find_index(source: str, index: str | None = None, suffix: str = INDEX_SUFFIX) -> str:
    """The index path of ``source``: ``index`` when given (a directory holds
    ``<file name>.qidx``), else an existing index beside the file or in
    ``QUARRY_INDEX_PATH``, else where one beside the file would be. Another
    ``suffix`` finds another kind of file by the same rules.

    Examples
    --------
    >>> find_index("/data/run.h5", "/scratch/run.qidx")
    '/scratch/run.qidx'
    >>> find_index("/nowhere/run.h5")
    '/nowhere/run.h5.qidx'
    """
    if index is not None:
        return in_directory(index, source, suffix) if os.path.isdir(index) else index
    beside = source.rstrip("/") + suffix
    if os.path.exists(beside):
        return beside
    for directory in index_dirs():
        candidate = in_directory(directory, source, suffix)
        if os.path.exists(candidate):
            return candidate
    return beside


def place_new_index(source: str, chosen: str, given: bool, suffix: str = INDEX_SUFFIX) -> str:
    """Where a build writes the index of ``source``. ``chosen`` is what
    :func:`find_index` gave; ``given`` whether the user named it. An index
    the user named, or one that exists, is rebuilt in place; a new one goes
    beside the file if that directory is writable, else into the first
    writable directory of ``QUARRY_INDEX_PATH``. Raises
    :class:`~quarry.errors.IndexNotWritableError` when there is nowhere to
    write, saying how to put the index elsewhere, or when the directory the
    user named does not exist.

    Examples
    --------
    >>> place_new_index("/data/run.h5", "no-such-folder/", True)
    Traceback (most recent call last):
    quarry.errors.IndexNotWritableError: cannot write the index of /data/run.h5: there is \
no directory no-such-folder/; make it first (mkdir -p), or name another with --index
    """
    what = "index" if suffix == INDEX_SUFFIX else "reorganised copy"
    here = os.path.dirname(os.path.abspath(chosen))
    for directory in (chosen,) if chosen.endswith(("/", os.sep)) else (here,):
        if given and not os.path.isdir(directory):
            raise IndexNotWritableError(
                f"cannot write the {what} of {source}: there is no directory {directory}; "
                "make it first (mkdir -p), or name another with --index"
            )
    if writable(here):
        return chosen
    if not (given or os.path.exists(chosen)):
        for directory in index_dirs():
            with contextlib.suppress(OSError):  # an unusable entry: try the next
                os.makedirs(directory, exist_ok=True)
            if writable(directory):
                return in_directory(directory, source, suffix)
    raise not_writable(source, chosen, what)


def writable(directory: str) -> bool:
    """Whether a file can be made in ``directory``: tried, not guessed from
    permission bits (``os.access`` says yes to root on a read-only mount)."""
    import tempfile

    try:
        with tempfile.TemporaryFile(dir=directory):
            return True
    except OSError:
        return False


def not_writable(source: str, index_path: str, what: str = "index") -> IndexNotWritableError:
    """The error for an index (or another ``what``) that cannot be written at ``index_path``."""
    directory = os.path.dirname(os.path.abspath(index_path))
    searched = index_dirs()
    tried = f" nor in {INDEX_PATH_VARIABLE} ({os.pathsep.join(searched)})" if searched else ""
    return IndexNotWritableError(
        f"cannot write the {what} of {source}: the directory {directory} is not writable"
        f"{tried}; put the index elsewhere with --index DIR, and set "
        f"{INDEX_PATH_VARIABLE}=DIR so that later commands find it there without --index"
    )


def rebuild_command(source: str, index_path: str, command: str = "index") -> str:
    """The command that rebuilds the index at ``index_path`` (or runs another
    ``quarry`` command on it, such as ``verify``), with the ``--index`` it
    needs when the index is not beside the file.

    Examples
    --------
    >>> rebuild_command("/data/run.h5", "/data/run.h5.qidx")
    'quarry index /data/run.h5'
    >>> rebuild_command("/data/run.h5", "/scratch/run.h5.qidx")
    'quarry index /data/run.h5 --index /scratch/run.h5.qidx'
    >>> rebuild_command("/data/run.h5", "/scratch/run.h5.qidx", "verify")
    'quarry verify /data/run.h5 --index /scratch/run.h5.qidx'
    """
    from quarry.errors import shell_command

    if os.path.abspath(index_path) == os.path.abspath(default_index_path(source.rstrip("/"))):
        return shell_command("quarry", command, source)
    return shell_command("quarry", command, source, "--index", index_path)

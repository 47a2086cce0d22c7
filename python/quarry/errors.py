"""Quarry's exceptions: one base class, one subclass per thing that can go wrong.

Each also derives from the closest builtin so ``except FileNotFoundError`` and
friends keep working. Messages are short, say what was wrong, and what to do.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable


class QuarryError(Exception):
    """Base of every error Quarry raises on purpose."""


def shell_command(*words: str) -> str:
    """A command a message tells the user to run, each word quoted for the
    shell where it needs it (a space, a glob, a quote), so it can be pasted
    as printed; plain paths and ``Step#3`` stay as they are.

    Examples
    --------
    >>> print(shell_command("quarry", "reorg", "my run.h5", "--path", "Step#*", "--vars", "x,y"))
    quarry reorg 'my run.h5' --path 'Step#*' --vars x,y
    """
    import re
    import shlex

    plain = re.compile(r"[\w@%+=:,./#-]+")
    return " ".join(
        w if plain.fullmatch(w) and not w.startswith("#") else shlex.quote(w) for w in words
    )


class QuerySyntaxError(QuarryError, ValueError):
    """A query that does not parse; carries the position of the bad token.

    Examples
    --------
    >>> err = QuerySyntaxError("expected a value", "energy > )", 9)
    >>> print(err)
    expected a value
      energy > )
               ^
    """

    def __init__(self, message: str, query: str, position: int) -> None:
        self.message = message
        self.query = query
        self.position = position
        shown, caret = caret_line(query, position)
        super().__init__(f"{message}\n  {shown}\n  {caret}^")


def caret_line(text: str, position: int, width: int = 100) -> tuple[str, str]:
    """``text`` as one printable line of at most about ``width`` columns around
    ``position``, and the spaces that put a caret under it.

    Line breaks and tabs show as spaces, other unprintable characters as �.
    Wide (CJK, emoji) characters take two columns and combining accents none,
    as a terminal draws them.

    Examples
    --------
    >>> caret_line("énergie > 1", 10)
    ('énergie > 1', '          ')
    >>> shown, pad = caret_line("x" * 500 + " > $", 503)
    >>> shown[:4], shown[-6:], len(pad)
    ('…xxx', 'xx > $', 100)
    """
    import unicodedata  # only an error needs it

    start = max(0, position - width // 2)
    end = min(len(text), max(position + 1, start + width))
    if end - start < width:
        start = max(0, end - width)
    head = "…" if start > 0 else ""
    tail = "…" if end < len(text) else ""
    shown = "".join(
        c if c.isprintable() else " " if c.isspace() else "\ufffd" for c in text[start:end]
    )

    def columns(s: str) -> int:
        return sum(
            0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
            for c in s
        )

    return head + shown + tail, " " * (len(head) + columns(shown[: position - start]))


class UnknownVariableError(QuarryError, KeyError):
    """A name that matches no variable in the file."""

    def __init__(self, name: str, source: str, suggestions: list[str]) -> None:
        self.name = name
        self.suggestions = suggestions
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        self.message = f"no variable {name!r} in {source}{hint}"
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


class AmbiguousNameError(QuarryError, KeyError):
    """A bare name that matches variables in separate groups. The message
    lists each with the shortest name that picks it, and how a context can
    choose: a step (``--path Step#0``, or ``--per-step`` for every step) where
    the variables differ by step group, else any group.

    Examples
    --------
    >>> print(AmbiguousNameError("x", ["/a/x", "/b/x"], ["a.x", "b.x"]))  # doctest: +ELLIPSIS
    'x' matches 2 variables in separate groups: /a/x (write a.x), /b/x (write b.x); write \
the one you mean, or narrow the search to one group with --path GROUP (path= in Python)
    >>> print(AmbiguousNameError("x", ["/Step#0/x", "/Step#1/x"]))  # doctest: +ELLIPSIS
    '...; write the one you mean, or choose a step with --path Step#0 (path= in Python), or ask \
every step with --per-step
    >>> print(AmbiguousNameError("x", ["/data/0/x", "/data/1/x"]))  # doctest: +ELLIPSIS
    '...; write the one you mean, or choose a step with --path data/0 (path= in Python), or ask \
every step with --path 'data/*' --per-step
    """

    def __init__(
        self,
        name: str,
        candidates: list[str],
        spellings: list[str] | Callable[[], list[str]] | None = None,
        hint: str | None = None,
    ) -> None:
        self.name = name
        self.candidates = candidates
        self._spellings = spellings
        self._hint = hint
        super().__init__(name)

    @functools.cached_property
    def spellings(self) -> list[str]:
        """For each candidate, the shortest name that picks it (worked out
        when first asked for: a series that catches this never asks)."""
        given = self._spellings() if callable(self._spellings) else self._spellings
        return given or self.candidates

    @functools.cached_property
    def message(self) -> str:
        listed = ", ".join(
            path if spelling == path else f"{path} (write {spelling})"
            for path, spelling in zip(self.candidates, self.spellings, strict=True)
        )
        return (
            f"{self.name!r} matches {len(self.candidates)} variables in separate groups: "
            f"{listed}; write the one you mean, {self._hint or _context_hint(self.candidates)}"
        )

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        # Spelled out to cross a process boundary (an MPI rank's error).
        return (AmbiguousNameError, (self.name, self.candidates, self.spellings, self._hint))


def _context_hint(paths: list[str]) -> str:
    """How a context can choose among ``paths``: a step if they first differ
    in a step group (``Step#0``, ``Step#1``; openPMD's ``/data/100``), else
    any group."""
    import re

    split = [p.strip("/").split("/") for p in paths]
    first = next((i for i, col in enumerate(zip(*split, strict=False)) if len(set(col)) > 1), None)
    if first is not None and all(first < len(parts) - 1 for parts in split):
        steps = [re.fullmatch(r"(.*?)(\d+)", parts[first]) for parts in split]
        if all(steps) and len({m.group(1) for m in steps if m}) == 1:
            step = split[0][first]
            if first and step.isdigit():  # openPMD's iteration, named with its parent: data/100
                step = f"{split[0][first - 1]}/{step}"
            if not first:  # top-level step groups: every command's --per-step finds them
                return (
                    f"or choose a step with --path {step} (path= in Python), "
                    "or ask every step with --per-step"
                )
            # Nested ones are steps where the format says so (openPMD's
            # iterations), so the hint names them.
            every = "/".join([*split[0][:first], "*"])
            return (
                f"or choose a step with --path {step} (path= in Python), "
                f"or ask every step with --path '{every}' --per-step"
            )
    return "or narrow the search to one group with --path GROUP (path= in Python)"


class ShapeMismatchError(QuarryError, ValueError):
    """Variables of different shapes used in one query."""


class SubarrayError(QuarryError, IndexError):
    """A subscript NumPy would refuse (out of bounds, too many axes) or one
    Quarry does not support (a negative step)."""


class DerivationError(QuarryError, ValueError):
    """A derived variable (``--derive r=sqrt(x**2 + y**2)``) that cannot be
    defined as written."""


class TrackingError(QuarryError, ValueError):
    """Particles that cannot be followed as asked: no such step, ids that are
    not integers or not unique."""


class UnsupportedVariableError(QuarryError, TypeError):
    """A variable Quarry cannot index or query (dtype or rank)."""


class SourceError(QuarryError, OSError):
    """A data file that is missing, unreadable, or not in a format Quarry reads."""


class InexactDecodingError(UnsupportedVariableError):
    """A 64-bit integer variable that declares missing values (read as float64
    with NaN) holding an integer float64 cannot hold exactly (beyond 2**53)."""


class InSituMismatchError(SourceError):
    """A file an :class:`~quarry.InSituIndexer` indexed from the producer's
    memory holds other values than were handed to it (another step, other
    values, a lossy filter): no index is published for it."""


class InSituUsageError(QuarryError, ValueError):
    """An :class:`~quarry.InSituIndexer` used in a way that cannot give a true
    index: a path template that does not format, or the file still open for
    writing when the indexer closes."""


class StaleIndexError(QuarryError):
    """The data file changed after its index was built."""


class CorruptIndexError(QuarryError):
    """An index file that is truncated, damaged, or of an unknown version."""


class StaleCopyError(StaleIndexError):
    """The data file changed after its reorganised copy (``quarry reorg``) was built."""


class CorruptCopyError(CorruptIndexError):
    """A reorganised copy that is truncated, damaged, or of an unknown version."""


class ReorgError(QuarryError, ValueError):
    """A reorganisation that cannot be made as asked (bin sizes that do not
    fit the variables, variables of different shapes, too many bins)."""


class JoinError(QuarryError, ValueError):
    """An interpolation join (``quarry interp``) that cannot be made with the
    data as it is: a field whose coordinate variables are not monotonic, a
    variable of a dtype that cannot be interpolated."""


class JoinArgumentError(JoinError):
    """An interpolation join asked for in a way that does not fit its fields:
    grid text that does not parse, a coordinate count (``--at``) other than
    the field's dimensions, an unknown method. The ``quarry`` command treats
    it as a usage error (exit 2)."""


class IndexMissingError(QuarryError, FileNotFoundError):
    """An operation that needs an index found none."""


class IndexNotWritableError(QuarryError, PermissionError):
    """No directory Quarry may write a new index in (read-only data)."""


class ClosedDatasetError(QuarryError, ValueError):
    """A dataset used after it was closed, or a selection read after its
    dataset was closed or its file opened again (it changed)."""


class StaleSelectionError(QuarryError):
    """A saved selection whose data file changed after it was saved."""


class SelectionFileError(QuarryError, ValueError):
    """A saved-selection file that is damaged or not a saved selection."""


class HistogramError(QuarryError, ValueError):
    """Bins that cannot be made: infinite values with automatic bins, edges
    that do not increase, no bins."""


class UnknownPathError(QuarryError, KeyError):
    """A context path (``--path``) that names no group of the file.

    Examples
    --------
    >>> print(UnknownPathError("Step#9", "run.h5", ["Step#0"]))
    no group matches path 'Step#9' in run.h5; did you mean Step#0?
    """

    def __init__(self, path: str, source: str, suggestions: list[str]) -> None:
        self.path = path
        self.suggestions = suggestions
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        self.message = f"no group matches path {path.strip()!r} in {source}{hint}"
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


class SeriesMemberError(QuarryError):
    """A query over a time series or many files failed at one member (a file,
    or one step group of a file); ``error`` is what went wrong there.

    Examples
    --------
    >>> from quarry.errors import UnknownVariableError
    >>> cause = UnknownVariableError("enrgy", "run_2.h5", ["energy"])
    >>> print(SeriesMemberError("run_2.h5", 3, cause))
    run_2.h5, step 3: no variable 'enrgy' in run_2.h5; did you mean energy?

    A file's index and reorganised copy serve all its steps, so their
    staleness or damage is told of the file, not of the step that met it:

    >>> print(SeriesMemberError("run_2.h5", 0, StaleIndexError("run_2.h5 has changed")))
    run_2.h5: run_2.h5 has changed
    >>> print(SeriesMemberError("run_2.h5", 4, CorruptCopyError("run_2.h5.qmd is damaged")))
    run_2.h5: run_2.h5.qmd is damaged
    """

    def __init__(self, file: str, step: int | None, error: QuarryError) -> None:
        self.file = file
        self.step = step
        self.error = error
        whole_file = isinstance(error, StaleIndexError | CorruptIndexError)
        where = file if step is None or whole_file else f"{file}, step {step}"
        super().__init__(f"{where}: {error}")


class BatchQueryError(QuarryError):
    """One query of a batch failed (other than by its syntax, which raises
    :class:`QuerySyntaxError` naming the line); ``error`` is what went wrong.

    Examples
    --------
    >>> print(BatchQueryError("line 4", "enrgy > 1", QuarryError("no variable 'enrgy'")))
    line 4 (enrgy > 1): no variable 'enrgy'
    """

    def __init__(self, where: str, query: str, error: QuarryError) -> None:
        self.where = where
        self.query = query
        self.error = error
        super().__init__(f"{where} ({query}): {error}")


class SeriesError(QuarryError, ValueError):
    """Files that cannot be opened as one series as asked: per-file indexes
    that would collide in one index directory, an index path that is a file."""


class ParallelError(QuarryError):
    """An MPI run went wrong: a rank failed (named, with its cause), or MPI
    was asked for without mpi4py installed."""


class MixedDtypeError(QuarryError, TypeError):
    """A variable's dtypes differ between a series' members and no one column
    of a table holds all its values exactly (uint64 beside float64)."""


class UsageError(QuarryError, ValueError):
    """The command line asks for something it cannot do (options that do not
    go together, an argument of the wrong form): the ``quarry`` command prints
    ``quarry: error: <message>`` and exits 2, as for a malformed query, where
    a problem with the data exits 1.

    Examples
    --------
    >>> print(UsageError("give --png FILE or --svg FILE"))
    give --png FILE or --svg FILE
    """

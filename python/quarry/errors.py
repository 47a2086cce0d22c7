"""Quarry's exceptions: one base class, one subclass per thing that can go wrong.

Each also derives from the closest builtin so ``except FileNotFoundError`` and
friends keep working. Messages are short, say what was wrong, and what to do.
"""

from __future__ import annotations


class QuarryError(Exception):
    """Base of every error Quarry raises on purpose."""


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
        super().__init__(f"{message}\n  {query}\n  {' ' * position}^")


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
    """A bare name that matches several variables. Where they lie in step
    groups (``/Step#0/x``, ``/Step#1/x``), the message says how to choose one
    step or ask every step.

    Examples
    --------
    >>> print(AmbiguousNameError("x", ["/a/x", "/b/x"]))
    'x' matches 2 variables: /a/x, /b/x; write the full path
    >>> print(AmbiguousNameError("x", ["/Step#0/x", "/Step#1/x"]))  # doctest: +ELLIPSIS
    '...; write the full path, choose a step with --path Step#0, or count every step with --per-step
    """

    def __init__(self, name: str, candidates: list[str]) -> None:
        self.name = name
        self.candidates = candidates
        self.message = (
            f"{name!r} matches {len(candidates)} variables: {', '.join(candidates)}; "
            "write the full path"
        )
        steps = _step_groups(candidates)
        if len(steps) > 1:
            self.message += (
                f", choose a step with --path {steps[0]}, or count every step with --per-step"
            )
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


def _step_groups(paths: list[str]) -> list[str]:
    """The distinct top-level groups of ``paths`` when they are step groups:
    names ending in a number after one shared prefix (``Step#0``, ``Step#1``)."""
    import re

    tops = dict.fromkeys(p.strip("/").split("/")[0] for p in paths if p.strip("/").count("/"))
    found = [re.match(r"^(.*?)(\d+)$", top) for top in tops]
    if not found or any(m is None for m in found) or len({m.group(1) for m in found if m}) > 1:
        return []
    return list(tops)


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


class StaleIndexError(QuarryError):
    """The data file changed after its index was built."""


class CorruptIndexError(QuarryError):
    """An index file that is truncated, damaged, or of an unknown version."""


class IndexMissingError(QuarryError, FileNotFoundError):
    """An operation that needs an index found none."""


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
    """

    def __init__(self, file: str, step: int | None, error: QuarryError) -> None:
        self.file = file
        self.step = step
        self.error = error
        where = file if step is None else f"{file}, step {step}"
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

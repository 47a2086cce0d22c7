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
    """A bare name that matches several variables."""

    def __init__(self, name: str, candidates: list[str]) -> None:
        self.name = name
        self.candidates = candidates
        self.message = (
            f"{name!r} matches {len(candidates)} variables: {', '.join(candidates)}; "
            "write the full path"
        )
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


class ShapeMismatchError(QuarryError, ValueError):
    """Variables of different shapes used in one query."""


class SubarrayError(QuarryError, IndexError):
    """A subscript NumPy would refuse (out of bounds, too many axes) or one
    Quarry does not support (a negative step)."""


class DerivationError(QuarryError, ValueError):
    """A derived variable (``--derive r=sqrt(x**2 + y**2)``) that cannot be
    defined as written."""


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

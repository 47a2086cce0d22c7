"""Quarry: exact, fast range queries over scientific array files.

>>> import quarry
>>> quarry.__version__
'0.1.0'
"""

from typing import Any

from quarry.dataset import Dataset, open
from quarry.errors import (
    AmbiguousNameError,
    BatchQueryError,
    CorruptIndexError,
    HistogramError,
    IndexMissingError,
    QuarryError,
    QuerySyntaxError,
    SelectionFileError,
    SeriesError,
    SeriesMemberError,
    ShapeMismatchError,
    SourceError,
    StaleIndexError,
    StaleSelectionError,
    SubarrayError,
    UnknownPathError,
    UnknownVariableError,
    UnsupportedVariableError,
)
from quarry.query import QueryStats, Selection
from quarry.series import Series, SeriesSelection, open_series

__all__ = [
    "AmbiguousNameError",
    "BatchQueryError",
    "CorruptIndexError",
    "Dataset",
    "HistogramError",
    "IndexMissingError",
    "QuarryError",
    "QueryStats",
    "QuerySyntaxError",
    "Selection",
    "SelectionFileError",
    "Series",
    "SeriesError",
    "SeriesMemberError",
    "SeriesSelection",
    "ShapeMismatchError",
    "SourceError",
    "StaleIndexError",
    "StaleSelectionError",
    "SubarrayError",
    "UnknownPathError",
    "UnknownVariableError",
    "UnsupportedVariableError",
    "__version__",
    "open",
    "open_series",
]


def __getattr__(name: str) -> Any:
    # The version is looked up on first use: importlib.metadata costs tens of
    # milliseconds, which every CLI call would otherwise pay.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("quarry")
        except PackageNotFoundError:  # a source tree that was never installed
            return "0.0.0+unknown"
    raise AttributeError(f"module 'quarry' has no attribute {name!r}")

"""Quarry: exact, fast range queries over scientific array files.

>>> import quarry
>>> quarry.__version__
'0.1.0'
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("quarry")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.1.0"

from quarry.dataset import Dataset, open
from quarry.errors import (
    AmbiguousNameError,
    CorruptIndexError,
    IndexMissingError,
    QuarryError,
    QuerySyntaxError,
    ShapeMismatchError,
    SourceError,
    StaleIndexError,
    UnknownVariableError,
    UnsupportedVariableError,
)
from quarry.query import Selection

__all__ = [
    "AmbiguousNameError",
    "CorruptIndexError",
    "Dataset",
    "IndexMissingError",
    "QuarryError",
    "QuerySyntaxError",
    "Selection",
    "ShapeMismatchError",
    "SourceError",
    "StaleIndexError",
    "UnknownVariableError",
    "UnsupportedVariableError",
    "__version__",
    "open",
]

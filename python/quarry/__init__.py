"""Quarry: exact, fast range queries over scientific array files.

Installed with ``pip install quarry-index``; imported as ``quarry``. The name
``quarry`` on the Python Package Index is an unrelated Minecraft protocol
library that installs the same import name: the two cannot share an
environment, and importing this package beside it fails, naming both.

>>> import quarry
>>> quarry.__version__
'0.1.0'
"""

# _clash first: importing it refuses to go on beside the Minecraft library.
from quarry import _clash, _core  # noqa: F401
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
from quarry.query.series import SeriesSelection
from quarry.series import Series, open_series
from quarry.version import VERSION

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

__version__: str = VERSION

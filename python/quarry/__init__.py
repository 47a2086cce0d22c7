"""Quarry: exact, fast range queries over scientific array files.

Installed with ``pip install quarry-index``; imported as ``quarry``. The name
``quarry`` on the Python Package Index is an unrelated Minecraft protocol
library that installs the same import name: the two cannot share an
environment, and importing this package beside it fails, naming both.

Importing ``quarry`` is cheap: the API (:func:`open`, :class:`Dataset`...)
is imported when first used (PEP 562), so that a ``quarry`` command imports
only what it runs, and NumPy and h5py only when values are read.

>>> import quarry
>>> quarry.__version__
'0.1.0'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# _clash first: importing it refuses to go on beside the Minecraft library.
from quarry import _clash, _core  # noqa: F401
from quarry.errors import (
    AmbiguousNameError,
    BatchQueryError,
    ClosedDatasetError,
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
from quarry.version import VERSION

if TYPE_CHECKING:
    from quarry.dataset import Dataset, open
    from quarry.insitu import InSituIndexer
    from quarry.query import QueryStats, Selection
    from quarry.query.series import SeriesSelection
    from quarry.series import Series, open_series
    from quarry.service.client import connect

__all__ = [
    "AmbiguousNameError",
    "BatchQueryError",
    "ClosedDatasetError",
    "CorruptIndexError",
    "Dataset",
    "HistogramError",
    "InSituIndexer",
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
    "connect",
    "open",
    "open_series",
]

__version__: str = VERSION

#: The public names imported when first used, and the module each comes from.
_LAZY = {
    "Dataset": "quarry.dataset",
    "open": "quarry.dataset",
    "InSituIndexer": "quarry.insitu",
    "QueryStats": "quarry.query",
    "Selection": "quarry.query",
    "SeriesSelection": "quarry.query.series",
    "Series": "quarry.series",
    "open_series": "quarry.series",
    "connect": "quarry.service.client",
}


if not TYPE_CHECKING:  # type checkers see the imports above, and catch misspelt names

    def __getattr__(name: str) -> Any:
        """A public name of :data:`_LAZY`, or a stage of the package
        (``quarry.parallel.threads(4)`` after ``import quarry``), imported now
        and kept."""
        module = _LAZY.get(name)
        if module is None:
            try:
                return importlib.import_module(f"quarry.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"quarry.{name}":
                    raise
                raise AttributeError(f"module 'quarry' has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})

"""Key kinds: the domain a variable's values are indexed and compared in.

Floating-point values (float32, float64) are keys of kind ``f64``: a float32
widens to float64 exactly, so comparisons on the stored value stay exact.
Signed integers are ``i64`` keys and unsigned ones ``u64``, so an integer
comparison never rounds through a float. The kinds are the core's own
(``quarry._core.KEY_KINDS``: the tag each index block stores), and this is
the one Python table of them: the planner, the index builder and the manifest
all look kinds up here.

Examples
--------
>>> import numpy as np
>>> key_kind(np.dtype("float32")), key_kind(np.dtype("int16")), key_kind(np.dtype("uint8"))
('f64', 'i64', 'u64')
>>> from quarry.expr.keys import EDGE_DTYPES, KEY_DTYPES
>>> KEY_DTYPES["u64"], EDGE_DTYPES["i64"].str
(dtype('uint64'), '<i8')
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from quarry import _core

if TYPE_CHECKING:
    import numpy as np

    #: The dtype of each kind's keys, in native byte order.
    KEY_DTYPES: dict[str, np.dtype[np.generic]]
    #: The little-endian dtype of each kind's bin edges as an index stores them.
    EDGE_DTYPES: dict[str, np.dtype[np.generic]]

#: Every key kind, in the core's tag order.
KEY_KINDS: Final[tuple[str, ...]] = _core.KEY_KINDS

#: (least, greatest) key of each integer kind: those of int64 and uint64.
INTEGER_RANGES: Final[dict[str, tuple[int, int]]] = {
    "i64": (-(2**63), 2**63 - 1),
    "u64": (0, 2**64 - 1),
}

# NumPy's kind letter ("f", "i", "u") of each key dtype names its kind.
_KIND_OF_NUMPY_KIND = {"f": "f64", "i": "i64", "u": "u64"}


def __getattr__(name: str) -> Any:
    """:data:`KEY_DTYPES` and :data:`EDGE_DTYPES`, made when first asked for:
    they need NumPy, which planning a query does not (see :mod:`quarry`)."""
    if name not in ("KEY_DTYPES", "EDGE_DTYPES"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import numpy as np

    keys = {"f64": np.dtype("f8"), "i64": np.dtype("i8"), "u64": np.dtype("u8")}
    globals()["KEY_DTYPES"] = keys
    globals()["EDGE_DTYPES"] = {kind: dtype.newbyteorder("<") for kind, dtype in keys.items()}
    return globals()[name]


def key_kind(dtype: np.dtype[np.generic]) -> str:
    """The key kind a dtype is indexed and compared in: ``f64``, ``i64`` or ``u64``.

    Examples
    --------
    >>> import numpy as np
    >>> key_kind(np.dtype(">f4"))
    'f64'
    """
    return _KIND_OF_NUMPY_KIND[dtype.kind]

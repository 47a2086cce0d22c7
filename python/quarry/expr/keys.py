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
>>> KEY_DTYPES["u64"], EDGE_DTYPES["i64"].str
(dtype('uint64'), '<i8')
"""

from __future__ import annotations

from typing import Final

import numpy as np

from quarry import _core

#: Every key kind, in the core's tag order.
KEY_KINDS: Final[tuple[str, ...]] = _core.KEY_KINDS

#: The dtype of each kind's keys, in native byte order.
KEY_DTYPES: Final[dict[str, np.dtype[np.generic]]] = {
    "f64": np.dtype("f8"),
    "i64": np.dtype("i8"),
    "u64": np.dtype("u8"),
}

#: The little-endian dtype of each kind's bin edges as an index stores them.
EDGE_DTYPES: Final[dict[str, np.dtype[np.generic]]] = {
    kind: dtype.newbyteorder("<") for kind, dtype in KEY_DTYPES.items()
}

#: (least, greatest) key of each integer kind.
INTEGER_RANGES: Final[dict[str, tuple[int, int]]] = {
    kind: (int(np.iinfo(dtype.str).min), int(np.iinfo(dtype.str).max))
    for kind, dtype in KEY_DTYPES.items()
    if dtype.kind in "iu"
}

# NumPy's kind letter ("f", "i", "u") of each key dtype names its kind.
_KIND_OF_NUMPY_KIND = {dtype.kind: kind for kind, dtype in KEY_DTYPES.items()}


def key_kind(dtype: np.dtype[np.generic]) -> str:
    """The key kind a dtype is indexed and compared in: ``f64``, ``i64`` or ``u64``.

    Examples
    --------
    >>> import numpy as np
    >>> key_kind(np.dtype(">f4"))
    'f64'
    """
    return _KIND_OF_NUMPY_KIND[dtype.kind]

"""CF conventions for missing and packed values, for drivers whose library does
not apply them itself (Zarr, raw binary). NetCDF's own library applies the same
rules, so every format answers ``tas > 300`` in physical units.

Missing: values equal to ``_FillValue`` or ``missing_value``, or outside
``valid_min``/``valid_max``/``valid_range`` (compared on the stored values).
Packed: ``stored * scale_factor + add_offset``, in float64. A variable with
either is read as floats with NaN where values are missing, as xarray reads it.
A 64-bit integer that float64 cannot hold exactly (beyond 2**53) in such a
variable is an error, never a rounded value: a comparison with it would be wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from quarry.errors import InexactDecodingError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

MISSING_ATTRS = ("_FillValue", "missing_value", "valid_min", "valid_max", "valid_range")
PACKING_ATTRS = ("scale_factor", "add_offset")


def is_decoded(attrs: Mapping[str, Any]) -> bool:
    """Whether CF decoding changes this variable's values."""
    return any(a in attrs for a in MISSING_ATTRS + PACKING_ATTRS)


def logical_dtype(storage: np.dtype[Any], attrs: Mapping[str, Any]) -> np.dtype[Any]:
    """The dtype values are read as: float64 when packed or when integers can be
    missing (NaN needs a float), else the stored dtype."""
    import numpy as np

    if any(a in attrs for a in PACKING_ATTRS):
        return np.dtype("f8")
    if storage.kind in "iu" and any(a in attrs for a in MISSING_ATTRS):
        return np.dtype("f8")
    return storage


def describe(attrs: Mapping[str, Any]) -> str | None:
    """A short description of the decoding, for ``quarry info``."""
    parts = [f"{a}={_plain(attrs[a])}" for a in MISSING_ATTRS + PACKING_ATTRS if a in attrs]
    return ", ".join(parts) or None


def _plain(value: Any) -> Any:
    import numpy as np

    arr = np.asarray(value)
    return arr.item() if arr.size == 1 else arr.tolist()


#: The largest integer magnitude below which every integer is a float64.
_EXACT_IN_FLOAT64 = 2**53


def require_exact(
    stored: npt.NDArray[Any], present: npt.NDArray[np.bool_] | None, name: str
) -> None:
    """Raise :class:`InexactDecodingError` where a present value of the integer
    array ``stored``, read as float64 because its variable declares missing
    values, would be rounded (``|v| > 2**53``).

    Examples
    --------
    >>> import numpy as np
    >>> require_exact(np.array([3, 2**53], "i8"), None, "/k")
    >>> require_exact(np.array([3, 2**53 + 1], "i8"), np.array([True, False]), "/k")
    >>> require_exact(np.array([3, 2**53 + 1], "i8"), None, "/k")
    Traceback (most recent call last):
    ...
    quarry.errors.InexactDecodingError: /k holds 9007199254740993, ...
    """
    import numpy as np

    if stored.dtype.kind not in "iu" or stored.dtype.itemsize < 8 or stored.size == 0:
        return
    wide = (
        (stored > _EXACT_IN_FLOAT64)
        if stored.dtype.kind == "u"
        else ((stored > _EXACT_IN_FLOAT64) | (stored < -_EXACT_IN_FLOAT64))
    )
    if present is not None:
        wide &= present
    if wide.any():
        value = stored.reshape(-1)[int(np.flatnonzero(wide.reshape(-1))[0])]
        article = "an" if stored.dtype.kind == "i" else "a"
        raise InexactDecodingError(
            f"{name} holds {int(value)}, beyond 2**53: {article} {stored.dtype} variable "
            "that declares missing values (_FillValue, missing_value or valid_*) is read "
            "as float64 with NaN where values are missing, and float64 cannot hold that "
            "integer exactly, so comparisons with it would be rounded. Quarry reads 64-bit "
            "integers exactly where their variable declares no missing values"
        )


def decode(
    stored: npt.NDArray[Any], attrs: Mapping[str, Any], name: str = "the variable"
) -> npt.NDArray[Any]:
    """Stored values -> physical values with NaN for missing ones. A present
    64-bit integer beyond 2**53 in a variable that is not packed raises
    :class:`InexactDecodingError` (see :func:`require_exact`).

    Examples
    --------
    >>> import numpy as np
    >>> decode(np.array([1, -32767, 3], dtype="i2"),
    ...        {"_FillValue": -32767, "scale_factor": 0.5, "add_offset": 10.0})
    array([10.5,  nan, 11.5])
    """
    import numpy as np

    out_dtype = logical_dtype(stored.dtype, attrs)
    missing = np.zeros(stored.shape, dtype=bool)
    for attr in ("_FillValue", "missing_value"):
        if attr in attrs:
            for marker in np.atleast_1d(np.asarray(attrs[attr])):
                missing |= stored == marker
    lo = attrs.get("valid_min")
    hi = attrs.get("valid_max")
    if "valid_range" in attrs:
        lo, hi = np.asarray(attrs["valid_range"]).tolist()[:2]
    if lo is not None:
        missing |= stored < lo
    if hi is not None:
        missing |= stored > hi
    if not any(a in attrs for a in PACKING_ATTRS):
        require_exact(stored, ~missing, name)
    values = stored.astype(out_dtype)
    if "scale_factor" in attrs:
        values *= float(np.asarray(attrs["scale_factor"]))
    if "add_offset" in attrs:
        values += float(np.asarray(attrs["add_offset"]))
    if missing.any():
        values[missing] = np.nan
    return values

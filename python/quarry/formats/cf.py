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

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from quarry.errors import InexactDecodingError, SourceError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

MISSING_ATTRS = ("_FillValue", "missing_value", "valid_min", "valid_max", "valid_range")
PACKING_ATTRS = ("scale_factor", "add_offset")


def is_decoded(attrs: Mapping[str, Any]) -> bool:
    """Whether CF decoding changes this variable's values."""
    return is_unsigned(attrs) or any(a in attrs for a in MISSING_ATTRS + PACKING_ATTRS)


def is_unsigned(attrs: Mapping[str, Any]) -> bool:
    """Whether ``_Unsigned = "true"`` says signed stored integers are unsigned
    (the NetCDF-3 convention for bytes above 127, which netCDF4 and xarray follow)."""
    return str(attrs.get("_Unsigned", "")).lower() == "true"


def logical_dtype(storage: np.dtype[Any], attrs: Mapping[str, Any]) -> np.dtype[Any]:
    """The dtype values are read as: float64 when packed or when integers can be
    missing (NaN needs a float), else the stored dtype (unsigned where
    ``_Unsigned`` says so)."""
    import numpy as np

    if is_unsigned(attrs) and storage.kind == "i":
        storage = np.dtype(storage.newbyteorder("=").str.replace("i", "u"))
    if any(a in attrs for a in PACKING_ATTRS):
        return np.dtype("f8")
    if storage.kind in "iu" and any(a in attrs for a in MISSING_ATTRS):
        return np.dtype("f8")
    return storage


def describe(attrs: Mapping[str, Any]) -> str | None:
    """A short description of the decoding, for ``quarry info``."""
    described = ("_Unsigned", *MISSING_ATTRS, *PACKING_ATTRS)
    parts = [f"{a}={_plain(attrs[a])}" for a in described if a in attrs]
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
    value = inexact_in_float64(stored, present)
    if value is not None:
        article = "an" if stored.dtype.kind == "i" else "a"
        raise InexactDecodingError(
            f"{name} holds {value}, beyond 2**53: {article} {stored.dtype} variable "
            "that declares missing values (_FillValue, missing_value or valid_*) is read "
            "as float64 with NaN where values are missing, and float64 cannot hold that "
            "integer exactly, so comparisons with it would be rounded. Quarry reads 64-bit "
            "integers exactly where their variable declares no missing values"
        )


def inexact_in_float64(
    stored: npt.NDArray[Any], present: npt.NDArray[np.bool_] | None = None
) -> int | None:
    """The first (present) value of the integer array ``stored`` that float64
    cannot hold exactly (``|v| > 2**53``); None where there is none.

    Examples
    --------
    >>> import numpy as np
    >>> inexact_in_float64(np.array([-(2**53), 2**53], "i8")) is None
    True
    >>> inexact_in_float64(np.array([3, 2**53 + 1, 2**63 - 1], "i8"))
    9007199254740993
    """
    import numpy as np

    if stored.dtype.kind not in "iu" or stored.dtype.itemsize < 8 or stored.size == 0:
        return None
    wide = (
        (stored > _EXACT_IN_FLOAT64)
        if stored.dtype.kind == "u"
        else ((stored > _EXACT_IN_FLOAT64) | (stored < -_EXACT_IN_FLOAT64))
    )
    if present is not None:
        wide &= present
    if not wide.any():
        return None
    return int(stored.reshape(-1)[int(np.flatnonzero(wide.reshape(-1))[0])])


def numbers(attrs: Mapping[str, Any], attr: str, name: str) -> list[Any]:
    """The numbers of the attribute ``attr`` (a scalar, or a list as NetCDF
    attributes are arrays: ``[0.01]``); :class:`~quarry.errors.SourceError`
    naming ``name`` where it holds something else (text).

    Examples
    --------
    >>> numbers({"scale_factor": [0.5]}, "scale_factor", "/t"), numbers({"v": 3}, "v", "/t")
    ([0.5], [3])
    >>> numbers({"valid_min": "0"}, "valid_min", "/t")
    Traceback (most recent call last):
    ...
    quarry.errors.SourceError: /t's valid_min is '0', not a number; ...
    """
    import numpy as np

    value = np.asarray(attrs[attr])
    if value.dtype.kind not in "biuf" or value.size == 0:
        raise SourceError(
            f"{name}'s {attr} is {attrs[attr]!r}, not a number; CF attributes that "
            "describe values are numbers (or lists of them)"
        )
    return [v.item() for v in value.reshape(-1)]


def valid_bounds(attrs: Mapping[str, Any], name: str) -> tuple[Any, Any]:
    """``(low, high)`` of the valid values ``valid_range`` or
    ``valid_min``/``valid_max`` declare (None: no bound).

    Examples
    --------
    >>> valid_bounds({"valid_range": [0, 100]}, "/rh"), valid_bounds({"valid_max": 9}, "/v")
    ((0, 100), (None, 9))
    """
    if "valid_range" in attrs:
        bounds = numbers(attrs, "valid_range", name)
        if len(bounds) != 2:
            raise SourceError(
                f"{name}'s valid_range is {attrs['valid_range']!r}; it takes two numbers, "
                "the least and the greatest valid value"
            )
        return bounds[0], bounds[1]
    lo = numbers(attrs, "valid_min", name)[0] if "valid_min" in attrs else None
    hi = numbers(attrs, "valid_max", name)[0] if "valid_max" in attrs else None
    return lo, hi


def unpack(values: npt.NDArray[Any], attrs: Mapping[str, Any], name: str) -> npt.NDArray[Any]:
    """``values * scale_factor + add_offset`` in float64, as CF defines
    packing, whatever the attributes' own dtype (float32 attributes would
    round in float32).

    Examples
    --------
    >>> import numpy as np
    >>> unpack(np.array([12345], "i2"), {"scale_factor": np.float32(0.01)}, "/t").tolist()
    [123.44999724067748]
    """
    import numpy as np

    out = values.astype(np.float64)
    if "scale_factor" in attrs:
        out *= numbers(attrs, "scale_factor", name)[0]
    if "add_offset" in attrs:
        out += numbers(attrs, "add_offset", name)[0]
    return out


def _as_stored(signed: np.dtype[Any]) -> Callable[[Any], Any]:
    """An attribute value of an ``_Unsigned`` variable of the signed dtype
    ``signed`` as its unsigned reading: -1 is 255 in bytes, as netCDF4 reads it.

    Examples
    --------
    >>> import numpy as np
    >>> [_as_stored(np.dtype("i1"))(v) for v in (-1, -128, 5, 0.5)]
    [255, 128, 5, 0.5]
    """
    bits = 8 * signed.itemsize

    def convert(value: Any) -> Any:
        if isinstance(value, int) and -(1 << (bits - 1)) <= value < 0:
            return value + (1 << bits)
        return value

    return convert


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

    as_stored = (
        _as_stored(stored.dtype) if is_unsigned(attrs) and stored.dtype.kind == "i" else None
    )
    if as_stored is not None:
        stored = stored.view(stored.dtype.str.replace("i", "u"))
    missing = np.zeros(stored.shape, dtype=bool)
    for attr in ("_FillValue", "missing_value"):
        if attr in attrs:
            for marker in numbers(attrs, attr, name):
                missing |= stored == (marker if as_stored is None else as_stored(marker))
    lo, hi = valid_bounds(attrs, name)
    if as_stored is not None:
        lo, hi = (None if b is None else as_stored(b) for b in (lo, hi))
    if lo is not None:
        missing |= stored < lo
    if hi is not None:
        missing |= stored > hi
    if any(a in attrs for a in PACKING_ATTRS):
        values = unpack(stored, attrs, name)
    else:
        require_exact(stored, ~missing, name)
        values = stored.astype(logical_dtype(stored.dtype, attrs))
    if missing.any():
        values[missing] = np.nan
    return values

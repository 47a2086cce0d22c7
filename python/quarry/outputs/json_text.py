"""Answers as JSON text, every command's ``--json`` and the service's: JSON has
no NaN or infinity, so a NaN is ``null`` (as a missing value is) and an
infinity the string ``"inf"`` or ``"-inf"``; what is printed always parses
(``jq``, ``JSON.parse``, ``json.loads`` without Python's extensions).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy.typing as npt


def json_number(x: Any) -> Any:
    """A number as JSON holds it: NaN as None, infinities as strings, NumPy
    scalars as Python numbers.

    Examples
    --------
    >>> import numpy as np
    >>> json_number(float("nan")), json_number(float("-inf")), json_number(2.5)
    (None, '-inf', 2.5)
    >>> json_number(np.float32("nan")), json_number(np.int64(7)), json_number(np.float64(0.5))
    (None, 7, 0.5)
    """
    kind = type(x)
    if kind is not float and kind is not int and hasattr(x, "item"):  # a NumPy scalar
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def json_list(values: npt.NDArray[Any]) -> list[Any]:
    """``values`` as a JSON-ready list: NaN as None, infinities as strings.

    Examples
    --------
    >>> import numpy as np
    >>> json_list(np.array([1.5, np.nan, -np.inf])), json_list(np.array([2**63], np.uint64))
    ([1.5, None, '-inf'], [9223372036854775808])
    """
    out = values.tolist()
    if values.dtype.kind not in "fc":
        return list(out)
    return [json_number(x) for x in out]


def json_ready(value: Any) -> Any:
    """``value`` with every non-finite float made JSON-safe (:func:`json_number`).

    Examples
    --------
    >>> json_ready({"a": [1.0, float("nan")], "b": (float("inf"),)})
    {'a': [1.0, None], 'b': ['inf']}
    """
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    return json_number(value)


def json_text(value: Any, indent: int | None = None) -> str:
    """``value`` as JSON text that any parser reads (:func:`json_ready`).

    Examples
    --------
    >>> json_text({"values": [1.0, float("nan")], "max": float("inf")})
    '{"values": [1.0, null], "max": "inf"}'
    """
    import json  # imported when asked for: a plain count's start-up does without

    return json.dumps(json_ready(value), allow_nan=False, indent=indent)

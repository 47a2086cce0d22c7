"""openPMD, the particle-accelerator community's layout of HDF5 and ADIOS2 files.

A file is openPMD when its root has the attribute ``openPMD`` (the standard's
version). Its iterations are groups under ``basePath`` (``/data/%T/``, ``%T``
the iteration number): these are the file's steps, so a query runs in each
iteration as it runs in each ``Step#s`` of an H5Part file. Under an iteration,
``particles/<species>/<record>/<component>`` and ``meshes/<record>/<component>``
hold the data; a scalar record is its own component.

What the drivers take from the standard (openPMD 1.1.0, ``STANDARD.md``):

- *Constant record components*: a component whose values are all equal is
  stored as a group (HDF5) or a set of attributes (ADIOS2) with ``value`` and
  ``shape`` and no data. It reads as an array of that shape filled with
  ``value``: nothing is read from the file.
- ``unitSI`` on a component: the factor from stored values to SI units. Values
  are the stored ones by default; with ``si=True`` they are multiplied by it
  in float64, as CF's ``scale_factor`` is applied.
- ``unitDimension`` on a record: the powers of the seven SI base quantities
  (length, mass, time, current, temperature, amount, luminous intensity),
  which :func:`unit_text` writes as units (``kg·m/s``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

#: The SI base unit of each entry of ``unitDimension`` (L, M, T, I, theta, N, J).
_BASE_UNITS = ("m", "kg", "s", "A", "K", "mol", "cd")
#: The order units are written in: mass first, as in ``kg·m/s``.
_WRITE_ORDER = (1, 0, 2, 3, 4, 5, 6)
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def text(value: Any) -> str | None:
    """An attribute value as text (bytes decoded, a one-element array unpacked).

    Examples
    --------
    >>> import numpy as np
    >>> text(np.bytes_(b"/data/%T/")), text('"1.1.0"'), text(None)
    ('/data/%T/', '1.1.0', None)
    """
    import numpy as np

    if value is None:
        return None
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(-1)[0]
    if isinstance(value, bytes | np.bytes_):
        value = value.decode("utf-8", "replace")
    # ADIOS2's metadata listing quotes strings.
    return str(value).strip('"')


def iterations_context(root: Mapping[str, Any]) -> str | None:
    """The context path naming an openPMD file's iteration groups (``/data/*``),
    from its root attributes; None when the file is not openPMD.

    Examples
    --------
    >>> iterations_context({"openPMD": b"1.1.0", "basePath": b"/data/%T/"})
    '/data/*'
    >>> iterations_context({"basePath": "/data/%T/"}) is None  # no openPMD attribute
    True
    """
    if "openPMD" not in root:
        return None
    base = text(root.get("basePath")) or "/data/%T/"
    return "/" + base.replace("%T", "*").strip("/")


def constant(attrs: Mapping[str, Any]) -> tuple[tuple[int, ...], np.ndarray[Any, Any]] | None:
    """(shape, value) of a constant record component, from the attributes of
    its group; None when the attributes do not describe one.

    Examples
    --------
    >>> import numpy as np
    >>> shape, value = constant({"value": np.float64(3.0), "shape": np.array([5], "u8")})
    >>> shape, value.dtype, float(value)
    ((5,), dtype('float64'), 3.0)
    >>> constant({"unitSI": 1.0}) is None
    True
    """
    import numpy as np

    if "value" not in attrs or "shape" not in attrs:
        return None
    value = np.asarray(attrs["value"])
    if value.size != 1 or value.dtype.kind not in "biuf":
        return None
    shape = tuple(int(s) for s in np.atleast_1d(np.asarray(attrs["shape"])))
    return shape, value.reshape(())


def unit_si(attrs: Mapping[str, Any]) -> float | None:
    """A component's ``unitSI``, or None where it has none (or not a number).

    Examples
    --------
    >>> import numpy as np
    >>> unit_si({"unitSI": np.float64(1e-6)}), unit_si({})
    (1e-06, None)
    """
    import numpy as np

    if "unitSI" not in attrs:
        return None
    value = np.asarray(attrs["unitSI"])
    if value.size != 1 or value.dtype.kind not in "iuf":
        return None
    return float(value.reshape(-1)[0])


def unit_text(dimension: Sequence[float]) -> str:
    """A ``unitDimension`` 7-tuple written in SI base units: positive powers
    before a ``/``, negative ones after it, ``1`` for a dimensionless record.

    Examples
    --------
    >>> unit_text([1, 1, -1, 0, 0, 0, 0])   # momentum
    'kg·m/s'
    >>> unit_text([1, 1, -3, -1, 0, 0, 0])  # electric field
    'kg·m/(s³·A)'
    >>> unit_text([-3, 0, 0, 0, 0, 0, 0]), unit_text([0] * 7), unit_text([0.5, 0, 0, 0, 0, 0, 0])
    ('1/m³', '1', 'm^0.5')
    """
    powers = [float(p) for p in dimension][:7]
    above: list[str] = []
    below: list[str] = []
    for k in _WRITE_ORDER[: len(powers)]:
        p = powers[k]
        if p == 0 or math.isnan(p):
            continue
        (above if p > 0 else below).append(_power(_BASE_UNITS[k], abs(p)))
    top = "·".join(above) or "1"
    if not below:
        return top
    bottom = below[0] if len(below) == 1 else "(" + "·".join(below) + ")"
    return f"{top}/{bottom}"


def _power(unit: str, p: float) -> str:
    if p == 1:
        return unit
    if p.is_integer():
        return unit + str(int(p)).translate(_SUPERSCRIPT)
    return f"{unit}^{p:g}"

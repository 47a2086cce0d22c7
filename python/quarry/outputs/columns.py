"""What an extract holds, and what each column is called.

One naming serves every writer (``.h5``, ``.nc``, ``.parquet``, ``.csv``,
``.npy``), ``to_pandas``/``to_arrow``/``to_xarray``, series extracts and
track outputs:

- A selected variable's column is named by its bare name (``e``, ``id``,
  ``lat``) when no other selected variable shares it; otherwise by the
  shortest path suffix that tells them apart (``Step#0/x`` beside ``x``). A
  column's name is never a group of another's (``g`` beside ``g/x``), so
  HDF5 and NetCDF-4 can hold both.
- Quarry's own names start with ``quarry_``: ``quarry_row`` is a hit's flat
  row-major position in the query's table (what ``--ids`` prints),
  ``quarry_index_<dim>`` its index along each axis (by dimension name where
  the format has them, ``quarry_index_lat``, else by axis number,
  ``quarry_index_0``), and ``quarry_hit`` the dimension the columns run
  along. Track outputs add ``quarry_found``; Parquet tables of several steps
  add ``quarry_group``, ``quarry_file`` and ``quarry_step``. Where a selected
  variable already has one of these names (or a group of that name holds
  it), Quarry's name gains a trailing ``_`` until it is free, so Quarry's
  columns never take a variable's name.

Attributes: each variable's column keeps its source's attributes (units,
long_name, standard_name, ...), except those that describe how the source
stores values Quarry has already decoded (``scale_factor``, ``add_offset``,
``valid_*``, ``_Unsigned``), the format's own bookkeeping (names starting
with ``_``, HDF5 dimension scales) and those naming other variables, which
an extract does not hold (``coordinates``, ``bounds``...). Missing values
are NaN in float columns, so ``_FillValue`` (and ``missing_value`` where the
source had one) is NaN there; a source whose values were not decoded keeps
its own markers, as its values do.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from quarry.records import field, record

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from quarry.formats.base import VariableInfo

#: Quarry's own names (before any ``_`` is added to keep them free).
ROW = "quarry_row"
INDEX = "quarry_index_"
HIT = "quarry_hit"
FOUND = "quarry_found"
GROUP, FILE, STEP = "quarry_group", "quarry_file", "quarry_step"

#: Attributes that describe stored values Quarry has decoded into the values it writes.
_DECODING = frozenset(
    {"scale_factor", "add_offset", "valid_min", "valid_max", "valid_range", "missing_value"}
)
#: Attributes that name other variables (absent from an extract) or are HDF5 dimension scales.
_DROPPED = frozenset(
    {
        "coordinates",
        "bounds",
        "grid_mapping",
        "ancillary_variables",
        "cell_measures",
        "formula_terms",
        "DIMENSION_LIST",
        "REFERENCE_LIST",
        "CLASS",
        "NAME",
    }
)
#: Attributes whose values say which values are missing.
MISSING_MARKERS = ("_FillValue", "missing_value")


@record
class OutputTable:
    """Equal-length columns ready for a writer: Quarry's own columns first,
    then the variables', each variable's attributes, and the name of the
    dimension the columns run along."""

    columns: dict[str, npt.NDArray[np.generic]]
    attrs: dict[str, dict[str, Any]] = field(default_factory=dict)
    dim: str = HIT
    row: str = ROW
    """The name ``quarry_row`` took here (``quarry_row_`` beside a variable of that name)."""
    own: tuple[str, ...] = ()
    """The names of Quarry's own columns, in order."""

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0


def variable_names(keys: Sequence[str]) -> list[str]:
    """Column names for variables with these (distinct) paths: the bare name
    where it is unique, else the shortest path suffix that is; never a group
    of another name, nor a name whose group another is.

    Examples
    --------
    >>> variable_names(["/Step#0/e", "/Step#0/id"])
    ['e', 'id']
    >>> variable_names(["/x", "/Step#0/x", "/Step#1/x"])
    ['x', 'Step#0/x', 'Step#1/x']
    >>> variable_names(["/a/g", "/b/g/x", "/c/x"])
    ['g', 'b/g/x', 'c/x']
    >>> variable_names(["/s", "/g/r", "/r/s"])  # "r" would be the group of "r/s"
    ['s', 'g/r', 'r/s']
    """
    parts = [key.strip("/").split("/") for key in keys]
    depth = [1] * len(parts)
    while True:
        names = ["/".join(p[-d:]) for p, d in zip(parts, depth, strict=True)]
        whole = [d == len(p) for p, d in zip(parts, depth, strict=True)]
        # A name grows where another is the same, or is a group of its path,
        # or lies in its group and cannot grow itself (it is a whole path).
        grow = [
            not whole[i]
            and any(
                j != i
                and (
                    names[j] == names[i]
                    or names[i].startswith(names[j] + "/")
                    or (whole[j] and names[j].startswith(names[i] + "/"))
                )
                for j in range(len(names))
            )
            for i in range(len(names))
        ]
        if not any(grow):
            return names
        depth = [d + g for d, g in zip(depth, grow, strict=True)]


def own_name(base: str, taken: Collection[str]) -> str:
    """``base`` with a ``_`` added until no name in ``taken`` (nor the group
    at the top of one) is the same.

    Examples
    --------
    >>> own_name("quarry_row", {"id", "x"}), own_name("quarry_row", {"quarry_row/e"})
    ('quarry_row', 'quarry_row_')
    """
    tops = set(taken) | {name.split("/", 1)[0] for name in taken}
    while base in tops:
        base += "_"
    return base


def output_attrs(info: VariableInfo, dtype: np.dtype[Any]) -> dict[str, Any]:
    """The attributes a column of ``info``'s values (of ``dtype``) keeps; see
    the module's description.

    Examples
    --------
    >>> import numpy as np
    >>> from quarry.formats.base import VariableInfo
    >>> t = VariableInfo("/t", (3,), np.dtype("f8"), decoding="_FillValue=-1",
    ...                  attrs={"units": "K", "_FillValue": -1, "scale_factor": 0.5})
    >>> output_attrs(t, np.dtype("f8"))
    {'units': 'K', '_FillValue': nan}
    """
    decoded = info.decoding is not None
    out: dict[str, Any] = {}
    for key, value in info.attrs.items():
        if key in _DROPPED or (key.startswith("_") and key != "_FillValue"):
            continue
        if decoded and (key in _DECODING or key == "_FillValue"):
            continue
        plain = _attr_value(value)
        if plain is not None:
            out[key] = plain
    if dtype.kind == "f":
        if "_FillValue" not in out:
            out["_FillValue"] = math.nan
        if decoded and "missing_value" in info.attrs:
            out["missing_value"] = math.nan
    if "_FillValue" in out and not _fits(out["_FillValue"], dtype):
        del out["_FillValue"]
    return out


def _attr_value(value: Any) -> Any:
    """A value every target can hold: text, a number, or a list of numbers or
    of texts (booleans as 0/1); ``None`` for anything else."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str | int | float):
        return value if not isinstance(value, int) or -(2**63) <= value < 2**64 else None
    if isinstance(value, list) and value:
        if all(isinstance(v, str) for v in value):
            return value
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
            return value
    return None


def _fits(value: Any, dtype: np.dtype[Any]) -> bool:
    """Whether a fill value is a scalar that ``dtype`` holds exactly."""
    import numpy as np

    if not isinstance(value, int | float):
        return False
    if dtype.kind == "f":
        return True
    if dtype.kind not in "iu" or not float(value).is_integer():
        return False
    bounds = np.iinfo(dtype)
    return bool(bounds.min <= value <= bounds.max)


def build_table(
    own: Sequence[tuple[str, npt.NDArray[np.generic]]],
    variables: Sequence[tuple[str, VariableInfo, npt.NDArray[np.generic]]],
) -> OutputTable:
    """An :class:`OutputTable` of Quarry's ``own`` columns ``(base name,
    values)`` and the selected ``variables`` ``(path, info, values)``, named
    so that none clash.

    Examples
    --------
    >>> import numpy as np
    >>> from quarry.formats.base import VariableInfo
    >>> info = VariableInfo("/quarry_row", (3,), np.dtype("i8"))
    >>> t = build_table([(ROW, np.arange(2))], [("/quarry_row", info, np.array([7, 9]))])
    >>> list(t.columns), t.row, t.dim
    (['quarry_row_', 'quarry_row'], 'quarry_row_', 'quarry_hit')
    """
    names = variable_names([key for key, _, _ in variables])
    renamed = {base: own_name(base, names) for base, _ in own}
    columns = {renamed[base]: values for base, values in own}
    attrs: dict[str, dict[str, Any]] = {}
    for name, (_, info, values) in zip(names, variables, strict=True):
        columns[name] = values
        attrs[name] = output_attrs(info, values.dtype)
    dim = own_name(HIT, list(columns))
    return OutputTable(columns, attrs, dim, renamed.get(ROW, ROW), tuple(renamed.values()))


def exact_common_dtype(dtypes: Collection[np.dtype[Any]]) -> np.dtype[Any] | None:
    """The dtype one column of several members' values can take with every
    value kept exactly (NumPy's promotion where it loses nothing: float32
    and float64 to float64, int16 and float32 to float32); None where none
    can (uint64 with int64 or a float, int64 with a float: NumPy would give
    float64 and round values past 2**53).

    Examples
    --------
    >>> import numpy as np
    >>> exact_common_dtype([np.dtype("f4"), np.dtype("f8")]), exact_common_dtype([np.dtype("i2")])
    (dtype('float64'), dtype('int16'))
    >>> exact_common_dtype([np.dtype("u8"), np.dtype("f8")]) is None
    True
    """
    import numpy as np

    common = np.result_type(*dtypes)

    def exact(dtype: np.dtype[Any]) -> bool:
        if dtype.kind in "iu" and common.kind == "f":
            # An integer of more bits than the float's significand rounds.
            return dtype.itemsize * 8 - (dtype.kind == "i") <= np.finfo(common).nmant + 1
        return bool(np.can_cast(dtype, common, casting="safe"))

    return common if all(exact(d) for d in dtypes) else None


def common_dtypes(
    seen: Mapping[str, Mapping[str, np.dtype[Any]]], what: str, instead: str
) -> dict[str, np.dtype[Any]]:
    """Each column's one dtype in a table of several members' rows, ``seen``
    giving its dtype in each member (by name): :func:`exact_common_dtype`,
    else a :class:`~quarry.errors.MixedDtypeError` that starts with
    ``what`` and ends with what to do ``instead``.

    Examples
    --------
    >>> import numpy as np
    >>> common_dtypes({"e": {"Step#0": np.dtype("f4"), "Step#1": np.dtype("f8")}}, "", "")
    {'e': dtype('float64')}
    >>> common_dtypes({"e": {"a.h5": np.dtype("u8"), "b.h5": np.dtype("f8")}},
    ...               "cannot write t.parquet", "write .h5")
    Traceback (most recent call last):
    quarry.errors.MixedDtypeError: cannot write t.parquet: e is uint64 in a.h5 and float64 in \
b.h5, and no one column holds all their values exactly; write .h5
    """
    from quarry.errors import MixedDtypeError

    common = {}
    for name, dtypes in seen.items():
        one = exact_common_dtype(set(dtypes.values()))
        if one is None:
            listed = " and ".join(f"{dtype} in {member}" for member, dtype in dtypes.items())
            raise MixedDtypeError(
                f"{what}: {name} is {listed}, and no one column holds all their values "
                f"exactly; {instead}"
            )
        common[name] = one
    return common


def arrow_table(table: OutputTable, metadata: Mapping[bytes, bytes] | None = None) -> Any:
    """``table`` as a ``pyarrow.Table``; each variable's attributes are its
    field's metadata (text as text, numbers and lists as JSON; a NaN fill
    value is left out, NaN being the value itself)."""
    import json

    import pyarrow

    fields, arrays = [], []
    for name, values in table.columns.items():
        array = pyarrow.array(values)
        meta = {
            key: value if isinstance(value, str) else json.dumps(value)
            for key, value in table.attrs.get(name, {}).items()
            if not (isinstance(value, float) and math.isnan(value))
        }
        fields.append(pyarrow.field(name, array.type, metadata=meta or None))
        arrays.append(array)
    schema = pyarrow.schema(fields, metadata=dict(metadata) if metadata else None)
    return pyarrow.Table.from_arrays(arrays, schema=schema)

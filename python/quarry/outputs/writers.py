"""Writing query results to files: ``.npy``, ``.csv``, ``.h5``, ``.nc`` and
``.parquet``, chosen by extension.

Every file is written to a temporary name in its own directory and renamed
into place, so a reader never sees half a file and a failed write leaves
nothing behind (:func:`atomic`). Columns are named as
:mod:`quarry.outputs.columns` describes, the same in every format.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from quarry.errors import QuarryError, UsageError
from quarry.outputs.columns import (
    FILE,
    GROUP,
    STEP,
    OutputTable,
    arrow_table,
    common_dtypes,
    own_name,
)
from quarry.records import replace

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

FORMATS = (".npy", ".csv", ".h5", ".nc", ".parquet")


class OutputError(QuarryError, ValueError):
    """An output file Quarry cannot write (unknown extension, bad location)."""


class OutputFormatError(OutputError, UsageError):
    """An output file whose extension names no format Quarry writes there:
    the command line's mistake, so ``quarry`` exits 2."""


class OutputOverInputError(OutputError, UsageError):
    """An output file that is one of the files being read: written, it would
    replace the data (the command line's mistake: ``quarry`` exits 2)."""


def refuse_inputs(path: str, inputs: Iterable[str]) -> None:
    """Refuse to write ``path`` where it is one of ``inputs`` (the same file
    by any name: a link, another spelling) or lies inside an input that is
    a directory (a directory store, a series' directory): an output is
    written whole to a new file renamed over ``path``, which would replace
    the data being read. A ``path`` that does not exist yet is no input.

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> data = os.path.join(d, "run.h5")
    >>> open(data, "w").close()
    >>> refuse_inputs(os.path.join(d, "hits.h5"), [data])  # a new file: fine
    >>> refuse_inputs(os.path.join(d, ".", "run.h5"), [data])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    quarry.outputs.writers.OutputOverInputError: will not write .../run.h5: it is the file being...
    """
    if not os.path.lexists(path):
        return
    real = os.path.realpath(path)
    for name in inputs:
        try:
            over = (
                os.path.commonpath([real, os.path.realpath(name)]) == os.path.realpath(name)
                if os.path.isdir(name)
                else os.path.samefile(path, name)
            )
        except (OSError, ValueError):  # no such input, or paths on other drives
            continue
        if over:
            what = (
                f"inside {name}, which is"
                if os.path.isdir(name)
                else "the file"
                if os.path.normpath(path) == os.path.normpath(name)
                else f"{name}, which is"
            )
            raise OutputOverInputError(
                f"will not write {path}: it is {what} being read; write the output to another file"
            )


def output_format(path: str) -> str:
    """The format ``path`` is written in, by its extension (``.hdf5`` is
    ``.h5``); an :class:`OutputFormatError` if Quarry writes none by it.

    Examples
    --------
    >>> output_format("hits.HDF5")
    '.h5'
    >>> output_format("hits.txt")
    Traceback (most recent call last):
    quarry.outputs.writers.OutputFormatError: cannot write hits.txt: use one of .npy, .csv, .h5, \
.nc, .parquet
    """
    ext = os.path.splitext(path)[1].lower()
    if ext == ".hdf5":
        ext = ".h5"
    if ext not in FORMATS:
        raise OutputFormatError(f"cannot write {path}: use one of {', '.join(FORMATS)}")
    return ext


def check_writable(path: str) -> str:
    """The directory ``path`` would be written in, if it is one a file can
    be written in; else an :class:`OutputError` naming ``path``. Commands
    call it before any work (under MPI: said once, by rank 0).

    Examples
    --------
    >>> check_writable("/no/such/dir/hits.h5")
    Traceback (most recent call last):
    quarry.outputs.writers.OutputError: cannot write /no/such/dir/hits.h5: there is no \
directory /no/such/dir
    """
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise OutputError(f"cannot write {path}: there is no directory {directory}")
    if not os.access(directory, os.W_OK):
        raise OutputError(
            f"cannot write {path}: the directory {directory} is not writable; "
            "write the output somewhere else"
        )
    return directory


@contextlib.contextmanager
def atomic(path: str) -> Iterator[str]:
    """A temporary name beside ``path`` to write to; renamed to ``path`` when
    the block ends, removed if it fails. Errors a scientist can act on (an
    unwritable directory, a name the format cannot hold) become
    :class:`OutputError` naming ``path``.

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with atomic(os.path.join(d, "a.txt")) as tmp, open(tmp, "w") as f:
    ...     _ = f.write("done")
    >>> os.listdir(d)
    ['a.txt']
    >>> with atomic(os.path.join(d, "b.txt")) as tmp, open(tmp, "w") as f:  # doctest: +ELLIPSIS
    ...     _ = f.write("half")
    ...     raise ValueError("a name the format cannot hold")
    Traceback (most recent call last):
    ...
    quarry.outputs.writers.OutputError: cannot write .../b.txt: a name the format cannot hold
    >>> os.listdir(d)
    ['a.txt']
    """
    directory = check_writable(path)
    tmp = os.path.join(
        directory, f".{os.path.basename(path)}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    )
    try:
        yield tmp
        os.replace(tmp, path)
    except (OSError, RuntimeError, ValueError) as exc:
        if isinstance(exc, QuarryError):
            raise
        raise OutputError(f"cannot write {path}: {exc}") from exc
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_positions(path: str, positions: npt.NDArray[np.int64]) -> None:
    """Write hit ids (1-D) or coordinates (``(count, ndim)``) as an int64 ``.npy`` file.

    Examples
    --------
    >>> import numpy as np
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "hits.npy")
    >>> write_positions(p, np.array([3, 9]))
    >>> np.load(p)
    array([3, 9])
    """
    import numpy as np

    if output_format(path) != ".npy":
        raise OutputFormatError(f"ids and coordinates are written as .npy; got {path}")
    with atomic(path) as tmp, open(tmp, "wb") as f:
        np.save(f, np.asarray(positions, dtype=np.int64))


def provenance(source: str, query: str) -> dict[str, Any]:
    """What an extracted file records about where it came from: the query, the
    source (path, size, modification time, CRC-32 of its bytes; every file of
    a directory store in name order), the Quarry version and the time."""
    import datetime
    import zlib

    from quarry.formats.base import fingerprint
    from quarry.version import VERSION

    files = (
        sorted(os.path.join(r, n) for r, _, ns in os.walk(source) for n in ns)
        if os.path.isdir(source)
        else [source]
    )
    crc = 0
    for name in files:
        with open(name, "rb") as f:
            while chunk := f.read(1 << 22):
                crc = zlib.crc32(chunk, crc)
    stamp = fingerprint(source)
    return {
        "query": query,
        "source": os.path.abspath(source),
        "source_size": stamp["size"],
        "source_mtime_ns": stamp["mtime_ns"],
        "source_crc32": crc,
        "quarry_version": VERSION,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def write_values(
    path: str,
    table: OutputTable | Mapping[str, npt.NDArray[np.generic]],
    provenance: dict[str, Any],
) -> None:
    """Write selected records: ``table`` (an :class:`OutputTable`, or plain
    named equal-length arrays) as one column per name.

    ``.npy``: a structured array; ``.csv``: a header line and one row per
    record; ``.h5``, ``.nc``, ``.parquet``: one column per name along the
    table's dimension, each with its variable's attributes (field metadata
    in Parquet), ``provenance`` as the file's attributes (file metadata for
    Parquet), readable by h5py, netCDF4/xarray and pyarrow as normal files.
    A name with a path (``Step#0/x``) is a dataset in a group in HDF5 and
    NetCDF-4.

    Examples
    --------
    >>> import numpy as np
    >>> import h5py, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "sel.h5")
    >>> write_values(path, {"e": np.array([1.5, 2.5])}, {"query": "e > 1"})
    >>> with h5py.File(path) as f:
    ...     f["e"][()].tolist(), f.attrs["query"]
    ([1.5, 2.5], 'e > 1')
    """
    ext = output_format(path)
    if not isinstance(table, OutputTable):
        table = OutputTable(dict(table))
    writer = {".h5": _h5, ".nc": _nc, ".parquet": _parquet, ".npy": _npy, ".csv": _csv}[ext]
    with atomic(path) as tmp:
        writer(tmp, table, provenance)


def _h5(path: str, table: OutputTable, attrs: dict[str, Any]) -> None:
    import h5py

    with h5py.File(path, "w") as f:
        _h5_columns(f, table)
        f.attrs.update({k: v for k, v in attrs.items() if v is not None})


def _h5_columns(group: Any, table: OutputTable) -> None:
    import h5py
    import numpy as np

    for name, values in table.columns.items():
        if values.dtype.kind == "U":  # text (quarry_file): HDF5's variable-length UTF-8
            dataset = group.create_dataset(
                name, data=values.astype(object), dtype=h5py.string_dtype()
            )
        else:
            dataset = group.create_dataset(name, data=values)
        for key, value in table.attrs.get(name, {}).items():
            if key in ("_FillValue", "missing_value"):
                value = np.asarray(value, dtype=values.dtype)
            dataset.attrs[key] = value


def _nc(path: str, table: OutputTable, attrs: dict[str, Any]) -> None:
    import netCDF4

    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        _nc_columns(ds, table)
        ds.setncatts({k: v for k, v in attrs.items() if v is not None})


def _nc_columns(group: Any, table: OutputTable) -> None:
    """The columns as variables of ``group`` along the table's dimension; a
    name with a path nests in groups (NetCDF-4 groups see their parents'
    dimensions)."""
    import numpy as np

    group.createDimension(table.dim, len(table))
    for name, values in table.columns.items():
        *parents, leaf = name.split("/")
        where = group
        for parent in parents:
            where = where.groups.get(parent) or where.createGroup(parent)
        attrs = dict(table.attrs.get(name, {}))
        fill = attrs.pop("_FillValue", None)
        stored = values.astype("u1") if values.dtype.kind == "b" else values
        if stored.dtype.kind == "U":  # text (quarry_file): NetCDF-4's variable-length string
            stored = stored.astype(object)
        # The bare type code: an explicit '<' makes netCDF4 warn about byte order.
        var = where.createVariable(
            leaf,
            str if stored.dtype.kind == "O" else stored.dtype.str[1:],
            (table.dim,),
            fill_value=False if fill is None else np.asarray(fill, dtype=stored.dtype),
        )
        if "missing_value" in attrs:
            attrs["missing_value"] = np.asarray(attrs["missing_value"], dtype=stored.dtype)
        if table.own and not parents and name not in table.own:
            # CF: Quarry's columns are this variable's coordinates (xarray reads them so)
            attrs["coordinates"] = " ".join(table.own)
        var.setncatts(attrs)
        var.set_auto_maskandscale(False)  # write the values as they are
        var[:] = stored


def _parquet(path: str, table: OutputTable, attrs: dict[str, Any]) -> None:
    import json

    import pyarrow.parquet

    meta = {b"quarry": json.dumps(attrs).encode()}
    pyarrow.parquet.write_table(arrow_table(table, meta), path)


def _records(table: OutputTable) -> npt.NDArray[Any]:
    import numpy as np

    records = np.empty(len(table), dtype=[(n, v.dtype) for n, v in table.columns.items()])
    for name, values in table.columns.items():
        records[name] = values
    return records


def _npy(path: str, table: OutputTable, attrs: dict[str, Any]) -> None:
    import numpy as np

    with open(path, "wb") as f:
        np.save(f, _records(table))


def _csv(path: str, table: OutputTable, attrs: dict[str, Any]) -> None:
    import csv

    import numpy as np

    kinds = {"i": "%d", "u": "%d", "b": "%d", "U": "%s"}
    formats = [kinds.get(v.dtype.kind, "%.17g") for v in table.columns.values()]
    with open(path, "w", newline="") as f:
        rows = csv.writer(f, lineterminator="\n")
        rows.writerow(table.columns)
        if any(v.dtype.kind == "U" for v in table.columns.values()):
            # Text (a file's path) may hold a comma: the csv module quotes it.
            cells = [
                [form % x for x in v.tolist()]
                for form, v in zip(formats, table.columns.values(), strict=True)
            ]
            rows.writerows(zip(*cells, strict=True))
        elif len(table):
            np.savetxt(f, _records(table), delimiter=",", fmt=formats)


def write_groups(
    path: str,
    groups: dict[str, tuple[OutputTable, dict[str, Any]]],
    attrs: dict[str, Any],
) -> None:
    """A file with one group per step: ``groups`` maps a group name
    (``Step#3``, or ``run_2.h5/Step#3`` over several files) to its table
    and its attributes; ``attrs`` (the query, the sources) go on the root.
    ``.h5`` and ``.nc`` (NetCDF-4) hold real groups; ``.parquet`` has none,
    so its one table gains ``quarry_group``, ``quarry_file`` and
    ``quarry_step`` columns, with ``attrs`` in the file metadata.

    Examples
    --------
    >>> import numpy as np
    >>> import h5py, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "steps.h5")
    >>> table = OutputTable({"quarry_row": np.arange(3)})
    >>> write_groups(path, {"Step#0": (table, {"step": 0})}, {"query": "x > 1"})
    >>> with h5py.File(path) as f:
    ...     f["Step#0/quarry_row"][()].tolist(), f.attrs["query"], int(f["Step#0"].attrs["step"])
    ([0, 1, 2], 'x > 1', 0)
    """
    ext = check_groups_path(path)
    attrs = {k: v for k, v in attrs.items() if v is not None}
    writer: Callable[[str, Groups, dict[str, Any]], None]
    if ext == ".parquet":
        # Checked before the temporary is made: a mismatch names the path asked for.
        writer = functools.partial(_groups_parquet, common=_common_dtypes(path, groups))
    else:
        writer = {".h5": _groups_h5, ".nc": _groups_nc}[ext]
    with atomic(path) as tmp:
        writer(tmp, groups, attrs)


def check_groups_path(path: str) -> str:
    """The extension of ``path`` if it can hold one group per step (``.h5``,
    ``.nc``, ``.parquet``); else an :class:`OutputFormatError`, which a command
    raises before any work (under MPI: once, before the ranks start).

    Examples
    --------
    >>> check_groups_path("hits.parquet")
    '.parquet'
    >>> check_groups_path("hits.npy")
    Traceback (most recent call last):
    quarry.outputs.writers.OutputFormatError: hits.npy: steps are written to .h5, .nc or .parquet, \
one group per step
    """
    ext = output_format(path)
    if ext not in (".h5", ".nc", ".parquet"):
        raise OutputFormatError(
            f"{path}: steps are written to .h5, .nc or .parquet, one group per step"
        )
    return ext


Groups = dict[str, tuple[OutputTable, dict[str, Any]]]


def _groups_h5(path: str, groups: Groups, attrs: dict[str, Any]) -> None:
    import h5py

    # Groups listed in the order written (the members'), not by name, where
    # Step#10 would come before Step#2.
    with h5py.File(path, "w", track_order=True) as f:
        f.attrs.update(attrs)
        for name, (table, group_attrs) in groups.items():
            g = f.create_group(name)
            g.attrs.update(group_attrs)
            _h5_columns(g, table)


def _groups_nc(path: str, groups: Groups, attrs: dict[str, Any]) -> None:
    import netCDF4

    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        ds.setncatts(attrs)
        for name, (table, group_attrs) in groups.items():
            g = ds.createGroup(name)  # a path: run_2.h5/Step#3 nests
            g.setncatts(group_attrs)
            _nc_columns(g, table)


def _groups_parquet(
    path: str, groups: Groups, attrs: dict[str, Any], common: dict[str, np.dtype[Any]]
) -> None:
    """One table of every group's rows, with the group, file and step of
    each, each column of its ``common`` dtype; a column's attributes are
    those of the first group holding it."""
    import json

    import pyarrow
    import pyarrow.parquet

    names = [name for table, _ in groups.values() for name in table.columns]
    group_col, file_col, step_col = (own_name(base, names) for base in (GROUP, FILE, STEP))
    tables = []
    for name, (table, group_attrs) in groups.items():
        n = len(table)
        columns = {c: v.astype(common[c], copy=False) for c, v in table.columns.items()}
        part = arrow_table(replace(table, columns=columns))
        part = part.append_column(group_col, pyarrow.array([name] * n, pyarrow.string()))
        part = part.append_column(
            file_col, pyarrow.array([str(group_attrs.get("file", ""))] * n, pyarrow.string())
        )
        # A file without step groups: null, as in to_arrow (an HDF5 or NetCDF
        # attribute cannot be null: -1 there).
        step = int(group_attrs.get("step", -1))
        part = part.append_column(
            step_col, pyarrow.array([step if step >= 0 else None] * n, pyarrow.int64())
        )
        tables.append(part)
    whole = pyarrow.concat_tables(tables, promote_options="default")
    fields: dict[str, Any] = {}
    for part in tables:
        for f in part.schema:
            fields.setdefault(f.name, f.metadata)
    schema = pyarrow.schema(
        [f.with_metadata(fields[f.name]) for f in whole.schema],
        metadata={b"quarry": json.dumps(attrs).encode()},
    )
    pyarrow.parquet.write_table(whole.cast(schema), path)


def _common_dtypes(path: str, groups: Groups) -> dict[str, np.dtype[Any]]:
    """Each column's one dtype in a Parquet table of every group's rows
    (see :func:`~quarry.outputs.columns.common_dtypes`)."""
    seen: dict[str, dict[str, np.dtype[Any]]] = {}
    for group, (table, _) in groups.items():
        for name, values in table.columns.items():
            seen.setdefault(name, {})[group] = values.dtype
    instead = "write .h5 or .nc, which keep each group's dtype"
    return common_dtypes(seen, f"cannot write {path}", instead)


def sources_provenance(sources: list[str], query: str) -> dict[str, Any]:
    """:func:`provenance` of each source, as flat attributes (``source``,
    ``source_crc32``... for one; ``source0_...``, ``source1_...`` for many)."""
    out: dict[str, Any] = {}
    for k, source in enumerate(sources):
        for key, value in provenance(source, query).items():
            if key in ("query", "quarry_version", "created") or len(sources) == 1:
                out[key] = value
            else:  # source -> source3, source_crc32 -> source3_crc32
                out[f"source{k}{key.removeprefix('source')}"] = value
    return out

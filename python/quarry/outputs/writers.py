"""Writing query results to files: ``.npy``, ``.csv``, ``.h5``, ``.nc`` and
``.parquet``, chosen by extension."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from quarry.errors import QuarryError

if TYPE_CHECKING:
    import numpy.typing as npt

FORMATS = (".npy", ".csv", ".h5", ".nc", ".parquet")


class OutputError(QuarryError, ValueError):
    """An output file Quarry cannot write (unknown extension, bad location)."""


def _extension(path: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    if ext == ".hdf5":
        ext = ".h5"
    if ext not in FORMATS:
        raise OutputError(f"cannot write {path}: use one of {', '.join(FORMATS)}")
    return ext


def write_positions(path: str, positions: npt.NDArray[np.int64]) -> None:
    """Write hit ids (1-D) or coordinates (``(count, ndim)``) as an int64 ``.npy`` file.

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "hits.npy")
    >>> write_positions(p, np.array([3, 9]))
    >>> np.load(p)
    array([3, 9])
    """
    if _extension(path) != ".npy":
        raise OutputError(f"ids and coordinates are written as .npy; got {path}")
    np.save(path, np.asarray(positions, dtype=np.int64))


def provenance(source: str, query: str) -> dict[str, Any]:
    """What an extracted file records about where it came from: the query, the
    source (path, size, modification time, CRC-32 of its bytes; every file of
    a directory store in name order), the Quarry version and the time."""
    import datetime
    import zlib

    import quarry
    from quarry.formats.base import fingerprint

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
        "quarry_version": quarry.__version__,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def write_values(
    path: str, columns: dict[str, npt.NDArray[np.generic]], provenance: dict[str, Any]
) -> None:
    """Write selected records: ``columns`` maps names to equal-length arrays
    (``id``, per-axis indices, variable values).

    ``.npy``: a structured array; ``.csv``: a header line and one row per
    record; ``.h5``, ``.nc``, ``.parquet``: one column per name along a
    ``hit`` dimension, with ``provenance`` as attributes (file metadata for
    Parquet), readable by h5py, netCDF4/xarray and pyarrow as normal files.
    """
    ext = _extension(path)
    if ext == ".h5":
        import h5py

        with h5py.File(path, "w") as f:
            for name, values in columns.items():
                f.create_dataset(name.strip("/"), data=values)
            for key, value in provenance.items():
                f.attrs[key] = value
        return
    if ext == ".nc":
        import netCDF4

        with netCDF4.Dataset(path, "w") as ds:
            ds.createDimension("hit", len(next(iter(columns.values()))))
            for name, values in columns.items():
                # The bare type code: an explicit '<' makes netCDF4 warn about byte order.
                var = ds.createVariable(_netcdf_name(name), values.dtype.str[1:], ("hit",))
                var[:] = values
                if name != _netcdf_name(name):
                    var.setncattr("quarry_name", name)
            ds.setncatts({k: v for k, v in provenance.items() if v is not None})
        return
    if ext == ".parquet":
        import json

        import pyarrow
        import pyarrow.parquet

        table = pyarrow.table(dict(columns))
        meta = {b"quarry": json.dumps(provenance).encode()}
        pyarrow.parquet.write_table(table.replace_schema_metadata(meta), path)
        return
    fields = [(n, v.dtype) for n, v in columns.items()]
    table = np.empty(len(next(iter(columns.values()))), dtype=fields)
    for name, values in columns.items():
        table[name] = values
    if ext == ".npy":
        np.save(path, table)
        return
    formats = ["%d" if v.dtype.kind in "iu" else "%.17g" for v in columns.values()]
    np.savetxt(path, table, delimiter=",", header=",".join(columns), comments="", fmt=formats)


def _netcdf_name(name: str) -> str:
    """NetCDF names cannot contain '/': a path becomes its components joined by '_'."""
    return name.strip("/").replace("/", "_")


def write_groups(
    path: str,
    groups: dict[str, tuple[dict[str, npt.NDArray[np.generic]], dict[str, Any]]],
    attrs: dict[str, Any],
) -> None:
    """A file with one group per step: ``groups`` maps a group name
    (``Step#3``, or ``run_2.h5/Step#3`` over several files) to its columns
    and its attributes; ``attrs`` (the query, the sources) go on the root.
    ``.h5`` and ``.nc`` (NetCDF-4) hold real groups; ``.parquet`` has none,
    so its one table gains ``group``, ``file`` and ``step`` columns, with
    ``attrs`` in the file metadata. Written to a temporary name and renamed,
    so a reader never sees half a file.

    Examples
    --------
    >>> import h5py, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "steps.h5")
    >>> write_groups(path, {"Step#0": ({"id": np.arange(3)}, {"step": 0})}, {"query": "x > 1"})
    >>> with h5py.File(path) as f:
    ...     f["Step#0/id"][()].tolist(), f.attrs["query"], int(f["Step#0"].attrs["step"])
    ([0, 1, 2], 'x > 1', 0)
    """
    ext = _extension(path)
    if ext not in (".h5", ".nc", ".parquet"):
        raise OutputError(f"{path}: steps are written to .h5, .nc or .parquet, one group per step")
    attrs = {k: v for k, v in attrs.items() if v is not None}
    tmp = os.path.join(
        os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.{os.getpid()}.tmp"
    )
    try:
        {".h5": _groups_h5, ".nc": _groups_nc, ".parquet": _groups_parquet}[ext](tmp, groups, attrs)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


Groups = dict[str, tuple[dict[str, "npt.NDArray[np.generic]"], dict[str, Any]]]


def _groups_h5(path: str, groups: Groups, attrs: dict[str, Any]) -> None:
    import h5py

    with h5py.File(path, "w") as f:
        f.attrs.update(attrs)
        for name, (columns, group_attrs) in groups.items():
            g = f.create_group(name)
            g.attrs.update(group_attrs)
            for column, values in columns.items():
                g.create_dataset(column.strip("/"), data=values)


def _groups_nc(path: str, groups: Groups, attrs: dict[str, Any]) -> None:
    import netCDF4

    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        ds.setncatts(attrs)
        for name, (columns, group_attrs) in groups.items():
            g = ds.createGroup(name)  # a path: run_2.h5/Step#3 nests
            g.setncatts(group_attrs)
            g.createDimension("hit", len(next(iter(columns.values()))))
            for column, values in columns.items():
                var = g.createVariable(_netcdf_name(column), values.dtype.str[1:], ("hit",))
                var[:] = values
                if column != _netcdf_name(column):
                    var.setncattr("quarry_name", column)


def _groups_parquet(path: str, groups: Groups, attrs: dict[str, Any]) -> None:
    import json

    import pyarrow
    import pyarrow.parquet

    tables = []
    for name, (columns, group_attrs) in groups.items():
        n = len(next(iter(columns.values())))
        table = pyarrow.table(dict(columns))
        table = table.append_column("group", pyarrow.array([name] * n, pyarrow.string()))
        table = table.append_column(
            "file", pyarrow.array([str(group_attrs.get("file", ""))] * n, pyarrow.string())
        )
        table = table.append_column(
            "step", pyarrow.array([int(group_attrs.get("step", -1))] * n, pyarrow.int64())
        )
        tables.append(table)
    whole = pyarrow.concat_tables(tables, promote_options="default")
    meta = {b"quarry": json.dumps(attrs).encode()}
    pyarrow.parquet.write_table(whole.replace_schema_metadata(meta), path)


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

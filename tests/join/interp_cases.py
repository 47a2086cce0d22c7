"""Shared by the join tests: fields written in every format, particle files,
and the independent NumPy reference of multilinear interpolation."""

from __future__ import annotations

import os

import h5py
import numpy as np

FORMATS = ("raw", "hdf5", "hdf5-chunked", "netcdf", "zarr", "adios2")


def reference(
    values: np.ndarray, coords: list[np.ndarray], points: list[np.ndarray], outside: str
) -> np.ndarray:
    """Multilinear interpolation written as a sum over every grid node of its
    value times one hat function per axis (``np.interp`` of a unit vector:
    1 at the node, 0 at its neighbours and beyond). No cells are located, so
    it shares nothing with the code under test. ``np.interp`` holds the edge
    value beyond the ends, which is ``clamp``; ``nan`` masks those points."""
    values = np.asarray(values, dtype=np.float64)
    weights = []
    for axis, (c, p) in enumerate(zip(coords, points, strict=True)):
        c = np.asarray(c, dtype=np.float64)
        if c[0] > c[-1]:  # np.interp wants increasing nodes
            c = c[::-1]
            values = np.flip(values, axis)
        eye = np.eye(len(c))
        weights.append(np.stack([np.interp(p, c, eye[i]) for i in range(len(c))], axis=1))
    letters = "ijk"[: values.ndim]
    spec = ",".join(f"p{a}" for a in letters) + f",{letters}->p"
    out = np.einsum(spec, *weights, values)
    if outside == "nan":
        for c, p in zip(coords, points, strict=True):
            out[~((p >= min(c[0], c[-1])) & (p <= max(c[0], c[-1])))] = np.nan
    return out


def assert_close(got: np.ndarray, expected: np.ndarray, values: np.ndarray) -> None:
    """Equal to float64 rounding: a few ulps of the field's largest value
    (sums of weighted values cancel near 0, so a relative test alone is
    too strict there), NaN where the reference has NaN."""
    assert np.isnan(got).tolist() == np.isnan(expected).tolist()
    scale = float(np.nanmax(np.abs(values))) if values.size else 1.0
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-13 * scale)


def write_particles(path: str, columns: dict[str, np.ndarray]) -> str:
    with h5py.File(path, "w") as f:
        for name, values in columns.items():
            f[name] = values
    return path


def write_field(
    folder: str,
    fmt: str,
    name: str,
    values: np.ndarray,
    coords: list[np.ndarray] | None = None,
) -> str:
    """``values`` as variable ``name`` in a new file of format ``fmt``, beside
    another variable (so the name must resolve); with ``coords`` as CF
    coordinate variables (NetCDF only). Returns the field's text for
    ``--field NAME=...``."""
    dims = [f"d{k}" for k in range(values.ndim)]
    if fmt == "raw":
        from quarry.formats.raw import RawLayout, register

        path = os.path.join(folder, f"{name}.bin")
        values.tofile(path)
        register(path, RawLayout(name, values.dtype.str, values.shape))
        return path
    if fmt.startswith("hdf5"):
        path = os.path.join(folder, f"{name}.h5")
        chunks = tuple(max(1, n // 2) for n in values.shape) if fmt == "hdf5-chunked" else None
        with h5py.File(path, "w") as f:
            f.create_dataset(f"mesh/{name}", data=values, chunks=chunks)
            f["mesh/other"] = np.zeros(3)
        return path
    if fmt == "netcdf":
        import netCDF4

        path = os.path.join(folder, f"{name}.nc")
        with netCDF4.Dataset(path, "w") as ds:
            for dim, n in zip(dims, values.shape, strict=True):
                ds.createDimension(dim, n)
            var = ds.createVariable(name, values.dtype.str[1:], dims)
            var[:] = values
            ds.createVariable("other", "f8", (dims[0],))[:] = 0.0
            for dim, c in zip(dims, coords or [], strict=bool(coords)):
                ds.createVariable(dim, "f8", (dim,))[:] = c
        return path
    if fmt == "zarr":
        import zarr

        path = os.path.join(folder, f"{name}.zarr")
        root = zarr.open_group(path, mode="w", zarr_format=3)
        chunks = tuple(max(1, n // 2) for n in values.shape)
        arr = root.create_array(name, shape=values.shape, dtype=values.dtype, chunks=chunks)
        arr[:] = values
        root.create_array("other", shape=(3,), dtype="f8")[:] = 0.0
        return f"{path}:{name}"
    if fmt == "adios2":
        import adios2

        path = os.path.join(folder, f"{name}.bp")
        io = adios2.Adios().declare_io(f"field-{name}")
        with adios2.Stream(io, path, "w") as stream:
            for _ in stream.steps(1):
                shape = list(values.shape)
                stream.write(name, np.ascontiguousarray(values), shape, [0] * len(shape), shape)
        return path
    raise ValueError(fmt)


def count_reads(monkeypatch, driver, suffix: str = "bx") -> list[tuple[int, int]]:
    """The (start, stop) of every read, through ``driver``, of a variable
    whose name ends with ``suffix``: filled in as the test runs."""
    reads: list[tuple[int, int]] = []
    original = driver.read

    def counted(self, var, start, stop):
        if var.endswith(suffix):
            reads.append((start, stop))
        return original(self, var, start, stop)

    monkeypatch.setattr(driver, "read", counted)
    return reads

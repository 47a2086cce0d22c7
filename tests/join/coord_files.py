"""Fields written with their coordinates by each format's own convention,
for the coordinate tests: HDF5 dimension scales, a ``coordinates``
attribute, 1-D variables beside the field named like the positions, Zarr's
dimension names (v2 ``_ARRAY_DIMENSIONS``, v3 ``dimension_names``), and
ADIOS2's attribute and neighbours."""

from __future__ import annotations

import os

import h5py
import numpy as np

#: (format, convention) pairs written by :func:`write_with_coordinates`.
CONVENTIONS = (
    ("hdf5", "scales"),
    ("hdf5", "attribute"),
    ("hdf5", "beside"),
    ("zarr", "v2-dims"),
    ("zarr", "v3-dims"),
    ("zarr", "attribute"),
    ("adios2", "attribute"),
    ("adios2", "beside"),
)


def write_with_coordinates(
    folder: str,
    fmt: str,
    convention: str,
    values: np.ndarray,
    coords: list[np.ndarray],
    at: list[str],
) -> str:
    """``values`` as the field ``bx`` beside a decoy, its axis ``k`` at
    ``coords[k]`` by ``convention``; the coordinate variables are named
    ``at`` only where the convention calls for it (``beside``), else
    ``c0``, ``c1``... Returns the field's text for ``--field``."""
    names = at if convention == "beside" else [f"c{k}" for k in range(values.ndim)]
    if fmt == "hdf5":
        path = os.path.join(folder, "bx.h5")
        with h5py.File(path, "w") as f:
            mesh = f.create_group("mesh")
            field = mesh.create_dataset("bx", data=values)
            mesh["decoy"] = np.zeros(values.shape[0])
            for k, (name, c) in enumerate(zip(names, coords, strict=True)):
                mesh[name] = c
                if convention == "scales":
                    mesh[name].make_scale(name)
                    field.dims[k].attach_scale(mesh[name])
            if convention == "attribute":
                field.attrs["coordinates"] = " ".join(names)
        return f"{path}:mesh/bx"
    if fmt == "zarr":
        import zarr

        path = os.path.join(folder, "bx.zarr")
        v2 = convention == "v2-dims"
        root = zarr.open_group(path, mode="w", zarr_format=2 if v2 else 3)
        dims = [f"c{k}" for k in range(values.ndim)]
        extra = {"dimension_names": dims} if convention == "v3-dims" else {}
        arr = root.create_array("bx", shape=values.shape, dtype=values.dtype, **extra)
        arr[:] = values
        if v2:
            arr.attrs["_ARRAY_DIMENSIONS"] = dims
        if convention == "attribute":
            arr.attrs["coordinates"] = " ".join(names)
        for name, c in zip(names, coords, strict=True):
            coordinate = root.create_array(name, shape=c.shape, dtype=c.dtype)
            coordinate[:] = c
        return f"{path}:bx"
    if fmt == "adios2":
        import adios2

        path = os.path.join(folder, "bx.bp")
        io = adios2.Adios().declare_io(f"coords-{convention}-{values.ndim}")
        with adios2.Stream(io, path, "w") as stream:
            for _ in stream.steps(1):
                shape = list(values.shape)
                stream.write("bx", np.ascontiguousarray(values), shape, [0] * len(shape), shape)
                for name, c in zip(names, coords, strict=True):
                    stream.write(name, np.ascontiguousarray(c), [len(c)], [0], [len(c)])
                if convention == "attribute":
                    stream.write_attribute("coordinates", " ".join(names), "bx")
        return f"{path}:bx"
    raise ValueError(fmt)

"""openPMD series written with openpmd-api, and the values they hold (for NumPy).

Each iteration holds two species, ``electrons`` and ``ions``, with
``position/x|y`` (float64, NaNs included, ``unitSI`` 1e-6), ``momentum/x``
(float32, ``unitSI`` 2.5e-3, unitDimension of momentum), ``id`` (int64),
a constant ``weighting`` and a constant ``positionOffset/x``; and a mesh
``E`` with components ``x``, ``y`` (unitDimension of an electric field).
Particle counts differ per iteration and species and are not multiples of
the block length the tests use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

ITERATIONS = (0, 10, 20)
SPECIES = ("electrons", "ions")
POSITION_SI = 1e-6
MOMENTUM_SI = 2.5e-3
WEIGHTING = {"electrons": 3.0, "ions": 0.25}


@dataclass
class Written:
    """What was written: ``values[(iteration, species, record/component)]``."""

    path: str
    values: dict[tuple[int, str, str], np.ndarray[Any, Any]] = field(default_factory=dict)


def _count(iteration: int, species: str) -> int:
    return 37 + 3 * iteration + (11 if species == "ions" else 0)


def write(path: str, encoding: str = "group", seed: int = 0) -> Written:
    """An openPMD series at ``path`` (``run.h5``, ``run_%T.h5``, ``run.bp``...),
    ``encoding`` one of ``group``, ``file`` (the path holds ``%T``), ``variable``
    (ADIOS2 only)."""
    import openpmd_api as io

    rng = np.random.default_rng(seed)
    written = Written(path)
    series = io.Series(path, io.Access.create)
    if encoding == "group":
        series.iteration_encoding = io.Iteration_Encoding.group_based
    elif encoding == "variable":
        series.iteration_encoding = io.Iteration_Encoding.variable_based
    iterations = series.write_iterations()
    for it in ITERATIONS:
        iteration = iterations[it]
        for species in SPECIES:
            particles = iteration.particles[species]
            n = _count(it, species)
            for comp in "xy":
                data = rng.normal(0.0, 5.0, n)
                data[rng.random(n) < 0.1] = np.nan
                _store(particles["position"][comp], data, POSITION_SI)
                written.values[(it, species, f"position/{comp}")] = data
            particles["position"].unit_dimension = {io.Unit_Dimension.L: 1}
            momentum = rng.normal(0.0, 1.0, n).astype(np.float32)
            _store(particles["momentum"]["x"], momentum, MOMENTUM_SI)
            particles["momentum"].unit_dimension = {
                io.Unit_Dimension.L: 1,
                io.Unit_Dimension.M: 1,
                io.Unit_Dimension.T: -1,
            }
            written.values[(it, species, "momentum/x")] = momentum
            ids = np.arange(n, dtype=np.int64) + 1000 * it
            _store(particles["id"][io.Record_Component.SCALAR], ids, 1.0)
            written.values[(it, species, "id")] = ids
            for record, comp, value in (
                ("weighting", io.Record_Component.SCALAR, WEIGHTING[species]),
                ("positionOffset", "x", 0.5),
            ):
                component = particles[record][comp]
                component.reset_dataset(io.Dataset(np.dtype("f8"), [n]))
                component.make_constant(value)
                key = record if comp == io.Record_Component.SCALAR else f"{record}/{comp}"
                written.values[(it, species, key)] = np.full(n, value)
        field_e = iteration.meshes["E"]
        field_e.unit_dimension = {
            io.Unit_Dimension.L: 1,
            io.Unit_Dimension.M: 1,
            io.Unit_Dimension.T: -3,
            io.Unit_Dimension.I: -1,
        }
        for comp in "xy":
            mesh = rng.normal(0.0, 5.0, (6, 7))
            _store(field_e[comp], mesh, 1.0)
            written.values[(it, "meshes", f"E/{comp}")] = mesh
        iteration.close()
    series.close()
    return written


def _store(component: Any, data: np.ndarray[Any, Any], unit_si: float) -> None:
    import openpmd_api as io

    component.reset_dataset(io.Dataset(data.dtype, list(data.shape)))
    component.store_chunk(np.ascontiguousarray(data))
    component.unit_SI = unit_si

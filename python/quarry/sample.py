"""Small sample data sets, generated on the spot (the demo and tests use them).

:func:`write_particles` mimics a VPIC-like plasma dump in the H5Part layout
(``/Step#0/x`` ...): positions in a 330 x 330 x 132 box, a thermal momentum
core and a rare energetic tail near the current sheet, so ``energy > 1`` is a
needle-in-a-haystack query as in the FastQuery papers.
"""

from __future__ import annotations

import numpy as np

BOX = (330.0, 330.0, 132.0)
NAMES = ("x", "y", "z", "ux", "uy", "uz", "energy")


def write_particles(path: str, n: int, seed: int = 2011) -> None:
    """Write ``n`` particles to ``path`` (HDF5, group ``/Step#0``).

    Examples
    --------
    >>> import tempfile, os, h5py
    >>> p = os.path.join(tempfile.mkdtemp(), "p.h5")
    >>> write_particles(p, 1000)
    >>> sorted(h5py.File(p)["Step#0"])
    ['energy', 'id', 'ux', 'uy', 'uz', 'x', 'y', 'z']
    """
    import h5py

    rng = np.random.default_rng(seed)
    x = rng.uniform(0, BOX[0], n)
    y = rng.uniform(0, BOX[1], n)
    z = rng.uniform(0, BOX[2], n)
    u = rng.normal(0.0, 0.25, (3, n))
    near_sheet = np.exp(-(((z - BOX[2] / 2) / 15.0) ** 2)) * (
        0.3 + 0.7 * np.exp(-(((x - BOX[0] / 2) / 40.0) ** 2))
    )
    hot = rng.random(n) < 0.08 * near_sheet
    k = int(hot.sum())
    direction = rng.normal(0.0, 1.0, (3, k))
    direction /= np.linalg.norm(direction, axis=0)
    u[:, hot] = direction * (rng.pareto(3.0, k) + 1.0) * 0.9
    energy = np.sqrt(1.0 + (u * u).sum(axis=0)) - 1.0
    with h5py.File(path, "w") as f:
        g = f.create_group("Step#0")
        for name, col in zip(NAMES, (x, y, z, u[0], u[1], u[2], energy), strict=True):
            g.create_dataset(name, data=col.astype(np.float32))
        g.create_dataset("id", data=rng.permutation(n).astype(np.int64))

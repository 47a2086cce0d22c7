"""``quarry demo``: generate a sample, index it, run the papers' queries, draw a histogram."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from quarry.dataset import Dataset


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``quarry demo``."""
    parser.add_argument("--dir", default="quarry-demo", help="where to put the sample and pictures")
    parser.add_argument("--rows", type=int, default=1 << 21, help="particles in the sample")


def run(args: argparse.Namespace) -> int:
    return run_demo(args.dir, args.rows)


def run_demo(directory: str, rows: int) -> int:

    import quarry
    from quarry.index.layout import index_size
    from quarry.sample import write_particles

    os.makedirs(directory, exist_ok=True)
    data = os.path.join(directory, "particles.h5")
    print(f"1. generating {rows:,} particles -> {data}")
    write_particles(data, rows)

    with quarry.open(data) as ds:
        start = time.perf_counter()
        manifest = ds.build_index()
        build = time.perf_counter() - start
        size = index_size(ds.index_path)
        raw = sum(v.size * v.dtype.itemsize for v in ds.variables())
        print(
            f"2. indexed {len(manifest.variables)} variables in {build:.2f} s "
            f"-> {ds.index_path} ({size / raw:.2f}x the raw data)"
        )

        queries = [
            "energy > 1.0",
            "1.5 < energy < 1.6",
            "0.2 < energy < 2.0 && 140 < x < 190 && 65 < y < 115 && 56 < z < 76",
            "ux*ux + uy*uy > 1.0",
        ]
        print(
            "3. queries, each checked against a NumPy scan of the same columns; times are\n"
            "   medians of 5 after a first run (which, on a file written moments before it\n"
            "   was indexed, also checks the columns' CRCs once: see README, 'What a changed\n"
            "   source does'). Quarry keeps the file and its index open; NumPy reads the\n"
            "   columns it needs from the file (in the page cache) each time"
        )
        print(f"   {'query':<70} {'hits':>8} {'quarry ms':>10} {'numpy ms':>9}")
        for q in queries:
            n, expect = ds.query(q).count(), _numpy_count(data, q)
            assert n == expect, (q, n, expect)
            took = _median_s(partial(_quarry_count, ds, q))
            scan = _median_s(partial(_numpy_count, data, q))
            print(f"   {q:<70} {n:>8,} {took * 1e3:>10.2f} {scan * 1e3:>9.2f}")

        hist = ds.histogram("energy", where="energy > 1.0", bins=50, range=(1.0, 16.0))
    picture = os.path.join(directory, "energy_hist.png")
    from quarry.outputs import OutputError
    from quarry.outputs.plots import draw_histogram

    title = f"energy of the {int(hist.counts.sum()):,} particles with energy > 1.0"
    try:
        draw_histogram(hist, picture, ["energy"], log=True, title=title)
    except OutputError as exc:
        print(f"4. no picture: {exc}")
        return 0
    print(f"4. histogram of the selection ({hist.path} path) -> {picture}")
    overlay = os.path.join(directory, "hot_particles.png")
    with quarry.open(data) as ds:
        everything = ds.histogram(["x", "z"], bins=80)
        hot = ds.query_table("energy > 1.0")
        from quarry.outputs.plots import draw_overlay

        draw_overlay(
            everything,
            (hot.values("x"), hot.values("z")),
            overlay,
            ["x", "z"],
            f"energy > 1.0: {hot.count():,} of {rows:,} particles",
        )
    print(f"5. the energetic particles over all of them (x, z) -> {overlay}")
    return 0


def _quarry_count(ds: Dataset, query: str) -> int:
    return ds.query(query).count()


def _median_s(run: Callable[[], int], repeat: int = 5) -> float:
    """The median wall time of ``run`` over ``repeat`` calls, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return sorted(times)[repeat // 2]


def _numpy_count(path: str, query: str) -> int:
    """The same query as a plain h5py read of just the columns it needs, then NumPy."""
    import h5py
    import numpy as np

    needs = {
        "energy > 1.0": ("energy",),
        "1.5 < energy < 1.6": ("energy",),
        "0.2 < energy < 2.0 && 140 < x < 190 && 65 < y < 115 && 56 < z < 76": (
            "energy",
            "x",
            "y",
            "z",
        ),
        "ux*ux + uy*uy > 1.0": ("ux", "uy"),
    }[query]
    with h5py.File(path, "r") as f:
        c = {k: f["Step#0"][k][()].astype(np.float64) for k in needs}
    if query == "energy > 1.0":
        mask = c["energy"] > 1.0
    elif query == "1.5 < energy < 1.6":
        mask = (c["energy"] > 1.5) & (c["energy"] < 1.6)
    elif query.startswith("0.2"):
        e, x, y, z = c["energy"], c["x"], c["y"], c["z"]
        mask = (
            (e > 0.2)
            & (e < 2.0)
            & (x > 140)
            & (x < 190)
            & (y > 65)
            & (y < 115)
            & (z > 56)
            & (z < 76)
        )
    else:
        mask = c["ux"] * c["ux"] + c["uy"] * c["uy"] > 1.0
    return int(mask.sum())

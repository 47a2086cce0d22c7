"""Opening benchmark: what opening a member costs beyond its query, in every format.

Issue 15's goal: opening a member of a series costs at most 0.5 ms beyond the query
itself, for HDF5 and the other formats. Measured as ``quarry.open(FILE)`` followed by a
count, less the same count on a Dataset already open (the median of each), for one small
indexed file per format: HDF5, NetCDF-4, Zarr, ADIOS2 BP5 and raw binary (described with
``quarry register``), each holding the same 1,000 float64 values. Two counts: one the
index answers alone (``energy > 1.0``, a bin edge), one that checks a boundary bin's rows
against the file (``energy > 1.0123``, so the file itself is opened and read). Every
count is checked against NumPy's first. Results go to ``benches/REPORT-opening.json``;
``benches/REPORT-opening.md`` is rendered from it (``--render`` re-renders only).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from timing import close_meta, header, log, machine, measure, ms, write_report

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT = os.path.join(REPO, "benches", "REPORT-opening.md")
RESULTS = os.path.join(REPO, "benches", "REPORT-opening.json")
N = 1000
GOAL_MS = 0.5
QUERIES = {"index": "{name} > 1.0", "checked": "{name} > 1.0123"}
FORMATS = ["hdf5", "netcdf", "zarr", "adios2", "raw"]


def write_files(directory: str, values: np.ndarray) -> dict[str, tuple[str, str]]:
    """One file per format holding ``values``: format -> (path, variable name)."""
    import h5py
    import netCDF4
    import zarr

    files: dict[str, tuple[str, str]] = {}
    path = os.path.join(directory, "p.h5")
    with h5py.File(path, "w") as f:
        f["energy"] = values
    files["hdf5"] = path, "energy"
    path = os.path.join(directory, "p.nc")
    with netCDF4.Dataset(path, "w") as f:
        f.createDimension("n", len(values))
        f.createVariable("energy", "f8", ("n",))[:] = values
    files["netcdf"] = path, "energy"
    path = os.path.join(directory, "p.zarr")
    zarr.open_group(path, mode="w").create_array("energy", data=values)
    files["zarr"] = path, "energy"
    import adios2

    path = os.path.join(directory, "p.bp")
    with adios2.Stream(path, "w") as stream:
        stream.begin_step()
        stream.write("energy", values, [len(values)], [0], [len(values)])
        stream.end_step()
    files["adios2"] = path, "energy"
    path = os.path.join(directory, "energy.bin")
    values.astype("<f8").tofile(path)
    register = ["register", path, "--dtype", "<f8", "--shape", str(len(values))]
    subprocess.run(
        [sys.executable, "-m", "quarry.cli.main", *register], check=True, capture_output=True
    )
    files["raw"] = path, "energy"
    return files


def measure_format(path: str, name: str, values: np.ndarray, runs: int) -> dict[str, Any]:
    import quarry

    with quarry.open(path) as ds:
        ds.build_index()
    out: dict[str, Any] = {}
    for label, text in QUERIES.items():
        query = text.format(name=name)
        want = int(np.count_nonzero(values > float(query.split(">")[1])))

        def fresh(query: str = query) -> int:
            with quarry.open(path) as ds:
                return int(ds.query(query).count())

        assert fresh() == want, (path, query)
        with quarry.open(path) as ds:
            count: Callable[[], object] = partial(lambda q: ds.query(q).count(), query)
            assert count() == want
            warm = measure(count, runs)
        cold = measure(fresh, runs)
        out[label] = {"query": query, "count": want, "warm": warm, "cold": cold}
    return out


def measure_all(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    meta = machine()
    values = np.random.default_rng(15).normal(1.0, 0.5, N)
    directory = tempfile.mkdtemp(prefix="quarry-opening-")
    try:
        files = write_files(directory, values)
        # Indexed past the freshness window after the writes: the index is then
        # trusted from the file's stat, as an index of a day-old file is.
        time.sleep(2.1)
        res: dict[str, Any] = {"n": N, "goal_ms": GOAL_MS, "formats": {}}
        for fmt in FORMATS:
            log(f"{fmt}: {args.runs} runs")
            path, name = files[fmt]
            res["formats"][fmt] = measure_format(path, name, values, args.runs)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    close_meta(meta, res, started)
    return res


def render(res: dict[str, Any]) -> str:
    meta, limit = res["meta"], res["meta"]["others_limit"]
    rows = []
    for fmt, by in res["formats"].items():
        for label, what in (("index", "index alone"), ("checked", "boundary rows checked")):
            m = by[label]
            opening = (m["cold"]["median"] - m["warm"]["median"]) * 1e3
            verdict = "met" if opening <= res["goal_ms"] else "**missed**"
            rows.append(
                f"| {fmt} | `{m['query']}` ({what}) | {ms(m['warm'], limit)} | "
                f"{ms(m['cold'], limit)} | {opening:.3f} | {verdict} |"
            )
    lines = [
        "# Opening a member: its cost beyond the query, per format",
        "",
        *header(meta),
        f"- Data: {res['n']:,} float64 values (normal, seed 15), one indexed file per "
        "format, the index past its freshness window (trusted from the file's stat)",
        "- Reproduce: `make bench`, or `python benches/opening.py [--runs R]`; `--render` "
        "rewrites this file from `benches/REPORT-opening.json`.",
        "",
        "Opening = median of `quarry.open(FILE)` + the count, less the median of the count "
        f"on the Dataset already open; the goal (issue 15) is at most {res['goal_ms']} ms. "
        "Every count was checked against NumPy's.",
        "",
        "| format | query | count, open Dataset (ms) | open + count (ms) | opening (ms) | goal |",
        "|---|---|---:|---:|---:|---|",
        *rows,
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--runs", type=int, default=201, help="timed runs per measurement")
    p.add_argument("--render", action="store_true", help="only re-render the report")
    args = p.parse_args(argv)
    return write_report(args.render, partial(measure_all, args), render, RESULTS, REPORT)


if __name__ == "__main__":
    sys.exit(main())

"""Opening benchmark: what opening a member costs beyond its query, in every format.

Issue 15's goal: opening a member of a series costs at most 0.5 ms beyond the query
itself, for HDF5 and the other formats. Measured as ``quarry.open(FILE)`` followed by a
count, less the same count on a Dataset already open (the median of each), for one small
indexed file per format: HDF5, NetCDF-4, Zarr, ADIOS2 BP5 and raw binary (described with
``quarry register``), each holding the same 1,000 float64 values. Two counts: one the
index answers alone (``energy > 1.0``, a bin edge), one that checks a boundary bin's rows
against the file (``energy > 1.0123``, so the file itself is opened and read). Every
count is checked against NumPy's first. Next to each, the plain program a scientist would
write for the same count, timed the same way: the format's own reader opens the file,
reads the variable and NumPy counts (h5py, netCDF4, zarr, adios2's FileReader,
``numpy.fromfile``). The HDF5 file is measured again with a reorganised copy of
the variable beside its index (``quarry reorg``), which every such count opens and
proves fresh before weighing it against the index. Results go to ``benches/REPORT-opening.json``;
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
FORMATS = ["hdf5", "hdf5 + copy", "netcdf", "zarr", "adios2", "raw"]


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
    # The same file with a reorganised copy beside its index (quarry reorg): a
    # query over the copy's variable opens the copy's manifest too.
    path = os.path.join(directory, "c.h5")
    shutil.copyfile(files["hdf5"][0], path)
    files["hdf5 + copy"] = path, "energy"
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


def read_plainly(fmt: str, path: str, name: str) -> np.ndarray:
    """The whole variable, read by the format's own library (what a script would do)."""
    if fmt.startswith("hdf5"):
        import h5py

        with h5py.File(path, "r") as f:
            return np.asarray(f[name][()])
    if fmt == "netcdf":
        import netCDF4

        with netCDF4.Dataset(path, "r") as f:
            variable = f.variables[name]
            variable.set_auto_mask(False)
            return np.asarray(variable[:])
    if fmt == "zarr":
        import zarr

        return np.asarray(zarr.open_array(os.path.join(path, name), mode="r")[:])
    if fmt == "adios2":
        import adios2

        with adios2.FileReader(path) as f:
            return np.asarray(f.read(name))
    return np.fromfile(path, "<f8")


def measure_format(fmt: str, path: str, name: str, values: np.ndarray, runs: int) -> dict[str, Any]:
    import quarry

    with quarry.open(path) as ds:
        ds.build_index()
        if fmt == "hdf5 + copy":
            ds.reorganize([name])
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
        cut = float(query.split(">")[1])

        def plain(cut: float = cut) -> int:
            return int(np.count_nonzero(read_plainly(fmt, path, name) > cut))

        assert plain() == want, (fmt, query)
        out[label] = {
            "query": query,
            "count": want,
            "warm": warm,
            "cold": cold,
            "plain": measure(plain, runs),
        }
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
            res["formats"][fmt] = measure_format(fmt, path, name, values, args.runs)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    close_meta(meta, res, started)
    return res


def render(res: dict[str, Any]) -> str:
    meta, limit = res["meta"], res["meta"]["others_limit"]
    rows, losses = [], []
    for fmt, by in res["formats"].items():
        for label, what in (("index", "index alone"), ("checked", "boundary rows checked")):
            m = by[label]
            opening = (m["cold"]["median"] - m["warm"]["median"]) * 1e3
            verdict = "met" if opening <= res["goal_ms"] else "**missed**"
            plain = m.get("plain")
            if plain is None:  # a report from before the plain reader was timed
                side = "| – | – "
            else:
                ratio = plain["median"] / m["cold"]["median"]
                side = f"| {ms(plain, limit)} | {ratio:.2g}x "
                if ratio < 1:
                    losses.append(f"{fmt} `{m['query']}` ({ratio:.2g}x)")
            rows.append(
                f"| {fmt} | `{m['query']}` ({what}) | {ms(m['warm'], limit)} | "
                f"{ms(m['cold'], limit)} | {opening:.3f} | {verdict} {side}|"
            )
    if losses:
        verdict_line = (
            "Where Quarry loses: a fresh open and count is slower than the format's own "
            f"reader reading all {res['n']:,} values and NumPy counting them in "
            + ", ".join(losses)
            + ": at this size the fixed costs of opening the index are the whole answer."
        )
    else:
        verdict_line = (
            f"A fresh open and count beats the format's own reader and NumPy in every row, "
            f"even at {res['n']:,} values."
        )
    lines = [
        "# Opening a member: its cost beyond the query, per format",
        "",
        *header(meta),
        f"- Data: {res['n']:,} float64 values (normal, seed 15), one indexed file per "
        "format (HDF5 a second time with a reorganised copy beside its index), the index "
        "past its freshness window (trusted from the file's stat)",
        "- Reproduce: `make bench`, or `python benches/opening.py [--runs R]`; `--render` "
        "rewrites this file from `benches/REPORT-opening.json`.",
        "",
        "Opening = median of `quarry.open(FILE)` + the count, less the median of the count "
        f"on the Dataset already open; the goal (issue 15) is at most {res['goal_ms']} ms. "
        "The plain program opens the file with the format's own library (h5py, netCDF4, "
        "zarr, adios2's FileReader, `numpy.fromfile`), reads the variable and counts with "
        "NumPy; ratio = its time over Quarry's open + count (below 1: the plain program "
        "is faster). Every count was checked against NumPy's.",
        "",
        "| format | query | count, open Dataset (ms) | open + count (ms) | opening (ms) | goal "
        "| plain program (ms) | ratio |",
        "|---|---|---:|---:|---:|---|---:|---:|",
        *rows,
        "",
        verdict_line,
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

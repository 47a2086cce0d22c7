"""Quarry benchmark: index build cost and query speed against the best plain NumPy
program for each answer, DuckDB and Polars, like for like.

One VPIC-like particle file (H5Part layout, ``/Step#0/x`` ...), seven float32 columns.
Six range queries, each for three outputs (count, ids, x,y,z values), compared under
three conditions:

- **warm**: Quarry's ``Dataset`` open (its index pages and plan cache warm) against
  NumPy with the needed columns already in memory (``np.count_nonzero(mask)``,
  ``np.flatnonzero``, boolean indexing); DuckDB on an in-memory table; Polars on an
  in-memory DataFrame.
- **cold open**: a fresh ``quarry.open`` per query against a fresh ``h5py.File`` open
  and read per query; DuckDB and Polars read a Parquet copy per query. The page cache
  is warm for every tool.
- **fresh process**: the whole ``quarry query --count`` process against a whole
  ``python -c`` NumPy process.

Quarry runs with 1 thread against single-threaded NumPy (and DuckDB at 1 thread); a
second table puts Quarry, DuckDB and Polars on all cores. The build is timed at 1 thread
and on all cores, and every query's break-even number (queries that repay the build)
is given. Every answer is checked against NumPy (float32 values compared as float64,
Quarry's documented semantics) before anything is timed; timings are never asserted.

Results go to ``benches/REPORT.json``; ``benches/REPORT.md`` is rendered from it::

    python benches/run.py                 # N = 16,777,216 particles
    python benches/run.py --n 1000000     # a quick run
    python benches/run.py --render        # re-render REPORT.md from REPORT.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from run_report import render
from timing import (
    close_meta,
    log,
    machine,
    make_data_script,
    measure,
    measure_process,
    write_report,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_DIR = os.path.join(REPO, "benches")
DATA_DIR = os.path.join(BENCH_DIR, "data")
REPORT = os.path.join(BENCH_DIR, "REPORT.md")
RESULTS = os.path.join(BENCH_DIR, "REPORT.json")

DEFAULT_N = 1 << 24
GROUP = "Step#0"
COLUMNS = ("x", "y", "z", "ux", "uy", "uz", "energy")
XYZ = ("x", "y", "z")
OUTPUTS = ("count", "ids", "values")

Columns = dict[str, np.ndarray]
Fns = dict[str, Callable[[], object]]


# -- queries -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    """One benchmark query: Quarry's text, the SQL ``WHERE`` (DuckDB, Polars), the
    columns it reads, and its NumPy mask (float32 columns: the timed baseline; float64
    columns: the oracle)."""

    label: str
    text: str
    sql: str
    columns: tuple[str, ...]
    mask: Callable[[Columns], np.ndarray]


def _box(c: Columns) -> np.ndarray:
    e, x, y, z = c["energy"], c["x"], c["y"], c["z"]
    return (
        (e > 0.2) & (e < 2.0) & (x > 140) & (x < 190) & (y > 65) & (y < 115) & (z > 56) & (z < 76)
    )


BOX = "0.2 < energy < 2.0 && 140 < x < 190 && 65 < y < 115 && 56 < z < 76"
BOX_SQL = (
    "energy > 0.2 AND energy < 2.0 AND x > 140 AND x < 190 AND y > 65 AND y < 115"
    " AND z > 56 AND z < 76"
)
QUERIES = (
    Query("energy > 1.0", "energy > 1.0", "energy > 1.0", ("energy",), lambda c: c["energy"] > 1.0),
    Query("energy > 0.3", "energy > 0.3", "energy > 0.3", ("energy",), lambda c: c["energy"] > 0.3),
    Query("energy > 0.1", "energy > 0.1", "energy > 0.1", ("energy",), lambda c: c["energy"] > 0.1),
    Query(
        "1.5 < energy < 1.6",
        "1.5 < energy < 1.6",
        "energy > 1.5 AND energy < 1.6",
        ("energy",),
        lambda c: (c["energy"] > 1.5) & (c["energy"] < 1.6),
    ),
    Query("box", BOX, BOX_SQL, ("energy", "x", "y", "z"), _box),
    Query(
        "ux*ux + uy*uy > 1.0",
        "ux*ux + uy*uy > 1.0",
        "ux*ux + uy*uy > 1.0",
        ("ux", "uy"),
        lambda c: c["ux"] * c["ux"] + c["uy"] * c["uy"] > 1.0,
    ),
)

# -- data ----------------------------------------------------------------------------------


def _rows(path: str) -> int | None:
    import h5py

    try:
        with h5py.File(path, "r") as f:
            return int(f[f"{GROUP}/energy"].shape[0])
    except (OSError, KeyError):
        return None


def ensure_particles(n: int, make_data: str | None) -> tuple[str, str]:
    """The particle file with ``n`` rows (reused when it exists), and how it was made."""
    os.makedirs(DATA_DIR, exist_ok=True)
    path = os.path.join(DATA_DIR, "particles.h5")
    source = "shared/bench/make_data.py" if make_data else "quarry.sample"
    if _rows(path) == n:
        return path, f"{source} (reused)"
    log(f"generating {n:,} particles with {source}")
    if make_data:
        subprocess.run([sys.executable, make_data, "particles", path, "--n", str(n)], check=True)
    else:
        from quarry.sample import write_particles

        write_particles(path, n)
    return path, source


def read_columns(path: str, names: Sequence[str]) -> Columns:
    import h5py

    with h5py.File(path, "r") as f:
        return {name: f[f"{GROUP}/{name}"][()] for name in names}


def ensure_parquet(h5path: str, n: int) -> str:
    """A Parquet copy (the 7 columns plus ``row``), pyarrow's default row groups."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = os.path.join(DATA_DIR, "particles.parquet")
    fresh = os.path.exists(path) and os.path.getmtime(path) >= os.path.getmtime(h5path)
    if fresh and pq.ParquetFile(path).metadata.num_rows == n:
        return path
    log("writing the Parquet copy")
    cols = read_columns(h5path, COLUMNS)
    cols["row"] = np.arange(n, dtype=np.int64)
    pq.write_table(pa.table(cols), path)
    return path


# -- the tools' programs -------------------------------------------------------------------


def numpy_warm(cols: Columns, q: Query) -> Fns:
    """The plain program on columns already in memory."""

    def values() -> list[np.ndarray]:
        m = q.mask(cols)
        return [cols[v][m] for v in XYZ]

    return {
        "count": lambda: np.count_nonzero(q.mask(cols)),
        "ids": lambda: np.flatnonzero(q.mask(cols)),
        "values": values,
    }


def numpy_cold(path: str, q: Query) -> Fns:
    """The plain program from a fresh h5py open: read what it needs, then as warm."""

    def values() -> list[np.ndarray]:
        cols = read_columns(path, tuple(dict.fromkeys((*q.columns, *XYZ))))
        m = q.mask(cols)
        return [cols[v][m] for v in XYZ]

    return {
        "count": lambda: np.count_nonzero(q.mask(read_columns(path, q.columns))),
        "ids": lambda: np.flatnonzero(q.mask(read_columns(path, q.columns))),
        "values": values,
    }


def quarry_fns(ds: Any, q: Query) -> Fns:
    """A fresh Selection per call on an open Dataset (its plan cache answers the
    parsing and planning after the first call)."""

    def values() -> list[np.ndarray]:
        sel = ds.query(q.text)
        return [sel.values(v) for v in XYZ]

    return {
        "count": lambda: ds.query(q.text).count(),
        "ids": lambda: ds.query(q.text).ids(),
        "values": values,
    }


def quarry_cold(path: str, q: Query) -> Fns:
    """A fresh ``quarry.open`` per call: opening, parsing and planning included."""
    import quarry

    def fresh(output: str) -> Callable[[], object]:
        def call() -> object:
            with quarry.open(path) as ds:
                return quarry_fns(ds, q)[output]()

        return call

    return {output: fresh(output) for output in OUTPUTS}


def jobs_of(tool: str) -> int | None:
    """Quarry's core threads while ``tool`` is measured: 1 for the ``_1`` tools, else all
    cores (set around a whole measurement, not per call, so its cost is not timed)."""
    return 1 if tool.endswith("_1") else None


def duckdb_fns(connect: Callable[[], Any], source: str, q: Query) -> Fns:
    """DuckDB SQL over ``source`` (a table or ``read_parquet(...)``); ``connect`` gives
    the connection per call (the same one when warm, a new one when cold)."""

    def run(sql: str) -> Any:
        return connect().execute(sql)

    return {
        "count": lambda: run(f"SELECT count(*) FROM {source} WHERE {q.sql}").fetchone()[0],
        "ids": lambda: run(f"SELECT row FROM {source} WHERE {q.sql} ORDER BY row").fetchnumpy()[
            "row"
        ],
        "values": lambda: run(f"SELECT x, y, z FROM {source} WHERE {q.sql}").fetchnumpy(),
    }


def duckdb_connection(threads: int, table: Any | None = None) -> Any:
    """A DuckDB connection on ``threads`` threads, with ``table`` (Arrow) loaded as ``p``."""
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    if table is not None:
        con.register("arrow_p", table)
        con.execute("CREATE TABLE p AS SELECT * FROM arrow_p")
        con.unregister("arrow_p")
    return con


def polars_fns(frame: Callable[[], Any], q: Query) -> Fns:
    """Polars on ``frame()`` (an in-memory DataFrame's lazy view, or ``scan_parquet``)."""
    import polars as pl

    cond = pl.sql_expr(q.sql)
    return {
        "count": lambda: frame().select(cond.sum()).collect().item(),
        "ids": lambda: frame().filter(cond).select("row").collect()["row"].to_numpy(),
        "values": lambda: frame().filter(cond).select(*XYZ).collect(),
    }


# -- checking ------------------------------------------------------------------------------


def columns_of(got: Any) -> Columns:
    """x, y, z of a tool's values output as NumPy arrays."""
    if isinstance(got, list):
        return dict(zip(XYZ, got, strict=True))
    return {v: np.asarray(got[v]) for v in XYZ}


def check(
    tool: str, q: Query, fns: Fns, ids: np.ndarray, natural: np.ndarray, xyz: Columns
) -> str | None:
    """Assert ``tool``'s three answers; returns a note when it follows float32 semantics
    (NumPy's own ``col > 1.0``) rather than Quarry's float64 comparison."""
    got_ids = np.asarray(fns["ids"]())
    count = int(fns["count"]())
    note = None
    want = ids
    if not np.array_equal(got_ids, ids):
        assert np.array_equal(got_ids, natural) and count == len(natural), (
            f"{tool} ids for {q.label} differ from NumPy"
        )
        want = natural
        note = f"{tool} compares `{q.label}` in float32 ({len(natural):,} hits, not {len(ids):,})."
    assert count == len(want), f"{tool} count for {q.label}: {count} != {len(want)}"
    got = columns_of(fns["values"]())
    for v in XYZ:
        assert np.array_equal(np.sort(got[v]), np.sort(xyz[v][want])), f"{tool} {v} {q.label}"
    return note


# -- measuring -----------------------------------------------------------------------------


def bench_build(path: str, n: int, runs: int) -> dict[str, Any]:
    """An h5py read of the 7 columns against ``build_index`` (defaults) at 1 thread and on
    all cores; the index's size against the raw bytes."""
    import quarry

    log("build: the h5py read of 7 columns")
    out: dict[str, Any] = {"read": measure(lambda: read_columns(path, COLUMNS), runs=runs)}
    with quarry.open(path) as ds:
        for label, jobs in (("build_1", 1), ("build_all", None)):
            log(f"build: build_index, {label}")
            with quarry.parallel.threads(jobs):
                out[label] = measure(lambda: ds.build_index(list(COLUMNS)), runs=3, warmup=0)
        out["index_bytes"] = os.path.getsize(ds.index_path)
    out["raw_bytes"] = len(COLUMNS) * n * 4
    return out


def bench_queries(
    path: str, parquet: str | None, runs: int, notes: list[str]
) -> list[dict[str, Any]]:
    """Every query under every condition; the answers checked first."""
    import quarry

    cols = read_columns(path, COLUMNS)
    xyz = {v: cols[v] for v in XYZ}
    competitors = parquet is not None
    if competitors:
        import polars as pl
        import pyarrow.parquet as pq

        table = pq.read_table(parquet)
        frame = pl.from_arrow(table)
        warm_db = {t: duckdb_connection(t, table) for t in (1, os.cpu_count() or 1)}
    rows: list[dict[str, Any]] = []
    with quarry.open(path) as ds:
        for q in QUERIES:
            ids = np.flatnonzero(q.mask({k: cols[k].astype(np.float64) for k in q.columns}))
            natural = np.flatnonzero(q.mask(cols))
            conditions: dict[str, dict[str, Fns]] = {
                "warm": {
                    "numpy": numpy_warm(cols, q),
                    "quarry_1": quarry_fns(ds, q),
                    "quarry_all": quarry_fns(ds, q),
                },
                "cold": {
                    "numpy": numpy_cold(path, q),
                    "quarry_1": quarry_cold(path, q),
                    "quarry_all": quarry_cold(path, q),
                },
            }
            if competitors:
                src = f"read_parquet('{parquet}')"
                for t, con in warm_db.items():
                    tag = "1" if t == 1 else "all"
                    conditions["warm"][f"duckdb_{tag}"] = duckdb_fns(lambda c=con: c, "p", q)
                    conditions["cold"][f"duckdb_{tag}"] = duckdb_fns(
                        lambda t=t: duckdb_connection(t), src, q
                    )
                conditions["warm"]["polars_all"] = polars_fns(frame.lazy, q)
                conditions["cold"]["polars_all"] = polars_fns(lambda: pl.scan_parquet(parquet), q)
            for condition, tools in conditions.items():
                for tool, fns in tools.items():
                    with quarry.parallel.threads(jobs_of(tool)):
                        note = check(f"{tool} ({condition})", q, fns, ids, natural, xyz)
                    if note and tool != "numpy" and condition == "warm":
                        notes.append(note)
            for output in OUTPUTS:
                row: dict[str, Any] = {
                    "query": q.label,
                    "output": output,
                    "hits": len(ids),
                    "float32_hits": len(natural),
                }
                for condition, tools in conditions.items():
                    row[condition] = {}
                    for tool, fns in tools.items():
                        with quarry.parallel.threads(jobs_of(tool)):
                            row[condition][tool] = measure(fns[output], runs=runs)
                log(
                    f"{q.label:<20} {output:<6} "
                    + " ".join(
                        f"{c}.{t}={m['median'] * 1e3:.2f}"
                        for c in conditions
                        for t, m in row[c].items()
                    )
                )
                rows.append(row)
    return rows


def bench_cli(path: str, expected: dict[str, tuple[int, int]], runs: int) -> dict[str, Any]:
    """Whole-process wall time: the quarry CLI (1 thread) against a NumPy one-liner."""
    out: dict[str, Any] = {}
    for q in (QUERIES[0], QUERIES[4]):
        cli = [sys.executable, "-m", "quarry.cli.main", "query", path, q.text, "--count"]
        cli += ["--json", "--jobs", "1"]
        reads = "; ".join(f"{c}=f['{GROUP}/{c}'][()]" for c in q.columns)
        mask = q.sql.replace(" AND ", ") & (")
        code = (
            f"import h5py, numpy as np; f=h5py.File({path!r}, 'r'); {reads}; "
            f"print(np.count_nonzero(({mask})))"
        )
        bare = [sys.executable, "-c", code]
        got = json.loads(subprocess.run(cli, check=True, capture_output=True, text=True).stdout)
        hits, float32_hits = expected[q.label]
        assert got["count"] == hits, (got, hits)
        printed = subprocess.run(bare, check=True, capture_output=True, text=True).stdout
        natural = int(printed)
        assert natural == float32_hits, (printed, float32_hits)
        out[q.label] = {
            "quarry": measure_process(cli, runs),
            "numpy": measure_process(bare, runs),
            "numpy_code": code.replace(repr(path), "P"),
            "numpy_count": natural,
        }
    out["imports"] = measure_process([sys.executable, "-c", "import numpy, h5py"], runs)
    return out


# -- main ----------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--n", type=int, default=DEFAULT_N, help="particles (default 2**24)")
    p.add_argument("--runs", type=int, default=7, help="timed runs per measurement")
    p.add_argument("--skip-competitors", action="store_true", help="NumPy and Quarry only")
    p.add_argument("--make-data", help="path of make_data.py (default: ../shared/bench)")
    p.add_argument("--render", action="store_true", help="only re-render REPORT.md")
    args = p.parse_args(argv)
    return write_report(args.render, partial(run, args), render, RESULTS, REPORT)


def run(args: argparse.Namespace) -> dict[str, Any]:
    # DuckDB compares FLOAT with a DECIMAL literal after a cast; the oracle check settles
    # what each answer means, so the cast's warnings are noise here.
    warnings.filterwarnings("ignore", "overflow encountered in cast", RuntimeWarning)
    started = time.perf_counter()
    meta = machine()
    path, source = ensure_particles(args.n, make_data_script(args.make_data))
    parquet = None if args.skip_competitors else ensure_parquet(path, args.n)
    res: dict[str, Any] = {"n": args.n, "data_source": source, "notes": []}
    res["build"] = bench_build(path, args.n, args.runs)
    res["rows"] = bench_queries(path, parquet, args.runs, res["notes"])
    log("fresh processes")
    hits = {r["query"]: (r["hits"], r["float32_hits"]) for r in res["rows"]}
    res["cli"] = bench_cli(path, hits, args.runs)
    close_meta(meta, res, started)
    return res


if __name__ == "__main__":
    sys.exit(main())

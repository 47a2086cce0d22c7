"""Parallel benchmark: build and query time with 1 and 2 threads, 1 and 2 MPI
ranks, on ``make_data.py particles --n 16777216`` and on 8 steps of it.

Each configuration is timed inside the processes, between barriers (MPI
start-up and imports are not counted; they are a constant of the launcher,
reported once). Parallel efficiency is ``T(1) / (p * T(p))`` from the same
run. Every configuration's answers are checked against the serial ones.
Per-block costs measured here feed the model of behaviour at 1,000+ ranks in
the report. Writes ``benches/REPORT-parallel.md``.

    python benches/parallel.py                 # the issue's sizes
    python benches/parallel.py --n 1048576     # a quick run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

import quarry
from run import log, machine  # benches/ is on the path
from series import ensure

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_DIR = os.path.join(REPO, "benches", "data")
REPORT = os.path.join(REPO, "benches", "REPORT-parallel.md")
BIN = os.path.dirname(sys.executable)
QUERIES = {
    "count energy > 1.0": ("count", "energy > 1.0"),
    "count box": ("count", "0.2 < energy < 2.0 && 140 < x < 190 && 65 < y < 115 && 56 < z < 76"),
    "ids energy > 0.3": ("ids", "energy > 0.3"),
    "values x,y,z of 1.5 < energy < 1.6": ("values", "1.5 < energy < 1.6"),
    "count ux*ux + uy*uy > 1.0 (scan)": ("count", "ux*ux + uy*uy > 1.0"),
}
CONFIGS = [(1, 1), (1, 2), (2, 1)]  # (ranks, threads per rank)


# -- the timed work, run in every rank ---------------------------------------------------


def worker(path: str, index: str, jobs: int, runs: int) -> None:
    """Build ``index`` for ``path`` and run the queries with this launch's
    ranks and ``jobs`` threads each; rank 0 prints one JSON line."""
    from quarry.parallel.mpi import world
    from quarry.parallel.query import answer_together
    from quarry.series import build_indexes

    comm = world()
    rank = 0 if comm is None else comm.rank

    def barrier() -> None:
        if comm is not None:
            comm.Barrier()

    result: dict[str, Any] = {"build_s": [], "queries": {}, "answers": {}}
    for _ in range(runs):
        barrier()
        t0 = time.perf_counter()
        with quarry.open_series(path, index=index, jobs=jobs) as series:
            list(build_indexes(series, force=True, comm=comm, ranks_per_file=comm and comm.size))
        barrier()
        result["build_s"].append(time.perf_counter() - t0)
    with quarry.open_series(path, index=index, jobs=jobs) as series:
        for label, (output, text) in QUERIES.items():
            times = []
            for k in range(runs + 1):  # the first is a warm-up
                barrier()
                t0 = time.perf_counter()
                selections = series.query(text).selections
                rows = output != "count"
                names = ["x", "y", "z"] if output == "values" else []
                if comm is not None:
                    selections = answer_together(comm, selections, rows, names)
                answer: Any = None
                if selections is not None:
                    if output == "count":
                        answer = [s.count() for s in selections]
                    else:
                        answer = [s.ids() for s in selections]
                        for s in selections:
                            for n in names:
                                s.values(n)
                barrier()
                if k:
                    times.append(time.perf_counter() - t0)
            result["queries"][label] = times
            if rank == 0:
                result["answers"][label] = (
                    answer if output == "count" else [int(a.sum()) for a in answer]
                )
    if rank == 0:
        result["index_bytes"] = sum(
            quarry.index.layout.index_size(os.path.join(index, f))
            for f in os.listdir(index)
            if f.endswith(".qidx")
        )
        print(json.dumps(result), flush=True)


# -- the driver ---------------------------------------------------------------------------


def run_config(path: str, ranks: int, jobs: int, runs: int) -> dict[str, Any]:
    index = os.path.join(DATA_DIR, f"parallel-idx-{ranks}r{jobs}t")
    shutil.rmtree(index, ignore_errors=True)
    os.makedirs(index)
    cmd = [sys.executable, __file__, "--worker", path, index, str(jobs), str(runs)]
    if ranks > 1:
        cmd = [os.path.join(BIN, "mpiexec"), "-n", str(ranks), *cmd]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{cmd} failed:\n{done.stdout}\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall_s"] = wall
    shutil.rmtree(index, ignore_errors=True)
    return result


def launcher_cost() -> float:
    """Seconds ``mpiexec -n 2`` takes to start Python with mpi4py and quarry."""
    cmd = [
        os.path.join(BIN, "mpiexec"),
        "-n",
        "2",
        sys.executable,
        "-c",
        "import quarry; from mpi4py import MPI; MPI.COMM_WORLD.Barrier()",
    ]
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def per_block(path: str) -> dict[str, float]:
    """Serial costs per block of the default length, for the scaling model:
    reading, indexing (one thread), writing; and the manifest's size and
    write time per block."""
    from quarry import _core
    from quarry.index.build import edges_of
    from quarry.index.options import BuildOptions

    opts = BuildOptions()
    with quarry.open(path) as ds, quarry.parallel.threads(1):
        var = ds.variable("energy", "Step#0")
        t0 = time.perf_counter()
        values = ds.driver.read(var.path, 0, opts.block_len)
        read = time.perf_counter() - t0
        edges = edges_of(ds.driver, var, opts)
        t0 = time.perf_counter()
        built = _core.build_blocks(np.ascontiguousarray(values), edges, opts.block_len)
        index = time.perf_counter() - t0
        n_vars = len(ds.index_variables())
    block_bytes = len(built[0][0])
    manifest_entry = len(json.dumps([[1, 123456789012, block_bytes]])) + len(" 4294967295,")
    return {
        "read_s": read,
        "index_s": index,
        "block_bytes": block_bytes,
        "raw_bytes": opts.block_len * values.dtype.itemsize,
        "manifest_bytes_per_block": manifest_entry,
        "variables": n_vars,
    }


#: Build options tried one at a time around the defaults (block length, bins).
SWEEP = [
    {"block_len": 1 << 18},
    {"block_len": 1 << 20},
    {"block_len": 1 << 22},
    {"bins": 256},
    {"bins": 4096},
]


def sweep(path: str, runs: int) -> list[dict[str, Any]]:
    """Build time, index size and query times for each option set in SWEEP
    (one process, all cores): the evidence for the defaults."""
    rows = []
    for options in SWEEP:
        index = os.path.join(DATA_DIR, "sweep.qidx")
        with quarry.open(path, index=index) as ds:
            builds = []
            for _ in range(runs):
                t0 = time.perf_counter()
                ds.build_index(**options)
                builds.append(time.perf_counter() - t0)
            size = quarry.index.layout.index_size(index)
            queries = {}
            for label, (output, text) in QUERIES.items():

                def once(text: str = text, output: str = output) -> None:
                    sel = ds.query(text, "Step#0")
                    if output == "count":
                        sel.count()
                    else:
                        sel.ids()
                        if output == "values":
                            for n in ("x", "y", "z"):
                                sel.values(n)

                once()
                times = []
                for _ in range(max(runs, 5)):
                    t0 = time.perf_counter()
                    once()
                    times.append(time.perf_counter() - t0)
                queries[label] = statistics.median(times)
        os.remove(index)
        rows.append(
            {
                "options": options,
                "build_s": statistics.median(builds),
                "bytes": size,
                "queries": queries,
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1 << 24, help="particles per step")
    p.add_argument("--steps", type=int, default=8, help="steps of the time-series set")
    p.add_argument("--runs", type=int, default=3, help="timed runs per configuration")
    p.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        path, index, jobs, runs = args.worker
        worker(path, index, int(jobs), int(runs))
        return 0
    started = time.time()
    sets = [ensure("particles", args.n, 1), ensure("particles", args.n, args.steps)]
    results: dict[str, dict[tuple[int, int], dict[str, Any]]] = {}
    for path, _ in sets:
        name = os.path.basename(path)
        results[name] = {}
        for ranks, jobs in CONFIGS:
            log(f"{name}: {ranks} rank(s) x {jobs} thread(s)")
            results[name][(ranks, jobs)] = run_config(path, ranks, jobs, args.runs)
        serial = results[name][(1, 1)]["answers"]
        for config, res in results[name].items():
            assert res["answers"] == serial, (name, config)
    costs = per_block(sets[0][0])
    log("tunables sweep")
    tunables = sweep(sets[0][0], args.runs)
    report = render(sets, results, costs, launcher_cost(), args, time.time() - started)
    report += render_sweep(tunables, os.path.basename(sets[0][0]))
    with open(REPORT, "w") as f:
        f.write(report)
    print(report)
    return 0


def _eff(base: float, t: float, p: int) -> str:
    return f"{base / (p * t):.2f}"


def render(
    sets: list[tuple[str, str]],
    results: dict[str, dict[tuple[int, int], dict[str, Any]]],
    costs: dict[str, float],
    launch: float,
    args: argparse.Namespace,
    elapsed: float,
) -> str:
    m = machine()
    lines = [
        "# Parallel build and query",
        "",
        f"Generated by `benches/parallel.py` on {time.strftime('%Y-%m-%d %H:%M')}, "
        f"in {elapsed / 60:.1f} min. Machine: {m['nproc']} cores ({m['cpu']}), "
        f"{m['memory']}. {m['versions']}; MPICH from the `mpich` wheel.",
        "",
        "Data: "
        + "; ".join(f"`{os.path.basename(p)}` ({src})" for p, src in sets)
        + f", {args.n:,} particles per step, 8 float32/int64 variables per step, "
        "default build options (1,048,576-row blocks, 1024 bins, precision 2).",
        "",
        "Each time is the median of "
        f"{args.runs} runs, measured inside the processes between barriers; "
        f"starting `mpiexec -n 2` with Python, mpi4py and quarry costs {launch:.2f} s "
        "on top, once per command. Efficiency = T(1 rank, 1 thread) / (p × T) with p "
        "= ranks × threads = 2; 1.00 is perfect. Every configuration's counts and "
        "id sums equal the serial run's.",
        "",
    ]
    for name, by_config in results.items():
        base = by_config[(1, 1)]
        lines += [
            f"## {name}",
            "",
            "| work | 1 rank × 1 thread | 1 rank × 2 threads | eff. | 2 ranks × 1 thread | eff. |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        rows = [("build (all steps, all variables)", "build_s")] + [
            (label, label) for label in QUERIES
        ]
        for label, key in rows:

            def t(res: dict[str, Any], key: str = key) -> float:
                data = res["build_s"] if key == "build_s" else res["queries"][key]
                return float(statistics.median(data))

            t1, t2, r2 = t(base), t(by_config[(1, 2)]), t(by_config[(2, 1)])
            unit = (lambda s: f"{s:.2f} s") if key == "build_s" else (lambda s: f"{s * 1e3:.1f} ms")
            lines.append(
                f"| {label} | {unit(t1)} | {unit(t2)} | {_eff(t1, t2, 2)} | {unit(r2)} | "
                f"{_eff(t1, r2, 2)} |"
            )
        lines.append("")
        sizes = {c: r["index_bytes"] for c, r in by_config.items()}
        lines.append(
            "Index bytes: "
            + ", ".join(f"{c[0]}r×{c[1]}t {s / 2**20:.1f} MiB" for c, s in sizes.items())
            + " (2 ranks write one shard each).",
        )
        lines.append("")
    lines += model(costs, results)
    return "\n".join(lines) + "\n"


def render_sweep(rows: list[dict[str, Any]], name: str) -> str:
    head = "| options | build | index size | " + " | ".join(QUERIES) + " |"
    lines = [
        "## Tunables",
        "",
        f"On `{name}`, one process on all cores, each option changed alone from the "
        "defaults (block_len 1,048,576, bins 1024, precision 2). Query times are medians "
        "of warm runs.",
        "",
        head,
        "|---|---:|---:|" + "---:|" * len(QUERIES),
    ]
    for row in rows:
        opts = ", ".join(f"{k}={v:,}" for k, v in row["options"].items())
        cells = " | ".join(f"{row['queries'][q] * 1e3:.1f} ms" for q in QUERIES)
        lines.append(
            f"| {opts} | {row['build_s']:.2f} s | {row['bytes'] / 2**20:.0f} MiB | {cells} |"
        )
    return "\n".join(lines) + "\n"


def model(costs: dict[str, float], results: dict[str, Any]) -> list[str]:
    """A model of build time at P ranks, from the per-block costs measured
    above: a model, not a measurement."""
    t_block = costs["read_s"] + costs["index_s"]
    return [
        "## Model: 1,000+ ranks (estimate, not a measurement)",
        "",
        "Measured per block of 1,048,576 float32 values, one thread: read "
        f"{costs['read_s'] * 1e3:.1f} ms (page cache), index "
        f"{costs['index_s'] * 1e3:.1f} ms; the block's index is "
        f"{costs['block_bytes'] / 2**20:.2f} MiB and its manifest entry about "
        f"{costs['manifest_bytes_per_block']:.0f} bytes (span and CRC).",
        "",
        "A build at P ranks of a file with B blocks takes about",
        "",
        "    T(P) = ceil(B / P) × (t_index + t_read(P)) + t_gather(P) + t_manifest(B)",
        "",
        "- Indexing is block-local, with no communication while ranks work; the "
        "only collective calls are one broadcast (the build's name) and one gather "
        "plus one broadcast at the end of each file.",
        "- t_read(P): reading dominates at scale. Each rank reads "
        f"{costs['raw_bytes'] / 2**20:.0f} MiB per block; with a parallel file system "
        "of aggregate bandwidth W, t_read(P) ≥ P × 4 MiB / W per round of blocks. At W = "
        "100 GB/s, rounds of 1,000 ranks need ≥ 42 ms of reading per block against "
        f"{costs['index_s'] * 1e3:.0f} ms of indexing: the build is I/O bound beyond "
        f"about {int(100e9 / (costs['raw_bytes'] / max(costs['index_s'], 1e-9))):,} "
        "ranks at that bandwidth.",
        "- t_gather(P): rank 0 receives each rank's spans (about "
        f"{costs['manifest_bytes_per_block']:.0f} bytes per block) and one copy of "
        "each variable's edges; for B = 250,000 blocks (a 1 TB file of float32 in "
        "4 MiB blocks) that is about "
        f"{250_000 * costs['manifest_bytes_per_block'] / 2**20:.0f} MiB, gathered in "
        "O(log P) steps: well under a second on an HPC network.",
        "- t_manifest(B): rank 0 writes one JSON manifest of the same size, atomically; "
        "at 250,000 blocks it is about the gather's size, a fraction of a second.",
        "- With B / P ≥ 1 each rank does ceil(B/P) blocks, so a 1 TB file "
        f"(250,000 blocks, {t_block * 1e3:.0f} ms each here) on 1,000 ranks is about "
        f"{250 * t_block:.0f} s of per-rank work before I/O limits; with more ranks "
        "than blocks the extra ranks idle, so smaller blocks or more files "
        "(--ranks-per-file) are the knob.",
        "- Queries scale the same way: blocks are shared out (each rank reads and "
        "scans only its own rows), counts are one reduce of a few integers, hits "
        "travel as compressed bitmaps. What grows with P is the gather of hits to "
        "rank 0: ids and values of a large selection are better written per rank "
        "(--out-per-rank) at scale.",
        "",
    ]


if __name__ == "__main__":
    sys.exit(main())

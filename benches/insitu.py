"""In-situ indexing: issue 14's benchmark.

A producer writes ``--steps`` steps of ``--n`` particles (7 float32 variables, H5Part
``/Step#<s>/<name>`` in one HDF5 file), spending a fixed ``--compute`` seconds per step
before writing it (a stand-in for the simulation: it sleeps, so it leaves the cores to
the indexer, as a code waiting on its accelerator or its MPI neighbours would).

- write alone; write with :class:`quarry.InSituIndexer`; write, then ``quarry index``
  (the Python build, in the same process) afterwards: wall times, the overhead of
  in-situ indexing over writing alone, and the ingest+index rate (raw bytes over wall
  time, and per core).
- how long after the file is closed the in-situ index is published (what closing the
  indexer takes), against one step's time.
- ``--follow`` latency: a BP5 writer process ends a step (stamping the time), the
  follower (a thread of this process, :func:`quarry.insitu.follow_bp.follow_bp`)
  publishes its index (stamping the time); median and max over the steps.

Every index is checked against NumPy on one query. Results go to
``benches/REPORT-insitu.json``; ``benches/REPORT-insitu.md`` is rendered from it
(``--render`` re-renders only).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

import h5py
import numpy as np

from timing import close_meta, header, log, machine, measure, seconds, write_report

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT = os.path.join(REPO, "benches", "REPORT-insitu.md")
RESULTS = os.path.join(REPO, "benches", "REPORT-insitu.json")
NAMES = ("x", "y", "z", "ux", "uy", "uz", "energy")
STEPS, N, COMPUTE = 16, 1 << 20, 0.25
GOAL_MB_S_PER_CORE = 100.0

WRITER = f"""
import sys, time, adios2, numpy as np
path, steps, n, compute = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
rng = np.random.default_rng(0)
pool = [rng.normal(0, 1, n).astype(np.float32) for _ in range(7)]
with adios2.Stream(path, "w") as s:
    for step in range(steps):
        time.sleep(compute)
        s.begin_step()
        for k, name in enumerate({NAMES!r}):
            s.write(name, pool[(k + step) % 7], [n], [0], [n])
        s.end_step()
        print(step, time.time(), flush=True)
"""


def step_pool(n: int) -> list[np.ndarray]:
    """Distinct float32 columns the steps cycle through (made once, outside the timing)."""
    rng = np.random.default_rng(1)
    return [rng.normal(0.0, 1.0, n).astype(np.float32) for _ in range(len(NAMES) + 3)]


def produce(path: str, steps: int, compute: float, pool: list[np.ndarray], indexed: bool) -> float:
    """Run the producer; returns the seconds closing the indexer took (0 without one)."""
    import quarry

    ix = quarry.InSituIndexer(path) if indexed else None
    with h5py.File(path, "w") as f:
        for step in range(steps):
            time.sleep(compute)
            arrays = {name: pool[(k + step) % len(pool)] for k, name in enumerate(NAMES)}
            for name, values in arrays.items():
                f.create_dataset(f"Step#{step}/{name}", data=values)
            if ix is not None:
                ix.add(step, arrays)
    if ix is None:
        return 0.0
    start = time.perf_counter()
    ix.close()
    return time.perf_counter() - start


def index_afterwards(path: str) -> None:
    import quarry

    with quarry.open(path) as ds:
        ds.build_index()


def check(path: str, steps: int, pool: list[np.ndarray]) -> None:
    import quarry

    with quarry.open_series(path) as series:
        got = [r["count"] for r in series.query("energy > 1.5").per_step()]
    want = [int((pool[(6 + s) % len(pool)] > 1.5).sum()) for s in range(steps)]
    assert got == want, (got, want)


def follow_latency(work: str, steps: int, n: int, compute: float) -> dict[str, Any]:
    """Seconds from the BP5 writer ending a step to the follower publishing its index
    (the follower's imports done before the writer starts, as a follower started ahead
    of its run has them: a step's latency, not the follower's start)."""
    import adios2  # noqa: F401  (follow_bp imports it when called)

    from quarry.insitu.follow_bp import follow_bp

    path = os.path.join(work, "run.bp")
    published: dict[int, float] = {}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, path, str(steps), str(n), str(compute)],
        stdout=subprocess.PIPE,
        text=True,
    )
    follower = threading.Thread(
        target=follow_bp,
        args=(path,),
        kwargs={"idle_timeout": 30.0, "published": lambda s: published.setdefault(s, time.time())},
    )
    follower.start()
    ended = {}
    assert writer.stdout is not None
    for line in writer.stdout:
        step, stamp = line.split()
        ended[int(step)] = float(stamp)
    writer.wait()
    follower.join()
    latencies = [published[s] - ended[s] for s in sorted(ended)]
    return {
        "steps": steps,
        "median_s": float(np.median(latencies)),
        "max_s": float(np.max(latencies)),
        "latencies_s": latencies,
    }


def measure_all(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    meta = machine()
    work = tempfile.mkdtemp(prefix="quarry-insitu-bench-", dir=args.data_dir)
    path = os.path.join(work, "run.h5")
    pool = step_pool(args.n)
    closing: list[float] = []
    try:
        log("write alone")
        alone = measure(partial(produce, path, args.steps, args.compute, pool, False), args.runs, 0)
        log("write with InSituIndexer")

        def in_situ() -> None:
            closing.append(produce(path, args.steps, args.compute, pool, True))

        def first_run() -> None:  # a new run's file has no index beside it yet
            for name in os.listdir(work):
                if name.startswith("run.h5.qidx"):
                    os.unlink(os.path.join(work, name))

        insitu = measure(in_situ, args.runs, 0, setup=first_run)
        check(path, args.steps, pool)
        log("a rerun, whose index replaces the last run's")
        replacing = [produce(path, args.steps, args.compute, pool, True) for _ in range(3)]
        check(path, args.steps, pool)
        index_bytes = os.path.getsize(path + ".qidx")
        log("quarry index afterwards")
        produce(path, args.steps, args.compute, pool, False)
        afterwards = measure(partial(index_afterwards, path), args.runs, 0)
        check(path, args.steps, pool)
        log("--follow latency")
        follow = follow_latency(work, args.steps, args.n, args.compute)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    res: dict[str, Any] = {
        "config": {"steps": args.steps, "n": args.n, "compute_s": args.compute, "vars": 7},
        "raw_bytes": args.steps * args.n * 4 * len(NAMES),
        "write": alone,
        "in_situ": insitu,
        "index_afterwards": afterwards,
        "close_s": sorted(closing)[len(closing) // 2],
        "close_replacing_s": sorted(replacing)[len(replacing) // 2],
        "index_bytes": index_bytes,
        "close_reads_back": True,  # closing checks the file's values (reports before did not)
        "follow": follow,
    }
    close_meta(meta, res, started)
    return res


def render(res: dict[str, Any]) -> str:
    meta, limit = res["meta"], res["meta"]["others_limit"]
    cfg, mb = res["config"], res["raw_bytes"] / 1e6
    read_back = (
        "the file's values read back and checked against the CRCs of those handed, "
        if res.get("close_reads_back")
        else ""
    )
    alone, insitu, after = res["write"], res["in_situ"], res["index_afterwards"]
    overhead = (insitu["median"] / alone["median"] - 1) * 100
    then = alone["median"] + after["median"]
    rate = mb / insitu["median"]
    per_core = rate / meta["cores"]
    step_s = alone["median"] / cfg["steps"]
    follow = res["follow"]
    ingest = mb / (insitu["median"] - cfg["steps"] * cfg["compute_s"])
    lines = [
        "# In-situ indexing (issue 14)",
        "",
        *header(meta),
        f"- Scaled down from the issue's 16 steps of 4,194,304 particles to fit these "
        f"shared cores: {cfg['steps']} steps of {cfg['n']:,} particles, {cfg['vars']} "
        f"float32 variables ({mb:,.0f} MB raw), {cfg['compute_s']} s of compute per step "
        "(a sleep, which leaves the cores to the indexer).",
        "",
        "| producer | wall (s) |",
        "|---|---:|",
        f"| write alone | {seconds(alone, limit)} |",
        f"| write with InSituIndexer | {seconds(insitu, limit)} |",
        f"| `quarry index` afterwards (alone) | {seconds(after, limit)} |",
        f"| write, then `quarry index` | {then:.2f} |",
        "",
        f"- Overhead of in-situ indexing over writing alone: {overhead:+.1f} %; writing then "
        f"indexing afterwards takes {then / insitu['median']:.2f}x the in-situ run.",
        f"- Ingest+index rate: {ingest:,.0f} MB/s over the time not spent computing "
        f"({ingest / meta['cores']:,.0f} MB/s per core on {meta['cores']} cores), "
        f"{rate:,.0f} MB/s over the whole run, whose compute is a sleep "
        f"({per_core:,.0f} MB/s per core). Goal: {GOAL_MB_S_PER_CORE:.0f} MB/s per core: "
        f"{'met' if ingest / meta['cores'] >= GOAL_MB_S_PER_CORE else 'not met'} over the "
        "time not spent computing.",
        f"- `quarry index` alone builds at {mb / after['median']:,.0f} MB/s on these cores "
        f"(other processes used up to {meta['others_max']:.1f} of the {meta['cores']} "
        "cores): in-situ indexing cannot ingest faster than the build runs, and hides it "
        "only where the producer leaves the cores idle.",
        f"- The index is published {res['close_s']:.2f} s after the file is closed (closing "
        f"the indexer: the last batch, {read_back}the blocks put in the file's order, the "
        f"fingerprint and its racy window); one step takes {step_s:.2f} s: "
        f"{'within' if res['close_s'] <= step_s else 'more than'} one step's time.",
        *(
            [
                f"- A rerun over the same file, whose index replaces the last run's: "
                f"{res['close_replacing_s']:.2f} s (median of 3; the file system frees "
                f"the old index, {res['index_bytes'] / 1e6:,.0f} MB, as the new one is "
                "renamed over it): "
                f"{'within' if res['close_replacing_s'] <= step_s else 'more than'} "
                "one step's time."
            ]
            if "close_replacing_s" in res
            else []
        ),
        f"- `--follow` latency, a BP5 writer ending a step to its index being published: "
        f"median {follow['median_s']:.3f} s, max {follow['max_s']:.3f} s over "
        f"{follow['steps']} steps.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--steps", type=int, default=STEPS)
    p.add_argument("--n", type=int, default=N, help="particles per step (default 1,048,576)")
    p.add_argument("--compute", type=float, default=COMPUTE, help="seconds per step")
    p.add_argument("--runs", type=int, default=3, help="timed runs per measurement")
    p.add_argument("--data-dir", help="scratch directory (default: under the system's temp)")
    p.add_argument("--render", action="store_true", help="only re-render the report")
    args = p.parse_args(argv)
    return write_report(args.render, partial(measure_all, args), render, RESULTS, REPORT)


if __name__ == "__main__":
    sys.exit(main())

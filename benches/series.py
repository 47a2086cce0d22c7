"""Time-series benchmark: halo counts per step, the 400-slice core per step, per-step
counts and particle tracking, each against the best plain NumPy program for the answer.

Data: ``make_data.py beam --steps 8`` and ``make_data.py particles --steps 4`` (the
shared generator when present; a small built-in one of the same layout otherwise).

Two conditions, both at 1 thread (NumPy is single-threaded):

- **warm**: the series open in Quarry against NumPy with every step's columns in memory;
  NumPy's slices are ``np.histogram(t, 400, range=...)`` per step, its tracking an
  inverse index (``inv[id] = row``) per step, built once and counted as a one-off.
- **cold open**: a fresh ``open_series`` per call against a fresh ``h5py.File`` read per
  call (the page cache warm for both); NumPy's inverse indexes are then built per call.

Last come many small steps: a box per step over 720 steps of 2,000 particles, with the
index alone and with a reorganised copy beside it, where the fixed costs of each step
are the whole answer; and one table of 2,000 particles queried 720 times in a loop, the
same box each time and a new box each time (warm only).

One-off costs (Quarry's index builds, the derived ``r``, NumPy's inverse indexes) are
timed and given with the number of calls that repay them. Every answer is checked
against NumPy first. Results go to ``benches/REPORT-series.json``;
``benches/REPORT-series.md`` is rendered from it (``--render`` re-renders only).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from timing import (
    break_even,
    close_meta,
    header,
    log,
    machine,
    make_data_script,
    measure,
    ms,
    ratio,
    write_report,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_DIR = os.path.join(REPO, "benches", "data")
REPORT = os.path.join(REPO, "benches", "REPORT-series.md")
RESULTS = os.path.join(REPO, "benches", "REPORT-series.json")
HALO = "r > 4*sqrt(std(x)**2 + std(y)**2)"
SLICES = 400
COUNT_QUERY = "energy > 2"
TRACK_QUERY = "energy > 3"
#: Many small steps: a box per step over 720 steps of 2,000 particles, where fixed
#: costs per step (names, plans, the index's columns) are the whole answer.
SMALL_STEPS, SMALL_ROWS = 720, 2000
SMALL_BOX = "1.2 < energy < 1.3 && 140 < x < 150"


def _shape(path: str) -> tuple[int, int] | None:
    import h5py

    try:
        with h5py.File(path, "r") as f:
            return len(f), int(f["Step#0/x"].shape[0])
    except (OSError, KeyError):
        return None


def ensure(
    kind: str, n: int, steps: int, make_data: str | None, data_dir: str = DATA_DIR
) -> tuple[str, str]:
    """The data file in ``data_dir`` (reused when it has the right size) and how it was made."""
    os.makedirs(data_dir, exist_ok=True)
    path = os.path.join(data_dir, f"{kind}_s{steps}.h5")
    source = "shared/bench/make_data.py" if make_data else "built-in generator"
    if _shape(path) == (steps, n):
        return path, f"{source} (reused)"
    log(f"generating {kind} with {steps} steps of {n:,} with {source}")
    if make_data:
        cmd = [sys.executable, make_data, kind, path, "--n", str(n), "--steps", str(steps)]
        subprocess.run(cmd, check=True)
    else:
        _generate(kind, path, n, steps)
    return path, source


def _generate(kind: str, path: str, n: int, steps: int) -> None:
    import h5py

    with h5py.File(path, "w") as f:
        for s in range(steps):
            rng = np.random.default_rng([s, 7])
            g = f.create_group(f"Step#{s}")
            if kind == "beam":
                x, y = rng.normal(0, 1e-4, n), rng.normal(0, 1.2e-4, n)
                halo = rng.random(n) < 5e-4 * (1 + s)
                x[halo] *= 6
                g["x"], g["y"], g["t"] = x, y, rng.normal(1e-9, 2e-12, n)
            else:
                g["id"] = rng.permutation(n).astype(np.int64)
                g["x"] = rng.uniform(0, 330, n).astype("f4")
                g["energy"] = rng.exponential(0.4, n).astype("f4")


def read_steps(path: str, names: Sequence[str]) -> list[dict[str, np.ndarray]]:
    """Every step's ``names`` columns, read through one fresh h5py open."""
    import h5py

    with h5py.File(path, "r") as f:
        return [{v: f[f"Step#{s}/{v}"][()] for v in names} for s in range(len(f))]


def timed_build(path: str, **options: Any) -> float:
    """Seconds of one index build of ``path`` at 1 thread, from no index (a rebuild
    would keep the derived variables of an old one)."""
    import quarry

    with quarry.open(path) as ds:
        index = ds.index_path
    if os.path.exists(index):
        os.remove(index)
    with quarry.open(path) as ds, quarry.parallel.threads(1):
        t0 = time.perf_counter()
        ds.build_index(**options)
        return time.perf_counter() - t0


class Workload:
    """One workload: NumPy's answer from columns in memory (``numpy``) or from the file
    (``numpy_cold``), Quarry's from an open series (``quarry``) or a fresh one."""

    def __init__(self, path: str, query: Callable[[Any], Any]) -> None:
        self.path = path
        self.query = query

    def quarry_warm(self, series: Any) -> Callable[[], Any]:
        return lambda: self.query(series)

    def quarry_cold(self) -> Callable[[], Any]:
        import quarry

        def call() -> Any:
            with quarry.open_series(self.path) as series:
                return self.query(series)

        return call


def halo_numpy(steps: list[dict[str, np.ndarray]]) -> list[int]:
    """The halo counts, with ``r`` from memory when a step has it (warm), else computed."""
    counts = []
    for c in steps:
        x, y = c["x"], c["y"]
        cut = 4 * np.sqrt(x.std() ** 2 + y.std() ** 2)
        r = c["r"] if "r" in c else np.sqrt(x * x + y * y)
        counts.append(int(np.count_nonzero(r > cut)))
    return counts


def slice_bounds(path: str) -> tuple[float, list[tuple[float, float]]]:
    """The slice width ``d`` (std(t) of step 0 / 100) and the 400 slices' offsets."""
    import h5py

    with h5py.File(path, "r") as f:
        d = float(f["Step#0/t"][()].std()) / 100
    return d, [((k - 200) * d, (k - 199) * d) for k in range(SLICES)]


def slices_exact(t: np.ndarray, mean: float, d: float) -> list[int]:
    """Exact counts of ``mean + (k-200)*d <= t < mean + (k-199)*d``: the same edges in
    the same float64 arithmetic as the query, counted on the sorted values."""
    edges = mean + np.arange(-200, 201) * d
    pos = np.searchsorted(np.sort(t), edges, side="left")
    return [int(c) for c in np.diff(pos)]


def slices_numpy(steps: list[dict[str, np.ndarray]], d: float) -> list[list[int]]:
    """What a scientist writes: one ``np.histogram`` per step over the core's range."""
    out = []
    for c in steps:
        t = c["t"]
        m = t.mean()
        hist, _ = np.histogram(t, SLICES, range=(m - 200 * d, m + 200 * d))
        out.append([int(k) for k in hist])
    return out


def inverse_index(ids: np.ndarray) -> np.ndarray:
    """``inv[id] = row`` (-1 where an id is absent): the tracking lookup table."""
    inv = np.full(int(ids.max()) + 1, -1, dtype=np.int64)
    inv[ids] = np.arange(len(ids), dtype=np.int64)
    return inv


def track_numpy(steps: list[dict[str, np.ndarray]], invs: list[np.ndarray]) -> list[np.ndarray]:
    e0, id0 = steps[0]["energy"], steps[0]["id"]
    chosen = id0[e0 > 3]
    return [c["energy"][inv[chosen]] for c, inv in zip(steps, invs, strict=True)]


def bench_beam(path: str, runs: int) -> dict[str, Any]:
    import quarry

    out: dict[str, Any] = {"build_plain_s": timed_build(path)}
    out["build_s"] = timed_build(path, derive=["r=sqrt(x**2 + y**2)"])
    log("beam: halo")
    cols = read_steps(path, ("x", "y", "t"))
    out["steps"] = len(cols)
    t0 = time.perf_counter()
    for c in cols:
        c["r"] = np.sqrt(c["x"] * c["x"] + c["y"] * c["y"])
    out["numpy_r_s"] = time.perf_counter() - t0
    halo = Workload(path, lambda series: series.query(HALO).counts())
    d, bounds = slice_bounds(path)
    queries = [f"mean(t) + {lo!r} <= t && t < mean(t) + {hi!r}" for lo, hi in bounds]
    core = Workload(path, lambda series: [sel.counts() for sel in series.query_many(queries)])
    with quarry.open_series(path) as series, quarry.parallel.threads(1):
        want = halo_numpy(cols)
        assert halo.quarry_warm(series)() == want == halo.quarry_cold()()
        out["halo_counts"] = want
        out["halo"] = {
            "numpy": measure(lambda: halo_numpy(cols), runs),
            "quarry": measure(halo.quarry_warm(series), runs),
            "numpy_cold": measure(lambda: halo_numpy(read_steps(path, ("x", "y"))), runs),
            "quarry_cold": measure(halo.quarry_cold(), runs),
        }
        log("beam: slices")
        got = core.quarry_warm(series)()
        means = [sel.aggregates[0].value for _, sel in series.query("t > mean(t)")]
        for s, c in enumerate(cols):
            assert [row[s] for row in got] == slices_exact(c["t"], means[s], d), s
        hist = slices_numpy(cols, d)
        exact = [slices_exact(c["t"], float(c["t"].mean()), d) for c in cols]
        out["histogram_differs"] = sum(
            a != b for h, e in zip(hist, exact, strict=True) for a, b in zip(h, e, strict=True)
        )
        out["means_differ"] = sum(
            m != float(c["t"].mean()) for m, c in zip(means, cols, strict=True)
        )
        out["slices_in_core"] = sum(sum(row) for row in got)
        few = max(3, runs // 2)
        out["slices"] = {
            "numpy": measure(lambda: slices_numpy(cols, d), few),
            "quarry": measure(core.quarry_warm(series), few),
            "numpy_cold": measure(lambda: slices_numpy(read_steps(path, ("t",)), d), few),
            "quarry_cold": measure(core.quarry_cold(), few),
        }
    return out


def bench_particles(path: str, runs: int) -> dict[str, Any]:
    import quarry

    out: dict[str, Any] = {"build_s": timed_build(path)}
    cols = read_steps(path, ("id", "energy"))
    out["steps"] = len(cols)
    log("particles: counts")

    def counts_numpy(steps: list[dict[str, np.ndarray]]) -> list[int]:
        return [int(np.count_nonzero(c["energy"] > 2)) for c in steps]

    counts = Workload(path, lambda series: series.query(COUNT_QUERY).counts())

    def track(series: Any) -> list[np.ndarray]:
        tracks = series.track(TRACK_QUERY, 0, "id", ["energy"])
        return [s.values["energy"] for s in tracks.steps]

    tracking = Workload(path, track)
    t0 = time.perf_counter()
    invs = [inverse_index(c["id"]) for c in cols]
    out["inverse_s"] = time.perf_counter() - t0

    def track_cold() -> list[np.ndarray]:
        steps = read_steps(path, ("id", "energy"))
        return track_numpy(steps, [inverse_index(c["id"]) for c in steps])

    with quarry.open_series(path) as series, quarry.parallel.threads(1):
        want = counts_numpy(cols)
        assert counts.quarry_warm(series)() == want == counts.quarry_cold()()
        out["per_step_counts"] = want
        out["counts"] = {
            "numpy": measure(lambda: counts_numpy(cols), runs),
            "quarry": measure(counts.quarry_warm(series), runs),
            "numpy_cold": measure(lambda: counts_numpy(read_steps(path, ("energy",))), runs),
            "quarry_cold": measure(counts.quarry_cold(), runs),
        }
        log("particles: tracking")
        expected = track_numpy(cols, invs)
        for got in (tracking.quarry_warm(series)(), tracking.quarry_cold()(), track_cold()):
            for a, b in zip(got, expected, strict=True):
                np.testing.assert_array_equal(a, b.astype(np.float64))
        out["tracked"] = len(expected[0])
        out["track"] = {
            "numpy": measure(lambda: track_numpy(cols, invs), runs),
            "quarry": measure(tracking.quarry_warm(series), runs),
            "numpy_cold": measure(track_cold, runs),
            "quarry_cold": measure(tracking.quarry_cold(), runs),
        }
    return out


def bench_small_steps(directory: str, runs: int) -> dict[str, Any]:
    """A box per step over many small steps, with the index alone and with a
    reorganised copy beside it (each a file of its own, written here)."""
    import shutil

    import h5py

    import quarry

    rng = np.random.default_rng(11)
    plain, copied = (os.path.join(directory, f"small_{k}.h5") for k in ("index", "copy"))
    with h5py.File(plain, "w") as f:
        for step in range(SMALL_STEPS):
            f[f"Step#{step}/energy"] = rng.exponential(1.0, SMALL_ROWS).astype("f4")
            f[f"Step#{step}/x"] = rng.uniform(0, 300, SMALL_ROWS).astype("f4")
    shutil.copyfile(plain, copied)
    # Indexed past the freshness window after the writes, as a day-old file is.
    time.sleep(2.1)
    builds = {}
    with quarry.parallel.threads(1):
        for label, path in (("index", plain), ("copy", copied)):
            t0 = time.perf_counter()
            with quarry.open(path) as ds:
                ds.build_index()
                if label == "copy":
                    ds.reorganize(["energy", "x"], bin_size=[0.1, 10.0])
            builds[label] = time.perf_counter() - t0

    def read_cols() -> list[dict[str, np.ndarray]]:
        return read_steps(plain, ("energy", "x"))

    def counts_numpy(steps: list[dict[str, np.ndarray]]) -> list[int]:
        return [
            int(np.count_nonzero((e > 1.2) & (e < 1.3) & (x > 140) & (x < 150)))
            for e, x in ((c["energy"], c["x"]) for c in steps)
        ]

    cols = read_cols()
    want = counts_numpy(cols)
    out: dict[str, Any] = {
        "steps": SMALL_STEPS,
        "rows": SMALL_ROWS,
        "hits": sum(want),
        "build_s": builds,
    }
    for label, path in (("index", plain), ("copy", copied)):
        log(f"small steps: {label}")
        work = Workload(path, lambda series: series.query(SMALL_BOX).counts())
        with quarry.open_series(path) as series, quarry.parallel.threads(1):
            assert work.quarry_warm(series)() == want == work.quarry_cold()()
            out[label] = {
                "numpy": measure(lambda: counts_numpy(cols), runs),
                "quarry": measure(work.quarry_warm(series), runs),
                "numpy_cold": measure(lambda: counts_numpy(read_cols()), runs),
                "quarry_cold": measure(work.quarry_cold(), runs),
            }
    return out


def bench_small_table(directory: str, runs: int) -> dict[str, Any]:
    """One table of :data:`SMALL_ROWS` rows (one step of the small steps'
    layout, a file of its own) queried :data:`SMALL_STEPS` times in a loop,
    warm: the same box each time, then a new box each time (texts never asked
    before, so nothing of a plan is kept), against NumPy's mask over the
    columns in memory for the same bounds."""
    import h5py

    import quarry

    rng = np.random.default_rng(12)
    path = os.path.join(directory, "small_table.h5")
    with h5py.File(path, "w") as f:
        f["energy"] = rng.exponential(1.0, SMALL_ROWS).astype("f4")
        f["x"] = rng.uniform(0, 300, SMALL_ROWS).astype("f4")
    time.sleep(2.1)  # indexed past the freshness window, as a day-old file is
    t0 = time.perf_counter()
    with quarry.open(path) as ds, quarry.parallel.threads(1):
        ds.build_index()
    build_s = time.perf_counter() - t0
    with h5py.File(path, "r") as f:
        e, x = f["energy"][:], f["x"][:]

    def box_numpy(lo: float, hi: float, xlo: float, xhi: float) -> int:
        return int(np.count_nonzero((e > lo) & (e < hi) & (x > xlo) & (x < xhi)))

    # New boxes: bounds exact in float32 (multiples of 1/64 and 1/4), so that
    # NumPy's float32 compares agree with Quarry's exact ones; unique over
    # every call measured (the warm-up's and each run's own).
    new_boxes: list[list[tuple[float, float, float, float]]] = [
        [(1.0 + r / 64, 1.25 + r / 64, i / 4, i / 4 + 10) for i in range(SMALL_STEPS)]
        for r in range(runs + 2)
    ]
    texts = [
        [f"{a} < energy < {b} && {c} < x < {d}" for a, b, c, d in boxes] for boxes in new_boxes
    ]
    batches = {"numpy": iter(new_boxes), "quarry": iter(texts)}

    def same_numpy() -> list[int]:
        return [box_numpy(1.2, 1.3, 140, 150) for _ in range(SMALL_STEPS)]

    def new_numpy() -> list[int]:
        return [box_numpy(*bounds) for bounds in next(batches["numpy"])]

    with quarry.open(path) as ds, quarry.parallel.threads(1):

        def same_quarry() -> list[int]:
            return [ds.query(SMALL_BOX).count() for _ in range(SMALL_STEPS)]

        def new_quarry() -> list[int]:
            return [ds.query(text).count() for text in next(batches["quarry"])]

        assert same_quarry() == same_numpy()
        assert new_quarry() == new_numpy()  # the first batch: checked, not timed
        return {
            "calls": SMALL_STEPS,
            "rows": SMALL_ROWS,
            "hits": same_numpy()[0],
            "build_s": build_s,
            "same": {
                "numpy": measure(same_numpy, runs),
                "quarry": measure(same_quarry, runs),
            },
            "new": {
                "numpy": measure(new_numpy, runs),
                "quarry": measure(new_quarry, runs),
            },
        }


def render(res: dict[str, Any]) -> str:
    beam, parts, meta = res["beam"], res["particles"], res["meta"]
    limit = meta["others_limit"]

    def rows(what: str, t: dict[str, Any], one_off: float, note: str) -> list[str]:
        return [
            f"| {what} | warm | {ms(t['numpy'], limit)} | {ms(t['quarry'], limit)} | "
            f"{ratio(t['numpy'], t['quarry'])} | {break_even(one_off, t['numpy'], t['quarry'])} "
            f"| {note} |",
            f"| {what} | cold open | {ms(t['numpy_cold'], limit)} | "
            f"{ms(t['quarry_cold'], limit)} | {ratio(t['numpy_cold'], t['quarry_cold'])} | "
            f"{break_even(one_off, t['numpy_cold'], t['quarry_cold'])} | |",
        ]

    def small_rows(small: dict[str, Any] | None) -> list[str]:
        if small is None:  # a report from before this workload
            return []
        shape = f"{small['steps']} steps of {small['rows']:,}"
        return [
            *rows(
                f"`{SMALL_BOX}` per step, {shape}",
                small["index"],
                small["build_s"]["index"],
                f"{small['hits']:,} hits; fixed costs per step are the whole answer",
            ),
            *rows(
                f"the same, a reorganised copy beside the index, {shape}",
                small["copy"],
                small["build_s"]["copy"],
                "`quarry reorg --vars energy,x --bin-size 0.1,10`; the planner weighs the "
                "copy in each step",
            ),
        ]

    def table_rows(table: dict[str, Any] | None) -> list[str]:
        if table is None:  # a report from before this workload
            return []
        what = f"one table of {table['rows']:,}, {table['calls']} queries in a loop"
        notes = {
            "same": f"`{SMALL_BOX}` each time ({table['hits']:,} "
            f"hit{'' if table['hits'] == 1 else 's'}): its box kept",
            "new": "a new box each time (`a < energy < b && c < x < d`, never asked before): "
            "each planned",
        }
        return [
            f"| {what}, {label} box | warm | {ms(t['numpy'], limit)} | {ms(t['quarry'], limit)} "
            f"| {ratio(t['numpy'], t['quarry'])} | "
            f"{break_even(table['build_s'], t['numpy'], t['quarry'])} | {notes[label]} |"
            for label, t in ((k, table[k]) for k in ("same", "new"))
        ]

    n_slices = SLICES * beam["steps"]
    lines = [
        "# Quarry time-series benchmark",
        "",
        *header(meta),
        f"- Data: `make_data.py beam --steps 8` and `particles --steps 4`, N = "
        f"{res['n']:,} per step ({res['sources']})",
        "- Reproduce: `make bench`, or `python benches/series.py [--n N] [--runs R]`; "
        "`--render` rewrites this file from `benches/REPORT-series.json`.",
        "",
        "Ratios are NumPy time / Quarry time (below 1: NumPy is faster). Quarry's core and "
        "NumPy both run on 1 thread. **Warm**: the series open in Quarry (its plan cache "
        "parses each query once) against NumPy with every step's columns in memory. **Cold "
        "open**: a fresh `open_series` per call against a fresh `h5py.File` read per call; "
        "the page cache holds the files for both. The last numeric column is the number of "
        "calls whose saving repays the one-off cost named under the table ('never' where "
        "NumPy is faster). Every answer was checked against NumPy first.",
        "",
        "| workload | condition | NumPy ms | Quarry ms | ratio | calls to repay | what |",
        "|---|---|---:|---:|---:|---:|---|",
        *rows(
            f"beam halo per step, {beam['steps']} steps",
            beam["halo"],
            beam["build_s"],
            f"`{HALO}`; NumPy: `r` in memory (warm) or computed (cold), both std per "
            f"step; counts {beam['halo_counts']}",
        ),
        *rows(
            f"beam core, {SLICES} slices × {beam['steps']} steps",
            beam["slices"],
            beam["build_s"],
            f"Quarry: {n_slices:,} queries `mean(t) + a <= t && t < mean(t) + b` as one "
            f"`query_many` batch; NumPy: one `np.histogram(t, {SLICES}, range=...)` per step",
        ),
        *rows(
            f"particles `{COUNT_QUERY}` per step, {parts['steps']} steps",
            parts["counts"],
            parts["build_s"],
            f"counts {parts['per_step_counts']}",
        ),
        *rows(
            f"track `{TRACK_QUERY}` from step 0 through {parts['steps']} steps",
            parts["track"],
            parts["build_s"],
            f"{parts['tracked']} particles followed by `id`, energy read at every step; NumPy "
            "looks them up in an inverse index `inv[id] = row` per step",
        ),
        *small_rows(res.get("small")),
        *table_rows(res.get("table")),
        "",
        "One-off costs, 1 thread: the beam index with the derived `r` "
        f"{beam['build_s']:.2f} s ({beam['build_plain_s']:.2f} s without `r`), which the "
        f"beam rows are repaid against; the particles index {parts['build_s']:.2f} s, for the "
        f"particles rows. NumPy's one-offs are made once for the warm rows and per call for "
        f"the cold ones: `r` for all steps {beam['numpy_r_s']:.3f} s, the inverse indexes "
        f"for tracking {parts['inverse_s']:.3f} s."
        + (
            f" The small steps' index {res['small']['build_s']['index']:.2f} s, and with the "
            f"copy {res['small']['build_s']['copy']:.2f} s."
            if "small" in res
            else ""
        )
        + (f" The one table's index {res['table']['build_s']:.3f} s." if "table" in res else ""),
        "",
        "Quarry's plan cache keeps each step's aggregate values (`std(x)`, `std(y)`, "
        "`mean(t)`) with the plan, so a warm Quarry call does not recompute them, while "
        "warm NumPy computes `std` and `mean` at every call; the cold rows compute them on "
        "both sides. Likewise a warm series keeps, from its second track on, a table from id "
        "to row of each step (the warm NumPy program's inverse indexes, made once); a cold "
        "call finds the ids by hashing each step's id column.",
        "",
        f"Checks: Quarry's slice counts equal exact NumPy counts at Quarry's `mean(t)`; "
        f"`np.histogram`'s uniform bins differ from exact counts at NumPy's `t.mean()` in "
        f"{beam['histogram_differs']} of {n_slices:,} counts, and the two means differ in "
        f"{beam['means_differ']} of {beam['steps']} steps. {beam['slices_in_core']:,} "
        "particles lie in the core.",
    ]
    if res["n"] != 1 << 20:
        lines += ["", f"**Reduced size**: N = {res['n']:,} per step, not the standard 1,048,576."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--n", type=int, default=1 << 20, help="particles per step (default 2**20)")
    p.add_argument("--runs", type=int, default=7, help="timed runs per measurement")
    p.add_argument("--make-data", help="path of make_data.py (default: ../shared/bench)")
    p.add_argument("--render", action="store_true", help="only re-render the report")
    args = p.parse_args(argv)
    return write_report(args.render, partial(measure_all, args), render, RESULTS, REPORT)


def measure_all(args: argparse.Namespace) -> dict[str, Any]:
    """Every series workload, timed and checked against NumPy."""
    started = time.perf_counter()
    meta = machine()
    make_data = make_data_script(args.make_data)
    beam_path, beam_source = ensure("beam", args.n, 8, make_data)
    parts_path, parts_source = ensure("particles", args.n, 4, make_data)
    res: dict[str, Any] = {"n": args.n, "sources": f"{beam_source}; {parts_source}"}
    log("beam")
    res["beam"] = bench_beam(beam_path, args.runs)
    log("particles")
    res["particles"] = bench_particles(parts_path, args.runs)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="quarry-small-steps-") as directory:
        res["small"] = bench_small_steps(directory, args.runs)
        log("one small table")
        res["table"] = bench_small_table(directory, args.runs)
    close_meta(meta, res, started)
    return res


if __name__ == "__main__":
    sys.exit(main())

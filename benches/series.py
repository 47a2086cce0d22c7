"""Time-series benchmark: halo counts per step, the 400-slice core query per
step as one batch, per-step counts and particle tracking, each against NumPy.

Data: ``make_data.py beam --steps 8`` and ``make_data.py particles --steps 4``
from ``<repo>/../shared/bench`` when present (a small built-in generator of the
same layout otherwise). Writes ``benches/REPORT-series.md``.

Every Quarry answer is checked against NumPy before it is timed. Ratios are
NumPy time / Quarry time from the same run; each time is a median.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence

import h5py
import numpy as np

import quarry
from run import log, median_of  # the main benchmark's timing helpers (benches/ is on the path)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAKE_DATA = os.path.join(REPO, "..", "shared", "bench", "make_data.py")
DATA_DIR = os.path.join(REPO, "benches", "data")
REPORT = os.path.join(REPO, "benches", "REPORT-series.md")
HALO = "r > 4*sqrt(std(x)**2 + std(y)**2)"
SLICES = 400


def _steps_in(path: str) -> tuple[int, int] | None:
    try:
        with h5py.File(path, "r") as f:
            return len(f), int(f["Step#0/x"].shape[0])
    except (OSError, KeyError):
        return None


def ensure(kind: str, n: int, steps: int) -> tuple[str, str]:
    """The data file (reused when it has the right size) and how it was made."""
    os.makedirs(DATA_DIR, exist_ok=True)
    path = os.path.join(DATA_DIR, f"{kind}_s{steps}.h5")
    source = "shared/bench/make_data.py" if os.path.exists(MAKE_DATA) else "built-in generator"
    if _steps_in(path) == (steps, n):
        return path, f"{source} (reused)"
    log(f"generating {kind} with {steps} steps of {n} with {source}")
    if os.path.exists(MAKE_DATA):
        cmd = [sys.executable, MAKE_DATA, kind, path, "--n", str(n), "--steps", str(steps)]
        subprocess.run(cmd, check=True)
    else:
        _generate(kind, path, n, steps)
    return path, source


def _generate(kind: str, path: str, n: int, steps: int) -> None:
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


def bench_beam(path: str, runs: int) -> dict[str, object]:
    with h5py.File(path) as f:
        steps = len(f)
    out: dict[str, object] = {"steps": steps}
    with quarry.open(path) as ds:
        t0 = time.perf_counter()
        ds.build_index(derive=["r=sqrt(x**2 + y**2)"])
        out["build_s"] = time.perf_counter() - t0

    def numpy_halo() -> list[int]:
        counts = []
        with h5py.File(path) as f:
            for s in range(steps):
                x, y = f[f"Step#{s}/x"][()], f[f"Step#{s}/y"][()]
                cut = 4 * np.sqrt(x.std() ** 2 + y.std() ** 2)
                counts.append(int(np.count_nonzero(np.sqrt(x**2 + y**2) > cut)))
        return counts

    def quarry_halo() -> list[int]:
        with quarry.open_series(path) as series:
            return series.query(HALO).counts()

    want, got = numpy_halo(), quarry_halo()
    assert got == want, (got, want)
    out["halo_counts"] = got
    out["halo_numpy_s"] = median_of(numpy_halo, runs)
    out["halo_quarry_s"] = median_of(quarry_halo, runs)

    # The longitudinal core, sliced: 400 slices of width d around mean(t) per step.
    with h5py.File(path) as f:
        d = float(f["Step#0/t"][()].std()) / 100
    bounds = [((k - 200) * d, (k - 199) * d) for k in range(SLICES)]
    queries = [f"mean(t) + {lo!r} <= t && t < mean(t) + {hi!r}" for lo, hi in bounds]
    with quarry.open_series(path) as series:
        means = [
            sel.aggregates[0].value for _, sel in series.query("t > mean(t)")
        ]  # the value Quarry compares with, so NumPy checks it exactly

    def numpy_slices() -> list[list[int]]:
        counts = []
        with h5py.File(path) as f:
            for s in range(steps):
                t = f[f"Step#{s}/t"][()]
                m = t.mean()
                counts.append(
                    [int(np.count_nonzero((t >= m + lo) & (t < m + hi))) for lo, hi in bounds]
                )
        return counts

    def quarry_slices() -> list[list[int]]:
        with quarry.open_series(path) as series:
            return [sel.counts() for sel in series.query_many(queries)]

    got_slices = quarry_slices()
    with h5py.File(path) as f:
        for s in range(steps):
            t = f[f"Step#{s}/t"][()]
            exact = [
                int(np.count_nonzero((t >= means[s] + lo) & (t < means[s] + hi)))
                for lo, hi in bounds
            ]
            assert [row[s] for row in got_slices] == exact, s
    out["slices_numpy_s"] = median_of(numpy_slices, max(1, runs // 2))
    out["slices_quarry_s"] = median_of(quarry_slices, max(1, runs // 2))
    out["slices_in_core"] = sum(sum(row) for row in got_slices)
    return out


def bench_particles(path: str, runs: int) -> dict[str, object]:
    with h5py.File(path) as f:
        steps = len(f)
    out: dict[str, object] = {"steps": steps}
    with quarry.open(path) as ds:
        t0 = time.perf_counter()
        ds.build_index()
        out["build_s"] = time.perf_counter() - t0
    query = "energy > 2"

    def numpy_counts() -> list[int]:
        with h5py.File(path) as f:
            return [int(np.count_nonzero(f[f"Step#{s}/energy"][()] > 2)) for s in range(steps)]

    def quarry_counts() -> list[int]:
        with quarry.open_series(path) as series:
            return series.query(query).counts()

    assert quarry_counts() == numpy_counts()
    out["per_step_counts"] = numpy_counts()
    out["counts_numpy_s"] = median_of(numpy_counts, runs)
    out["counts_quarry_s"] = median_of(quarry_counts, runs)

    track_query = "energy > 3"

    def numpy_track() -> list[np.ndarray]:
        with h5py.File(path) as f:
            e0, id0 = f["Step#0/energy"][()], f["Step#0/id"][()]
            chosen = id0[e0 > 3]
            found = []
            for s in range(steps):
                ids, energy = f[f"Step#{s}/id"][()], f[f"Step#{s}/energy"][()]
                order = np.argsort(ids)
                pos = np.searchsorted(ids[order], chosen)
                found.append(energy[order[np.minimum(pos, len(ids) - 1)]])
            return found

    def quarry_track() -> list[np.ndarray]:
        with quarry.open_series(path) as series:
            tracks = series.track(track_query, 0, "id", ["energy"])
            return [s.values["energy"] for s in tracks.steps]

    for a, b in zip(quarry_track(), numpy_track(), strict=True):
        np.testing.assert_array_equal(a, b.astype(np.float64))
    with quarry.open_series(path) as series:
        out["tracked"] = len(series.track(track_query, 0, "id").ids)
    out["track_numpy_s"] = median_of(numpy_track, runs)
    out["track_quarry_s"] = median_of(quarry_track, runs)
    return out


def render(beam: dict[str, object], parts: dict[str, object], meta: dict[str, str]) -> str:
    def row(what: str, numpy_s: object, quarry_s: object, note: str) -> str:
        assert isinstance(numpy_s, float) and isinstance(quarry_s, float)
        return (
            f"| {what} | {numpy_s * 1e3:.1f} | {quarry_s * 1e3:.1f} | "
            f"{numpy_s / quarry_s:.1f}x | {note} |"
        )

    lines = [
        "# Quarry time-series benchmark",
        "",
        *(f"- {k}: {v}" for k, v in meta.items()),
        "- Reproduce: `make bench` (or `python benches/series.py [--n N] [--repeat R]`)",
        "",
        "Ratios are NumPy time / Quarry time (higher is better), measured in one run; each "
        "time is a median and includes opening the files. NumPy reads the columns it needs "
        "with h5py and evaluates in memory, one query at a time; Quarry answers from its "
        "indexes (built once, below). Every Quarry answer was checked against NumPy first.",
        "",
        "| workload | NumPy ms | Quarry ms | ratio | what |",
        "|---|---:|---:|---:|---|",
        row(
            f"beam halo per step, {beam['steps']} steps",
            beam["halo_numpy_s"],
            beam["halo_quarry_s"],
            f"`{HALO}` with `r` derived at indexing; counts {beam['halo_counts']}",
        ),
        row(
            f"beam core, {SLICES} slices x {beam['steps']} steps",
            beam["slices_numpy_s"],
            beam["slices_quarry_s"],
            f"`mean(t) + a <= t && t < mean(t) + b`, {SLICES * int(str(beam['steps']))} "
            "evaluations as one `query_many` batch",
        ),
        row(
            f"particles `energy > 2` per step, {parts['steps']} steps",
            parts["counts_numpy_s"],
            parts["counts_quarry_s"],
            f"counts {parts['per_step_counts']}",
        ),
        row(
            f"track `energy > 3` from step 0 through {parts['steps']} steps",
            parts["track_numpy_s"],
            parts["track_quarry_s"],
            f"{parts['tracked']} particles followed by `id`, energy read at every step",
        ),
        "",
        f"Index builds: beam {beam['build_s']:.1f} s (with the derived `r`), "
        f"particles {parts['build_s']:.1f} s; not included above.",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1 << 20, help="particles per step (default 2**20)")
    p.add_argument("--repeat", type=int, default=5, help="timed runs per measurement")
    args = p.parse_args(argv)
    started = time.perf_counter()
    beam_path, beam_source = ensure("beam", args.n, 8)
    parts_path, parts_source = ensure("particles", args.n, 4)
    log("beam")
    beam = bench_beam(beam_path, args.repeat)
    log("particles")
    parts = bench_particles(parts_path, args.repeat)
    meta = {
        "Date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "Machine": f"{os.cpu_count()} CPUs, {platform.platform()}",
        "Data": f"beam --steps 8 and particles --steps 4, N = {args.n:,} per step "
        f"({beam_source}; {parts_source})",
        "Versions": f"python {platform.python_version()}, numpy {np.__version__}, "
        f"h5py {h5py.__version__}, quarry {quarry.__version__}",
        "Run took": f"{(time.perf_counter() - started) / 60:.1f} min",
    }
    with open(REPORT, "w") as f:
        f.write(render(beam, parts, meta))
    log(f"wrote {REPORT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

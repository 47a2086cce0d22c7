"""The report of ``benches/workload720.py``: ``benches/REPORT-720.md`` and its
hits-per-step pictures, rendered from ``benches/REPORT-720.json`` (the goals of issue 15
next to each measured figure, each verdict stated, the losses with their ratios)."""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from typing import Any

from timing import header, ms, ratio, seconds
from workload720 import BENCH, BUILDS, HALO, LAYOUTS, SLICES, STANDARD

PICTURES = {"halo": "REPORT-720-halo.png", "core": "REPORT-720-core.png"}
LAYOUT_NAMES = {"h5part": "H5Part (1 file, step groups)", "files": "FastQuery (1 file per step)"}
#: The issue's goals: the halo's ratio to NumPy, the core's, the whole workload in s.
GOALS = {"halo": 5.0, "core": 1.0, "whole_s": 12.0}


def _runs(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} s [{min(xs):.2f}–{max(xs):.2f}]"


def _ms_per(t: dict[str, float], count: int) -> str:
    return f"{t['median'] / count * 1e6:.1f} µs"


def _met(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def draw(res: dict[str, Any]) -> None:
    """The hits-per-step pictures, from the H5Part layout's members and counts."""
    from quarry.outputs.plots import draw_counts

    part = res["h5part"]
    for what, counts, title in (
        ("halo", part["halo_counts"], f"halo `{HALO}`"),
        ("core", part["core_counts"], f"core: {SLICES} slices of t around mean(t)"),
    ):
        records = [
            {"file": "h5part", "step": step, "count": c}
            for step, c in zip(part["member_steps"], counts, strict=True)
        ]
        draw_counts(records, os.path.join(BENCH, PICTURES[what]), title)


def losses(res: dict[str, Any], s: Callable[[dict[str, float]], str]) -> list[str]:
    """Where Quarry is slower than NumPy, each with its ratio, and the cost behind it."""
    out = []
    for k in LAYOUTS:
        for key in ("halo", "core"):
            for cond, suffix in (("warm", ""), ("cold", "_cold")):
                base, tool = res[k][key]["numpy" + suffix], res[k][key]["quarry" + suffix]
                if tool["median"] > base["median"]:
                    out.append(f"{key} {cond} ({k}) {ratio(base, tool)}")
    if not out:
        return ["Quarry is faster than NumPy in every row above."]
    core = res["h5part"]["core"]
    return [
        f"**Where Quarry loses**, NumPy being faster: {'; '.join(out)}. The {SLICES} "
        "slices of a step are planned once (the rest re-planned in their numbers) and "
        "counted in one pass over `t`: "
        f"{_ms_per(core['quarry_cold'], res['steps'])} per step cold (H5Part), opening the "
        f"member included, against one histogram pass of "
        f"{_ms_per(core['numpy_cold'], res['steps'])} per step (read included). A cold "
        "halo opens every member and plans the query in each."
    ]


def halo_note(counts: list[int]) -> list[str]:
    """Why the halo may empty out: the generator's halo grows with the step and widens
    ``rms(r)`` past its 8-sigma reach."""
    empty_from = len(counts)
    while empty_from > 0 and counts[empty_from - 1] == 0:
        empty_from -= 1
    if empty_from == len(counts):
        return []
    return [
        f"The halo is empty from step {empty_from} on: `make_data.py beam` puts a fraction "
        "5e-4 × (1 + step) of the particles at 4–8 sigma, so `rms(r)` grows with the step "
        "until 4 rms(r) lies beyond the halo's reach. The counts are checked, not the "
        "generator's physics.",
        "",
    ]


def render(res: dict[str, Any]) -> str:
    draw(res)
    meta = res["meta"]
    limit = meta["others_limit"]
    steps, n = res["steps"], res["n"]
    total = SLICES * steps

    def flag(t: dict[str, float]) -> str:
        return " (!)" if t["others"] > limit else ""

    def s(t: dict[str, float]) -> str:
        """Seconds, or ms below one second, with the interquartile range and flag."""
        return f"{seconds(t, limit)} s" if t["median"] >= 1 else f"{ms(t, limit)} ms"

    lines = [
        "# The headline workload at its shape: halo and 400-slice core over every step",
        "",
        *header(meta),
        f"- Data: `make_data.py beam --steps {steps} --n {n}` ({res['source']}), x, y, t "
        "float64, in a scratch directory; the same values in two layouts: "
        + "; ".join(f"**{LAYOUT_NAMES[k]}**" for k in LAYOUTS)
        + ". Each layout's index holds `t` and the derived `r=sqrt(x**2 + y**2)`.",
        "- Reproduce: `make bench`, or `python benches/workload720.py [--steps S] [--n N]`; "
        "`--render` rewrites this file and its pictures from `benches/REPORT-720.json`.",
    ]
    if (steps, n) != STANDARD:
        lines += [
            "",
            f"**Reduced shape**: {steps} steps of {n:,} particles, not the issue's "
            f"{STANDARD[0]} steps of {STANDARD[1]:,}.",
        ]
    lines += [
        "",
        "## Goals (issue 15)",
        "",
        "Ratio = NumPy time / Quarry time (below 1: NumPy is faster), both on 1 thread. "
        "Cold: a fresh `quarry.open_series` per call against a fresh h5py read per call "
        "(page cache warm for both); warm: the series open against the columns in memory.",
        "",
        "| goal | layout | measured | verdict |",
        "|---|---|---|---|",
    ]
    for k in LAYOUTS:
        lay = res[k]
        h, c, w = lay["halo"], lay["core"], lay["whole"]
        rh = h["numpy_cold"]["median"] / h["quarry_cold"]["median"]
        rw = h["numpy"]["median"] / h["quarry"]["median"]
        rc = c["numpy_cold"]["median"] / c["quarry_cold"]["median"]
        rcw = c["numpy"]["median"] / c["quarry"]["median"]
        whole_s = w["quarry_cold"]["median"]
        lines += [
            f"| halo ≥ {GOALS['halo']:g}x NumPy | {LAYOUT_NAMES[k]} | cold "
            f"{ratio(h['numpy_cold'], h['quarry_cold'])}, warm {ratio(h['numpy'], h['quarry'])}"
            f" | {_met(rh >= GOALS['halo'])} cold, {_met(rw >= GOALS['halo'])} warm |",
            f"| {total:,} slice counts no slower than `np.histogram` | {LAYOUT_NAMES[k]} | "
            f"cold {ratio(c['numpy_cold'], c['quarry_cold'])}, warm "
            f"{ratio(c['numpy'], c['quarry'])} | {_met(rc >= 1)} cold, {_met(rcw >= 1)} warm |",
            f"| whole workload ≤ {GOALS['whole_s']:g} s on {meta['cores']} cores | "
            f"{LAYOUT_NAMES[k]} | {s(w['quarry_cold'])} (NumPy {s(w['numpy_cold'])}) "
            f"| {_met(whole_s <= GOALS['whole_s'])} |",
        ]
    lines += [
        "",
        "## Queries",
        "",
        "| workload | layout | condition | NumPy | Quarry | ratio |",
        "|---|---|---|---:|---:|---:|",
    ]
    for k in LAYOUTS:
        lay = res[k]
        for what, key in (
            (f"halo `{HALO}`, {steps} steps", "halo"),
            (f"core, {total:,} counts", "core"),
        ):
            for cond, suffix in (("warm", ""), ("cold", "_cold")):
                base, tool = lay[key]["numpy" + suffix], lay[key]["quarry" + suffix]
                lines.append(
                    f"| {what} | {LAYOUT_NAMES[k]} | {cond} | {s(base)} | {s(tool)} | "
                    f"{ratio(base, tool)} |"
                )
        w = lay["whole"]
        lines.append(
            f"| whole workload (halo + core), all cores | {LAYOUT_NAMES[k]} | cold | "
            f"{s(w['numpy_cold'])} | {s(w['quarry_cold'])} | "
            f"{ratio(w['numpy_cold'], w['quarry_cold'])} |"
        )
    part = res["h5part"]
    lines += [
        "",
        f"- Halo: Quarry `{HALO}` (the study's `sqrt(x**2 + y**2) > 4*rms_r`; `rms(r)` from "
        "the index's block statistics of `r`, no data read); NumPy `r = np.sqrt(x*x + y*y)`, "
        "`np.count_nonzero(r > 4*np.sqrt(np.mean(r*r)))` per step, `r` in memory when warm "
        f"(made once in {part['numpy_r_s'] * 1e3:.0f} ms, H5Part), computed per call when cold. "
        "Quarry's plan cache keeps each step's `rms(r)`, so a warm call does not recompute "
        "it, while warm NumPy computes its mean at every call.",
        f"- Core: Quarry `series.query_many` of the {SLICES} queries "
        "`mean(t) + a <= t && t < mean(t) + b` (slices of width std(t of step 0)/100 = "
        f"{res['slice_width']:.3g} s) over every step; NumPy `np.histogram(t, bins=t.mean() + "
        "offsets)` with the 401 edges per step. A faster NumPy, `np.histogram(t, 400, "
        "range=...)` (uniform bins, no sort), takes "
        + ", ".join(
            f"{s(res[k]['core']['numpy_uniform'])} warm ({LAYOUT_NAMES[k]}; Quarry warm "
            f"{ratio(res[k]['core']['numpy_uniform'], res[k]['core']['quarry'])} of it)"
            for k in LAYOUTS
        )
        + f"; its counts differ from the exact ones in {part['uniform_differs']:,} of "
        f"{total:,} slices.",
        "- Per count, warm: Quarry "
        + ", ".join(f"{_ms_per(res[k]['core']['quarry'], total)} ({k})" for k in LAYOUTS)
        + f"; NumPy's histogram {_ms_per(part['core']['numpy'], steps)} per step.",
        "",
        *losses(res, s),
        "",
        "## Builds",
        "",
        f"{n * steps:,} rows of `t` and of the derived `r` (from `x`, `y`), default options; "
        "each build runs in its own process, timed between barriers (MPI start-up not "
        "counted), median [min–max] of "
        f"{res['build_runs']} builds; the plain read is h5py reading x, y, t of every step. "
        "Efficiency = T(1 thread) / (2 × T). Every build's halo counts were checked.",
        "",
        "| layout | read x, y, t | " + " | ".join(BUILDS) + " |",
        "|---|---:|" + "---:|" * len(BUILDS),
    ]
    for k in LAYOUTS:
        lay = res[k]
        builds = lay["builds"]
        base = builds["1 thread"]["build_s"]
        cells = []
        for label in BUILDS:
            b = builds[label]
            if "skipped" in b:
                cells.append(f"skipped: {b['skipped']}")
                continue
            eff = (
                ""
                if label == "1 thread"
                else (
                    f", eff. {statistics.median(base) / (2 * statistics.median(b['build_s'])):.2f}"
                )
            )
            read_x = statistics.median(b["build_s"]) / lay["read"]["median"]
            cells.append(
                f"{_runs(b['build_s'])}{' (!)' if b['others'] > limit else ''} "
                f"({read_x:.1f}× the read{eff})"
            )
        lines.append(f"| {LAYOUT_NAMES[k]} | {s(lay['read'])} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Checks",
        "",
        f"- Halo counts equal NumPy's in every step, both layouts, every build; Quarry's "
        f"`rms(r)` differs from NumPy's by at most {part['rms_rel_diff']:.1e} (relative).",
        f"- Core: Quarry's {total:,} counts equal exact counts (sorted values, the edges made "
        "from Quarry's `mean(t)` in the same float64 arithmetic) in every step; "
        f"`np.histogram` with NumPy's own `t.mean()` differs from them in "
        + ", ".join(f"{res[k]['histogram_differs']} ({k})" for k in LAYOUTS)
        + f" counts; the two means differ in {part['means_differ']} of {steps} steps. "
        "Both layouts give the same counts.",
        f"- {sum(part['halo_counts']):,} halo particles and {sum(part['core_counts']):,} core "
        f"particles in all; (!) marks a time taken while other processes used more than "
        f"{limit} cores.",
        "",
        "## Hits per step",
        "",
        *halo_note(part["halo_counts"]),
        f"![halo per step]({PICTURES['halo']})",
        f"![core per step]({PICTURES['core']})",
    ]
    return "\n".join(lines) + "\n"

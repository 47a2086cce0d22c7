"""Write the README's benchmark figures from the committed results, never by hand.

The README holds three generated parts, each between a pair of markers:
``<!-- bench:begin -->`` / ``<!-- bench:end -->`` (the Benchmarks section's figures),
``<!-- reorg:begin -->`` / ``<!-- reorg:end -->`` (the reorganised copies' and the
interpolation joins' figures) and ``<!-- tunables:begin -->`` / ``<!-- tunables:end -->``
(the Tunables table). They are rendered from ``benches/REPORT.json``,
``REPORT-series.json``, ``REPORT-720.json``, ``REPORT-parallel.json``,
``REPORT-opening.json`` and ``REPORT-reorg.json``, which the bench scripts write next
to their Markdown reports.

    python benches/readme_figures.py          # rewrite README.md
    python benches/readme_figures.py --check  # exit 1 if README.md is not up to date

``tests/unit/test_readme_figures.py`` runs the check.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from reorg import goal_met, goal_rows, goal_wanted
from timing import break_even, loaded, ratio

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(REPO, "README.md")
BENCH = os.path.join(REPO, "benches")
MARKERS = {
    "bench": ("<!-- bench:begin -->", "<!-- bench:end -->"),
    "reorg": ("<!-- reorg:begin -->", "<!-- reorg:end -->"),
    "tunables": ("<!-- tunables:begin -->", "<!-- tunables:end -->"),
}
QUERY_NAMES = {"box": "4-variable box", "ux*ux + uy*uy > 1.0": "`ux*ux + uy*uy > 1.0` (a scan)"}


def load_results() -> dict[str, Any]:
    """The benches' committed results."""
    out = {}
    for key, name in (
        ("run", "REPORT"),
        ("series", "REPORT-series"),
        ("parallel", "REPORT-parallel"),
        ("workload", "REPORT-720"),
        ("reorg", "REPORT-reorg"),
        ("opening", "REPORT-opening"),
    ):
        with open(os.path.join(BENCH, f"{name}.json")) as fh:
            out[key] = json.load(fh)
    return out


def _x(base: dict[str, Any], tool: dict[str, Any], limit: float) -> str:
    flag = " (!)" if loaded(base, limit) or loaded(tool, limit) else ""
    return ratio(base, tool) + flag


def _ms(t: dict[str, Any]) -> str:
    return f"{t['median'] * 1e3:.3g} ms"


def repaid(build_s: float, row: dict[str, Any]) -> str:
    """How many counts of ``row``'s query repay the 1-thread build, cold open and warm."""
    n = {c: break_even(build_s, row[c]["numpy"], row[c]["quarry_1"]) for c in ("cold", "warm")}
    what = f"counts of `{row['query']}`"
    if "never" not in n.values():
        return (
            f"The 1-thread build is repaid after {n['cold']} cold-open or {n['warm']} warm {what}."
        )
    parts = [
        f"{word} {what}: " + ("never (NumPy is faster)" if n[c] == "never" else f"after {n[c]}")
        for c, word in (("cold", "cold-open"), ("warm", "warm"))
    ]
    return "The 1-thread build is repaid by " + "; by ".join(parts) + "."


def _name(q: str) -> str:
    return QUERY_NAMES.get(q, f"`{q}`")


def conditions(meta: dict[str, Any]) -> str:
    """One sentence on where and under what load the figures were taken."""
    return (
        f"{meta['cores']} cores, {meta['date']}, load average {meta['load_start']:.2f} at "
        f"the start, other processes using at most {meta['others_max']:.2f} cores during a "
        f"measurement; (!) marks a figure taken while they used more than "
        f"{meta['others_limit']} cores"
    )


def bench_section(res: dict[str, Any]) -> str:
    run, series, par = res["run"], res["series"], res["parallel"]
    limit = run["meta"]["others_limit"]
    rows = {(r["query"], r["output"]): r for r in run["rows"]}
    queries = list(dict.fromkeys(r["query"] for r in run["rows"]))
    n = run["n"]
    lines = [
        f"`make bench` generates {n:,} VPIC-like particles (`../shared/bench/make_data.py` "
        "when present, else the bundled generator), checks every answer against NumPy, and "
        "writes [benches/REPORT.md](benches/REPORT.md). The figures below are generated "
        "from the committed reports by `benches/readme_figures.py`; conditions: "
        f"{conditions(run['meta'])}. Each is a median of {run['build']['read']['runs']} "
        "runs; the reports give the spread.",
        "",
        "NumPy is the plain program for each answer (`np.count_nonzero(mask)`, "
        "`np.flatnonzero(mask)`, `col[mask]`) on 1 thread, and Quarry's core runs on 1 "
        "thread too. **Warm**: the columns already in NumPy's memory against an open "
        "Quarry `Dataset` (index pages cached, the query planned once). **Cold open**: a "
        "fresh `h5py.File` read per query against a fresh `quarry.open` per query, the page "
        "cache warm for both. Ratio = NumPy time / Quarry time; below 1, NumPy is faster.",
        "",
        "| query | hits | warm count | warm ids | warm x,y,z values | cold-open count | "
        "cold-open values |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for q in queries:
        cells = [
            _x(rows[(q, o)][c]["numpy"], rows[(q, o)][c]["quarry_1"], limit)
            for c, o in (
                ("warm", "count"),
                ("warm", "ids"),
                ("warm", "values"),
                ("cold", "count"),
                ("cold", "values"),
            )
        ]
        pct = 100 * rows[(q, "count")]["hits"] / n
        lines.append(f"| {_name(q)} | {pct:.3g} % | " + " | ".join(cells) + " |")
    b = run["build"]
    read = b["read"]["median"]
    e1 = rows[("energy > 1.0", "count")]
    lines += [
        "",
        f"The index is {b['index_bytes'] / b['raw_bytes']:.2f}x the raw bytes of the seven "
        f"columns. It builds in {b['build_1']['median']:.2f} s on 1 thread "
        f"({b['build_1']['median'] / read:.1f}x a plain h5py read of them) and "
        f"{b['build_all']['median']:.2f} s on {run['meta']['cores']} cores "
        f"({b['build_all']['median'] / read:.1f}x). {repaid(b['build_1']['median'], e1)} "
        "The report gives the number of queries that repay the build for every query.",
        "",
    ]
    cli = run["cli"]
    c = cli["energy > 1.0"]
    lines += [
        f'A whole `quarry query FILE "energy > 1.0" --count --json --jobs 1` process takes '
        f"{_ms(c['quarry'])} against {_ms(c['numpy'])} for a `python -c` NumPy one-liner "
        f"doing the same count (importing NumPy and h5py alone: {_ms(cli['imports'])}).",
        "",
    ]
    # All cores: Quarry against the multi-threaded tools.
    cores = run["meta"]["cores"]
    tools = [t for t in ("quarry_all", "duckdb_all", "polars_all") if t in e1["warm"]]
    if len(tools) > 1:
        label = {"quarry_all": "Quarry", "duckdb_all": "DuckDB", "polars_all": "Polars"}
        lines += [
            f"On all {cores} cores, warm (DuckDB on an in-memory table, Polars on an in-memory "
            "DataFrame), the count takes:",
            "",
            "| query | NumPy (1 thread) | " + " | ".join(label[t] for t in tools) + " |",
            "|---|---:|" + "---:|" * len(tools),
        ]
        for q in queries:
            w = rows[(q, "count")]["warm"]
            lines.append(
                f"| {_name(q)} | {_ms(w['numpy'])} | " + " | ".join(_ms(w[t]) for t in tools) + " |"
            )
        lines.append("")
    lines += series_part(series) + workload_part(res["workload"])
    lines += losses(run, series, res["workload"], res["opening"]) + parallel_part(par)
    return "\n".join(lines)


#: The headline workload's layouts, as its report names them.
LAYOUTS = {"h5part": "one file, 720 step groups", "files": "one file per step"}


def workload_part(w: dict[str, Any]) -> list[str]:
    """Issue 15's workload at its shape: halo and 400-slice core of every step."""
    limit = w["meta"]["others_limit"]
    lines = [
        f"The headline workload at its shape, {w['steps']} steps of {w['n']:,} beam "
        "particles: the halo `r > 4*rms(r)` of every step, and the core cut into 400 "
        f"slices of `t` around each step's mean ({w['steps'] * 400:,} counts, against one "
        "`np.histogram` pass per step), both sides on 1 thread "
        f"([benches/REPORT-720.md](benches/REPORT-720.md); {conditions(w['meta'])}):",
        "",
        "| layout | halo warm | halo cold | core warm | core cold | whole, all cores, cold |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    met = []
    for key, label in LAYOUTS.items():
        h, c, whole = w[key]["halo"], w[key]["core"], w[key]["whole"]
        quarry_s, numpy_s = whole["quarry_cold"]["median"], whole["numpy_cold"]["median"]
        lines.append(
            f"| {label} | {_x(h['numpy'], h['quarry'], limit)} | "
            f"{_x(h['numpy_cold'], h['quarry_cold'], limit)} | "
            f"{_x(c['numpy'], c['quarry'], limit)} | "
            f"{_x(c['numpy_cold'], c['quarry_cold'], limit)} | "
            f"{quarry_s:.1f} s (NumPy {numpy_s:.1f} s) |"
        )
        for suffix, word in (("", "warm"), ("_cold", "cold")):
            if h["numpy" + suffix]["median"] >= 5 * h["quarry" + suffix]["median"]:
                met.append(f"the {word} halo ({label})")
            if c["numpy" + suffix]["median"] >= c["quarry" + suffix]["median"]:
                met.append(f"the {word} slices ({label})")
        if quarry_s <= 12:
            met.append(f"the whole workload ({label})")
    lines += [
        "",
        "The goals: a halo at least 5x NumPy, slices no slower than the histogram, the "
        "whole workload in at most 12 s. Met: " + ("; ".join(met) or "none") + ".",
        "",
    ]
    return lines


def series_part(series: dict[str, Any]) -> list[str]:
    limit = series["meta"]["others_limit"]
    b, p = series["beam"], series["particles"]
    names = [
        (f"beam halo per step ({b['steps']} steps, derived `r`, std aggregates)", b["halo"]),
        (f"beam core: 400 slices × {b['steps']} steps (NumPy: `np.histogram`)", b["slices"]),
        (f"particles `energy > 2` per step ({p['steps']} steps)", p["counts"]),
        (
            f"tracking {p['tracked']} particles through {p['steps']} steps (NumPy: an "
            "inverse index)",
            p["track"],
        ),
    ]
    small = series.get("small")
    if small is not None:
        shape = f"{small['steps']} steps of {small['rows']:,} particles"
        names += [
            (f"a two-variable box per step, {shape}", small["index"]),
            (f"the same with a reorganised copy beside the index, {shape}", small["copy"]),
        ]
    table = series.get("table")
    warm_only = []
    if table is not None:
        loop = f"one table of {table['rows']:,} particles, {table['calls']} queries in a loop"
        warm_only = [
            (f"{loop}, the same box each time", table["same"]),
            (f"{loop}, a new box each time", table["new"]),
        ]
    lines = [
        f"`benches/series.py` times the time-series workloads on {series['n']:,} particles "
        "per step (and one of many small steps), both sides on 1 thread "
        f"([benches/REPORT-series.md](benches/REPORT-series.md); {conditions(series['meta'])}):",
        "",
        "| workload | warm | cold open |",
        "|---|---:|---:|",
    ]
    for what, t in names:
        lines.append(
            f"| {what} | {_x(t['numpy'], t['quarry'], limit)} | "
            f"{_x(t['numpy_cold'], t['quarry_cold'], limit)} |"
        )
    for what, t in warm_only:
        lines.append(f"| {what} | {_x(t['numpy'], t['quarry'], limit)} | — |")
    lines += [
        "",
        f"The beam index with the derived `r` takes {b['build_s']:.2f} s to build; the "
        "report gives the calls that repay it. A warm Quarry call reuses the aggregate "
        "values (`std`, `mean`) its plan cache holds, while NumPy computes them at each "
        "call; the cold-open column computes them on both sides.",
        "",
    ]
    return lines


def losses(
    run: dict[str, Any],
    series: dict[str, Any],
    workload: dict[str, Any],
    opening: dict[str, Any] | None = None,
) -> list[str]:
    """Every like-for-like comparison at 1 thread where NumPy is faster, by condition."""
    found: dict[str, list[str]] = {"warm": [], "cold open": []}
    for r in run["rows"]:
        for condition, word in (("warm", "warm"), ("cold", "cold open")):
            t = r[condition]
            if t["quarry_1"]["median"] > t["numpy"]["median"]:
                x = ratio(t["numpy"], t["quarry_1"])
                found[word].append(f"{r['output']} of {_name(r['query'])} ({x})")
    labels = {
        "halo": "the beam halo",
        "slices": "the 400 slices against `np.histogram`",
        "counts": "per-step counts over small steps",
        "track": "tracking against an inverse index",
    }
    timed = [
        (label, series[part].get(key))
        for part in ("beam", "particles")
        for key, label in labels.items()
    ]
    small = series.get("small")
    if small is not None:
        steps = f"{small['steps']} steps of {small['rows']:,} particles"
        timed += [
            (f"a box per step over {steps}", small["index"]),
            ("the same with a reorganised copy", small["copy"]),
        ]
    table = series.get("table")
    if table is not None:
        loop = f"{table['calls']} queries in a loop over one table of {table['rows']:,} particles"
        for key, each in (("same", "the same box"), ("new", "a new box")):
            t = table[key]
            if t["quarry"]["median"] > t["numpy"]["median"]:
                found["warm"].append(f"{loop}, {each} each time ({ratio(t['numpy'], t['quarry'])})")
    for label, t in timed:
        if t is None:
            continue
        for suffix, word in (("", "warm"), ("_cold", "cold open")):
            if t["quarry" + suffix]["median"] > t["numpy" + suffix]["median"]:
                x = ratio(t["numpy" + suffix], t["quarry" + suffix])
                found[word].append(f"{label} ({x})")
    parts = {"halo": "the 720-step halo", "core": "the 288,000 slice counts"}
    for key, layout in LAYOUTS.items():
        for part, label in parts.items():
            t = workload[key][part]
            for suffix, word in (("", "warm"), ("_cold", "cold open")):
                if t["quarry" + suffix]["median"] > t["numpy" + suffix]["median"]:
                    x = ratio(t["numpy" + suffix], t["quarry" + suffix])
                    found[word].append(f"{label}, {layout} ({x})")
    readers = {"raw": "`numpy.fromfile`"}
    for fmt, by in (opening or {}).get("formats", {}).items():
        for m in by.values():
            plain = m.get("plain")
            if plain is not None and m["cold"]["median"] > plain["median"]:
                reader = readers.get(fmt, f"the {fmt} library's own reader")
                found["cold open"].append(
                    f"opening a small {fmt} file and counting {_name(m['query'])}, "
                    f"against {reader} and NumPy ({ratio(plain, m['cold'])})"
                )
    found["fresh process"] = []
    for label, c in run["cli"].items():
        if label != "imports" and c["quarry"]["median"] > c["numpy"]["median"]:
            x = ratio(c["numpy"], c["quarry"])
            found["fresh process"].append(
                f"the whole `quarry query --count` of {_name(label)} ({x})"
            )
    if not any(found.values()):
        return ["Quarry is faster than NumPy in every like-for-like comparison above.", ""]
    return [
        "**Where Quarry loses.** NumPy is faster, like for like at 1 thread, for:",
        "",
        *(f"- {word}: " + "; ".join(items) + "." for word, items in found.items() if items),
        "",
        "These are answers where decoding many rows from the index, reading a scanned "
        "column from the file, planning a query never asked before, or opening a file or a "
        "series (and, for a whole process, importing Quarry) costs more than NumPy's pass "
        "over columns already in memory.",
        "",
    ]


def _parallel_times(
    by: dict[str, Any],
) -> tuple[Callable[[str, str], float], Callable[[str, str], str]]:
    """For one data set of REPORT-parallel: the median seconds of a configuration's
    build or query (``med("2x1", "build")``), and its parallel efficiency against
    one thread and one rank (``eff``)."""
    import statistics

    def med(cfg: str, key: str) -> float:
        xs = by[cfg]["build_s"] if key == "build" else by[cfg]["queries"][key]
        return float(statistics.median(xs))

    def eff(cfg: str, key: str) -> str:
        return f"{med('1x1', key) / (2 * med(cfg, key)):.2f}"

    return med, eff


def parallel_part(par: dict[str, Any]) -> list[str]:
    name = par["sets"][1][0]
    med, eff = _parallel_times(par["results"][name])

    box = "count box"
    return [
        f"`benches/parallel.py` times builds and queries with 1 and 2 threads and 1 and 2 "
        f"MPI ranks ([benches/REPORT-parallel.md](benches/REPORT-parallel.md); "
        f"{conditions(par['meta'])}), and checks every configuration's counts, hit rows and "
        f"value sums against NumPy. Building `{name}` ({par['steps']} steps of "
        f"{par['n']:,}) takes {med('1x1', 'build'):.1f} s on 1 thread, "
        f"{med('1x2', 'build'):.1f} s on 2 threads (efficiency {eff('1x2', 'build')}) and "
        f"{med('2x1', 'build'):.1f} s on 2 ranks ({eff('2x1', 'build')}). The box count "
        f"goes from {med('1x1', box) * 1e3:.1f} ms to {med('1x2', box) * 1e3:.1f} ms "
        f"(2 threads) and {med('2x1', box) * 1e3:.1f} ms (2 ranks). The report ends with a "
        "model of 1,000+ ranks built on the measured per-block costs: an estimate, not a "
        "measurement.",
    ]


def reorg_section(res: dict[str, Any]) -> str:
    """Issue 12's figures: Q1's values through the copy, the joins, the reorganisation."""
    r = res["reorg"]
    limit = r["meta"]["others_limit"]
    q1, prep = r["q1"], r["prepare"]
    lines = [
        f"`benches/reorg.py` times issue 12's reorganised copy (MDBin) and interpolation "
        f"joins on {r['n']:,} particles and a {r['mesh']}^3 field "
        f"([benches/REPORT-reorg.md](benches/REPORT-reorg.md); {conditions(r['meta'])}), "
        "every answer checked against NumPy. Q1 is the four-variable box "
        f"`{q1['query']}` ({q1['hits']:,} hits) and the values of seven variables there; "
        "Q2-Q4 interpolate the field at those particles (linear, bilinear, trilinear).",
        "",
        "| comparison | ratio | goal |",
        "|---|---:|---:|",
    ]
    met, missed = [], []
    for label, a, b, goal in goal_rows(r):
        x = a["median"] / b["median"]
        flag = " (!)" if loaded(a, limit) or loaded(b, limit) else ""
        lines.append(f"| {label} | {x:.1f}x{flag} | {goal_wanted(goal)} |")
        (met if goal_met(x, goal) else missed).append(label)
    floor = prep.get("write floor")
    floor_text = (
        ""
        if floor is None
        else " Writing the copy's bytes durably with no compute (the disk's floor, measured "
        f"in the same run) takes {floor['median'] / prep['read']['median']:.1f}x the warm "
        "plain read alone."
    )
    plain = prep.get("numpy reorg")
    if plain is not None:
        one = prep["reorg 1 thread"]["median"]
        floor_text += (
            " The plain NumPy program for the same copy (read, bin, stable argsort, gather, "
            f"write durably) takes {plain['median'] / prep['read']['median']:.1f}x the plain "
            f"read; Quarry on 1 thread is {plain['median'] / one:.1f}x faster than it."
        )
    small = [
        (int(n), t["numpy"]["median"] / t["quarry"]["median"])
        for n, t in prep.get("small", {}).items()
    ]
    slower = [f"{n:,} rows ({r:.2f}x)" for n, r in small if round(r, 2) < 1.0]
    if slower:
        floor_text += (
            " On small tables it loses to that program: NumPy's time over Quarry's is "
            f"{', '.join(slower)}, the copy's file, manifest and fsyncs outweighing the work."
        )
    lines += [
        "",
        f"The copy is {prep['copy_bytes'] / prep['raw_bytes']:.2f}x the raw bytes of the "
        f"variables it holds.{floor_text} Goals met: {len(met)} of {len(met) + len(missed)}"
        + (f"; missed: {'; '.join(missed)}." if missed else "."),
    ]
    return "\n".join(lines)


def tunables_section(res: dict[str, Any]) -> str:
    par = res["parallel"]
    sweep = {tuple(sorted(r["options"].items())): r for r in par["sweep"]}

    def row(**options: int) -> dict[str, Any]:
        return sweep[tuple(sorted(options.items()))]

    base = row(block_len=1 << 20)
    box = "count box"
    between = "count energy > 0.31416 (between edges)"
    typed = "values x,y,z of 1.5 < energy < 1.6"

    def build(r: dict[str, Any]) -> str:
        return f"{r['build']['median']:.2f} s"

    def q(r: dict[str, Any], key: str) -> str:
        return _ms(r["queries"][key])

    def size(r: dict[str, Any]) -> str:
        pct = 100 * (r["bytes"] / base["bytes"] - 1)
        return f"{abs(pct):.0f} % {'larger' if pct >= 0 else 'smaller'}"

    small, large = row(block_len=1 << 18), row(block_len=1 << 22)
    b256, b4096 = row(bins=256), row(bins=4096)
    med, eff = _parallel_times(par["results"][par["sets"][1][0]])

    scan = "count ux*ux + uy*uy > 1.0 (scan)"
    checked = base["rows_checked"]
    lines = [
        f"Each default comes from [benches/REPORT-parallel.md](benches/REPORT-parallel.md), "
        f"measured on {par['n']:,} particles, all cores ({conditions(par['meta'])}); this "
        "table is generated by `benches/readme_figures.py`:",
        "",
        "| option | default | evidence |",
        "|---|---|---|",
        f"| `--block-size` (rows per block) | 1,048,576 | 262,144 builds in {build(small)} "
        f"against {build(base)} and counts the 4-variable box in {q(small, box)} against "
        f"{q(base, box)}, with an index {size(small)} and 4x the blocks to track (headers, "
        f"manifest, the MPI gather). 4,194,304 builds in {build(large)} (fewer blocks to "
        f"share over threads) and counts the box in {q(large, box)} (coarser zone maps). Use "
        "smaller blocks when a file has fewer than a few blocks per core. |",
        f"| `--jobs` (threads) | one per core | 2 threads build {par['steps']} steps at "
        f"{eff('1x2', 'build')} efficiency ({med('1x1', 'build'):.1f} s -> "
        f"{med('1x2', 'build'):.1f} s); the box count goes {med('1x1', box) * 1e3:.1f} -> "
        f"{med('1x2', box) * 1e3:.1f} ms and the scan of `ux*ux + uy*uy > 1.0` "
        f"{med('1x1', scan) * 1e3:.0f} -> {med('1x2', scan) * 1e3:.0f} ms. |",
        "| `--ranks-per-file` | ranks / files, at least 1 | A rank that has whole files writes "
        "ordinary single-file indexes, with no shards and no gather. Two ranks on one "
        f"{par['steps']}-step file build at {eff('2x1', 'build')} efficiency, so sharing a "
        "file is worth it when there are fewer files than ranks. |",
        f"| `--bins` | 1024 | For `energy > 0.31416`, a literal between edges, 1024 bins "
        f"check {checked[between]:,} rows ({q(base, between)}); 256 bins check "
        f"{b256['rows_checked'][between]:,} ({q(b256, between)}) with an index "
        f"{size(b256)}; 4,096 bins check {b4096['rows_checked'][between]:,} "
        f"({q(b4096, between)}) with an index {size(b4096)}. Literals of 2 significant "
        f"digits fall on edges whatever the bins: the box counts in {q(b256, box)} (256), "
        f"{q(base, box)} (1024) and {q(b4096, box)} (4,096). |",
        "| `--precision` | 2 digits | Every 2-significant-digit decimal is an edge, so typed "
        f"literals such as `1.5 < energy < 1.6` check {checked[typed]:,} rows: "
        f"{q(base, typed)} for x,y,z values. |",
    ]
    return "\n".join(lines)


def replace_between(text: str, key: str, body: str) -> str:
    begin, end = MARKERS[key]
    a, b = text.index(begin) + len(begin), text.index(end)
    return text[:a] + "\n" + body + "\n" + text[b:]


def rendered(readme: str, res: dict[str, Any]) -> str:
    """``readme`` with its generated parts rewritten from ``res``."""
    readme = replace_between(readme, "bench", bench_section(res))
    readme = replace_between(readme, "reorg", reorg_section(res))
    return replace_between(readme, "tunables", tunables_section(res))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--check", action="store_true", help="exit 1 if README.md is stale")
    args = p.parse_args(argv)
    with open(README) as fh:
        readme = fh.read()
    new = rendered(readme, load_results())
    if args.check:
        if new != readme:
            print(
                "README.md's benchmark figures differ from the reports; run "
                "python benches/readme_figures.py",
                file=sys.stderr,
            )
            return 1
        return 0
    with open(README, "w") as fh:
        fh.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())

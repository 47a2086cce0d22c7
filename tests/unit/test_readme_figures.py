"""The README's benchmark figures and the Markdown reports are rendered from the
committed results (benches/REPORT*.json), never typed by hand."""

from __future__ import annotations

import copy
import doctest
import importlib
import json
import os
import re
import sys
from types import ModuleType
from typing import Any

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(REPO, "benches")


def bench_module(name: str) -> ModuleType:
    if BENCH not in sys.path:
        sys.path.insert(0, BENCH)
    return importlib.import_module(name)


def results(name: str) -> dict[str, Any]:
    with open(os.path.join(BENCH, f"{name}.json")) as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def test_readme_figures_are_the_reports() -> None:
    figures = bench_module("readme_figures")
    with open(os.path.join(REPO, "README.md")) as fh:
        readme = fh.read()
    for begin, end in figures.MARKERS.values():
        assert readme.count(begin) == 1 and readme.count(end) == 1
    assert readme == figures.rendered(readme, figures.load_results()), (
        "README.md's benchmark figures differ from benches/REPORT*.json: run "
        "python benches/readme_figures.py"
    )


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("run", "REPORT"),
        ("series", "REPORT-series"),
        ("parallel", "REPORT-parallel"),
        ("insitu", "REPORT-insitu"),
        ("reorg", "REPORT-reorg"),
    ],
)
def test_markdown_reports_are_rendered_from_their_results(module: str, name: str) -> None:
    with open(os.path.join(BENCH, f"{name}.md")) as fh:
        committed = fh.read()
    assert committed == bench_module(module).render(results(name))


def test_a_loss_is_named_in_the_readme_text() -> None:
    figures = bench_module("readme_figures")
    run, series = results("REPORT"), results("REPORT-series")
    run, series = copy.deepcopy(run), copy.deepcopy(series)
    workload = copy.deepcopy(results("REPORT-720"))
    row = run["rows"][0]
    row["warm"]["quarry_1"]["median"] = row["warm"]["numpy"]["median"] * 4
    halo = workload["files"]["halo"]
    halo["quarry"]["median"] = halo["numpy"]["median"] * 2
    opening = copy.deepcopy(results("REPORT-opening"))
    hdf5 = opening["formats"]["hdf5"]["index"]
    hdf5["plain"] = dict(hdf5["cold"], median=hdf5["cold"]["median"] / 4)
    text = " ".join(figures.losses(run, series, workload, opening))
    assert f"- warm: {row['output']} of `{row['query']}` (0.25x)" in text
    assert "the 720-step halo, one file per step (0.5x)" in text
    assert (
        "opening a small hdf5 file and counting `energy > 1.0`, against the hdf5 "
        "library's own reader and NumPy (0.25x)"
    ) in text
    assert "costs more than NumPy's pass over columns already in memory" in text


def test_the_reorg_goals_are_judged_from_its_report() -> None:
    """README: the reorganised copy's figures say which of issue 12's goals are met."""
    figures = bench_module("readme_figures")
    res = {"reorg": copy.deepcopy(results("REPORT-reorg"))}
    reorg = res["reorg"]
    prep, q1 = reorg["prepare"], reorg["q1"]
    for t in [*prep.values(), *q1.values()]:
        if isinstance(t, dict) and "others" in t:
            t["others"] = 0.0  # a quiet run: no figure flagged
    prep["cold works"] = True
    prep["read cold"] = dict(prep["read"], median=prep["read"]["median"] * 3)
    for label in ("1 thread", "all cores"):
        prep[f"reorg {label}"]["median"] = prep["read"]["median"] * 2.5
        prep[f"reorg {label} cold"] = dict(prep["read"], median=prep["read"]["median"] * 6)
    q1["index"]["median"] = q1["mdbin"]["median"] * 1.5
    q1["numpy cold"]["median"] = q1["mdbin"]["median"] * 100
    q1["numpy warm"]["median"] = q1["mdbin"]["median"] * 60
    for j in reorg["joins"].values():
        j["numpy"]["median"], j["numpy"]["others"], j["quarry"]["others"] = (
            j["quarry"]["median"] * 30,
            0.0,
            0.0,
        )
    text = figures.reorg_section(res)
    assert "| reorganisation on 1 thread, over the plain read (warm) | 2.5x |" in text
    assert "| reorganisation on all cores, over the plain read (both cold) | 2.0x |" in text
    assert "| Q1 values: MDBin vs the bitmap index | 1.5x |" in text
    # One goal missed, however many joins the report times (only Q2-Q4 are goals).
    judged = re.search(r"Goals met: (\d+) of (\d+); missed: ([^.]*)\.", text)
    assert judged is not None, text
    met, goals, missed = judged.groups()
    assert int(met) == int(goals) - 1
    assert missed == "Q1 values: MDBin vs the bitmap index"


def test_the_reorg_figures_name_where_the_numpy_program_wins() -> None:
    """README and report: the NumPy program for the same copy, and the table sizes where
    the reorganisation loses to it."""
    figures = bench_module("readme_figures")
    reorg = copy.deepcopy(results("REPORT-reorg"))
    prep, read = reorg["prepare"], reorg["prepare"]["read"]
    prep["reorg 1 thread"] = dict(read, median=0.4)
    prep["numpy reorg"] = dict(read, median=4.0)
    prep["small"] = {
        "1000": {"quarry": dict(read, median=0.010), "numpy": dict(read, median=0.003)},
        "1000000": {"quarry": dict(read, median=0.050), "numpy": dict(read, median=0.200)},
    }
    text = figures.reorg_section({"reorg": reorg})
    assert "Quarry on 1 thread is 10.0x faster than it." in text
    assert "NumPy's time over Quarry's is 1,000 rows (0.30x), the copy's" in text
    assert "1,000,000 rows" not in text
    report = bench_module("reorg").render(reorg)
    assert "| 1,000,000 | 50.00 [" in report
    assert "reorganising 1,000 rows takes 3.3x the NumPy program's time (10.0 ms" in report
    assert "reorganising 1,000,000 rows" not in report


def test_the_workload_goals_met_are_computed_from_its_report() -> None:
    figures = bench_module("readme_figures")
    workload = copy.deepcopy(results("REPORT-720"))
    core = workload["h5part"]["core"]
    core["quarry"]["median"] = core["numpy"]["median"] / 2
    text = " ".join(figures.workload_part(workload))
    assert "the warm slices (one file, 720 step groups)" in text


def test_a_figure_taken_while_other_processes_ran_is_flagged() -> None:
    timing = bench_module("timing")
    # The load average counts the benchmark's own threads, so it does not decide.
    quiet = timing.summarise([0.001, 0.002, 0.003], 2.1, 2.3, others=0.1).as_dict()
    busy = timing.summarise([0.001, 0.002, 0.003], 0.2, 0.3, others=0.9).as_dict()
    assert "(!)" not in timing.ms(quiet, timing.OTHERS_LIMIT)
    assert timing.ms(busy, timing.OTHERS_LIMIT).endswith("(!)")


def test_other_processes_cpu_excludes_this_process() -> None:
    timing = bench_module("timing")
    timing.measure(lambda: sum(i * i for i in range(200_000)), runs=3)
    # This process's own work is not counted as others': on an idle machine it is ~0;
    # on any machine it cannot exceed the other cores.
    assert 0.0 <= timing.others() <= len(os.sched_getaffinity(0))


def test_timing_helpers_examples() -> None:
    for name in ("timing",):
        failed, tried = doctest.testmod(bench_module(name))
        assert tried > 0 and failed == 0

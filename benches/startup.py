"""Start-up benchmark: a whole ``quarry query FILE "energy > 1.0" --count`` process,
against the bare h5py + NumPy one-liner a scientist would type for the same count.

A CLI process answers one question, so its start-up is part of every answer: Python
starting, the imports, opening the index, the count. A count the index answers alone
(here the literal 1.0 is a bin edge, so no boundary bin has rows to check) imports
neither NumPy nor h5py and reads only the index; a count with candidates to check
(``energy > 1.0123``) reads them from the file, importing both. Each is timed as whole
processes (as the ``quarry`` console script runs them), the median of repeated runs,
next to the one-liner and to ``python -c pass`` (the interpreter alone) timed in the
same run. Every count is checked against NumPy's first.

Data: 1,048,576 float64 ``energy`` values (normal, seed 15) in one HDF5 file, indexed
with the defaults. Results go to ``benches/REPORT-startup.json``;
``benches/REPORT-startup.md`` is rendered from it (``--render`` re-renders only).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

from timing import (
    close_meta,
    header,
    installed_environment,
    load,
    log,
    machine,
    ms,
    others,
    ratio,
    summarise,
    write_report,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "benches", "data", "startup.h5")
REPORT = os.path.join(REPO, "benches", "REPORT-startup.md")
RESULTS = os.path.join(REPO, "benches", "REPORT-startup.json")
N = 1 << 20
#: The index answers this one alone (1.0 is a bin edge) ...
INDEX_QUERY = "energy > 1.0"
#: ... and this one after checking a boundary bin's rows against the file.
CHECKED_QUERY = "energy > 1.0123"
#: Where the one-liner compares; both queries' threshold is put in its place.
ONE_LINER = (
    "import h5py, numpy; f = h5py.File({path!r}); "
    "print(int(numpy.count_nonzero(f['energy'][:] > {threshold})))"
)


def _environment() -> dict[str, str]:
    """This checkout's package first on the path, as the tests run it, with
    bytecode caches written and used, as an installed package has them
    (compiling every module at every start would be timed otherwise)."""
    env = installed_environment()
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (os.path.join(REPO, "python"), env.get("PYTHONPATH")) if p
    )
    return env


def ensure_data() -> None:
    """The data file, made once, and its index, built afresh by this Quarry: an
    index left by an older one (an earlier format, no recorded listing) would
    time that one's opening instead."""
    if not os.path.exists(DATA):
        import h5py
        import numpy as np

        os.makedirs(os.path.dirname(DATA), exist_ok=True)
        with h5py.File(DATA, "w") as f:
            f["energy"] = np.random.default_rng(15).normal(size=N)
    subprocess.run(
        [sys.executable, "-m", "quarry.cli.main", "index", DATA, "--force"],
        check=True,
        capture_output=True,
        env=_environment(),
    )


def _count(cmd: list[str]) -> int:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=_environment())
    return int(out.stdout.strip())


#: What the ``quarry`` console script runs (``python -m`` would add runpy's import).
QUARRY = "import sys; from quarry.cli.main import main; sys.exit(main())"


def _quarry(query: str) -> list[str]:
    return [sys.executable, "-c", QUARRY, "query", DATA, query, "--count"]


def _numpy(query: str) -> list[str]:
    threshold = query.split(">")[1].strip()
    return [sys.executable, "-c", ONE_LINER.format(path=DATA, threshold=threshold)]


def _imports(query: str) -> dict[str, bool]:
    """Whether the count of ``query`` imported NumPy and h5py."""
    probe = (
        "import runpy, sys; sys.argv = ['quarry', *sys.argv[1:]]\n"
        "try:\n    runpy.run_module('quarry.cli.main', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('numpy' in sys.modules, 'h5py' in sys.modules, file=sys.stderr)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, "query", DATA, query, "--count"],
        check=True,
        capture_output=True,
        text=True,
        env=_environment(),
    )
    numpy, h5py = out.stderr.split()[-2:]
    return {"numpy": numpy == "True", "h5py": h5py == "True"}


def measure_interleaved(commands: dict[str, list[str]], runs: int) -> dict[str, dict[str, float]]:
    """Wall time of each whole process of ``commands``, taken in turn run after
    run (one untimed run of each first), so that a change in the machine's
    load strikes them all alike; each as :func:`timing.measure` gives it."""
    env = _environment()
    others()
    for cmd in commands.values():
        subprocess.run(cmd, check=True, capture_output=True, env=env)
    before = load()
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, cmd in commands.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, env=env)
            times[name].append(time.perf_counter() - t0)
    after, busy = load(), others()
    return {name: summarise(t, before, after, busy).as_dict() for name, t in times.items()}


def measure_all(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    meta = machine()
    ensure_data()
    res: dict[str, Any] = {"n": N, "queries": {}}
    commands = {"python": [sys.executable, "-c", "pass"]}
    for label, query in (("index", INDEX_QUERY), ("checked", CHECKED_QUERY)):
        expected = _count(_numpy(query))
        got = _count(_quarry(query))
        assert got == expected, f"{query}: quarry counted {got}, NumPy {expected}"
        res["queries"][label] = {"query": query, "count": got, "imports": _imports(query)}
        commands[f"{label} quarry"] = _quarry(query)
        commands[f"{label} numpy"] = _numpy(query)
    log(f"{len(commands)} commands, {args.runs} runs each, in turn")
    timed = measure_interleaved(commands, args.runs)
    res["python"] = timed["python"]
    for label, q in res["queries"].items():
        q["quarry"], q["numpy"] = timed[f"{label} quarry"], timed[f"{label} numpy"]
    close_meta(meta, res, started)
    return res


def render(res: dict[str, Any]) -> str:
    meta, limit = res["meta"], res["meta"]["others_limit"]
    rows = []
    for label, what in (
        ("index", "answered by the index alone"),
        ("checked", "a boundary bin's rows checked against the file"),
    ):
        q = res["queries"][label]
        imported = [name for name, was in q["imports"].items() if was] or ["neither"]
        rows.append(
            f'| `quarry query FILE "{q["query"]}" --count` | {what} | '
            f"{' and '.join(imported)} | {ms(q['numpy'], limit)} | {ms(q['quarry'], limit)} | "
            f"{ratio(q['numpy'], q['quarry'])} | {q['count']:,} |"
        )
    lines = [
        "# Quarry start-up benchmark",
        "",
        *header(meta),
        f"- Data: {res['n']:,} float64 `energy` values (normal) in one HDF5 file, "
        "indexed with the defaults",
        "- Reproduce: `make bench`, or `python benches/startup.py [--runs R]`; "
        "`--render` rewrites this file from `benches/REPORT-startup.json`.",
        "",
        "Whole processes, each the median of repeated runs: `quarry query ...` (run as its "
        "console script runs it: `from quarry.cli.main import main`) against the one-liner "
        '`python -c "import h5py, numpy; f = '
        "h5py.File(FILE); print(int(numpy.count_nonzero(f['energy'][:] > X)))\"`. "
        "The commands were run in turn, run after run, so that the machine's load struck "
        "them alike. Ratios are one-liner time / Quarry time. Every count was checked "
        "against the "
        "one-liner's first. The interpreter alone (`python -c pass`) took "
        f"{ms(res['python'], limit)} ms.",
        "",
        "| command | how it is answered | imported | h5py+NumPy ms | Quarry ms | ratio | count |",
        "|---|---|---|---:|---:|---:|---:|",
        *rows,
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--runs", type=int, default=21, help="timed runs per measurement")
    p.add_argument("--render", action="store_true", help="only re-render the report")
    args = p.parse_args(argv)
    return write_report(args.render, partial(measure_all, args), render, RESULTS, REPORT)


if __name__ == "__main__":
    sys.exit(main())

"""Timing for the benchmarks: a median of repeated runs, its spread, and the machine's
load around it, so that a report can say how far each figure is to be trusted.

Every bench script times through :func:`measure` and stores the :class:`Timing` it
returns as a plain dict in its results JSON; the Markdown reports and the README's
figures are rendered from those dicts (see ``benches/readme_figures.py``).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

#: The standard data generator of the benchmark machines, used when present. Another
#: path can be given with ``--make-data`` or the ``QUARRY_MAKE_DATA`` environment variable.
DEFAULT_MAKE_DATA = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "..",
    "shared",
    "bench",
    "make_data.py",
)


def make_data_script(given: str | None = None) -> str | None:
    """The data generator to use: ``given``, else ``$QUARRY_MAKE_DATA``, else the shared
    one when it exists; None means the bundled generators."""
    path = given or os.environ.get("QUARRY_MAKE_DATA") or DEFAULT_MAKE_DATA
    return path if os.path.exists(path) else None


#: Cores that other processes may use during a measurement before it is flagged. The
#: load average cannot tell: it counts this benchmark's own threads (about 1 at 1
#: thread, 2 on all cores of this machine), so it is recorded but not the test.
OTHERS_LIMIT = 0.5

#: The shortest window, in seconds, over which other processes' CPU use is averaged:
#: /proc/stat counts in ticks of 10 ms, too coarse for a measurement of a few ms.
OTHERS_WINDOW = 1.0

_snaps: list[tuple[float, float, float]] = []


def _snap() -> tuple[float, float, float]:
    """(wall s, CPU s busy on all cores, CPU s of this process and its waited children)."""
    with open("/proc/stat") as fh:
        fields = [float(v) for v in fh.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    busy = (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")
    t = os.times()
    snap = (time.monotonic(), busy, t.user + t.system + t.children_user + t.children_system)
    _snaps.append(snap)
    del _snaps[:-64]
    return snap


def others() -> float:
    """Cores used by other processes, averaged over at least the last OTHERS_WINDOW s
    (busy CPU time of the machine less this process's and its children's)."""
    end = _snap()
    start = next((s for s in reversed(_snaps[:-1]) if end[0] - s[0] >= OTHERS_WINDOW), _snaps[0])
    wall = end[0] - start[0]
    if wall <= 0:
        return 0.0
    return max(0.0, ((end[1] - start[1]) - (end[2] - start[2])) / wall)


@dataclass(frozen=True)
class Timing:
    """Seconds of one repeated measurement: median, quartiles, extremes, run count,
    the 1-minute load average just before and just after the runs, and the cores
    other processes used meanwhile (see :func:`others`)."""

    median: float
    q1: float
    q3: float
    low: float
    high: float
    runs: int
    load_before: float
    load_after: float
    others: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def load() -> float:
    """The 1-minute load average now."""
    return os.getloadavg()[0]


def summarise(
    times: Sequence[float], load_before: float, load_after: float, others: float = 0.0
) -> Timing:
    """The :class:`Timing` of ``times`` (seconds), measured between the two loads while
    other processes used ``others`` cores.

    Examples
    --------
    >>> t = summarise([3.0, 1.0, 2.0, 5.0, 4.0], 0.1, 0.2)
    >>> t.median, t.q1, t.q3, t.low, t.high, t.runs
    (3.0, 2.0, 4.0, 1.0, 5.0, 5)
    """
    ordered = sorted(times)
    if len(ordered) >= 2:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    else:
        q1 = q3 = ordered[0]
    return Timing(
        median=statistics.median(ordered),
        q1=q1,
        q3=q3,
        low=ordered[0],
        high=ordered[-1],
        runs=len(ordered),
        load_before=load_before,
        load_after=load_after,
        others=others,
    )


def measure(
    fn: Callable[[], object],
    runs: int = 7,
    warmup: int = 1,
    setup: Callable[[], object] | None = None,
) -> dict[str, float]:
    """Time ``fn``: ``warmup`` untimed calls, then ``runs`` timed calls, each
    call after ``setup`` (untimed; e.g. dropping a file from the page cache).

    Returns :meth:`Timing.as_dict` (JSON-ready).

    Examples
    --------
    >>> t = measure(lambda: sum(range(100)), runs=3)
    >>> t["runs"], t["low"] <= t["median"] <= t["high"]
    (3, True)
    """
    _snap()
    for _ in range(warmup):
        if setup is not None:
            setup()
        fn()
    before = load()
    times = []
    for _ in range(runs):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return summarise(times, before, load(), others()).as_dict()


def installed_environment() -> dict[str, str]:
    """This environment with bytecode caches written and used, as an installed
    package has them: under ``PYTHONDONTWRITEBYTECODE`` every start of a process
    would compile each of Quarry's modules again (about 100 ms), and that would
    be timed."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def measure_process(
    cmd: list[str], runs: int = 7, env: dict[str, str] | None = None
) -> dict[str, float]:
    """Wall time of a whole process ``cmd`` (one untimed run first, which also
    writes the bytecode caches), as :func:`measure`; ``env`` defaults to
    :func:`installed_environment`."""
    env = installed_environment() if env is None else env

    def once() -> None:
        subprocess.run(cmd, check=True, capture_output=True, env=env)

    return measure(once, runs=runs, warmup=1)


def loaded(t: dict[str, float], limit: float = OTHERS_LIMIT) -> bool:
    """Whether other processes used more than ``limit`` cores during measurement ``t``."""
    return t["others"] > limit


def ms(t: dict[str, float], limit: float) -> str:
    """``t``'s median in ms with its interquartile range, flagged ``(!)`` when loaded.

    Examples
    --------
    >>> t = summarise([0.010, 0.011, 0.012], 0.1, 2.5, others=0.8).as_dict()
    >>> ms(t, 0.5)
    '11.00 [10.50–11.50] (!)'
    """
    flag = " (!)" if loaded(t, limit) else ""
    return f"{t['median'] * 1e3:.2f} [{t['q1'] * 1e3:.2f}–{t['q3'] * 1e3:.2f}]{flag}"


def seconds(t: dict[str, float], limit: float) -> str:
    """``t``'s median in s with its interquartile range, flagged ``(!)`` when loaded."""
    flag = " (!)" if loaded(t, limit) else ""
    return f"{t['median']:.2f} [{t['q1']:.2f}–{t['q3']:.2f}]{flag}"


def ratio(base: dict[str, float], tool: dict[str, float]) -> str:
    """``base`` median / ``tool`` median, with a wording for losses.

    Examples
    --------
    >>> ratio({"median": 0.3}, {"median": 0.1}), ratio({"median": 0.1}, {"median": 0.4})
    ('3.0x', '0.25x')
    >>> ratio({"median": 0.0003}, {"median": 0.13})
    '0.0023x'
    """
    r = base["median"] / tool["median"]
    return f"{r:.1f}x" if r >= 1 else f"{r:.2g}x"


def break_even(one_off_s: float, base: dict[str, float], tool: dict[str, float]) -> str:
    """How many queries repay a one-off cost: ``one_off / (base - tool)``, or "never".

    Examples
    --------
    >>> break_even(2.0, {"median": 0.03}, {"median": 0.01})
    '100'
    >>> break_even(1.0, {"median": 1.0}, {"median": 2.0})
    'never'
    """
    saved = base["median"] - tool["median"]
    if saved <= 0:
        return "never"
    return f"{max(1, round(one_off_s / saved)):,}"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    model = mem = "unknown"
    try:
        with open("/proc/cpuinfo") as fh:
            model = next(
                (line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")),
                model,
            )
        with open("/proc/meminfo") as fh:
            kb = next((int(line.split()[1]) for line in fh if line.startswith("MemTotal")), 0)
            mem = f"{kb / 2**20:.1f} GiB"
    except OSError:
        pass
    versions = {"python": platform.python_version()}
    for mod in ("numpy", "h5py", "duckdb", "polars", "pyarrow", "quarry"):
        try:
            versions[mod] = str(__import__(mod).__version__)
        except ImportError:
            versions[mod] = "not installed"
    return {
        "cores": len(os.sched_getaffinity(0)),
        "cpu": model,
        "memory": mem,
        "os": platform.platform(),
        "versions": ", ".join(f"{k} {v}" for k, v in versions.items()),
        "load_start": load(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def header(meta: dict[str, Any], spread: str = "q1–q3") -> list[str]:
    """The lines every report starts with: machine, load, the flagging rule; ``spread``
    names the range shown in brackets."""
    what = "interquartile range" if spread == "q1–q3" else "fastest and slowest run"
    return [
        f"- Date: {meta['date']}; the run took {meta['elapsed_s'] / 60:.1f} min",
        f"- Machine: {meta['cores']} cores ({meta['cpu']}), {meta['memory']}, {meta['os']}",
        f"- Versions: {meta['versions']}",
        f"- Load average (1 min): {meta['load_start']:.2f} at the start, "
        f"{meta['load_end']:.2f} at the end, highest around a measurement "
        f"{meta['load_max']:.2f}. The load average counts this benchmark's own threads "
        "(about 1 while it runs on 1 thread, 2 on all cores), so it does not show "
        "competing work; what does is the CPU time of other processes during a "
        "measurement (the machine's busy time in /proc/stat less this process's and its "
        f"children's), at most {meta['others_max']:.2f} cores here.",
        f"- Each time is the median of repeated runs, shown as `median [{spread}]` ({what}). "
        f"A time marked (!) was taken while other processes used more than {OTHERS_LIMIT} "
        "cores (averaged over at least 1 s): they shared the cores, so trust it less.",
    ]


def max_others(results: Any) -> float:
    """The most cores other processes used during any measurement inside ``results``."""
    if isinstance(results, dict):
        if "others" in results:
            return float(results["others"])
        return max((max_others(v) for v in results.values()), default=0.0)
    if isinstance(results, list):
        return max((max_others(v) for v in results), default=0.0)
    return 0.0


def max_load(results: Any) -> float:
    """The highest load recorded around any measurement inside ``results``."""
    if isinstance(results, dict):
        if "load_before" in results:
            return max(results["load_before"], results["load_after"])
        return max((max_load(v) for v in results.values()), default=0.0)
    if isinstance(results, list):
        return max((max_load(v) for v in results), default=0.0)
    return 0.0


def close_meta(meta: dict[str, Any], res: dict[str, Any], started: float, **extra: Any) -> None:
    """Finish a run's ``meta`` (time taken, load at the end, the most cores
    other processes used, the highest load; ``extra`` overrides) and store
    it in ``res``."""
    meta.update(
        elapsed_s=time.perf_counter() - started,
        load_end=load(),
        others_limit=OTHERS_LIMIT,
        others_max=max_others(res),
        load_max=max_load(res),
    )
    meta.update(extra)
    res["meta"] = meta


def write_report(
    render_only: bool,
    measure: Callable[[], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
    results: str,
    report: str,
) -> int:
    """Measure (or, with ``render_only``, load the last results from
    ``results``), keep the results as JSON and write the Markdown ``report``."""
    if render_only:
        with open(results) as fh:
            res = json.load(fh)
    else:
        res = measure()
        with open(results, "w") as fh:
            json.dump(res, fh, indent=1)
    with open(report, "w") as fh:
        fh.write(render(res))
    log(f"wrote {report}")
    return 0

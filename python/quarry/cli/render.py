"""What ``quarry`` prints, as pure functions from results to JSON-ready
dicts and text lines, so that every front end (the command line, the coming
HTTP service) renders a result the same way. Nothing here reads a file or
prints: the commands in :mod:`quarry.cli.commands` do that.

JSON keys keep the order in which the commands have always printed them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from quarry.index.maintain import IndexReport
    from quarry.query.histogram import Histogram
    from quarry.query.selection import Selection
    from quarry.query.series import SeriesSelection
    from quarry.query.track import Tracks


def milliseconds(seconds: float) -> float:
    """A duration as the ``elapsed_ms`` of every answer.

    Examples
    --------
    >>> milliseconds(0.0123456)
    12.346
    """
    return round(seconds * 1e3, 3)


def query_result(
    sel: Selection,
    query: str,
    file: str,
    count: int,
    seconds: float,
    *,
    saved: str | None = None,
    hits: Mapping[str, Any] | None = None,
    out: str | None = None,
    explain: bool = False,
) -> dict[str, Any]:
    """``quarry query FILE QUERY --json``: the query, the file, what names
    resolved to, aggregates, where the selection was ``saved``, the
    ``count``, the ``hits`` as lists (``{"ids": [...]}``, ``{"coords": ...}``
    or ``{"values": {name: [...]}}``), the ``out`` file, the time taken and,
    with ``explain``, the work done (:meth:`Selection.stats`) and each
    condition's access path (:meth:`Selection.access`)."""
    result: dict[str, Any] = {"query": query, "file": file}
    if sel.resolved:
        result["resolved"] = sel.resolved
    if sel.aggregates:
        result["aggregates"] = [a.to_dict() for a in sel.aggregates]
    if saved:
        result["saved"] = saved
    result["count"] = count
    result.update(hits or {})
    if out:
        result["out"] = out
    result["elapsed_ms"] = milliseconds(seconds)
    if explain:
        result["stats"] = sel.stats().to_dict()
        result["plan"] = [a.to_dict() for a in sel.access()]
    return result


def explain_lines(sel: Selection) -> str:
    """``--explain`` without ``--json``: the work done on one line, then
    each condition's access path (index or scan) with the estimate that
    chose it."""
    stats = sel.stats().to_dict()
    lines = ["explain: " + " ".join(f"{k}={v}" for k, v in stats.items())]
    lines += [f"plan: {access}" for access in sel.access()]
    return "\n".join(lines)


def csv_lines(columns: Mapping[str, np.ndarray], lead: str | None = None) -> Iterator[str]:
    """Rows of equal-length ``columns`` as CSV lines, floats written to round
    trip; each row led by ``lead`` (already CSV) when given. No header.

    Examples
    --------
    >>> import numpy as np
    >>> list(csv_lines({"id": np.array([1, 2]), "x": np.array([0.1, 2.0])}, "a.h5,3"))
    ['a.h5,3,1,0.1', 'a.h5,3,2,2.0']
    >>> list(csv_lines({"quarry_file": np.array(["a,b.h5"])}))
    ['"a,b.h5"']
    """
    for row in zip(*(c.tolist() for c in columns.values()), strict=True):
        cells = [
            repr(x) if isinstance(x, float) else csv_cell(x) if isinstance(x, str) else str(x)
            for x in row
        ]
        yield ",".join(cells if lead is None else [lead, *cells])


def csv_header(names: Iterable[str]) -> str:
    """A CSV header line of column ``names``, each a cell (:func:`csv_cell`).

    Examples
    --------
    >>> csv_header(["quarry_row", "b,x"])
    'quarry_row,"b,x"'
    """
    return ",".join(csv_cell(name) for name in names)


def csv_cell(text: str) -> str:
    """``text`` as one CSV cell: quoted, its quotes doubled, where it holds a
    comma, a quote or a line break (as the csv module writes it).

    Examples
    --------
    >>> csv_cell("x"), csv_cell("b,x"), csv_cell('a"b')
    ('x', '"b,x"', '"a""b"')
    """
    import csv
    import io

    cell = io.StringIO()
    csv.writer(cell, lineterminator="").writerow([text])
    return cell.getvalue()


def resolved_paths(sel: SeriesSelection) -> dict[str, list[str]]:
    """Each name as written -> the full path it resolved to in every member."""
    out: dict[str, list[str]] = {}
    for _, part in sel:
        for name, path in part.resolved.items():
            out.setdefault(name, []).append(path)
    return out


def series_result(
    query: str,
    sel: SeriesSelection,
    per_step: list[dict[str, Any]],
    seconds: float,
    out: str | None = None,
) -> dict[str, Any]:
    """``quarry query FILE... QUERY --json``: the files, the members (files
    and steps), what names resolved to, each member's aggregates (with its
    file and step), the total and the time taken."""
    result: dict[str, Any] = {
        "query": query,
        "files": list(dict.fromkeys(r["file"] for r in per_step)),
        "members": len(per_step),
        "resolved": resolved_paths(sel),
        **series_aggregates(sel),
    }
    result["count"] = sum(r["count"] for r in per_step)
    result["elapsed_ms"] = milliseconds(seconds)
    if out:
        result["out"] = out
    return result


def series_aggregates(sel: SeriesSelection) -> dict[str, Any]:
    """``{"aggregates": [...]}``: each member's aggregate values (``mean(x)``...)
    with its file and step and the path that gave each, as one file's
    ``--json`` lists them; empty where the query has none."""
    listed = [{"file": m.file, "step": m.step, **a.to_dict()} for m, s in sel for a in s.aggregates]
    return {"aggregates": listed} if listed else {}


def per_step_result(per_step: list[dict[str, Any]]) -> dict[str, Any]:
    """``--per-step``: the total and each member's count.

    Examples
    --------
    >>> per_step_result([{"file": "a.h5", "step": 0, "count": 2},
    ...                  {"file": "a.h5", "step": 1, "count": 3}])["count"]
    5
    """
    return {"count": sum(r["count"] for r in per_step), "per_step": per_step}


def batch_line(query: str, count: int, per_step: list[dict[str, Any]] | None) -> dict[str, Any]:
    """One line of ``--batch``: the query, its count, and with ``--per-step``
    each member's.

    Examples
    --------
    >>> batch_line("x > 1", 4, None)
    {'query': 'x > 1', 'count': 4}
    """
    line: dict[str, Any] = {"query": query, "count": count}
    if per_step is not None:
        line["per_step"] = per_step
    return line


def index_result(
    index: str, variables: list[str], size: int, seconds: float, status: str | None = None
) -> dict[str, Any]:
    """``quarry index FILE --json``: the index file, what it covers, its size
    in bytes, the build's seconds, and ``status`` "up to date" when skipped.

    Examples
    --------
    >>> index_result("r.h5.qidx", ["/x"], 4096, 0.0, "up to date")["status"]
    'up to date'
    """
    report = {"index": index, "variables": variables, "bytes": size, "seconds": round(seconds, 3)}
    if status:
        report["status"] = status
    return report


def built_line(file: str, variables: int, seconds: float, index: str, size: int) -> str:
    """A finished build, as ``quarry index`` reports it.

    Examples
    --------
    >>> built_line("r.h5", 3, 1.234, "r.h5.qidx", 3 * 2**20)
    'indexed 3 variable(s) of r.h5 in 1.23 s -> r.h5.qidx (3.0 MiB)'
    """
    return (
        f"indexed {variables} variable(s) of {file} in {seconds:.2f} s "
        f"-> {index} ({size / 2**20:.1f} MiB)"
    )


def index_report_line(report: IndexReport) -> str:
    """One file of ``quarry index FILE...`` (a :class:`quarry.series.IndexReport`)."""
    if report.status == "built":
        return built_line(
            report.file, len(report.variables), report.seconds, report.index, report.bytes
        )
    return f"skipped {report.file}: its index {report.index} is up to date"


def indexes_result(reports: list[IndexReport], seconds: float) -> dict[str, Any]:
    """``quarry index FILE... --json``: every file's report and the totals."""
    built = sum(r.status == "built" for r in reports)
    return {
        "indexes": [r.to_json() for r in reports],
        "built": built,
        "up_to_date": len(reports) - built,
        "seconds": round(seconds, 3),
    }


def histogram_result(names: list[str], where: str | None, hist: Histogram) -> dict[str, Any]:
    """``quarry hist --json``: the variables, the selection, counts and edges."""
    return {"variables": names, "where": where, **hist.to_json()}


def histogram_lines(hist: Histogram, names: list[str]) -> list[str]:
    """``quarry hist`` as text: one line per bin of a 1-D histogram, a
    summary of one in 2-D or 3-D."""
    if isinstance(hist.edges, list):
        return [
            f"{'x'.join(str(len(e) - 1) for e in hist.edges)} bins over {', '.join(names)}; "
            f"{int(hist.counts.sum())} rows (use --json for the counts)"
        ]
    edges = hist.edges
    lines = []
    for i, count in enumerate(hist.counts.tolist()):
        close = "]" if i == len(hist.counts) - 1 else ")"
        lines.append(f"[{edges[i]:.6g}, {edges[i + 1]:.6g}{close}  {count}")
    return lines


def info_result(info: dict[str, Any], path: str | None) -> dict[str, Any]:
    """``quarry info --json`` (:meth:`quarry.Dataset.info`), with ``--path``
    only the variables in that context."""
    if not path:
        return info
    from quarry.expr.names import in_context

    return {**info, "variables": [v for v in info["variables"] if in_context(v["path"], path)]}


def info_lines(info: dict[str, Any]) -> list[str]:
    """``quarry info`` as text: the file and its index, then one line per
    variable (shape, dtype, whether indexed, units, statistics)."""
    idx = info["index"]
    state = idx.get("state", "none") if idx["exists"] else "none"
    lines = [f"{info['file']}  (index: {idx['path']}, {state})"]
    if idx.get("error"):
        lines.append(f"  index {state}: {idx['error']}")
    for v in info["variables"]:
        mark = "indexed" if v["indexed"] else (v.get("unsupported") or "not indexed")
        if v.get("stale"):
            mark = "index stale"
        if v.get("decoding"):
            mark += f"  [{v['decoding']}]"
        if v.get("units"):
            mark += f"  units {v['units']}"
        if "unitSI" in v:
            mark += f"  unitSI {v['unitSI']:g}"
        if "si_units" in v:
            mark += f"  ({v['si_units']})"
        stats = v.get("stats")
        if stats and stats["count"]:
            mark += (
                f"  min {exact(stats['min'])}  max {exact(stats['max'])}"
                f"  mean {stats['mean']:.6g}  std {stats['std']:.6g}  missing {stats['missing']}"
            )
        lines.append(f"  {v['path']:<40} {tuple(v['shape'])!s:<16} {v['dtype']:<8} {mark}")
    return lines


def exact(value: float) -> str:
    """A minimum or maximum as written: integers in full (``2000003``, not
    ``2e+06``), floats to 6 significant digits.

    Examples
    --------
    >>> exact(2000003), exact(2**63 - 1), exact(0.1234567)
    ('2000003', '9223372036854775807', '0.123457')
    """
    return str(value) if isinstance(value, int) else f"{value:.6g}"


def resolution_line(found: dict[str, Any]) -> str:
    """``quarry info --resolve NAME`` as text, from what
    :func:`quarry.cli.commands.info.describe` found."""
    mark = found.get("unsupported") or ("indexed" if found["indexed"] else "not indexed")
    if found["index"].startswith("unusable"):
        mark += f" (index {found['index']})"
    where = f" under {found['path']}" if found["path"] else ""
    return (
        f"{found['name']}{where} -> {found['variable']}  {tuple(found['shape'])}  "
        f"{found['dtype']}  {mark}"
    )


def track_lines(tracks: Tracks, at_step: int) -> Iterable[str]:
    """``quarry track`` as text: how many particles, then one CSV line per step."""
    yield f"{len(tracks.ids)} particle(s) selected at step {at_step}"
    yield "file,step,found,missing"
    for step in tracks.steps:
        d = step.to_dict()
        yield f"{d['file']},{'' if d['step'] is None else d['step']},{d['found']},{d['missing']}"


def verify_result(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """``quarry verify --json``: whether every file's index still matches,
    and each file's report.

    Examples
    --------
    >>> verify_result([{"file": "a.h5", "ok": True}, {"file": "b.h5", "ok": False}])["ok"]
    False
    """
    return {"ok": all(r["ok"] for r in reports), "files": reports}

"""What ``quarry query`` reports over a series: many files, or one file's
step groups (both come here from :mod:`quarry.cli.commands.query`)."""

from __future__ import annotations

import argparse
import functools
import sys
import time
from functools import partial
from typing import TYPE_CHECKING, Any

from quarry.cli import options, render
from quarry.errors import UsageError
from quarry.outputs.json_text import json_text

if TYPE_CHECKING:
    from quarry.query.selection import Selection
    from quarry.query.series import SeriesSelection


def report_series(args: argparse.Namespace, query: str, sel: SeriesSelection, start: float) -> int:
    """Report ``quarry query``'s answer over a series: the total,
    ``--per-step`` counts as JSON, ``--plot`` of the counts per step; the
    hits' ``--ids``, ``--coords``, ``--coords-of`` and ``--values`` as CSV
    lines led by ``quarry_file,quarry_step`` (or per member with ``--json``),
    or with ``--out`` one group per member holding the ids, coordinates and
    values (:meth:`quarry.SeriesSelection.extract`)."""
    if args.save:
        raise UsageError(
            "--save keeps the rows of one table; over several steps choose one with "
            "--path Step#N (or save per step from Python)"
        )
    rows = bool(args.ids or args.coords or args.coords_of or args.values)
    names = options.names(args.values, "--values")
    if args.out and args.coords_of:
        raise UsageError(
            "over several steps --out writes one group per step with the ids and the "
            "table's coordinates (--ids or --coords --out F.h5|.nc|.parquet); "
            "--coords-of prints"
        )
    _check_before_work(args, sel, names, rows)
    if args.comm is not None or args.out_per_rank:
        from quarry.cli.parallel import shared_answers

        if shared_answers(args, sel, query) is None:
            return 0  # the command is done (or this rank is not rank 0)
    else:
        from quarry.cli.progress import answer_with_progress

        answer_with_progress(args, sel.selections)
    per_step = sel.per_step()
    if rows and args.out:
        sel.extract(args.out, names)
    total = sum(r["count"] for r in per_step)
    if args.plot:
        from quarry.outputs.plots import draw_counts

        draw_counts(per_step, args.plot, query)
    if args.explain and not args.json:
        print(_explain_steps(sel), file=sys.stderr)
    if rows and not args.out:
        _print_rows(args, query, sel, names, per_step)
    elif args.per_step:
        resolved = (
            {"resolved": render.resolved_paths(sel), **render.series_aggregates(sel)}
            if args.json
            else {}
        )
        print(json_text({**render.per_step_result(per_step), **resolved, **_followed(sel)}))
    elif args.json:
        elapsed = time.perf_counter() - start
        result = render.series_result(query, sel, per_step, elapsed, args.out)
        if args.explain:
            result.update(_explained_steps(sel))
        print(json_text({**result, **_followed(sel)}))
    elif args.plot or (rows and args.out):
        written = [f for f in (args.plot, args.out if rows else None) if f]
        print(f"{total} hit(s) in {len(per_step)} step(s) -> {', '.join(written)}")
    else:
        print(total)
    return 0


def _check_before_work(
    args: argparse.Namespace, sel: SeriesSelection, names: list[str], rows: bool
) -> None:
    """What writing the hits would find wrong, found before the work: under
    MPI a mistake found then is said once, by rank 0, with the serial exit
    code; found in the work, it struck one rank and stopped them all."""
    from quarry.outputs.writers import check_groups_path, check_writable
    from quarry.query.series import at_member

    if rows and args.out:
        check_groups_path(args.out)
        check_writable(args.out)
    for member, part in sel:
        at_member(member, functools.partial(part.check_columns, names))


def _explain_steps(sel: SeriesSelection) -> str:
    """``--explain`` over one file's steps (``quarry query`` refuses it over
    several files earlier): each step's work and access paths, as
    :func:`render.explain_lines` gives them, named by their step."""
    lines = []
    for member, part in sel:
        where = f"step {member.step}: " if member.step is not None else f"{member.file}: "
        for line in render.explain_lines(part).splitlines():
            head, _, rest = line.partition(": ")  # "explain: ..." or "plan: ..."
            lines.append(f"{head}: {where}{rest}")
    return "\n".join(lines)


def _explained_steps(sel: SeriesSelection) -> dict[str, Any]:
    """``--explain --json`` over one file's steps: ``stats`` summed over the
    steps, and ``plan``, each step's conditions with their access paths,
    each led by its ``file`` and ``step``."""
    stats: dict[str, int] = {}
    plan = []
    for member, part in sel:
        for key, value in part.stats().to_dict().items():
            stats[key] = stats.get(key, 0) + value
        plan += [{"file": member.file, "step": member.step, **a.to_dict()} for a in part.access()]
    return {"stats": stats, "plan": plan}


def _followed(sel: SeriesSelection) -> dict[str, Any]:
    """:func:`~quarry.insitu.follow_bp.followed_report`, imported only when asked."""
    from quarry.insitu.follow_bp import followed_report

    return followed_report(sel)


def _print_rows(
    args: argparse.Namespace,
    query: str,
    sel: SeriesSelection,
    names: list[str],
    per_step: list[dict[str, Any]],
) -> None:
    """Each member's hits: with --json one object, the members' ids,
    coordinates or values under ``per_step``; else CSV led by
    ``quarry_file,quarry_step``, then each member's columns named as in every
    output (:mod:`quarry.outputs.columns`)."""
    from quarry.outputs.columns import FILE, INDEX, ROW, STEP, own_name
    from quarry.query.series import at_member

    def rows_of(part: Selection) -> dict[str, Any]:
        if args.values:
            return {"values": {n: part.values(n).tolist() for n in names}}
        if args.coords or args.coords_of:
            coords = part.coords_of(args.coords_of) if args.coords_of else part.coords()
            return {"coords": coords.tolist()}
        return {"ids": part.ids().tolist()}

    def table_of(part: Selection) -> dict[str, Any]:
        if args.coords_of:
            coords = part.coords_of(args.coords_of)
            return {f"{INDEX}{k}": coords[:, k] for k in range(coords.shape[1])}
        table = part.columns(names if args.values else [], indices=bool(args.coords))
        if args.coords:
            table.pop(ROW, None)
        return table

    # A member's mistake (a variable of another shape in one step) names its file and step.
    if args.json:
        for entry, (member, part) in zip(per_step, sel, strict=True):
            entry.update(at_member(member, partial(rows_of, part)))
        explained = _explained_steps(sel) if args.explain else {}
        print(json_text({"query": query, **render.per_step_result(per_step), **explained}))
        return
    tables = [at_member(member, partial(table_of, part)) for member, part in sel]
    own = [*(tables[0] if tables else [ROW])]
    print(render.csv_header([own_name(FILE, own), own_name(STEP, own), *own]))
    for (member, _), table in zip(sel, tables, strict=True):
        lead = f"{render.csv_cell(member.file)},{'' if member.step is None else member.step}"
        for line in render.csv_lines(table, lead):
            print(line)

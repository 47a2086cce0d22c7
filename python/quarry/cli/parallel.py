"""``quarry query`` under mpiexec: every rank answers its share, rank 0
reports (or each rank writes its own file with ``--out-per-rank``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from quarry.errors import QuarryError

if TYPE_CHECKING:
    from quarry.query.selection import Selection
    from quarry.series import SeriesSelection


def shared_answers(args: Any, answer: Selection | SeriesSelection) -> list[Selection] | None:
    """Answer with every rank of ``args.comm`` (collective). Returns the
    selections, answered, on rank 0 for the usual output code to report;
    None where nothing is left to do: on other ranks, and once every rank
    has written its own file with ``--out-per-rank``."""
    from quarry.parallel.query import answer_together
    from quarry.series import SeriesSelection

    comm = args.comm
    names = [n.strip() for n in args.values.split(",") if n.strip()] if args.values else []
    selections = answer.selections if isinstance(answer, SeriesSelection) else [answer]
    if args.out_per_rank:
        if comm is None:
            raise QuarryError("--out-per-rank is for runs under mpiexec with several ranks")
        if not args.out or not (args.ids or args.coords or args.values):
            raise QuarryError("--out-per-rank needs --out FILE and --ids, --coords or --values")
        _write_per_rank(args, comm, answer, names)
        return None
    rows = bool(args.ids or args.coords or args.coords_of or args.values or args.save)
    return answer_together(comm, selections, rows, names)


def _write_per_rank(
    args: Any, comm: Any, answer: Selection | SeriesSelection, names: list[str]
) -> None:
    from quarry.outputs import write_positions
    from quarry.parallel.query import parts, rank_path
    from quarry.series import SeriesSelection

    out = rank_path(args.out, comm.rank)
    if isinstance(answer, SeriesSelection):
        mine = parts(comm, answer.selections)
        SeriesSelection(answer.query, answer.members, mine).extract(out, names)
    else:
        (part,) = parts(comm, [answer])
        mine = [part]
        if names:
            part.extract(out, names)
        else:
            write_positions(out, part.coords() if args.coords else part.ids())
    total = comm.reduce(sum(p.count() for p in mine), root=0)
    if comm.rank != 0:
        return
    files = [rank_path(args.out, r) for r in range(comm.size)]
    if args.json:
        print(json.dumps({"query": args.query, "count": total, "out": files}))
    else:
        print(f"{total} hit(s) written to {len(files)} files: {files[0]} ... {files[-1]}")

"""What a long build or query tells the user as it goes: progress bars (on
a terminal only), and a line when a query scans because no index was found."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from quarry.query.selection import Selection


@contextlib.contextmanager
def progress_bar(total: int, what: str, quiet: bool) -> Iterator[Callable[[int], object] | None]:
    """A progress bar of ``total`` rows on a terminal (tqdm); None when stderr
    is not a terminal or with --quiet, so pipes and logs stay clean.

    Examples
    --------
    >>> with progress_bar(100, "querying", quiet=True) as bar:
    ...     bar is None
    True
    """
    if quiet or not sys.stderr.isatty():
        yield None
        return
    try:
        from tqdm import tqdm
    except ImportError:
        yield None
        return
    with tqdm(
        total=total, desc=what, unit="rows", unit_scale=True, file=sys.stderr, leave=False
    ) as bar:
        yield bar.update


def answer_with_progress(args: Any, selections: Sequence[Selection]) -> None:
    """On a terminal, answer ``quarry query``'s selections now behind a
    progress bar (the outputs then reuse the answers); elsewhere leave them
    to be answered when read."""
    say_when_unindexed(args, selections)
    total = sum(s.table.n_rows for s in selections if s.plan is not None)
    rows = bool(args.ids or args.coords or args.coords_of or args.values or args.save)
    with progress_bar(total, "querying", args.quiet) as bar:
        if bar is not None:
            from quarry.parallel.runners import Local

            Local(progress=bar).answer(selections, rows)


def say_when_unindexed(args: Any, selections: Sequence[Selection]) -> None:
    """One line on stderr (unless ``--quiet``) when files of a query have no
    index where Quarry looked, so the query scans their data: an index put
    elsewhere for read-only data is found only with ``--index`` or
    ``QUARRY_INDEX_PATH``, and a silent scan would hide that."""
    from quarry.index.locate import INDEX_PATH_VARIABLE, index_dirs

    if args.quiet:
        return
    planned = (s.dataset for s in selections if s.plan is not None)
    missing = list(dict.fromkeys(d for d in planned if not d.has_index))
    if not missing:
        return
    where = "at --index" if args.index else "beside it"
    if not args.index and index_dirs():
        where += f" or in {INDEX_PATH_VARIABLE}"
    first = missing[0]
    what = first.path if len(missing) == 1 else f"{len(missing)} files ({first.path}, ...)"
    # A reorganised copy answers the boxes of its variables without a scan.
    copies = "its reorganised copy does" if len(missing) == 1 else "their reorganised copies do"
    scanned = (
        f"what {copies} not answer is scanned"
        if all(d.has_copy for d in missing)
        else "scanning the data"
    )
    print(
        f"quarry: no index found for {what} (looked {where}); {scanned}. Build one "
        f"with quarry index, or say where it is with --index DIR or {INDEX_PATH_VARIABLE}",
        file=sys.stderr,
    )

"""Progress bars for long builds and queries: on a terminal only."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
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


def answer_with_progress(args: Any, selections: list[Selection]) -> None:
    """On a terminal, answer ``quarry query``'s selections now behind a
    progress bar (the outputs then reuse the answers); elsewhere leave them
    to be answered when read."""
    pending = [s for s in selections if s.plan is not None]
    total = sum(s.table.n_rows for s in pending)
    rows = bool(args.ids or args.coords or args.coords_of or args.values or args.save)
    with progress_bar(total, "querying", args.quiet) as bar:
        if bar is not None:
            for sel in pending:
                sel.evaluate(rows, bar)

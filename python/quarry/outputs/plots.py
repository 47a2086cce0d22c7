"""Pictures of results, through matplotlib (imported only when drawing)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from quarry.outputs.writers import OutputError, OutputFormatError

if TYPE_CHECKING:
    from quarry.query.histogram import Histogram


def picture_format(path: str) -> str:
    """The format a picture ``path`` is drawn in, by its extension; an
    :class:`OutputFormatError` if not ``.png`` or ``.svg``.

    Examples
    --------
    >>> picture_format("counts.SVG")
    '.svg'
    >>> picture_format("counts.jpg")
    Traceback (most recent call last):
    quarry.outputs.writers.OutputFormatError: cannot draw counts.jpg: use .png or .svg
    """
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".png", ".svg"):
        raise OutputFormatError(f"cannot draw {path}: use .png or .svg")
    return ext


def _matplotlib(path: str) -> tuple[Any, Any]:
    """pyplot and LogNorm, with a headless backend; checks the picture's extension."""
    picture_format(path)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.colors import LogNorm
    except ImportError:
        raise OutputError("drawing needs matplotlib: pip install 'quarry-index[plot]'") from None
    return plt, LogNorm


def draw_histogram(hist: Histogram, path: str, labels: list[str], log: bool, title: str) -> None:
    """Write a 1-D histogram (steps) or a 2-D one (a colour map, log-scaled
    with ``log``) to ``path``; the extension picks PNG or SVG."""
    plt, log_norm = _matplotlib(path)
    fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=100)
    try:
        if isinstance(hist.edges, list):
            if len(hist.edges) != 2:
                raise OutputError("only 1-D and 2-D histograms can be drawn; use --json for 3-D")
            counts = np.asarray(hist.counts, dtype=float)
            norm = (
                log_norm(vmin=max(counts[counts > 0].min(), 1e-12))
                if log and (counts > 0).any()
                else None
            )
            mesh = ax.pcolormesh(hist.edges[0], hist.edges[1], counts.T, norm=norm, cmap="viridis")
            fig.colorbar(mesh, ax=ax, label="count")
            ax.set_xlabel(labels[0])
            ax.set_ylabel(labels[1])
        else:
            ax.stairs(hist.counts, hist.edges, fill=True, color="tab:blue", alpha=0.85)
            if log:
                ax.set_yscale("log")
            ax.set_xlabel(labels[0])
            ax.set_ylabel("count")
        ax.set_title(title)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)


def draw_overlay(
    everything: Histogram,
    selected: tuple[np.ndarray, np.ndarray],
    path: str,
    labels: list[str],
    title: str,
) -> None:
    """All rows as a grey 2-D density (log scale) with the selected rows on top
    in colour: points when there are few, a density when there are many (the
    halo figure of the FastQuery papers)."""
    plt, log_norm = _matplotlib(path)
    assert isinstance(everything.edges, list)
    fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=100)
    try:
        counts = np.asarray(everything.counts, dtype=float)
        masked = np.ma.masked_equal(counts.T, 0)
        norm = None
        if counts.any():
            # The scale starts below the sparsest bin, so a bin of one row is a
            # grey that shows: at the data's own least it was white on white,
            # and data of one row a bin drew no background at all.
            least = counts[counts > 0].min()
            norm = log_norm(vmin=least / 4, vmax=max(counts.max(), 4 * least))
        ax.pcolormesh(everything.edges[0], everything.edges[1], masked, norm=norm, cmap="Greys")
        sx, sy = selected
        if len(sx) <= 20_000:
            ax.scatter(sx, sy, s=2, color="tab:red", label=f"selected ({len(sx):,})")
        else:
            sel, _, _ = np.histogram2d(sx, sy, bins=everything.edges)
            ax.pcolormesh(
                everything.edges[0],
                everything.edges[1],
                np.ma.masked_equal(sel.T, 0),
                norm=log_norm(),
                cmap="autumn",
                alpha=0.8,
            )
            ax.plot([], [], "s", color="tab:red", label=f"selected ({len(sx):,})")
        ax.legend(loc="upper right", markerscale=4)
        ax.set_xlabel(labels[0])
        ax.set_ylabel(labels[1])
        ax.set_title(title)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)


def draw_counts(per_step: list[dict[str, Any]], path: str, title: str) -> None:
    """Hits per member of a series (``{"file", "step", "count"}`` records, in
    order) as bars, or a line when there are many; against the step number
    when all members come from one file, else against the member's position
    with a dashed line where each new file starts.

    Examples
    --------
    >>> import tempfile, os
    >>> png = os.path.join(tempfile.mkdtemp(), "counts.png")
    >>> draw_counts([{"file": "a.h5", "step": s, "count": s * s} for s in range(5)],
    ...             png, "x > 1")
    >>> import matplotlib.image
    >>> matplotlib.image.imread(png).shape
    (480, 640, 4)
    """
    plt, _ = _matplotlib(path)
    counts = np.array([int(r["count"]) for r in per_step], dtype=np.int64)
    files = [r["file"] for r in per_step]
    one_file = len(set(files)) <= 1
    steps = [r["step"] for r in per_step]
    if one_file and all(s is not None for s in steps):
        x = np.array(steps, dtype=np.int64)
        xlabel = "step"
    else:
        x = np.arange(len(per_step))
        xlabel = "file, step" if any(s is not None for s in steps) else "file"
    fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=100)
    try:
        if len(counts) <= 60:
            ax.bar(x, counts, color="tab:blue", alpha=0.85)
        else:
            ax.plot(x, counts, color="tab:blue", marker=".", markersize=3, linewidth=1)
        if not one_file:
            starts = [i for i in range(1, len(files)) if files[i] != files[i - 1]]
            for i in starts:
                ax.axvline(i - 0.5, color="grey", linestyle="--", linewidth=0.8)
            if len(per_step) <= 20:
                labels = [
                    os.path.basename(str(f)) + ("" if s is None else f"\n{s}")
                    for f, s in zip(files, steps, strict=True)
                ]
                ax.set_xticks(x, labels, fontsize=7)
        if one_file or len(per_step) > 20:
            # steps and positions are whole numbers: no tick at step 0.5
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel(xlabel)
        ax.set_ylabel("count")
        what = "steps" if any(s is not None for s in steps) else "files"
        ax.set_title(f"{title}: {int(counts.sum()):,} hits in {len(counts)} {what}")
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)

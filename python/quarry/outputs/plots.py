"""Pictures of results, through matplotlib (imported only when drawing)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from quarry.outputs.writers import OutputError

if TYPE_CHECKING:
    from quarry.query.histogram import Histogram


def _matplotlib(path: str) -> tuple[Any, Any]:
    """pyplot and LogNorm, with a headless backend; checks the picture's extension."""
    if os.path.splitext(path)[1].lower() not in (".png", ".svg"):
        raise OutputError(f"cannot draw {path}: use .png or .svg")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.colors import LogNorm
    except ImportError:
        raise OutputError("drawing needs matplotlib: pip install 'quarry[plot]'") from None
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
        ax.pcolormesh(
            everything.edges[0],
            everything.edges[1],
            masked,
            norm=log_norm() if counts.any() else None,
            cmap="Greys",
        )
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

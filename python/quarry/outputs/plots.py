"""Pictures of results, through matplotlib (imported only when drawing)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from quarry.outputs.writers import OutputError

if TYPE_CHECKING:
    from quarry.query.histogram import Histogram


def draw_histogram(hist: Histogram, path: str, labels: list[str], log: bool, title: str) -> None:
    """Write a 1-D histogram (steps) or a 2-D one (a colour map, log-scaled
    with ``log``) to ``path``; the extension picks PNG or SVG."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".png", ".svg"):
        raise OutputError(f"cannot draw {path}: use .png or .svg")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.colors import LogNorm
    except ImportError:
        raise OutputError("drawing needs matplotlib: pip install 'quarry[plot]'") from None
    fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=100)
    try:
        if isinstance(hist.edges, list):
            if len(hist.edges) != 2:
                raise OutputError("only 1-D and 2-D histograms can be drawn; use --json for 3-D")
            counts = np.asarray(hist.counts, dtype=float)
            norm = (
                LogNorm(vmin=max(counts[counts > 0].min(), 1e-12))
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

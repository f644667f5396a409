"""Draw which stream fills each slot of the first global batches (matplotlib, extra `plot`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from streaming.errors import require


def draw_batches(streams: np.ndarray, names: list[str], png: Path, *, title: str) -> Path:
    """Top: a grid (x = global batch, y = slot) coloured by stream; bottom: stacked counts."""
    matplotlib = require("matplotlib", feature="plan pictures", extra="plot")
    matplotlib.use("Agg")
    plt = require("matplotlib.pyplot", feature="plan pictures", extra="plot")
    colors = plt.get_cmap("tab10" if len(names) <= 10 else "tab20").colors[: len(names)]
    cmap = matplotlib.colors.ListedColormap(colors)
    batches, slots = streams.shape
    fig, (grid, bars) = plt.subplots(2, 1, figsize=(max(6, batches * 0.25), 7),
                                     height_ratios=[3, 1.4], sharex=True)
    grid.imshow(streams.T, aspect="auto", interpolation="nearest", cmap=cmap,
                vmin=-0.5, vmax=len(names) - 0.5, extent=(-0.5, batches - 0.5, slots - 0.5, -0.5))
    grid.set_ylabel("slot in global batch")
    grid.set_title(title)
    counts = np.stack([(streams == s).sum(axis=1) for s in range(len(names))])
    bottom = np.zeros(batches)
    for s, name in enumerate(names):
        bars.bar(np.arange(batches), counts[s], bottom=bottom, color=colors[s], label=name,
                 width=0.9)
        bottom += counts[s]
    bars.set_xlabel("global batch index")
    bars.set_ylabel("samples")
    bars.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return png


def draw_occupancy(traces: list[np.ndarray], png: Path, *, limit: int | None,
                   names: Sequence[int] | None = None) -> Path:
    """Each node's predicted cache bytes over reader steps (`traces[n]`: [k, 2] step, bytes),
    with the cache_limit as a dashed line.

    Args:
        traces: per node, its (step, bytes) changes.
        png: where to draw.
        limit: the cache_limit drawn (None: none).
        names: each trace's node number (default: 0, 1, ...).
    """
    matplotlib = require("matplotlib", feature="plan pictures", extra="plot")
    matplotlib.use("Agg")
    plt = require("matplotlib.pyplot", feature="plan pictures", extra="plot")
    fig, ax = plt.subplots(figsize=(9, 4))
    for node, trace in zip(names if names is not None else range(len(traces)), traces):
        ax.step(trace[:, 0], trace[:, 1] / 2**20, where="post", label=f"node {node}")
    if limit is not None:
        ax.axhline(limit / 2**20, color="black", linestyle="--", label="cache_limit")
    ax.set_xlabel("reader step (samples each reader has read, epochs end to end)")
    ax.set_ylabel("cache MiB")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return png

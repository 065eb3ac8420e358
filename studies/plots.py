"""Plot helpers shared by the studies: readable without the code (titles naming the paper's
figure, axis labels with units, legends), written as PNG with matplotlib's Agg back end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def bar_chart(
    table: pd.DataFrame, title: str, xlabel: str, ylabel: str, log: bool = False, width: float = 8.0
) -> Any:
    """Grouped bars: one group per row of ``table`` (its index), one bar per column."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(width, 4.5))
    n = max(len(table.columns), 1)
    x = np.arange(len(table.index))
    step = 0.8 / n
    for k, column in enumerate(table.columns):
        heights = table[column].to_numpy(dtype=float)
        positions = x + (k - (n - 1) / 2) * step
        ax.bar(positions, heights, step, label=str(column))
        # A point the study could not build is marked where its bar would stand, not left as a gap.
        for position in positions[np.isnan(heights)]:
            ax.text(
                position, 0.01, "n/a", ha="center", va="bottom", fontsize=7, rotation=90, color="#555",
                transform=ax.get_xaxis_transform(),  # at the axis' foot, linear or logarithmic
            )  # fmt: skip
    ax.set_xticks(x, [str(i) for i in table.index])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if log:
        _log_axis(ax.yaxis)
    ax.set_title(title, fontsize=10)
    _legend_outside(ax)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def _log_axis(axis: Any) -> None:
    """A logarithmic axis labelled 1, 2, 5, 10, ... in plain numbers: ratios spanning less than two
    decades get one or two powers of ten as labels otherwise, and read as unlabelled."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    if axis.axis_name == "y":
        axis.axes.set_yscale("log")
    else:
        axis.axes.set_xscale("log")
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def _legend_outside(ax: Any) -> None:
    """The legend right of the axes, where it can never cover a bar or a line."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def line_chart(
    table: pd.DataFrame, title: str, xlabel: str, ylabel: str, logx: bool = False, logy: bool = False
) -> Any:
    """One line per column of ``table`` over its index."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for column in table.columns:
        ax.plot(table.index.to_numpy(), table[column].to_numpy(dtype=float), marker="o", label=str(column))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        _log_axis(ax.yaxis)
    if pd.api.types.is_integer_dtype(table.index) and not logx:
        # Counts (machines, GPUs) get a tick at each measured count, never 2.5 machines.
        ax.set_xticks(table.index.to_numpy())
    ax.set_title(title, fontsize=10)
    _legend_outside(ax)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path

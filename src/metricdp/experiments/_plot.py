"""Matplotlib helpers shared by the experiments: headless figures saved as PNG.

Figures are built on matplotlib's object API with the Agg canvas, never through
``pyplot``: no global state, no GUI backend, safe in threads and on machines without a
display. Files are written atomically (:func:`metricdp.io.atomic_write`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from os import PathLike
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..errors import ValidationError

__all__ = ["Curve", "Series", "line_plot", "new_figure", "plot_grid", "save_png"]

#: One curve of :func:`line_plot`: y values, and optionally error-bar half-widths.
Series = ArrayLike | tuple[ArrayLike, ArrayLike | None]


def new_figure(width: float = 6.4, height: float = 4.2) -> tuple[Any, Any]:
    """A ``(Figure, Axes)`` pair on the Agg canvas (sizes in inches)."""
    from .._figure import new_figure as figure

    fig = figure(width, height)
    return fig, fig.add_subplot()


def save_png(fig: Any, path: str | PathLike[str], dpi: int = 100) -> None:
    """Write ``fig`` as a PNG, atomically (a failed save leaves no partial file)."""
    from .._figure import save_png as save

    save(fig, path, dpi=dpi)


def line_plot(
    path: str | PathLike[str],
    x: ArrayLike,
    series: Mapping[str, Series],
    *,
    xlabel: str,
    ylabel: str,
    title: str | None = None,
    logx: bool = False,
    logy: bool = False,
    markers: Sequence[str] = ("o", "s", "^", "D", "v", "P", "X"),
    dpi: int = 100,
) -> None:
    """Plot one line per series against ``x`` and save it as a PNG.

    Parameters
    ----------
    path : path-like
        The PNG file.
    x : array of shape (k,)
    series : mapping of label to y (shape (k,)) or (y, half_width)
        Half-widths (e.g. standard errors) are drawn as a shaded band.
    xlabel, ylabel, title : str
    logx, logy : bool
        Logarithmic axes.
    """
    xs = np.asarray(x, dtype=np.float64)
    if xs.ndim != 1 or xs.size == 0:
        raise ValidationError(f"x must be a non-empty 1-d array, got shape {xs.shape}")
    if not series:
        raise ValidationError("series is empty: nothing to plot")
    fig, ax = new_figure()
    for k, (label, item) in enumerate(series.items()):
        y, err = item if isinstance(item, tuple) else (item, None)
        ys = np.asarray(y, dtype=np.float64)
        if ys.shape != xs.shape:
            raise ValidationError(f"series {label!r} has shape {ys.shape}, expected {xs.shape} like x")
        marker = markers[k % len(markers)] if len(xs) <= 40 else None
        (line,) = ax.plot(xs, ys, marker=marker, markersize=4, linewidth=1.5, label=label)
        if err is not None:
            e = np.asarray(err, dtype=np.float64)
            if e.shape != xs.shape:
                raise ValidationError(f"half-widths of {label!r} have shape {e.shape}, expected {xs.shape}")
            ax.fill_between(xs, ys - e, ys + e, color=line.get_color(), alpha=0.2, linewidth=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend()
    save_png(fig, path, dpi=dpi)


#: One curve of :func:`plot_grid`: (label, x, y, matplotlib format such as ``"-o"``).
Curve = tuple[str, Any, Any, str]


def plot_grid(
    path: Any,
    panels: Sequence[tuple[str, Sequence[Curve]]],
    *,
    xlabel: str | Sequence[str],
    ylabel: str | Sequence[str],
    logx: bool | Sequence[bool] = False,
    logy: bool | Sequence[bool] = False,
    dpi: int = 100,
) -> None:
    """Panels side by side (two per row), each with its own curves, saved as one PNG.

    Labels and log scales may be given per panel.

    Unlike :func:`metricdp.experiments._plot.line_plot` every curve has its own x (each
    mechanism is plotted at its own measured eps). Uses the Agg canvas and
    :func:`metricdp.experiments._plot.save_png` (atomic).
    """
    from .._figure import new_figure as figure

    if not panels:
        raise ValidationError("nothing to plot: no panels")
    cols = 1 if len(panels) == 1 else 2
    rows = math.ceil(len(panels) / cols)
    fig = figure(6.4 * cols, 4.4 * rows)
    axes = fig.subplots(rows, cols, squeeze=False)
    def per_panel(value: Any) -> list[Any]:
        return [value] * len(panels) if isinstance(value, str | bool) else list(value)

    xlabels, ylabels, logxs, logys = per_panel(xlabel), per_panel(ylabel), per_panel(logx), per_panel(logy)
    for k, (ax, (title, curves)) in enumerate(zip(axes.flat, panels, strict=False)):
        for label, x, y, style in curves:
            xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
            if xs.size:
                ax.plot(xs, ys, style, markersize=4, linewidth=1.4, label=label)
        ax.set_title(title)
        ax.set_xlabel(xlabels[k])
        ax.set_ylabel(ylabels[k])
        if logxs[k]:
            ax.set_xscale("log")
        if logys[k]:
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    save_png(fig, path, dpi=dpi)

"""Headless matplotlib figures for every plot of the library (the ``plot`` extra).

Figures are built on matplotlib's object API (:class:`matplotlib.figure.Figure` on an
Agg canvas), never through ``pyplot``: no global state, and above all no
``matplotlib.use(...)``, which would switch the backend of a user's notebook or GUI
session behind their back. The Agg canvas renders PNGs without a display. matplotlib is
imported here, lazily, through :func:`metricdp._optional.import_optional`, so
``import metricdp`` and every command that draws nothing work without it.
"""

from __future__ import annotations

import io
from os import PathLike
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._optional import import_optional

__all__ = ["hist_range", "new_figure", "png_bytes", "save_png"]


def new_figure(width: float, height: float, layout: str | None = "constrained") -> Any:
    """An empty :class:`matplotlib.figure.Figure` of ``width`` x ``height`` inches on the Agg canvas."""
    figure = import_optional("matplotlib.figure", "plot")
    agg = import_optional("matplotlib.backends.backend_agg", "plot")
    fig = figure.Figure(figsize=(width, height), layout=layout)
    agg.FigureCanvasAgg(fig)
    return fig


def png_bytes(fig: Any, dpi: int = 100, **kwargs: Any) -> bytes:
    """``fig`` rendered as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, **kwargs)
    return buf.getvalue()


def save_png(fig: Any, path: str | PathLike[str], dpi: int = 100, **kwargs: Any) -> None:
    """Write ``fig`` as a PNG, atomically (a failed save leaves no partial file)."""
    from ._atomic import atomic_write

    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=dpi, **kwargs)


def hist_range(values: ArrayLike) -> tuple[float, float] | None:
    """A histogram range for ``values`` that numpy can always cut into bins.

    ``numpy.histogram`` refuses ("Too many bins for data range") data whose span is
    positive but below the float spacing of its bin edges, e.g. losses equal up to
    rounding on a symmetric space (every element of a 2 x 2 grid has the same loss, up to
    1 ulp). Such data is widened to a span of ``1e-6`` times its magnitude (or ``1e-6``
    at 0), which is far above the spacing of the edges; other data gets ``None`` (numpy's
    own range). Non-finite values are left to the caller.
    """
    v = np.asarray(values, dtype=np.float64)
    finite = v[np.isfinite(v)]
    if finite.size == 0:
        return None
    lo, hi = float(finite.min()), float(finite.max())
    scale = max(abs(lo), abs(hi))
    if hi - lo > 1e-9 * scale:
        return None
    pad = 1e-6 * scale if scale > 0 else 1e-6
    mid = (lo + hi) / 2
    return mid - pad, mid + pad

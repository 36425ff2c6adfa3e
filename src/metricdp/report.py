"""A one-file HTML report of a mechanism: privacy, loss, and a picture of what it does.

:func:`render_report` returns one self-contained HTML page (no network, no scripts:
every plot is a PNG inlined as a ``data:`` URI) with

* the claimed epsilon and the audited one (:func:`metricdp.audit.audit`), or a note that
  an estimated (Monte-Carlo) matrix is not audited;
* eps_tight against delta (:func:`metricdp.audit.epsilon_tight`);
* the distribution of the per-element loss L(M, u) with its worst case, quantile and
  the lower bounds of every eps-mDP mechanism on the space (:mod:`metricdp.bounds`),
  saying why a bound is 0 when it is;
* for spaces of 2-d points (geolocation: lat/lon, grids: x/y) a map-like plot of the
  release distribution from a few inputs; for other spaces (words) a table of each
  element's most likely releases;
* with a prior, the Bayes-optimal adversary's error (:mod:`metricdp.adversary`);
* for location spaces (2-d points: lat/lon or a planar grid) the heat map of the true
  locations next to that of the releases, and the histogram of the displacement
  d(true, released): from the matrix (true locations drawn from the prior, uniform
  without one; releases from the matrix: exact distributions, no sampling), and from
  observed rows when they are given (``observed``: each row's true and released label).

Distances are labelled with the space's unit (:func:`metricdp.units.space_unit`).
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Sequence
from os import PathLike
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._figure import hist_range, new_figure, png_bytes
from ._optional import require
from ._validation import check_int, check_probability_vector, check_quantile
from .errors import ValidationError
from .io import atomic_write
from .mechanisms.base import AUDIT_RTOL, Mechanism
from .units import describe_epsilon, space_unit, with_unit

__all__ = ["DEFAULT_DELTAS", "default_inputs", "match_rows", "render_report", "write_report"]

#: The deltas of the eps_tight curve.
DEFAULT_DELTAS = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1)
_MAX_TABLE_ROWS = 200
_MAP_INPUTS = 4

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1100px;
color:#222;background:#fff;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;
vertical-align:top}th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;height:auto}.note{color:#555;font-size:.92em}.ok{color:#1a7f37}.bad{color:#b42318}
"""


def _fig_uri(fig: Any) -> str:
    png = png_bytes(fig, dpi=90, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _img(uri: str, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="{uri}">'


def _fmt(x: float | None, digits: int = 6) -> str:
    if x is None:
        return "n/a"
    return "inf" if math.isinf(x) else f"{x:.{digits}g}"


def default_inputs(mechanism: Mechanism, k: int = _MAP_INPUTS) -> NDArray[np.intp]:
    """k spread-out inputs: the most central point, then farthest-first."""
    d = np.asarray(mechanism.distances)
    chosen = [int(np.argmin(d.mean(axis=1)))]
    near = d[chosen[0]].copy()
    while len(chosen) < min(k, mechanism.n):
        nxt = int(np.argmax(near))
        chosen.append(nxt)
        near = np.minimum(near, d[nxt])
    return np.asarray(chosen, dtype=np.intp)


def _privacy_section(mech: Mechanism, deltas: Sequence[float], unit: str = "") -> str:
    rows = [("mechanism", html.escape(mech.name)), ("points", str(mech.n)),
            ("metric", html.escape(mech.space.metric)), ("epsilon (claimed)", _fmt(mech.epsilon))]
    if unit:  # both forms: per unit and (l, r)
        rows.append(("epsilon (l, r)", html.escape(describe_epsilon(mech.epsilon, unit))))
    if mech.space.policy:  # an extended metric (metricdp.mechanisms.policy)
        rows.append(("policy graph", f"{mech.space.n_components} components, cross-component pairs unprotected"))
    parts = []
    if mech.exact:
        result = mech.audit()
        ok = result.satisfies(mech.epsilon, AUDIT_RTOL)
        verdict = '<span class="ok">passes</span>' if ok else '<span class="bad">FAILS</span>'
        rows.append(("epsilon (audited)", f"{_fmt(result.epsilon, 12)} &mdash; audit {verdict}"))
        tight = [mech.epsilon_tight(delta) for delta in deltas]
        fig = new_figure(6.5, 3.6, layout=None)
        ax = fig.add_subplot()
        ax.plot(deltas, tight, "o-", label="eps_tight(delta)")
        ax.axhline(mech.epsilon, color="k", ls="--", lw=1, label=f"epsilon = {mech.epsilon:.4g}")
        ax.set_xscale("log")
        ax.set_xlabel("delta")
        ax.set_ylabel("eps_tight")
        ax.set_title("smallest eps at which the matrix is (eps, delta)-mDP")
        ax.legend(loc="best")
        parts.append(_img(_fig_uri(fig), "eps_tight against delta"))
        table = "".join(f'<tr><td class="num">{d:g}</td><td class="num">{_fmt(t)}</td></tr>'
                        for d, t in zip(deltas, tight, strict=True))
        parts.append(f"<table><tr><th>delta</th><th>eps_tight</th></tr>{table}</table>")
    else:
        rows.append(("epsilon (audited)", "not audited: the matrix is a Monte-Carlo estimate; "
                     "epsilon is the proven guarantee of the true sampler"))
    head = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return f"<h2>Privacy</h2><table>{head}</table>" + "".join(parts)


def _loss_section(mech: Mechanism, unit: str, quantile: float) -> str:
    from .bounds import lower_bound, lower_bound_quantile

    losses = mech.element_losses()
    worst, q_loss = float(losses.max()), mech.quantile_loss(quantile)
    mean, uniform = float(losses.mean()), float(np.sort(mech.uniform_losses())[-1])
    policy = mech.space.policy  # the packing bounds assume finite distances: none on a policy graph
    lb = None if policy else lower_bound(mech.space, mech.epsilon)
    lbq = None if policy else lower_bound_quantile(mech.space, mech.epsilon, quantile)
    marks = [] if lb is None or lbq is None else [(lbq.value, ":", f"lower bound ({quantile:g}-quantile)"),
                                                  (lb.value, "-.", "lower bound (worst case)")]
    fig = new_figure(6.5, 3.6, layout=None)
    ax = fig.add_subplot()
    # equal losses (a symmetric space) differ by rounding only: a range numpy can cut
    ax.hist(losses, bins=min(50, max(5, mech.n // 4)), range=hist_range(losses), color="tab:blue", alpha=0.75)
    for x, style, label in ((q_loss, "--", f"{quantile:g}-quantile"), (worst, "-", "worst case"), *marks):
        ax.axvline(x, color="k", ls=style, lw=1, label=f"{label} {x:.3g}")
    ax.set_xlabel(with_unit("loss L(M, u)", f"({unit})" if unit else ""))
    ax.set_ylabel("elements")
    ax.set_title("loss of every element: expected distance to the release")
    ax.legend(loc="best", fontsize=8)
    why = ""
    if lb is not None and lbq is not None and (lb.value == 0.0 or lbq.value == 0.0):
        why = ('<p class="note">A lower bound of 0 means that no packing of this space forces any loss at this '
               "epsilon: the packing bound r*(1 - 1/N) is positive only when N(w, S) = sum over the packing of "
               "exp(-eps d(w, s)) exceeds 1 (for the quantile, after removing the n - ceil(qn) largest terms); "
               "with the points this close for this epsilon it does not, so the bound says nothing (it is not "
               "a claim that loss 0 is reachable).</p>")
    u = f" {unit}" if unit else ""
    rows = [("worst case L(M)", worst), (f"{quantile:g}-quantile", q_loss), ("mean (uniform prior)", mean),
            ("releasing a uniform random point (worst case)", uniform)]
    if lb is not None and lbq is not None:
        rows += [(f"lower bound, worst case ({lb.kind})", lb.value),
                 (f"lower bound, {quantile:g}-quantile ({lbq.kind})", lbq.value)]
    table = "".join(f'<tr><th>{html.escape(k)}</th><td class="num">{_fmt(v)}{u}</td></tr>' for k, v in rows)
    return (f"<h2>Loss</h2><table>{table}</table>{_img(_fig_uri(fig), 'distribution of the element losses')}{why}")


def _map_section(mech: Mechanism, inputs: NDArray[np.intp]) -> str:
    pts = np.asarray(mech.space.points)
    geo = mech.space.metric in ("haversine", "elastic-haversine")
    x, y = (pts[:, 1], pts[:, 0]) if geo else (pts[:, 0], pts[:, 1])
    k = len(inputs)
    cols = 2 if k > 1 else 1
    rows = math.ceil(k / cols)
    fig = new_figure(5.2 * cols, 4.6 * rows, layout=None)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, u in zip(axes.ravel(), inputs, strict=False):
        p = np.asarray(mech.matrix[u])
        floor = max(float(p.max()) * 1e-4, 1e-300)
        c = np.log10(np.maximum(p, floor))
        order = np.argsort(p)
        sc = ax.scatter(x[order], y[order], c=c[order], s=12 + 120 * p[order] / p.max(), cmap="viridis")
        ax.scatter([x[u]], [y[u]], marker="*", s=220, c="red", edgecolors="k", label="input")
        ax.set_title(f"releases of {mech.labels[u]}", fontsize=10)
        if geo:
            ax.set_aspect(1.0 / max(math.cos(math.radians(float(np.mean(y)))), 1e-3))
            ax.set_xlabel("longitude")
            ax.set_ylabel("latitude")
        else:
            ax.set_aspect("equal")
        fig.colorbar(sc, ax=ax, label="log10 Pr[release]")
        ax.legend(loc="best", fontsize=8)
    for ax in axes.ravel()[k:]:
        ax.axis("off")
    fig.tight_layout()
    return ("<h2>Where releases go</h2><p class=\"note\">Colour and size: probability of each release from the "
            "input (red star); coordinates only, no map tiles.</p>" + _img(_fig_uri(fig), "release distributions"))


def _table_section(mech: Mechanism, top: int) -> str:
    m = np.asarray(mech.matrix)
    n = mech.n
    shown = min(n, _MAX_TABLE_ROWS)
    k = min(top, n)
    part = np.argpartition(-m[:shown], k - 1, axis=1)[:, :k]
    vals = np.take_along_axis(m[:shown], part, axis=1)
    order = np.argsort(-vals, axis=1, kind="stable")
    best, probs = np.take_along_axis(part, order, axis=1), np.take_along_axis(vals, order, axis=1)
    labels = mech.labels
    body = []
    for u in range(shown):
        cells = "".join(f"<td>{html.escape(labels[v])} <span class=\"note\">{p:.3f}</span></td>"
                        for v, p in zip(best[u], probs[u], strict=True))
        body.append(f"<tr><th>{html.escape(labels[u])}</th><td class=\"num\">{m[u, u]:.3f}</td>{cells}</tr>")
    head = "".join(f"<th>#{i + 1}</th>" for i in range(k))
    more = f'<p class="note">First {shown} of {n} elements.</p>' if shown < n else ""
    return (f"<h2>Most likely releases</h2><table><tr><th>input</th><th>Pr[itself]</th>{head}</tr>"
            + "".join(body) + f"</table>{more}")


def _adversary_section(mech: Mechanism, prior: NDArray[np.float64], unit: str) -> str:
    from .adversary import adversary_report

    rep = adversary_report(mech, prior)
    u = f" {unit}" if unit else ""
    rows = [("adversary's expected error (Bayes-optimal guess)", f"{_fmt(rep['adversary_expected_error'])}{u}"),
            ("... without seeing a release", f"{_fmt(rep['prior_only_error'])}{u}"),
            ("probability of exact re-identification", _fmt(rep["adversary_reidentification"])),
            ("... without seeing a release", _fmt(rep["prior_only_reidentification"])),
            ("expected loss under the prior", f"{_fmt(rep['expected_loss'])}{u}")]
    table = "".join(f"<tr><th>{html.escape(k)}</th><td class=\"num\">{v}</td></tr>" for k, v in rows)
    return f"<h2>Adversary (Shokri et al.)</h2><table>{table}</table>"


def _plane(mech: Mechanism, unit: str) -> tuple[NDArray[np.float64], str, str]:
    """Coordinates for pictures with their axis labels: km east/north of the middle for lat/lon
    (azimuthal equidistant, :class:`~metricdp.location.projection.TangentPlane`), else x, y as they are."""
    pts = np.asarray(mech.space.points, dtype=np.float64)
    if mech.space.metric in ("haversine", "elastic-haversine"):
        from .location.projection import TangentPlane

        lat0 = (float(pts[:, 0].min()) + float(pts[:, 0].max())) / 2
        lon0 = (float(pts[:, 1].min()) + float(pts[:, 1].max())) / 2
        where = f"of ({lat0:.4f}, {lon0:.4f})"
        return TangentPlane(lat0, lon0).forward(pts), f"km east {where}", f"km north {where}"
    u = f" ({unit})" if unit else " (the space's units)"
    return pts, f"x{u}", f"y{u}"


def _heat(ax: Any, xy: NDArray[np.float64], weight: NDArray[np.float64], title: str, vmax: float) -> Any:
    order = np.argsort(weight)
    sc = ax.scatter(xy[order, 0], xy[order, 1], c=weight[order], s=18, marker="s", cmap="magma_r", vmin=0.0,
                    vmax=vmax, linewidths=0)
    ax.set_title(title, fontsize=10)
    ax.set_aspect("equal")
    return sc


def _location_section(
    mech: Mechanism, unit: str, prior: NDArray[np.float64] | None,
    observed: tuple[NDArray[np.intp], NDArray[np.intp]] | None,
) -> str:
    xy, xlabel, ylabel = _plane(mech, unit)
    d = np.asarray(mech.distances)
    m = np.asarray(mech.matrix)
    pi = np.full(mech.n, 1.0 / mech.n) if prior is None else prior
    source = "the prior" if prior is not None else "uniform over the points"
    dist_unit = f" ({unit})" if unit else ""
    panels = [("true locations: " + source, pi, "released (exact, from the matrix)", pi @ m,
               np.ravel(d), np.ravel(pi[:, None] * m), "probability")]
    if observed is not None:
        t, r = observed
        panels.append((f"true locations: {len(t):,} observed rows", np.bincount(t, minlength=mech.n).astype(float),
                       "their releases", np.bincount(r, minlength=mech.n).astype(float), d[t, r],
                       np.ones(len(t)), "rows"))
    fig = new_figure(15.0, 4.4 * len(panels), layout=None)
    axes = fig.subplots(len(panels), 3, squeeze=False)
    fig.subplots_adjust(hspace=0.4, wspace=0.35)
    rows: list[tuple[str, str]] = []
    for (a_title, a_w, b_title, b_w, dist, w, what), ax in zip(panels, axes, strict=True):
        vmax = float(max(a_w.max(), b_w.max())) or 1.0
        _heat(ax[0], xy, a_w, a_title, vmax)
        sc = _heat(ax[1], xy, b_w, b_title, vmax)
        for a in ax[:2]:
            a.set_xlabel(xlabel)
            a.set_ylabel(ylabel)
        fig.colorbar(sc, ax=list(ax[:2]), label=f"{what} per point (same scale in both maps)")
        fin = np.isfinite(dist)  # a policy graph: its blocks never release across components (d = inf)
        dist, w = dist[fin], w[fin]
        total = float(w.sum())
        mean = float((dist * w).sum() / total)
        order = np.argsort(dist)
        cum = np.cumsum(w[order]) / total
        q95 = float(dist[order][min(int(np.searchsorted(cum, 0.95)), len(cum) - 1)])
        ax[2].hist(dist, bins=40, weights=w / total if what == "probability" else w, range=hist_range(dist),
                   color="tab:blue", alpha=0.8)
        ax[2].axvline(mean, color="k", lw=1, ls="-", label=f"mean displacement {mean:.3g}{' ' + unit if unit else ''}")
        ax[2].axvline(q95, color="k", lw=1, ls="--", label=f"95% of displacements below {q95:.3g}"
                      f"{' ' + unit if unit else ''}")
        ax[2].set_xlabel(f"displacement d(true, released){dist_unit}")
        ax[2].set_ylabel(what if what == "rows" else "probability")
        ax[2].set_title("displacement of the releases", fontsize=10)
        ax[2].legend(loc="upper right", fontsize=8)
        tv = 0.5 * float(np.abs(a_w / a_w.sum() - b_w / max(b_w.sum(), 1e-300)).sum())
        label = "matrix" if what == "probability" else "observed rows"
        rows += [(f"mean displacement ({label})", f"{mean:.6g}{' ' + unit if unit else ''}"),
                 (f"95% displacement quantile ({label})", f"{q95:.6g}{' ' + unit if unit else ''}"),
                 (f"total variation, true vs released heat map ({label})", f"{tv:.4g}")]
    table = "".join(f'<tr><th>{html.escape(k)}</th><td class="num">{v}</td></tr>' for k, v in rows)
    return ("<h2>True and released locations</h2><p class=\"note\">Left: where the true locations are; middle: "
            "where the releases land (one colour scale for both); right: how far each release is from its "
            "true location. Axes in " + html.escape(xlabel.split(" of ")[0].split(" ")[0] or "units") +
            "; no map tiles.</p>" + f"<table>{table}</table>" + _img(_fig_uri(fig), "true and released heat maps"))


def render_report(
    mechanism: Mechanism,
    *,
    inputs: ArrayLike | None = None,
    prior: ArrayLike | None = None,
    deltas: Sequence[float] = DEFAULT_DELTAS,
    quantile: float = 0.95,
    top: int = 5,
    title: str | None = None,
    observed: tuple[ArrayLike, ArrayLike] | None = None,
    settings: str | None = None,
) -> str:
    """The HTML report of ``mechanism`` (see the module docstring) as one string.

    Parameters
    ----------
    mechanism : Mechanism
    inputs : indices, optional
        Inputs of the map-like plot (2-d points only; default: 4 spread-out points).
    prior : array of shape (n,), optional
        Adds the adversary section.
    deltas : sequence of float
        Deltas of the eps_tight curve (exact mechanisms).
    quantile : float
        Quantile of the loss and of its lower bound.
    top : int
        Releases per row of the table (spaces that are not 2-d points).
    title : str, optional
    observed : (true, released) index arrays, optional
        Observed rows (2-d spaces): each row's true and released point, for the heat maps
        and the displacement histogram of the data themselves.
    settings : str, optional
        The settings block (:meth:`metricdp.settings.Settings.text`), shown first, as written.
    """
    if not isinstance(mechanism, Mechanism):
        raise ValidationError(f"mechanism must be a Mechanism, got {type(mechanism).__name__}")
    if not mechanism.square:
        raise ValidationError(
            f"the report does not cover mechanisms with a separate output set yet ({mechanism.name}: "
            f"{mechanism.n} inputs, {mechanism.m} outputs); use `metricdp evaluate` for its audit and losses"
        )
    require("plot", what="the report")  # before the audit: it draws every section
    top = check_int(top, "top", minimum=1)
    quantile = check_quantile(quantile)
    deltas = [float(d) for d in deltas]
    if not deltas or any(not (0 < d < 1) for d in deltas):
        raise ValidationError(f"deltas must be in (0, 1), got {deltas}")
    unit = space_unit(mechanism.space, mechanism.metadata)
    pts = mechanism.space.points
    planar = pts is not None and pts.ndim == 2 and pts.shape[1] == 2
    idx = None
    if planar:
        idx = default_inputs(mechanism) if inputs is None else np.atleast_1d(np.asarray(inputs))
        if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer) or idx.size == 0 or \
                idx.min() < 0 or idx.max() >= mechanism.n:
            raise ValidationError(f"inputs must be indices in 0..{mechanism.n - 1}, got {np.asarray(inputs).tolist()}")
    pi = None if prior is None else check_probability_vector(prior, mechanism.n)
    import matplotlib

    # labels, units and titles are the data's text, drawn as written: a '$' in a label is not mathtext
    with matplotlib.rc_context({"text.parse_math": False}):
        sections = [_privacy_section(mechanism, deltas, unit), _loss_section(mechanism, unit, quantile)]
        obs = None
        if observed is not None:
            t, r = (np.asarray(a) for a in observed)
            if t.shape != r.shape or t.ndim != 1 or not len(t) or not np.issubdtype(t.dtype, np.integer) or \
                    not np.issubdtype(r.dtype, np.integer) or min(t.min(), r.min()) < 0 or \
                    max(t.max(), r.max()) >= mechanism.n:
                raise ValidationError("observed must be two equal-length non-empty index vectors into the points")
            obs = (t.astype(np.intp), r.astype(np.intp))
        if idx is not None:
            sections.append(_location_section(mechanism, unit, pi, obs))
            sections.append(_map_section(mechanism, idx.astype(np.intp)))
        else:
            sections.append(_table_section(mechanism, top))
        if pi is not None:
            sections.append(_adversary_section(mechanism, pi, unit))
    params = html.escape(json.dumps(dict(mechanism.params), default=str, indent=1)[:4000])
    sections.append(f"<h2>Parameters</h2><pre>{params}</pre>")
    heading = html.escape(title or f"metricdp report: {mechanism.name}, n = {mechanism.n}, "
                          f"epsilon = {mechanism.epsilon:.6g}{' per ' + unit if unit else ''}")
    if settings is not None:
        sections.insert(0, f'<h2>Settings</h2><pre id="settings">{html.escape(settings)}</pre>')
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{heading}</title>'
            f"<style>{_CSS}</style></head><body><h1>{heading}</h1>" + "".join(sections) + "</body></html>\n")


def match_rows(
    true_keys: Sequence[str], true_idx: ArrayLike, released_keys: Sequence[str], released_idx: ArrayLike
) -> tuple[NDArray[np.intp], NDArray[np.intp], int]:
    """Pair true and released rows by a key (a row id kept in both files): ``(true, released, unmatched)``.

    A release that withheld rows (a per-person cap, a budget) has fewer rows than the
    input, so the rows cannot be paired by position. Keys must be unique in each file;
    every released key must have a true row (a release does not invent rows); true rows
    without a release (withheld) are left out and counted in ``unmatched``. The pairs come
    in the released rows' order.

    >>> t, r, left = match_rows(["a", "b", "c"], [0, 1, 2], ["c", "a"], [5, 6])
    >>> t.tolist(), r.tolist(), left
    ([2, 0], [5, 6], 1)
    """
    ti, ri = np.asarray(true_idx, dtype=np.intp), np.asarray(released_idx, dtype=np.intp)
    if len(true_keys) != ti.size or len(released_keys) != ri.size:
        raise ValidationError("one key per row is needed in each file")
    where: dict[str, int] = {}
    for name, keys in (("true", true_keys), ("released", released_keys)):
        seen: dict[str, int] = {}
        for i, k in enumerate(keys):
            if k == "":
                raise ValidationError(f"the {name} rows' key is empty in row {i + 1}")
            if k in seen:
                raise ValidationError(f"the {name} rows' key {k!r} is not unique (rows {seen[k] + 1} and {i + 1})")
            seen[k] = i
        if name == "true":
            where = seen
    missing = [k for k in released_keys if k not in where]
    if missing:
        raise ValidationError(f"{len(missing):,} released rows have a key with no true row (first {missing[0]!r})")
    at = np.fromiter((where[k] for k in released_keys), dtype=np.intp, count=len(released_keys))
    if not at.size:
        raise ValidationError("no released row to pair with a true row")
    return ti[at], ri, int(ti.size - at.size)


def write_report(mechanism: Mechanism, path: str | PathLike[str], **kwargs: Any) -> None:
    """Render (:func:`render_report`) and write atomically to ``path``."""
    text = render_report(mechanism, **kwargs)
    with atomic_write(path, "w") as fh:
        fh.write(text)

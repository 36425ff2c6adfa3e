"""The trade-off page of an :class:`~metricdp.explore.Exploration`: one self-contained HTML file, and a PNG.

:func:`render_page` writes one HTML page that makes no network request: the figures travel
inside it as JSON (a ``<script type="application/json">`` block, with ``<`` escaped so no
label can close it), the drawing is plain inline JavaScript on SVG and a canvas, and the
style is inline CSS; no library, font or image is fetched. On the page a user picks a
family and moves an epsilon slider, and sees

* the curves against epsilon (log axis): expected, worst-case and q-quantile loss with the
  lower bounds; the adversary's expected error AE; the re-identification probability RI;
  each with the current point marked;
* the heat map of the mechanism matrix at that point (true value by row, released value by
  column; colour on a log scale of the probability, from 1e-6 to 1);
* the figures at that point, why the family could not be built there if it could not,
  and the command that builds that mechanism (given by the caller, see ``commands``).

The heat maps are stored as one byte per cell (the log10 probability on [-6, 0] in 255
steps; 0 for a probability below 1e-6), base64-encoded: 4 families x 20 epsilons on 43
points is about 200 kB. Spaces larger than :data:`MAX_HEAT_N` get no heat map.

:func:`render_png` draws the same curves with matplotlib (the ``plot`` extra) for pipes.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._figure import new_figure, png_bytes
from ._jsonable import jsonable
from ._optional import require
from .explore import Exploration

__all__ = ["MAX_HEAT_N", "heat_bytes", "render_page", "render_png"]

#: The most points a page draws a heat map for (n x n bytes per family and epsilon).
MAX_HEAT_N = 200

_FLOOR = 6.0  # decades below probability 1 that the heat map shows


def heat_bytes(matrix: NDArray[np.float64]) -> bytes:
    """One byte per cell: 0 below 1e-6, else ``1 + round(254 (log10 p + 6) / 6)`` (255 is probability 1).

    >>> list(heat_bytes(np.array([[1.0, 1e-6, 1e-7, 1e-3]])))
    [255, 1, 0, 128]
    """
    p = np.asarray(matrix, dtype=np.float64)
    with np.errstate(divide="ignore"):
        logp = np.log10(np.maximum(p, 0.0))
    code = 1 + np.rint(254 * (np.clip(logp, -_FLOOR, 0.0) + _FLOOR) / _FLOOR)
    return np.where(p >= 10**-_FLOOR, code, 0).astype(np.uint8).tobytes()


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:1.5em auto;max-width:1200px;
color:#222;background:#fff;padding:0 1em}h1{font-size:1.5em}h2{font-size:1.15em;margin:.8em 0 .3em}
.controls{display:flex;gap:1.5em;align-items:center;flex-wrap:wrap;padding:.6em;background:#f5f5f5}
.controls input[type=range]{width:28em}.charts{display:flex;flex-wrap:wrap;gap:1em}
svg.chart{border:1px solid #ddd;background:#fff}table{border-collapse:collapse}td,th{border:1px solid #ccc;
padding:.2em .5em;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#f3f3f3;padding:.6em;overflow-x:auto;white-space:pre-wrap}.bad{color:#b42318}
.note{color:#555;font-size:.9em}canvas{image-rendering:pixelated;border:1px solid #ccc;width:360px;height:360px}
"""

_JS = r"""
(function(){
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const fam = document.getElementById("family"), slider = document.getElementById("eps");
const NS = document.getElementById("chart-loss").namespaceURI;  // SVG's, from the page itself
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#7f7f7f", "#ff7f0e"];
function fmt(x){ return x === null ? "n/a" : (Math.abs(x) >= 1e5 || (x !== 0 && Math.abs(x) < 1e-3)) ?
  x.toExponential(3) : Number(x.toPrecision(4)).toString(); }
function el(tag, attrs, parent){ const e = document.createElementNS(NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]); if (parent) parent.appendChild(e); return e; }
function chart(svg, series, i, ylabel){
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const W = 380, H = 250, L = 58, R = 10, T = 12, B = 40, xs = D.epsilons;
  let lo = Infinity, hi = -Infinity;
  for (const s of series) for (const v of s.values) if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  if (!isFinite(lo)) { lo = 0; hi = 1; } if (hi === lo) { hi = lo + 1; } lo = Math.min(lo, 0);
  const lx0 = Math.log(xs[0]), lx1 = Math.log(xs[xs.length - 1]);
  const X = v => L + (lx1 === lx0 ? 0.5 : (Math.log(v) - lx0) / (lx1 - lx0)) * (W - L - R);
  const Y = v => T + (1 - (v - lo) / (hi - lo)) * (H - T - B);
  el("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#444"}, svg);
  el("line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#444"}, svg);
  for (let k = 0; k <= 4; k++) { const v = lo + k * (hi - lo) / 4;
    el("text", {x: L - 4, y: Y(v) + 4, "text-anchor": "end", "font-size": 10}, svg).textContent = fmt(v); }
  for (const v of [xs[0], xs[Math.floor((xs.length - 1) / 2)], xs[xs.length - 1]])
    el("text", {x: X(v), y: H - B + 14, "text-anchor": "middle", "font-size": 10}, svg).textContent = fmt(v);
  el("text", {x: (L + W) / 2, y: H - 6, "text-anchor": "middle", "font-size": 11}, svg).textContent =
    "epsilon" + (D.unit ? " per " + D.unit : "") + " (log scale)";
  el("text", {x: 12, y: T + (H - T - B) / 2, "text-anchor": "middle", "font-size": 11,
    transform: "rotate(-90 12 " + (T + (H - T - B) / 2) + ")"}, svg).textContent = ylabel;
  el("line", {x1: X(xs[i]), y1: T, x2: X(xs[i]), y2: H - B, stroke: "#999", "stroke-dasharray": "3,3",
    class: "current"}, svg);
  series.forEach((s, k) => {
    let d = "", pen = false;
    s.values.forEach((v, j) => { if (v === null) { pen = false; return; }
      d += (pen ? "L" : "M") + X(xs[j]).toFixed(1) + "," + Y(v).toFixed(1); pen = true; });
    if (d) el("path", {d: d, fill: "none", stroke: s.color || COLORS[k], "stroke-width": 1.8,
      "stroke-dasharray": s.dash || "none"}, svg);
    if (s.values[i] !== null) el("circle", {cx: X(xs[i]), cy: Y(s.values[i]), r: 4, fill: s.color || COLORS[k],
      class: "marker"}, svg);
    el("text", {x: W - R - 4, y: T + 12 + 12 * k, "text-anchor": "end", "font-size": 10,
      fill: s.color || COLORS[k]}, svg).textContent = s.label;
  });
}
function heat(f, i){
  const canvas = document.getElementById("heat"), note = document.getElementById("heat-note");
  const ctx = canvas.getContext("2d"), b64 = D.heat ? D.heat[f][i] : null;
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  if (!b64) { note.textContent = D.heat ? "no matrix at this point" : D.heat_note; return; }
  const raw = atob(b64), n = D.n, img = ctx.createImageData(n, n);
  for (let c = 0; c < n * n; c++) { const v = raw.charCodeAt(c) / 255;
    img.data[4 * c] = Math.round(255 * (1 - 0.9 * v)); img.data[4 * c + 1] = Math.round(255 * (1 - 0.75 * v));
    img.data[4 * c + 2] = Math.round(255 * (1 - 0.35 * v)); img.data[4 * c + 3] = 255; }
  ctx.putImageData(img, 0, 0);
  note.textContent = "row: true value, column: released value (" + n + " x " + n + ", in the order of the points); " +
    "darker is likelier, log scale from 1e-6 (white) to 1";
}
function update(){
  const f = fam.value, i = Number(slider.value), F = D.figures[f];
  document.getElementById("epsval").textContent = fmt(D.epsilons[i]) + (D.unit ? " per " + D.unit : "");
  chart(document.getElementById("chart-loss"), [
    {label: "expected (uniform)", values: F.loss_expected}, {label: "worst case", values: F.loss_max},
    {label: D.quantile + "-quantile", values: F.loss_quantile},
    {label: "lower bound (worst)", values: D.lower_bound, dash: "4,3", color: "#555"},
    {label: "lower bound (" + D.quantile + ")", values: D.lower_bound_quantile, dash: "1,3", color: "#555"}],
    i, "loss" + (D.unit ? " (" + D.unit + ")" : ""));
  chart(document.getElementById("chart-ae"), [{label: "AE", values: F.adversary_expected_error}], i,
    "adversary's error" + (D.unit ? " (" + D.unit + ")" : ""));
  chart(document.getElementById("chart-ri"), [{label: "RI", values: F.adversary_reidentification}], i,
    "re-identification probability");
  const rows = [["epsilon (audited)", F.epsilon_audit[i]], ["expected loss (uniform prior)", F.loss_expected[i]],
    ["worst-case loss", F.loss_max[i]], [D.quantile + "-quantile loss", F.loss_quantile[i]],
    ["lower bound, worst case", D.lower_bound[i]], ["lower bound, " + D.quantile + "-quantile",
    D.lower_bound_quantile[i]], ["adversary's expected error (" + D.prior + " prior)", F.adversary_expected_error[i]],
    ["re-identification probability (" + D.prior + " prior)", F.adversary_reidentification[i]]];
  const now = document.getElementById("now"); now.textContent = "";
  for (const [k, v] of rows) { const tr = now.insertRow(); tr.insertCell().textContent = k;
    const td = tr.insertCell(); td.className = "num"; td.textContent = fmt(v); }
  document.getElementById("fail").textContent = D.failures[f][i] ? "not built at this epsilon: " +
    D.failures[f][i] : "";
  document.getElementById("cmd").textContent = D.commands ? D.commands[f][i] : "";
  heat(f, i);
}
fam.addEventListener("change", update); slider.addEventListener("input", update);
update();
})();
"""


def _data(exploration: Exploration, commands: Mapping[str, Sequence[str]] | None) -> dict[str, Any]:
    data = exploration.as_dict()
    fails = {f: list(exploration.failures[f]) for f in exploration.families}
    data["failures"] = fails
    data["commands"] = None if commands is None else {f: list(commands[f]) for f in exploration.families}
    n = len(exploration.labels)
    if n <= MAX_HEAT_N:
        data["heat"] = {f: [None if m is None else base64.b64encode(heat_bytes(m)).decode("ascii")
                            for m in exploration.matrices.get(f, [None] * len(exploration.epsilons))]
                        for f in exploration.families}
    else:
        data["heat"] = None
        data["heat_note"] = f"no heat map: {n} points (more than {MAX_HEAT_N})"
    return data


def render_page(
    exploration: Exploration,
    *,
    commands: Mapping[str, Sequence[str]] | None = None,
    settings: str = "",
    title: str | None = None,
) -> str:
    """The trade-off page (see the module docstring) as one HTML string.

    ``commands[family][i]`` is the text shown as the command that builds ``family`` at the
    i-th epsilon; ``settings`` the settings block (:meth:`metricdp.settings.Settings.text`)
    printed at the top of the page.
    """
    if commands is not None:
        for f in exploration.families:
            if len(commands.get(f, ())) != len(exploration.epsilons):
                raise ValueError(f"commands must give one command per epsilon for {f}")
    payload = json.dumps(jsonable(_data(exploration, commands)), allow_nan=False, separators=(",", ":"))
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    heading = html.escape(title or f"metricdp explore: {len(exploration.families)} families, "
                          f"{len(exploration.epsilons)} epsilons, n = {len(exploration.labels)}")
    options = "".join(f'<option value="{html.escape(f)}">{html.escape(f)}</option>' for f in exploration.families)
    k = len(exploration.epsilons)
    failed = [(f, e, why) for f in exploration.families
              for e, why in zip(exploration.epsilons, exploration.failures[f], strict=True) if why is not None]
    fail_table = ""
    if failed:
        rows = "".join(f'<tr><td>{html.escape(f)}</td><td class="num">{e:.6g}</td><td>{html.escape(why)}</td></tr>'
                       for f, e, why in failed)
        fail_table = (f'<h2 class="bad">Not built ({len(failed)} of {k * len(exploration.families)})</h2>'
                      f"<table><tr><th>family</th><th>epsilon</th><th>why</th></tr>{rows}</table>")
    bound = (f'<p class="note">Lower bounds: {html.escape(exploration.bound_note)}</p>'
             if exploration.bound_note else "")
    body = (
        f"<h1>{heading}</h1><h2>Settings</h2><pre id=\"settings\">{html.escape(settings)}</pre>"
        '<div class="controls"><label>family <select id="family">' + options + "</select></label>"
        f'<label>epsilon <input type="range" id="eps" min="0" max="{k - 1}" step="1" value="{(k - 1) // 2}">'
        '</label><b id="epsval"></b></div>'
        '<p id="fail" class="bad"></p>'
        '<div class="charts"><svg class="chart" id="chart-loss" width="380" height="250"></svg>'
        '<svg class="chart" id="chart-ae" width="380" height="250"></svg>'
        '<svg class="chart" id="chart-ri" width="380" height="250"></svg></div>'
        '<div class="charts"><div><h2>At this point</h2><table id="now"></table>'
        "<h2>Build it</h2><pre id=\"cmd\"></pre></div>"
        f'<div><h2>Mechanism matrix</h2><canvas id="heat" width="{max(len(exploration.labels), 1)}" '
        f'height="{max(len(exploration.labels), 1)}"></canvas><p id="heat-note" class="note"></p></div></div>'
        + bound + fail_table
        + '<p class="note">Loss: expected distance between a true value and its release. AE: the expected '
        "distance between the true value and the guess of an adversary who knows the mechanism and the prior "
        "(Bayes-optimal; Shokri et al. 2011). RI: the probability that this adversary names the true value "
        "exactly. Lower bounds hold for every eps-mDP mechanism on these points (Imola et al. 2022).</p>"
    )
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{heading}</title>'
            f"<style>{_CSS}</style></head><body>{body}"
            f'<script type="application/json" id="data">{payload}</script><script>{_JS}</script>'
            "</body></html>\n")


def render_png(exploration: Exploration, *, dpi: int = 100) -> bytes:
    """The curves of every family (loss, AE, RI against epsilon) as PNG bytes (needs the ``plot`` extra)."""
    require("plot", what="the explore PNG")
    import matplotlib
    from matplotlib.ticker import FuncFormatter, NullFormatter

    with matplotlib.rc_context({"text.parse_math": False}):  # labels are the data's text, drawn as written
        fig = new_figure(15.0, 4.2)
        axes = fig.subplots(1, 3)
        eps = np.asarray(exploration.epsilons)
        unit = f" ({exploration.unit})" if exploration.unit else ""

        def line(ax: Any, values: Sequence[float | None], **kwargs: Any) -> None:
            ax.plot(eps, np.array([np.nan if v is None else v for v in values], dtype=np.float64), **kwargs)

        for k, name in enumerate(exploration.families):
            colour = f"C{k}"
            fig_f = exploration.figures[name]
            built = sum(why is None for why in exploration.failures[name])
            f = name if built == len(eps) else f"{name} (built at {built} of {len(eps)})"
            line(axes[0], fig_f["loss_expected"], color=colour, label=f"{f}: expected")
            line(axes[0], fig_f["loss_max"], color=colour, ls="--", label=f"{f}: worst case")
            line(axes[1], fig_f["adversary_expected_error"], color=colour, marker=".", label=f)
            line(axes[2], fig_f["adversary_reidentification"], color=colour, marker=".", label=f)
        if exploration.bound_note is None:
            line(axes[0], exploration.lower_bound, color="k", ls=":", label="lower bound (worst case)")
        prior = "given" if exploration.prior else "uniform"
        titles = ("loss", f"adversary's expected error ({prior} prior)", f"re-identification ({prior} prior)")
        ylabels = (f"loss{unit}", f"AE{unit}", "RI")
        for ax, title, ylabel in zip(axes, titles, ylabels, strict=True):
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # plain numbers, no mathtext
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel(f"epsilon{' per ' + exploration.unit if exploration.unit else ''}")
            ax.set_ylabel(ylabel)
            ax.set_title(title, fontsize=10)
            ax.legend(loc="best", fontsize=7)
        return png_bytes(fig, dpi=dpi)

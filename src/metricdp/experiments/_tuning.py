r"""Nominal eps versus measured eps_tight: tuning, grids and the experiments' mechanism table.

Imola et al. (UAI 2022, Section 5) compare mechanisms at equal *measured* privacy: a
mechanism is built at a nominal :math:`\varepsilon` (the guarantee its proof gives) and
placed at

.. math::

    \varepsilon_{\text{tight}}(M, \delta) = \min\{\varepsilon \ge 0 :
    M \text{ is } (\varepsilon, \delta)\text{-mDP}\}, \qquad \delta = 10^{-3},

computed exactly by :func:`metricdp.audit.epsilon_tight`. Two tools follow:

* :func:`tune_to_eps_tight` finds the nominal eps whose mechanism has a given
  eps_tight, to a stated relative tolerance (Tables 2-4 of the paper are at fixed
  eps_tight);
* :func:`nominal_grid` and :func:`sweep` build a mechanism over a grid of nominal eps
  chosen so that the measured eps_tight spans a target range (Figures 1 and 3).

Estimated mechanisms (Madlib: a Monte-Carlo matrix, ``exact=False``) have no
meaningful eps_tight: an estimate has zeros where the true mechanism has small positive
mass, and the plug-in divergence is then infinite or biased upwards (issue 12, item 6).
They are placed at their *proven* eps instead (:func:`measured_eps_tight` says which);
the true eps_tight is at most the proven eps, so such a curve is an upper bound in eps:
the true curve lies at or to the left of the plotted one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._validation import check_delta, check_epsilon, check_int, check_quantile
from ..errors import MetricDPError, ValidationError
from ..loss import quantile_loss, worst_case_loss
from ..mechanisms.base import Mechanism
from ..spaces import MetricSpace

__all__ = [
    "DATASETS",
    "DELTA",
    "FAMILIES",
    "PURE_KEYWORD",
    "QUANTILE",
    "MechanismSpec",
    "ResultCache",
    "SweepPoint",
    "Tuned",
    "auto_eps_range",
    "constopt_supports_pure",
    "dataset_space",
    "evaluate",
    "flags",
    "is_timeout",
    "make_builder",
    "markdown_table",
    "measured_eps_tight",
    "nominal_grid",
    "number",
    "open_cache",
    "plot_grid",
    "sweep",
    "tune_to_eps_tight",
    "tuning_note",
    "write_csv",
]

#: The paper's delta for eps_tight and quantile for L_q.
DELTA = 1e-3
QUANTILE = 0.95

EpsKind = Literal["tight", "proven"]
Builder = Callable[[float], Mechanism]


def measured_eps_tight(mechanism: Mechanism, delta: float = DELTA) -> tuple[float, EpsKind]:
    """eps_tight of an exact mechanism; the proven eps of an estimated one.

    Returns the value and ``"tight"`` or ``"proven"`` (see the module docstring).
    """
    if not mechanism.exact:
        return float(mechanism.epsilon), "proven"
    return float(mechanism.epsilon_tight(check_delta(delta))), "tight"


# --------------------------------------------------------------------------- tuning
@dataclass(frozen=True)
class Tuned:
    """Result of :func:`tune_to_eps_tight`.

    Attributes
    ----------
    epsilon : float
        The nominal eps found.
    eps_tight : float
        The measured eps_tight of ``mechanism``.
    mechanism : Mechanism
        The mechanism built at ``epsilon`` (no rebuild needed).
    target, rtol : float
        The target and the relative tolerance asked for.
    converged : bool
        ``|eps_tight - target| <= rtol * target``; when False, ``mechanism`` is the
        closest one found within the evaluation budget.
    evaluations : int
        Number of builds.
    seconds : float
        Wall time of all builds and audits.
    history : tuple of (nominal, eps_tight)
        Every evaluation, in order.
    stopped_by : str
        Empty, or the error (not a time limit) of the build that ended the search
        early; the closest mechanism found before it is returned (``converged=False``).
    """

    epsilon: float
    eps_tight: float
    mechanism: Mechanism
    target: float
    rtol: float
    converged: bool
    evaluations: int
    seconds: float
    history: tuple[tuple[float, float], ...] = field(repr=False)
    stopped_by: str = ""


def _log(v: float) -> float:
    return math.log(v) if v > 0 else -math.inf


def tune_to_eps_tight(
    build: Builder,
    target: float,
    *,
    delta: float = DELTA,
    rtol: float = 5e-3,
    start: float | None = None,
    max_evaluations: int = 25,
) -> Tuned:
    r"""The nominal eps at which ``build(eps)`` has eps_tight equal to ``target``.

    Solves :math:`f(x) = t` for :math:`f(x) = \varepsilon_{\text{tight}}(\text{build}(x),
    \delta)` to :math:`|f(x) - t| \le \text{rtol}\cdot t`. :math:`f` is increasing in
    practice and close to proportional (the proofs scale eps by a constant: 1/2 inside
    ConstOPTMech, 1/stretch inside SpannerMech), so the search works in
    :math:`(\log x, \log f)`: first a proportional step :math:`x \leftarrow x\,t/f(x)`,
    then secant steps through the last two points (slopes clipped to [0.2, 5], steps to
    a factor of 8, 5% overshoot) until the target is bracketed, then the Illinois variant
    of regula falsi, which keeps the bracket (its points are kept at least 1% of the
    bracket's width inside it). On
    monotone :math:`f` the bracket always contains a solution; on non-monotone
    :math:`f` (LP mechanisms need not be monotone) it still contains a crossing.

    Parameters
    ----------
    build : callable
        ``build(nominal_eps) -> Mechanism`` (exact: its matrix is audited).
    target : float
        The eps_tight wanted (> 0).
    delta : float
        The delta of eps_tight (the paper's 0.001).
    rtol : float
        Relative tolerance on eps_tight (default 0.5%).
    start : float, optional
        First nominal eps to try (default ``target``: a mechanism's eps_tight never
        exceeds its nominal eps, so the answer is at least ``target``).
    max_evaluations : int
        Build budget; on exhaustion the closest mechanism is returned with
        ``converged=False``.

    Raises
    ------
    ValidationError
        On bad arguments, or when ``build`` returns an estimated mechanism (its
        eps_tight cannot be measured).
    MetricDPError
        What ``build`` raises propagates when it is a time limit or comes before any
        mechanism was built; a later error ends the search with the closest mechanism
        found (``converged=False``, the error in ``stopped_by``).
    """
    target = check_epsilon(target, "target")
    delta = check_delta(delta)
    rtol = check_epsilon(rtol, "rtol")
    max_evaluations = check_int(max_evaluations, "max_evaluations", minimum=1)
    x = target if start is None else check_epsilon(start, "start")
    t0 = time.perf_counter()
    history: list[tuple[float, float]] = []
    best: tuple[float, float, Mechanism] | None = None  # (|rel err|, x, mechanism)
    lo: tuple[float, float] | None = None  # (log x, log f - log t) with f < t
    hi: tuple[float, float] | None = None  # f > t
    lo_stuck = hi_stuck = 0  # Illinois: halve the residual kept for a twice-retained end
    log_t = math.log(target)

    def finish(x_: float, f_: float, mech: Mechanism, ok: bool, why: str = "") -> Tuned:
        return Tuned(x_, f_, mech, target, rtol, ok, len(history), time.perf_counter() - t0, tuple(history), why)

    for _ in range(max_evaluations):
        try:
            mech = build(x)
        except MetricDPError as exc:
            # LP mechanisms need not be continuous in eps (the optimal vertex jumps), so the
            # search can wander where a solver fails; keep what was found unless it is a
            # time limit (which ends a series) or nothing was found yet.
            if best is None or is_timeout(exc):
                raise
            _, bx, bm = best
            return finish(bx, measured_eps_tight(bm, delta)[0], bm, False, " ".join(str(exc).split())[:200])
        f, kind = measured_eps_tight(mech, delta)
        if kind != "tight":
            raise ValidationError(f"cannot tune {mech.name!r} to an eps_tight: its matrix is an estimate")
        history.append((x, f))
        err = abs(f - target) / target
        if best is None or err < best[0]:
            best = (err, x, mech)
        if err <= rtol:
            return finish(x, f, mech, True)
        point = (math.log(x), _log(f) - log_t)
        if f < target:
            lo, lo_stuck, hi_stuck = point, 0, hi_stuck + 1
        else:
            hi, hi_stuck, lo_stuck = point, 0, lo_stuck + 1
        if lo is None or hi is None:
            # Not bracketed yet: a secant step in (log x, log f) through the last two
            # points (slope 1, i.e. proportionality, for the first), overshooting by 5%
            # so that the next point tends to bracket; f == 0 gives the largest step.
            slope = 1.0
            if len(history) >= 2 and history[-2][1] > 0 and f > 0 and history[-2][0] != x:
                slope = (_log(f) - _log(history[-2][1])) / (math.log(x) - math.log(history[-2][0]))
                slope = min(5.0, max(0.2, slope)) if math.isfinite(slope) else 1.0
            step = 1.05 * (log_t - _log(f)) / slope if f > 0 else math.log(8.0)
            x = math.exp(point[0] + max(-math.log(8.0), min(math.log(8.0), step)))
            continue
        (xl, rl), (xh, rh) = lo, hi
        if not math.isfinite(rl):
            nxt = 0.5 * (xl + xh)
        else:
            rl_eff = rl / 2 ** max(0, lo_stuck - 1)
            rh_eff = rh / 2 ** max(0, hi_stuck - 1)
            nxt = xl - rl_eff * (xh - xl) / (rh_eff - rl_eff)
            margin = 0.01 * abs(xh - xl)
            nxt = min(max(xl, xh) - margin, max(min(xl, xh) + margin, nxt))
        x = math.exp(nxt)
    _, bx, bm = best  # type: ignore[misc]
    return finish(bx, measured_eps_tight(bm, delta)[0], bm, False)


# --------------------------------------------------------------------------- grids
@dataclass(frozen=True)
class SweepPoint:
    """One mechanism built at one nominal eps, with what the figures plot."""

    nominal: float
    eps: float
    eps_kind: EpsKind
    loss_quantile: float
    loss_max: float
    seconds: float
    info: dict[str, Any] = field(default_factory=dict, repr=False)


def evaluate(
    mechanism: Mechanism, *, delta: float = DELTA, q: float = QUANTILE, seconds: float = 0.0
) -> SweepPoint:
    """Measure one built mechanism: eps_tight (or proven eps), L_q and L."""
    eps, kind = measured_eps_tight(mechanism, delta)
    info: dict[str, Any] = {k: mechanism.info[k] for k in ("lp", "winner") if mechanism.info.get(k) is not None}
    return SweepPoint(
        float(mechanism.epsilon),
        eps,
        kind,
        quantile_loss(mechanism.matrix, mechanism.distances, q),
        worst_case_loss(mechanism.matrix, mechanism.distances),
        seconds,
        info,
    )


def nominal_grid(
    build: Builder,
    targets: ArrayLike,
    *,
    delta: float = DELTA,
    q: float = QUANTILE,
) -> tuple[NDArray[np.float64], SweepPoint]:
    r"""A nominal-eps grid whose eps_tight should span ``targets``, from one probe build.

    The mechanism is built once at the geometric mean :math:`\bar t` of the targets;
    with its ratio :math:`\rho = \varepsilon_{\text{tight}}(\bar t)/\bar t` the grid is
    ``targets / rho`` (eps_tight is close to proportional to the nominal eps). For an
    estimated mechanism :math:`\rho = 1`. Returns the grid and the probe's point.
    """
    t = np.asarray(targets, dtype=np.float64)
    if t.ndim != 1 or t.size == 0 or not np.all(np.isfinite(t)) or (t <= 0).any():
        raise ValidationError(f"targets must be a non-empty 1-d array of positive numbers, got {targets!r}")
    probe_eps = float(np.exp(np.log(t).mean()))
    t0 = time.perf_counter()
    mech = build(probe_eps)
    point = evaluate(mech, delta=delta, q=q, seconds=time.perf_counter() - t0)
    rho = point.eps / probe_eps if point.eps > 0 else 1.0
    return t / rho, point


def sweep(
    build: Builder,
    grid: Sequence[float] | NDArray[np.float64],
    *,
    delta: float = DELTA,
    q: float = QUANTILE,
    on_point: Callable[[SweepPoint], None] | None = None,
) -> list[SweepPoint]:
    """Build at every nominal eps of ``grid`` and measure each (see :func:`evaluate`)."""
    q = check_quantile(q)
    out = []
    for eps in grid:
        t0 = time.perf_counter()
        mech = build(float(eps))
        point = evaluate(mech, delta=delta, q=q, seconds=time.perf_counter() - t0)
        out.append(point)
        if on_point is not None:
            on_point(point)
    return out


# --------------------------------------------------------------------------- mechanisms
@dataclass(frozen=True)
class MechanismSpec:
    """One mechanism series of an experiment: a family and its options.

    ``family`` is ``exponential``, ``madlib``, ``optimal``, ``spanner`` or ``constopt``;
    ``options`` are passed to the builder (for example ``neighbours``, ``fit``,
    ``lambdas``); ``label`` is the name in plots and tables.
    """

    label: str
    family: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def is_lp(self) -> bool:
        return self.family in ("optimal", "spanner", "constopt")


FAMILIES = ("exponential", "madlib", "optimal", "spanner", "constopt")

#: Keyword of :func:`metricdp.mechanisms.lp.constopt` that leaves the exponential
#: mechanism out of its candidates. ConstOPTMech returns the exponential mechanism
#: whenever the LP candidates lose to it at the same nominal eps (``info["winner"]``);
#: the ablation must measure the paper's fit itself, at its own eps_tight. A spec option
#: ``pure=True`` passes ``exponential_candidate=False`` when the builder accepts it; with
#: a builder that does not, the records keep ``winner`` so that such rows are flagged.
PURE_KEYWORD = "exponential_candidate"


def constopt_supports_pure() -> bool:
    """Whether :func:`metricdp.mechanisms.lp.constopt` accepts :data:`PURE_KEYWORD`."""
    import inspect

    from ..mechanisms.lp import constopt

    return PURE_KEYWORD in inspect.signature(constopt).parameters


def make_builder(
    spec: MechanismSpec,
    space: MetricSpace,
    *,
    time_limit: float | None = None,
    seed: int = 0,
) -> Builder:
    """``eps -> Mechanism`` for a spec on a space (builders are imported lazily).

    LP families get ``time_limit`` (seconds per LP); Madlib gets the seed (its matrix is
    a Monte-Carlo estimate: reproducible experiments need a seeded generator).
    """
    opts = dict(spec.options)
    if spec.family == "exponential":
        from ..mechanisms.exponential import exponential

        return lambda eps: exponential(space, eps, **opts)
    if spec.family == "madlib":
        from ..mechanisms.madlib import madlib

        return lambda eps: madlib(space, eps, rng=np.random.default_rng(seed), **opts)
    if spec.family == "optimal":
        from ..mechanisms.lp import optimal

        return lambda eps: optimal(space, eps, time_limit=time_limit, **opts)
    if spec.family == "spanner":
        from ..mechanisms.lp import spanner

        return lambda eps: spanner(space, eps, time_limit=time_limit, **opts)
    if spec.family == "constopt":
        from ..mechanisms.lp import constopt

        if opts.pop("pure", False) and constopt_supports_pure():
            opts[PURE_KEYWORD] = False
        return lambda eps: constopt(space, eps, time_limit=time_limit, **opts)
    raise ValidationError(f"mechanism family must be one of {', '.join(FAMILIES)}, got {spec.family!r}")


# --------------------------------------------------------------------------- experiment plumbing
#: Datasets of the experiments: ``text`` = a GloVe 6B 50-d vocabulary sampled as the
#: paper does (:func:`metricdp.data.glove.glove_space`); ``geo`` = the most populous
#: 0.005-degree cells of Beijing (:func:`metricdp.data.geo.geo_space`, the stand-in for
#: the paper's Geolife bins); ``gaussian`` = standard normal points in 50 dimensions
#: (no optional package; for tests and machines without the data extras).
DATASETS = ("text", "geo", "gaussian")

#: One progress step: ``progress(done, total, description)``.
ProgressHook = Callable[[int, int, str], None]


def check_datasets(datasets: Sequence[str]) -> None:
    """A non-empty list of names from :data:`DATASETS` (the error lists the allowed ones)."""
    bad = [d for d in datasets if d not in DATASETS]
    if bad or not datasets:
        allowed = ", ".join(DATASETS)
        raise ValidationError(f"datasets must be among {allowed}, got {list(datasets)!r}")


def dataset_space(name: str, n: int, *, seed: int = 0) -> MetricSpace:
    """The ``n``-point space of a dataset (see :data:`DATASETS`)."""
    n = check_int(n, "n", minimum=2)
    if name == "text":
        from ..data.glove import glove_space

        return glove_space(n, seed=seed)
    if name == "geo":
        from ..data.geo import geo_space

        # Beijing alone has 246 populated cells in GeoNames; the paper's sizes reach 400,
        # so every size draws from Beijing and Tianjin together (one geometry for all n).
        return geo_space("beijing-tianjin", size=n).space
    if name == "gaussian":
        return MetricSpace.from_points(np.random.default_rng(seed).standard_normal((n, 50)))
    raise ValidationError(f"dataset must be one of {', '.join(DATASETS)}, got {name!r}")


def auto_eps_range(space: MetricSpace) -> tuple[float, float]:
    r"""The eps_tight range where mechanisms differ: from near-uniform to near-exact.

    With :math:`\bar d` the median distance and :math:`\bar d_1` the median
    nearest-neighbour distance, the range is :math:`[1/\bar d,\ 3 \ln n / \bar d_1]`: at
    the low end :math:`e^{-\varepsilon d/2}` barely varies over typical distances (every
    mechanism is close to the uniform baseline), at the high end even the nearest
    neighbour gets :math:`e^{-\varepsilon \bar d_1/2} \le n^{-3/2}` of a point's own mass
    (every mechanism is close to the identity).
    """
    d = np.asarray(space.distances)
    off = d[~np.eye(space.n, dtype=bool)]
    nearest = np.partition(d + np.diag(np.full(space.n, np.inf)), 0, axis=1)[:, 0]
    return 1.0 / float(np.median(off)), 3.0 * math.log(space.n) / float(np.median(nearest))


class ResultCache:
    """Finished units of an experiment, one JSON object per line (``--out DIR``/``*.jsonl``).

    Lets a long full-mode run resume: a unit whose key is in the file is not recomputed.
    Keys are strings; records are JSON objects (non-finite floats as strings).
    """

    def __init__(self, path: Any | None, *, frozen: bool = False) -> None:
        import json
        from pathlib import Path

        self.path = None if path is None else Path(path)
        #: Report from the cache only: the experiments build nothing and list what is
        #: missing as "not run" (``--cached-only``).
        self.frozen = frozen
        self.records: dict[str, dict[str, Any]] = {}
        if self.path is not None and self.path.is_file():
            text = self.path.read_text(encoding="utf-8")
            if text and not text.endswith("\n"):  # cut short: new records start on a new line
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write("\n")
            for line in text.splitlines():
                try:
                    item = json.loads(line)
                except json.JSONDecodeError:  # a line cut short by an interrupted run
                    continue
                if isinstance(item, dict) and "key" in item:
                    self.records[str(item["key"])] = item["record"]

    def get(self, key: str, time_limit: float | None = None) -> dict[str, Any] | None:
        """The record of ``key``; ``None`` (recompute) also for an error, or for a time-out
        under a shorter time limit than ``time_limit`` (``None`` = unlimited). A frozen
        cache returns errors as they were (nothing will be recomputed)."""
        rec = self.records.get(key)
        if rec is None or (rec.get("status") == "error" and not self.frozen):
            return None
        if rec.get("status") == "time-out":
            before = number(rec.get("time_limit"))
            now = math.inf if time_limit is None else float(time_limit)
            if not before >= now:
                return None
        return rec

    def put(self, key: str, record: dict[str, Any], time_limit: float | None = None) -> None:
        import json

        if self.frozen:
            return

        record.setdefault("time_limit", math.inf if time_limit is None else float(time_limit))
        self.records[key] = record
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({"key": key, "record": _plain(record)}) + "\n")


def open_cache(path: Any, *, resume: bool = True, cached_only: bool = False) -> ResultCache:
    """An experiment's cache at ``path``: emptied when not resuming; with ``cached_only``,
    read-only and required to exist (the plots and tables are redrawn from it)."""
    from pathlib import Path

    path = Path(path)
    if cached_only and not resume:
        raise ValidationError("cached_only reports from the cache of a previous run: it cannot start over")
    if cached_only and not path.is_file():
        raise ValidationError(f"{path}: no cache of a previous run to report from")
    if not resume and path.exists():
        path.unlink()
    return ResultCache(path, frozen=cached_only)


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    return obj


def number(value: Any) -> float:
    """A record's number back from JSON (``"inf"``/``"nan"`` strings, ``None`` -> nan)."""
    if value is None or value == "":
        return math.nan
    return float(value)


def tuning_note(tuned: Tuned) -> str:
    """Why a tuned record is flagged: eps_tight off target, and what ended the search."""
    if tuned.converged:
        return ""
    note = f"eps_tight {tuned.eps_tight:.4g} not within {tuned.rtol:g} of target"
    return note + (f" (search ended by: {tuned.stopped_by})" if tuned.stopped_by else "")


def flags(record: dict[str, Any]) -> str:
    """Marks of a summary cell: `` (!)`` tuning not converged, `` (EM)`` ConstOPTMech returned
    the exponential mechanism (its LP candidates lost to it at that nominal eps)."""
    flag = "" if record.get("converged") else " (!)"
    return flag + (" (EM)" if record.get("winner") == "exponential" else "")


def write_csv(path: Any, records: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    """Write ``records`` (dicts) as CSV with exactly ``columns``, atomically."""
    import csv

    from ..io import atomic_write

    with atomic_write(path, "w") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        for rec in records:
            writer.writerow(["" if rec.get(c) is None else _cell(rec.get(c)) for c in columns])


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    return value


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A small markdown table (numbers to 4 significant digits)."""

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return "-" if math.isnan(v) else f"{v:.4g}"
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def is_timeout(exc: BaseException) -> bool:
    """Whether a builder's error is an LP time limit: a
    :class:`~metricdp.errors.SolverTimeLimitError`, or any solver error whose ``status``
    attribute is ``"limit"`` (never its message text)."""
    from ..errors import SolverError, SolverTimeLimitError

    return isinstance(exc, SolverTimeLimitError) or (isinstance(exc, SolverError) and exc.status == "limit")


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
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ._plot import save_png

    if not panels:
        raise ValidationError("nothing to plot: no panels")
    cols = 1 if len(panels) == 1 else 2
    rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(6.4 * cols, 4.4 * rows), layout="constrained")
    FigureCanvasAgg(fig)
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

r"""``metricdp experiment kmedian``: private k-median, Lantz, Boyd and Page (AISec 2015),
Section 5 and Figures 3 to 5.

Setting (the paper's): V = n points uniform in the unit disc, s = 0.3 n private points
(n = 100, 1,000, 10,000; s = 30, 300, 3,000), k in {2, 4, 8, 16}, total DP level
eps in {0.1, 1, 10, 100}, Euclidean metric, sensitivity diam(V). Each replicate draws a
new V and D; every method of :mod:`metricdp.kmedian` runs once per (replicate, k, eps).

* ``uniform`` (Figure 3): D a uniform s-subset of V; methods random, random-k++, em
  (where C(n, k) <= MAX_SUBSETS, "refused" otherwise), ssem-auto (m = ceil(6 k ln n)),
  ssem-k++ at the same m, gupta (T = ceil(6 k ln n) private swaps, with a time limit:
  a run past it is "time-out" and releases nothing);
* ``gaussian`` (Figure 4): D drawn from V without replacement with probability
  proportional to a mixture of ``clusters`` isotropic Gaussians (sd ``sigma``) whose
  centres are uniform in the disc of radius 0.7. A departure: the paper's Figure 4
  draws D from a single Gaussian and varies its spread (``clusters=1``, run at several
  ``sigma`` values, comes close to it; the committed run used 4 clusters at one sigma);
* ``m-sweep``: cost against m for ssem (uniform base) and ssem-k++;
* time per release of every method (Figure 5), wall seconds on this machine.

Costs are reported raw and as the ratio to the non-private reference of the same
(replicate, k): the enumerated optimum where C(n, k) <= MAX_SUBSETS, else the best of
``restarts`` 1-swap local searches (:func:`metricdp.kmedian.optimum`).

Randomness: one :class:`numpy.random.SeedSequence` tree from ``seed``; a replicate's
data and every (k, eps, method) run have their own child, addressed by its position
(``spawn_key``), so a resumed run draws exactly the numbers a fresh one would.
``kmedian.jsonl`` in ``--out`` caches every finished run (the cache helpers of
:mod:`._records`); ``cached_only`` redraws the outputs from it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._progress import Progress
from .._validation import check_epsilon, check_int
from ..errors import ResourceLimitError, SolverTimeLimitError, ValidationError
from ..kmedian import MAX_SUBSETS, METHODS, KMedian, auto_candidates, kmedian, optimum, subset_costs
from . import _records as rs

__all__ = ["COLUMNS", "FULL", "QUICK", "KMedianConfig", "KMedianResult", "run_kmedian"]

COLUMNS = (
    "variant", "n", "s", "k", "eps", "method", "replicate", "m", "cost", "ref_cost", "ratio", "ref_how",
    "epsilon_spent", "seconds", "evaluations", "status", "note",
)

_VARIANTS = {"uniform": 0, "gaussian": 1, "m-sweep": 2}
_STREAMS = {"data": 0, "ref": 1, "run": 2}


@dataclass(frozen=True)
class KMedianConfig:
    """What ``run_kmedian`` computes (``FULL``: see docs/experiments.md; ``QUICK``: seconds)."""

    sizes: tuple[int, ...] = (100, 1000, 10000)
    replicates: tuple[int, ...] = (20, 10, 2)
    gupta_replicates: tuple[int, ...] = (20, 10, 1)
    private_fraction: float = 0.3
    ks: tuple[int, ...] = (2, 4, 8, 16)
    epsilons: tuple[float, ...] = (0.1, 1.0, 10.0, 100.0)
    methods: tuple[str, ...] = ("random", "random-k++", "em", "ssem-auto", "ssem-k++", "gupta")
    gupta_time_limit: float | None = 25.0
    restarts: tuple[int, ...] = (10, 10, 3)
    gaussian_size: int | None = 1000
    gaussian_replicates: int = 10
    clusters: int = 4
    sigma: float = 0.15
    m_size: int | None = 1000
    m_grid: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
    m_ks: tuple[int, ...] = (4, 16)
    m_epsilons: tuple[float, ...] = (0.1, 1.0, 10.0)
    m_replicates: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.sizes or len(self.replicates) != len(self.sizes) or len(self.gupta_replicates) != len(self.sizes) \
                or len(self.restarts) != len(self.sizes):
            raise ValidationError("sizes, replicates, gupta_replicates and restarts need one entry per size")
        for n in (*self.sizes, *(x for x in (self.gaussian_size, self.m_size) if x is not None)):
            check_int(n, "size", minimum=4)
        for r in (*self.replicates, *self.restarts, self.gaussian_replicates, self.m_replicates):
            check_int(r, "replicates", minimum=1)
        for r in self.gupta_replicates:
            check_int(r, "gupta_replicates", minimum=0)
        if not 0 < self.private_fraction <= 1:
            raise ValidationError(f"private_fraction must be in (0, 1], got {self.private_fraction!r}")
        if not self.ks or not self.epsilons or not self.methods:
            raise ValidationError("ks, epsilons and methods must not be empty")
        for k in (*self.ks, *self.m_ks):
            check_int(k, "k", minimum=1)
        for e in (*self.epsilons, *self.m_epsilons, self.sigma):
            check_epsilon(e)
        for m in self.methods:
            if m not in METHODS or m == "ssem":
                raise ValidationError(f"methods must be among {', '.join(x for x in METHODS if x != 'ssem')}; "
                                      f"got {m!r} (plain ssem runs in the m sweep)")
        for size in self.m_grid:
            check_int(size, "m", minimum=1)
        if self.gupta_time_limit is not None:
            check_epsilon(self.gupta_time_limit, "gupta_time_limit")
        check_int(self.clusters, "clusters", minimum=1)

    def private_size(self, n: int) -> int:
        return max(1, round(self.private_fraction * n))

    def replicates_of(self, n: int) -> int:
        return self.replicates[self.sizes.index(n)] if n in self.sizes else self.replicates[-1]


FULL = KMedianConfig()
QUICK = KMedianConfig(
    sizes=(40, 80), replicates=(2, 2), gupta_replicates=(2, 1), ks=(2, 3), epsilons=(1.0, 10.0),
    restarts=(2, 2), gaussian_size=40, gaussian_replicates=2, m_size=40, m_grid=(1, 4, 16), m_ks=(2,),
    m_epsilons=(1.0,), m_replicates=2, gupta_time_limit=20.0,
)


@dataclass
class KMedianResult:
    records: list[dict[str, Any]]
    files: list[Path] = field(default_factory=list)
    summary: str = ""


# ------------------------------------------------------------------ data
def _seed(cfg: KMedianConfig, *key: int) -> np.random.SeedSequence:
    """The child of the seed's SeedSequence at position ``key`` (what ``spawn`` would give)."""
    return np.random.SeedSequence(cfg.seed, spawn_key=tuple(int(x) for x in key))


def make_instance(cfg: KMedianConfig, variant: str, n: int, rep: int) -> tuple[np.ndarray, np.ndarray]:
    """(V, D indices) of one replicate: V uniform in the unit disc, D uniform or clustered."""
    rng = np.random.default_rng(_seed(cfg, _VARIANTS[variant], n, rep, _STREAMS["data"]))
    r, th = np.sqrt(rng.random(n)), 2 * np.pi * rng.random(n)
    pts = np.column_stack([r * np.cos(th), r * np.sin(th)])
    s = cfg.private_size(n)
    if variant != "gaussian":
        return pts, np.sort(rng.choice(n, s, replace=False))
    cr, cth = 0.7 * np.sqrt(rng.random(cfg.clusters)), 2 * np.pi * rng.random(cfg.clusters)
    centres = np.column_stack([cr * np.cos(cth), cr * np.sin(cth)])
    sq = ((pts[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
    w = np.exp(-sq / (2 * cfg.sigma**2)).sum(axis=1) + 1e-300
    return pts, np.sort(rng.choice(n, s, replace=False, p=w / w.sum()))


# ------------------------------------------------------------------ runner
class _Replicate:
    """A replicate's instance, its subsets (em) and its reference per k, built on demand."""

    def __init__(self, cfg: KMedianConfig, cache: rs.ResultCache, variant: str, n: int, rep: int, restarts: int):
        self.cfg, self.cache, self.variant, self.n, self.rep, self.restarts = cfg, cache, variant, n, rep, restarts
        self._inst: KMedian | None = None
        self._problems: dict[int, KMedian] = {}
        self._subsets: dict[int, Any] = {}

    def problem(self, k: int) -> KMedian:
        if k not in self._problems:
            if self._inst is None:
                pts, priv = make_instance(self.cfg, self.variant, self.n, self.rep)
                self._inst = KMedian(pts, priv, 1)
                self._inst.private_distances()  # cached when small: shared by every k below
            p = KMedian(self._inst.points, self._inst.private, k, diameter=self._inst.diameter)
            p._dsv = self._inst._dsv
            self._problems[k] = p
        return self._problems[k]

    def subsets(self, k: int) -> tuple[Any, float]:
        """(subsets, costs) and the seconds they took; ResourceLimitError when too many."""
        if k not in self._subsets:
            t0 = time.perf_counter()
            self._subsets[k] = (subset_costs(self.problem(k)), time.perf_counter() - t0)
        return self._subsets[k]

    def reference(self, k: int) -> dict[str, Any]:
        key = f"ref/{self.variant}/{self.n}/{self.cfg.private_size(self.n)}/{self.rep}/{k}/{self.restarts}/" \
              f"{self.cfg.seed}/{self.cfg.sigma:g}/{self.cfg.clusters}"
        rec = self.cache.get(key)
        if rec is None and self.cache.frozen:
            return {"ref_cost": math.nan, "ref_how": "not run"}
        if rec is None:
            t0 = time.perf_counter()
            if math.comb(self.n, k) <= MAX_SUBSETS:
                (_, costs), _ = self.subsets(k)
                rec = {"ref_cost": float(costs.min()), "ref_how": "enumeration"}
            else:
                rng = np.random.default_rng(_seed(self.cfg, _VARIANTS[self.variant], self.n, self.rep,
                                                  _STREAMS["ref"], k))
                _, c, how = optimum(self.problem(k), restarts=self.restarts, rng=rng)
                rec = {"ref_cost": c, "ref_how": f"{how} (best of {self.restarts})"}
            rec["ref_seconds"] = time.perf_counter() - t0
            rec["status"] = "ok"
            self.cache.put(key, rec)
        return rec


def _run_one(cfg: KMedianConfig, rp: _Replicate, k: int, eps: float, method: str, m: int | None,
             stream: tuple[int, ...], time_limit: float | None) -> dict[str, Any]:
    rec: dict[str, Any] = {"variant": rp.variant, "n": rp.n, "s": cfg.private_size(rp.n), "k": k, "eps": eps,
                           "method": method, "replicate": rp.rep, "status": "ok"}
    if k >= rp.n:
        return {**rec, "status": "skipped", "note": f"k = {k} >= n = {rp.n}"}
    rng = np.random.default_rng(_seed(cfg, _VARIANTS[rp.variant], rp.n, rp.rep, _STREAMS["run"], *stream))
    extra = 0.0
    subsets = None
    try:
        if method == "em":
            subsets, extra = rp.subsets(k)
        res = kmedian(rp.problem(k), method, eps, candidates=m, time_limit=time_limit, subsets=subsets, rng=rng)
    except ResourceLimitError as ex:
        return {**rec, "status": "refused", "note": " ".join(str(ex).split())[:200]}
    except SolverTimeLimitError as ex:
        info = ex.result if isinstance(ex.result, dict) else {}
        return {**rec, "status": "time-out", "seconds": info.get("seconds"), "m": info.get("of"),
                "steps_done": info.get("steps"),
                "note": f"{info.get('steps')} of {info.get('of')} swap steps in {time_limit:g} s"}
    return {**rec, "m": res.candidates, "cost": res.cost, "epsilon_spent": res.epsilon,
            "seconds": res.seconds + extra, "evaluations": res.evaluations}


def run_kmedian(
    out: str | Path,
    config: KMedianConfig = FULL,
    *,
    progress: Progress | None = None,
    resume: bool = True,
    cached_only: bool = False,
) -> KMedianResult:
    """Run the experiment; write ``kmedian.csv``, ``kmedian.md`` and PNGs into ``out``.

    ``kmedian.jsonl`` in ``out`` caches every finished run, so an interrupted full run
    resumes (``resume=False`` starts over; ``cached_only=True`` computes nothing and
    redraws the outputs from the cache, missing runs "not run").
    """
    cfg = config
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cache = rs.open_cache(out / "kmedian.jsonl", resume=resume, cached_only=cached_only)
    plan = _plan(cfg)
    records: list[dict[str, Any]] = []
    done = 0
    current: _Replicate | None = None
    for variant, n, rep, restarts, k, eps, method, m, gupta_ok, stream in plan:
        if current is None or (current.variant, current.n, current.rep) != (variant, n, rep):
            current = _Replicate(cfg, cache, variant, n, rep, restarts)
        limit = cfg.gupta_time_limit if method == "gupta" else None
        key = f"{variant}/{n}/{cfg.private_size(n)}/{rep}/{k}/{eps:g}/{method}/{m}/{cfg.seed}/{cfg.sigma:g}/" \
              f"{cfg.clusters}"
        rec = cache.get(key, limit)
        if rec is None and not gupta_ok:
            rec = None  # gupta beyond its replicate count: not planned
        elif rec is None and cache.frozen:
            rec = {"variant": variant, "n": n, "s": cfg.private_size(n), "k": k, "eps": eps, "method": method,
                   "replicate": rep, "m": m, "status": "not run"}
        elif rec is None:
            rec = _run_one(cfg, current, k, eps, method, m, stream, limit)
            cache.put(key, rec, limit)
        if rec is not None:
            ref = current.reference(k) if rec["status"] == "ok" else {}
            rec = {**rec, "ref_cost": ref.get("ref_cost"), "ref_how": ref.get("ref_how")}
            rc, c = rs.number(rec.get("ref_cost")), rs.number(rec.get("cost"))
            rec["ratio"] = c / rc if rc > 0 else math.nan
            records.append(rec)
        done += 1
        if progress is not None:
            progress(done, len(plan), f"{variant} n={n} rep={rep} k={k} eps={eps:g} {method}")
    rs.write_csv(out / "kmedian.csv", records, COLUMNS)
    files = [out / "kmedian.csv", *_plots(out, cfg, records)]
    summary = _summary(cfg, records)
    from ..io import atomic_write

    with atomic_write(out / "kmedian.md", "w") as fh:
        fh.write(summary)
    files.append(out / "kmedian.md")
    return KMedianResult(records, files, summary)


def _plan(cfg: KMedianConfig) -> list[tuple[Any, ...]]:
    """Every run in order: (variant, n, replicate, restarts, k, eps, method, m, planned, stream)."""
    plan: list[tuple[Any, ...]] = []
    blocks = [("uniform", n, cfg.replicates[i], cfg.gupta_replicates[i], cfg.restarts[i])
              for i, n in enumerate(cfg.sizes)]
    if cfg.gaussian_size is not None:
        n = cfg.gaussian_size
        i = cfg.sizes.index(n) if n in cfg.sizes else len(cfg.sizes) - 1
        blocks.append(("gaussian", n, cfg.gaussian_replicates, cfg.gaussian_replicates, cfg.restarts[i]))
    for variant, n, reps, gupta_reps, restarts in blocks:
        for rep in range(reps):
            for ik, k in enumerate(cfg.ks):
                for ie, eps in enumerate(cfg.epsilons):
                    for im, method in enumerate(cfg.methods):
                        if method in ("random", "random-k++") and ie > 0:
                            continue  # data-independent: once per k (listed at the first eps)
                        m = auto_candidates(n, k) if method.startswith("ssem") else None
                        plan.append((variant, n, rep, restarts, k, eps, method, m,
                                     method != "gupta" or rep < gupta_reps, (ik, ie, im)))
    if cfg.m_size is not None:
        n = cfg.m_size
        i = cfg.sizes.index(n) if n in cfg.sizes else len(cfg.sizes) - 1
        for rep in range(cfg.m_replicates):
            for ik, k in enumerate(cfg.m_ks):
                for ie, eps in enumerate(cfg.m_epsilons):
                    for im, method in enumerate(("ssem", "ssem-k++")):
                        for jm, m in enumerate(cfg.m_grid):
                            plan.append(("m-sweep", n, rep, cfg.restarts[i], k, eps, method, m, True,
                                         (ik, ie, im, jm)))
    return plan


# ------------------------------------------------------------------ report
_STYLE = {"random": ("tab:gray", ":"), "random-k++": ("tab:brown", ":"), "em": ("tab:red", "-"),
          "ssem": ("tab:blue", "-"), "ssem-auto": ("tab:blue", "-"), "ssem-k++": ("tab:green", "-"),
          "gupta": ("tab:purple", "--")}


def _ok(records: list[dict[str, Any]], **match: Any) -> list[dict[str, Any]]:
    return [r for r in records if r["status"] == "ok" and all(r.get(k) == v for k, v in match.items())]


def _band(values: list[float]) -> tuple[float, float, float]:
    v = np.asarray([x for x in values if math.isfinite(x)], dtype=np.float64)
    if not v.size:
        return math.nan, math.nan, math.nan
    lo, med, hi = np.percentile(v, [2.5, 50.0, 97.5])
    return float(med), float(lo), float(hi)


def _figure(rows: int, cols: int) -> tuple[Any, Any]:
    from .._figure import new_figure

    fig = new_figure(3.2 * cols, 2.6 * rows)
    return fig, fig.subplots(rows, cols, squeeze=False)


def _curve(ax: Any, method: str, xs: list[float], groups: list[list[float]]) -> None:
    stats = [_band(g) for g in groups]
    pts = [(x, *st) for x, st in zip(xs, stats, strict=True) if math.isfinite(st[0])]
    if not pts:
        return
    x, med, lo, hi = (np.asarray(c) for c in zip(*pts, strict=True))
    color, style = _STYLE.get(method, ("k", "-"))
    ax.plot(x, med, style, color=color, marker="o", markersize=3, linewidth=1.2, label=method)
    if not method.startswith("random"):  # the data-independent baselines: medians only
        ax.fill_between(x, lo, hi, color=color, alpha=0.1, linewidth=0)


def _legend(axes: Any) -> None:
    for ax in axes.flat:  # the first panel with curves carries the legend
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6)
            return


def _ticks(ax: Any, values: Any) -> None:
    ax.set_xscale("log")
    ax.set_xticks(list(values), labels=[f"{v:g}" for v in values])
    ax.minorticks_off()


def _plots(out: Path, cfg: KMedianConfig, records: list[dict[str, Any]]) -> list[Path]:
    from ._plot import save_png

    files = []
    for variant in ("uniform", "gaussian"):
        sizes = sorted({r["n"] for r in records if r["variant"] == variant})
        if not sizes:
            continue
        fig, axes = _figure(len(sizes), len(cfg.ks))
        for i, n in enumerate(sizes):
            for j, k in enumerate(cfg.ks):
                ax = axes[i, j]
                for method in cfg.methods:
                    mine = _ok(records, variant=variant, n=n, k=k, method=method)
                    if method.startswith("random"):  # data-independent: the same at every eps
                        groups = [[rs.number(r["ratio"]) for r in mine]] * len(cfg.epsilons)
                    else:
                        groups = [[rs.number(r["ratio"]) for r in mine if r["eps"] == e] for e in cfg.epsilons]
                    _curve(ax, method, list(cfg.epsilons), groups)
                _ticks(ax, cfg.epsilons)
                ax.set_title(f"n={n}, s={cfg.private_size(n)}, k={k}", fontsize=8)
                ax.tick_params(labelsize=7)
                ax.grid(True, alpha=0.3)
                if j == 0:
                    ax.set_ylabel("cost / reference", fontsize=8)
                if i == len(sizes) - 1:
                    ax.set_xlabel("total eps", fontsize=8)
        _legend(axes)
        path = out / f"kmedian_cost_{variant}.png"
        save_png(fig, path, dpi=60)
        files.append(path)
    sweep = [r for r in records if r["variant"] == "m-sweep"]
    if sweep:
        fig, axes = _figure(len(cfg.m_ks), len(cfg.m_epsilons))
        for i, k in enumerate(cfg.m_ks):
            for j, eps in enumerate(cfg.m_epsilons):
                ax = axes[i, j]
                for method in ("ssem", "ssem-k++"):
                    mine = _ok(sweep, k=k, eps=eps, method=method)
                    groups = [[rs.number(r["ratio"]) for r in mine if r["m"] == m] for m in cfg.m_grid]
                    _curve(ax, method, list(cfg.m_grid), groups)
                _ticks(ax, cfg.m_grid)
                ax.axvline(auto_candidates(cfg.m_size or 2, k), color="k", linewidth=0.6, alpha=0.5)
                ax.set_title(f"n={cfg.m_size}, k={k}, eps={eps:g}", fontsize=8)
                ax.tick_params(labelsize=7)
                ax.grid(True, alpha=0.3)
                ax.set_xlabel("m (line: 6 k ln n)", fontsize=8)
                ax.set_ylabel("cost / reference", fontsize=8)
        _legend(axes)
        path = out / "kmedian_cost_vs_m.png"
        save_png(fig, path, dpi=60)
        files.append(path)
    uni = [r for r in records if r["variant"] == "uniform"]
    if uni:
        sizes = sorted({r["n"] for r in uni})
        cols = min(2, len(cfg.ks))
        fig, axes = _figure(math.ceil(len(cfg.ks) / cols), cols)
        for j, k in enumerate(cfg.ks):
            ax = axes.flat[j]
            for method in cfg.methods:
                groups = [[rs.number(r.get("seconds")) for r in _ok(uni, n=n, k=k, method=method)] for n in sizes]
                _curve(ax, method, [float(n) for n in sizes], groups)
                outs = [r for r in uni if r["k"] == k and r["method"] == method and r["status"] == "time-out"]
                if outs:  # lower bounds: the seconds spent before the limit stopped the run
                    ax.plot([r["n"] for r in outs], [rs.number(r.get("seconds")) for r in outs], "^",
                            color=_STYLE[method][0], markersize=5, fillstyle="none", label=f"{method} (time-out)")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"k={k}", fontsize=8)
            ax.set_xlabel("n", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(True, alpha=0.3)
        for ax in axes[:, 0]:
            ax.set_ylabel("seconds per release", fontsize=8)
        for ax in list(axes.flat)[len(cfg.ks):]:
            ax.set_visible(False)
        _legend(axes)
        path = out / "kmedian_time.png"
        save_png(fig, path, dpi=60)
        files.append(path)
    return files


def _cell(records: list[dict[str, Any]], key: str = "ratio") -> str:
    if not records:
        return "-"
    statuses = {r["status"] for r in records}
    ok = [rs.number(r.get(key)) for r in records if r["status"] == "ok"]
    if not ok and key == "seconds" and "time-out" in statuses:  # a lower bound: the time spent before the limit
        spent = [rs.number(r.get(key)) for r in records if r["status"] == "time-out"]
        return f">{float(np.median(spent)):.3g} (time-out)"
    if not ok:
        return "/".join(sorted(statuses))
    med = float(np.median(ok))
    mark = "" if statuses == {"ok"} else " (" + "/".join(sorted(statuses - {"ok"})) + ")"
    return f"{med:.3g}{mark}"


def _summary(cfg: KMedianConfig, records: list[dict[str, Any]]) -> str:
    lines = [
        "# Private k-median (Lantz, Boyd and Page, AISec 2015, Figures 3-5)",
        "",
        f"V uniform in the unit disc, s = {cfg.private_fraction:g} n private points, Euclidean metric, "
        "sensitivity diam(V), total DP level eps per release. Cells: median over replicates of "
        "cost / non-private reference (1 = reference; lower is better); 'refused' = em beyond "
        f"C(n, k) > {MAX_SUBSETS:,}; 'time-out' = gupta past {cfg.gupta_time_limit} s.",
        "",
    ]
    for variant in ("uniform", "gaussian"):
        for n in sorted({r["n"] for r in records if r["variant"] == variant}):
            recs = [r for r in records if r["variant"] == variant and r["n"] == n]
            reps = len({r["replicate"] for r in recs})
            lines += [f"## {variant}, n = {n}, s = {cfg.private_size(n)} ({reps} replicates)", ""]
            rows = []
            for k in cfg.ks:
                for eps in cfg.epsilons:
                    row: list[Any] = [k, f"{eps:g}"]
                    for method in cfg.methods:
                        mine = [r for r in recs if r["k"] == k and r["method"] == method
                                and (method.startswith("random") or r["eps"] == eps)]
                        row.append(_cell(mine))
                    rows.append(row)
            lines += [rs.markdown_table(["k", "eps", *cfg.methods], rows), ""]
    sweep = [r for r in records if r["variant"] == "m-sweep"]
    if sweep:
        lines += [f"## cost / reference against m (n = {cfg.m_size})", ""]
        header = ["m"] + [f"{meth} k={k} eps={e:g}" for k in cfg.m_ks for e in cfg.m_epsilons
                          for meth in ("ssem", "ssem-k++")]
        rows = []
        for m in cfg.m_grid:
            rows.append([m] + [_cell([r for r in sweep if r["m"] == m and r["k"] == k and r["eps"] == e
                                      and r["method"] == meth]) for k in cfg.m_ks for e in cfg.m_epsilons
                               for meth in ("ssem", "ssem-k++")])
        lines += [rs.markdown_table(header, rows), ""]
    uni = [r for r in records if r["variant"] == "uniform"]
    if uni:
        lines += ["## seconds per release (median over replicates and eps)", ""]
        rows = []
        for n in sorted({r["n"] for r in uni}):
            for k in cfg.ks:
                rows.append([n, k] + [_cell([r for r in uni if r["n"] == n and r["k"] == k and r["method"] == meth],
                                            "seconds") for meth in cfg.methods])
        lines += [rs.markdown_table(["n", "k", *cfg.methods], rows), ""]
    spent = [(r["method"], rs.number(r.get("epsilon_spent")), r["eps"]) for r in records if r["status"] == "ok"]
    worst = max((abs(s - (0.0 if m.startswith("random") else e)) / e for m, s, e in spent), default=0.0)
    lines += [f"Privacy accounting: every release reports the eps it spends; largest relative departure "
              f"from the eps asked for (0 for random, random-k++): {worst:.2g}.", ""]
    return "\n".join(lines)

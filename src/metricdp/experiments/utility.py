r"""``metricdp experiment utility``: Figures 1 and 3 of Imola et al. (UAI 2022).

The 95%-quantile loss :math:`L_q` (q = 0.95) of each mechanism against its measured
:math:`\varepsilon_{\text{tight}}` (:math:`\delta = 10^{-3}`), on 50- and 200-element
spaces of text (GloVe vocabularies) and geolocation (Beijing cells):

* Madlib (text only), the exponential mechanism (EM), ConstOPTMech (r = 10),
  SpannerMech and OPTMech (n <= 50 only), each built over a grid of nominal eps and
  plotted at its measured eps_tight (:mod:`metricdp.experiments._tuning`);
* the packing lower bound on :math:`L_q` (:func:`metricdp.bounds.lower_bound_quantile`),
  plotted at the eps it is computed for;
* the uniform-random baseline (releasing a uniformly random element).

The nominal grid of each mechanism is chosen from one probe build so that its
eps_tight spans the same range for every mechanism: by default
:func:`~metricdp.experiments._tuning.auto_eps_range` of the space (from near-uniform to
near-exact), or ``eps_range``.

Madlib's matrix is a Monte-Carlo estimate, whose eps_tight is meaningless,
so Madlib is plotted at its *proven* eps, an upper bound on its eps_tight: its
true curve lies at or left of the plotted one (it can only look worse than it is). The
lower bound holds for every eps-mDP mechanism; a mechanism plotted at its
eps_tight (an (eps, delta) guarantee, weaker than eps-mDP) may fall below it.

ConstOPTMech is run with the ``normalised`` fit (metricdp's default, never worse than
EM or the paper's fit) and, in full mode, also with the paper's lambda sweep
(``paper`` fit, lambdas 0.001, 0.1, 1), the paper's own mechanism.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._progress import Progress
from .._validation import check_int
from ..errors import MetricDPError, ValidationError
from ..loss import quantile_rank
from . import _records as rs
from . import _tuning as tu
from ._plot import plot_grid

__all__ = ["COLUMNS", "FULL", "QUICK", "UtilityConfig", "UtilityResult", "run_utility"]

COLUMNS = (
    "dataset", "n", "mechanism", "point", "nominal_eps", "eps_tight", "eps_kind", "loss_q", "loss_max",
    "seconds", "lp_nonzeros", "winner", "status", "dataset_sha256",
)


@dataclass(frozen=True)
class UtilityConfig:
    """What ``run_utility`` computes (``FULL`` is the paper's setting, ``QUICK`` a smoke run)."""

    datasets: tuple[str, ...] = ("text", "geo")
    sizes: tuple[int, ...] = (50, 200)
    mechanisms: tuple[str, ...] = ("madlib", "exponential", "constopt", "spanner", "optimal")
    points: int = 8
    eps_range: tuple[float, float] | None = None
    constopt_fits: tuple[str, ...] = ("normalised", "paper")
    neighbours: int = 10
    optimal_max_n: int = 50
    madlib_samples: int = 2000
    time_limit: float | None = 1800.0
    seed: int = 0
    bound_points: int = 25
    delta: float = tu.DELTA
    quantile: float = tu.QUANTILE

    def __post_init__(self) -> None:
        rs.check_datasets(self.datasets)
        for n in self.sizes:
            check_int(n, "size", minimum=3)
        if self.sizes:
            rs.check_sizes(self.datasets, self.sizes)
        bad = [m for m in self.mechanisms if m not in tu.FAMILIES]
        if bad or not self.mechanisms:
            allowed = ", ".join(tu.FAMILIES)
            raise ValidationError(f"mechanisms must be among {allowed}, got {list(self.mechanisms)!r}")
        check_int(self.points, "points", minimum=1)
        for fit in self.constopt_fits:
            if fit not in ("normalised", "paper"):
                raise ValidationError(f"constopt fit must be 'normalised' or 'paper', got {fit!r}")
        if self.eps_range is not None and not (0 < self.eps_range[0] < self.eps_range[1]):
            raise ValidationError(f"eps_range must be 0 < lo < hi, got {self.eps_range!r}")


FULL = UtilityConfig()
QUICK = UtilityConfig(sizes=(12, 24), points=3, constopt_fits=("normalised",), optimal_max_n=12,
                      madlib_samples=300, time_limit=60.0, bound_points=8)


@dataclass
class UtilityResult:
    """The records (one per built mechanism, bound point or baseline) and files written."""

    records: list[dict[str, Any]]
    files: list[Path] = field(default_factory=list)
    summary: str = ""


def _specs(cfg: UtilityConfig, dataset: str, n: int) -> list[tu.MechanismSpec]:
    specs = []
    if rs.has_embedding(dataset):  # Madlib needs embedding coordinates: not geo, as in the paper
        specs.append(tu.MechanismSpec("Madlib", "madlib", {"samples": cfg.madlib_samples}))
    specs.append(tu.MechanismSpec("EM", "exponential"))
    r = min(cfg.neighbours, n - 1)
    for fit in cfg.constopt_fits:
        opts: dict[str, Any] = {"neighbours": r, "fit": fit}
        if fit == "paper":  # the paper's own mechanism: not replaced by EM where EM is better
            opts.update(lambdas=(0.001, 0.1, 1.0), pure=True)
        suffix = "" if fit == "normalised" else ", paper fit"
        specs.append(tu.MechanismSpec(f"ConstOPTMech (r={r}{suffix})", "constopt", opts))
    specs.append(tu.MechanismSpec("SpannerMech", "spanner"))
    if n <= cfg.optimal_max_n:
        specs.append(tu.MechanismSpec("OPTMech", "optimal"))
    return [s for s in specs if s.family in cfg.mechanisms]


def _record(
    dataset: str, n: int, label: str, point: str, p: tu.SweepPoint | None = None, **extra: Any
) -> dict[str, Any]:
    rec: dict[str, Any] = {"dataset": dataset, "n": n, "mechanism": label, "point": point, "status": "ok"}
    if p is not None:
        nonzeros = (p.info.get("lp") or {}).get("nonzeros")
        rec.update(nominal_eps=p.nominal, eps_tight=p.eps, eps_kind=p.eps_kind, loss_q=p.loss_quantile,
                   loss_max=p.loss_max, seconds=p.seconds, lp_nonzeros=nonzeros, winner=p.info.get("winner"))
    rec.update(extra)
    return rec


def run_utility(
    out: str | Path,
    config: UtilityConfig = FULL,
    *,
    progress: Progress | None = None,
    resume: bool = True,
    cached_only: bool = False,
) -> UtilityResult:
    """Run the experiment and write ``utility.csv``, ``utility.md`` and PNGs into ``out``.

    Parameters
    ----------
    out : path
        Output directory (created if missing). ``utility.jsonl`` there caches finished
        builds so that an interrupted full run resumes (``resume=False`` starts over;
        ``cached_only=True`` builds nothing and redraws the outputs from the cache,
        listing what it lacks as "not run").
    config : UtilityConfig
    progress : callable, optional
        ``progress(done, total, description)`` after every build.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cache = rs.open_cache(out / "utility.jsonl", resume=resume, cached_only=cached_only)
    cfg = config
    spaces = [(ds, n) for ds in cfg.datasets for n in cfg.sizes]
    total = sum(len(_specs(cfg, ds, n)) * (cfg.points + 1) + 1 for ds, n in spaces)
    done = 0

    def step(text: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total, text)

    records: list[dict[str, Any]] = []
    # a file dataset is keyed by its path and content hash: a changed file is recomputed
    idents = {ds: rs.dataset_key(ds) for ds in cfg.datasets}
    for ds, n in spaces:
        space = rs.dataset_space(ds, n, seed=cfg.seed)
        lo, hi = cfg.eps_range or rs.auto_eps_range(space)
        targets = np.geomspace(lo, hi, cfg.points) if cfg.points > 1 else np.array([math.sqrt(lo * hi)])
        for spec in _specs(cfg, ds, n):
            records += _series(cfg, cache, space, ds, n, spec, targets, step, idents[ds])
        records += _baselines(cfg, space, ds, n, [r for r in records if r["dataset"] == ds and r["n"] == n])
        step(f"{ds} n={n}: bounds")
    shas = {ds: rs.dataset_sha256(ds) for ds in cfg.datasets}
    records = [{**r, "dataset_sha256": shas.get(r["dataset"], "")} for r in records]
    rs.write_csv(out / "utility.csv", records, COLUMNS)
    files = [out / "utility.csv"]
    files += _plots(out, cfg, records, spaces)
    summary = _summary(cfg, records, spaces)
    from ..io import atomic_write

    with atomic_write(out / "utility.md", "w") as fh:
        fh.write(summary)
    files.append(out / "utility.md")
    return UtilityResult(records, files, summary)


def _series(cfg: UtilityConfig, cache: rs.ResultCache, space: Any, ds: str, n: int, spec: tu.MechanismSpec,
            targets: np.ndarray, step: Any, ident: str | None = None) -> list[dict[str, Any]]:
    """Probe, then the nominal grid; a time-out ends the series (the rest is reported skipped).

    ``ident`` is the dataset's identity in cache keys (:func:`._records.dataset_key`)."""
    builders: list[tu.Builder] = []  # made on the first cache miss only
    # everything that changes a point's result, except the time limit (see ResultCache.get)
    base = f"{ident or ds}/{n}/{spec.label}/{cfg.points}/{cfg.eps_range}/{cfg.seed}/{cfg.madlib_samples}"
    where = f"{rs.dataset_slug(ds)}/{n}/{spec.label}"
    out: list[dict[str, Any]] = []
    probe_eps = float(np.exp(np.log(targets).mean()))

    def one(point: str, eps: float) -> dict[str, Any]:
        key = f"{base}/{point}"
        cached = cache.get(key, cfg.time_limit)
        if cached is not None:  # under the dataset's name of this run (a file may be spelt otherwise)
            return {**cached, "dataset": ds}
        if cache.frozen:
            return _record(ds, n, spec.label, point, nominal_eps=eps, status="not run")
        if not builders:
            builders.append(tu.make_builder(spec, space, time_limit=cfg.time_limit, seed=cfg.seed))
        t0 = time.perf_counter()
        try:
            mech = builders[0](eps)
            p = tu.evaluate(mech, delta=cfg.delta, q=cfg.quantile, seconds=time.perf_counter() - t0)
            rec = _record(ds, n, spec.label, point, p)
        except MetricDPError as ex:
            status = "time-out" if rs.is_timeout(ex) else "error"
            rec = _record(ds, n, spec.label, point, nominal_eps=eps, status=status,
                          note=" ".join(str(ex).split())[:300])
        cache.put(key, rec, cfg.time_limit)
        return rec

    probe = one("probe", probe_eps)
    out.append(probe)
    step(f"{where}: probe")
    if probe["status"] != "ok":
        for i in range(cfg.points):
            out.append(_record(ds, n, spec.label, str(i), status="skipped"))
            step(f"{where}: skipped")
        return out
    eps_probe = rs.number(probe["eps_tight"])
    rho = eps_probe / probe_eps if eps_probe > 0 else 1.0
    stopped = False
    for i, t in enumerate(targets):
        if stopped:
            out.append(_record(ds, n, spec.label, str(i), status="skipped"))
        else:
            rec = one(str(i), float(t / rho))
            out.append(rec)
            stopped = rec["status"] == "time-out"
        step(f"{where}: eps {i + 1}/{len(targets)}")
    return out


def _baselines(cfg: UtilityConfig, space: Any, ds: str, n: int, done: list[dict[str, Any]]) -> list[dict]:
    """The lower bound over the plotted eps range and the uniform-random baseline."""
    from ..bounds import lower_bound, lower_bound_quantile

    eps = [rs.number(r.get("eps_tight")) for r in done if r["status"] == "ok"]
    eps = [e for e in eps if math.isfinite(e) and e > 0]
    out = []
    if eps:
        for i, e in enumerate(map(float, np.geomspace(min(eps), max(eps), cfg.bound_points))):
            lq = lower_bound_quantile(space, e, cfg.quantile).value
            out.append(_record(ds, n, "lower bound", str(i), nominal_eps=e, eps_tight=e, eps_kind="bound",
                               loss_q=lq, loss_max=lower_bound(space, e).value))
    u = np.sort(space.distances.mean(axis=1))
    out.append(_record(ds, n, "uniform", "0", eps_kind="none", eps_tight=0.0,
                       loss_q=float(u[quantile_rank(n, cfg.quantile) - 1]), loss_max=float(u[-1])))
    return out


def _curve(records: Sequence[dict[str, Any]], label: str) -> tuple[np.ndarray, np.ndarray]:
    pts = sorted(
        (rs.number(r["eps_tight"]), rs.number(r["loss_q"]))
        for r in records if r["mechanism"] == label and r["status"] == "ok"
    )
    pts = [(e, v) for e, v in pts if math.isfinite(e) and math.isfinite(v)]
    return np.array([p[0] for p in pts]), np.array([p[1] for p in pts])


def _labels(records: Sequence[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for r in records:
        if r["mechanism"] not in ("lower bound", "uniform"):
            seen.setdefault(r["mechanism"], None)
    return list(seen)


TITLES = {"text": "text (GloVe)", "geo": "geolocation (Beijing)", "gaussian": "Gaussian 50-d"}
XLABEL = r"$\varepsilon_{tight}$ ($\delta$ = 0.001)"


def _plots(
    out: Path, cfg: UtilityConfig, records: list[dict[str, Any]], spaces: list[tuple[str, int]]
) -> list[Path]:
    panels = []
    for ds, n in spaces:
        recs = [r for r in records if r["dataset"] == ds and r["n"] == n]
        series = []
        for label in _labels(recs):
            x, y = _curve(recs, label)
            dashed = label == "Madlib"  # plotted at its proven eps (see the module docstring)
            series.append((label + (" (at proven eps)" if dashed else ""), x, y, "--" if dashed else "-o"))
        x, y = _curve(recs, "lower bound")
        series.append(("lower bound", x, y, ":"))
        uni = next(r for r in recs if r["mechanism"] == "uniform")
        xs = [s[1] for s in series if len(s[1])]
        if xs:
            lo, hi = min(float(v.min()) for v in xs), max(float(v.max()) for v in xs)
            series.append(("uniform", np.array([lo, hi]), np.full(2, rs.number(uni["loss_q"])), "-."))
        panels.append((f"{TITLES.get(ds, rs.dataset_slug(ds))}, n = {n}", series))
    files = []
    for (ds, n), panel in zip(spaces, panels, strict=True):
        path = out / f"utility_{rs.dataset_slug(ds)}_{n}.png"
        plot_grid(path, [panel], xlabel=XLABEL, ylabel=f"$L_{{{cfg.quantile:g}}}$")
        files.append(path)
    path = out / "utility.png"
    plot_grid(path, panels, xlabel=XLABEL, ylabel=f"$L_{{{cfg.quantile:g}}}$")
    files.append(path)
    return files


def interpolate(records: Sequence[dict[str, Any]], label: str, at: np.ndarray) -> np.ndarray:
    """L_q of a series at given eps by linear interpolation in log eps (nan outside its range)."""
    x, y = _curve(records, label)
    out = np.full(len(at), np.nan)
    if len(x) == 0:
        return out
    inside = (at >= x.min() * (1 - 1e-9)) & (at <= x.max() * (1 + 1e-9))
    out[inside] = np.interp(np.log(at[inside]), np.log(np.maximum(x, 1e-300)), y)
    return out


def _common_eps(records: Sequence[dict[str, Any]], labels: Sequence[str], k: int) -> np.ndarray | None:
    """k eps_tight values, log-spaced over the range every series covers (else over all)."""
    ranges = []
    for lab in labels:
        x, _ = _curve(records, lab)
        x = x[x > 0]
        if len(x):
            ranges.append((float(x.min()), float(x.max())))
    if not ranges:
        return None
    lo, hi = max(a for a, _ in ranges), min(b for _, b in ranges)
    if not lo < hi:
        lo, hi = min(a for a, _ in ranges), max(b for _, b in ranges)
    return np.geomspace(lo, hi, k) if lo < hi else np.array([lo])


def _summary(cfg: UtilityConfig, records: list[dict[str, Any]], spaces: list[tuple[str, int]]) -> str:
    lines = [
        "# Utility: L_q versus eps_tight (Imola et al., Figures 1 and 3)",
        "",
        f"q = {cfg.quantile}, delta = {cfg.delta}; {cfg.points} nominal eps per mechanism (+1 probe); "
        f"seed {cfg.seed}; LP time limit {cfg.time_limit} s; Madlib {cfg.madlib_samples} samples per row.",
        "",
        "Madlib is placed at its proven eps (its matrix is a Monte-Carlo estimate, whose eps_tight is "
        "meaningless); its true eps_tight is at most that, so its true curve lies at or left of the "
        "plotted one. The values below are interpolated (linearly in log eps) at eps_tight values "
        "spread over the range every series covers; "
        "'-' = outside a series' range; * = lowest among the non-optimal mechanisms; "
        "mid = EM between 10% and 90% of the uniform loss.",
        "",
    ]
    findings = []
    for ds, n in spaces:
        recs = [r for r in records if r["dataset"] == ds and r["n"] == n]
        labels = _labels(recs)
        at = _common_eps(recs, labels, max(2, cfg.points))
        if at is None:
            continue
        cols = {lab: interpolate(recs, lab, at) for lab in labels}
        bound = interpolate(recs, "lower bound", at)
        uni = rs.number(next(r for r in recs if r["mechanism"] == "uniform")["loss_q"])
        rows = []
        nonopt = [lab for lab in labels if lab != "OPTMech"]
        wins = mids = 0
        for j, e in enumerate(at):
            vals = {lab: cols[lab][j] for lab in nonopt if math.isfinite(cols[lab][j])}
            best = min(vals, key=vals.__getitem__) if vals else None
            em = cols.get("EM", np.full(len(at), np.nan))[j]
            mid = math.isfinite(em) and 0.1 * uni <= em <= 0.9 * uni
            if mid and best is not None:
                mids += 1
                wins += best.startswith("ConstOPTMech")
            row: list[Any] = [f"{e:.4g}" + (" (mid)" if mid else "")]
            for lab in labels:
                v = cols[lab][j]
                row.append("-" if not math.isfinite(v) else f"{v:.4g}" + ("*" if lab == best else ""))
            row.append(bound[j])
            rows.append(row)
        lines += [f"## {ds}, n = {n} (uniform baseline L_q = {uni:.4g})", ""]
        lines.append(rs.markdown_table(["eps_tight", *labels, "lower bound"], rows))
        failed = [r for r in recs if r["status"] not in ("ok",)]
        if failed:
            lines += ["", "Not built: " + "; ".join(
                f"{r['mechanism']} point {r['point']}: {r['status']}" for r in failed[:10]
            ) + (f" and {len(failed) - 10} more" if len(failed) > 10 else "")]
        lines.append("")
        findings.append(f"- {ds}, n = {n}: a ConstOPTMech series is the lowest non-optimal mechanism at "
                        f"{wins} of {mids} mid-range eps_tight.")
        if "OPTMech" in cols:
            cname = next((lab for lab in labels if lab.startswith("ConstOPTMech")), None)
            if cname:
                ratio = cols[cname] / cols["OPTMech"]
                ratio = ratio[np.isfinite(ratio)]
                if len(ratio):
                    findings.append(f"  - {cname} / OPTMech: median L_q ratio {np.median(ratio):.3g} "
                                    f"(max {ratio.max():.3g}) over the common eps range.")
    lines += ["## Findings", "", *findings, ""]
    lines += ["Configuration: " + ", ".join(f"{k} = {v}" for k, v in asdict(cfg).items()), ""]
    return "\n".join(lines)

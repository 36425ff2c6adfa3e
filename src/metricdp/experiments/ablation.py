r"""``metricdp experiment ablation``: Table 3 of Imola et al. (UAI 2022).

ConstOPTMech's two knobs on a 200-word GloVe vocabulary, with the paper's fit and a
single lambda per build (the lambda sweep of the ``paper`` fit reduced to one value):

* the number of neighbours r in {1, 3, 5, 7, 9} at lambda = 50;
* the penalty lambda in {0.1, 1, 10, 50, 250} at r = 5;

each at a fixed measured privacy: the nominal eps is tuned
(:func:`~metricdp.experiments._tuning.tune_to_eps_tight`) so that eps_tight
(:math:`\delta = 10^{-3}`) equals 1.0, and again 2.0 (the paper's Table 3 used FastText at
2.0; both are shown). Reported: :math:`L_q` (q = 0.95), the worst-case loss, the build
time and the LP's non-zeros. The pair (r = 5, lambda = 50) belongs to both sweeps and is
built once per target.

``dataset`` may also be a POINTS file (the paper's FastText vocabulary written by
``metricdp data vec FILE --size 200``): its first ``n`` points are used
(:func:`~metricdp.experiments._records.dataset_space`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .._progress import Progress
from .._validation import check_epsilon, check_int
from ..errors import MetricDPError, ValidationError
from . import _records as rs
from . import _tuning as tu
from ._plot import plot_grid

__all__ = ["COLUMNS", "FULL", "QUICK", "AblationConfig", "AblationResult", "run_ablation"]

COLUMNS = (
    "dataset", "n", "target_eps_tight", "sweep", "r", "lambda", "nominal_eps", "eps_tight", "converged",
    "evaluations", "loss_q", "loss_max", "seconds", "nonzeros", "winner", "status", "note", "dataset_sha256",
)


@dataclass(frozen=True)
class AblationConfig:
    """What ``run_ablation`` computes (``FULL``: the paper's Table 3; ``QUICK``: smoke)."""

    dataset: str = "text"
    n: int = 200
    targets: tuple[float, ...] = (1.0, 2.0)
    r_values: tuple[int, ...] = (1, 3, 5, 7, 9)
    r_lambda: float = 50.0
    lambdas: tuple[float, ...] = (0.1, 1.0, 10.0, 50.0, 250.0)
    lambda_r: int = 5
    time_limit: float | None = 1800.0
    rtol: float = 5e-3
    seed: int = 0
    delta: float = tu.DELTA
    quantile: float = tu.QUANTILE

    def __post_init__(self) -> None:
        rs.check_dataset(self.dataset)
        check_int(self.n, "n", minimum=3)
        rs.check_sizes((self.dataset,), (self.n,))
        if not self.targets or not self.r_values or not self.lambdas:
            raise ValidationError("targets, r_values and lambdas must not be empty")
        for t in self.targets:
            check_epsilon(t, "eps_tight target")
        for r in (*self.r_values, self.lambda_r):
            check_int(r, "r", minimum=1, maximum=self.n - 1)
        for lam in (*self.lambdas, self.r_lambda):
            check_epsilon(lam, "lambda")
        check_epsilon(self.rtol, "rtol")

    def units(self) -> list[tuple[str, int, float]]:
        """(sweep, r, lambda) rows in table order."""
        return [("r", r, self.r_lambda) for r in self.r_values] + [("lambda", self.lambda_r, lam)
                                                                    for lam in self.lambdas]


FULL = AblationConfig()
QUICK = AblationConfig(n=20, r_values=(1, 3, 5), lambdas=(1.0, 50.0), time_limit=60.0, rtol=1e-2)


@dataclass
class AblationResult:
    records: list[dict[str, Any]]
    files: list[Path] = field(default_factory=list)
    summary: str = ""


def run_ablation(
    out: str | Path,
    config: AblationConfig = FULL,
    *,
    progress: Progress | None = None,
    resume: bool = True,
    cached_only: bool = False,
) -> AblationResult:
    """Run the experiment; write ``ablation.csv``, ``ablation.md`` and ``ablation.png`` into ``out``.

    ``ablation.jsonl`` in ``out`` caches finished builds so an interrupted run resumes
    (``cached_only=True``: build nothing, redraw the outputs from the cache, missing
    units "not run").
    """
    cfg = config
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cache = rs.open_cache(out / "ablation.jsonl", resume=resume, cached_only=cached_only)
    space = rs.dataset_space(cfg.dataset, cfg.n, seed=cfg.seed)
    ident = rs.dataset_key(cfg.dataset)  # a file: its path and content hash (a changed file is recomputed)
    sha = rs.dataset_sha256(cfg.dataset)
    units = cfg.units()
    total = len(cfg.targets) * len(units)
    done = 0
    records: list[dict[str, Any]] = []
    for target in cfg.targets:
        start: float | None = None
        for sweep, r, lam in units:
            key = f"{ident}/{cfg.n}/{target:g}/{r}/{lam:g}/{cfg.rtol:g}/{cfg.seed}"
            rec = cache.get(key, cfg.time_limit)
            if rec is None and cache.frozen:
                rec = {"dataset": cfg.dataset, "n": cfg.n, "target_eps_tight": target, "r": r, "lambda": lam,
                       "status": "not run"}
            elif rec is None:
                rec = _unit(cfg, space, target, r, lam, start)
                cache.put(key, rec, cfg.time_limit)
            if rec["status"] == "ok":
                start = rs.number(rec["nominal_eps"])
            records.append({**rec, "dataset": cfg.dataset, "sweep": sweep, "dataset_sha256": sha})
            done += 1
            if progress is not None:
                progress(done, total, f"eps_tight {target:g}: r={r}, lambda={lam:g}: {rec['status']}")
    rs.write_csv(out / "ablation.csv", records, COLUMNS)
    files = [out / "ablation.csv", _plot(out, cfg, records)]
    summary = _summary(cfg, records)
    from ..io import atomic_write

    with atomic_write(out / "ablation.md", "w") as fh:
        fh.write(summary)
    files.append(out / "ablation.md")
    return AblationResult(records, files, summary)


def _unit(cfg: AblationConfig, space: Any, target: float, r: int, lam: float, start: float | None) -> dict:
    opts = {"neighbours": r, "fit": "paper", "lambdas": (lam,), "pure": True}
    spec = tu.MechanismSpec("ConstOPTMech", "constopt", opts)
    build = tu.make_builder(spec, space, time_limit=cfg.time_limit, seed=cfg.seed)
    seconds: dict[float, float] = {}

    def timed(eps: float) -> Any:
        t0 = time.perf_counter()
        mech = build(eps)
        seconds[eps] = time.perf_counter() - t0
        return mech

    rec: dict[str, Any] = {"dataset": cfg.dataset, "n": cfg.n, "target_eps_tight": target}
    rec.update(r=r, **{"lambda": lam})
    try:
        tuned = tu.tune_to_eps_tight(timed, target, delta=cfg.delta, rtol=cfg.rtol, start=start)
    except MetricDPError as ex:
        rec.update(status="time-out" if rs.is_timeout(ex) else "error", note=" ".join(str(ex).split())[:300],
                   evaluations=len(seconds))
        return rec
    p = tu.evaluate(tuned.mechanism, delta=cfg.delta, q=cfg.quantile)
    lp = dict(tuned.mechanism.info.get("lp") or {})
    rec.update(
        nominal_eps=tuned.epsilon, eps_tight=tuned.eps_tight, converged=tuned.converged,
        evaluations=tuned.evaluations, loss_q=p.loss_quantile, loss_max=p.loss_max,
        seconds=seconds.get(tuned.epsilon), nonzeros=lp.get("nonzeros"), status="ok",
        winner=tuned.mechanism.info.get("winner"),
        note=rs.tuning_note(tuned),
    )
    return rec


def _plot(out: Path, cfg: AblationConfig, records: list[dict[str, Any]]) -> Path:
    panels = []
    for sweep, title in (("r", f"lambda = {cfg.r_lambda:g}"), ("lambda", f"r = {cfg.lambda_r}")):
        key = sweep
        curves = []
        for target in cfg.targets:
            pts = [(rs.number(r[key]), rs.number(r.get("loss_q"))) for r in records
                   if r["sweep"] == sweep and r["target_eps_tight"] == target and r["status"] == "ok"]
            curves.append((f"eps_tight = {target:g}", [x for x, _ in pts], [y for _, y in pts], "-o"))
        panels.append((f"ConstOPTMech, {title}, n = {cfg.n}", curves))
    path = out / "ablation.png"
    plot_grid(path, panels, xlabel=["r (neighbours)", "lambda"], ylabel=f"$L_{{{cfg.quantile:g}}}$",
                 logx=[False, True])
    return path


def _summary(cfg: AblationConfig, records: list[dict[str, Any]]) -> str:
    lines = [
        "# Ablation: ConstOPTMech's r and lambda (Imola et al., Table 3)",
        "",
        f"{cfg.n}-point {cfg.dataset} space (seed {cfg.seed}); paper fit with one lambda per build; "
        f"nominal eps tuned so that eps_tight (delta = {cfg.delta}) is within {cfg.rtol:g} (relative) of "
        "each target. "
        "Cells: L_q (q = 0.95) / worst-case loss / build seconds; (!) = tuning not converged; "
        "(EM) = ConstOPTMech returned the exponential mechanism (its LP candidate lost to EM at that "
        "nominal eps), so the cell is not the paper's fit.",
        "",
    ]

    def cell(rec: dict[str, Any] | None) -> str:
        if rec is None:
            return "-"
        if rec["status"] != "ok":
            return rec["status"]
        return (f"{rs.number(rec['loss_q']):.4g} / {rs.number(rec['loss_max']):.4g} / "
                f"{rs.number(rec.get('seconds')):.3g} s{rs.flags(rec)}")

    header = [f"eps_tight = {t:g}" for t in cfg.targets]
    for sweep, fixed in (("r", f"lambda = {cfg.r_lambda:g}"), ("lambda", f"r = {cfg.lambda_r}")):
        var = sweep
        by = {(r[var], r["target_eps_tight"]): r for r in records if r["sweep"] == sweep}
        values = cfg.r_values if sweep == "r" else cfg.lambdas
        rows = [[f"{v:g}", *[cell(by.get((v, t))) for t in cfg.targets]] for v in values]
        lines += [f"## {var} ({fixed})", "", rs.markdown_table([var, *header], rows), ""]
    failed = [r for r in records if r["status"] != "ok"]
    if failed:
        lines += ["Notes:", ""]
        lines += [f"- r = {r['r']}, lambda = {r['lambda']:g}, eps_tight {r['target_eps_tight']:g}: "
                  f"{r['status']}: {r.get('note', '')}" for r in failed]
        lines.append("")
    lines += ["Configuration: " + ", ".join(f"{k} = {v}" for k, v in asdict(cfg).items()), ""]
    return "\n".join(lines)

r"""``metricdp experiment scalability``: Tables 2 and 4, Figures 2 and 4 of Imola et al. (UAI 2022).

Time and LP non-zeros of ConstOPTMech (r = 5 and 10), SpannerMech, OPTMech and the
exponential mechanism (EM, the paper's reference curve in Figures 2 and 4; a closed form,
so its time is the build and the builder's audit, and it has no LP) for
n = 50, 100, ... at a *fixed* measured privacy: each mechanism's nominal eps is tuned
(:func:`~metricdp.experiments._tuning.tune_to_eps_tight`) so that its eps_tight
(:math:`\delta = 10^{-3}`) equals the target to a relative tolerance ``rtol`` (0.5% by
default). The targets are the paper's for exactly these data: 1.0 for GloVe text and 0.3
for geolocation (its Table 4 and Appendix C), or ``eps_tight`` for every dataset. A
POINTS file as dataset (:func:`~metricdp.experiments._records.dataset_space`) takes the
geolocation target when its metric is haversine (``label,lat,lon``, as ``metricdp data
geolife`` writes) and the text target otherwise.

* time = wall seconds of the build at the tuned eps (LPs, the tolerance repair and the
  builder's independent audit); the tuning's own builds are reported separately
  (``tune_seconds``, ``evaluations``);
* non-zeros = of the LP's constraint matrix as the builder reports it
  (``info["lp"]["nonzeros"]``; for multi-LP fits, what the builder reports);
* every LP runs under a time limit (1,800 s as in the paper); a mechanism's series stops
  at its first time-out, and larger n are reported as skipped, as in the paper;
* L_q (q = 0.95) of each mechanism versus n.

ConstOPTMech uses the paper's fit (three lambdas 0.001, 0.1, 1) by default, as the
paper timed it, and runs Algorithm 1 as the paper does (``exponential_candidate=False``:
the exponential mechanism is no candidate, so the times, non-zeros and losses compared
with the paper's Table 4 are those of the paper's LP fit even where EM would be better;
``metricdp build --mechanism constopt --fit paper --no-exponential-candidate`` builds
the same mechanism). ``fit="normalised"`` times metricdp's exact fit instead, with EM
competing (the library's default).
"""

from __future__ import annotations

import math
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

__all__ = ["COLUMNS", "DEFAULT_TARGETS", "FULL", "QUICK", "ScalabilityConfig", "ScalabilityResult",
           "run_scalability"]

#: The paper's fixed eps_tight per dataset (a POINTS file: ``geo``'s if haversine, else ``text``'s).
DEFAULT_TARGETS = {"text": 1.0, "geo": 0.3, "gaussian": 1.0}

COLUMNS = (
    "dataset", "n", "mechanism", "target_eps_tight", "nominal_eps", "eps_tight", "converged", "evaluations",
    "seconds", "lp_seconds", "tune_seconds", "variables", "constraints", "nonzeros", "loss_q", "loss_max",
    "winner", "status", "note", "dataset_sha256",
)

#: Series tokens -> (label, family, options); ``constopt@R`` sets r.
SERIES = ("constopt@5", "constopt@10", "spanner", "optimal", "exponential")


@dataclass(frozen=True)
class ScalabilityConfig:
    """What ``run_scalability`` computes (``FULL``: the paper's sizes; ``QUICK``: smoke)."""

    datasets: tuple[str, ...] = ("text", "geo")
    sizes: tuple[int, ...] = (50, 100, 150, 200, 250, 300, 350, 400)
    mechanisms: tuple[str, ...] = SERIES
    eps_tight: float | None = None
    fit: str = "paper"
    lambdas: tuple[float, ...] = (0.001, 0.1, 1.0)
    time_limit: float | None = 1800.0
    rtol: float = 5e-3
    seed: int = 0
    delta: float = tu.DELTA
    quantile: float = tu.QUANTILE

    def __post_init__(self) -> None:
        rs.check_datasets(self.datasets)
        if not self.sizes:
            raise ValidationError("sizes must not be empty")
        for n in self.sizes:
            check_int(n, "size", minimum=3)
        rs.check_sizes(self.datasets, self.sizes)
        for tok in self.mechanisms:
            _series_spec(tok, self)
        if self.eps_tight is not None:
            check_epsilon(self.eps_tight, "eps_tight")
        if self.fit not in ("paper", "normalised"):
            raise ValidationError(f"fit must be 'paper' or 'normalised', got {self.fit!r}")
        check_epsilon(self.rtol, "rtol")

    def target(self, dataset: str) -> float:
        """The eps_tight a dataset is tuned to (``eps_tight``, else :data:`DEFAULT_TARGETS`)."""
        if self.eps_tight is not None:
            return self.eps_tight
        if rs.is_file_dataset(dataset):
            return DEFAULT_TARGETS["geo" if rs.dataset_metric(dataset) == "haversine" else "text"]
        return DEFAULT_TARGETS[dataset]


@dataclass
class ScalabilityResult:
    records: list[dict[str, Any]]
    files: list[Path] = field(default_factory=list)
    summary: str = ""


def _series_spec(token: str, cfg: ScalabilityConfig, n: int | None = None) -> tu.MechanismSpec:
    name, _, r = token.partition("@")
    if name == "constopt":
        try:
            rr = int(r) if r else 10
        except ValueError:
            raise ValidationError(f"constopt@R needs an integer R, got {token!r}") from None
        check_int(rr, f"r of {token!r}", minimum=1)
        opts: dict[str, Any] = {"neighbours": rr if n is None else min(rr, n - 1), "fit": cfg.fit}
        if cfg.fit == "paper":  # Algorithm 1 as the paper timed it for Table 4: no EM candidate
            opts.update(lambdas=tuple(cfg.lambdas), exponential_candidate=False)
        return tu.MechanismSpec(f"ConstOPTMech (r={rr})", "constopt", opts)
    if r:
        raise ValidationError(f"only constopt takes @R, got {token!r}")
    labels = {"spanner": "SpannerMech", "optimal": "OPTMech", "exponential": "EM"}
    if name not in labels:
        allowed = "constopt@R, spanner, optimal, exponential"
        raise ValidationError(f"mechanisms must be among {allowed}; got {token!r}")
    return tu.MechanismSpec(labels[name], name)


FULL = ScalabilityConfig()
QUICK = ScalabilityConfig(sizes=(12, 20), time_limit=60.0, rtol=1e-2)


def run_scalability(
    out: str | Path,
    config: ScalabilityConfig = FULL,
    *,
    progress: Progress | None = None,
    resume: bool = True,
    cached_only: bool = False,
) -> ScalabilityResult:
    """Run the experiment; write ``scalability.csv``, ``scalability.md`` and PNGs into ``out``.

    ``scalability.jsonl`` in ``out`` caches finished (dataset, n, mechanism) units so an
    interrupted full run resumes (``resume=False`` starts over; ``cached_only=True``
    builds nothing and redraws the outputs from the cache, missing units "not run").
    """
    cfg = config
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cache = rs.open_cache(out / "scalability.jsonl", resume=resume, cached_only=cached_only)
    total = len(cfg.datasets) * len(cfg.sizes) * len(cfg.mechanisms)
    done = 0
    records: list[dict[str, Any]] = []
    for ds in cfg.datasets:
        target = cfg.target(ds)
        ident = rs.dataset_key(ds)  # a file: its path and content hash (a changed file is recomputed)
        sha = rs.dataset_sha256(ds)
        stopped: dict[str, int] = {}
        start: dict[str, float] = {}
        for n in sorted(cfg.sizes):
            space = None
            for tok in cfg.mechanisms:
                spec = _series_spec(tok, cfg, n)
                key = f"{ident}/{n}/{tok}/{target:g}/{cfg.fit}/{cfg.lambdas}/{cfg.rtol:g}/{cfg.seed}"
                rec = cache.get(key, cfg.time_limit)
                if rec is None and spec.label in stopped:
                    rec = _base(ds, n, spec.label, target, status="skipped",
                                note=f"series timed out at n = {stopped[spec.label]}")
                elif rec is None and cache.frozen:
                    rec = _base(ds, n, spec.label, target, status="not run")
                elif rec is None:
                    if space is None:
                        space = rs.dataset_space(ds, n, seed=cfg.seed)
                    rec = _unit(cfg, space, ds, n, spec, target, start.get(spec.label))
                    cache.put(key, rec, cfg.time_limit)
                if rec["status"] == "time-out":
                    stopped.setdefault(spec.label, n)
                if rec["status"] == "ok":
                    start[spec.label] = rs.number(rec["nominal_eps"])
                records.append({**rec, "dataset": ds, "dataset_sha256": sha})
                done += 1
                if progress is not None:
                    progress(done, total, f"{rs.dataset_slug(ds)} n={n} {spec.label}: {rec['status']}")
    rs.write_csv(out / "scalability.csv", records, COLUMNS)
    files = [out / "scalability.csv", *_plots(out, cfg, records)]
    summary = _summary(cfg, records)
    from ..io import atomic_write

    with atomic_write(out / "scalability.md", "w") as fh:
        fh.write(summary)
    files.append(out / "scalability.md")
    return ScalabilityResult(records, files, summary)


def _base(ds: str, n: int, label: str, target: float, **extra: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {"dataset": ds, "n": n, "mechanism": label, "target_eps_tight": target}
    rec["status"] = "ok"
    rec.update(extra)
    return rec


def _unit(cfg: ScalabilityConfig, space: Any, ds: str, n: int, spec: tu.MechanismSpec, target: float,
          start: float | None) -> dict[str, Any]:
    """Tune one mechanism on one space to the target eps_tight and measure the final build."""
    build = tu.make_builder(spec, space, time_limit=cfg.time_limit, seed=cfg.seed)
    seconds: dict[float, float] = {}

    def timed(eps: float) -> Any:
        t0 = time.perf_counter()
        mech = build(eps)
        seconds[eps] = time.perf_counter() - t0
        return mech

    try:
        tuned = tu.tune_to_eps_tight(timed, target, delta=cfg.delta, rtol=cfg.rtol, start=start)
    except MetricDPError as ex:
        status = "time-out" if rs.is_timeout(ex) else "error"
        return _base(ds, n, spec.label, target, status=status, note=" ".join(str(ex).split())[:300],
                     tune_seconds=sum(seconds.values()), evaluations=len(seconds))
    mech = tuned.mechanism
    p = tu.evaluate(mech, delta=cfg.delta, q=cfg.quantile)
    lp = dict(mech.info.get("lp") or {})
    return _base(
        ds, n, spec.label, target,
        nominal_eps=tuned.epsilon, eps_tight=tuned.eps_tight, converged=tuned.converged,
        evaluations=tuned.evaluations, seconds=seconds.get(tuned.epsilon), lp_seconds=lp.get("solve_seconds"),
        tune_seconds=tuned.seconds, variables=lp.get("variables"), constraints=lp.get("constraints"),
        nonzeros=lp.get("nonzeros"), loss_q=p.loss_quantile, loss_max=p.loss_max, winner=mech.info.get("winner"),
        note=rs.tuning_note(tuned),
    )


def _labels(records: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(r["mechanism"] for r in records))


def _plots(out: Path, cfg: ScalabilityConfig, records: list[dict[str, Any]]) -> list[Path]:
    files = []
    for ds in cfg.datasets:
        recs = [r for r in records if r["dataset"] == ds]
        panels = []
        for key, title in (("seconds", "time (s)"), ("nonzeros", "LP non-zeros"), ("loss_q", "$L_{0.95}$")):
            curves = []
            for label in _labels(recs):
                mine = [r for r in recs if r["mechanism"] == label and r["status"] == "ok"]
                pts = [(r["n"], rs.number(r.get(key))) for r in mine]
                pts = [(x, y) for x, y in pts if math.isfinite(y)]
                curves.append((label, [x for x, _ in pts], [y for _, y in pts], "-o"))
            panels.append((f"{title}, eps_tight = {cfg.target(ds):g}", curves))
        path = out / f"scalability_{rs.dataset_slug(ds)}.png"
        plot_grid(path, panels, xlabel="n", ylabel=["seconds", "non-zeros", "$L_{0.95}$"],
                     logy=[True, True, False])
        files.append(path)
    return files


def _summary(cfg: ScalabilityConfig, records: list[dict[str, Any]]) -> str:
    lines = [
        "# Scalability: time and LP size at fixed eps_tight (Imola et al., Tables 2 and 4)",
        "",
        f"Nominal eps tuned so that eps_tight (delta = {cfg.delta}) is within {cfg.rtol:g} (relative) of the "
        f"target; ConstOPTMech fit: {cfg.fit}; LP time limit {cfg.time_limit} s, a series stops at its first "
        "time-out. Cells: build seconds at the tuned eps / LP non-zeros; '>limit' = timed out; "
        "'-' = skipped.",
        "",
    ]
    for ds in cfg.datasets:
        recs = [r for r in records if r["dataset"] == ds]
        labels = _labels(recs)
        sizes = sorted({r["n"] for r in recs})
        by = {(r["n"], r["mechanism"]): r for r in recs}
        rows, lrows = [], []
        for n in sizes:
            row: list[Any] = [n]
            lrow: list[Any] = [n]
            for lab in labels:
                r = by.get((n, lab))
                if r is None or r["status"] == "skipped":
                    row.append("-")
                    lrow.append("-")
                elif r["status"] == "time-out":  # under the limit of the run that built it
                    limit = rs.number(r.get("time_limit", cfg.time_limit))
                    row.append(f">{limit:g} s" if math.isfinite(limit) else ">limit")
                    lrow.append("-")
                elif r["status"] != "ok":
                    row.append(r["status"])
                    lrow.append("-")
                else:
                    nz = r.get("nonzeros")
                    nz_text = nz if nz is not None else ("no LP" if lab == "EM" else "?")
                    row.append(f"{rs.number(r.get('seconds')):.3g} / {nz_text}")
                    lrow.append(f"{rs.number(r.get('loss_q')):.4g}{rs.flags(r)}")
            rows.append(row)
            lrows.append(lrow)
        lines += [f"## {ds}, eps_tight = {cfg.target(ds):g}", "", "Time (s) / non-zeros:", ""]
        lines += [rs.markdown_table(["n", *labels], rows), ""]
        lines += ["L_q (q = 0.95); (!) = tuning not converged; (EM) = ConstOPTMech returned the exponential "
                  "mechanism (its LP candidates lost to it at that nominal eps):", ""]
        lines += [rs.markdown_table(["n", *labels], lrows), ""]
        notes = [r for r in recs if r.get("note") and r["status"] not in ("skipped",)]
        if notes:
            lines += ["Notes:", ""]
            lines += [f"- n = {r['n']}, {r['mechanism']}: {r['status']}: {r['note']}" for r in notes]
            lines.append("")
    lines += ["Configuration: " + ", ".join(f"{k} = {v}" for k, v in asdict(cfg).items()), ""]
    return "\n".join(lines)

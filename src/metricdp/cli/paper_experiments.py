"""``metricdp experiment utility|scalability|ablation``: Imola et al.'s experiments;
``metricdp experiment kmedian``: Lantz, Boyd and Page's private k-median.

Each command writes PNG plots, a CSV of the numbers and a markdown summary into
``--out DIR``, shows a progress bar on stderr and prints the summary. ``--quick`` is a
smoke run (tiny sizes, few eps) used by CI; the full mode reproduces the paper's sizes
and resumes an interrupted run from the ``*.jsonl`` cache in DIR (``--restart`` to start
over). The library side is :mod:`metricdp.experiments`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from .._optional import require
from ..errors import ValidationError
from ._common import err_console, handle_errors, progress

__all__ = ["register"]

OutOpt = Annotated[Path, typer.Option("--out", "-o", file_okay=False, help="Output directory (created).")]
QuickOpt = Annotated[bool, typer.Option("--quick", help="Smoke run (tiny sizes, few eps), < 2 minutes.")]
SeedOpt = Annotated[int, typer.Option("--seed", min=0, help="Seed of the data samples (and Madlib's noise).")]
LimitOpt = Annotated[float | None, typer.Option("--time-limit", help="Seconds per LP (1800; quick 60).")]
RtolOpt = Annotated[float | None, typer.Option("--rtol", help="Relative tolerance on eps_tight.")]
UMechOpt = Annotated[
    str | None, typer.Option("--mechanisms", help="Subset of madlib,exponential,constopt,spanner,optimal.")
]
PointsOpt = Annotated[int | None, typer.Option("--points", min=1, help="Nominal eps per mechanism.")]
RangeOpt = Annotated[str | None, typer.Option("--eps-range", help="LO,HI of eps_tight (default: automatic).")]
FitsOpt = Annotated[str | None, typer.Option("--fits", help="ConstOPTMech fits: normalised,paper.")]
TargetOpt = Annotated[
    float | None,
    typer.Option("--eps-tight", help="Target eps_tight for all data (default text 1, geo and lat/lon files 0.3)."),
]
SMechOpt = Annotated[
    str | None,
    typer.Option("--mechanisms", help="Series: constopt@R,spanner,optimal,exponential (default all: r = 5, 10)."),
]
FitOpt = Annotated[str | None, typer.Option("--fit", help="ConstOPTMech fit: paper (default) or normalised.")]
NOpt = Annotated[int | None, typer.Option("--n", min=3, help="Size of the space (default 200).")]
TargetsOpt = Annotated[str | None, typer.Option("--eps-tight", help="Target eps_tight values (default 1,2).")]
DatasetOpt = Annotated[
    str | None,
    typer.Option(
        "--dataset", "--datasets",
        help="text (default), geo, gaussian, or a POINTS file (.csv/.parquet label+coordinates, .npy distances).",
    ),
]
RestartOpt = Annotated[bool, typer.Option("--restart", help="Ignore the cache of a previous run in --out.")]
CachedOpt = Annotated[
    bool, typer.Option("--cached-only", help="Build nothing: redraw plots and tables from --out's cache.")
]
SizesOpt = Annotated[str | None, typer.Option("--sizes", help="Comma-separated sizes n.")]
DatasetsOpt = Annotated[
    str | None,
    typer.Option(
        "--datasets",
        help="Comma-separated: text, geo, gaussian, or POINTS files (.csv/.parquet label+coordinates, .npy "
        "distances, e.g. from `metricdp data geolife|vec`); a file gives its first n points.",
    ),
]


def _list(text: str | None, what: str, cast: Callable[[str], Any] = str) -> tuple[Any, ...] | None:
    if text is None:
        return None
    try:
        items = tuple(cast(t.strip()) for t in text.split(",") if t.strip())
    except ValueError:
        raise ValidationError(f"{what} must be a comma-separated list, got {text!r}") from None
    if not items:
        raise ValidationError(f"{what} must not be empty, got {text!r}")
    return items


def _config(base: Any, **changes: Any) -> Any:
    return dataclasses.replace(base, **{k: v for k, v in changes.items() if v is not None})


#: Built-in datasets that come from an extra (POINTS files and ``gaussian`` need none).
_DATASET_EXTRAS = {"text": "glove", "geo": "geo"}


def _require(datasets: tuple[str, ...] | None, cached_only: bool) -> None:
    """Fail before any work when the run needs an extra that is not installed.

    Every experiment draws PNGs (``plot``); a run that builds needs the extras of its
    datasets (``--cached-only`` builds nothing, so it needs none of them).
    """
    require("plot", what="experiment (its figures)")
    if not cached_only:
        for name in datasets or ():
            if name in _DATASET_EXTRAS:
                require(_DATASET_EXTRAS[name], what=f"dataset {name!r}")


def _finish(result: Any) -> None:
    typer.echo(result.summary)
    for path in result.files:
        err_console.print(f"wrote {path}", markup=False, highlight=False)


def register(experiment_app: typer.Typer) -> None:
    """Add ``utility``, ``scalability``, ``ablation`` and ``kmedian`` to the ``experiment`` sub-app."""

    @experiment_app.command("utility")
    @handle_errors
    def utility(
        out: OutOpt,
        quick: QuickOpt = False,
        seed: SeedOpt = 0,
        datasets: DatasetsOpt = None,
        sizes: SizesOpt = None,
        mechanisms: UMechOpt = None,
        points: PointsOpt = None,
        eps_range: RangeOpt = None,
        fits: FitsOpt = None,
        time_limit: LimitOpt = None,
        restart: RestartOpt = False,
        cached_only: CachedOpt = False,
    ) -> None:
        """Figures 1/3: L_q (q=0.95) versus eps_tight (delta=0.001) for every mechanism."""
        from ..experiments import utility as ex

        rng = _list(eps_range, "--eps-range", float)
        if rng is not None and len(rng) != 2:
            raise ValidationError(f"--eps-range must be LO,HI, got {eps_range!r}")
        cfg = _config(
            ex.QUICK if quick else ex.FULL, seed=seed, datasets=_list(datasets, "--datasets"),
            sizes=_list(sizes, "--sizes", int), mechanisms=_list(mechanisms, "--mechanisms"), points=points,
            eps_range=rng, constopt_fits=_list(fits, "--fits"), time_limit=time_limit,
        )
        _require(cfg.datasets, cached_only)
        with progress("utility") as report:
            result = ex.run_utility(out, cfg, progress=report, resume=not restart, cached_only=cached_only)
        _finish(result)

    @experiment_app.command("scalability")
    @handle_errors
    def scalability(
        out: OutOpt,
        quick: QuickOpt = False,
        seed: SeedOpt = 0,
        datasets: DatasetsOpt = None,
        sizes: SizesOpt = None,
        eps_tight: TargetOpt = None,
        mechanisms: SMechOpt = None,
        fit: FitOpt = None,
        rtol: RtolOpt = None,
        time_limit: LimitOpt = None,
        restart: RestartOpt = False,
        cached_only: CachedOpt = False,
    ) -> None:
        """Tables 2/4, Figures 2/4: time and LP non-zeros versus n at fixed eps_tight."""
        from ..experiments import scalability as ex

        cfg = _config(
            ex.QUICK if quick else ex.FULL, seed=seed, datasets=_list(datasets, "--datasets"),
            sizes=_list(sizes, "--sizes", int), eps_tight=eps_tight,
            mechanisms=_list(mechanisms, "--mechanisms"), fit=fit, rtol=rtol, time_limit=time_limit,
        )
        _require(cfg.datasets, cached_only)
        with progress("scalability") as report:
            result = ex.run_scalability(out, cfg, progress=report, resume=not restart, cached_only=cached_only)
        _finish(result)

    @experiment_app.command("ablation")
    @handle_errors
    def ablation(
        out: OutOpt,
        quick: QuickOpt = False,
        seed: SeedOpt = 0,
        n: NOpt = None,
        eps_tight: TargetsOpt = None,
        dataset: DatasetOpt = None,
        rtol: RtolOpt = None,
        time_limit: LimitOpt = None,
        restart: RestartOpt = False,
        cached_only: CachedOpt = False,
    ) -> None:
        """Table 3: ConstOPTMech's r (lambda=50) and lambda (r=5) at fixed eps_tight."""
        from ..experiments import ablation as ex

        names = _list(dataset, "--dataset")
        if names is not None and len(names) != 1:
            raise ValidationError(f"ablation runs on one dataset, got {dataset!r}")
        cfg = _config(
            ex.QUICK if quick else ex.FULL, seed=seed, n=n, targets=_list(eps_tight, "--eps-tight", float),
            dataset=None if names is None else names[0], rtol=rtol, time_limit=time_limit,
        )
        _require((cfg.dataset,), cached_only)
        with progress("ablation") as report:
            result = ex.run_ablation(out, cfg, progress=report, resume=not restart, cached_only=cached_only)
        _finish(result)

    @experiment_app.command("kmedian")
    @handle_errors
    def kmedian(
        out: OutOpt,
        quick: QuickOpt = False,
        seed: SeedOpt = 0,
        sizes: SizesOpt = None,
        replicates: Annotated[str | None, typer.Option("--replicates", help="Replicates per size.")] = None,
        ks: Annotated[str | None, typer.Option("--ks", help="Comma-separated k (default 2,4,8,16).")] = None,
        epsilons: Annotated[str | None, typer.Option("--eps", help="Total eps values (0.1,1,10,100).")] = None,
        methods: Annotated[
            str | None, typer.Option("--methods", help="Subset of random,random-k++,em,ssem-auto,ssem-k++,gupta.")
        ] = None,
        gupta_time_limit: Annotated[
            float | None, typer.Option("--gupta-time-limit", help="Seconds per gupta run (25; quick 20).")
        ] = None,
        restart: RestartOpt = False,
        cached_only: CachedOpt = False,
    ) -> None:
        """Lantz et al. (AISec 2015) Figures 3-5: private k-median costs, cost against m, time."""
        from ..experiments import kmedian as ex

        base = ex.QUICK if quick else ex.FULL
        size_list = _list(sizes, "--sizes", int)
        reps = _list(replicates, "--replicates", int)
        changes: dict[str, Any] = {}
        if size_list is not None:  # per-size settings follow the sizes given
            count = len(size_list)
            changes.update(sizes=size_list, replicates=(base.replicates[-1],) * count,
                           gupta_replicates=(base.gupta_replicates[-1],) * count, restarts=(base.restarts[-1],) * count)
        if reps is not None:
            count = len(size_list or base.sizes)
            if len(reps) == 1:
                reps = reps * count
            if len(reps) != count:
                raise ValidationError(f"--replicates needs one value or one per size ({count}), got {replicates!r}")
            changes.update(replicates=reps, gupta_replicates=reps)
        cfg = _config(base, seed=seed, ks=_list(ks, "--ks", int), epsilons=_list(epsilons, "--eps", float),
                      methods=_list(methods, "--methods"), gupta_time_limit=gupta_time_limit, **changes)
        _require(None, cached_only)
        with progress("kmedian") as report:
            result = ex.run_kmedian(out, cfg, progress=report, resume=not restart, cached_only=cached_only)
        _finish(result)

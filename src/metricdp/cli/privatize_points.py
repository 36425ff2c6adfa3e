"""``metricdp privatize-points INPUT --lat COL --lon COL --epsilon 0.5/km --out OUTPUT``.

Planar Laplace on latitude/longitude columns of a table of any size (CSV, Parquet,
Arrow/Feather, JSON lines: :mod:`metricdp.tabular.formats`), streamed chunk by chunk
(:mod:`metricdp.streaming.points`: memory bounded by a chunk, the output published
atomically). By default every release is drawn **exactly** from the lattice planar
Laplace law on a public lattice (``--origin``, ``--cell``, ``--extent``;
:mod:`metricdp.location.lattice`, proof in ``docs/proofs/lattice_points.md``);
``--sampler float`` keeps the continuous sampler, which is private only for real numbers.
Options keep releases in a region (``--region``, nearest point or rejection), snap them to
a finite set (``--snap-to``), and draw true vs released points (``--plot``). Every other
column is written back untouched (CSV: the same bytes; Parquet: the same arrays and
schema) unless ``--drop COL`` removes it; those columns are named on stderr and in
``--json`` (:mod:`metricdp.tabular.columns`). A column that looks like one of the released
coordinates by name (``home_lat``, ``latlng``, ``geom``, ``breite``, a Cyrillic look-alike)
or holds them by content (within the noise scale, alone or as a pair, WKT or GeoJSON:
:mod:`metricdp.tabular.leaks`) is refused unless ``--keep`` or ``--drop`` names it: it
would release the true location next to the noisy one.

Per person (``docs/accounting.md``): the options of ``privatize`` (``--user-column``,
``--budget``, ``--ledger``, ``--max-rows-per-user``, ``--over-budget``, ``--consistent``;
:mod:`metricdp.cli._accounting`), on every engine (:mod:`metricdp.pipeline.first_pass`;
on Dask and Spark the driver plans once and the workers release,
:mod:`metricdp.integrations._points`). A person's eps is in eps per km, summed over
their fresh releases; with ``--consistent`` the true value is the (lat, lon) pair.
"""

from __future__ import annotations

import hashlib
import json as _json
import math
import time
import warnings
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from numpy.typing import NDArray

from .._optional import require
from .._random import check_rng
from ..errors import PrivacyLeakWarning, ValidationError
from ..io import parse_decimal
from ..location.region import Region, parse_region
from ..location.release import PointSettings, full_precision, make_release, validator
from ..location.snap import Snapper
from ..pipeline.engine import Engine
from ..pipeline.points import read_points_file
from ..pipeline.run import ReleaseStats
from ..settings import file_sha256
from ..streaming.points import Release, privatize_points_file
from ..units import UnitError, level_radius, parse_epsilon, parse_length
from ._accounting import (
    AccountingOptions,
    BudgetOption,
    ConsistentOption,
    LedgerKeyOption,
    LedgerOption,
    MaxRowsOption,
    OverBudgetOption,
    UserColumnOption,
    print_report,
    report_json,
)
from ._common import JsonOption, SeedOption, check_output, console, echo_json, handle_errors, progress, warn
from .privatize import (
    FLAGS,
    ChunkRowsOption,
    DropOption,
    EngineOption,
    KeepOption,
    MasterOption,
    SchedulerOption,
    check_engine,
    check_formats,
    flagged,
    leaves_report,
)

__all__ = ["register"]

_PLOT_SAMPLE = 500
_FLAGS = {**FLAGS, "plot": "--plot", "truncate": "--truncate", "origin": "--origin", "cell_km": "--cell",
          "extent_km": "--extent", "lat": "--lat", "lon": "--lon"}
_FLOAT_CAVEAT = ("continuous planar Laplace is epsilon-geo-indistinguishable for real numbers, not exactly for the "
                 "floats it releases (Mironov 2012); the default --sampler exact draws every release exactly on a "
                 "public lattice (docs/proofs/lattice_points.md)")


class Sampler(StrEnum):
    exact = "exact"
    float = "float"


def _plot(path: Path, true: NDArray[np.float64], released: NDArray[np.float64], region: Region | None,
          epsilon: float, rows: int) -> None:
    """Left: a sample of rows, each true location joined to its own release (one input, two states);
    right: the histogram of displacements (km) against the planar Laplace law."""
    from .._figure import new_figure, save_png
    from ..location.projection import TangentPlane

    k = min(len(true), _PLOT_SAMPLE)
    pick = np.linspace(0, len(true) - 1, k).astype(int)
    t, z = true[pick], released[pick]
    fig = new_figure(13, 6, layout=None)
    ax, hx = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for a, b in zip(t, z, strict=True):
        ax.plot([a[1], b[1]], [a[0], b[0]], color="0.8", lw=0.5, zorder=1)
    ax.scatter(t[:, 1], t[:, 0], s=10, c="tab:blue", label="a row's true location", zorder=2)
    ax.scatter(z[:, 1], z[:, 0], s=10, c="tab:red", marker="x", label="the same row, released", zorder=3)
    if region is not None:
        for poly in region.polygons:
            for ring in poly:
                closed = np.vstack([ring, ring[:1]])
                ax.plot(closed[:, 1], closed[:, 0], color="k", lw=1)
    mid = float(np.mean(t[:, 0]))
    ax.set_aspect(1.0 / max(math.cos(math.radians(mid)), 1e-3))
    ax.set_xlabel("longitude (degrees east)")
    ax.set_ylabel("latitude (degrees north)")
    ax.set_title(f"{k} of {rows:,} rows of one file: true -> released (grey line)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, title="one input file: each row appears twice")
    d = np.array([float(np.hypot(*TangentPlane(float(a[0]), float(a[1])).forward(b))) for a, b in zip(t, z,
                                                                                                        strict=True)])
    top = max(float(np.quantile(d, 0.99)) if len(d) else 1.0, 1e-9)
    hx.hist(d, bins=40, range=(0.0, top), density=True, color="tab:gray", label="released rows (sample)")
    grid = np.linspace(0.0, top, 200)
    hx.plot(grid, epsilon**2 * grid * np.exp(-epsilon * grid), color="k", lw=1.5,
            label=f"planar Laplace law, epsilon = {epsilon:g}/km")
    hx.set_xlabel("displacement: great-circle distance true -> released (km)")
    hx.set_ylabel("density (1/km)")
    hx.set_title(f"mean displacement {float(np.mean(d)) if len(d) else 0:.3g} km (law: {2 / epsilon:.3g} km)")
    hx.legend(loc="best")
    save_png(fig, path, dpi=100, bbox_inches="tight")


def _epsilon(epsilon: str | None, level: float | None, radius: str | None) -> float:
    """eps per km from --epsilon (0.5/km, 1/m, or a plain number per km) or --level/--radius."""
    if (level is None) != (radius is None):
        raise ValidationError("--level and --radius go together (eps = level / radius)")
    if epsilon is not None and level is not None:
        raise ValidationError("give --epsilon or --level/--radius, not both")
    if epsilon is None and level is None:
        raise ValidationError("--epsilon is required (e.g. 0.5/km, 1/m), or --level L --radius R")
    try:
        eps = parse_epsilon(epsilon) if epsilon is not None else level_radius(level, radius)  # type: ignore[arg-type]
        value = eps.to("km")
    except UnitError as ex:
        raise ValidationError(f"--epsilon: {ex}" if epsilon is not None else f"--level/--radius: {ex}") from None
    if not (math.isfinite(value) and value > 0):
        raise ValidationError(f"--epsilon must be positive, got {epsilon!r}")
    return value


def _km(text: str, option: str) -> float:
    try:
        value, unit = parse_length(text)
    except UnitError as ex:
        raise ValidationError(f"{option}: {ex}") from None
    return float(value / 1000) if unit == "m" else float(value)


def _origin(origin: str | None) -> tuple[float, float] | None:
    """--origin LAT,LON in degrees."""
    parts = [] if origin is None else origin.split(",")
    if origin is not None and len(parts) != 2:
        raise ValidationError(f"--origin must be LAT,LON, got {origin!r}")
    try:
        return None if origin is None else (parse_decimal(parts[0].strip()), parse_decimal(parts[1].strip()))
    except ValueError:
        raise ValidationError(f"--origin must be LAT,LON in degrees, got {origin!r}") from None


def _settings(epsilon: float, sampler: Sampler, region: str | None, truncate: str, snap_to: Path | None,
              origin: str | None, cell: str | None, extent: str | None) -> PointSettings:
    """The library's settings (:meth:`PointSettings.of`, its rules) from the options, each parsed."""
    area = None if region is None else parse_region(region)
    snapper = None if snap_to is None else Snapper(read_points_file(snap_to, what="--snap-to"))
    if snapper is not None and area is not None and not area.contains(snapper.points).all():
        warn("some --snap-to points lie outside --region: snapped releases may leave the region")
    with flagged(flags=_FLAGS):
        return PointSettings.of(epsilon, exact=sampler is Sampler.exact, region=area, truncate=truncate,
                                snapper=snapper, origin=_origin(origin), cell_km=None if cell is None else
                                _km(cell, "--cell"), extent_km=None if extent is None else _km(extent, "--extent"))


def points_scope(settings: PointSettings, region: str | None, snap_to: Path | None) -> str:
    """The memo's name of a points release: a hash of everything that makes the release's law.

    epsilon, the sampler and its lattice, the region (and its file's bytes), the
    truncation and the snapping set's bytes: a memoized release is reused only by the
    same mechanism, so --consistent never mixes releases of two laws; --digits only
    formats and stays out.
    """
    parts: dict[str, Any] = {
        "epsilon_per_km": repr(settings.epsilon),
        "lattice": None if settings.plane is None else settings.plane.describe(settings.epsilon),
        "region": region, "truncate": settings.truncate if settings.area is not None else None,
        "region_file": file_sha256(region) if region is not None and Path(region).is_file() else None,
        "snap_to": None if snap_to is None else file_sha256(snap_to),
    }
    text = _json.dumps(parts, sort_keys=True, default=repr)
    return f"points:{hashlib.sha256(text.encode()).hexdigest()[:32]}"


class _Sample:
    """Up to _PLOT_SAMPLE (true, released) pairs per chunk, for --plot (memory bounded)."""

    def __init__(self, inner: Release) -> None:
        self.inner, self.true, self.released = inner, [], []  # type: ignore[var-annotated]

    def __call__(self, pts: NDArray[np.float64], first_row: int) -> NDArray[np.float64]:
        out = self.inner(pts, first_row)
        pick = np.linspace(0, len(pts) - 1, min(len(pts), _PLOT_SAMPLE)).astype(int)
        self.true.append(pts[pick])
        self.released.append(out[pick])
        return out


def _summary(out: Path, stats: ReleaseStats, settings: PointSettings, plot: Path | None, seed: int | None,
             seconds: float) -> dict[str, Any]:
    eps, area = settings.epsilon, settings.area
    return {
        "out": str(out),
        "rows": stats.rows,
        "epsilon_per_km": eps,
        "epsilon": f"{eps:g}/km",
        "level_radius": {"level": 1.0, "radius_km": 1 / eps},
        "mean_noise_km": 2.0 / eps,
        "sampler": "float" if settings.plane is None else "exact",
        "lattice": None if settings.plane is None else settings.plane.describe(eps),
        "region": None if area is None else area.name,
        "truncate": settings.truncate if area is not None else None,
        "noise_epsilon_per_km": settings.noise_epsilon,
        "snap_points": None if settings.snapper is None else len(settings.snapper.points),
        "plot": None if plot is None else str(plot),
        "seeded": seed is not None,
        "seconds": seconds,
        "rows_per_second": stats.rows / seconds if seconds > 0 else None,
        "columns": stats.columns.as_dict(),
    }


def register(app: typer.Typer) -> None:
    """Add the ``privatize-points`` command to ``app``."""

    @app.command("privatize-points")
    @handle_errors
    def privatize_points_command(
        input_file: Annotated[Path, typer.Argument(
            metavar="INPUT", help="CSV (with a header), Parquet, Arrow/Feather or JSON lines file.")],
        lat: Annotated[str, typer.Option("--lat", help="Latitude column (degrees).")],
        lon: Annotated[str, typer.Option("--lon", help="Longitude column (degrees).")],
        out: Annotated[
            Path,
            typer.Option("--out", "-o", dir_okay=False, help="Output file: the input's format (.csv, .parquet) or "
                         ".geojson (a FeatureCollection of Points for GIS tools, other columns as properties)."),
        ],
        epsilon: Annotated[
            str | None,
            typer.Option("--epsilon", "-e", help="Guarantee per distance: 0.5/km, 1/m, 2 / 100m, or a plain number "
                         "per km of great-circle distance."),
        ] = None,
        level: Annotated[
            float | None, typer.Option("--level", help="With --radius: level L within radius R (eps = L / R).")
        ] = None,
        radius: Annotated[str | None, typer.Option("--radius", help="With --level: e.g. 200m, 1km.")] = None,
        sampler: Annotated[
            Sampler,
            typer.Option("--sampler", case_sensitive=False, help="exact (default): every release drawn exactly on "
                         "a public lattice, guarantee proved for the released values. float: continuous planar "
                         "Laplace in floating point, no lattice needed, but private only for real numbers: its "
                         "float releases may leak (Mironov 2012)."),
        ] = Sampler.exact,
        origin: Annotated[
            str | None,
            typer.Option("--origin", help="LAT,LON of the lattice's centre, fixed before seeing the data (default: "
                         "the centre of --region)."),
        ] = None,
        cell: Annotated[
            str | None, typer.Option("--cell", help="Lattice step (default 1m): adds eps x cell x 1.42 to the loss.")
        ] = None,
        extent: Annotated[
            str | None,
            typer.Option("--extent", help="Rows farther than this from the origin are refused (default 500km, or "
                         "1.5x the region's reach); noise grows by the projection's stretch there (0.1% at 500km)."),
        ] = None,
        region: Annotated[
            str | None,
            typer.Option("--region", help="Keep releases in LAT0,LON0,LAT1,LON1, a named region, or a GeoJSON file."),
        ] = None,
        truncate: Annotated[
            str,
            typer.Option(
                "--truncate",
                help="With --region: 'nearest' moves a release outside to the region's nearest point (epsilon "
                "unchanged); 'reject' redraws until inside (noise at epsilon/2, guarantee epsilon).",
            ),
        ] = "nearest",
        snap_to: Annotated[
            Path | None,
            typer.Option("--snap-to", dir_okay=False, help="Snap releases to the nearest point of this POINTS file "
                         "(CSV/Parquet with lat, lon columns)."),
        ] = None,
        plot: Annotated[
            Path | None,
            typer.Option("--plot", dir_okay=False, help="PNG of a sample of true vs released points and the "
                         "displacement histogram (it shows TRUE locations: keep it private)."),
        ] = None,
        digits: Annotated[
            int, typer.Option("--digits", min=0, max=15, help="Decimals of released coordinates (6 = 0.1 m).")
        ] = 6,
        chunk_rows: ChunkRowsOption = None,
        engine: EngineOption = Engine.local,
        scheduler: SchedulerOption = None,
        master: MasterOption = None,
        drop: DropOption = None,
        keep: KeepOption = None,
        seed: SeedOption = None,
        json: JsonOption = False,
        user_column: UserColumnOption = None,
        budget: BudgetOption = None,
        ledger: LedgerOption = None,
        ledger_key: LedgerKeyOption = None,
        max_rows_per_user: MaxRowsOption = None,
        over_budget: OverBudgetOption = None,
        consistent: ConsistentOption = False,
    ) -> None:
        """Release latitude/longitude columns with planar Laplace (geo-indistinguishability).

        Each row is released independently at EPSILON per km (great-circle), exactly on a
        public lattice by default; other columns are written with their TRUE values (named
        on stderr) unless --drop removes them. A person with k rows gets k x EPSILON: with
        --user-column the per-person eps is reported, and --budget, --ledger,
        --max-rows-per-user, --over-budget and --consistent account, cap and reuse
        releases per person.
        """
        acct = AccountingOptions(user_column, budget, ledger, ledger_key, max_rows_per_user, over_budget,
                                 consistent).for_unit("km")  # eps per km, as --epsilon
        acct.check()
        eps = _epsilon(epsilon, level, radius)
        check_formats(input_file, out, what=f"INPUT {input_file}:")
        check_output(out, inputs=(input_file, snap_to, region, plot, *acct.files()))  # never the ledger or its key
        # the engine's options (--plot is the local engine's) before any extra an option needs
        check_engine(engine, scheduler, master, chunk_rows, [(plot is not None, "the parameter 'plot'")], _FLAGS)
        if plot is not None:
            check_output(plot, "--plot", inputs=(input_file, snap_to, region, out, *acct.files()))
            require("plot", what="--plot")
            if plot.suffix.lower() != ".png":
                raise ValidationError(f"--plot {plot}: expected a .png file")
        if not input_file.is_file():
            raise ValidationError(f"{input_file}: no such file")
        settings = _settings(eps, sampler, region, truncate, snap_to, origin, cell, extent)
        rng: object = seed  # the library's ONE source: the releases, and the cap's and the budget's choices
        sample = None
        if plot is not None:  # the release sampled for the plot (local only) draws from that same source
            rng = source = check_rng(seed)
            sample = _Sample(make_release(settings, source))
        t0 = time.perf_counter()
        with (acct.open() as book, progress(f"releasing points of {input_file} on {engine.value}") as bar,
              flagged(input_file, _FLAGS), warnings.catch_warnings()):
            warnings.simplefilter("ignore", PrivacyLeakWarning)  # said once, as a CLI warning
            accounting = None if not acct.active else acct.accounting(
                ledger=book, scope=points_scope(settings, region, snap_to),
                mechanism=f"privatize-points planar Laplace eps={eps:g}/km "
                          f"{'float' if settings.plane is None else 'exact'}",
                additive=0.0 if settings.plane is None else settings.plane.additive(eps))
            stats = privatize_points_file(
                input_file, lat, lon, out, settings if sample is None else sample, digits=digits,
                full=full_precision(settings), validate=validator(settings), epsilon=eps, keep=keep or (),
                drop=drop or (), chunk_rows=chunk_rows, inputs=[p for p in (snap_to, plot, *acct.files()) if p],
                progress=bar, accounting=accounting, rng=rng, engine=engine,
                scheduler=scheduler, master=master)
            if sample is not None and plot is not None and sample.true:
                _plot(plot, np.concatenate(sample.true), np.concatenate(sample.released), settings.area, eps,
                      stats.rows)
        _report(out, stats, settings, plot, seed, time.perf_counter() - t0, json, lat, lon, engine, acct)


def _report(out: Path, stats: ReleaseStats, settings: PointSettings, plot: Path | None, seed: int | None,
            seconds: float, json: bool, lat: str, lon: str, engine: Engine,
            acct: AccountingOptions | None = None) -> None:
    """Warnings, what left, and the summary (a line, or one JSON object)."""
    eps = settings.epsilon
    leaves_report(stats.columns, seed, engine)
    if settings.plane is None:
        warn(_FLOAT_CAVEAT)  # the one caveat the continuous mechanism carries
    if json:
        extra_json: dict[str, Any] = {}
        if stats.accounting is not None and acct is not None:
            extra_json["accounting"] = {**report_json(stats.accounting, acct, eps), "epsilon_unit": "per km",
                                        **_additive(settings, stats)}
        echo_json({**_summary(out, stats, settings, plot, seed, seconds), "engine": engine.value, **extra_json})
        return
    extra = []
    if settings.plane is not None:
        extra.append(f"exact on a {settings.plane.cell_km * 1000:g} m lattice centred at "
                     f"({settings.plane.lat:g}, {settings.plane.lon:g}), additive "
                     f"{settings.plane.additive(eps):.2g}")
    if settings.area is not None:
        how = "rejection (noise at epsilon/2)" if settings.truncate == "reject" else "nearest point"
        extra.append(f"kept in {settings.area.name} by {how}")
    if settings.snapper is not None:
        extra.append(f"snapped to {len(settings.snapper.points)} points")
    console.print(
        f"wrote {out}: {stats.rows} points of ({lat!r}, {lon!r}) released by planar Laplace at "
        f"epsilon={eps:g} per km (mean displacement {2 / eps:.3g} km)"
        + (f"; {'; '.join(extra)}" if extra else "")
        + ("" if seed is None else " [seeded]")
        + ("" if plot is None else f"; plot {plot}")
        + f"; {engine.value} engine, {seconds:.1f} s, {stats.rows / seconds if seconds > 0 else 0:,.0f} rows/s",
        markup=False,
        highlight=False,
    )
    if stats.accounting is not None and acct is not None:
        print_report(stats.accounting, acct, eps, distance="km")
        add = _additive(settings, stats)
        if add:
            console.print(f"plus the lattice's additive {add['additive_per_release']:.2g} per release "
                          f"(at most {add['additive_per_person_max']:.2g} per person in this run)",
                          markup=False, highlight=False)


def _additive(settings: PointSettings, stats: ReleaseStats) -> dict[str, float]:
    """The lattice's additive loss, which composes like eps: per release, and for the person with the most."""
    if settings.plane is None or stats.accounting is None:
        return {}
    per = settings.plane.additive(settings.epsilon)
    return {"additive_per_release": per,
            "additive_per_person_max": per * stats.accounting.run.max / settings.epsilon}

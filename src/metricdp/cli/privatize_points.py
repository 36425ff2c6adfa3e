"""``metricdp privatize-points INPUT --lat COL --lon COL --epsilon E --out OUTPUT``.

Planar Laplace on latitude/longitude columns of a CSV or Parquet file, eps per km of
great-circle distance (:func:`metricdp.location.points.privatize_points`); options keep
releases in a region (``--region``, nearest point or rejection), snap them to a finite
set (``--snap-to``), and draw true vs released points (``--plot``). Every other column
is written back untouched (CSV: the same values; Parquet: the same arrays and schema)
unless ``--drop COL`` removes it; those columns are named on stderr and in ``--json``
(:mod:`metricdp.tabular.columns`). A column that looks like one of the released
coordinates (the same name up to case and punctuation, or another latitude/longitude
name such as ``home_lat``) is refused unless ``--keep`` or ``--drop`` names it: it would
release the true location next to the noisy one.
"""

from __future__ import annotations

import csv
import math
import warnings
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from numpy.typing import NDArray

from .._optional import import_optional, require
from .._validation import check_epsilon
from ..errors import PrivacyLeakWarning, ValidationError
from ..io import atomic_write, parse_decimal, read_csv_table
from ..location.points import TRUNCATIONS, privatize_points
from ..location.region import Region, parse_region
from ..location.snap import Snapper
from ..tabular.columns import look_alikes, plan_columns
from ..tabular.formats import TABLE_FORMATS, format_of
from ..tabular.header import table_header
from ..tabular.parquet import read_parquet
from ._common import JsonOption, SeedOption, check_output, console, echo_json, handle_errors, progress, warn
from .privatize import DropOption, KeepOption, leaves_report, with_flags

__all__ = ["read_latlon_points", "register"]

_PLOT_SAMPLE = 500
#: A release within this distance of a region's boundary counts as inside (1 mm).
_REGION_TOLERANCE_KM = 1e-6


def _format(path: Path, option: str) -> str:
    return format_of(path, TABLE_FORMATS, what=f"{option} {path}:")


def _parse_column(values: list[str], name: str, path: Path) -> NDArray[np.float64]:
    out = np.empty(len(values))
    for i, raw in enumerate(values):
        try:
            out[i] = parse_decimal(raw)  # plain ASCII decimals, as every CSV number reader
        except ValueError:
            raise ValidationError(f"{path}: data row {i + 1}: column {name!r} is {raw!r}, not a number") from None
    return out


def _parquet_column(table: Any, name: str, path: Path) -> NDArray[np.float64]:
    col = table.column(name)
    if col.null_count:
        i = int(np.flatnonzero(np.asarray(col.is_null().to_numpy(zero_copy_only=False)))[0])
        raise ValidationError(f"{path}: data row {i + 1}: column {name!r} is empty")
    try:
        return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)
    except (TypeError, ValueError):
        raise ValidationError(f"{path}: column {name!r} is not numeric ({col.type})") from None


def _column(header: list[str], name: str, option: str, path: Path) -> int:
    if name not in header:
        raise ValidationError(f"{path}: no column {name!r} ({option}); available: {', '.join(map(repr, header))}")
    return header.index(name)


def read_latlon_points(path: Path) -> NDArray[np.float64]:
    """The (lat, lon) of a POINTS file (CSV or Parquet with ``lat`` and ``lon`` columns, any others ignored)."""
    kind = _format(path, "--snap-to")
    if kind == "csv":
        header, rows, _ = read_csv_table(path)
        lower = [h.strip().lower() for h in header]
        i, j = (_column(lower, c, "--snap-to", path) for c in ("lat", "lon"))
        lat = _parse_column([r[i] for r in rows], "lat", path)
        lon = _parse_column([r[j] for r in rows], "lon", path)
    else:
        table = read_parquet(path)
        names = {c.strip().lower(): c for c in table.column_names}
        for c in ("lat", "lon"):
            _column(list(names), c, "--snap-to", path)
        lat = _parquet_column(table, names["lat"], path)
        lon = _parquet_column(table, names["lon"], path)
    if not len(lat):
        raise ValidationError(f"--snap-to {path}: no points")
    try:
        return Snapper(np.column_stack([lat, lon])).points
    except ValidationError as ex:
        raise ValidationError(f"--snap-to {path}: {ex}") from None


def _plot(path: Path, true: NDArray[np.float64], released: NDArray[np.float64], region: Region | None,
          epsilon: float) -> None:
    from .._figure import new_figure, save_png

    k = min(len(true), _PLOT_SAMPLE)
    pick = np.linspace(0, len(true) - 1, k).astype(int)
    t, z = true[pick], released[pick]
    fig = new_figure(7, 7, layout=None)
    ax = fig.add_subplot()
    for a, b in zip(t, z, strict=True):
        ax.plot([a[1], b[1]], [a[0], b[0]], color="0.8", lw=0.5, zorder=1)
    ax.scatter(t[:, 1], t[:, 0], s=10, c="tab:blue", label="true", zorder=2)
    ax.scatter(z[:, 1], z[:, 0], s=10, c="tab:red", marker="x", label="released", zorder=3)
    if region is not None:
        for poly in region.polygons:
            for ring in poly:
                closed = np.vstack([ring, ring[:1]])
                ax.plot(closed[:, 1], closed[:, 0], color="k", lw=1)
    mid = float(np.mean(t[:, 0]))
    ax.set_aspect(1.0 / max(math.cos(math.radians(mid)), 1e-3))
    ax.set_xlabel("longitude (degrees)")
    ax.set_ylabel("latitude (degrees)")
    ax.set_title(f"planar Laplace, epsilon = {epsilon:g} per km: {k} of {len(true)} points")
    ax.legend(loc="best")
    save_png(fig, path, dpi=100, bbox_inches="tight")


def register(app: typer.Typer) -> None:
    """Add the ``privatize-points`` command to ``app``."""

    @app.command("privatize-points")
    @handle_errors
    def privatize_points_command(
        input_file: Annotated[Path, typer.Argument(metavar="INPUT", help="CSV or Parquet file with a header.")],
        lat: Annotated[str, typer.Option("--lat", help="Latitude column (degrees).")],
        lon: Annotated[str, typer.Option("--lon", help="Longitude column (degrees).")],
        epsilon: Annotated[float, typer.Option("--epsilon", "-e", help="Guarantee per km of great-circle distance.")],
        out: Annotated[Path, typer.Option("--out", "-o", dir_okay=False, help="Output file (.csv or .parquet).")],
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
            typer.Option("--plot", dir_okay=False, help="PNG of a sample of true vs released points "
                         "(it shows TRUE locations: keep it private)."),
        ] = None,
        digits: Annotated[
            int, typer.Option("--digits", min=0, max=15, help="Decimals of released coordinates (6 = 0.1 m).")
        ] = 6,
        drop: DropOption = None,
        keep: KeepOption = None,
        seed: SeedOption = None,
        json: JsonOption = False,
    ) -> None:
        """Release latitude/longitude columns with planar Laplace (geo-indistinguishability).

        Each row is released independently at EPSILON per km (great-circle); other
        columns are written with their TRUE values (named on stderr) unless --drop
        removes them. A person with k rows gets k x EPSILON.
        """
        epsilon = check_epsilon(epsilon, "--epsilon")
        kind = _format(input_file, "INPUT")
        out_kind = _format(out, "--out")
        if out_kind != kind:
            raise ValidationError(f"--out {out}: write the same format as INPUT ({kind})")
        check_output(out, inputs=(input_file, snap_to, region, plot))
        if plot is not None:
            check_output(plot, "--plot", inputs=(input_file, snap_to, region, out))
            require("plot", what="--plot")
            if plot.suffix.lower() != ".png":
                raise ValidationError(f"--plot {plot}: expected a .png file")
        if truncate not in TRUNCATIONS:
            raise ValidationError(f"--truncate must be one of {', '.join(TRUNCATIONS)}, got {truncate!r}")
        if lat == lon:
            raise ValidationError("--lat and --lon name the same column")
        if not input_file.is_file():
            raise ValidationError(f"{input_file}: no such file")
        try:
            plan = plan_columns(table_header(input_file, [lat, lon]), [lat, lon], keep=keep or (), drop=drop or (),
                                where=str(input_file))
        except ValidationError as ex:  # the library names no flag; say which one
            raise ValidationError(with_flags(str(ex))) from None
        twins = look_alikes(plan)
        if twins:
            raise ValidationError(
                f"{input_file}: column(s) {', '.join(map(repr, twins))} look like the released coordinates "
                f"({lat!r}, {lon!r}) and would leave with their true values: --drop each one, or --keep it if it "
                "is not a location"
            )
        area = None if region is None else parse_region(region)
        snapper = None if snap_to is None else Snapper(read_latlon_points(snap_to))
        if snapper is not None and area is not None and not area.contains(snapper.points).all():
            warn("some --snap-to points lie outside --region: snapped releases may leave the region")
        if kind == "csv":
            header, rows, _ = read_csv_table(input_file)
            i, j = _column(header, lat, "--lat", input_file), _column(header, lon, "--lon", input_file)
            points = np.column_stack([_parse_column([r[i] for r in rows], lat, input_file),
                                      _parse_column([r[j] for r in rows], lon, input_file)])
        else:
            table = read_parquet(input_file)
            _column(table.column_names, lat, "--lat", input_file)
            _column(table.column_names, lon, "--lon", input_file)
            points = np.column_stack([_parquet_column(table, lat, input_file),
                                      _parquet_column(table, lon, input_file)])
        if not len(points):
            raise ValidationError(f"{input_file}: no data rows")
        if seed is not None:
            warn("--seed makes the releases reproducible by anyone who knows the seed: not private for real data")
        with progress(f"releasing {len(points)} points"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PrivacyLeakWarning)  # said above, once, as a CLI warning
                try:
                    released = privatize_points(points, epsilon, region=area, truncation=truncate,  # type: ignore[arg-type]
                                                snap_to=snapper, rng=seed)
                except ValidationError as ex:
                    raise ValidationError(f"{input_file}: {ex}") from None
            released = np.atleast_2d(released)
            exact = np.full(len(released), snapper is not None)  # rows written at full precision
            if snapper is None:
                rounded = np.round(released, digits)
                if area is not None:  # rounding must not move a release out of the region
                    exact = ~area.contains(rounded, tolerance_km=_REGION_TOLERANCE_KM)
                released = np.where(exact[:, None], released, rounded)
            if kind == "csv":
                written = [k for k, name in enumerate(header) if name in set(plan.written)]
                with atomic_write(out, "w") as fh:
                    writer = csv.writer(fh, lineterminator="\n")
                    writer.writerow([header[k] for k in written])
                    for row, (a, b), full in zip(rows, released, exact, strict=True):
                        if full:
                            row[i], row[j] = repr(float(a)), repr(float(b))
                        else:
                            row[i], row[j] = f"{a:.{digits}f}", f"{b:.{digits}f}"
                        writer.writerow([row[k] for k in written])
            else:
                pa = import_optional("pyarrow", "parquet")
                pq = import_optional("pyarrow.parquet", "parquet")
                for name, values in ((lat, released[:, 0]), (lon, released[:, 1])):
                    k = table.column_names.index(name)
                    table = table.set_column(k, pa.field(name, pa.float64()), pa.array(values, pa.float64()))
                table = table.drop_columns(list(plan.dropped))
                with atomic_write(out) as fh:
                    pq.write_table(table, fh)
            if plot is not None:
                _plot(plot, points, released, area, epsilon)
        summary = {
            "out": str(out),
            "rows": len(points),
            "epsilon_per_km": epsilon,
            "mean_noise_km": 2.0 / epsilon,
            "region": None if area is None else area.name,
            "truncate": truncate if area is not None else None,
            "noise_epsilon_per_km": epsilon / 2 if area is not None and truncate == "reject" else epsilon,
            "snap_points": None if snapper is None else len(snapper.points),
            "plot": None if plot is None else str(plot),
            "seeded": seed is not None,
            "columns": plan.as_dict(),
        }
        leaves_report(plan)
        if json:
            echo_json(summary)
            return
        extra = []
        if area is not None:
            how = "rejection (noise at epsilon/2)" if truncate == "reject" else "nearest point"
            extra.append(f"kept in {area.name} by {how}")
        if snapper is not None:
            extra.append(f"snapped to {len(snapper.points)} points")
        # the one caveat the continuous mechanism carries (docs/proofs/exact_sampling.md, section 4)
        warn("continuous planar Laplace is epsilon-geo-indistinguishable for real numbers, not exactly for the "
             "floats it releases (Mironov 2012); for releases that follow an audited distribution exactly, build "
             "planar-laplace on a grid and use `metricdp privatize` (docs/location.md)")
        console.print(
            f"wrote {out}: {len(points)} points of ({lat!r}, {lon!r}) released by planar Laplace at "
            f"epsilon={epsilon:g} per km (mean displacement {2 / epsilon:.3g} km)"
            + (f"; {'; '.join(extra)}" if extra else "")
            + ("" if seed is None else " [seeded]")
            + ("" if plot is None else f"; plot {plot}"),
            markup=False,
            highlight=False,
        )

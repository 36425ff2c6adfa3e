"""``metricdp experiment NAME --out DIR``: the papers' experiments.

:data:`experiment_app` is a Typer sub-app; each experiment adds one command to it
(``ldp`` here; later experiments register theirs the same way).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import ValidationError
from ._common import console, handle_errors, progress

__all__ = ["experiment_app", "register"]

experiment_app = typer.Typer(
    name="experiment",
    help="Reproduce the papers' experiments (numbers as CSV, a PNG plot, a markdown summary).",
    no_args_is_help=True,
)


def _centre(value: str) -> tuple[float, float]:
    try:
        lat, lon = (float(x) for x in value.split(","))
    except ValueError:
        raise ValidationError(f"--centre must be LAT,LON in degrees, got {value!r}") from None
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        raise ValidationError(f"--centre {value!r} is not a (lat, lon) in degrees")
    return lat, lon


@experiment_app.command("ldp")
@handle_errors
def ldp(
    out: Annotated[Path, typer.Option("--out", "-o", file_okay=False, help="Output directory (created).")],
    quick: Annotated[
        bool, typer.Option("--quick", help="A small run (15x15 cells of 300 m, 8 sizes, 2 repetitions).")
    ] = False,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the data and the noise.")] = 0,
    checkins: Annotated[
        Path | None,
        typer.Option("--checkins", help="Check-ins (user,time,lat,lon or Gowalla's) replacing the stand-in."),
    ] = None,
    repetitions: Annotated[
        int | None, typer.Option("--repetitions", "-r", min=1, help="Privatizations averaged per size.")
    ] = None,
    centre: Annotated[
        str | None, typer.Option("--centre", help="Centre LAT,LON of the 4.5 km square (default: Paris).")
    ] = None,
) -> None:
    """Figure 2 of Alvim et al. (CSF 2018): EMD of the IBU estimate vs. number of check-ins.

    k-RR, the geometric and the discretised planar Laplace mechanisms on a 30 x 30 grid of
    150 m cells, each calibrated to an expected distance of 450 m.
    """
    from .._optional import require
    from ..experiments.ldp import MECHANISMS, PAPER_EPSILON, PARIS_CENTRE, run_ldp

    require("plot", what="experiment ldp (its figure)")
    if checkins is None:  # the stand-in check-ins come from GeoNames' populated places
        require("geo", what="experiment ldp without --checkins")
    with progress("LDP experiment") as update:
        result = run_ldp(
            out,
            quick=quick,
            seed=seed,
            checkins=checkins,
            repetitions=repetitions,
            centre=PARIS_CENTRE if centre is None else _centre(centre),
            progress=update,
        )
    cfg = result.config
    for key, (_, label) in MECHANISMS.items():
        cal = result.calibration[key]
        unit = "" if key == "krr" else " per m"
        console.print(
            f"{label}: epsilon {cal.epsilon:.5g}{unit} (paper {PAPER_EPSILON[key]:g}), "
            f"E_d {cal.expected_distance:.2f} m, EMD {result.emd_mean[key][0]:.1f} m at {cfg.sizes[0]} "
            f"-> {result.emd_mean[key][-1]:.1f} m at {cfg.sizes[-1]} check-ins",
            markup=False,
            highlight=False,
        )
    console.print(
        f"wrote {', '.join(str(p) for p in result.files.values())} in {result.seconds:.0f} s",
        markup=False,
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    """Add the ``experiment`` sub-app to ``app``."""
    app.add_typer(experiment_app, name="experiment")

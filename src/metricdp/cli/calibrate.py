"""``metricdp calibrate --mechanism NAME --points POINTS --prior PRIOR --expected-distance E``.

Prints the parameter at which the family's expected distance between true and reported
values meets E (Alvim et al.'s equal-protection calibration): for ``krr`` its LDP
epsilon, for the other families the mDP epsilon per unit of distance.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from ..errors import ValidationError
from ..io import read_points
from ..mechanisms import registry
from ..mechanisms.distance_calibration import calibrate_expected_distance
from ..spaces import METRICS
from ..units import epsilon_forms, space_unit
from ._common import JsonOption, echo_json, handle_errors, progress, read_label_values
from ._options import naming_flags

__all__ = ["read_prior", "register"]


def read_prior(value: str, labels: tuple[str, ...]) -> np.ndarray | None:
    """``None`` for ``uniform``; else a CSV ``label,probability`` or ``.npy`` in label order.

    Probabilities must be non-negative and sum to 1 within 1e-6 (then renormalised).
    """
    if value.strip().lower() == "uniform":
        return None
    p = read_label_values(Path(value), labels, "--prior")
    if not np.all(np.isfinite(p)) or (p < 0).any():
        i = int(np.flatnonzero(~np.isfinite(p) | (p < 0))[0])
        raise ValidationError(f"--prior {value}: probability of {labels[i]!r} is {float(p[i])!r}")
    if abs(p.sum() - 1.0) > 1e-6:
        raise ValidationError(f"--prior {value}: probabilities sum to {float(p.sum())!r}, not 1")
    return p / p.sum()


def calibratable() -> tuple[str, ...]:
    """Families ``calibrate`` takes (the registry's classification, read now): exact, no required parameter."""
    return tuple(
        n for n in registry.names()
        if registry.get(n).exact and not any(p.required for p in registry.get(n).params)
    )


#: The families ``calibrate`` took when this module was imported.
FAMILIES = calibratable()


def register(app: typer.Typer) -> None:
    """Add the ``calibrate`` command to ``app``."""

    @app.command("calibrate")
    @handle_errors
    def calibrate(
        mechanism: Annotated[
            str, typer.Option("--mechanism", "-m", help=f"Family: {', '.join(FAMILIES)}.")
        ],
        points: Annotated[Path, typer.Option("--points", help="POINTS file (.csv, .parquet or .npy).")],
        expected_distance: Annotated[
            float, typer.Option("--expected-distance", "-E", help="Target E_d, in the points' distance unit.")
        ],
        prior: Annotated[
            str, typer.Option("--prior", help="'uniform' or a CSV label,probability (or .npy).")
        ] = "uniform",
        metric: Annotated[
            str | None, typer.Option("--metric", help=f"{', '.join(METRICS)} (a metric without parameters).")
        ] = None,
        tol: Annotated[float, typer.Option("--tol", help="Relative tolerance on E_d.")] = 1e-6,
        json_out: JsonOption = False,
    ) -> None:
        """Print the epsilon at which a mechanism's expected distance equals E.

        For krr the printed value is its LDP epsilon; for the other families the mDP
        epsilon per unit of distance.
        """
        families = calibratable()
        if mechanism not in families:
            raise ValidationError(f"unknown --mechanism {mechanism!r}; choose one of {', '.join(families)}")
        with naming_flags({"metric": "--metric"}):
            space = read_points(points, metric)
        pi = read_prior(prior, space.labels)
        with progress(f"calibrating {mechanism} to E_d = {expected_distance:g}") as report:
            cal = calibrate_expected_distance(mechanism, space, pi, expected_distance, tol=tol, progress=report)
        if json_out:
            echo_json(
                {
                    "mechanism": mechanism,
                    "parameter": registry.get(mechanism).calibration or "epsilon",
                    "epsilon": cal.epsilon,
                    "epsilon_mdp": cal.mechanism.epsilon,
                    "epsilon_forms": epsilon_forms(cal.mechanism.epsilon, space_unit(space)),  # per unit and (l, r)
                    "expected_distance": cal.expected_distance,
                    "target": expected_distance,
                    "tol": tol,
                    "builds": cal.iterations,
                    "n": space.n,
                }
            )
            return
        typer.echo(repr(cal.epsilon))

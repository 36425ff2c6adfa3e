"""``metricdp calibrate POINTS --mechanism NAME [--prior P] --target KIND=VALUE [--out FILE]``.

With ``--target`` (:func:`metricdp.targets.calibrate_to_target`):
the eps at which the family meets a loss or privacy target, its other figures there, what
was searched, the witness beside it, and the ``metricdp build`` command (or the file,
with ``--out``). With ``--expected-distance E``: the parameter at which the family's
expected distance between true and reported values meets E (Alvim et al.'s
equal-protection calibration): for ``krr`` its LDP epsilon, for the other families the mDP
epsilon per unit of distance.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from ..errors import ValidationError
from ..io import read_points
from ..mechanisms import registry
from ..mechanisms.distance_calibration import calibrate_expected_distance
from ..spaces import METRICS
from ..targets import TIME_LIMIT, TargetCalibration, calibrate_to_target, family_params, parse_target
from ..units import describe_epsilon, epsilon_forms, space_unit
from ._common import JsonOption, check_output, echo_json, fmt, handle_errors, progress, read_label_values
from ._options import naming_flags
from .build import build_family

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


def _params(values: list[str] | None, family: registry.Family, labels: tuple[str, ...]) -> dict[str, Any]:
    """``--param NAME=VALUE`` pairs as the family's keyword arguments (a vector parameter names a file)."""
    out: dict[str, Any] = {}
    for text in values or ():
        name, sep, value = text.partition("=")
        if not sep:
            raise ValidationError(f"--param {text!r}: write NAME=VALUE")
        param = family.param(name.strip())
        value = value.strip()
        if param.kind == "vector":
            out[param.name] = read_label_values(Path(value), labels, f"--param {param.name}")
        elif param.kind in ("int", "float"):
            try:
                out[param.name] = int(value) if param.kind == "int" else float(value)
            except ValueError:
                raise ValidationError(f"--param {text!r}: {value!r} is not a number") from None
        elif param.kind == "bool":
            out[param.name] = value.lower() in ("1", "true", "yes")
        else:
            out[param.name] = value
    return out


def build_command(points: Path, prior: str, result: TargetCalibration, given: list[str] | None) -> str:
    """The ``metricdp build`` command that builds the calibrated mechanism."""
    family = registry.get(result.family)
    words = ["metricdp", "build", str(points), "--mechanism", result.family]
    words += ["--ldp-epsilon" if result.parameter_name == "ldp_epsilon" else "--epsilon", repr(result.parameter)]
    flags = {p.name: p.flag for p in family.params if p.flag}
    if prior != "uniform" and "prior" in family_params(family, {}, np.ones(1)):
        words += ["--prior", prior]
    for text in given or ():
        name, _, value = text.partition("=")
        flag = flags.get(name.strip())
        if flag is not None and not (name.strip() == "prior" and "--prior" in words):
            words += [flag, value.strip()] if family.param(name.strip()).kind != "bool" else [flag]
    return " ".join(shlex.quote(w) for w in [*words, "--out", "FILE"])


def _report(result: TargetCalibration, command: str, unit: str) -> dict[str, Any]:
    return {
        "mechanism": result.family,
        "target": {"kind": result.target.kind, "value": result.target.value, "text": str(result.target),
                   "answer": "largest" if result.target.largest else "smallest"},
        "parameter": result.parameter_name,
        "epsilon": result.parameter,
        "epsilon_forms": epsilon_forms(result.mechanism.epsilon, unit),
        "figures": result.figures,
        "unit": unit,
        "certified": {"meets": result.target.meets(result.figures), "epsilon_audit": result.figures["epsilon_audit"]},
        "neighbour": None if result.neighbour is None else {
            "epsilon": result.neighbour[0], "figures": result.neighbour[1], "meets": result.neighbour[2]},
        "neighbour_note": result.neighbour_note,
        "search": {**result.search, "bracket": result.bracket,
                   "probes": [{"epsilon": q.parameter, "figure": q.figure, "meets": q.meets, "stage": q.stage}
                              for q in result.probes]},
        "notes": list(result.notes),
        "seconds": result.seconds,
        "build": command,
    }


def register(app: typer.Typer) -> None:
    """Add the ``calibrate`` command to ``app``."""

    @app.command("calibrate")
    @handle_errors
    def calibrate(
        points_arg: Annotated[Path | None, typer.Argument(metavar="POINTS", help="POINTS file (.csv, .parquet, .npy).",
                                                          show_default=False)] = None,
        mechanism: Annotated[
            str, typer.Option("--mechanism", "-m", help="Family (exact; --expected-distance: "
                                                        f"{', '.join(FAMILIES)}).")
        ] = "",
        points_opt: Annotated[Path | None, typer.Option("--points", help="POINTS, as an option.")] = None,
        target: Annotated[str | None, typer.Option(
            "--target", "-t", help="expected-loss=500m | worst-loss=2km (smallest eps meeting it); adversary-error=1km"
                                   " | reidentification=0.2 (largest eps meeting it); level=L,radius=R.")] = None,
        expected_distance: Annotated[
            float | None, typer.Option("--expected-distance", "-E", help="Target E_d, in the points' distance unit.")
        ] = None,
        prior: Annotated[
            str, typer.Option("--prior", help="'uniform' or a CSV label,probability (or .npy).")
        ] = "uniform",
        metric: Annotated[
            str | None, typer.Option("--metric", help=f"{', '.join(METRICS)} (a metric without parameters).")
        ] = None,
        param: Annotated[list[str] | None, typer.Option(
            "--param", help="NAME=VALUE: a parameter of the family, repeatable (user-centric: quality=Q, a "
                            "plain number in the points' distance units).")] = None,
        out: Annotated[Path | None, typer.Option("--out", "-o", help="Build the calibrated mechanism into this "
                                                                     "file.", dir_okay=False)] = None,
        tol: Annotated[float, typer.Option("--tol", help="Relative tolerance on E_d.")] = 1e-6,
        time_limit: Annotated[float, typer.Option(
            "--time-limit", help="Seconds the --target search may be estimated to take; a longer one (an LP family "
                                 "on a large space) is refused before it starts.")] = TIME_LIMIT,
        json_out: JsonOption = False,
    ) -> None:
        """Choose eps from a target: the largest eps meeting a privacy target, the smallest meeting a utility one.

        --expected-distance E instead prints the epsilon at which the expected distance equals E
        (krr: its LDP epsilon; the other families: the mDP epsilon per unit of distance).
        """
        points = points_arg if points_opt is None else points_opt
        if points is None or (points_arg is not None and points_opt is not None):
            raise ValidationError("give the POINTS file once: as the argument or as --points")
        if (target is None) == (expected_distance is None):
            raise ValidationError("give exactly one of --target and --expected-distance")
        if not mechanism:
            raise ValidationError("--mechanism is required")
        if out is not None:
            if target is None:
                raise ValidationError("--out applies to --target")
            check_output(out, inputs=(points, None if prior == "uniform" else prior))
        if expected_distance is None:
            _by_target(points, mechanism, str(target), prior, metric, param, out, json_out, time_limit)
            return
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


def _by_target(points: Path, mechanism: str, target: str, prior: str, metric: str | None, given: list[str] | None,
               out: Path | None, json_out: bool, time_limit: float) -> None:
    family = registry.get(mechanism)
    with naming_flags({"metric": "--metric"}):
        space = read_points(points, metric)
    unit = space_unit(space)
    goal = parse_target(target, unit)
    pi = read_prior(prior, space.labels)
    params = _params(given, family, space.labels)
    with progress(f"calibrating {mechanism} to {goal}") as report:
        if family.calibration is None:  # eps -> the mechanism, as `metricdp build` builds it
            checked = family.check_params(family_params(family, params, pi))
            result = calibrate_to_target(mechanism, space, goal, pi, params=params, progress=report,
                                         build=lambda eps: build_family(space, family, eps, checked),
                                         time_limit=time_limit)
        else:
            result = calibrate_to_target(mechanism, space, goal, pi, params=params, progress=report,
                                         time_limit=time_limit)
    command = build_command(points, prior, result, given)
    if out is not None:
        result.mechanism.save(out, inputs=[p for p in (points, None if prior == "uniform" else Path(prior)) if p])
    rep = _report(result, command, unit)
    if out is not None:
        rep["out"] = str(out)
    if json_out:
        echo_json(rep)
        return
    figs = result.figures
    side = "" if goal.kind == "level" else ("largest " if goal.largest else "smallest ")
    lines = [
        f"{side}{result.parameter_name} meeting {goal}: {result.parameter!r}"
        f" ({describe_epsilon(result.mechanism.epsilon, unit)})",
        "at that eps (the built, audited mechanism): " + ", ".join(
            f"{k} {fmt(figs[k])}" for k in ("expected_loss", "worst_loss", "adversary_error", "reidentification",
                                             "epsilon_audit")),
        f"searched: {len(result.probes)} builds, grid of {result.search.get('grid', 0)} over "
        f"{result.search.get('range')}, then bisection to {result.bracket}" if result.search else
        "searched: nothing (eps = level / radius)",
        f"witness: {result.neighbour_note}" + (
            f" ({result.target.figure} {fmt(result.neighbour[1].get(result.target.figure))} at "
            f"{result.neighbour[0]!r})" if result.neighbour is not None else ""),
        *[f"note: {n}" for n in result.notes],
        f"wrote {out}" if out is not None else f"build: {command}",
    ]
    for line in lines:
        typer.echo(line)

"""``metricdp build POINTS --mechanism NAME --epsilon EPS --out MECH.npz``.

``--outputs POINTS`` (same format and metric as the space's POINTS) or
``--output-distances FILE`` (CSV: ``label`` then the output labels; one row per input)
give a separate output set (:mod:`metricdp.outputs`), for the families that take one
(``Family.outputs``: exponential, optimal).

The families and their parameters come from the registry
(:mod:`metricdp.mechanisms.registry`): each option's flag is declared on the family's
parameter that takes it, only the options the user gave are passed on (the library's
defaults apply otherwise), and an option that does not apply to the chosen mechanism is
an error rather than silently ignored.
"""

from __future__ import annotations

from enum import Enum, StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from .._validation import check_epsilon
from ..errors import ValidationError
from ..io import read_output_distances, read_output_points, read_point_columns, read_points
from ..mechanisms import registry
from ..mechanisms.base import Mechanism
from ..outputs import OutputSet
from ..spaces import MetricSpace
from ._common import OutOption, check_output, console, fmt, handle_errors, progress, read_label_values

__all__ = ["MechanismName", "build_mechanism", "register"]


#: The families ``metricdp build`` can build: every family of the registry.
MechanismName = StrEnum("MechanismName", {n.replace("-", "_"): n for n in registry.names()})  # type: ignore[misc]


class Metric(StrEnum):
    euclidean = "euclidean"
    haversine = "haversine"
    manhattan = "manhattan"
    chebyshev = "chebyshev"


class Objective(StrEnum):
    worst = "worst"
    expected = "expected"


class Fit(StrEnum):
    normalised = "normalised"
    paper = "paper"


#: The keyword of each ``build`` option (the Typer parameter name) -> its flag, derived from the
#: flags the registry's families declare (``--base-weights`` is the keyword ``base_weights``).
_FLAGS: dict[str, str] = {
    p.flag[2:].replace("-", "_"): p.flag for name in registry.names() for p in registry.get(name).params if p.flag
}


def _parse_lambdas(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValidationError(f"--lambdas must be comma-separated numbers, got {text!r}") from None
    if not values:
        raise ValidationError(f"--lambdas must list at least one number, got {text!r}")
    return values


def build_mechanism(
    space: MetricSpace, name: str, epsilon: float | None, options: dict[str, Any] | None = None,
    outputs: OutputSet | None = None,
) -> Mechanism:
    """Build mechanism ``name`` on ``space`` from ``build``'s options, through the registry.

    ``options`` holds the CLI options by Typer keyword (see ``_FLAGS``); ``None`` and
    False values are "not given". Per-label file options (weights, prior, base weights)
    are paths, read here against the space's labels.
    """
    family = registry.get(name)
    given = {k: v for k, v in (options or {}).items() if v is not None and v is not False}
    unknown = sorted(set(given) - set(_FLAGS))
    if unknown:
        raise ValidationError(f"unknown option(s) {', '.join(unknown)}")
    by_flag = {p.flag: p for p in family.params if p.flag}
    extra = sorted(k for k in given if _FLAGS[k] not in by_flag)
    if extra:
        takes = ", ".join(sorted(by_flag)) or "no options"
        flags = ", ".join(_FLAGS[k] for k in extra)
        raise ValidationError(f"{flags} does not apply to --mechanism {name} (it takes: {takes})")
    for param in family.params:
        if param.required and param.flag and not any(_FLAGS[k] == param.flag for k in given):
            raise ValidationError(f"--mechanism {name} needs {param.flag} FILE")
    if family.epsilon == "or-ldp":
        if (epsilon is None) == ("ldp_epsilon" not in given):
            raise ValidationError(f"--mechanism {name} takes exactly one of --epsilon and --ldp-epsilon")
        if "ldp_epsilon" in given:
            given["ldp_epsilon"] = check_epsilon(given["ldp_epsilon"], "--ldp-epsilon")
    elif epsilon is None:
        raise ValidationError(f"--mechanism {name} needs --epsilon")
    eps = None if epsilon is None else check_epsilon(epsilon, "--epsilon")
    params: dict[str, Any] = {}
    for key, value in given.items():
        param = by_flag[_FLAGS[key]]
        if param.kind == "vector":
            value = read_label_values(Path(value), space.labels, param.flag or key)
        elif param.kind == "floats" and isinstance(value, str):
            value = _parse_lambdas(value)
        elif isinstance(value, Enum):
            value = value.value
        params[param.name] = value
    if outputs is not None and not family.outputs:
        takes = ", ".join(n for n in registry.names() if registry.get(n).outputs)
        raise ValidationError(f"--outputs / --output-distances do not apply to --mechanism {name} (they apply to: "
                              f"{takes})")
    return family.build(space, eps, outputs=outputs, **params)


def _summary(mechanism: Mechanism, out: Path) -> list[tuple[str, str]]:
    rows = [("mechanism", mechanism.name), ("n", fmt(mechanism.n)), ("epsilon", fmt(mechanism.epsilon, 12))]
    if not mechanism.square:
        rows.insert(2, ("outputs", fmt(mechanism.m)))
    if mechanism.exact:
        audited = mechanism.info.get("epsilon_audit")
        if audited is None:
            audited = mechanism.audit().epsilon
        rows.append(("epsilon (audited)", fmt(audited, 12)))
        rows.append(("worst-case loss", fmt(mechanism.worst_case_loss())))
    else:
        half = mechanism.info.get("estimate", {}).get("loss_half_width")
        pm = f" ± {fmt(max(half))}" if half else ""
        rows.append(("epsilon (audited)", "not audited: the matrix is an estimate; epsilon is proven"))
        rows.append(("worst-case loss", f"{fmt(mechanism.worst_case_loss())}{pm} (estimate)"))
    rows.append(("uniform baseline", fmt(float(mechanism.uniform_losses().max()))))
    rows.append(("file", str(out)))
    return rows


_Points = Annotated[
    Path,
    typer.Argument(
        metavar="POINTS",
        help="POINTS: CSV/Parquet (label then coordinates; label,lat,lon for haversine) or a .npy distance matrix.",
        show_default=False,
    ),
]
_Mechanism = Annotated[MechanismName, typer.Option("--mechanism", "-m", help="Mechanism family.")]
_Epsilon = Annotated[float | None, typer.Option("--epsilon", "-e", help="The mDP guarantee, per unit of distance.")]
_Metric = Annotated[Metric | None, typer.Option(help="Metric (default: haversine for label,lat,lon, else euclidean).")]
_Calibrate = Annotated[
    bool,
    typer.Option(
        "--calibrate",
        help="Tune the inner parameter to the exact audit "
        f"({', '.join(n for n in registry.names() if any(p.flag == '--calibrate' for p in registry.get(n).params))}).",
    ),
]
_Weights = Annotated[Path | None, typer.Option(help="weighted-exponential: CSV label,weight or a .npy vector.")]
_Ldp = Annotated[float | None, typer.Option("--ldp-epsilon", help="krr: the LDP parameter, instead of --epsilon.")]
_Objective = Annotated[Objective | None, typer.Option(help="optimal: the loss to minimise (default worst).")]
_Prior = Annotated[Path | None, typer.Option(help="optimal: prior of --objective expected (CSV label,prob or .npy).")]
_TimeLimit = Annotated[
    float | None, typer.Option("--time-limit", help="LP mechanisms: deadline of the whole build, in seconds.")
]
_Stretch = Annotated[float | None, typer.Option(help="spanner: stretch of the spanner (default 3).")]
_Neighbours = Annotated[
    int | None, typer.Option("--neighbours", "-r", min=1, help="constopt: neighbours r (default 10).")
]
_Fit = Annotated[Fit | None, typer.Option(help="constopt: how H is fitted (default normalised).")]
_Lambdas = Annotated[str | None, typer.Option(help="constopt: comma-separated lambdas, e.g. 0.001,0.1,1.0.")]
_Quantile = Annotated[
    float | None, typer.Option(help="constopt: minimise this quantile loss instead of the worst case.")
]
_Samples = Annotated[
    int | None, typer.Option(min=1, help="madlib, subsampled-exponential: Monte-Carlo samples per row.")
]
_Seed = Annotated[
    int | None, typer.Option(min=0, help="madlib, subsampled-exponential: seed of the Monte-Carlo estimate.")
]
_Candidates = Annotated[int | None, typer.Option(min=1, help="subsampled-exponential: candidates drawn per release.")]
_Base = Annotated[
    Path | None, typer.Option("--base-weights", help="subsampled-exponential: base distribution (CSV or .npy).")
]


_Outputs = Annotated[
    Path | None,
    typer.Option("--outputs", metavar="POINTS", help="A separate output set (exponential, optimal): POINTS in the "
                 "format of the space's, measured with its metric (a coarse release grid, points of interest)."),
]
_OutputDistances = Annotated[
    Path | None,
    typer.Option("--output-distances", metavar="FILE", help="A separate output set by its distances: CSV with "
                 "header label,OUT1,OUT2,... and one row per input label."),
]


_Remap = Annotated[
    bool,
    typer.Option("--remap", help="Bayesian remapping under --prior (Chatzikokolakis et al. 2017): same epsilon, "
                 "lower expected loss, audited."),
]
_Elastic = Annotated[
    Path | None,
    typer.Option("--elastic", help="Build on the elastic metric (Chatzikokolakis et al. 2015) of these privacy "
                 "weights (CSV label,weight or .npy)."),
]


def register(app: typer.Typer) -> None:
    """Add the ``build`` command to ``app``."""

    @app.command("build")
    @handle_errors
    def build(
        points: _Points,
        mechanism: _Mechanism,
        out: OutOption,
        epsilon: _Epsilon = None,
        metric: _Metric = None,
        calibrate: _Calibrate = False,
        weights: _Weights = None,
        ldp_epsilon: _Ldp = None,
        objective: _Objective = None,
        prior: _Prior = None,
        time_limit: _TimeLimit = None,
        stretch: _Stretch = None,
        neighbours: _Neighbours = None,
        fit: _Fit = None,
        lambdas: _Lambdas = None,
        quantile: _Quantile = None,
        samples: _Samples = None,
        seed: _Seed = None,
        candidates: _Candidates = None,
        base_weights: _Base = None,
        remap: _Remap = False,
        elastic: _Elastic = None,
        outputs: _Outputs = None,
        output_distances: _OutputDistances = None,
    ) -> None:
        """Build a mechanism on a metric space, audit it, and save it as a mechanism file."""
        local = locals()
        options = {k: v for k, v in local.items() if k in _FLAGS}
        check_output(out, inputs=(points, weights, prior, base_weights, elastic, outputs, output_distances))
        if outputs is not None and output_distances is not None:
            raise ValidationError("give one of --outputs and --output-distances, not both")
        if (outputs is not None or output_distances is not None) and not registry.get(mechanism.value).outputs:
            takes = ", ".join(n for n in registry.names() if registry.get(n).outputs)
            raise ValidationError(f"--outputs / --output-distances do not apply to --mechanism {mechanism.value} "
                                  f"(they apply to: {takes})")
        if remap and prior is None:
            raise ValidationError("--remap needs --prior FILE (the prior the remapping minimises the loss under)")
        family = registry.get(mechanism.value)
        expected = getattr(objective, "value", objective) == "expected"
        if remap and not (expected and any(p.flag == "--prior" for p in family.params)):
            options["prior"] = None  # the prior is the remapping's, not the builder's
        with progress(f"reading {points}"):
            space = read_points(points, None if metric is None else metric.value)
            if elastic is not None:
                from ..elastic import elastic_metric

                space = elastic_metric(space, read_label_values(elastic, space.labels, "--elastic"))
            output_set = None
            if outputs is not None:
                output_set = read_output_points(outputs, space, columns=read_point_columns(points))
            elif output_distances is not None:
                output_set = read_output_distances(output_distances, space)
        with progress(f"building {mechanism.value} on {space.n} points") as bar:
            mech = build_mechanism(space, mechanism.value, epsilon, options, output_set)
            if remap:
                from ..remap import bayesian_remap

                assert prior is not None
                pi = read_label_values(prior, space.labels, "--prior")
                bar.update("Bayesian remapping under the prior")
                mech = bayesian_remap(mech, pi / pi.sum())
            bar.update(f"saving {out}")
            inputs = [p for p in (points, prior, elastic, weights, base_weights, outputs, output_distances)
                      if p is not None]
            mech.save(out, inputs=inputs)
        rows = _summary(mech, out)
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            console.print(f"{key:<{width}}  {value}", markup=False, highlight=False)

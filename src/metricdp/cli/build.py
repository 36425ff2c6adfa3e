"""``metricdp build POINTS --mechanism NAME --epsilon EPS --out MECH.npz``.

Each mechanism name maps to a builder of the library through a small adapter that
imports its module only when that mechanism is asked for, so a missing family is one
clear error line, and only the options the user gave are passed on (the library's
defaults apply otherwise). An option that does not apply to the chosen mechanism is an
error rather than silently ignored.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from .._validation import check_epsilon
from ..errors import MetricDPError, ValidationError
from ..io import read_points
from ..mechanisms.base import Mechanism
from ..spaces import MetricSpace
from ._common import OutOption, check_output, console, fmt, handle_errors, progress, read_label_values

__all__ = ["MECHANISMS", "MechanismName", "build_mechanism", "register"]


class MechanismName(StrEnum):
    """Mechanism families ``metricdp build`` can build."""

    exponential = "exponential"
    weighted_exponential = "weighted-exponential"
    krr = "krr"
    geometric = "geometric"
    optimal = "optimal"
    spanner = "spanner"
    constopt = "constopt"
    madlib = "madlib"
    planar_laplace = "planar-laplace"
    subsampled_exponential = "subsampled-exponential"


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


#: CLI option key -> (flag as the user types it, keyword of the builder).
_OPTIONS: dict[str, tuple[str, str]] = {
    "calibrate": ("--calibrate", "calibrate"),
    "weights": ("--weights", "weights"),
    "ldp_epsilon": ("--ldp-epsilon", "ldp_epsilon"),
    "objective": ("--objective", "objective"),
    "prior": ("--prior", "prior"),
    "time_limit": ("--time-limit", "time_limit"),
    "stretch": ("--stretch", "stretch"),
    "neighbours": ("--neighbours", "neighbours"),
    "fit": ("--fit", "fit"),
    "lambdas": ("--lambdas", "lambdas"),
    "quantile": ("--quantile", "quantile"),
    "samples": ("--samples", "samples"),
    "seed": ("--seed", "rng"),
    "candidates": ("--candidates", "candidates"),
    "base_weights": ("--base-weights", "base"),
}
#: Options naming a per-label file (read with :func:`read_label_values`).
_FILE_OPTIONS = ("weights", "prior", "base_weights")


@dataclass(frozen=True)
class _Spec:
    module: str  # under metricdp.mechanisms
    function: str
    options: frozenset[str] = field(default_factory=frozenset)
    required: frozenset[str] = field(default_factory=frozenset)
    positional: tuple[str, ...] = ()  # passed after (space, epsilon)
    epsilon: str = "required"  # "required" | "or-ldp" (k-RR: exactly one of --epsilon, --ldp-epsilon)


def _spec(module: str, function: str, options: str = "", **kw: Any) -> _Spec:
    return _Spec(module, function, frozenset(options.split()), **kw)


#: Mechanism name -> adapter (module, builder, accepted options).
MECHANISMS: dict[str, _Spec] = {
    "exponential": _spec("exponential", "exponential", "calibrate"),
    "weighted-exponential": _spec(
        "exponential", "weighted_exponential", "calibrate weights",
        required=frozenset({"weights"}), positional=("weights",),
    ),
    "krr": _spec("krr", "krr", "ldp_epsilon", epsilon="or-ldp"),
    "geometric": _spec("geometric", "geometric"),
    "optimal": _spec("lp", "optimal", "objective prior calibrate time_limit"),
    "spanner": _spec("lp", "spanner", "stretch calibrate time_limit"),
    "constopt": _spec("lp", "constopt", "neighbours fit lambdas quantile calibrate time_limit"),
    "madlib": _spec("madlib", "madlib", "samples seed"),
    "planar-laplace": _spec("planar_laplace", "planar_laplace"),
    "subsampled-exponential": _spec(
        "subsampled", "subsampled_exponential", "candidates base_weights samples seed"
    ),
}


def _builder(name: str, spec: _Spec) -> Any:
    """The builder function, imported now; a missing module is one clear error.

    Any ImportError while importing the family (its module not written yet, or a guarded
    re-export that is absent) becomes a :class:`MetricDPError`; the original stays
    chained for ``--debug``.
    """
    module_name = f"metricdp.mechanisms.{spec.module}"
    try:
        module = importlib.import_module(module_name)
        fn = getattr(module, spec.function, None)
    except ImportError as ex:
        raise MetricDPError(
            f"mechanism {name!r} is not available in this installation ({type(ex).__name__}: {ex})"
        ) from ex
    if not callable(fn):
        raise MetricDPError(
            f"mechanism {name!r} is not available in this installation "
            f"({module_name}.{spec.function} is missing)"
        )
    return fn


def _parse_lambdas(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValidationError(f"--lambdas must be comma-separated numbers, got {text!r}") from None
    if not values:
        raise ValidationError(f"--lambdas must list at least one number, got {text!r}")
    return values


def build_mechanism(
    space: MetricSpace, name: str, epsilon: float | None, options: dict[str, Any] | None = None
) -> Mechanism:
    """Build mechanism ``name`` on ``space`` through its adapter.

    ``options`` holds the CLI options by key (see ``_OPTIONS``); ``None`` values are
    "not given". File options (weights, prior, base weights) are paths, read here
    against the space's labels.
    """
    if name not in MECHANISMS:
        raise ValidationError(f"unknown mechanism {name!r}; choose one of {', '.join(MECHANISMS)}")
    spec = MECHANISMS[name]
    given = {k: v for k, v in (options or {}).items() if v is not None and v is not False}
    unknown = sorted(set(given) - set(_OPTIONS))
    if unknown:
        raise ValidationError(f"unknown option(s) {', '.join(unknown)}")
    extra = sorted(set(given) - spec.options)
    if extra:
        takes = ", ".join(_OPTIONS[k][0] for k in sorted(spec.options)) or "no options"
        flags = ", ".join(_OPTIONS[k][0] for k in extra)
        raise ValidationError(f"{flags} does not apply to --mechanism {name} (it takes: {takes})")
    for key in sorted(spec.required - set(given)):
        raise ValidationError(f"--mechanism {name} needs {_OPTIONS[key][0]} FILE")
    if spec.epsilon == "or-ldp":
        if (epsilon is None) == ("ldp_epsilon" not in given):
            raise ValidationError(f"--mechanism {name} takes exactly one of --epsilon and --ldp-epsilon")
        if "ldp_epsilon" in given:
            given["ldp_epsilon"] = check_epsilon(given["ldp_epsilon"], "--ldp-epsilon")
    elif epsilon is None:
        raise ValidationError(f"--mechanism {name} needs --epsilon")
    eps = None if epsilon is None else check_epsilon(epsilon, "--epsilon")
    for key in _FILE_OPTIONS:
        if key in given:
            given[key] = read_label_values(Path(given[key]), space.labels, _OPTIONS[key][0])
    if "lambdas" in given:
        given["lambdas"] = _parse_lambdas(given["lambdas"])
    for key in ("objective", "fit"):
        if key in given and isinstance(given[key], Enum):
            given[key] = given[key].value
    fn = _builder(name, spec)
    args = [given.pop(k) for k in spec.positional]
    kwargs = {_OPTIONS[k][1]: v for k, v in given.items()}
    try:
        if spec.epsilon == "or-ldp":
            return fn(space, epsilon=eps, **kwargs)
        return fn(space, eps, *args, **kwargs)
    except NotImplementedError as ex:  # a placeholder module: not available either
        raise MetricDPError(f"mechanism {name!r} is not implemented in this installation ({ex})") from None


def _summary(mechanism: Mechanism, out: Path) -> list[tuple[str, str]]:
    rows = [("mechanism", mechanism.name), ("n", fmt(mechanism.n)), ("epsilon", fmt(mechanism.epsilon, 12))]
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


def _opt(kind: Any, *flags: str, **kw: Any) -> Any:
    """``Annotated[kind | None, typer.Option(...)]``: an option whose absence is ``None``."""
    return Annotated[kind | None, typer.Option(*flags, **kw)]


_Points = Annotated[
    Path,
    typer.Argument(
        metavar="POINTS",
        help="POINTS: CSV/Parquet (label then coordinates; label,lat,lon for haversine) "
        "or a .npy distance matrix.",
        show_default=False,
    ),
]
_Mechanism = Annotated[MechanismName, typer.Option("--mechanism", "-m", help="Mechanism family.")]
_Epsilon = _opt(float, "--epsilon", "-e", help="The mDP guarantee, per unit of distance.")
_Metric = _opt(Metric, help="Metric (default: haversine for label,lat,lon, else euclidean).")
_Calibrate = Annotated[
    bool,
    typer.Option(
        "--calibrate",
        help="Tune the inner parameter to the exact audit "
        "(exponential, weighted-exponential, optimal, spanner, constopt).",
    ),
]
_Weights = _opt(Path, help="weighted-exponential: CSV label,weight or a .npy vector.")
_Ldp = _opt(float, "--ldp-epsilon", help="krr: the LDP parameter, instead of --epsilon.")
_Objective = _opt(Objective, help="optimal: the loss to minimise (default worst).")
_Prior = _opt(Path, help="optimal: prior of --objective expected (CSV label,prob or .npy).")
_TimeLimit = _opt(float, "--time-limit", help="LP mechanisms: solver time limit in seconds.")
_Stretch = _opt(float, help="spanner: stretch of the spanner (default 3).")
_Neighbours = _opt(int, "--neighbours", "-r", min=1, help="constopt: neighbours r (default 10).")
_Fit = _opt(Fit, help="constopt: how H is fitted (default normalised).")
_Lambdas = _opt(str, help="constopt: comma-separated lambdas, e.g. 0.001,0.1,1.0.")
_Quantile = _opt(float, help="constopt: minimise this quantile loss instead of the worst case.")
_Samples = _opt(int, min=1, help="madlib, subsampled-exponential: Monte-Carlo samples per row.")
_Seed = _opt(int, min=0, help="madlib, subsampled-exponential: seed of the Monte-Carlo estimate.")
_Candidates = _opt(int, min=1, help="subsampled-exponential: candidates drawn per release.")
_Base = _opt(Path, "--base-weights", help="subsampled-exponential: base distribution (CSV or .npy).")


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
    ) -> None:
        """Build a mechanism on a metric space, audit it, and save it as a mechanism file."""
        options = {
            k: v for k, v in locals().items() if k not in ("points", "mechanism", "out", "epsilon", "metric")
        }
        check_output(out)
        with progress(f"reading {points}"):
            space = read_points(points, None if metric is None else metric.value)
        with progress(f"building {mechanism.value} on {space.n} points") as bar:
            mech = build_mechanism(space, mechanism.value, epsilon, options)
            bar.update(f"saving {out}")
            mech.save(out)
        rows = _summary(mech, out)
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            console.print(f"{key:<{width}}  {value}", markup=False, highlight=False)

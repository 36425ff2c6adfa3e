"""``metricdp build POINTS --mechanism NAME --epsilon EPS --out MECH.npz``.

``--metric mahalanobis`` takes a public covariance: ``--covariance FILE`` (a dim x dim CSV
or ``.npy``) or ``--covariance-from PUBLIC`` (the sample covariance of a public file of
points, never of the records to be released: :mod:`metricdp.covariance` says why); the
summary and the mechanism file state which. ``--graph EDGES --policy-graph`` accepts a
disconnected road network as a policy graph (:mod:`metricdp.mechanisms.policy`): the
summary says how many components, and that pairs across them are unprotected.

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

import numpy as np
import typer

from .._validation import check_epsilon
from ..errors import ValidationError
from ..io import read_output_distances, read_output_points, read_point_columns, read_points
from ..mechanisms import registry
from ..mechanisms.base import Mechanism
from ..mechanisms.dense_plan import DensePlan, check_dense_plan, plan_dense
from ..outputs import OutputSet
from ..spaces import POINT_METRICS, MetricSpace
from ..units import describe_epsilon, space_unit
from ._common import (
    JsonOption,
    OutOption,
    check_output,
    console,
    echo_json,
    err_console,
    fmt,
    handle_errors,
    progress,
    read_label_values,
)
from ._epsilon import EpsilonOption, LevelOption, RadiusOption, resolve_epsilon
from ._options import naming_flags, with_options

__all__ = ["MechanismName", "build_family", "build_mechanism", "register"]


def mechanism_names() -> type[StrEnum]:
    """The choices of ``--mechanism``: every family of the registry, read when the command is registered."""
    return StrEnum("MechanismName", {n.replace("-", "_"): n for n in registry.names()})  # type: ignore[return-value]


#: The families ``metricdp build`` can build (as the registry listed them at import).
MechanismName = mechanism_names()


#: The choices of ``--metric``: :data:`metricdp.spaces.POINT_METRICS`, the one list.
Metric = StrEnum("Metric", {m: m for m in POINT_METRICS})  # type: ignore[misc]


def family_options() -> dict[str, registry.Option]:
    """Every ``build`` option a family declares, by flag (:func:`metricdp.mechanisms.registry.options`)."""
    return registry.options(registry.FAMILIES.values())


def _flags() -> dict[str, str]:
    """Each family option's keyword (the Typer parameter name) -> its flag (``base_weights`` -> ``--base-weights``)."""
    return {o.keyword: flag for flag, o in family_options().items()}


def _parse_floats(text: str, flag: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValidationError(f"{flag} must be comma-separated numbers, got {text!r}") from None
    if not values:
        raise ValidationError(f"{flag} must list at least one number, got {text!r}")
    return values


def build_mechanism(
    space: MetricSpace, name: str, epsilon: float | None, options: dict[str, Any] | None = None,
    outputs: OutputSet | None = None, progress: Any = None,
) -> Mechanism:
    """Build mechanism ``name`` on ``space`` from ``build``'s options, through the registry.

    ``options`` holds the CLI options by Typer keyword (see :func:`_flags`); ``None`` and
    False values are "not given". Per-label file options (weights, prior, base weights)
    are paths, read here against the space's labels.
    """
    family = registry.get(name)
    _FLAGS = _flags()  # read from the registry at each call (a family registered later counts)
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
            what = "FILE" if param.kind == "vector" else "VALUE"
            raise ValidationError(f"--mechanism {name} needs {param.flag} {what}")
    if family.epsilon == "or-ldp":
        if (epsilon is None) == ("ldp_epsilon" not in given):
            raise ValidationError(f"--mechanism {name} takes exactly one of --epsilon and --ldp-epsilon")
        if "ldp_epsilon" in given:
            given["ldp_epsilon"] = check_epsilon(given["ldp_epsilon"], "--ldp-epsilon")
    elif epsilon is None and family.epsilon == "required":
        raise ValidationError(f"--mechanism {name} needs --epsilon")
    eps = None if epsilon is None else check_epsilon(epsilon, "--epsilon")
    params: dict[str, Any] = {}
    for key, value in given.items():
        flag = _FLAGS[key]
        param = by_flag[flag]
        if param.kind == "vector":
            value = read_label_values(Path(value), space.labels, flag)
        elif param.kind == "floats" and isinstance(value, str):
            value = _parse_floats(value, flag)
        elif isinstance(value, Enum):
            value = value.value
        elif param.kind == "bool":  # a flag given switches its parameter away from the default
            value = not param.default
        if param.kind not in ("vector", "rng"):  # per-label values: the builder names the failing label
            value = param.check(value, family.name, where=flag)
        params[param.name] = value
    if outputs is not None and not family.outputs:
        takes = ", ".join(n for n in registry.names() if registry.get(n).outputs)
        raise ValidationError(f"--outputs / --output-distances do not apply to --mechanism {name} (they apply to: "
                              f"{takes})")
    return build_family(space, family, eps, params, outputs=outputs, progress=progress)


def build_family(
    space: MetricSpace, family: registry.Family, epsilon: float | None, params: dict[str, Any],
    outputs: OutputSet | None = None, progress: Any = None,
) -> Mechanism:
    """``family`` built with validated ``params`` as ``metricdp build`` builds it: planar-laplace on
    lat/lon cells through :func:`metricdp.location.cells.planar_laplace_cells`, the rest by the registry."""
    if family.name == "planar-laplace" and space.metric == "haversine" and epsilon is not None:  # lat/lon cells
        from ..location.cells import planar_laplace_cells

        return planar_laplace_cells(space, epsilon, progress=progress, **params)
    return family.build(space, epsilon, outputs=outputs, progress=progress, **params)


def _count_points(points: Path) -> int | None:
    """The number of rows of a POINTS table, read by its format's reader, one column's chunks at a time (None
    for a file that is no table or cannot be read: reading it properly then says why)."""
    from ..tabular.formats import table_format

    try:
        fmt = table_format(points)
        with fmt.open(points, chunk_rows=1 << 16, chunk_bytes=1 << 24, max_record=None) as reader:
            reader.project(reader.names[:1])
            return sum(chunk.rows for chunk in reader.chunks())
    except Exception:  # the reader proper reports a bad file
        return None


def _dense_plan(name: str, space: MetricSpace, outputs: OutputSet | None, remap: bool) -> DensePlan | None:
    """The memory and time of a dense build, checked before it starts; stated on stderr when it is long."""
    if name not in ("planar-laplace", "exponential") or outputs is not None:
        return None
    plan = plan_dense(name, space.n, remap=remap)
    check_dense_plan(plan)  # the library checks its own part too; this one counts the remap in
    if plan.seconds >= 10:  # worth a line of its own; a quick build keeps stderr clean
        err_console.print(plan.summary(), markup=False, highlight=False)
    return plan


def policy_line(space: MetricSpace) -> str | None:
    """``N components, cross-component pairs unprotected`` for a policy graph (build, evaluate, report)."""
    if not space.policy:
        return None
    alone = int((np.bincount(space.components) == 1).sum())
    lone = f"; {alone} one-node component(s): those nodes are released UNCHANGED" if alone else ""
    return f"{space.n_components} components, cross-component pairs unprotected (their component is revealed){lone}"


def _summary(mechanism: Mechanism, out: Path) -> list[tuple[str, str]]:
    rows = [("mechanism", mechanism.name), ("n", fmt(mechanism.n)), ("epsilon", fmt(mechanism.epsilon, 12))]
    if mechanism.space.covariance is not None:
        rows.append(("metric", f"mahalanobis, covariance {mechanism.space.covariance_source}"))
    policy = policy_line(mechanism.space)
    if policy:
        rows.append(("policy graph", policy))
    unit = space_unit(mechanism.space, mechanism.metadata)
    if unit:  # both forms: per unit and (l, r)
        rows.append(("epsilon (l, r)", describe_epsilon(mechanism.epsilon, unit)))
    if not mechanism.square:
        rows.insert(2, ("outputs", fmt(mechanism.m)))
    if mechanism.exact:
        audited = mechanism.info.get("epsilon_audit")
        if audited is None:
            audited = mechanism.audit().epsilon
        rows.append(("epsilon (audited)", fmt(audited, 12)))
        rows.append(("audit", _AUDITS.get(str(mechanism.info.get("audit", "dense")), "dense")))
        rows.append(("worst-case loss", fmt(mechanism.worst_case_loss())))
    else:
        half = mechanism.info.get("estimate", {}).get("loss_half_width")
        pm = f" ± {fmt(max(half))}" if half else ""
        rows.append(("epsilon (audited)", "not audited: the matrix is an estimate; epsilon is proven"))
        rows.append(("worst-case loss", f"{fmt(mechanism.worst_case_loss())}{pm} (estimate)"))
    if "winner" in mechanism.info:  # the candidate an LP family returned (constopt)
        from ..mechanisms.constopt import describe_winner

        rows.append(("candidate", describe_winner(mechanism)))
    rows.append(("uniform baseline", fmt(float(mechanism.uniform_losses().max()))))
    rows.append(("file", str(out)))
    return rows


#: How each audit is named in the summary (mechanism info "audit" -> words).
_AUDITS = {
    "dense": "dense (every pair against every output)",
    "lattice-chain": "lattice-chain proof (docs/proofs/structured_audit.md), an exact upper bound",
    "post-processing": "post-processing proof (docs/proofs/structured_audit.md), an exact upper bound",
    "kernel": "kernel proof (docs/proofs/structured_audit.md), an exact upper bound",
}


_Points = Annotated[
    Path,
    typer.Argument(
        metavar="POINTS",
        help="POINTS: CSV/Parquet (label then coordinates; label,lat,lon for haversine) or a .npy distance matrix.",
        show_default=False,
    ),
]
_Mechanism = Annotated[str, typer.Option("--mechanism", "-m", help="Mechanism family.")]  # choices: register()
_Epsilon = EpsilonOption  # 0.5/km, 1/m, 2 / 100m or a plain number (cli/_epsilon.py)
_Metric = Annotated[Metric | None, typer.Option(help="Metric (default: haversine for label,lat,lon, else euclidean).")]
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
_Graph = Annotated[
    Path | None,
    typer.Option("--graph", metavar="EDGES", help="Road network: the shortest-path metric of this edge list (CSV/"
                 "Parquet source,target[,weight]) on the nodes of POINTS (metricdp.graphs)."),
]
_PolicyGraph = Annotated[
    bool,
    typer.Option("--policy-graph", help="With --graph: accept a disconnected graph as a policy graph (Cao et al. "
                 "2020): infinite distance between components, so only pairs connected in the graph are protected "
                 "and the component of a value is revealed (docs/proofs/policy_graphs.md)."),
]
_Covariance = Annotated[
    Path | None,
    typer.Option("--covariance", metavar="FILE", help="With --metric mahalanobis: the PUBLIC covariance, a dim x "
                 "dim CSV or .npy (symmetric positive definite)."),
]
_CovarianceFrom = Annotated[
    Path | None,
    typer.Option("--covariance-from", metavar="PUBLIC", help="With --metric mahalanobis: estimate the covariance "
                 "from this PUBLIC CSV/Parquet of points (the POINTS file's coordinate columns), never from the "
                 "records you will release (metricdp.covariance)."),
]
_Elastic = Annotated[
    Path | None,
    typer.Option("--elastic", help="Build on the elastic metric (Chatzikokolakis et al. 2015) of these privacy "
                 "weights (CSV label,weight or .npy)."),
]


def _mahalanobis_space(space: MetricSpace, points: Path, covariance: Path | None,
                       covariance_from: Path | None) -> MetricSpace:
    """POINTS' coordinates under the Mahalanobis metric of the given or publicly estimated covariance."""
    from ..covariance import covariance_from_public, read_covariance

    assert space.points is not None  # read_points of a CSV/Parquet (a .npy was refused with --metric)
    columns = read_point_columns(points) or []
    dim = space.points.shape[1]
    if covariance is not None:
        cov, source = read_covariance(covariance, dim, columns), f"given in {covariance}"
    else:
        assert covariance_from is not None
        cov, source = covariance_from_public(covariance_from, columns), f"estimated from {covariance_from}"
    try:
        return MetricSpace.from_points(space.points, space.labels, "mahalanobis", covariance=cov,
                                       covariance_source=source)
    except ValidationError as ex:
        raise ValidationError(f"{points}: {ex}") from None


def register(app: typer.Typer) -> None:
    """Add the ``build`` command to ``app``."""

    def build(
        points: _Points,
        mechanism: _Mechanism,
        out: OutOption,
        epsilon: _Epsilon = None,
        level: LevelOption = None,
        radius: RadiusOption = None,
        metric: _Metric = None,
        remap: _Remap = False,
        elastic: _Elastic = None,
        outputs: _Outputs = None,
        output_distances: _OutputDistances = None,
        graph: _Graph = None,
        policy_graph: _PolicyGraph = False,
        covariance: _Covariance = None,
        covariance_from: _CovarianceFrom = None,
        json_out: JsonOption = False,
        **given_options: Any,
    ) -> None:
        """Build a mechanism on a metric space, audit it, and save it as a mechanism file."""
        options = dict(given_options)
        name = str(getattr(mechanism, "value", mechanism))  # a member of the choices register() reads
        prior = options.get("prior")
        check_output(out, inputs=(points, options.get("weights"), prior, options.get("base_weights"), elastic,
                                  outputs, output_distances, graph, covariance, covariance_from))
        if graph is not None and metric is not None:
            raise ValidationError("--metric does not apply with --graph (the metric is the shortest path)")
        mahalanobis = metric is not None and metric.value == "mahalanobis"
        if (covariance is not None or covariance_from is not None) and not mahalanobis:
            raise ValidationError("--covariance / --covariance-from apply only with --metric mahalanobis")
        if mahalanobis and (covariance is None) == (covariance_from is None):
            raise ValidationError("--metric mahalanobis needs exactly one of --covariance FILE (a given public "
                                  "covariance) and --covariance-from PUBLIC (estimated from public points)")
        if policy_graph:
            if graph is None:
                raise ValidationError("--policy-graph applies only with --graph EDGES")
            clash = [f for f, v in (("--elastic", elastic), ("--remap", remap or None), ("--outputs", outputs),
                                    ("--output-distances", output_distances)) if v is not None]
            if clash:
                raise ValidationError(f"{', '.join(clash)} cannot be combined with --policy-graph (they need finite "
                                      "distances between every pair of points)")
        if outputs is not None and output_distances is not None:
            raise ValidationError("give one of --outputs and --output-distances, not both")
        if (outputs is not None or output_distances is not None) and not registry.get(name).outputs:
            takes = ", ".join(n for n in registry.names() if registry.get(n).outputs)
            raise ValidationError(f"--outputs / --output-distances do not apply to --mechanism {name} "
                                  f"(they apply to: {takes})")
        if remap and prior is None:
            raise ValidationError("--remap needs --prior FILE (the prior the remapping minimises the loss under)")
        family = registry.get(name)
        expected = getattr(options.get("objective"), "value", None) == "expected"
        if remap and not (expected and any(p.flag == "--prior" for p in family.params)):
            options["prior"] = None  # the prior is the remapping's, not the builder's
        if graph is None and elastic is None and outputs is None and output_distances is None:
            counted = _count_points(points)  # a plan before the space's n x n distances exist
            if counted is not None and name in ("planar-laplace", "exponential"):
                check_dense_plan(plan_dense(name, counted, remap=remap))
        with progress(f"reading {points}"):
            with naming_flags({"metric": "--metric"}):
                space = read_points(points, "euclidean" if mahalanobis else None if metric is None else metric.value)
            if mahalanobis:
                space = _mahalanobis_space(space, points, covariance, covariance_from)
            if graph is not None:
                from ..graphs import graph_space

                space = graph_space(space, graph, policy=policy_graph, hint="or pass --policy-graph to accept it as "
                                    "a policy graph (cross-component pairs then get no guarantee)")
            if elastic is not None:
                from ..elastic import elastic_metric

                space = elastic_metric(space, read_label_values(elastic, space.labels, "--elastic"))
            output_set = None
            if outputs is not None:
                with naming_flags({}, "--outputs"):
                    output_set = read_output_points(outputs, space, columns=read_point_columns(points))
            elif output_distances is not None:
                with naming_flags({}, "--output-distances"):
                    output_set = read_output_distances(output_distances, space)
        eps = resolve_epsilon(epsilon, level, radius, space_unit(space))  # in the space's unit
        if name == "optimal":  # what the LP will take, before it starts; a refusal when it cannot fit
            from ..mechanisms.lp_plan import check_plan, plan_optimal

            plan = plan_optimal(space.n, None if output_set is None else output_set.m,
                                objective=getattr(options.get("objective"), "value", "worst"))
            check_plan(plan, "try --mechanism planar-laplace (exact, O(n^2); --remap --prior for utility), "
                             "--mechanism spanner, or larger cells")
            if plan.seconds >= 60:  # worth a line of its own; a quick build keeps stderr clean
                err_console.print(plan.summary(), markup=False, highlight=False)
        dense = _dense_plan(name, space, output_set, remap)
        with progress(f"building {name} on {space.n} points") as bar:
            mech = build_mechanism(space, name, eps, options, output_set, progress=bar)
            if remap:
                from ..remap import bayesian_remap

                assert prior is not None
                pi = read_label_values(prior, space.labels, "--prior")
                bar.update("Bayesian remapping under the prior")
                mech = bayesian_remap(mech, pi / pi.sum())
            bar.update(f"saving {out}")
            files = [given_options.get(o.keyword) for o in options_now.values() if o.param.kind == "vector"]
            inputs = [p for p in (points, elastic, *files, outputs, output_distances, graph, covariance,
                                  covariance_from) if p is not None]
            mech.save(out, inputs=inputs)
        rows = _summary(mech, out)
        if json_out:
            echo_json({**{k.replace(" ", "_"): v for k, v in rows}, "audit_details": mech.info.get("audit_details"),
                       "plan": None if dense is None else dense.as_dict()})
            return
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            console.print(f"{key:<{width}}  {value}", markup=False, highlight=False)

    # the choices of --mechanism and the family options are generated from the registry when the
    # app is built, so a new family (one module and one entry) needs no edit here
    options_now = family_options()
    choices: Any = Annotated[mechanism_names(), typer.Option("--mechanism", "-m", help="Mechanism family.")]
    app.command("build")(with_options(handle_errors(build), build, options_now, {"mechanism": choices}))

"""The evaluation report of a mechanism: its privacy (audited epsilon, epsilon_tight) and
utility (losses against the uniform baseline and the lower bound), as one JSON-ready dict.

``metricdp evaluate`` prints it; :func:`evaluate_mechanism` is the library call behind it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import bounds
from ._progress import Progress, report
from ._validation import check_delta, check_quantile
from .loss import quantile_rank
from .mechanisms.base import Mechanism
from .units import epsilon_forms, space_unit

__all__ = ["ESTIMATE_NOTE", "POLICY_BOUND_NOTE", "RECTANGULAR_BOUND_NOTE", "evaluate_mechanism"]

#: What the report says instead of an audited epsilon for an estimated (Monte-Carlo) mechanism.
ESTIMATE_NOTE = "not audited: the matrix is a Monte-Carlo estimate; epsilon is the proven guarantee"

#: Why a policy graph (infinite distances between components) gets no lower bound.
POLICY_BOUND_NOTE = ("not computed on a policy graph: the packing bounds (Imola et al., Theorem 3) assume finite "
                     "distances between every pair")

#: What the report says instead of the lower bounds for a mechanism with a separate output set.
RECTANGULAR_BOUND_NOTE = (
    "not available: the lower bounds (Imola et al., Theorem 3) assume the outputs are the inputs, "
    "and this mechanism has a separate output set"
)


def evaluate_mechanism(
    mechanism: Mechanism, delta: float = 1e-3, quantile: float = 0.95, progress: Progress | None = None
) -> dict[str, Any]:
    """Privacy and utility of a mechanism, as the JSON object ``metricdp evaluate`` prints.

    Keys: ``mechanism, n, metric, exact, epsilon, epsilon_audit, epsilon_tight, delta,
    quantile, loss_max, loss_quantile, loss_expected`` (uniform prior),
    ``loss_uniform`` (the q-quantile loss of releasing a uniformly random element) and
    ``loss_uniform_max``; ``lower_bound`` and ``lower_bound_quantile`` (Imola et al.,
    Theorem 3, :mod:`metricdp.bounds`); ``params``; ``lp`` when an LP was solved.
    ``progress`` (see :mod:`metricdp._progress`) is told each step.

    With a separate output set (:mod:`metricdp.outputs`) ``outputs`` gives its size m, the
    losses use the cross distances, and the lower bounds, which assume Y = X, are replaced
    by ``lower_bound_note`` (:data:`RECTANGULAR_BOUND_NOTE`). On a policy graph
    (docs/proofs/policy_graphs.md) ``policy_graph`` gives the number of components, whose
    cross pairs are unprotected, and the lower bounds are replaced by
    :data:`POLICY_BOUND_NOTE`; a Mahalanobis space adds ``covariance``, where its public
    covariance came from.

    For an estimated mechanism (``exact`` false) the matrix is a Monte-Carlo estimate:
    ``epsilon_audit`` and ``epsilon_tight`` are ``None`` (auditing an estimate says
    nothing about the mechanism), ``epsilon`` is the proven guarantee, and the losses
    come with half-widths. With per-row half-widths h_u,
    ``|max_u L^_u - max_u L_u| <= max_u h_u`` and every order statistic moves by at
    most ``max_u h_u`` too, so ``loss_max_half_width = loss_quantile_half_width =
    max_u h_u``; the expected loss gets ``mean_u h_u``. These hold when every row's
    interval holds (per-row confidence, see ``estimate.confidence``).
    """
    delta = check_delta(delta)
    q = check_quantile(quantile)
    n = mechanism.n
    uniform = np.sort(mechanism.uniform_losses())
    out: dict[str, Any] = {
        "mechanism": mechanism.name,
        "n": n,
        "metric": mechanism.space.metric,
        "exact": mechanism.exact,
        "epsilon": mechanism.epsilon,
        "epsilon_audit": None,
        "epsilon_tight": None,
        "delta": delta,
        "quantile": q,
        "loss_max": mechanism.worst_case_loss(),
        "loss_quantile": mechanism.quantile_loss(q),
        "loss_expected": mechanism.expected_loss(),
        "loss_uniform": float(uniform[quantile_rank(n, q) - 1]),
        "loss_uniform_max": float(uniform[-1]),
        "unit": space_unit(mechanism.space, mechanism.metadata),
    }
    out["epsilon_forms"] = epsilon_forms(mechanism.epsilon, out["unit"])  # per unit and (l, r)
    if not mechanism.square:
        out["outputs"] = mechanism.m
    if mechanism.exact:
        report(progress, 0, 3, f"auditing {n} x {mechanism.m} matrix")
        out["epsilon_audit"] = mechanism.audit().epsilon
        report(progress, 1, 3, f"epsilon_tight at delta={delta:g}")
        out["epsilon_tight"] = mechanism.epsilon_tight(delta)
    else:
        estimate = dict(mechanism.info.get("estimate") or {})
        half = np.asarray(estimate.get("loss_half_width") or [], dtype=np.float64)
        out["audit"] = ESTIMATE_NOTE
        if half.shape == (n,):
            out["loss_max_half_width"] = float(half.max())
            out["loss_quantile_half_width"] = float(half.max())
            out["loss_expected_half_width"] = float(half.mean())
        out["estimate"] = {k: v for k, v in estimate.items() if not isinstance(v, list | tuple)}
    report(progress, 2, 3, "lower bounds")
    space, eps = mechanism.space, mechanism.epsilon
    if space.policy:  # an extended metric: the packing bounds assume finite distances
        out["policy_graph"] = {"components": space.n_components, "cross_component_pairs": "unprotected"}
        out["lower_bound_note"] = POLICY_BOUND_NOTE
    elif mechanism.square:
        out["lower_bound"] = float(bounds.lower_bound(space, eps).value)
        out["lower_bound_quantile"] = float(bounds.lower_bound_quantile(space, eps, q).value)
    else:
        out["lower_bound_note"] = RECTANGULAR_BOUND_NOTE
    if space.covariance is not None:
        out["covariance"] = space.covariance_source or "recorded in the file"
    out["params"] = dict(mechanism.params)
    if "lp" in mechanism.info:
        out["lp"] = dict(mechanism.info["lp"])
    return out

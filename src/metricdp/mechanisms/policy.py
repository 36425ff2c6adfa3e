r"""Mechanisms on a policy graph: one mechanism per component, assembled block-diagonally.

A policy graph (:meth:`metricdp.spaces.MetricSpace.from_graph` with ``policy=True``) is an
extended metric: :math:`d(u, v) = +\infty` between its components. eps-mDP w.r.t. such a d
constrains only the pairs at finite distance (docs/proofs/policy_graphs.md), i.e. the pairs
inside one component. Every exact family is therefore built on each component
:math:`C_1, \dots, C_k` (a finite metric space: :meth:`~metricdp.spaces.MetricSpace.subspace`)
and the results are placed on the diagonal of one n x n matrix:

.. math:: M[u, v] = M_i[u, v] \text{ if } u, v \in C_i, \qquad 0 \text{ otherwise.}

**Proof.** Rows are distributions (each is a row of some :math:`M_i` padded by zeros).
For u, v at finite distance, both lie in one :math:`C_i`, and for every output w,
:math:`M[u, w] = M_i[u, w] \le e^{\varepsilon d(u, v)} M_i[v, w] = e^{\varepsilon d(u,v)}
M[v, w]` when :math:`w \in C_i`, and both sides are 0 otherwise. Pairs at infinite distance
carry no constraint. So M is :math:`\max_i \varepsilon_i`-mDP w.r.t. d, and the gate
(:func:`~metricdp.mechanisms.base.certify`) audits exactly that (:mod:`metricdp.audit`
skips pairs at infinite distance). A component of one point has no pair to protect: its
point is released as itself -- its component, which the release always reveals, *is* the
value. Exactness: the assembly copies floats, so each block is the component mechanism's
own matrix, bit for bit.

Nothing is lost by this construction for the exponential mechanism (its row on the whole
space, :math:`e^{-\varepsilon d/2}`, is 0 across components and renormalises per
component: the same matrix), and for the optimal LP (its constraints and losses couple
only pairs at finite distance, so the LP separates into one LP per component; a loss of
:math:`\infty` is never taken by an optimum). A family whose construction needs more than
a finite metric (a lattice, coordinates) refuses the component as it would refuse any
space of that kind.

Estimated families (Madlib, the subsampled exponential mechanism) are refused: their
releases come from a true sampler over the whole space whose proofs assume finite
distances, not from a matrix that can be assembled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .._resources import check_allocation
from ..errors import ValidationError
from .base import Mechanism, certify

if TYPE_CHECKING:  # pragma: no cover
    from ..outputs import OutputSet
    from ..spaces import MetricSpace
    from .registry import Family

__all__ = ["build_on_components"]


def _part(value: Any, kind: str, idx: np.ndarray) -> Any:
    """A per-point parameter restricted to one component (vectors: entries; matrices: the block).

    A prior conditioned on the component is the prior restricted and renormalised (the
    component is revealed anyway); a zero prior mass on a component makes every mechanism
    there equally good under it, and the uniform prior picks a sensible one.
    """
    if value is None:
        return None
    if kind == "vector":  # a prior or relative weights: renormalised on the component (uniform if all 0 there)
        part = np.asarray(value, dtype=np.float64)[idx]
        total = float(part.sum())
        return part / total if total > 0 else np.full(len(idx), 1.0 / len(idx))
    if kind == "matrix":
        return np.asarray(value, dtype=np.float64)[np.ix_(idx, idx)]
    return value


def build_on_components(
    family: Family, space: MetricSpace, epsilon: float | None, params: dict[str, Any], *,
    outputs: OutputSet | None = None, progress: Any = None,
) -> Mechanism:
    """``family`` built on each component of the policy graph ``space``, block-diagonal (module docstring).

    ``params`` are the family's validated keyword arguments; per-point ones (weights,
    priors, a loss matrix) are restricted to each component. A ``time_limit`` applies to
    each component's build. The mechanism is audited
    over the whole space (pairs at infinite distance skipped) at the largest epsilon of its
    blocks; its info records the number of components.
    """
    if not family.exact:
        takes = "the exact families (exponential, optimal, ...)"
        raise ValidationError(
            f"{family.name} is an estimated family: its releases come from a sampler over the whole space whose "
            f"proof assumes finite distances, so it cannot be built on a policy graph of {space.n_components} "
            f"components; use one of {takes}, or build one component at a time"
        )
    if outputs is not None:
        raise ValidationError("a separate output set is not supported on a policy graph (the outputs are the "
                              "graph's nodes, released within the input's component)")
    kinds = {p.name: p.kind for p in family.params}
    n = space.n
    # the assembled matrix, the audit's and the sampler's n x n temporaries (as Family.build counts them)
    check_allocation(6 * 8.0 * n * n, f"{family.name} on a policy graph of {n:,} points (6 dense {n:,} x {n:,} arrays)")
    matrix = np.zeros((n, n))
    comp = space.components
    order = np.argsort(comp, kind="stable")
    groups = np.split(order, np.cumsum(np.bincount(comp))[:-1])
    blocks: list[Mechanism] = []
    for idx in groups:  # one build per component (each a finite metric space)
        if len(idx) == 1:
            matrix[idx[0], idx[0]] = 1.0  # no pair to protect: the component is the value
            continue
        sub = space.subspace(idx)
        given = {k: _part(v, kinds.get(k, ""), idx) for k, v in params.items()}
        block = family.build(sub, epsilon, progress=progress, **given)
        matrix[np.ix_(idx, idx)] = block.matrix
        blocks.append(block)
    if not blocks:
        raise ValidationError(f"the policy graph has {n} components of one node each: no pair is protected, so "
                              "there is no mechanism to build")
    claim = max(b.epsilon for b in blocks)
    largest = max(blocks, key=lambda b: b.n)
    info = {"policy_graph": {"components": space.n_components, "singletons": int(sum(len(g) == 1 for g in groups)),
                             "built": "one mechanism per component, block-diagonal"}}
    return certify(matrix, space, claim, family.name, dict(largest.params), info)

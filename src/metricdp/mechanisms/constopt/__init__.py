r"""ConstOPTMech (Imola et al., UAI 2022, Algorithm 1) and its exact fit, one concept per module.

A *replacement function* :math:`I` names, for every output :math:`v`, the inputs
:math:`u \in I(v)` whose probability :math:`M[u,v]` is a free LP variable. Every other
entry is fixed to the weighted exponential form

.. math:: M_{\text{full}}[u,v] = Y_v\, e^{-\varepsilon' d(u,v)}, \qquad \varepsilon' = \varepsilon / 2,

with one LP variable :math:`Y_v \ge 0` per column. The mechanism is :math:`H` = the rows of
:math:`M_{\text{full}}` normalised to sum 1, which is :math:`\varepsilon`-mDP whenever
:math:`M_{\text{full}}` satisfies the privacy rows at :math:`\varepsilon'`
(Theorem 2 of the paper; proof in ``docs/proofs/constopt.md``).

Two fits choose the LP variables:

* ``paper`` -- the reduced LP of the paper's Theorem 1 proof for each penalty
  :math:`\lambda` (rows (18), (20), (22), (25), (26)); keep the :math:`H` of lowest loss.
* ``normalised`` (default) -- the loss of :math:`H` itself, minimised exactly. The
  constraints (22), (25), (26) and :math:`M_{\text{full}} \ge 0` are homogeneous, so
  the family is a cone :math:`C`, and the worst-case loss of :math:`H` is
  :math:`\max_w a_w(x) / b_w(x)` with :math:`a_w = \sum_v M_{\text{full}}[w,v] d(w,v)`,
  :math:`b_w = \sum_v M_{\text{full}}[w,v]` linear in the LP variables :math:`x`: a
  generalised linear-fractional program, solved to a certified relative tolerance by
  Dinkelbach-type iterations (``fast``) or bisection (``full``) on feasibility LPs.

Whatever the fit, the exponential mechanism at :math:`\varepsilon` (``Y`` constant and
every free entry at its fixed value, a member of the family) and, for the normalised fit,
every paper-fit candidate are kept as candidates: the result is never worse than them.

Modules: :mod:`.replacement` (the replacement function), :mod:`.cone` (the cone and its
rows), :mod:`.reference` (the paper's formulation, the tests' oracle), :mod:`.fast`
(column generation and Dinkelbach iterations), :mod:`.stats` (LP statistics),
:mod:`.fit` (candidates, repair, retry) and :mod:`.builder` (:func:`constopt`).
"""

from __future__ import annotations

from .builder import DEFAULT_LAMBDAS, constopt, describe_winner
from .replacement import nearest_neighbour_replacement

__all__ = ["DEFAULT_LAMBDAS", "constopt", "describe_winner", "nearest_neighbour_replacement"]

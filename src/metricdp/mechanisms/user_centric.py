r"""Shokri's user-centric optimal strategy: the matrix that maximises the Bayes adversary's error.

Shokri, Theodorakopoulos, Troncoso, Hubaux, Le Boudec, "Protecting location privacy:
optimal strategy against localization attacks", CCS 2012 (Section 4, LP (12)-(15)), with
the geo-indistinguishability constraint of Shokri, "Privacy games: optimal user-centric
data obfuscation", PETS 2015 (Section 4.3). The user knows a prior :math:`\pi` over the
n points and accepts an expected quality loss of at most Q; the adversary knows the
mechanism and :math:`\pi` and answers every output w with its best guess
:math:`\hat x(w)`. The Stackelberg equilibrium is one LP in the mechanism K (n x n) and
one variable :math:`z_w` per output, the adversary's expected error on w:

.. math::

    \max_{K, z}\ \sum_w z_w \quad\text{s.t.}\quad
    z_w \le \sum_x \pi(x) K[x,w]\, d(x, \hat x) \ \ \forall w, \hat x, \qquad
    \sum_{x,w} \pi(x) K[x,w]\, d(x,w) \le Q,

    \sum_w K[x,w] = 1,\ K \ge 0, \qquad
    K[x,w] \le e^{\varepsilon d(x,x')} K[x',w]\ \ \forall x \ne x', w \ \ (\text{optional}).

At an optimum :math:`z_w = \min_{\hat x} \sum_x \pi(x) K[x,w] d(x,\hat x)` (z is
maximised and only bounded above by those rows), so the objective *is* the adversary
error :math:`\mathrm{AE}(K, \pi)` of :mod:`metricdp.adversary`: the LP maximises AE over
every mechanism meeting the quality bound (and eps-mDP). The proof and the dual are in
``docs/proofs/user_centric.md``.

Privacy. With ``epsilon`` the LP is solved at :math:`\varepsilon(1-\eta)` and repaired
to an exactly eps-mDP matrix (:func:`metricdp.lp.repair.repair`, with OPTMech's retry
policy for :math:`\eta`), then audited by :func:`~metricdp.mechanisms.base.certify`.
Without ``epsilon`` the matrix is the plain Shokri optimum and its guarantee is the level
the audit finds; an optimum with a zero beside a positive entry of the same column is
eps-mDP for no finite eps and is refused (give ``epsilon``).

Certificate. The duals of the HiGHS solve give, by weak duality
(:func:`metricdp.lp.certificate.ranged_bound`), an upper bound on the adversary error of
*every* matrix meeting the constraints at exactly eps and Q; it is reported beside the
achieved AE (``info["certificate"]``), so the gap says how far the returned matrix can
be from the optimum whatever the solver's accuracy.

Size: n^2 adversary rows of n + 1 entries each (n^3 non-zeros), and n^2 (n - 1) privacy
rows with ``epsilon``. The builder never writes them all: it solves the LP by row
generation (:mod:`metricdp.mechanisms.user_centric_rows`), holding the rows that its
optima violate, and the certificate is that of the full LP with a zero dual on every
row it did not hold. :func:`user_centric_lp` writes the dense LP (the tests' reference).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from .._progress import Progress
from .._validation import check_number, check_probability_vector
from ..audit import audit_epsilon
from ..errors import SolverNumericalError, ValidationError
from ..lp._solve import LOG_CAP
from ..lp.deadline import Deadline
from ..lp.repair import repair
from ..lp.retry import OPTMECH, choose_eta
from ..spaces import MetricSpace, check_space
from .base import Mechanism, certify
from .registry import declared
from .user_centric_rows import EXP_CAP, RowSolution, certificate, solve_rows

__all__ = ["UserCentricLP", "lp_objective", "user_centric", "user_centric_lp"]

@dataclass(frozen=True)
class UserCentricLP:
    """The LP of the module docstring in :func:`metricdp.lp.solve_lp`'s form (minimise ``-sum z``).

    Variables: ``K`` row-major (``n * n``), then ``z`` (``n``). ``a`` holds, in order, the
    n row sums (= 1), the quality row (<= Q), the n^2 adversary rows (<= 0) and the
    privacy rows (<= 0; none without eps). Column bounds ``0 <= K <= 1`` and
    ``0 <= z <= max d`` contain every optimum (``z_w <= max d sum_x pi(x) K[x,w] <= max d``),
    so the certificate may use them.
    """

    c: NDArray[np.float64]
    a: sp.csr_matrix
    row_lo: NDArray[np.float64]
    row_hi: NDArray[np.float64]
    col_lo: NDArray[np.float64]
    col_hi: NDArray[np.float64]


def _privacy_rows(d: NDArray[np.float64], level: float, cap: float) -> tuple[sp.csr_matrix, int]:
    """Rows ``K[x,w] - e^{level d(x,x')} K[x',w] <= 0`` for x != x', every w; exponents above ``cap``
    are written at ``cap`` (stricter). Returns the rows and how many were capped."""
    n = d.shape[0]
    xs, xps = np.nonzero(~np.eye(n, dtype=bool))
    pairs = len(xs)
    w = np.tile(np.arange(n), pairs)
    x = np.repeat(xs, n)
    xp = np.repeat(xps, n)
    expo = level * d[x, xp]
    factor = np.exp(np.minimum(expo, cap))
    rows = np.arange(pairs * n)
    a = sp.csr_matrix(
        (np.r_[np.ones(pairs * n), -factor], (np.r_[rows, rows], np.r_[x * n + w, xp * n + w])),
        shape=(pairs * n, n * n + n),
    )
    return a, int((expo > cap).sum())


def user_centric_lp(
    distances: ArrayLike, prior: ArrayLike, quality: float, epsilon: float | None = None, *, cap: float = EXP_CAP,
) -> UserCentricLP:
    """The LP of the module docstring at ``epsilon`` (None: no privacy rows), exponents capped at ``cap``."""
    d = np.asarray(distances, dtype=np.float64)
    n = d.shape[0]
    pi = np.asarray(prior, dtype=np.float64)
    nk = n * n
    c = np.r_[np.zeros(nk), -np.ones(n)]
    sums = sp.csr_matrix((np.ones(nk), (np.repeat(np.arange(n), n), np.arange(nk))), shape=(n, nk + n))
    qual = sp.csr_matrix((pi[:, None] * d).reshape(1, nk))
    qual = sp.hstack([qual, sp.csr_matrix((1, n))], format="csr")
    # adversary row (w, xh): z_w - sum_x pi(x) d(x, xh) K[x, w] <= 0
    w, xh, x = np.meshgrid(np.arange(n), np.arange(n), np.arange(n), indexing="ij")
    row = (w * n + xh).ravel()
    adv = sp.csr_matrix(
        (np.r_[-(pi[x] * d[x, xh]).ravel(), np.ones(nk)],
         (np.r_[row, np.arange(nk)], np.r_[(x * n + w).ravel(), nk + np.repeat(np.arange(n), n)])),
        shape=(nk, nk + n),
    )
    blocks = [sums, qual, adv]
    if epsilon is not None:
        blocks.append(_privacy_rows(d, epsilon, cap)[0])
    a = sp.vstack(blocks, format="csr")
    k = a.shape[0]
    row_lo = np.r_[np.ones(n), np.full(k - n, -np.inf)]
    row_hi = np.r_[np.ones(n), [quality], np.zeros(k - n - 1)]
    col_hi = np.r_[np.ones(nk), np.full(n, float(d.max()))]
    return UserCentricLP(c, a, row_lo, row_hi, np.zeros(nk + n), col_hi)


def lp_objective(matrix: NDArray[np.float64], distances: NDArray[np.float64], prior: NDArray[np.float64]) -> float:
    r"""The LP's objective at ``matrix`` with every :math:`z_w` at its optimum,
    :math:`\sum_w \min_{\hat x} \sum_x \pi(x) K[x,w] d(x,\hat x)`: the Bayes adversary's error AE,
    which :func:`metricdp.adversary.adversary_error` computes above this layer (the tests hold the two equal)."""
    return float(((prior[:, None] * matrix).T @ distances).min(axis=1).sum())


@declared("user-centric")
def user_centric(
    space: MetricSpace, epsilon: float | None = None, *, quality: float, prior: ArrayLike | None = None,
    time_limit: float | None = None, progress: Progress | None = None,
) -> Mechanism:
    r"""Shokri's optimal obfuscation: the largest Bayes adversary error at expected quality loss <= Q.

    Parameters
    ----------
    space : MetricSpace
        The n points; its distance is both the adversary's error and the quality loss.
    epsilon : float, optional
        Add eps-mDP rows on the same matrix (Shokri 2015); None: no privacy constraint,
        and the mechanism's guarantee is its audited level.
    quality : float
        Q: the largest expected distance between true and reported point under the
        prior, in the space's distance units.
    prior : array of shape (n,), optional
        The user's (and adversary's) prior; uniform when omitted.
    time_limit : float, optional
        Seconds for the whole build (every round of the row generation and every retry;
        :class:`~metricdp.lp.deadline.Deadline`).
    progress : callable, optional
        Told each round of the row generation (rows held, objective, time left;
        :mod:`metricdp._progress`).

    Returns
    -------
    Mechanism
        ``info["adversary_error"]`` is the AE it achieves, ``info["certificate"]`` the
        weak-duality upper bound on the AE of any matrix meeting the constraints and the
        certified relative gap; ``info["quality_loss"]`` its expected quality loss.

    Raises
    ------
    InfeasibleError
        No eps-mDP matrix meets the quality bound (without eps the identity always does).
    ValidationError
        A bad prior; without eps, an optimum that is eps-mDP for no finite eps.

    Examples
    --------
    Two points 1 apart, uniform prior, Q = 0.25: the adversary's error is at most
    min(Q, 1/2); here every unit of quality loss spent on swapping is error, so AE = 0.25.

    >>> from metricdp.spaces import MetricSpace
    >>> s = MetricSpace.from_distances([[0.0, 1.0], [1.0, 0.0]])
    >>> m = user_centric(s, 2.0, quality=0.25)
    >>> round(m.info["adversary_error"], 6), m.audit().epsilon <= 2.0
    (0.25, True)
    """
    space = check_space(space)
    n = space.n
    d = np.asarray(space.distances, dtype=np.float64)
    pi = np.full(n, 1.0 / n) if prior is None else check_probability_vector(prior, n, name="prior")
    quality = check_number(quality, "quality", minimum=0.0)
    deadline = Deadline(time_limit)
    start = time.perf_counter()

    def attempt(eta: float) -> tuple[NDArray[np.float64], RowSolution, float]:
        level = None if epsilon is None else epsilon * (1.0 - eta)
        solved = solve_rows(d, pi, quality, level, deadline=deadline, progress=progress)
        raw = np.maximum(solved.matrix, 0.0)
        raw /= raw.sum(axis=1, keepdims=True)
        return (raw if epsilon is None else repair(raw, d, epsilon, eta=eta)), solved, eta

    if epsilon is None:
        matrix, solved, eta = attempt(0.0)
    else:
        matrix, solved, eta = OPTMECH.run(attempt, choose_eta(epsilon, space.d_min, OPTMECH, space.diameter),
                                          what="user-centric")
    level_found = float(audit_epsilon(matrix, d))
    if epsilon is None and not np.isfinite(level_found):
        raise ValidationError(
            "user-centric without epsilon: the optimum has a zero beside a positive entry of the same output, so it "
            "is eps-mDP for no finite eps; give epsilon to add the privacy constraint"
        )
    guarantee = epsilon if epsilon is not None else level_found
    ae = lp_objective(matrix, d, pi)
    if solved.result.row_dual is None:  # pragma: no cover - an optimal HiGHS result always has duals
        raise SolverNumericalError("user-centric: the solver returned no duals", status="numerical/other",
                                   result=solved.result)
    bound = certificate(d, pi, quality, epsilon, solved)
    info: dict[str, Any] = {
        "adversary_error": ae,
        "quality_loss": float(np.einsum("x,xw,xw->", pi, matrix, d)),
        "certificate": {"adversary_error_bound": bound,
                        "gap": max((bound - ae) / bound, 0.0) if bound > 0 else 0.0},  # < 0: rounding only
        "lp": {"variables": n * n + n, "constraints": n + 1 + len(solved.rows.order),
               "adversary_rows": len(solved.rows.adversary), "privacy_rows": len(solved.rows.privacy),
               "full_constraints": n + 1 + n * n + (n * n * (n - 1) if epsilon is not None else 0),
               "rounds": solved.rounds, "eta": eta, "seconds": time.perf_counter() - start,
               "capped_rows": 0 if epsilon is None else int(n * (epsilon * d > LOG_CAP).sum())},
        "prior": pi.tolist(),
    }
    params = {"quality": float(quality), "audited_only": epsilon is None}
    return certify(matrix, space, guarantee, "user-centric", params, info)

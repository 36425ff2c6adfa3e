r"""Statistics from privatized reports: estimators, Earth mover's utility, calibration.

The workflow of local mDP (Alvim et al., CSF 2018, Sections II and VI): every user
privatizes her own value x with the mechanism M and sends the report y; the collector
counts the reports, :math:`c(y)`, and estimates the distribution :math:`\pi` of the true
values from the counts and M.

* :func:`ibu` -- the Iterative Bayesian Update (the EM method of Agrawal and Aggarwal,
  PODS 2001, as used by Alvim et al.), which converges to the maximum-likelihood
  estimate in the simplex;
* :func:`matrix_inversion` -- the inversion estimator :math:`\hat\pi = q M^{-1}`,
  projected onto the simplex (:func:`project_simplex`);
* :func:`emd` -- the Earth mover's (Kantorovich, Wasserstein-1) distance between two
  distributions under the ground metric d, solved by POT's network simplex
  (``ot.emd2``); :func:`expected_emd` averages it over repeated privatizations;
* :func:`calibrate_expected_distance` -- the parameter of a mechanism family at which
  the expected distance between true and reported values,
  :math:`E_d = \sum_{x,y} \pi(x) M[x,y] d(x,y)`, meets a target (Alvim et al.'s
  "equal protection" comparison of k-RR with mDP mechanisms).

Estimation never touches privacy: it is post-processing of the reports, so nothing here
needs the matrix to be exact (an estimated, Monte-Carlo matrix works too).

References
----------
.. [1] M. S. Alvim, K. Chatzikokolakis, C. Palamidessi, A. Pazii. "Local differential
   privacy on metric spaces: optimizing the trade-off with utility". CSF 2018.
.. [2] D. Agrawal, C. C. Aggarwal. "On the design and quantification of privacy
   preserving data mining algorithms". PODS 2001.
.. [3] J. Duchi, S. Shalev-Shwartz, Y. Singer, T. Chandra. "Efficient projections onto
   the l1-ball for learning in high dimensions". ICML 2008.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._random import check_rng
from ._validation import check_int, check_probability_vector, check_space, check_stochastic
from .errors import MetricDPError, SolverError, ValidationError
from .loss import element_losses
from .mechanisms.base import Mechanism
from .spaces import MetricSpace

__all__ = [
    "FAMILIES",
    "Calibrated",
    "ExpectedEMD",
    "IBUResult",
    "calibrate_expected_distance",
    "counts_from_indices",
    "emd",
    "expected_distance",
    "expected_emd",
    "ibu",
    "matrix_inversion",
    "project_simplex",
]

#: Default stopping rule of :func:`ibu`: the L1 change between two iterates.
IBU_TOL = 1e-9
#: Default iteration cap of :func:`ibu`.
IBU_MAX_ITER = 10_000
#: Network-simplex iteration cap passed to ``ot.emd2`` (its default, 1e5, is too small
#: for a 900-cell grid; hitting the cap is an error, never a silent approximation).
EMD_MAX_ITER = 10_000_000
_MASS_ATOL = 1e-9


# --------------------------------------------------------------------------- inputs
def _channel(matrix: Mechanism | ArrayLike, name: str = "matrix") -> NDArray[np.float64]:
    """The (n_in, n_out) channel matrix of a Mechanism or an array; rows must sum to 1."""
    return check_stochastic(matrix.matrix if isinstance(matrix, Mechanism) else matrix, name, _MASS_ATOL, square=False)


def _counts(counts: ArrayLike, n_out: int, name: str = "counts") -> NDArray[np.float64]:
    """Non-negative finite counts of shape (n_out,) or (batch, n_out), each row > 0."""
    c = np.asarray(counts)
    if c.dtype == object or not (np.issubdtype(c.dtype, np.number) or c.dtype == bool):
        raise ValidationError(f"{name} must be numeric, got dtype {c.dtype}")
    c = c.astype(np.float64)
    if c.ndim not in (1, 2) or c.shape[-1] != n_out:
        raise ValidationError(f"{name} must have shape ({n_out},) or (batch, {n_out}), got {c.shape}")
    bad = np.argwhere(~np.isfinite(c) | (c < 0))
    if bad.size:
        where = tuple(int(x) for x in bad[0])
        raise ValidationError(f"{name} must be finite and non-negative; entry {where} is {float(c[where])!r}")
    totals = c.sum(axis=-1)
    if np.any(totals <= 0):
        row = int(np.flatnonzero(np.atleast_1d(totals) <= 0)[0])
        raise ValidationError(f"{name} has no reports" + (f" in row {row}" if c.ndim == 2 else ""))
    return c


def counts_from_indices(reports: ArrayLike, n: int) -> NDArray[np.float64]:
    """Histogram of report indices 0..n-1 (``np.bincount``), as float64 of shape (n,)."""
    r = np.asarray(reports)
    if r.ndim != 1 or not np.issubdtype(r.dtype, np.integer):
        raise ValidationError(f"reports must be a 1-d integer array of indices, got {r.dtype} {r.shape}")
    if r.size and (r.min() < 0 or r.max() >= n):
        bad = int(r[(r < 0) | (r >= n)][0])
        raise ValidationError(f"report index {bad} is outside 0..{n - 1}")
    return np.bincount(r, minlength=n).astype(np.float64)


# --------------------------------------------------------------------------- IBU
@dataclass(frozen=True)
class IBUResult:
    """Outcome of :func:`ibu`.

    Attributes
    ----------
    estimate : ndarray of shape (n_in,) or (batch, n_in)
        The estimated distribution(s) of the true values (each row sums to 1).
    iterations : int or ndarray of int
        Updates performed (per row for a batch).
    converged : bool or ndarray of bool
        Whether the L1 change fell below ``tol`` before ``max_iter`` updates.
    """

    estimate: NDArray[np.float64]
    iterations: int | NDArray[np.intp]
    converged: bool | NDArray[np.bool_]


def ibu(
    counts: ArrayLike,
    matrix: Mechanism | ArrayLike,
    *,
    tol: float = IBU_TOL,
    max_iter: int = IBU_MAX_ITER,
) -> IBUResult:
    r"""Iterative Bayesian Update: the maximum-likelihood distribution behind the reports.

    From the uniform distribution, iterate ([1]_ Section VI, [2]_)

    .. math::

        \pi_{t+1}(x) = \sum_y \frac{c(y)}{N}\,
            \frac{\pi_t(x) M[x,y]}{\sum_z \pi_t(z) M[z,y]},
        \qquad N = \sum_y c(y),

    until :math:`\lVert \pi_{t+1} - \pi_t \rVert_1 \le` ``tol`` or ``max_iter`` updates.
    It is the EM algorithm for the log-likelihood :math:`\sum_y c(y) \log (\pi M)_y`,
    which is concave on the simplex, so the iterates converge to a maximum-likelihood
    estimate; with the exact expected counts :math:`c = N \pi^* M` and M of full row
    rank, that is :math:`\pi^*` itself. Every update keeps :math:`\pi_t` in the simplex.

    Vectorised: one update is two matrix products, ``pi * ((q / (pi @ M)) @ M.T)``; a
    batch of count vectors is updated together, each row stopping on its own.

    Parameters
    ----------
    counts : array of shape (n_out,) or (batch, n_out)
        Number of reports of each output (any non-negative weights; only their
        proportions matter).
    matrix : Mechanism or array of shape (n_in, n_out)
        The mechanism, ``matrix[x, y] = Pr[report y | true value x]``.
    tol : float
        Stopping threshold on the L1 change between iterates.
    max_iter : int
        Cap on the number of updates; ``converged`` is False when it is reached.

    Returns
    -------
    IBUResult

    Raises
    ------
    ValidationError
        Bad shapes or values, or a report that the mechanism cannot produce (an
        observed output whose column of M is zero).

    Examples
    --------
    >>> import numpy as np
    >>> m = np.array([[0.75, 0.25], [0.25, 0.75]])
    >>> truth = np.array([0.2, 0.8])
    >>> res = ibu(1000 * truth @ m, m, tol=1e-13)
    >>> bool(np.allclose(res.estimate, truth, atol=1e-9)), bool(res.converged)
    (True, True)
    """
    m = _channel(matrix)
    c = _counts(counts, m.shape[1])
    tol = float(tol)
    if not (math.isfinite(tol) and tol > 0):
        raise ValidationError(f"tol must be finite and > 0, got {tol!r}")
    max_iter = check_int(max_iter, "max_iter", minimum=1)
    single = c.ndim == 1
    q = np.atleast_2d(c)
    q = q / q.sum(axis=1, keepdims=True)
    impossible = np.argwhere((q > 0) & (m.sum(axis=0) == 0)[None, :])
    if impossible.size:
        raise ValidationError(
            f"output {int(impossible[0][1])} was reported but the mechanism never releases it (zero column)"
        )
    batch, n_in = q.shape[0], m.shape[0]
    pi = np.full((batch, n_in), 1.0 / n_in)
    iterations = np.zeros(batch, dtype=np.intp)
    converged = np.zeros(batch, dtype=bool)
    rows = np.arange(batch)  # rows still iterating; p, qa hold their iterates and data
    p, qa = pi.copy(), q
    for _ in range(max_iter):
        den = p @ m  # (a, n_out): probability of each report under pi_t
        # Unobserved outputs contribute nothing (0/0 is 0); den == 0 at an observed
        # output only after underflow of every x that can produce it.
        ratio = np.divide(qa, den, out=np.zeros_like(den), where=(qa > 0) & (den > 0))
        new = p * (ratio @ m.T)
        new /= new.sum(axis=1, keepdims=True)  # exact simplex despite rounding
        done = np.abs(new - p).sum(axis=1) <= tol
        iterations[rows] += 1
        p = new
        if done.any():
            pi[rows[done]] = p[done]
            converged[rows[done]] = True
            rows, p, qa = rows[~done], p[~done], qa[~done]
            if rows.size == 0:
                break
    pi[rows] = p
    if single:
        return IBUResult(pi[0], int(iterations[0]), bool(converged[0]))
    return IBUResult(pi, iterations, converged)


# --------------------------------------------------------------------------- inversion
def project_simplex(v: ArrayLike) -> NDArray[np.float64]:
    r"""Euclidean projection of each row onto the probability simplex.

    .. math::

        \operatorname{proj}(v) = \arg\min_{w \ge 0,\ \sum_i w_i = 1} \lVert w - v \rVert_2
        = \max(v - \theta, 0),

    with the threshold :math:`\theta` found by sorting ([3]_ Figure 1): with u the
    values sorted decreasingly and :math:`\rho` the largest j such that
    :math:`u_j - (\sum_{i \le j} u_i - 1)/j > 0`, :math:`\theta = (\sum_{i \le \rho} u_i - 1)/\rho`.

    Parameters
    ----------
    v : array of shape (n,) or (batch, n)

    Examples
    --------
    >>> project_simplex([0.5, 0.8, -0.1]).round(12).tolist()
    [0.35, 0.65, 0.0]
    """
    x = np.asarray(v, dtype=np.float64)
    if x.ndim not in (1, 2) or x.shape[-1] == 0:
        raise ValidationError(f"v must have shape (n,) or (batch, n), got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValidationError("v must be finite")
    rows = np.atleast_2d(x)
    n = rows.shape[1]
    u = -np.sort(-rows, axis=1)
    css = np.cumsum(u, axis=1) - 1.0
    j = np.arange(1, n + 1)
    # The condition holds for a prefix of j (Duchi et al., Lemma 2); j = 1 always holds.
    rho = np.count_nonzero(u - css / j > 0, axis=1)
    theta = css[np.arange(len(rows)), rho - 1] / rho
    w = np.maximum(rows - theta[:, None], 0.0)
    w /= w.sum(axis=1, keepdims=True)
    return w[0] if x.ndim == 1 else w


def matrix_inversion(counts: ArrayLike, matrix: Mechanism | ArrayLike) -> NDArray[np.float64]:
    r"""The matrix-inversion estimator, projected onto the simplex.

    Solves :math:`\hat\pi M = q` for the observed frequencies :math:`q = c / N` (an
    unbiased estimate of :math:`\pi`, often with negative entries), then returns the
    closest distribution in the Euclidean norm (:func:`project_simplex`).

    Parameters
    ----------
    counts : array of shape (n,) or (batch, n)
    matrix : Mechanism or array of shape (n, n)
        Must be invertible; use :func:`ibu` otherwise.

    Raises
    ------
    ValidationError
        When the matrix is not square or is singular (to working precision).

    Examples
    --------
    >>> import numpy as np
    >>> m = np.array([[0.75, 0.25], [0.25, 0.75]])
    >>> matrix_inversion([300.0, 700.0], m).round(12).tolist()
    [0.1, 0.9]
    """
    m = _channel(matrix)
    if m.shape[0] != m.shape[1]:
        raise ValidationError(f"matrix inversion needs a square matrix, got shape {m.shape}")
    c = _counts(counts, m.shape[1])
    q = c / c.sum(axis=-1, keepdims=True)
    if np.linalg.cond(m) > 1e12:
        raise ValidationError("the mechanism matrix is singular to working precision; use the IBU estimator")
    raw = np.linalg.solve(m.T, q.T).T  # pi M = q  <=>  M^T pi^T = q^T
    return project_simplex(raw)


# --------------------------------------------------------------------------- EMD
def emd(p: ArrayLike, q: ArrayLike, distances: MetricSpace | ArrayLike) -> float:
    r"""Earth mover's distance between two distributions under a ground metric.

    .. math::

        \mathrm{EMD}(p, q) = \min_{\gamma \ge 0,\ \gamma 1 = p,\ \gamma^T 1 = q}
            \sum_{i,j} \gamma_{ij}\, d(i, j),

    the Kantorovich lifting of d used as the utility loss by [1]_ (Section VI),
    computed exactly by POT's network simplex, ``ot.emd2``.

    Parameters
    ----------
    p : array of shape (n,)
    q : array of shape (m,)
        Non-negative, each summing to 1 (within 1e-9; then rescaled exactly).
    distances : MetricSpace or array of shape (n, m)
        Ground costs; finite and non-negative.

    Raises
    ------
    ValidationError
        Naming the argument with the wrong shape or values.
    SolverError
        When the network simplex stops short of optimality.

    Examples
    --------
    >>> import numpy as np
    >>> d = np.abs(np.subtract.outer([0.0, 1.0, 3.0], [0.0, 1.0, 3.0]))
    >>> emd([0.5, 0.5, 0.0], [0.0, 0.5, 0.5], d)
    1.5
    """
    cost = np.asarray(distances.distances if isinstance(distances, MetricSpace) else distances)
    if cost.dtype == object or not np.issubdtype(cost.dtype, np.number) or cost.ndim != 2:
        raise ValidationError(f"distances must be a numeric 2-d matrix, got {cost.dtype} {cost.shape}")
    cost = np.ascontiguousarray(cost, dtype=np.float64)
    if not np.all(np.isfinite(cost)) or (cost < 0).any():
        i, j = np.argwhere(~np.isfinite(cost) | (cost < 0))[0]
        raise ValidationError(f"distances must be finite and >= 0; entry ({i}, {j}) is {float(cost[i, j])!r}")
    a = check_probability_vector(p, cost.shape[0], name="p", atol=_MASS_ATOL)
    b = check_probability_vector(q, cost.shape[1], name="q", atol=_MASS_ATOL)
    a, b = a / a.sum(), b / b.sum()
    import ot

    with warnings.catch_warnings():
        # POT only warns when the network simplex fails; the result code is checked here.
        warnings.simplefilter("ignore", UserWarning)
        value, log = ot.emd2(a, b, cost, numItermax=EMD_MAX_ITER, log=True)
    if int(log["result_code"]) != 1:
        code = str(log["result_code"])
        raise SolverError(f"ot.emd2 did not reach optimality: {log['warning']}", status=code)
    return float(value)


@dataclass(frozen=True)
class ExpectedEMD:
    """Outcome of :func:`expected_emd`: the mean, its standard error and every value."""

    mean: float
    stderr: float
    values: NDArray[np.float64]


def _estimate(
    counts: NDArray[np.float64], matrix: NDArray[np.float64], method: str, tol: float, max_iter: int
) -> NDArray[np.float64]:
    if method == "ibu":
        return ibu(counts, matrix, tol=tol, max_iter=max_iter).estimate
    if method == "inversion":
        return matrix_inversion(counts, matrix)
    raise ValidationError(f"method must be 'ibu' or 'inversion', got {method!r}")


def expected_emd(
    mechanism: Mechanism,
    data: ArrayLike,
    *,
    repetitions: int = 10,
    rng: object = None,
    method: str = "ibu",
    tol: float = IBU_TOL,
    max_iter: int = IBU_MAX_ITER,
) -> ExpectedEMD:
    r"""EMD between the true distribution of ``data`` and its estimate, over privatizations.

    Each repetition privatizes every value of ``data`` once with ``mechanism``, counts
    the reports, estimates the distribution (``method``: ``"ibu"`` or
    ``"inversion"``) and measures :func:`emd` to the empirical distribution of
    ``data``; the repetitions are estimated together as one :func:`ibu` batch.

    Parameters
    ----------
    mechanism : Mechanism
    data : array of int
        True values, as indices into ``mechanism.space``.
    repetitions : int
    rng : None, int or numpy Generator
        Source of the privatization noise; pass a seed for a reproducible experiment.
    """
    if not isinstance(mechanism, Mechanism):
        raise ValidationError(f"mechanism must be a Mechanism, got {type(mechanism).__name__}")
    x = np.asarray(data)
    if x.ndim != 1 or x.size == 0 or not np.issubdtype(x.dtype, np.integer):
        raise ValidationError(f"data must be a non-empty 1-d array of indices, got {x.dtype} {x.shape}")
    repetitions = check_int(repetitions, "repetitions", minimum=1)
    source = check_rng(rng)
    n = mechanism.n
    truth = counts_from_indices(x, n)
    truth /= truth.sum()
    reports = np.asarray(mechanism.sample(np.tile(x, repetitions), source))
    row = np.repeat(np.arange(repetitions), x.size)
    counts = np.bincount(row * n + reports, minlength=repetitions * n).reshape(repetitions, n).astype(np.float64)
    estimates = np.atleast_2d(_estimate(counts, mechanism.matrix, method, tol, max_iter))
    values = np.array([emd(e, truth, mechanism.distances) for e in estimates])
    stderr = float(values.std(ddof=1) / math.sqrt(repetitions)) if repetitions > 1 else float("nan")
    return ExpectedEMD(float(values.mean()), stderr, values)


# --------------------------------------------------------------------------- calibration
def expected_distance(
    mechanism: Mechanism | ArrayLike, distances: ArrayLike, prior: ArrayLike | None = None
) -> float:
    r""":math:`E_d = \sum_{x,y} \pi(x) M[x,y] d(x,y)` (uniform :math:`\pi` when ``prior`` is None)."""
    m = np.asarray(mechanism.matrix if isinstance(mechanism, Mechanism) else mechanism, dtype=np.float64)
    losses = element_losses(m, distances)
    if prior is None:
        return float(losses.mean())
    return float(check_probability_vector(prior, len(losses)) @ losses)


def _family(name: str, space: MetricSpace) -> Callable[[float], Mechanism]:
    """The builder ``eps -> Mechanism`` of a named family (imported lazily)."""
    import importlib

    module, func, keyword = FAMILIES[name]
    try:
        builder = getattr(importlib.import_module(module), func)
    except ModuleNotFoundError as ex:
        if ex.name is None or not module.startswith(ex.name):
            raise  # a dependency of an existing module is missing: a real error
        raise ValidationError(f"mechanism family {name!r} is not available ({module} is missing)") from None
    except AttributeError:
        raise ValidationError(f"mechanism family {name!r} is not available ({module}.{func})") from None
    if keyword is None:
        return lambda eps: builder(space, eps)
    return lambda eps: builder(space, **{keyword: eps})


#: Family names accepted by :func:`calibrate_expected_distance` and ``metricdp
#: calibrate``: module, builder and the keyword that takes the calibrated parameter
#: (None: the second positional argument, the mDP epsilon). k-RR is calibrated in its
#: LDP parameter, as in [1]_.
FAMILIES: dict[str, tuple[str, str, str | None]] = {
    "krr": ("metricdp.mechanisms.krr", "krr", "ldp_epsilon"),
    "geometric": ("metricdp.mechanisms.geometric", "geometric", None),
    "planar-laplace": ("metricdp.mechanisms.planar_laplace", "planar_laplace", None),
    "exponential": ("metricdp.mechanisms.exponential", "exponential", None),
    "optimal": ("metricdp.mechanisms.lp", "optimal", None),
    "spanner": ("metricdp.mechanisms.lp", "spanner", None),
    "constopt": ("metricdp.mechanisms.lp", "constopt", None),
}


@dataclass(frozen=True)
class Calibrated:
    """Outcome of :func:`calibrate_expected_distance`.

    Attributes
    ----------
    epsilon : float
        The calibrated parameter (for ``"krr"`` its LDP parameter; for the other
        families the mDP epsilon per unit of distance).
    expected_distance : float
        :math:`E_d` of the mechanism at ``epsilon``.
    iterations : int
        Number of mechanisms built (bracketing included).
    mechanism : Mechanism
        The mechanism at ``epsilon``.
    """

    epsilon: float
    expected_distance: float
    iterations: int
    mechanism: Mechanism


class _Found(Exception):
    """Stops the root finder as soon as the target is met to tolerance."""


def calibrate_expected_distance(
    build: Callable[[float], Mechanism] | str,
    space: MetricSpace,
    prior: ArrayLike | None,
    target: float,
    *,
    tol: float = 1e-6,
    bracket: tuple[float, float] | None = None,
    max_iter: int = 200,
) -> Calibrated:
    r"""The parameter at which a mechanism family's expected distance meets a target.

    Solves :math:`E_d(\varepsilon) = \sum_{x,y} \pi(x) M_\varepsilon[x,y] d(x,y) =`
    ``target`` ([1]_ Section VI: mechanisms compared at equal expected distance
    between the true and the reported value). :math:`E_d` decreases as
    :math:`\varepsilon` grows (from about the uniform-release distance as
    :math:`\varepsilon \to 0` to 0 as :math:`\varepsilon \to \infty`). The target is
    bracketed by stepping :math:`\log \varepsilon` by :math:`\log 8` from the start,
    then the bracket is shrunk by Brent's method on :math:`\log \varepsilon` (bisection
    safeguarded by inverse quadratic interpolation: the bracket always holds the
    root), until :math:`|E_d(\varepsilon) - \text{target}| \le` ``tol`` :math:`\cdot`
    ``target``.

    Parameters
    ----------
    build : str or callable
        A family name (see :data:`FAMILIES`: ``"krr"`` (its LDP parameter),
        ``"geometric"``, ``"planar-laplace"``, ``"exponential"``, ``"optimal"``,
        ``"spanner"``, ``"constopt"``) or any ``eps -> Mechanism`` callable on ``space``.
    space : MetricSpace
    prior : array of shape (n,) or None
        Distribution of the true values (uniform when None).
    target : float
        The expected distance to meet, in the units of ``space``.
    tol : float
        Relative tolerance on :math:`E_d`.
    bracket : (float, float), optional
        ``(lo, hi)`` with :math:`E_d(lo) \ge` target :math:`\ge E_d(hi)`; searched for
        from ``1`` (k-RR) or ``1 / target`` (other families and callables) when omitted.
    max_iter : int
        Cap on the number of mechanisms built.

    Raises
    ------
    ValidationError
        Unknown family, bad prior or target, or a target out of reach: at or above what
        the smallest epsilon tried gives (near-uniform release) or below what the
        largest gives.
    SolverError
        When :math:`E_d` jumps across the target (no parameter meets it to ``tol``) or
        ``max_iter`` builds do not suffice.
    """
    if isinstance(build, str):
        if build not in FAMILIES:
            raise ValidationError(f"unknown mechanism family {build!r}; choose one of {', '.join(FAMILIES)}")
        name, builder = build, _family(build, space)
    elif callable(build):
        name, builder = getattr(build, "__name__", "build"), build
    else:
        raise ValidationError(f"build must be a family name or a callable, got {type(build).__name__}")
    space = check_space(space)
    pi = None if prior is None else check_probability_vector(prior, space.n)
    try:
        target = float(target)
    except (TypeError, ValueError):
        raise ValidationError(f"target must be a number, got {target!r}") from None
    if not (math.isfinite(target) and target > 0):
        raise ValidationError(f"target expected distance must be finite and > 0, got {target!r}")
    tol = float(tol)
    if not (math.isfinite(tol) and 0 < tol < 1):
        raise ValidationError(f"tol must be in (0, 1), got {tol!r}")
    max_iter = check_int(max_iter, "max_iter", minimum=2)

    cache: dict[float, tuple[float, Mechanism]] = {}

    def evaluate(log_eps: float) -> float:
        if log_eps not in cache:
            if len(cache) >= max_iter:
                raise SolverError(f"calibration of {name!r} did not meet the target in {max_iter} builds")
            mech = builder(math.exp(log_eps))
            if not isinstance(mech, Mechanism) or mech.space.n != space.n:
                raise ValidationError(f"{name} did not return a Mechanism on the {space.n}-point space")
            cache[log_eps] = (expected_distance(mech, space.distances, pi), mech)
        return cache[log_eps][0] - target

    def result(log_eps: float) -> Calibrated:
        value, mech = cache[log_eps]
        return Calibrated(math.exp(log_eps), value, len(cache), mech)

    # k-RR's parameter has no unit; for the others E_d is about c / eps, so start at
    # 1 / target, kept where the matrix is representable (eps d_min <= 10).
    start = 0.0 if name == "krr" else min(max(-math.log(target), math.log(1e-3 / space.diameter)),
                                          math.log(10.0 / space.d_min))
    lo, hi = _bracket(evaluate, name, target, tol, bracket, start)
    for t in (lo, hi):
        if abs(cache[t][0] - target) <= tol * target:
            return result(t)

    def g(t: float) -> float:
        value = evaluate(t)
        if abs(value) <= tol * target:
            raise _Found(t)
        return value

    from scipy.optimize import brentq

    try:
        root = brentq(g, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=max_iter)
    except _Found as found:
        return result(float(found.args[0]))
    except RuntimeError:  # brentq's own iteration cap
        raise SolverError(f"calibration of {name!r} did not meet the target in {max_iter} builds") from None
    # The bracket shrank to float resolution without meeting tol: E_d jumps there.
    best = min(cache, key=lambda t: abs(cache[t][0] - target))
    raise SolverError(
        f"calibration of {name!r}: E_d jumps across the target {target:.6g} near eps = {math.exp(root):.10g} "
        f"(closest E_d = {cache[best][0]:.10g}); no parameter meets it to tol = {tol}"
    )


def _bracket(
    evaluate: Callable[[float], float],
    name: str,
    target: float,
    tol: float,
    bracket: Sequence[float] | None,
    start: float,
) -> tuple[float, float]:
    """(lo, hi) in log eps with E_d(lo) >= target >= E_d(hi)."""
    if bracket is not None:
        try:
            lo_eps, hi_eps = (float(x) for x in bracket)
        except (TypeError, ValueError):
            raise ValidationError(f"bracket must be two numbers (lo, hi), got {bracket!r}") from None
        if not (0 < lo_eps < hi_eps and math.isfinite(hi_eps)):
            raise ValidationError(f"bracket must satisfy 0 < lo < hi < inf, got {bracket!r}")
        lo, hi = math.log(lo_eps), math.log(hi_eps)
        f_lo, f_hi = evaluate(lo), evaluate(hi)
        if f_lo < -tol * target or f_hi > tol * target:
            raise ValidationError(
                f"bracket {bracket!r} does not hold the target {target:.6g} for {name!r}: "
                f"E_d = {f_lo + target:.6g} at lo and {f_hi + target:.6g} at hi"
            )
        return lo, hi
    step, reach = math.log(8.0), math.log(1e12)
    seen: list[tuple[float, float]] = []

    def attempt(t: float) -> float | str:
        """E_d(e^t) - target, or the builder's reason for refusing e^t."""
        try:
            f = evaluate(t)
        except SolverError:
            raise
        except MetricDPError as ex:
            # Builders refuse extreme parameters (overflow, underflow to zero).
            return f"the build failed at eps = {math.exp(t):.3g}: {ex}"
        seen.append((t, f))
        return f

    t = start
    f = attempt(t)
    while isinstance(f, str) and start - t < reach:  # start refused: walk down to a buildable eps
        t -= step
        f = attempt(t)
    if isinstance(f, str):
        raise ValidationError(f"calibration of {name!r}: no buildable epsilon found; {f}")
    direction = 1.0 if f > 0 else -1.0  # E_d too large: raise eps; too small: lower it
    while abs(t + direction * step - start) <= reach:
        t_next = t + direction * step
        f_next = attempt(t_next)
        if isinstance(f_next, str):
            raise _out_of_reach(name, target, seen, f_next)
        if (f_next <= 0) if direction > 0 else (f_next >= 0):
            return (t, t_next) if direction > 0 else (t_next, t)
        t = t_next
    raise _out_of_reach(name, target, seen, "")


def _out_of_reach(name: str, target: float, seen: list[tuple[float, float]], why: str) -> ValidationError:
    values = [f + target for _, f in seen]
    eps = [math.exp(t) for t, _ in seen]
    i_max, i_min = int(np.argmax(values)), int(np.argmin(values))
    return ValidationError(
        f"target expected distance {target:.6g} is out of reach for {name!r}: E_d ranges from "
        f"{values[i_min]:.6g} (eps = {eps[i_min]:.3g}) to {values[i_max]:.6g} (eps = {eps[i_max]:.3g})"
        + (f"; {why}" if why else "")
    )

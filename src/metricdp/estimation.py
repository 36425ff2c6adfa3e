r"""Statistics from privatized reports: estimators and Earth mover's utility.

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

Calibrating a family to an expected distance (Alvim et al.'s "equal protection"
comparison) is :mod:`metricdp.mechanisms.distance_calibration`.

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
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._random import check_rng
from ._threads import blas_threads
from ._toeplitz import lattice_structure
from ._validation import check_int, check_number, check_probability_vector, check_stochastic
from .errors import SolverError, ValidationError
from .mechanisms.base import Mechanism
from .spaces import MetricSpace

__all__ = [
    "ExpectedEMD",
    "IBUResult",
    "counts_from_indices",
    "emd",
    "expected_emd",
    "ibu",
    "matrix_inversion",
    "project_simplex",
]

#: Default stopping rule of :func:`ibu`: the L1 change between two iterates.
IBU_TOL = 1e-9
#: BLAS threads of :func:`ibu`'s dense products: its matrix-vector products are too small
#: for more threads to pay, and on a shared machine the extra threads only spin.
IBU_BLAS_THREADS = 1
#: Most threads of :func:`ibu`'s compiled dense update (:class:`metricdp._ibu_kernels.DenseTeam`),
#: fewer where the process may run on fewer cores (``os.sched_getaffinity``). The blocks' shares are
#: summed in a fixed order, so a run gives the same bits for the same thread count; runs on different
#: counts differ by rounding (a few units in the last place). 1 keeps every dense update on the caller's thread.
IBU_THREADS = 2
#: Entries of M (k x k: k of about 700) from which the compiled dense update shares its pass between
#: threads. Each update then costs two thread hand-offs, tens of microseconds of CPU and wall on a busy
#: machine; from here they are under a fifth of the pass they halve, below it they eat the gain.
IBU_THREADS_MIN_ENTRIES = 500_000
#: :func:`ibu` sets an iterate's entry below this (the smallest normal double, 2.2e-308) to 0
#: after each update: an entry that small is a category the update is driving to 0, and
#: arithmetic on subnormal doubles costs up to a hundred times more per operation (the far
#: categories of a distance channel reach that range within a few thousand updates). Moving
#: less than 1e-304 of mass per update, it changes no estimate visibly.
IBU_FLOOR = float(np.finfo(np.float64).tiny)
#: Default iteration cap of :func:`ibu`.
IBU_MAX_ITER = 10_000
#: The largest ``max_iter``: the compiled loop counts in int64 (more iterations than any run can make anyway).
IBU_MAX_ITER_LIMIT = 2**62
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
    wrong = ~np.isfinite(c) | (c < 0)
    if wrong.any():  # argwhere only on the error path: it costs more than the check on small inputs
        where = tuple(int(x) for x in np.argwhere(wrong)[0])
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


_Product = Callable[[NDArray[np.float64]], NDArray[np.float64]]


def krr_structure(m: NDArray[np.float64]) -> tuple[float, float] | None:
    """``(a, b)`` when the square matrix m is exactly ``a I + b J`` (k-RR and the LDP support channels), else None."""
    n = m.shape[0]
    if n < 2 or m.shape[1] != n:
        return None
    if not (m[0, 0] == m[1, 1] and (m[0, 1:] == m[0, 1]).all() and (m[1, 2:] == m[0, 1]).all()):
        return None  # the first two rows already say no: no pass over the matrix
    diag, off = np.diagonal(m), m.ravel()[1:].reshape(n - 1, n + 1)[:, :n]
    if not (np.all(diag == diag[0]) and np.all(off == off[0, 0])):
        return None
    return float(diag[0] - off[0, 0]), float(off[0, 0])


def _ibu_products(
    m: NDArray[np.float64], q: NDArray[np.float64], lattice: tuple[int, int] | None = None
) -> tuple[_Product, _Product, NDArray[np.float64]]:
    r"""The two products of an IBU update, ``p @ M`` and ``r @ M.T``, and the data they take.

    For :math:`M = aI + bJ` (:func:`krr_structure`) they are :math:`a p + b \sum p` and
    :math:`a r + b \sum r`: O(k) instead of O(k^2) per update. On a channel of a line or
    a grid (``lattice``, :func:`metricdp._toeplitz.lattice_structure`) they are FFT
    convolutions, O(k log k). Otherwise dense products on the observed outputs only (an
    unobserved output has ratio 0 and adds nothing to ``r @ M.T``), with both M and its
    transpose contiguous.
    """
    ab = krr_structure(m)
    if ab is not None:
        a, b = ab

        def forward_s(p: NDArray[np.float64]) -> NDArray[np.float64]:
            return a * p + b * p.sum(axis=1, keepdims=True)

        return forward_s, forward_s, q
    if lattice is not None:
        from ._toeplitz import LatticeProducts

        fft = LatticeProducts.build(m, lattice)
        return fft.forward, fft.backward, q
    seen = q.any(axis=0)
    mo = np.ascontiguousarray(m[:, seen]) if not seen.all() else m
    mt = np.ascontiguousarray(mo.T)

    def forward(p: NDArray[np.float64]) -> NDArray[np.float64]:
        return p @ mo

    def backward(r: NDArray[np.float64]) -> NDArray[np.float64]:
        return r @ mt

    return forward, backward, np.ascontiguousarray(q[:, seen])


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
    rank, that is :math:`\pi^*` itself. Every update keeps :math:`\pi_t` in the simplex
    (an entry below :data:`IBU_FLOOR`, 2.2e-308, is set to 0: it avoids subnormal arithmetic).

    One update is two matrix products, ``pi * ((q / (pi @ M)) @ M.T)``. A channel of a line
    or a grid with 1,000 categories or more (a row scaling of a block-Toeplitz matrix,
    :func:`metricdp._toeplitz.lattice_structure`) is updated by FFT convolutions, O(k log k).
    Otherwise, with numba (the ``fast`` extra) each row of counts runs in a compiled loop
    (:mod:`metricdp._ibu_kernels`: O(k) per update on an ``a I + b J`` channel, one pass over
    M otherwise, no BLAS; from :data:`IBU_THREADS_MIN_ENTRIES` entries of M the pass is shared by
    up to :data:`IBU_THREADS` threads that block, never spin, between updates); without it a
    batch of count vectors is updated together in numpy,
    each row stopping on its own, the dense products on :data:`IBU_BLAS_THREADS` BLAS thread
    (:func:`metricdp._threads.blas_threads`, as the LP solver's).

    For confidence intervals around the estimate, see :func:`metricdp.intervals.ibu_intervals`.

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
    tol = check_number(tol, "tol", minimum=0, open_minimum=True)
    max_iter = check_int(max_iter, "max_iter", minimum=1, maximum=IBU_MAX_ITER_LIMIT)
    single = c.ndim == 1
    q = np.atleast_2d(c)
    q = q / q.sum(axis=1, keepdims=True)
    impossible = (q > 0) & (m.sum(axis=0) == 0)[None, :]
    if impossible.any():
        raise ValidationError(
            f"output {int(np.argwhere(impossible)[0][1])} was reported but the mechanism never releases it "
            "(zero column)"
        )
    batch, n_in = q.shape[0], m.shape[0]
    pi = np.full((batch, n_in), 1.0 / n_in)
    return _ibu_run(m, q, pi, tol, max_iter, single)


def _ibu_run(
    m: NDArray[np.float64], q: NDArray[np.float64], pi: NDArray[np.float64], tol: float, max_iter: int, single: bool
) -> IBUResult:
    """:func:`ibu`'s loop on checked inputs: the compiled kernels when numba is there, else numpy."""
    from . import _ibu_kernels as _kernels  # numba's import (about 0.7 s) only when IBU runs, not per command

    krr = krr_structure(m) is not None
    lattice = None if krr else lattice_structure(m)
    if lattice is not None:  # FFT products, O(k log k) an update, no BLAS
        return _ibu_numpy(m, q, pi, tol, max_iter, single, lattice)
    if _kernels.KERNELS is not None:  # compiled loops: no BLAS
        return _ibu_compiled(m, q, pi, tol, max_iter, single)
    if krr:  # O(k) updates, no BLAS
        return _ibu_numpy(m, q, pi, tol, max_iter, single)
    with blas_threads(IBU_BLAS_THREADS):
        return _ibu_numpy(m, q, pi, tol, max_iter, single)


def _ibu_numpy(
    m: NDArray[np.float64],
    q: NDArray[np.float64],
    pi: NDArray[np.float64],
    tol: float,
    max_iter: int,
    single: bool,
    lattice: tuple[int, int] | None = None,
) -> IBUResult:
    """:func:`ibu`'s loop in numpy, the whole batch at once: the reference of the compiled kernels."""
    batch = q.shape[0]
    iterations = np.zeros(batch, dtype=np.intp)
    converged = np.zeros(batch, dtype=bool)
    forward, backward, q = _ibu_products(m, q, lattice)
    rows = np.arange(batch)  # rows still iterating; p, qa hold their iterates and data
    p, qa = pi.copy(), q
    for _ in range(max_iter):
        den = forward(p)  # (a, n_out): probability of each report under pi_t
        if den.min() > 0:
            ratio = qa / den
        else:  # unobserved outputs contribute nothing (0/0 is 0); den == 0 at an observed
            # output only after underflow of every x that can produce it
            ratio = np.divide(qa, den, out=np.zeros_like(den), where=(qa > 0) & (den > 0))
        new = p * backward(ratio)
        if lattice is not None:  # FFT rounding is absolute: an entry whose exact value is ~0 may be < 0
            np.maximum(new, 0.0, out=new)
        new /= new.sum(axis=1, keepdims=True)  # exact simplex despite rounding
        new[new < IBU_FLOOR] = 0.0
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


def _ibu_threads(entries: int) -> int:
    """Threads of a compiled dense update of M with ``entries`` entries: 1 below the crossover, else cap or cores."""
    if entries < IBU_THREADS_MIN_ENTRIES or IBU_THREADS <= 1:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(IBU_THREADS, cores))


def _ibu_compiled(
    m: NDArray[np.float64], q: NDArray[np.float64], pi: NDArray[np.float64], tol: float, max_iter: int, single: bool
) -> IBUResult:
    """:func:`ibu`'s loop, row by row, in the compiled kernels of :mod:`metricdp._ibu_kernels`."""
    from . import _ibu_kernels as _kernels

    krr_kernel, dense_kernel = _kernels.KERNELS
    ab = krr_structure(m)
    iterations = np.zeros(len(q), dtype=np.intp)
    converged = np.zeros(len(q), dtype=bool)
    if ab is None:
        seen = q.any(axis=0)
        if 2 * seen.sum() < seen.size:  # an unseen output costs a column of every row: drop them when many
            m = m[:, seen]
            q = q[:, seen]
        m, q = np.ascontiguousarray(m), np.ascontiguousarray(q)
    threads = _ibu_threads(m.size) if ab is None else 1
    if threads > 1:
        with _kernels.DenseTeam(m, _kernels.row_blocks(m.shape[0], threads)) as team:
            for i in range(len(q)):  # rows of a batch (repetitions), not users
                pi[i], iterations[i], converged[i] = team.run(pi[i], q[i], tol, IBU_FLOOR, max_iter)
    else:
        for i in range(len(q)):  # rows of a batch (repetitions), not users
            if ab is not None:
                pi[i], iterations[i], converged[i] = krr_kernel(
                    pi[i].copy(), q[i], ab[0], ab[1], tol, IBU_FLOOR, max_iter
                )
            else:
                pi[i], iterations[i], converged[i] = dense_kernel(pi[i].copy(), q[i], m, tol, IBU_FLOOR, max_iter)
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
    n, k = mechanism.n, mechanism.m  # k outputs: n, or m for a separate output set
    truth = counts_from_indices(x, n)
    truth /= truth.sum()
    reports = np.asarray(mechanism.sample(np.tile(x, repetitions), source))
    row = np.repeat(np.arange(repetitions), x.size)
    counts = np.bincount(row * k + reports, minlength=repetitions * k).reshape(repetitions, k).astype(np.float64)
    estimates = np.atleast_2d(_estimate(counts, mechanism.matrix, method, tol, max_iter))
    values = np.array([emd(e, truth, mechanism.distances) for e in estimates])
    stderr = float(values.std(ddof=1) / math.sqrt(repetitions)) if repetitions > 1 else float("nan")
    return ExpectedEMD(float(values.mean()), stderr, values)

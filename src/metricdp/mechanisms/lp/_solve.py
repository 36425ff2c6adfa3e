r"""The one place where metricdp builds and solves linear programs (HiGHS via ``highspy``).

Every LP of the family is posed as

.. math::

    \min_x c^\top x \quad\text{s.t.}\quad \ell_r \le A x \le u_r,\ \ \ell_c \le x \le u_c,

with ``A`` a scipy sparse matrix passed to HiGHS column-wise in one call
(:meth:`highspy.Highs.passModel`); rows added later for constraint generation go in
one :meth:`highspy.Highs.addRows` call per round (:func:`add_rows`), after which a
re-solve starts from the previous basis (dual simplex warm start).

Status codes follow SciPy's ``_highs_to_scipy_status_message``: 0 optimal, 1 time or
iteration limit, 2 infeasible, 3 unbounded, 4 numerical trouble or anything else. The
raw HiGHS status is kept in ``highs_status``. The solution is read only when HiGHS says
optimal, and then checked again against the rows and bounds (as SciPy's
``_check_result`` does): a claimed optimum whose residuals exceed
:data:`RESIDUAL_TOL` is downgraded to status 4.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from ...errors import SolverError, ValidationError

if TYPE_CHECKING:  # pragma: no cover
    import highspy

__all__ = [
    "RESIDUAL_TOL",
    "STATUS_NAMES",
    "SolveResult",
    "add_rows",
    "new_highs",
    "require_optimal",
    "resolve",
    "solve_lp",
]

#: Status code -> short name (the scipy convention).
STATUS_NAMES = {0: "optimal", 1: "limit", 2: "infeasible", 3: "unbounded", 4: "numerical/other"}

#: Largest row or bound residual (relative to 1 + |bound|) accepted from a solution that
#: HiGHS calls optimal; HiGHS's own primal feasibility tolerance is 1e-7, measured on the
#: scaled model, so the unscaled residual may be a little larger.
RESIDUAL_TOL = 1e-5

_METHODS = {
    "auto": {"solver": "choose"},
    "simplex": {"solver": "simplex", "simplex_strategy": 0},
    "dual": {"solver": "simplex", "simplex_strategy": 1},
    "primal": {"solver": "simplex", "simplex_strategy": 4},
    "ipm": {"solver": "ipm", "run_crossover": "on"},
    "pdlp": {"solver": "pdlp"},
}


@dataclass(frozen=True)
class SolveResult:
    """Outcome of one LP solve (the scipy ``OptimizeResult`` fields that matter here).

    Attributes
    ----------
    success : bool
        True only for status 0 (optimal and residuals checked).
    status : int
        0 optimal, 1 time/iteration limit, 2 infeasible, 3 unbounded, 4 numerical/other.
    message : str
        Human-readable explanation, naming the raw HiGHS status.
    highs_status : str
        HiGHS's model status string (e.g. ``"Optimal"``, ``"Time limit reached"``).
    x : ndarray or None
        The primal solution; ``None`` unless ``status == 0``.
    objective : float or None
        ``c @ x``; ``None`` unless ``status == 0``.
    seconds : float
        Wall time of the solve (model passing excluded).
    variables, constraints, nonzeros : int
        Size of the LP that was solved.
    """

    success: bool
    status: int
    message: str
    highs_status: str
    x: NDArray[np.float64] | None
    objective: float | None
    seconds: float
    variables: int
    constraints: int
    nonzeros: int

    def stats(self) -> dict[str, Any]:
        """LP statistics for a mechanism's ``info["lp"]`` (JSON-serialisable)."""
        return {
            "variables": int(self.variables),
            "constraints": int(self.constraints),
            "nonzeros": int(self.nonzeros),
            "solve_seconds": float(self.seconds),
            "status": int(self.status),
            "highs_status": self.highs_status,
        }

    def __repr__(self) -> str:
        obj = "None" if self.objective is None else f"{self.objective:.10g}"
        return (
            f"SolveResult(message={self.message!r}, status={self.status}, objective={obj}, "
            f"variables={self.variables}, constraints={self.constraints}, seconds={self.seconds:.3g})"
        )


def new_highs(
    *, method: str = "auto", time_limit: float | None = None, options: Mapping[str, Any] | None = None
) -> highspy.Highs:
    """A silent HiGHS instance configured for ``method``, ``time_limit`` and raw HiGHS ``options``."""
    import highspy

    if method not in _METHODS:
        raise ValidationError(f"method must be one of {sorted(_METHODS)}, got {method!r}")
    h = highspy.Highs()
    h.silent()
    for key, value in _METHODS[method].items():
        h.setOptionValue(key, value)
    _set_options(h, options)
    _set_time_limit(h, time_limit)
    return h


def _set_options(h: highspy.Highs, options: Mapping[str, Any] | None) -> None:
    import highspy

    for key, value in (options or {}).items():
        if h.setOptionValue(key, value) != highspy.HighsStatus.kOk:
            raise ValidationError(f"HiGHS option {key!r} = {value!r} was rejected")


def _set_time_limit(h: highspy.Highs, time_limit: float | None) -> None:
    if time_limit is None:
        h.setOptionValue("time_limit", float("inf"))
        return
    try:
        t = float(time_limit)
    except (TypeError, ValueError):
        raise ValidationError(f"time_limit must be a number of seconds, got {time_limit!r}") from None
    if not t > 0:
        raise ValidationError(f"time_limit must be > 0 seconds, got {time_limit!r}")
    h.setOptionValue("time_limit", t)


def _vector(a: ArrayLike | float, size: int, name: str) -> NDArray[np.float64]:
    v = np.broadcast_to(np.asarray(a, dtype=np.float64), (size,)) if np.ndim(a) == 0 else np.asarray(a, float)
    if v.shape != (size,):
        raise ValidationError(f"{name} must have shape ({size},), got {v.shape}")
    if np.isnan(v).any():
        raise ValidationError(f"{name} has NaN at index {int(np.flatnonzero(np.isnan(v))[0])}")
    return np.ascontiguousarray(v, dtype=np.float64)


def _status(h: highspy.Highs) -> tuple[int, str]:
    import highspy

    ms = h.getModelStatus()
    s = highspy.HighsModelStatus
    if ms == s.kOptimal:
        code = 0
    elif ms in (s.kTimeLimit, s.kIterationLimit, s.kSolutionLimit, s.kInterrupt, s.kHighsInterrupt):
        code = 1
    elif ms == s.kInfeasible:
        code = 2
    elif ms == s.kUnbounded:
        code = 3
    else:  # kUnboundedOrInfeasible, errors, memory limit, objective bound/target, unknown
        code = 4
    return code, h.modelStatusToString(ms)


def _run(h: highspy.Highs, time_limit: float | None) -> SolveResult:
    """Run HiGHS on the model it holds and read back a checked :class:`SolveResult`."""
    _set_time_limit(h, time_limit)
    t0 = time.perf_counter()
    h.run()
    seconds = time.perf_counter() - t0
    code, raw = _status(h)
    lp = h.getLp()
    nvar, nrow, nnz = int(h.getNumCol()), int(h.getNumRow()), int(h.getNumNz())
    if code != 0:
        detail = {1: "stopped at a time or iteration limit", 2: "is infeasible", 3: "is unbounded"}
        message = f"LP {detail.get(code, 'failed (numerical trouble or solver error)')} (HiGHS: {raw})"
        return SolveResult(False, code, message, raw, None, None, seconds, nvar, nrow, nnz)
    sol = h.getSolution()
    x = np.asarray(sol.col_value, dtype=np.float64)
    ax = np.asarray(sol.row_value, dtype=np.float64)
    residual = _residual(x, ax, lp)
    if not np.isfinite(residual) or residual > RESIDUAL_TOL:
        message = f"HiGHS reported {raw!r} but the solution violates a row or bound by {residual:.3g} (relative)"
        return SolveResult(False, 4, message, raw, None, None, seconds, nvar, nrow, nnz)
    objective = float(np.dot(np.asarray(lp.col_cost_, dtype=np.float64), x) + lp.offset_)
    return SolveResult(True, 0, f"Optimal (HiGHS: {raw})", raw, x, objective, seconds, nvar, nrow, nnz)


def _residual(x: NDArray, ax: NDArray, lp: Any) -> float:
    """Largest violation of a bound or row, relative to 1 + |bound| (0 when feasible)."""

    def viol(val: NDArray, lo: NDArray, hi: NDArray) -> float:
        if val.size == 0:
            return 0.0
        with np.errstate(invalid="ignore"):
            below = np.where(np.isfinite(lo), (lo - val) / (1 + np.abs(lo)), 0.0)
            above = np.where(np.isfinite(hi), (val - hi) / (1 + np.abs(hi)), 0.0)
        return float(max(below.max(), above.max(), 0.0))

    cl, cu = np.asarray(lp.col_lower_, float), np.asarray(lp.col_upper_, float)
    rl, ru = np.asarray(lp.row_lower_, float), np.asarray(lp.row_upper_, float)
    return max(viol(x, cl, cu), viol(ax, rl, ru))


def solve_lp(
    c: ArrayLike,
    A: sp.spmatrix | sp.sparray,
    row_lower: ArrayLike | float,
    row_upper: ArrayLike | float,
    col_lower: ArrayLike | float,
    col_upper: ArrayLike | float,
    *,
    time_limit: float | None = None,
    method: str = "auto",
    highs: highspy.Highs | None = None,
    options: Mapping[str, Any] | None = None,
) -> SolveResult:
    r"""Minimise ``c @ x`` subject to ``row_lower <= A x <= row_upper`` and column bounds.

    Parameters
    ----------
    c : array of shape (m,)
    A : scipy sparse matrix of shape (k, m)
        Converted to CSC once and handed to HiGHS column-wise in one call.
    row_lower, row_upper : arrays of shape (k,) or scalars
        ``-inf`` / ``inf`` for one-sided rows.
    col_lower, col_upper : arrays of shape (m,) or scalars
    time_limit : float, optional
        Seconds; on expiry the result has status 1 and ``x=None``.
    method : {"auto", "simplex", "dual", "primal", "ipm", "pdlp"}
        HiGHS solver choice (``ipm`` runs crossover so the answer is a vertex).
    highs : highspy.Highs, optional
        An instance to load the model into (it then holds the model and basis, so the
        caller can :func:`add_rows` and :func:`resolve` warm-started). Its options are
        left as they are apart from the time limit and ``options``; ``method`` applies
        only to a new one.
    options : mapping, optional
        Raw HiGHS options (e.g. ``{"primal_feasibility_tolerance": 1e-9}``); a rejected
        option raises :class:`~metricdp.errors.ValidationError`.

    Returns
    -------
    SolveResult
        ``x`` and ``objective`` only when status is 0 (optimal, residuals re-checked).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> r = solve_lp([1.0, 1.0], sp.csr_matrix([[1.0, 2.0]]), 1.0, np.inf, 0.0, np.inf)
    >>> r.status, round(r.objective, 9)
    (0, 0.5)
    """
    import highspy

    if not sp.issparse(A):
        raise ValidationError(f"A must be a scipy sparse matrix, got {type(A).__name__}")
    a = sp.csc_matrix(A, dtype=np.float64)
    a.sum_duplicates()
    k, m = a.shape
    cost = _vector(c, m, "c")
    if not np.all(np.isfinite(cost)):
        raise ValidationError("c must be finite")
    if not np.all(np.isfinite(a.data)):
        raise ValidationError("A must be finite")
    lp = highspy.HighsLp()
    lp.num_col_ = m
    lp.num_row_ = k
    lp.col_cost_ = cost
    lp.col_lower_ = _vector(col_lower, m, "col_lower")
    lp.col_upper_ = _vector(col_upper, m, "col_upper")
    lp.row_lower_ = _vector(row_lower, k, "row_lower")
    lp.row_upper_ = _vector(row_upper, k, "row_upper")
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_ = m
    lp.a_matrix_.num_row_ = k
    lp.a_matrix_.start_ = a.indptr.astype(np.int32)
    lp.a_matrix_.index_ = a.indices.astype(np.int32)
    lp.a_matrix_.value_ = a.data
    if highs is None:
        h = new_highs(method=method, time_limit=time_limit, options=options)
    else:
        h = highs
        _set_options(h, options)
    status = h.passModel(lp)
    if status == highspy.HighsStatus.kError:
        raise SolverError("HiGHS rejected the LP model (passModel failed)", status="model error")
    return _run(h, time_limit)


def add_rows(h: highspy.Highs, A: sp.spmatrix | sp.sparray, lower: ArrayLike | float, upper: ArrayLike | float) -> None:
    """Append the rows of sparse ``A`` (one call, CSR) to the model held by ``h``.

    The basis is kept (the new rows enter basic), so the next :func:`resolve` is a
    dual-simplex warm start.
    """
    a = sp.csr_matrix(A, dtype=np.float64)
    a.sum_duplicates()
    k, m = a.shape
    if m != h.getNumCol():
        raise ValidationError(f"added rows have {m} columns, the model has {h.getNumCol()}")
    if k == 0:
        return
    h.addRows(
        k,
        _vector(lower, k, "lower"),
        _vector(upper, k, "upper"),
        int(a.nnz),
        a.indptr[:-1].astype(np.int32),
        a.indices.astype(np.int32),
        a.data,
    )


def resolve(h: highspy.Highs, *, time_limit: float | None = None) -> SolveResult:
    """Solve again the model held by ``h`` (after :func:`add_rows`), warm-started."""
    return _run(h, time_limit)


def require_optimal(result: SolveResult, what: str) -> NDArray[np.float64]:
    """The solution of an optimal result; otherwise :class:`SolverError` naming the status.

    Never returns a non-optimal point: a time limit or numerical trouble is an error
    the caller must see, not a mechanism.
    """
    if result.status != 0 or result.x is None:
        raise SolverError(
            f"{what}: the LP did not reach optimality: {result.message} "
            f"[status {result.status} = {STATUS_NAMES.get(result.status, '?')}]",
            status=STATUS_NAMES.get(result.status, "numerical/other"),
            result=result,
        )
    return result.x

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
raw HiGHS status is kept in ``highs_status`` (its text) and ``model_status`` (the enum
name, e.g. ``"kUnboundedOrInfeasible"``). The solution and its duals are read only when
HiGHS says optimal, and then checked again against the rows and bounds (as SciPy's
``_check_result`` does): a claimed optimum whose residuals exceed
:data:`RESIDUAL_TOL` is downgraded to status 4. :func:`require_optimal` maps a failed
status to the one typed error callers branch on (:func:`error_type`), once, here.

Every HiGHS object of metricdp is created here (:func:`new_highs`) and every call into
``highspy`` goes through this module: models built in one piece (:func:`solve_lp`),
grown by rows (:func:`add_rows`, :func:`resolve`) or, for column generation, wrapped in
an :class:`LPModel` (columns, coefficient changes, options, duals).

**Output.** HiGHS never writes to stdout: its one-time banner (printed by the first
``highspy.Highs()`` of a process) is swallowed, and every instance has
``output_flag`` off. When the logger :data:`LOGGER` (``"metricdp.highs"``) is enabled
for DEBUG, the solver log goes to it instead (``log_to_console`` stays off; a logging
callback forwards each line), so ``logging.basicConfig(level=logging.DEBUG)`` shows it
on stderr.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from ..errors import (
    InfeasibleError,
    SolverError,
    SolverNumericalError,
    SolverTimeLimitError,
    ValidationError,
)

if TYPE_CHECKING:  # pragma: no cover
    import highspy

__all__ = [
    "LOGGER",
    "LOG_CAP",
    "RESIDUAL_TOL",
    "STATUS_NAMES",
    "LPModel",
    "SolveResult",
    "add_rows",
    "error_type",
    "highs_version",
    "new_highs",
    "require_optimal",
    "resolve",
    "solve_lp",
]

#: Status code -> short name (the scipy convention).
STATUS_NAMES = {0: "optimal", 1: "limit", 2: "infeasible", 3: "unbounded", 4: "numerical/other"}

#: Largest row or bound residual (relative to 1 + |bound|) accepted from a solution that
#: HiGHS calls optimal; HiGHS's own primal feasibility tolerance is 1e-7, applied to the
#: scaled model, so the unscaled residual may be a little larger.
RESIDUAL_TOL = 1e-5

#: Largest exponent C of a coefficient ratio e^C handed to HiGHS by any LP of the family
#: (OPTMech/SpannerMech privacy factors and kernels, ConstOPTMech cone rows); beyond it a
#: row is made stricter, never looser, so privacy is untouched (proofs: ``core.solve_raw``,
#: ``docs/proofs/constopt.md`` §4; the capped optimum is within :math:`n e^{-C} \max d`
#: of the uncapped one, ``docs/proofs/lp_repair.md``, "Capped row factors"). Why 20: a
#: cap of 30 leaves HiGHS in numerical trouble on spaces where 20 does not, and one cap
#: serves every LP of the family (ConstOPTMech's results at 20 agree with or improve on
#: those at 25). Its price in optimality at large eps * d is no longer the result's: the
#: OPTMech/SpannerMech builds that capped a factor end with the scaled, uncapped finish
#: (:mod:`.polish`), so the cap only shapes their starting point. The evidence:
#: benchmarks/RESULTS.md#docstrings-lp-solve-log-cap.
LOG_CAP = 20.0

#: Where the HiGHS log goes when it is wanted (DEBUG level); never stdout.
LOGGER = logging.getLogger("metricdp.highs")

_BANNER_LOCK = threading.Lock()
_banner_done = False

_METHODS: dict[str, dict[str, Any]] = {
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
    model_status : str
        The raw ``HighsModelStatus`` enum name (e.g. ``"kUnboundedOrInfeasible"``), for
        callers that need more than the status code (never parse ``message``).
    row_dual, col_dual : ndarray or None
        Row duals and reduced costs (HiGHS's sign convention); ``None`` unless status 0.
    iterations : int
        Simplex iterations of this solve (HiGHS's ``simplex_iteration_count``).
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
    model_status: str = ""
    row_dual: NDArray[np.float64] | None = None
    col_dual: NDArray[np.float64] | None = None
    iterations: int = 0

    def stats(self) -> dict[str, Any]:
        """LP statistics for a mechanism's ``info["lp"]`` (JSON-serialisable)."""
        return {
            "variables": int(self.variables),
            "constraints": int(self.constraints),
            "nonzeros": int(self.nonzeros),
            "solve_seconds": float(self.seconds),
            "status": int(self.status),
            "highs_status": self.highs_status,
            "simplex_iterations": int(self.iterations),
        }

    def optimum(self, what: str) -> tuple[NDArray[np.float64], float]:
        """``(x, objective)`` of an optimal result; otherwise the typed error (:func:`require_optimal`)."""
        x = require_optimal(self, what)
        return x, float(self.objective if self.objective is not None else np.nan)

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
    if method not in _METHODS:
        raise ValidationError(f"method must be one of {sorted(_METHODS)}, got {method!r}")
    h = _quiet_highs()
    for key, value in _METHODS[method].items():
        h.setOptionValue(key, value)
    _set_options(h, options)
    _set_time_limit(h, time_limit)
    return h


def _quiet_highs() -> highspy.Highs:
    """``highspy.Highs()`` with nothing on stdout: banner swallowed, output off or to :data:`LOGGER`.

    The banner is printed once per process, by the C++ constructor of the first instance,
    to file descriptor 1 (so ``contextlib.redirect_stdout`` cannot catch it): that first
    construction runs with descriptor 1 pointed at ``os.devnull``, under a lock.
    """
    import highspy

    global _banner_done
    with _BANNER_LOCK:
        if _banner_done:
            h = highspy.Highs()
        else:
            sys.stdout.flush()
            saved = os.dup(1)
            try:
                with open(os.devnull, "wb") as null:
                    os.dup2(null.fileno(), 1)
                    h = highspy.Highs()
            finally:
                os.dup2(saved, 1)
                os.close(saved)
            _banner_done = True
    h.setOptionValue("log_to_console", False)
    if LOGGER.isEnabledFor(logging.DEBUG):
        h.setOptionValue("output_flag", True)
        h.cbLogging.subscribe(lambda event: LOGGER.debug("%s", str(event.message).rstrip()))
    else:
        h.setOptionValue("output_flag", False)
    return h


def highs_version() -> str:
    """HiGHS's version string (e.g. ``"1.16.0"``), read without printing its banner."""
    return str(_quiet_highs().version())


def _set_options(h: highspy.Highs, options: Mapping[str, Any] | None) -> None:
    import highspy

    for key, value in (options or {}).items():
        if h.setOptionValue(key, value) != highspy.HighsStatus.kOk:
            raise ValidationError(f"HiGHS option {key!r} = {value!r} was rejected")


def _set_time_limit(h: highspy.Highs, time_limit: float | None) -> None:
    """Give the next ``run`` of ``h`` ``time_limit`` seconds (``None``: no limit).

    HiGHS compares its ``time_limit`` option with the instance's *cumulative* run clock
    (:meth:`highspy.Highs.getRunTime`, never reset between runs), so the option is set
    to the time already run plus the seconds allowed. Without the offset, the re-solves
    of constraint generation (one instance, many runs) stop early: a second run given
    T seconds after a first that ran T stops at once, so a build gave up after about half
    of its deadline (benchmarks/RESULTS.md#docstrings-lp-solve-set-time-limit).
    """
    if time_limit is None:
        h.setOptionValue("time_limit", float("inf"))
        return
    try:
        t = float(time_limit)
    except (TypeError, ValueError):
        raise ValidationError(f"time_limit must be a number of seconds, got {time_limit!r}") from None
    if not t > 0:
        raise ValidationError(f"time_limit must be > 0 seconds, got {time_limit!r}")
    h.setOptionValue("time_limit", float(h.getRunTime()) + t)


def _vector(a: ArrayLike | float, size: int, name: str) -> NDArray[np.float64]:
    v = np.broadcast_to(np.asarray(a, dtype=np.float64), (size,)) if np.ndim(a) == 0 else np.asarray(a, float)
    if v.shape != (size,):
        raise ValidationError(f"{name} must have shape ({size},), got {v.shape}")
    if np.isnan(v).any():
        raise ValidationError(f"{name} has NaN at index {int(np.flatnonzero(np.isnan(v))[0])}")
    return np.ascontiguousarray(v, dtype=np.float64)


def _status(h: highspy.Highs) -> tuple[int, str, str]:
    import highspy

    ms = h.getModelStatus()
    s = highspy.HighsModelStatus
    if ms == s.kOptimal:
        code = 0
    elif ms.name in ("kTimeLimit", "kIterationLimit", "kSolutionLimit", "kInterrupt", "kHighsInterrupt"):
        code = 1
    elif ms == s.kInfeasible:
        code = 2
    elif ms == s.kUnbounded:
        code = 3
    else:  # kUnboundedOrInfeasible, errors, memory limit, objective bound/target, unknown
        code = 4
    return code, h.modelStatusToString(ms), str(ms.name)


def _run(h: highspy.Highs, time_limit: float | None) -> SolveResult:
    """Run HiGHS on the model it holds and read back a checked :class:`SolveResult`."""
    _set_time_limit(h, time_limit)
    t0 = time.perf_counter()
    h.run()
    seconds = time.perf_counter() - t0
    code, raw, name = _status(h)
    lp = h.getLp()
    nvar, nrow, nnz = int(h.getNumCol()), int(h.getNumRow()), int(h.getNumNz())
    its = int(h.getInfo().simplex_iteration_count)
    size = (seconds, nvar, nrow, nnz, name)
    if code != 0:
        detail = {1: "stopped at a time or iteration limit", 2: "is infeasible", 3: "is unbounded"}
        message = f"LP {detail.get(code, 'failed (numerical trouble or solver error)')} (HiGHS: {raw})"
        return SolveResult(False, code, message, raw, None, None, *size, iterations=its)
    sol = h.getSolution()
    x = np.asarray(sol.col_value, dtype=np.float64)
    ax = np.asarray(sol.row_value, dtype=np.float64)
    residual = _residual(x, ax, lp)
    if not np.isfinite(residual) or residual > RESIDUAL_TOL:
        message = f"HiGHS reported {raw!r} but the solution violates a row or bound by {residual:.3g} (relative)"
        return SolveResult(False, 4, message, raw, None, None, *size, iterations=its)
    objective = float(np.dot(np.asarray(lp.col_cost_, dtype=np.float64), x) + lp.offset_)
    duals = (np.asarray(sol.row_dual, dtype=np.float64), np.asarray(sol.col_dual, dtype=np.float64))
    return SolveResult(True, 0, f"Optimal (HiGHS: {raw})", raw, x, objective, *size, *duals, its)


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


#: The error raised for each failed status code (see :func:`error_type`).
_ERRORS: dict[int, type[SolverError]] = {
    1: SolverTimeLimitError,
    2: InfeasibleError,
    3: SolverNumericalError,
    4: SolverNumericalError,
}


def error_type(result: SolveResult) -> type[SolverError]:
    """The :class:`~metricdp.errors.SolverError` subclass of a failed result's status.

    Time limit (status 1 with HiGHS's ``kTimeLimit``):
    :class:`~metricdp.errors.SolverTimeLimitError`; another limit (iterations, an
    interrupt): plain :class:`~metricdp.errors.SolverError`; infeasible (2, or HiGHS's
    "infeasible or unbounded" with a zero objective, where unbounded is impossible, is
    the caller's to decide): :class:`~metricdp.errors.InfeasibleError`; unbounded (3:
    every LP of the family is bounded, so this is numerical trouble) and numerical
    trouble (4): :class:`~metricdp.errors.SolverNumericalError`.
    """
    if result.status == 1 and result.model_status not in ("", "kTimeLimit"):
        return SolverError
    return _ERRORS.get(result.status, SolverNumericalError)


def require_optimal(result: SolveResult, what: str) -> NDArray[np.float64]:
    """The solution of an optimal result; otherwise the typed error of its status.

    Never returns a non-optimal point: a time limit or numerical trouble is an error
    the caller must see, not a mechanism. The error (:func:`error_type`) carries
    ``status`` (``"limit"``, ``"infeasible"``, ``"unbounded"``, ``"numerical/other"``)
    and ``result``.
    """
    if result.status != 0 or result.x is None:
        raise error_type(result)(
            f"{what}: the LP did not reach optimality: {result.message} "
            f"[status {result.status} = {STATUS_NAMES.get(result.status, '?')}]",
            status=STATUS_NAMES.get(result.status, "numerical/other"),
            result=result,
        )
    return result.x


class LPModel:
    """An incremental HiGHS model: load once, then add rows or columns, change
    coefficients and re-solve warm-started (column and row generation).

    The only object besides the module functions that holds a ``highspy.Highs``; all
    its calls into HiGHS are here. ``method`` and ``options`` as :func:`new_highs`.
    """

    def __init__(self, *, method: str = "auto", options: Mapping[str, Any] | None = None) -> None:
        self.highs = new_highs(method=method, options=options)

    def set_options(self, options: Mapping[str, Any]) -> None:
        """Set raw HiGHS options (a rejected one is a ValidationError)."""
        _set_options(self.highs, options)

    def load(
        self,
        c: ArrayLike,
        A: sp.spmatrix | sp.sparray,
        row_lower: ArrayLike | float,
        row_upper: ArrayLike | float,
        col_lower: ArrayLike | float,
        col_upper: ArrayLike | float,
        *,
        time_limit: float | None = None,
    ) -> SolveResult:
        """Pass the model and solve it (:func:`solve_lp` on this instance)."""
        return solve_lp(c, A, row_lower, row_upper, col_lower, col_upper, time_limit=time_limit, highs=self.highs)

    @property
    def num_rows(self) -> int:
        return int(self.highs.getNumRow())

    @property
    def num_cols(self) -> int:
        return int(self.highs.getNumCol())

    def add_rows(self, A: sp.spmatrix | sp.sparray, lower: ArrayLike | float, upper: ArrayLike | float) -> None:
        """Append rows (:func:`add_rows`)."""
        add_rows(self.highs, A, lower, upper)

    def delete_rows(self, rows: ArrayLike) -> None:
        """Delete the rows of these indices (one call). Where every deleted row's slack is
        basic the basis stays a basis of the smaller model, so the next :meth:`resolve` is
        still warm; otherwise HiGHS rebuilds one (slower, never wrong)."""
        r = np.unique(np.asarray(rows, dtype=np.int32).ravel())
        if r.size and (r[0] < 0 or r[-1] >= self.num_rows):
            raise ValidationError(f"row index out of range: the model has {self.num_rows} rows")
        if r.size:
            self.highs.deleteRows(int(r.size), r)

    def add_cols(
        self, cost: ArrayLike, lower: ArrayLike | float, upper: ArrayLike | float, A: sp.spmatrix | sp.sparray
    ) -> None:
        """Append columns with entries ``A`` (shape (rows of the model, k)), in one call.

        The basis is kept (the new columns enter non-basic at their lower bound), so the
        next :meth:`resolve` starts from it.
        """
        a = sp.csc_matrix(A, dtype=np.float64)
        a.sum_duplicates()
        rows, k = a.shape
        if rows != self.num_rows:
            raise ValidationError(f"added columns have {rows} rows, the model has {self.num_rows}")
        if k == 0:
            return
        self.highs.addCols(
            k,
            _vector(cost, k, "cost"),
            _vector(lower, k, "lower"),
            _vector(upper, k, "upper"),
            int(a.nnz),
            a.indptr[:-1].astype(np.int32),
            a.indices.astype(np.int32),
            a.data,
        )

    def change_costs(self, cost: ArrayLike) -> None:
        """Replace the whole objective vector (basis kept: the next :meth:`resolve` is a
        primal-simplex warm start)."""
        m = self.num_cols
        self.highs.changeColsCost(m, np.arange(m, dtype=np.int32), _vector(cost, m, "cost"))

    def change_coeffs(self, rows: ArrayLike, cols: ArrayLike, values: ArrayLike) -> None:
        """Set the matrix entries ``(rows[k], cols[k])`` to ``values[k]`` (basis kept)."""
        r = np.asarray(rows, dtype=np.intp).ravel()
        c = np.broadcast_to(np.asarray(cols, dtype=np.intp), r.shape)
        v = np.broadcast_to(np.asarray(values, dtype=np.float64), r.shape)
        for i, j, x in zip(r.tolist(), c.tolist(), v.tolist(), strict=True):
            self.highs.changeCoeff(i, j, x)

    def resolve(self, *, time_limit: float | None = None) -> SolveResult:
        """Solve the held model again, warm-started (:func:`resolve`)."""
        return resolve(self.highs, time_limit=time_limit)

    def arrays(
        self,
    ) -> tuple[NDArray[np.float64], sp.csc_matrix, NDArray[np.float64], NDArray[np.float64],
               NDArray[np.float64], NDArray[np.float64]]:
        """The held model as arrays: ``(cost, A, row_lower, row_upper, col_lower, col_upper)``
        (for a dual certificate computed outside HiGHS)."""
        lp = self.highs.getLp()
        m, k = int(lp.num_row_), int(lp.num_col_)
        am = lp.a_matrix_
        parts = (np.asarray(am.value_, dtype=np.float64), np.asarray(am.index_), np.asarray(am.start_))
        rowwise = "row" in str(am.format_).lower()
        a = sp.csr_matrix(parts, shape=(m, k)) if rowwise else sp.csc_matrix(parts, shape=(m, k))
        return (np.asarray(lp.col_cost_, dtype=np.float64), sp.csc_matrix(a),
                np.asarray(lp.row_lower_, dtype=np.float64), np.asarray(lp.row_upper_, dtype=np.float64),
                np.asarray(lp.col_lower_, dtype=np.float64), np.asarray(lp.col_upper_, dtype=np.float64))

    def basis(self) -> tuple[NDArray[np.int8], NDArray[np.int8]] | None:
        """The last solve's basis: HiGHS's status codes of the columns and of the rows (0 at
        the lower bound, 1 basic, 2 at the upper bound, 3 free at zero); None when invalid."""
        b = self.highs.getBasis()
        if not b.valid:
            return None
        cols = np.fromiter((int(s) for s in b.col_status), dtype=np.int8, count=len(b.col_status))
        rows = np.fromiter((int(s) for s in b.row_status), dtype=np.int8, count=len(b.row_status))
        return cols, rows

r"""What an LP build will need, said before it starts, and its refusal when it cannot fit.

One :class:`LPPlan` per LP family: model size (variables, rows, non-zeros), memory (bytes)
and a time scale (seconds), from the sizes alone, for

* **OPTMech** (:func:`plan_optimal`): :math:`nm` variables and :math:`n(n-1)m` privacy
  rows. ``auto`` picks ``block-ipm`` for the expected objective on square spaces of at
  least :data:`AUTO_BLOCK_IPM_MIN_N` points, else ``fast``.
  ``block-ipm`` / ``ipm``: the interior point keeps a few (m, n, n) arrays alive at once,
  :func:`~metricdp.lp.ipm.ipm_bytes` (the figure it checks itself before it allocates);
  ``fast``: constraint generation adds privacy rows as they bind, at worst every row, so
  the bound is the ``full`` model's; ``full``: every row from the start (the need, not
  a worst case); ``dantzig-wolfe``: its pricing LPs and master
  (:func:`~metricdp.lp.dantzig_wolfe.dantzig_wolfe_bytes`).
* **SpannerMech** (:func:`plan_spanner`): OPTMech's :math:`n^2` variables with privacy
  rows on the spanner's edges only, :math:`2|E|n` of them (both directions, every
  output). Every formulation (``fast``: at worst every edge row; ``ipm``, ``full``:
  HiGHS on every edge row) is bounded by the model with all of them.
* **ConstOPTMech** (:func:`plan_constopt`): the reduced LP of the paper's Theorem 1
  (Imola et al., UAI 2022): :math:`n + f + 1` variables for f free entries, rows (18)
  and (20) (n each, about n non-zeros each), (22) (:math:`\sum_w |I(w)|(|I(w)|-1)`,
  two non-zeros each) and (25), (26) (f each, two non-zeros each). ``full`` holds every
  row at full width (rows (18) and (20) have about n non-zeros each). ``fast`` adds output
  columns as they bind, so its rows (18) and (20) stay short: its memory is its rows at
  two non-zeros each beside :data:`CONSTOPT_FAST_DENSE` dense (n, n) arrays (the
  measured peak of the n = 10,000, r = 5 build, 4.1 GiB, is about five of them).

Memory of a HiGHS model: :data:`BYTES_PER_ROW` a row with two non-zeros (index and value,
8 + 8 bytes, a bound, and HiGHS' own copies), 16 bytes for each further non-zero, plus the
builder's dense (n, m) arrays (16 of them: distances, loss, masks, the matrix and its
repair's temporaries).

Time is an order of magnitude only: :math:`T = T_0 (n / n_0)^k`, scaled from one
reference build per family and formulation (benchmarks/RESULTS.md, GloVe spaces on a
small shared machine): OPTMech's 10 x 10 grid with ``block-ipm`` (85 s at n = 100,
:math:`k = 3.5`); SpannerMech with ``ipm`` at eps 1 (180 CPU s at n = 200; 9.7 at
n = 100 gives :math:`k \approx 4.2`); ConstOPTMech ``fast`` with r = 10 (paper fit 3.4 s
at n = 400 and 64 s at n = 2,000: :math:`k \approx 1.8`; the normalised fit about twice
the paper fit's; ``full`` 516 s at n = 400, :math:`k` taken as OPTMech's 3.5). Builds
vary far more than this with epsilon and the metric (an order of magnitude between eps
0.5 and 1 on GloVe spaces), so the estimate is a scale, not a promise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from .._resources import format_bytes, memory_limit
from ..errors import ResourceLimitError

__all__ = [
    "AUTO_BLOCK_IPM_MIN_N", "BYTES_PER_ROW", "CONSTOPT_FAST_DENSE", "LPPlan", "auto_formulation", "check_plan",
    "plan_constopt", "plan_optimal", "plan_spanner",
]

#: Bytes per privacy row with two non-zeros (index and value of each, a bound, HiGHS' copies).
BYTES_PER_ROW = 96.0
#: Bytes per further non-zero (index and value).
BYTES_PER_NONZERO = 16.0
#: Dense (n, m) float64 arrays a builder keeps beside its model.
DENSE_ARRAYS = 16

#: Dense (n, n) float64 arrays of a ``fast`` ConstOPTMech build (module docstring).
CONSTOPT_FAST_DENSE = 5

#: (seconds, n, exponent) of the reference builds (module docstring).
_OPTIMAL_REF = (85.0, 100, 3.5)
_SPANNER_REF = (180.0, 200, 4.2)
_CONSTOPT_FAST_REF = (3.4, 400, 1.8)
_CONSTOPT_FULL_REF = (516.0, 400, 3.5)
#: The normalised fit's time over the paper fit's (7.8 s against 3.4 s at n = 400).
_NORMALISED_FACTOR = 2.3


@dataclass(frozen=True)
class LPPlan:
    """What an LP build will need: model size, memory (bytes) and time (seconds, a scale).

    ``privacy_rows`` counts the rows that constraint generation may add (every one in the
    worst case); ``rows`` and ``nonzeros`` are the whole model's.
    """

    n: int
    m: int
    formulation: str
    variables: int
    privacy_rows: int
    bytes: float
    seconds: float
    family: str = "optimal"
    rows: int = 0
    nonzeros: int = 0

    @property
    def bound(self) -> bool:
        """True when the figures bound a model grown by constraint or column generation."""
        return self.formulation in ("fast", "auto")

    def summary(self) -> str:
        """One line for people: sizes, memory and time."""
        up = "up to " if self.bound else ""
        nonzeros = f", {self.nonzeros:,} non-zeros" if self.nonzeros else ""
        return (f"{self.family} ({self.formulation}) on {self.n:,} x {self.m:,}: {self.variables:,} variables, "
                f"{up}{self.privacy_rows:,} privacy rows{nonzeros}; memory {up}{format_bytes(self.bytes)}, time of "
                f"the order of {_duration(self.seconds)}")


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400.0), ("hours", 3600.0), ("minutes", 60.0)):
        if seconds >= size:
            count = round(seconds / size)
            return f"{count} {unit if count != 1 else unit[:-1]}"
    return f"{max(seconds, 1.0):.0f} s"


def _seconds(ref: tuple[float, int, float], n: int) -> float:
    seconds, n0, k = ref
    return seconds * (n / n0) ** k


#: ``formulation="auto"`` takes ``block-ipm`` for the expected objective on a square space
#: of at least this many points, ``fast`` otherwise. Why 36: below it (a 5 x 5 grid)
#: ``fast`` is as quick; from a 6 x 6 grid on, its constraint generation needs many rounds
#: and ``block-ipm`` finishes several times sooner, and from 8 x 8 grids or 50 Gaussian
#: points ``fast`` may not finish at all in reasonable time. The builds: benchmarks/RESULTS.md.
#: ``dantzig-wolfe`` (:mod:`metricdp.lp.dantzig_wolfe`) is never taken: back to back with the
#: others on the grids with a Dirichlet(0.5) prior (benchmarks/bench_lp_grid.py's data) it was
#: the slowest at every size tried (5 x 5 at eps 0.3 and 1 per cell: 5 to 15 times
#: ``column-generation``'s time, 10 to 30 times ``block-ipm``'s), its master needing tens to
#: hundreds of rounds where the interior point needs one solve, and at 20 x 20 it does not
#: finish within the 3 minutes of the target. The builds: benchmarks/RESULTS.md.
AUTO_BLOCK_IPM_MIN_N = 36


def auto_formulation(n: int, expected: bool, square: bool) -> str:
    """The formulation ``formulation="auto"`` takes for n points: the one rule, stated at
    :data:`AUTO_BLOCK_IPM_MIN_N` (``block-ipm`` for the expected objective on square spaces from
    that size, ``fast`` otherwise; never ``column-generation`` or ``dantzig-wolfe``)."""
    return "block-ipm" if expected and square and n >= AUTO_BLOCK_IPM_MIN_N else "fast"


def _model_bytes(rows: int, nonzeros: int, n: int, m: int) -> float:
    """A HiGHS model of ``rows`` rows and ``nonzeros`` non-zeros beside the builder's dense arrays."""
    return BYTES_PER_ROW * rows + BYTES_PER_NONZERO * max(0, nonzeros - 2 * rows) + 8.0 * DENSE_ARRAYS * n * m


def plan_optimal(n: int, m: int | None = None, *, objective: str = "worst", formulation: str = "auto") -> LPPlan:
    """The plan of ``optimal`` on n inputs and m outputs (module docstring)."""
    from ..lp.dantzig_wolfe import dantzig_wolfe_bytes
    from ..lp.ipm import ipm_bytes

    m = n if m is None else m
    if formulation == "auto":
        formulation = auto_formulation(n, objective == "expected", m == n)
    privacy = n * (n - 1) * m
    rows, nonzeros = privacy + n, 2 * privacy + n * m
    if formulation in ("block-ipm", "ipm"):
        need = ipm_bytes(n, m)
    elif formulation == "dantzig-wolfe":
        need = dantzig_wolfe_bytes(n)
    else:
        need = BYTES_PER_ROW * privacy + 8.0 * DENSE_ARRAYS * n * m
    return LPPlan(n, m, formulation, n * m, privacy, need, _seconds(_OPTIMAL_REF, max(n, m)), "optimal", rows,
                  nonzeros)


def plan_spanner(n: int, edges: int, *, formulation: str = "fast") -> LPPlan:
    """The plan of ``spanner`` on n points whose spanner has ``edges`` edges (module docstring)."""
    privacy = 2 * edges * n
    rows = privacy + 2 * n  # row sums, and the worst-case loss of each row
    nonzeros = 2 * privacy + 2 * n * n + n
    return LPPlan(n, n, formulation, n * n + 1, privacy, _model_bytes(rows, nonzeros, n, n),
                  _seconds(_SPANNER_REF, n), "spanner", rows, nonzeros)


def plan_constopt(free: NDArray[np.bool_], *, formulation: str = "fast", fit: str = "normalised",
                  lambdas: int = 3) -> LPPlan:
    """The plan of ``constopt`` on the (n, n) mask of free entries (module docstring).

    ``lambdas`` is the number of paper-fit LPs (one per lambda); the normalised fit adds
    its own sequence of LPs, about as long again (:data:`_NORMALISED_FACTOR`).
    """
    n = int(free.shape[0])
    per_column = free.sum(axis=0).astype(np.int64)
    f = int(per_column.sum())
    rows22 = int((per_column * (per_column - 1)).sum())
    rows = 2 * n + rows22 + 2 * f
    nonzeros = 2 * n * (n + 1) + 2 * rows22 + 4 * f
    if formulation == "full":
        ref, need = _CONSTOPT_FULL_REF, _model_bytes(rows, nonzeros, n, n)
    else:
        ref, need = _CONSTOPT_FAST_REF, BYTES_PER_ROW * rows + 8.0 * CONSTOPT_FAST_DENSE * n * n
    runs = max(1, lambdas) / 3.0 + (_NORMALISED_FACTOR - 1.0 if fit == "normalised" else 0.0)
    return LPPlan(n, n, formulation, n + f + 1, rows22 + 2 * f, need, runs * _seconds(ref, n), "constopt", rows,
                  nonzeros)


def check_plan(plan: LPPlan, suggestion: str = "") -> None:
    """Refuse (ResourceLimitError) a plan over the memory limit, with ``suggestion``: one error, before any work."""
    limit = memory_limit()
    if not plan.bytes <= limit:  # NaN (an overflowed estimate) is refused too
        raise ResourceLimitError(
            f"{plan.family} on {plan.n:,} points needs {'up to ' if plan.bound else ''}"
            f"{format_bytes(plan.bytes)} ({plan.formulation}, {plan.privacy_rows:,} privacy rows) and the limit is "
            f"{format_bytes(limit)}{'; ' + suggestion if suggestion else ''}"
        )

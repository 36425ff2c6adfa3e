"""Size, memory and time of an OPTMech build, said before it starts (and a refusal when it cannot fit).

The LP of :func:`~metricdp.mechanisms.optimal.optimal` has :math:`nm` variables and
:math:`n(n-1)m` privacy rows. What it needs depends on the formulation
(``auto`` picks ``block-ipm`` for the expected objective on square spaces of at least
:data:`~metricdp.mechanisms.optimal.AUTO_BLOCK_IPM_MIN_N` points, else ``fast``):

* ``block-ipm`` / ``ipm``: the interior point keeps a few (m, n, n) arrays alive at once,
  :func:`~metricdp.lp.ipm.ipm_bytes` (the figure it checks itself before it
  allocates);
* ``fast``: constraint generation adds privacy rows as they bind; at worst every row,
  so the bound is the ``full`` model's: each row holds two non-zeros (index and value,
  8 + 8 bytes) and a bound, plus HiGHS' own copies, about :data:`BYTES_PER_ROW` bytes a row;
* ``full``: every row from the start (that bound is the need, not a worst case).

Time is an order of magnitude only: whole builds grow about as :math:`n^{3.5}`, scaled
here from one reference build (the 10 x 10 grid's expected-loss build with ``block-ipm``
on a small shared machine; see benchmarks/RESULTS.md). The ``fast`` worst-case builds vary
far more with epsilon and the metric (an order of magnitude between eps 0.5 and 1 on
GloVe spaces), so the estimate is a scale, not a promise.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._resources import format_bytes, memory_limit
from ..errors import ResourceLimitError

__all__ = ["BYTES_PER_ROW", "LPPlan", "check_plan", "plan_optimal"]

#: Bytes per privacy row in the ``full`` model (two non-zeros, a bound, HiGHS' copies).
BYTES_PER_ROW = 96.0
#: Seconds of the reference build (the 10 x 10 grid, expected loss, block-ipm) and its exponent in n.
_REF_SECONDS, _REF_N, _EXPONENT = 85.0, 100, 3.5


@dataclass(frozen=True)
class LPPlan:
    """What an OPTMech build will need: model size, memory (bytes) and time (seconds, a scale)."""

    n: int
    m: int
    formulation: str
    variables: int
    privacy_rows: int
    bytes: float
    seconds: float

    def summary(self) -> str:
        """One line for people: sizes, memory and time."""
        bound = "up to " if self.formulation == "fast" else ""
        return (f"optimal ({self.formulation}) on {self.n:,} x {self.m:,}: {self.variables:,} variables, "
                f"{self.privacy_rows:,} privacy rows; memory {bound}{format_bytes(self.bytes)}, time of the order "
                f"of {_duration(self.seconds)}")


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400.0), ("hours", 3600.0), ("minutes", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{max(seconds, 1.0):.0f} s"


def plan_optimal(n: int, m: int | None = None, *, objective: str = "worst", formulation: str = "auto") -> LPPlan:
    """The plan of ``optimal`` on n inputs and m outputs (module docstring)."""
    from ..lp.ipm import ipm_bytes
    from .optimal import AUTO_BLOCK_IPM_MIN_N

    m = n if m is None else m
    if formulation == "auto":
        formulation = "block-ipm" if objective == "expected" and m == n and n >= AUTO_BLOCK_IPM_MIN_N else "fast"
    rows = n * (n - 1) * m
    if formulation in ("block-ipm", "ipm"):
        need = ipm_bytes(n, m)
    else:
        need = BYTES_PER_ROW * rows + 8.0 * 16 * n * m
    seconds = _REF_SECONDS * (max(n, m) / _REF_N) ** _EXPONENT
    return LPPlan(n, m, formulation, n * m, rows, need, seconds)


def check_plan(plan: LPPlan, suggestion: str = "") -> None:
    """Refuse (ResourceLimitError) a plan over the memory limit, with ``suggestion``."""
    limit = memory_limit()
    if not plan.bytes <= limit:
        raise ResourceLimitError(
            f"optimal on {plan.n:,} points needs {'up to ' if plan.formulation == 'fast' else ''}"
            f"{format_bytes(plan.bytes)} ({plan.formulation}, {plan.privacy_rows:,} privacy rows) and the limit is "
            f"{format_bytes(limit)}{'; ' + suggestion if suggestion else ''}"
        )

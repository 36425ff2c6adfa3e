"""Memory and time of a dense n x n build (planar Laplace, exponential, a remap), said before it starts.

The builders of :mod:`~metricdp.mechanisms.planar_laplace` (with
:mod:`metricdp.location.cells`), :mod:`~metricdp.mechanisms.exponential` and
:mod:`metricdp.remap` hold a few dense n x n float64 arrays at once (the distances, the
integrated or kernel matrix, its logarithm for the audit, the remap's posterior costs);
:data:`ARRAYS` is how many at their peak, counted from the code and checked against the
peak resident memory of builds of 5,304 cells (benchmarks/bench_cells_route.py). Time
grows as n^2 with the structured audits of :mod:`metricdp.audit_structured` (above
:data:`~metricdp.audit_structured.DENSE_MAX_N` points) and as n^3 with the dense audit
below it and in the remap's posterior costs (one BLAS product); the figures are an order
of magnitude, scaled from those builds on a small shared machine, not a promise.

:func:`check_dense_plan` refuses a plan over the memory limit
(:func:`metricdp._resources.memory_limit`) before anything is allocated, with a
suggestion: coarser cells or a smaller region, the two things that shrink n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._resources import format_bytes, memory_limit
from ..audit_structured import DENSE_MAX_N
from ..errors import ResourceLimitError

__all__ = ["ARRAYS", "DensePlan", "check_dense_plan", "plan_dense"]

#: Dense n x n float64 arrays alive at the peak of each build (the interpreter and numpy, ~200 MB, come on top).
ARRAYS = {"planar-laplace": 9.0, "exponential": 7.0, "remap": 5.0}
_RESIDENT = 2.0  # a built mechanism: its matrix and its space's distances
#: Seconds per n^2 element of the structured builds, and per n^3 of the dense audit and the remap's product.
_PER_PAIR = {"planar-laplace": 1.5e-6, "exponential": 0.6e-6, "remap": 0.5e-6}
_PER_TRIPLE_AUDIT = 2e-8
_PER_TRIPLE_BLAS = 2e-10


@dataclass(frozen=True)
class DensePlan:
    """What a dense build on ``n`` points will need: ``bytes`` at its peak, ``seconds`` (a scale), the audit."""

    name: str
    n: int
    remap: bool
    audit: str
    bytes: float
    seconds: float

    def summary(self) -> str:
        """One line for people."""
        what = f"{self.name}{' + remap' if self.remap else ''}"
        return (f"{what} on {self.n:,} points: memory about {format_bytes(self.bytes)}, time of the order of "
                f"{_duration(self.seconds)}, audit {self.audit}")

    def as_dict(self) -> dict[str, object]:
        """The plan as JSON-ready figures."""
        return {"mechanism": self.name, "n": self.n, "remap": self.remap, "audit": self.audit,
                "bytes": self.bytes, "seconds": self.seconds}


def _duration(seconds: float) -> str:
    for unit, size in (("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{max(seconds, 1.0):.0f} s"


def plan_dense(name: str, n: int, *, remap: bool = False, structured: bool | None = None) -> DensePlan:
    """The plan of ``name`` (``planar-laplace`` or ``exponential``) on n points, optionally remapped.

    ``structured`` says whether the structured audit applies (default: above
    :data:`~metricdp.audit_structured.DENSE_MAX_N` points).
    """
    if name not in ("planar-laplace", "exponential"):
        raise ValueError(f"no dense plan for {name!r}")
    structured = n > DENSE_MAX_N if structured is None else structured
    square = 8.0 * float(n) * float(n)
    # the remap runs once the builder's temporaries are gone: its arrays beside the matrix and distances
    arrays = max(ARRAYS[name], _RESIDENT + ARRAYS["remap"]) if remap else ARRAYS[name]
    seconds = _PER_PAIR[name] * n * n
    if remap:
        seconds += _PER_PAIR["remap"] * n * n + _PER_TRIPLE_BLAS * float(n) ** 3
    if not structured:
        seconds += _PER_TRIPLE_AUDIT * float(n) ** 3 * (2 if remap else 1)
    audit = ({"planar-laplace": "lattice-chain", "exponential": "kernel"}[name] + (" + post-processing" if remap
                                                                                    else "")) if structured \
        else "dense"
    return DensePlan(name, int(n), bool(remap), audit, arrays * square, seconds)


def check_dense_plan(plan: DensePlan) -> None:
    """Refuse (ResourceLimitError) a plan over the memory limit, with what would fit."""
    limit = memory_limit()
    if plan.bytes <= limit:
        return
    fits = int(math.sqrt(limit / (plan.bytes / float(plan.n) ** 2)))
    side = math.sqrt(plan.n / max(fits, 1))
    raise ResourceLimitError(
        f"{plan.name}{' with a remap' if plan.remap else ''} on {plan.n:,} points needs about "
        f"{format_bytes(plan.bytes)} and the limit is {format_bytes(limit)}: at most about {fits:,} points fit; "
        f"use cells about {side:.2g} times as wide (coarser cells) or a smaller region"
    )

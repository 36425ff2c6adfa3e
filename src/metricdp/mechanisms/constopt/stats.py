"""LP statistics of one ConstOPTMech fit: accumulated over its LPs (:class:`FitStats`),
reported as they come (progress) and summarised for ``info["lp"]`` (:func:`lp_info`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from ..._progress import Progress, report
from ...lp._solve import SolveResult
from ...lp.deadline import Deadline
from .cone import DROP_TOL, Cone

__all__ = ["FitStats", "lp_info"]


@dataclass
class FitStats:
    """LP statistics accumulated over every LP of one fit."""

    lps: int = 0
    optimal: int = 0
    rounds: int = 0
    seconds: float = 0.0
    variables: int = 0
    constraints: int = 0
    nonzeros: int = 0
    status: int = 0
    highs_status: str = ""
    message: str = ""
    rows22: int = 0
    blocks: int = 0
    iterations: int = 0
    #: the last failed solve (its status picks the error type when no LP succeeds)
    failure: SolveResult | None = None
    progress: Progress | None = field(default=None, repr=False)
    deadline: Deadline | None = field(default=None, repr=False)
    #: serialises the progress reports of models solved in threads (:meth:`fork`)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def fork(self) -> FitStats:
        """Empty statistics for a model solved beside this fit's (merged back by :meth:`merge`);
        they report to the same progress callback, one call at a time."""
        return FitStats(progress=self.progress, deadline=self.deadline, lock=self.lock)

    def merge(self, other: FitStats) -> None:
        """Add a forked model's statistics, as if its solves had been recorded here after ours."""
        self.lps += other.lps
        self.optimal += other.optimal
        self.rounds += other.rounds
        self.seconds += other.seconds
        self.iterations += other.iterations
        self.variables = max(self.variables, other.variables)
        self.constraints = max(self.constraints, other.constraints)
        self.nonzeros = max(self.nonzeros, other.nonzeros)
        if other.failure is not None:
            self.failure = other.failure
        if other.highs_status and (other.status != 0 or not self.highs_status):
            self.status, self.highs_status, self.message = other.status, other.highs_status, other.message
        if other.lps:  # the last model's counts, as a sequential fit leaves them
            self.rows22, self.blocks = other.rows22, other.blocks

    def record(self, r: SolveResult) -> None:
        """Count one solve and report it to ``progress`` (LP, round, rows, iterations, objective, time left)."""
        self.lps += 1
        self.iterations += r.iterations
        if r.status != 0:
            self.failure = r
        self.optimal += r.status == 0
        self.seconds += r.seconds
        self.variables = max(self.variables, r.variables)
        self.constraints = max(self.constraints, r.constraints)
        self.nonzeros = max(self.nonzeros, r.nonzeros)
        if r.status != 0 or not self.highs_status:
            self.status, self.highs_status, self.message = r.status, r.highs_status, r.message
        objective = "-" if r.objective is None else f"{r.objective:.10g}"
        left = "" if self.deadline is None else f", {self.deadline.describe()}"
        with self.lock:
            report(
                self.progress,
                self.lps,
                None,
                f"constopt: LP {self.lps} (round {self.rounds}): {r.constraints:,} rows, {r.iterations:,} simplex "
                f"iterations, objective {objective}{left}",
            )


def lp_info(cone: Cone, stats: FitStats, formulation: str) -> dict[str, Any]:
    """LP statistics, with the paper's counts (Theorem 1) beside the rows actually solved."""
    n, nf = cone.n, cone.nfree
    bounded = int(cone.bounded.sum())
    counts = {
        "variables": n + nf + 1,
        "free_entries": nf,
        "rows_18": n,
        "rows_20": n,
        "rows_22": len(cone.pi),
        "rows_25": bounded,
        "rows_26": bounded,
    }
    return {
        "formulation": formulation,
        "variables": stats.variables,
        "constraints": stats.constraints,
        "nonzeros": stats.nonzeros,
        "solve_seconds": stats.seconds,
        "status": stats.status,
        "highs_status": stats.highs_status,
        "lps_solved": stats.lps,
        "simplex_iterations": stats.iterations,
        "rounds": stats.rounds,
        "rows_22_implied": int(cone.implied.sum()),
        "rows_22_solved": len(cone.pi) if formulation == "full" else stats.rows22,
        "dropped_terms": int((cone.g < DROP_TOL).sum()),
        "outputs_in_model": cone.n if formulation == "full" else stats.blocks,
        "paper_counts": counts,
    }

"""Privacy per person: composition, budgets, contribution bounds and a persistent ledger.

* :mod:`.composition` -- what a person's releases cost together (sequential, parallel,
  post-processing), per-person eps of a release and its quantiles;
* :mod:`.accountant` -- :class:`Accountant`, an in-memory per-person budget, and
  :func:`bound_contributions`, at most ``k`` rows per person chosen at random;
* :mod:`.ledger` -- :class:`Ledger`, per-person spend that survives runs, processes and
  crashes (SQLite file or SQLAlchemy URL), with keyed hashes instead of ids;
* :mod:`.plan` -- :func:`plan_release`, one release's accounting from start to finish (cap,
  consistent groups, memo, budget), what a command calls before drawing anything.

The theorems are proved in ``docs/proofs/composition.md``; ``docs/accounting.md`` is the guide.
"""

from __future__ import annotations

from .accountant import Accountant, Grant, bound_contributions
from .composition import (
    EpsilonSummary,
    consistent_epsilon,
    joint_bound,
    parallel,
    per_person_epsilon,
    repeated,
    sequential,
    summarize,
)
from .ledger import Ledger, Reservation
from .plan import Plan, plan_release

__all__ = [
    "Accountant",
    "EpsilonSummary",
    "Grant",
    "Ledger",
    "Plan",
    "Reservation",
    "bound_contributions",
    "consistent_epsilon",
    "joint_bound",
    "parallel",
    "per_person_epsilon",
    "plan_release",
    "repeated",
    "sequential",
    "summarize",
]

"""OPTMech's plan: the names :mod:`metricdp.mechanisms.lp_plan` states for every LP family.

Size, memory and time of an OPTMech build, said before it starts, and a refusal when it
cannot fit: :func:`~metricdp.mechanisms.lp_plan.plan_optimal` and
:func:`~metricdp.mechanisms.lp_plan.check_plan` (the module docstring there says how).
"""

from __future__ import annotations

from .lp_plan import BYTES_PER_ROW, LPPlan, check_plan, plan_optimal

__all__ = ["BYTES_PER_ROW", "LPPlan", "check_plan", "plan_optimal"]

"""metricdp: metric differential privacy on finite metric spaces.

A mechanism M satisfies eps-mDP when Pr[M(u)=w] <= exp(eps d(u,v)) Pr[M(v)=w] for all
inputs u, v and outputs w.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .audit import AuditResult, audit, audit_epsilon, epsilon_tight, hockey_stick
from .errors import (
    MechanismFileError,
    MetricDPError,
    PrivacyLeakWarning,
    PrivacyViolationError,
    SolverError,
    ValidationError,
)
from .io import load_mechanism, read_points, save_mechanism
from .loss import element_losses, expected_loss, quantile_loss, uniform_losses, worst_case_loss
from .mechanisms.base import Mechanism, certify
from .spaces import MetricSpace

__all__ = [
    "AuditResult",
    "Mechanism",
    "MechanismFileError",
    "MetricDPError",
    "MetricSpace",
    "PrivacyLeakWarning",
    "PrivacyViolationError",
    "SolverError",
    "ValidationError",
    "__version__",
    "audit",
    "audit_epsilon",
    "certify",
    "element_losses",
    "epsilon_tight",
    "expected_loss",
    "hockey_stick",
    "load_mechanism",
    "quantile_loss",
    "read_points",
    "save_mechanism",
    "uniform_losses",
    "worst_case_loss",
]

"""metricdp: metric differential privacy on finite metric spaces.

A mechanism M satisfies eps-mDP when Pr[M(u)=w] <= exp(eps d(u,v)) Pr[M(v)=w] for all
inputs u, v and outputs w.

Package convention: a name equal to a submodule is always that submodule
(``metricdp.audit`` is the module; its function is ``metricdp.audit.audit``).
"""

from __future__ import annotations

from ._version import __version__
from .audit import AuditResult, audit_epsilon, epsilon_tight, hockey_stick
from .errors import (
    MechanismFileError,
    MetricDPError,
    PrivacyLeakWarning,
    PrivacyViolationError,
    SolverError,
    ValidationError,
)
from .io import read_points
from .loss import element_losses, expected_loss, quantile_loss, uniform_losses, worst_case_loss
from .mechanisms.base import Mechanism, certify
from .mechanisms.file import load_mechanism
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
    "audit_epsilon",
    "certify",
    "element_losses",
    "epsilon_tight",
    "expected_loss",
    "hockey_stick",
    "load_mechanism",
    "quantile_loss",
    "read_points",
    "uniform_losses",
    "worst_case_loss",
]

from ._lazy import submodule_getattr

__getattr__ = submodule_getattr(__name__, __path__)

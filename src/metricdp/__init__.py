"""metricdp: metric differential privacy on finite metric spaces.

A mechanism M satisfies eps-mDP when Pr[M(u)=w] <= exp(eps d(u,v)) Pr[M(v)=w] for all
inputs u, v and outputs w.

Package convention: a name equal to a submodule is always that submodule
(``metricdp.audit`` is the module; its function is ``metricdp.audit.audit``).

The public names below are resolved on first access (PEP 562): ``import metricdp`` imports
only the errors and the version, so that the ``metricdp`` command and every subprocess start
without scipy or pyarrow; ``from metricdp import MetricSpace`` imports what that name needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import submodule_getattr
from ._version import __version__
from .errors import (
    MechanismFileError,
    MetricDPError,
    PrivacyLeakWarning,
    PrivacyViolationError,
    SolverError,
    ValidationError,
)

if TYPE_CHECKING:
    from .audit import AuditResult, audit_epsilon, epsilon_tight, hockey_stick
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

#: Each lazy public name -> the module that defines it.
_LAZY = {
    "AuditResult": "audit", "audit_epsilon": "audit", "epsilon_tight": "audit", "hockey_stick": "audit",
    "read_points": "io",
    "element_losses": "loss", "expected_loss": "loss", "quantile_loss": "loss", "uniform_losses": "loss",
    "worst_case_loss": "loss",
    "Mechanism": "mechanisms.base", "certify": "mechanisms.base",
    "load_mechanism": "mechanisms.file",
    "MetricSpace": "spaces",
}

__getattr__ = submodule_getattr(__name__, __path__, _LAZY)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

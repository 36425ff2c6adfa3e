"""Exception and warning types of metricdp.

Every error a user can trigger with bad input is a :class:`MetricDPError`; the CLI turns
them into one line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

__all__ = [
    "MechanismFileError",
    "MetricDPError",
    "PrivacyLeakWarning",
    "PrivacyViolationError",
    "SolverError",
    "ValidationError",
]


class MetricDPError(Exception):
    """Base class of all errors raised by metricdp on purpose."""


class ValidationError(MetricDPError, ValueError):
    """An argument is not valid; the message names the argument and the culprit."""


class MechanismFileError(ValidationError):
    """A file is not a valid metricdp mechanism file."""


class SolverError(MetricDPError, RuntimeError):
    """A linear program did not reach a usable optimum (infeasible, time limit, numerics)."""

    def __init__(self, message: str, *, status: str | None = None, result: object | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.result = result


class PrivacyViolationError(MetricDPError, RuntimeError):
    """A built matrix failed the independent audit at the requested epsilon.

    Raised by builders instead of returning a matrix that is not exactly eps-mDP.
    """


class PrivacyLeakWarning(UserWarning):
    """A choice depends on the data (or a seed makes releases predictable)."""

"""Exception and warning types of metricdp.

Every error a user can trigger with bad input is a :class:`MetricDPError`; the CLI turns
them into one line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "ClaimError",
    "EngineError",
    "InfeasibleError",
    "MechanismFileError",
    "MetricDPError",
    "PrivacyLeakWarning",
    "PrivacyViolationError",
    "RepairError",
    "ResourceLimitError",
    "SolverError",
    "SolverNumericalError",
    "SolverTimeLimitError",
    "UnnamedColumnsWarning",
    "UnsafeOutputError",
    "ValidationError",
]


class MetricDPError(Exception):
    """Base class of all errors raised by metricdp on purpose."""


class ValidationError(MetricDPError, ValueError):
    """An argument is not valid; the message names the argument and the culprit."""


class MechanismFileError(ValidationError):
    """A file is not a valid metricdp mechanism file."""


class ResourceLimitError(ValidationError):
    """A computation would need more memory (or another resource) than the configured limit.

    Raised before anything is allocated; the message gives the size needed and the limit.
    """


class UnsafeOutputError(ValidationError):
    """An output path that must not be written: a device, FIFO, directory, or one of the inputs."""


class EngineError(MetricDPError, RuntimeError):
    """A Dask or Spark job failed for a reason other than the input (a worker died, a JVM error).

    The message is the root cause in one line; the engine's own exception is chained.
    """


class SolverError(MetricDPError, RuntimeError):
    """A linear program did not reach a usable optimum (infeasible, time limit, numerics).

    The subclasses name the conditions callers branch on; code never inspects the message.
    """

    def __init__(self, message: str, *, status: str | None = None, result: object | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.result = result


class SolverTimeLimitError(SolverError):
    """The build's deadline (``time_limit``, the whole build) passed before an optimum was reached."""


class InfeasibleError(SolverError):
    """The solver proved the linear program infeasible."""


class SolverNumericalError(SolverError):
    """The solver stopped on numerical trouble (or called a bounded LP unbounded)."""


class PrivacyViolationError(MetricDPError, RuntimeError):
    """A built matrix failed the independent audit at the requested epsilon.

    Raised by builders instead of returning a matrix that is not exactly eps-mDP.
    """


class RepairError(PrivacyViolationError):
    """The tolerance repair of an LP solution could not make it exactly eps-mDP.

    ``retryable`` is True when solving again with a larger margin can help (the repair
    could not spread the solver's error), False when it cannot (underflow, an all-zero row).
    """

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class ClaimError(MechanismFileError, PrivacyViolationError):
    """A mechanism file whose privacy claim does not hold (exit status 1 in the CLI).

    Both a bad file (:class:`MechanismFileError`) and a matrix that is not what it claims
    (:class:`PrivacyViolationError`): a caller catching either sees it.
    """


class BudgetExceededError(MetricDPError):
    """A release would take some persons over their privacy budget; nothing was spent.

    ``over`` is how many persons would exceed it and ``persons`` how many the release
    touches; the message never names a person.
    """

    def __init__(self, message: str, *, over: int, persons: int) -> None:
        super().__init__(message)
        self.over = over
        self.persons = persons


class PrivacyLeakWarning(UserWarning):
    """A choice depends on the data (or a seed makes releases predictable)."""


class UnnamedColumnsWarning(PrivacyLeakWarning):
    """Columns leave a release with their true values and nobody named them in ``keep`` or ``drop``.

    Its own category (a :class:`PrivacyLeakWarning`) so that a pipeline can turn exactly this
    notice into an error, or silence it once the columns are reviewed, without touching the
    randomness rule's warning.
    """

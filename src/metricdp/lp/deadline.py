"""The deadline of an LP build: what every LP builder's ``time_limit`` means.

``time_limit`` (seconds) bounds **the whole build**: the clock starts when the builder is
called, and every LP solve of the build (constraint-generation rounds, re-solves after a
failed repair, calibration steps, every fit of ConstOPTMech) gets only the time left.
When it has run out, the build raises :class:`~metricdp.errors.SolverTimeLimitError`
(``status="limit"``). Work that is not an LP solve (the spanner, the repair, the final
audit) is not interrupted, so a build can overrun by the length of one such step.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from ..errors import SolverTimeLimitError, ValidationError

__all__ = ["Deadline"]

#: Shortest time limit handed to HiGHS (it rejects 0); a solve given this little time
#: stops at once with status 1 ("limit").
_MIN_SOLVE_SECONDS = 1e-3


class Deadline:
    """A build's time budget, started at construction (``None`` = unlimited).

    Parameters
    ----------
    time_limit : float or None
        Seconds for the whole build, > 0 (``inf`` is the same as ``None``).
    clock : callable, optional
        Monotonic seconds (default :func:`time.monotonic`; tests pass a fake one).

    Examples
    --------
    >>> d = Deadline(None)
    >>> d.remaining() is None, d.expired(), d.describe()
    (True, False, 'no time limit')
    """

    def __init__(self, time_limit: float | None, *, clock: Callable[[], float] | None = None) -> None:
        if time_limit is not None:
            if isinstance(time_limit, bool):
                raise ValidationError(f"time_limit must be a number of seconds, got {time_limit!r}")
            try:
                time_limit = float(time_limit)
            except (TypeError, ValueError):
                raise ValidationError(f"time_limit must be a number of seconds, got {time_limit!r}") from None
            if not time_limit > 0:  # also NaN
                raise ValidationError(f"time_limit must be > 0 seconds, got {time_limit!r}")
            if math.isinf(time_limit):
                time_limit = None
        self.total: float | None = time_limit
        self._clock = time.monotonic if clock is None else clock
        self._end = None if time_limit is None else self._clock() + time_limit

    @classmethod
    def of(cls, time_limit: float | Deadline | None) -> Deadline:
        """``time_limit`` itself when it is already a Deadline (passed down a build), else a new one."""
        return time_limit if isinstance(time_limit, Deadline) else cls(time_limit)

    def remaining(self) -> float | None:
        """Seconds left (0 once expired); ``None`` when unlimited."""
        if self._end is None:
            return None
        return max(self._end - self._clock(), 0.0)

    def expired(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0

    def solve_limit(self) -> float | None:
        """The time limit for the next LP solve: what is left, at least 1 ms (HiGHS then
        stops at once with status 1 and the caller handles the failed solve)."""
        left = self.remaining()
        return None if left is None else max(left, _MIN_SOLVE_SECONDS)

    def require(self, what: str) -> float | None:
        """:meth:`solve_limit`, or :class:`~metricdp.errors.SolverTimeLimitError` once expired."""
        if self.expired():
            raise SolverTimeLimitError(
                f"{what}: the time limit of {self.total:g} s for the whole build was reached before the LP "
                "reached optimality [status 1 = limit]",
                status="limit",
            )
        return self.solve_limit()

    def describe(self) -> str:
        """``"12.3 s of 60 s left"`` or ``"no time limit"`` (for progress messages)."""
        left = self.remaining()
        if left is None:
            return "no time limit"
        return f"{left:.1f} s of {self.total:g} s left"

    def __repr__(self) -> str:
        return f"Deadline({self.describe()})"

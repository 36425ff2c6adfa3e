r"""Longitudinal collection: one memoized report per (user, value), RAPPOR's permanent response.

A user who reports the same value again and again must not send fresh reports each
time: averaging them would reveal the value (Erlingsson, Pihur, Korolova, "RAPPOR",
CCS 2014, Section 3, the *permanent* randomized response). :func:`privatize_longitudinal`
memoizes the first report of every (user, true value) pair in a
:class:`~metricdp.accounting.Ledger` and sends that same report on every later
collection, through the release plan every command uses
(:func:`~metricdp.accounting.plan.plan_release` with ``consistent=True``): the memo is
keyed by ``HMAC-SHA256(key, scope, user, value)`` and stored encrypted with the ledger's
key file (its conventions, not duplicated here), and a pair is charged eps once, when
its first report is drawn; repeats are post-processing and free
(``docs/proofs/composition.md``, Corollary 3).

A report is memoized as a code the ledger stores: an index for k-RR and Hadamard
response, the triple (a, b, y) for OLH, and for OUE and subset selection the k bits in
32-bit pieces (k <= 8,160), all exactly representable.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..accounting.ledger import Ledger
from ..accounting.plan import Plan, plan_release
from ..errors import ValidationError
from ._base import FrequencyOracle
from .hashing import OLH
from .oracles import OUE, SubsetSelection

__all__ = ["code_width", "from_codes", "privatize_longitudinal", "to_codes"]

_PIECE = 32
_MAX_WIDTH = 255


def code_width(oracle: FrequencyOracle) -> int | None:
    """Width of a memo code: None (an index), 3 (OLH) or the number of 32-bit pieces of k bits."""
    if isinstance(oracle, OLH):
        return 3
    if isinstance(oracle, OUE | SubsetSelection):
        width = -(-oracle.k // _PIECE)
        if width > _MAX_WIDTH:
            raise ValidationError(f"{oracle.name}: reports of {oracle.k} bits are too long to memoize "
                                  f"(at most {_PIECE * _MAX_WIDTH})")
        return width
    return None


def to_codes(oracle: FrequencyOracle, reports: ArrayLike) -> NDArray[Any]:
    """Reports as memo codes (int64 indices or exact float64 rows)."""
    width = code_width(oracle)
    r = np.asarray(reports)
    if width is None:
        return r.astype(np.int64)
    if isinstance(oracle, OLH):
        return r.astype(np.float64)
    pad = np.zeros((r.shape[0], width * _PIECE), dtype=np.int64)
    pad[:, :oracle.k] = r
    weights = np.int64(1) << np.arange(_PIECE, dtype=np.int64)
    return (pad.reshape(-1, width, _PIECE) * weights).sum(axis=2).astype(np.float64)


def from_codes(oracle: FrequencyOracle, codes: ArrayLike) -> NDArray[Any]:
    """The inverse of :func:`to_codes`."""
    width = code_width(oracle)
    c = np.asarray(codes)
    if width is None:
        return c.astype(np.int64)
    if isinstance(oracle, OLH):
        return c.astype(np.int64)
    ints = c.astype(np.int64)
    bits = (ints[:, :, None] >> np.arange(_PIECE, dtype=np.int64)) & 1
    return bits.reshape(len(c), -1)[:, :oracle.k].astype(np.uint8)


def privatize_longitudinal(
    oracle: FrequencyOracle,
    values: ArrayLike,
    user_ids: ArrayLike,
    ledger: Ledger,
    *,
    rng: object = None,
    run_id: str | None = None,
) -> tuple[NDArray[Any], Plan]:
    """Reports for one collection, memoized per (user, value) in ``ledger`` (module docstring).

    Returns the reports of the released rows (``plan.keep``; rows of users whose budget
    is spent are withheld, or the run refused, by the ledger's rule) and the
    :class:`~metricdp.accounting.plan.Plan`: call ``plan.commit()`` once the reports are
    published (``plan.abort()`` if they never were). Only reports of committed runs are
    reused. ``rng`` as in :meth:`FrequencyOracle.privatize` (secure by default).
    """
    x = oracle.check_values(values)
    width = code_width(oracle)
    plan = plan_release(user_ids, oracle.epsilon, ledger=ledger, consistent=True, true_values=x,
                        scope=oracle.scope, width=width, rng=rng, run_id=run_id, mechanism=oracle.name,
                        unit="LDP (discrete metric)")
    try:
        fresh = plan.fresh
        drawn = oracle.privatize(x[plan.group_row[fresh]], rng)
        codes = plan.releases(to_codes(oracle, drawn) if fresh.size else
                              np.zeros((0,) if width is None else (0, width)))
        reports = from_codes(oracle, codes)[plan.group[plan.keep]]
    except BaseException:
        plan.abort()
        raise
    return reports, plan

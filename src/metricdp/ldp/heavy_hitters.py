r"""Heavy hitters over domains too large to enumerate: the prefix extending method (PEM).

Items are integers of ``bits`` bits (up to 30: a word's code, the cell index
``row * width + col`` of a large grid); the domain :math:`2^{\text{bits}}` is never listed.
PEM (Wang, Li, Jha [1]_, Section V) finds the frequent items prefix by prefix:

* the prefix lengths are :math:`l_1 = \text{start} < l_2 = l_1 + \text{step} < \dots <
  l_G = \text{bits}` (the last step may be shorter); each user is assigned one of the G
  groups uniformly at random, **independently of her item**, and reports only the
  :math:`l_j`-bit prefix of her item through optimized local hashing (:class:`~metricdp.ldp.OLH`
  on :math:`2^{l_j}` categories) -- one eps-LDP report per user;
* the collector estimates, from group 1, the frequency of each of the :math:`2^{l_1}`
  prefixes, keeps the ``top`` largest estimates, extends each by every ``step``-bit suffix
  and estimates these candidates from group 2, and so on; the estimates of group G are the
  frequencies of the surviving full items (:meth:`PrefixExtendingMethod.identify`).

Support counts are computed for the candidates only (:meth:`OLH.support_of
<metricdp.ldp.OLH.support_of>`): about ``top * 2**step`` per round, whatever the domain.

**Guarantees** (proofs: ``docs/proofs/heavy_hitters.md``). (1) Each user's report is
eps-LDP: the group is independent of the item and OLH is eps-LDP on any domain, so
:math:`\Pr[R(v) = (j, r)] = \Pr[j]\Pr[\mathrm{OLH}_j(v_{:l_j}) = r] \le e^{\varepsilon}
\Pr[R(v') = (j, r)]`. (2) Given the candidates, the final estimate of each is unbiased for its
frequency in group G, with the OLH variance of :meth:`~metricdp.ldp.FrequencyOracle.variance`
over :math:`N_G` reports (:attr:`HeavyHitters.stderr`). (3) With probability at least
:math:`1 - \beta` every estimate of every round is within
:math:`\tau_j = \sqrt{\ln(2C/\beta) / (2 N_j)} / (p^* - q^*)` of its group frequency (C the
candidates of all rounds; Hoeffding and a union bound), so an item each of whose prefixes
exceeds, in its group, the ``top``-th largest other prefix frequency by :math:`2\tau_j` is
found (:meth:`PrefixExtendingMethod.margin` gives :math:`\tau_j`).

The price of a domain too large to list: the final estimates come from one group,
:math:`N/G` users, so their variance is about G times the exact-domain OLH's on N users
(measured against it in ``tests/ldp/test_heavy_hitters.py`` and
``benchmarks/bench_ldp_peers.py``).

References
----------
.. [1] T. Wang, N. Li, S. Jha. "Locally differentially private heavy hitter identification".
   IEEE Transactions on Dependable and Secure Computing 18(2), 2021 (arXiv:1708.06674, 2017).

Examples
--------
>>> import numpy as np
>>> pem = PrefixExtendingMethod(bits=20, epsilon=4.0, top=4)
>>> items = np.repeat([123_456, 777_777, 5], [30_000, 20_000, 10_000])
>>> hh = pem.identify(pem.sample(items, rng=3))   # pem.privatize(items) for real data
>>> sorted(int(i) for i in hh.items[:3])
[5, 123456, 777777]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import RandomSource, check_release_rng, check_rng
from .._validation import check_epsilon, check_int, check_number
from ..errors import ValidationError
from ..sampling import uniform_below
from .hashing import OLH

__all__ = ["MAX_BITS", "HeavyHitters", "PrefixExtendingMethod"]

#: Longest items (bits): OLH's hash family needs a prime modulus above the domain, and its
#: default, 2^31 - 1, keeps every product a v + b below 2^63.
MAX_BITS = 30


@dataclass(frozen=True)
class HeavyHitters:
    """Outcome of :meth:`PrefixExtendingMethod.identify`, largest estimate first.

    Attributes
    ----------
    items : ndarray of int64, shape (c,)
        The candidate items of the last round (at most ``top * 2**step``).
    estimates : ndarray of float64, shape (c,)
        Unbiased estimates of their frequencies (fractions of the users; may be negative).
    stderr : ndarray of float64, shape (c,)
        Standard error of each estimate (OLH variance over the last group, the frequency
        replaced by the estimate clipped to [0, 1]).
    group_sizes : tuple of int
        Reports per group (round).
    """

    items: NDArray[np.int64]
    estimates: NDArray[np.float64]
    stderr: NDArray[np.float64]
    group_sizes: tuple[int, ...]

    def head(self, count: int) -> list[tuple[int, float]]:
        """The ``count`` first (item, estimate) pairs."""
        return [(int(i), float(e)) for i, e in zip(self.items[:count], self.estimates[:count], strict=True)]


class PrefixExtendingMethod:
    """PEM heavy hitters over ``bits``-bit items (module docstring).

    Parameters
    ----------
    bits : int
        Item length, 1 to :data:`MAX_BITS`.
    epsilon : float
        Each user's privacy parameter (one eps-LDP report per user).
    top : int
        Prefixes kept per round (and the size of the answer worth reading).
    step : int
        Bits added per round (each kept prefix has ``2**step`` extensions).
    start : int, optional
        Length of the first round's prefixes, all :math:`2^{\\text{start}}` of which are
        estimated; default ``min(bits, ceil(log2(top)) + step)``.
    """

    def __init__(self, bits: int, epsilon: float, *, top: int = 32, step: int = 4, start: int | None = None) -> None:
        self.bits = check_int(bits, "bits", minimum=1, maximum=MAX_BITS)
        self.epsilon = check_epsilon(epsilon)
        self.top = check_int(top, "top", minimum=1)
        self.step = check_int(step, "step", minimum=1, maximum=16)
        first = min(self.bits, math.ceil(math.log2(self.top)) + self.step) if start is None else start
        self.start = check_int(first, "start", minimum=1, maximum=min(self.bits, 20))
        lengths = [self.start]
        while lengths[-1] < self.bits:
            lengths.append(min(self.bits, lengths[-1] + self.step))
        #: Prefix length of each group's reports.
        self.lengths = tuple(lengths)
        self._oracles = tuple(OLH(1 << n, self.epsilon) for n in self.lengths)

    def __repr__(self) -> str:
        return (f"PrefixExtendingMethod(bits={self.bits}, epsilon={self.epsilon!r}, top={self.top}, "
                f"step={self.step}, start={self.start})")

    @property
    def groups(self) -> int:
        """G, the number of groups (rounds)."""
        return len(self.lengths)

    def oracle(self, group: int) -> OLH:
        """The OLH oracle of ``group`` (on :math:`2^{l_j}` categories)."""
        return self._oracles[check_int(group, "group", minimum=0, maximum=self.groups - 1)]

    # ------------------------------------------------------------------ users
    def check_items(self, items: ArrayLike) -> NDArray[np.int64]:
        """Items as a 1-d int64 array in [0, 2**bits) (one error naming the first bad one)."""
        x = np.asarray(items)
        if x.ndim != 1 or not (np.issubdtype(x.dtype, np.integer) or x.size == 0):
            raise ValidationError(f"items must be a 1-d array of integers, got {x.dtype} {x.shape}")
        if x.size and (x.min() < 0 or x.max() >= (1 << self.bits)):
            bad = int(x[(x < 0) | (x >= (1 << self.bits))][0])
            raise ValidationError(f"item {bad} is not a {self.bits}-bit integer (0..{(1 << self.bits) - 1})")
        return x.astype(np.int64)

    def _draw(self, x: NDArray[np.int64], rng: RandomSource) -> NDArray[np.int64]:
        group = uniform_below(np.full(x.size, self.groups), rng).astype(np.int64)
        out = np.empty((x.size, 4), dtype=np.int64)
        out[:, 0] = group
        for j, length in enumerate(self.lengths):
            mine = np.flatnonzero(group == j)
            out[mine, 1:] = self._oracles[j]._draw((x[mine] >> (self.bits - length)).astype(np.intp), rng)
        return out

    def sample(self, items: ArrayLike, rng: object = None) -> NDArray[np.int64]:
        """One report per item, rows ``(group, a, b, y)`` (experiments: a seed gives reproducible reports)."""
        return self._draw(self.check_items(items), check_rng(rng))

    def privatize(self, items: ArrayLike, rng: object = None) -> NDArray[np.int64]:
        """One report per item for release: the OS's secure source unless told otherwise (then a warning)."""
        source = check_release_rng(rng)
        return self._draw(self.check_items(items), source)

    # ------------------------------------------------------------------ collector
    def _split(self, reports: ArrayLike) -> list[NDArray[np.int64]]:
        r = np.asarray(reports)
        if r.ndim != 2 or r.shape[1] != 4 or not np.issubdtype(r.dtype, np.integer):
            raise ValidationError(
                f"reports must be integer rows (group, a, b, y) of shape (n, 4), got {r.dtype} {r.shape}")
        g = r[:, 0]
        if g.size and (g.min() < 0 or g.max() >= self.groups):
            row = int(np.flatnonzero((g < 0) | (g >= self.groups))[0])
            raise ValidationError(f"report {row} names group {int(g[row])}; groups are 0..{self.groups - 1}")
        parts = [r[g == j, 1:].astype(np.int64) for j in range(self.groups)]
        empty = [j for j, p in enumerate(parts) if len(p) == 0]
        if empty:
            raise ValidationError(f"group {empty[0]} has no reports: PEM needs every group (more users)")
        return parts

    def identify(self, reports: ArrayLike) -> HeavyHitters:
        """The frequent items behind ``reports``, round by round (module docstring)."""
        parts = self._split(reports)
        candidates = np.arange(1 << self.lengths[0], dtype=np.int64)
        estimates = np.zeros(0)
        for j, rows in enumerate(parts):
            oracle = self._oracles[j]
            estimates = oracle.estimate_of(oracle.support_of(rows, candidates), len(rows))
            if j + 1 < self.groups:
                keep = candidates[np.argsort(-estimates, kind="stable")[:self.top]]
                grow = self.lengths[j + 1] - self.lengths[j]
                candidates = ((keep[:, None] << grow) | np.arange(1 << grow, dtype=np.int64)[None, :]).ravel()
        order = np.argsort(-estimates, kind="stable")
        last, n_last = self._oracles[-1], len(parts[-1])
        clipped = np.clip(estimates[order], 0.0, 1.0)
        stderr = np.sqrt([last.variance(n_last, float(f)) for f in clipped])
        return HeavyHitters(candidates[order], estimates[order], stderr, tuple(len(p) for p in parts))

    def margin(self, group_sizes: tuple[int, ...], beta: float = 0.05) -> tuple[float, ...]:
        r"""Per round, the :math:`\tau_j` of guarantee (3): with probability >= 1 - beta every estimate
        of every round is within :math:`\tau_j` of its group frequency (``docs/proofs/heavy_hitters.md``)."""
        beta = check_number(beta, "beta", minimum=0, maximum=1, open_minimum=True, open_maximum=True)
        if len(group_sizes) != self.groups or min(group_sizes) < 1:
            raise ValidationError(f"group_sizes must be {self.groups} positive counts, got {group_sizes!r}")
        grown = [min(self.top, 1 << n) << (m - n) for n, m in zip(self.lengths, self.lengths[1:], strict=False)]
        total = (1 << self.lengths[0]) + sum(grown)
        return tuple(
            math.sqrt(math.log(2 * total / beta) / (2 * n)) / (o.p_star - o.q_star)
            for n, o in zip(group_sizes, self._oracles, strict=True)
        )

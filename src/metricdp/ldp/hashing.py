r"""Optimized local hashing (OLH; Wang, Blocki, Li, Jha, USENIX Security 2017, Section 4.4).

Each user draws a hash function H from a family mapping the k categories to g values,
hashes her category, and reports :math:`(H, y)` with y the k-RR (over g values) of
:math:`H(x)`:

.. math:: \Pr[y = H(x)] = \frac{E}{E + g - 1}, \qquad \Pr[y = t] = \frac{1}{E + g - 1}\ (t \ne H(x)),

with :math:`E = e^{\varepsilon}` and :math:`g = \max(2, \mathrm{round}(E + 1))`, the
variance-optimal g of Wang et al.

**The hash family, concretely.** :math:`H_{a,b}(v) = ((a v + b) \bmod P) \bmod g` with P a
prime >= k (default :math:`2^{31} - 1`, so that :math:`a v + b < 2^{63}`), a uniform on
[1, P) and b uniform on [0, P) (exact draws from random words). For :math:`v \ne x` the pair
:math:`((av+b) \bmod P, (ax+b) \bmod P)` is uniform over the :math:`P(P-1)` pairs of
distinct residues, so the collision probability
:math:`c = \Pr[H(v) = H(x)] = \sum_i n_i(n_i - 1) / (P(P-1))` (:math:`n_i` = residues
below P congruent to i mod g) is the same for every pair; it is computed exactly, and
differs from Wang et al.'s idealised 1/g by less than 1/P. A report :math:`(a, b, y)`
(int64 rows, shape (n, 3)) supports v when :math:`H_{a,b}(v) = y`:
:math:`p^* = E/(E+g-1)` and :math:`q^* = c\,p^* + (1-c)/(E+g-1)`, exactly.

**Proof of eps-LDP.** :math:`\Pr[R(x) = (a,b,y)] = \frac{1}{P(P-1)} \cdot
\frac{E \text{ if } y = H_{a,b}(x) \text{ else } 1}{E+g-1}`: the hash is drawn independently
of x, so for any report the ratio between two categories is E, 1 or 1/E. This holds for
any family; the family only matters for :math:`q^*`, i.e. for utility.

:meth:`OLH.matrix` (columns ``((a - 1) P + b) g + y``) exists for small P only: the
tests pass ``prime=5`` or 7.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import RandomSource
from .._validation import check_int
from ..errors import ValidationError
from ..sampling import uniform_below
from ._base import FrequencyOracle, chunks, coins

__all__ = ["DEFAULT_PRIME", "OLH"]

#: The default modulus of the hash family: the Mersenne prime 2^31 - 1.
DEFAULT_PRIME = 2**31 - 1


def _is_prime(p: int) -> bool:
    return p >= 2 and all(p % f for f in range(2, int(p**0.5) + 1))


class OLH(FrequencyOracle):
    """Optimized local hashing (module docstring); ``g`` and ``prime`` override the defaults."""

    name = "olh"

    def __init__(self, k: int, epsilon: float, *, g: int | None = None, prime: int = DEFAULT_PRIME) -> None:
        super().__init__(k, epsilon)
        self.g = max(2, round(self.e_eps + 1.0)) if g is None else check_int(g, "g", minimum=2)
        self.prime = check_int(prime, "prime", minimum=2, maximum=DEFAULT_PRIME)
        if self.prime < max(self.k, self.g) or (self.prime != DEFAULT_PRIME and not _is_prime(self.prime)):
            raise ValidationError(f"prime must be a prime >= k ({self.k}) and >= g ({self.g}), got {self.prime}")
        p, g = self.prime, self.g
        sizes = np.array([(p - 1 - i) // g + 1 if i < p else 0 for i in range(g)], dtype=object)
        #: Collision probability of two distinct categories under a random hash (exact rational, then float).
        self.collision = float(sum(int(n) * (int(n) - 1) for n in sizes)) / float(p * (p - 1))

    @property
    def params(self) -> dict[str, Any]:
        return {"g": self.g, "prime": self.prime}

    @property
    def p_star(self) -> float:
        return self.e_eps / (self.e_eps + self.g - 1)

    @property
    def q_star(self) -> float:
        c = self.collision
        return c * self.p_star + (1.0 - c) / (self.e_eps + self.g - 1)

    def hash(self, a: ArrayLike, b: ArrayLike, v: ArrayLike) -> NDArray[np.int64]:
        """:math:`H_{a,b}(v)`, broadcast."""
        av = np.asarray(a, dtype=np.int64) * np.asarray(v, dtype=np.int64) + np.asarray(b, dtype=np.int64)
        return (av % self.prime) % self.g

    def matrix(self) -> NDArray[np.float64]:
        p, g = self.prime, self.g
        self._check_matrix_size((p - 1) * p * g)
        cols = np.arange((p - 1) * p * g, dtype=np.int64)
        y, ab = cols % g, cols // g
        a, b = ab // p + 1, ab % p
        h = self.hash(a[None, :], b[None, :], np.arange(self.k)[:, None])
        return np.where(h == y[None, :], self.e_eps, 1.0) / ((self.e_eps + g - 1) * (p - 1) * p)

    def report_index(self, reports: ArrayLike) -> NDArray[np.int64]:
        r = self._check_reports(reports)
        return ((r[:, 0] - 1) * self.prime + r[:, 1]) * self.g + r[:, 2]

    def _draw(self, x: NDArray[np.intp], rng: RandomSource) -> NDArray[np.int64]:
        n = x.size
        a = uniform_below(np.full(n, self.prime - 1), rng).astype(np.int64) + 1
        b = uniform_below(np.full(n, self.prime), rng).astype(np.int64)
        h = self.hash(a, b, x)
        keep = coins(self.g - 1.0, self.e_eps, n, rng)
        other = uniform_below(np.full(n, self.g - 1), rng).astype(np.int64)
        other += other >= h
        return np.stack([a, b, np.where(keep, h, other)], axis=1)

    def _check_reports(self, reports: ArrayLike) -> NDArray[np.int64]:
        r = np.asarray(reports)
        if r.ndim != 2 or r.shape[1] != 3 or not np.issubdtype(r.dtype, np.integer):
            raise ValidationError(
                f"olh reports must be integer rows (a, b, y) of shape (n, 3), got {r.dtype} {r.shape}")
        r = r.astype(np.int64)
        bad = (r[:, 0] < 1) | (r[:, 0] >= self.prime) | (r[:, 1] < 0) | (r[:, 1] >= self.prime) | (r[:, 2] < 0) | (
            r[:, 2] >= self.g)
        if bad.any():
            raise ValidationError(f"olh report {int(np.argmax(bad))} is not a valid (a, b, y): {r[bad][0].tolist()}")
        return r

    def support(self, reports: ArrayLike) -> NDArray[np.float64]:
        return self.support_of(reports, np.arange(self.k, dtype=np.int64))

    def support_of(self, reports: ArrayLike, values: ArrayLike) -> NDArray[np.float64]:
        """Support counts of the given categories only (shape (len(values),)): the reports never
        enumerate the domain, so k may be far too large to list (heavy hitters, a candidate list)."""
        r = self._check_reports(reports)
        v = np.asarray(values)
        if v.ndim != 1 or not (np.issubdtype(v.dtype, np.integer) or v.size == 0):
            raise ValidationError(f"values must be a 1-d array of category indices, got {v.dtype} {v.shape}")
        if v.size and (v.min() < 0 or v.max() >= self.k):
            raise ValidationError(f"value {int(v[(v < 0) | (v >= self.k)][0])} is not a category in 0..{self.k - 1}")
        out = np.zeros(v.size, dtype=np.float64)
        step = chunks(len(r), max(1, v.size)).step
        for start in range(0, len(r), step):
            blk = r[start:start + step]
            out += (self.hash(blk[:, :1], blk[:, 1:2], v[None, :].astype(np.int64)) == blk[:, 2:3]).sum(axis=0)
        return out

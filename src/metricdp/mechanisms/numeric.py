r"""Exact mechanisms for numeric columns on a fixed-step grid: clamped geometric and discrete Laplace.

A numeric column (ages, readings) takes values on the grid :math:`G = \{L, L + S, \dots,
H\}` of :math:`n = (H - L)/S + 1` points under the metric :math:`d(x, x') = |x - x'|`
(``epsilon`` is per unit of the value). A value of rank :math:`i` (:math:`x = L + iS`) is
released as the grid point of rank

.. math:: \mathrm{clip}(i + Z,\; r_{lo},\; r_{hi})

with Z a two-sided geometric offset, :math:`\Pr[Z = z] \propto \beta^{|z|}`,
:math:`\beta = e^{-a'}` and :math:`a' \le \varepsilon S`:

* ``clamped-geometric``: :math:`[r_{lo}, r_{hi}] = [0, n-1]`, releases stay in the range
  (the truncated geometric mechanism of Ghosh, Roughgarden and Sundararajan, STOC 2009;
  ``geometric(form="clamped")`` builds the same law as a matrix on a line space);
* ``discrete-laplace``: :math:`[r_{lo}, r_{hi}] = [-T, n-1+T]` with T the smallest number
  of steps whose tail :math:`\Pr[Z \ge T] = \beta^T/(1+\beta)` is at most ``tail``
  (1e-15): the discrete Laplace mechanism (unbiased away from the ends; releases may
  leave the range by up to T steps), clamped only where its mass is below ``tail``.

**Privacy (exact).** For every integer k, :math:`\Pr[i + Z = k] / \Pr[i' + Z = k] =
\beta^{|k-i| - |k-i'|} \le e^{a'|i - i'|}` (triangle inequality), and the clip is a function
of :math:`i + Z` (post-processing), so two values x, x' are :math:`a'|i-i'| \le
\varepsilon |x - x'|`-indistinguishable.

**The sampled law.** Only offsets in :math:`[-K, K]`, :math:`K = r_{hi} - r_{lo}`, matter:
:math:`i + K \ge r_{hi}` and :math:`i - K \le r_{lo}` for every rank i, so folding the tails
of Z onto :math:`\pm K` changes no release. The folded law is one row of
:math:`2K + 1` float weights :math:`w_z = \mathrm{fl}(e^{-a'|z|})` (:math:`|z| < K`) and
:math:`w_{\pm K} = \mathrm{fl}(\mathrm{fl}(e^{-a'K}) / \mathrm{fl}(1 - \beta))`, and every
release draws z with probability exactly :math:`w_z / \sum w` (the weights read as the
rationals they are) from 64-bit random words (:class:`~metricdp.sampling.ExactTable`,
:func:`draw_offsets`): no float uniform, no inverse float CDF.

**Why the float weights keep the guarantee exactly** (``docs/proofs/numeric_grid.md``).
:math:`a' = \lfloor a(1 - 2^{-40}) - 2^{-44}\rfloor_{33}` (:math:`a = \mathrm{fl}(\varepsilon
\mathrm{fl}(S)) \le \varepsilon S (1+u)^2`, :math:`u = 2^{-53}`; rounded down to a 33-bit
mantissa): every product :math:`a'|z|` with :math:`|z| < 2^{20}` is exact, ``exp`` and
``expm1`` err by a few ulps, so :math:`w_z = e^{-a'|z|}(1 + \eta_z)` with
:math:`|\eta_z| \le 16u` (the end weights, three operations, included). A release column
is either one weight (interior) or a sum of consecutive weights (an end), and a sum of
positive terms each within a relative :math:`\eta` of its ideal is within :math:`\eta` of
the ideal sum, so every likelihood ratio is at most :math:`e^{a'|i - i'| + 33u}`. Since
:math:`a - a' \ge a 2^{-40} + 2^{-44}`, :math:`a'|i-i'| + 33u < a(1 - 3u)|i - i'| \le
\varepsilon S |i - i'|` for every :math:`|i - i'| \ge 1`: the released law is
:math:`\varepsilon`-mDP exactly, not up to a tolerance.

Weights below the smallest normal float would turn a positive probability into 0 for one
value and not its neighbour (an infinite loss, Mironov 2012): such parameters
(:math:`a'K > 700`) are refused with the reason, as are grids or tables beyond
:data:`MAX_OFFSETS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from functools import cached_property
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import RandomSource, check_rng, warn_unless_secure
from .._validation import check_epsilon
from ..errors import ValidationError
from ..sampling import ExactTable
from ..spaces import MetricSpace
from .registry import declared

__all__ = [
    "KINDS", "MAX_OFFSETS", "NumberMechanism", "NumericGrid", "discrete_laplace", "draw_offsets", "inexact_integers",
    "number_mechanism", "safe_log_ratio",
]

NumberKind = Literal["clamped-geometric", "discrete-laplace"]
KINDS: tuple[NumberKind, ...] = ("clamped-geometric", "discrete-laplace")
#: Most offsets K of a table (the exact products a'|z| need |z| < 2**20).
MAX_OFFSETS = 2**20 - 1
#: Largest a' K: every weight stays a normal float (e^-700 > 1e-305).
_EXPONENT_CAP = 700.0
#: Mass allowed beyond the discrete Laplace window (``tail``).
DEFAULT_TAIL = 1e-15
_MANTISSA_BITS = 33
#: Largest max(|lo|, |hi|) / step: adjacent grid points' floats are then >= 2**7 ulps apart and
#: rint((v - lo) / step) errs by < 2**-5 steps, so it finds the rank of a grid point's float.
_MAX_SCALE = Decimal(2**45)


def safe_log_ratio(a: float) -> float:
    """:math:`a' = \\lfloor a(1 - 2^{-40}) - 2^{-44} \\rfloor_{33}` (module docstring): the geometric
    parameter whose float weights are exactly within ``a`` per step."""
    shaved = a * (1.0 - 2.0**-40) - 2.0**-44
    if not shaved > 0:
        raise ValidationError(f"epsilon * step = {a!r} is too small for an exact table (at least 2**-43)")
    mant, ex = math.frexp(shaved)
    return math.ldexp(math.floor(mant * 2.0**_MANTISSA_BITS), ex - _MANTISSA_BITS)


def _decimal(value: object, name: str) -> Decimal:
    if isinstance(value, Decimal):
        out = value
    elif isinstance(value, bool):
        raise ValidationError(f"{name} must be a number, got {value!r}")
    elif isinstance(value, int | float | np.integer | np.floating):
        out = Decimal(repr(float(value))) if isinstance(value, float | np.floating) else Decimal(int(value))
    elif isinstance(value, str):
        text = value.strip()
        if "_" in text or not text.isascii():
            raise ValidationError(f"{name} must be a plain decimal number, got {value!r}")
        try:
            out = Decimal(text)
        except InvalidOperation:
            raise ValidationError(f"{name} must be a number, got {value!r}") from None
    else:
        raise ValidationError(f"{name} must be a number, got {type(value).__name__}")
    if not out.is_finite():
        raise ValidationError(f"{name} must be finite, got {value!r}")
    return out


@dataclass(frozen=True)
class NumericGrid:
    """The grid ``lo, lo + step, ..., hi`` (decimal endpoints, so labels print as typed).

    ``lo``, ``hi`` and ``step`` are decimal text, ints, floats (their shortest repr) or
    :class:`~decimal.Decimal`; ``hi - lo`` must be a whole number of steps, and
    ``max(|lo|, |hi|) / step`` at most 2**45 (float64 must tell the grid points apart:
    :meth:`ranks`, docs/proofs/numeric_grid.md section 4).
    """

    lo: Decimal
    hi: Decimal
    step: Decimal
    n: int = field(init=False)

    def __init__(self, lo: object, hi: object, step: object = 1) -> None:
        lo_, hi_, step_ = _decimal(lo, "lo"), _decimal(hi, "hi"), _decimal(step, "step")
        if step_ <= 0:
            raise ValidationError(f"step must be > 0, got {step}")
        if hi_ <= lo_:
            raise ValidationError(f"the range needs lo < hi, got {lo}, {hi}")
        count = (hi_ - lo_) / step_
        if count != count.to_integral_value():
            raise ValidationError(f"hi - lo = {hi_ - lo_} is not a whole number of steps of {step_}")
        n = int(count) + 1
        if n - 1 > MAX_OFFSETS:
            raise ValidationError(f"the grid {lo_}..{hi_} step {step_} has {n:,} points; at most {MAX_OFFSETS + 1:,}")
        if max(abs(lo_), abs(hi_)) > step_ * _MAX_SCALE:
            raise ValidationError(
                f"the step {step_} is too fine for values as large as {max(abs(lo_), abs(hi_))}: float64 cannot "
                f"tell the grid points apart (max(|lo|, |hi|) / step must be at most 2**45)"
            )
        object.__setattr__(self, "lo", lo_)
        object.__setattr__(self, "hi", hi_)
        object.__setattr__(self, "step", step_)
        object.__setattr__(self, "n", n)

    def label(self, rank: int) -> str:
        """The grid point of ``rank`` (any integer) as plain decimal text."""
        value = self.lo + rank * self.step
        return format(value.copy_abs() if value == 0 else value, "f")

    def labels(self, lo_rank: int, hi_rank: int) -> list[str]:
        """Labels of ranks ``lo_rank..hi_rank``: :meth:`label` of each, built with numpy.

        With ``lo = a 10^e``, ``step = b 10^e`` (integers a, b; e the smaller exponent) the
        point of rank r is the integer ``a + r b`` scaled by ``10^e``, which is exactly the
        decimal :meth:`label` formats (a Decimal sum keeps the smaller exponent): the quotient
        and the remainder (``-e`` digits, zero-padded) of ``|a + r b|`` by ``10^-e``, with the
        sign of a non-zero value. Exponents above 0, ``-e > 18`` or integers past 2**62 take
        :meth:`label` one by one.
        """
        e = min(int(self.lo.as_tuple().exponent), int(self.step.as_tuple().exponent))
        a, b = int(self.lo.scaleb(-e)), int(self.step.scaleb(-e))
        if e > 0 or e < -18 or hi_rank < lo_rank or max(abs(a + lo_rank * b), abs(a + hi_rank * b)) >= 2**62:
            return [self.label(r) for r in range(lo_rank, hi_rank + 1)]
        v = a + np.arange(lo_rank, hi_rank + 1, dtype=np.int64) * b
        digits = np.abs(v).astype(str)
        if e < 0:
            whole, frac = np.divmod(np.abs(v), np.int64(10) ** -e)
            digits = np.char.add(np.char.add(whole.astype(str), "."), np.char.zfill(frac.astype(str), -e))
        return np.char.add(np.where(v < 0, "-", ""), digits).tolist()

    def points(self, ranks: ArrayLike) -> NDArray[np.float64]:
        """The float64 nearest each grid point ``lo + rank * step`` (correctly rounded from the decimal).

        With ``lo = a 10^e``, ``step = b 10^e`` (integers a, b), the point is ``(a + rank b) 10^e``:
        when ``|a + rank b| < 2**53`` and ``|e| <= 22`` both factors are exact floats and one IEEE
        multiplication or division rounds the exact value correctly (Clinger's fast path);
        otherwise each distinct rank is converted exactly through :class:`~fractions.Fraction`.
        """
        r = np.asarray(ranks, dtype=np.int64)
        e = min(int(self.lo.as_tuple().exponent), int(self.step.as_tuple().exponent))
        a, b = int(self.lo.scaleb(-e)), int(self.step.scaleb(-e))
        if abs(a) + (self.n - 1) * b < 2**53 and abs(e) <= 22 and (r.size == 0 or (r.min() >= 0 and r.max() < self.n)):
            num = (a + r * b).astype(np.float64)
            return num / float(10**-e) if e < 0 else num * float(10**e)
        uniq, inverse = np.unique(r, return_inverse=True)
        lo, step = Fraction(self.lo), Fraction(self.step)
        exact = np.array([float(lo + k * step) for k in uniq.tolist()], dtype=np.float64)  # distinct ranks only
        return exact[inverse].reshape(r.shape)

    def ranks(self, values: ArrayLike, *, clamp: bool = False, snap: bool = False) -> tuple[
        NDArray[np.intp], NDArray[np.int8]
    ]:
        """Ranks of float ``values`` and a status per value: 0 ok, 1 not finite, 2 out of range, 3 off the grid.

        A value is the grid point of rank r when it IS that point's float64 (:meth:`points`):
        decimal text such as ``0.3`` on the grid ``0.1, 0.2, ...`` parses to the float nearest
        0.3, which is the float of the grid point; no tolerance, so a value off the grid is
        never taken for a grid point (two texts with one float64 are one value to metricdp).
        ``clamp`` maps values outside the range to its nearest end (``|c(x) - c(x')| <=
        |x - x'|``: the guarantee is unchanged); ``snap`` maps a value off the grid to the
        nearest grid point (then two values x, x' are ``epsilon (|x - x'| + step)``-indistinguishable).
        """
        v = np.asarray(values, dtype=np.float64)
        lo, step = float(self.lo), float(self.step)
        status = np.zeros(v.shape, dtype=np.int8)
        finite = np.isfinite(v)
        status[~finite] = 1
        with np.errstate(invalid="ignore", over="ignore"):
            k = np.where(finite, (v - lo) / step, 0.0)
        if snap:
            if clamp:
                k = np.clip(k, 0.0, float(self.n - 1))
            r = np.rint(k)
            status[finite & ((r < 0) | (r > self.n - 1))] = 2
        else:
            first, last = self.points([0, self.n - 1]).tolist()
            below, above = finite & (v < first), finite & (v > last)
            r = np.clip(np.rint(k), 0.0, float(self.n - 1))
            inside = finite & ~below & ~above
            on = np.zeros(v.shape, dtype=bool)
            on[inside] = v[inside] == self.points(r[inside].astype(np.int64))
            status[inside & ~on] = 3
            if clamp:
                r[below], r[above] = 0.0, float(self.n - 1)
            else:
                status[below | above] = 2
        ranks = np.where(status == 0, r, 0).astype(np.intp)
        return ranks, status


def inexact_integers(ints: NDArray[Any], numbers: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Where the float64 ``numbers`` are not the integers ``ints`` they were cast from (only past 2**53).

    Such a float can be a grid point while the integer is not (2**53 + 1 reads as 2**53), so
    the callers refuse it as off the grid. The floats are clipped below 2**63 (signed) or
    2**64 (unsigned) before the exact integer comparison: a value that rounded up to the
    bound differs from every integer of the type.
    """
    i = np.asarray(ints)
    big = np.abs(numbers) >= 2.0**53
    out = np.zeros(len(numbers), dtype=bool)
    if big.any():
        top = 2.0**64 - 2048 if i.dtype.kind == "u" else 2.0**63 - 1024  # the largest floats below the bound
        out[big] = np.clip(numbers[big], -(2.0**63), top).astype(i.dtype) != i[big]
    return out


def draw_offsets(table: ExactTable, count: int, rng: RandomSource) -> NDArray[np.intp]:
    """``count`` exact draws from the one row of ``table`` (indices 0..n-1).

    The same law, and for the same words the same outputs, as ``table.sample(zeros)``
    (:meth:`ExactTable.sample`, proof in docs/proofs/exact_sampling.md), on the single
    row: a 64-bit word per draw, rejected above ``limit``, ``x = w mod N``, the largest k
    with ``H_k <= x`` (:func:`_largest_at_most`), decided when ``H_k + kappa_k <= x``; the
    rare undecided draw is finished with exact integers.
    """
    prefix = table.prefix[0]
    total, limit, n = table.total[0], table.limit[0], table.n
    truncated = bool(table.truncated[0])
    search = _largest_at_most(prefix, int(total))
    out = np.empty(count, dtype=np.intp)
    pending: NDArray[np.intp] | None = None  # None: every draw (the first round, no gather)
    while pending is None or pending.size:
        size = count if pending is None else len(pending)
        w = np.asarray(_words(rng, size))
        accept = w <= limit
        x = w % total
        pos = search(x)
        edge = prefix[pos]
        if truncated:
            edge = edge + pos.astype(np.uint64)
        decided = accept & (pos < n) & (edge <= x)
        where = np.arange(count) if pending is None else pending
        if pending is None and decided.all():
            return pos
        out[where[decided]] = pos[decided]
        again = ~accept
        for i in np.flatnonzero(accept & ~decided):  # probability below n**2 / 2**56 per draw
            v = table._finish(0, int(x[i]), rng)
            if v is None:
                again[i] = True
            else:
                out[where[i]] = v
        pending = where[again]
    return out


#: Buckets of the guide table of :func:`_largest_at_most` (2**12 uint64: 32 KiB, cache-resident).
_GUIDE_BITS = 12


def _largest_at_most(prefix: NDArray[np.uint64], total: int) -> Any:
    """``x -> largest k with prefix[k] <= x`` for ``0 <= x < total``, vectorised.

    A guide table (Devroye's indexed search) over the top ``_GUIDE_BITS`` bits of x:
    ``guide[b]`` is the answer for the bucket's first value ``b << shift``, a lower bound
    for every x in the bucket; it is the answer exactly when ``prefix[guide[b] + 1] > x``
    (prefix is non-decreasing), which fails only for x past a boundary inside its bucket
    (a fraction about n / 2**12 of the draws): those few go through :func:`numpy.searchsorted`.
    Same answers as ``searchsorted(prefix, x, "right") - 1``, with one small-table gather
    instead of a binary search per draw.
    """
    shift = max(0, total.bit_length() - _GUIDE_BITS)
    starts = np.arange(((total - 1) >> shift) + 1, dtype=np.uint64) << np.uint64(shift)
    guide = np.searchsorted(prefix, starts, side="right") - 1
    after = np.append(prefix, np.uint64(2**64 - 1))  # after[k + 1] = prefix[k + 1]; past the end: never <= x
    sh = np.uint64(shift)

    def search(x: NDArray[np.uint64]) -> NDArray[np.intp]:
        pos = guide[x >> sh]
        need = after[pos + 1] <= x
        if need.any():
            pos[need] = np.searchsorted(prefix, x[need], side="right") - 1
        return np.asarray(pos, dtype=np.intp)

    return search


def _words(rng: RandomSource, count: int) -> NDArray[np.uint64]:
    from .._random import random_words

    return random_words(rng, count)


@dataclass(frozen=True, repr=False)
class NumberMechanism:
    """A numeric release on a :class:`NumericGrid` (see the module docstring).

    ``sample(ranks, rng)`` returns output indices into :attr:`output_labels`
    (ranks ``lo_rank..hi_rank``); :meth:`matrix` and :meth:`audit` give the law on small grids.
    """

    grid: NumericGrid
    epsilon: float
    kind: NumberKind
    log_ratio: float  # a' (module docstring)
    lo_rank: int
    hi_rank: int
    table: ExactTable = field(compare=False)
    tail: float = 0.0

    @property
    def half_width(self) -> int:
        """K: offsets beyond it are folded onto it."""
        return self.hi_rank - self.lo_rank

    @property
    def m(self) -> int:
        """Number of outputs."""
        return self.hi_rank - self.lo_rank + 1

    @cached_property
    def output_labels(self) -> tuple[str, ...]:
        """The labels of the outputs (ranks ``lo_rank..hi_rank``), built once per mechanism."""
        return tuple(self.grid.labels(self.lo_rank, self.hi_rank))

    def offset_weights(self) -> NDArray[np.float64]:
        """The 2K + 1 float weights of offsets -K..K (module docstring)."""
        return offset_weights(self.log_ratio, self.half_width)

    def sample(self, ranks: ArrayLike, rng: object = None) -> NDArray[np.intp]:
        """Output indices (into :attr:`output_labels`) for input ranks 0..n-1, exactly."""
        r = np.asarray(ranks, dtype=np.intp)
        if r.size and (r.min() < 0 or r.max() >= self.grid.n):
            raise ValidationError(f"ranks must lie in 0..{self.grid.n - 1}")
        warn_unless_secure(rng, stacklevel=2)
        return self.draw(r, check_rng(rng))

    def draw(self, ranks: NDArray[np.intp], source: RandomSource) -> NDArray[np.intp]:
        """:meth:`sample` for ranks already checked and a source from :func:`~metricdp._random.check_rng`
        (the file layer announces an insecure source once, not once per chunk)."""
        z = draw_offsets(self.table, ranks.size, source) - self.half_width
        out = np.clip(ranks.reshape(-1) + z, self.lo_rank, self.hi_rank) - self.lo_rank
        return out.reshape(ranks.shape)

    def release_labels(self, values: ArrayLike, source: RandomSource, *, where: str = "values",
                       out_of_range: str = "error", off_grid: str = "error") -> NDArray[Any]:
        """Released grid points (text, an object array) for true ``values`` (numbers or numeric text).

        Text is read by the CSV number rule (:func:`metricdp.io.parse_decimal`, each distinct
        value once); ``out_of_range`` / ``off_grid`` as in
        :func:`metricdp.streaming.numbers.privatize_numbers_file`. A value that cannot be
        released stops everything: one error naming ``where``, the count, the first
        positions, values and reasons. ``source`` comes from :func:`~metricdp._random.check_rng`.
        """
        from ..io import parse_decimal

        v = np.asarray(values)
        if v.dtype.kind in "iuf":
            numbers = v.astype(np.float64).reshape(-1)
            not_number = np.zeros(numbers.shape, dtype=bool)
        else:
            uniq, inverse = np.unique(v.astype(str).reshape(-1), return_inverse=True)
            parsed = np.full(len(uniq), np.nan)
            bad = np.zeros(len(uniq), dtype=bool)
            for i, text in enumerate(uniq.tolist()):  # distinct values, not rows
                try:
                    parsed[i] = parse_decimal(text)
                except ValueError:
                    bad[i] = True
            numbers, not_number = parsed[inverse.ravel()], bad[inverse.ravel()]
        ranks, status = self.grid.ranks(numbers, clamp=out_of_range == "clamp", snap=off_grid == "round")
        if v.dtype.kind in "iu" and off_grid == "error":
            status[inexact_integers(v.reshape(-1), numbers) & (status == 0)] = 3  # 2**53 + 1 read as 2**53
        status[not_number] = 4
        refused = np.flatnonzero(status)
        if refused.size:
            why = {1: "not finite", 2: "outside the range", 3: "not on the grid", 4: "not a number"}
            flat = v.reshape(-1)
            first = "; ".join(f"position {int(i)}: {flat[i]!r} ({why[int(status[i])]})" for i in refused[:5])
            raise ValidationError(f"{where}: {refused.size:,} value(s) cannot be released on the grid "
                                  f"{self.grid.lo}..{self.grid.hi} step {self.grid.step}; first: {first}")
        out = self.draw(ranks, source)
        return np.asarray(self.output_labels, dtype=object)[out]

    def matrix(self) -> NDArray[np.float64]:
        """The (n, m) law: row i = the clip of i + Z, normalised.

        Interior columns are one weight each; an end column is a sum of the folded tail,
        summed from its far (small) end, so no entry is a difference (no cancellation).
        """
        n, K = self.grid.n, self.half_width
        w = self.offset_weights()
        left = np.cumsum(w)  # left[k] = w[0] + ... + w[k]: offsets -K..k-K
        right = np.cumsum(w[::-1])[::-1]  # right[k] = w[k] + ... + w[2K]
        i = np.arange(n)[:, None]
        j = np.arange(self.lo_rank, self.hi_rank + 1)[None, :]
        z = j - i + K  # index of the offset landing in column j
        out = w[z]
        out[:, :1] = left[z[:, :1]]
        out[:, -1:] = right[z[:, -1:]]
        return np.asarray(out / w.sum(), dtype=np.float64)

    def distances(self) -> NDArray[np.float64]:
        """|x - x'| between the grid's points (n, n)."""
        r = np.arange(self.grid.n, dtype=np.float64)
        return float(self.grid.step) * np.abs(r[:, None] - r[None, :])

    def audit(self) -> Any:
        """:func:`metricdp.audit.audit` of :meth:`matrix` over the grid's metric."""
        from ..audit import audit

        return audit(self.matrix(), self.distances())

    def __repr__(self) -> str:
        return (f"NumberMechanism({self.kind}, {self.grid.lo}..{self.grid.hi} step {self.grid.step}, "
                f"epsilon={self.epsilon:g}, outputs {self.m})")


def offset_weights(log_ratio: float, half_width: int) -> NDArray[np.float64]:
    """Weights of offsets -K..K: e^{-a'|z|}, the ends carrying the folded tails (module docstring)."""
    K = half_width
    z = np.abs(np.arange(-K, K + 1, dtype=np.float64))
    w = np.exp(-log_ratio * z)
    end = math.exp(-log_ratio * K) / -math.expm1(-log_ratio)
    w[0] = w[-1] = end
    return w


def number_mechanism(grid: NumericGrid, epsilon: float, kind: str = "clamped-geometric", *,
                     tail: float = DEFAULT_TAIL) -> NumberMechanism:
    """The ``kind`` mechanism (``clamped-geometric`` or ``discrete-laplace``) on ``grid`` at ``epsilon`` per unit.

    Raises
    ------
    ValidationError
        An unknown kind, a bad epsilon or tail, or parameters whose weights would leave
        the float range or whose table would exceed :data:`MAX_OFFSETS` offsets.
    """
    epsilon = check_epsilon(epsilon)
    if kind not in KINDS:
        raise ValidationError(f"the parameter 'kind' must be one of {', '.join(KINDS)}, got {kind!r}")
    if not (isinstance(tail, float | int) and 0 < tail < 0.5):
        raise ValidationError(f"tail must be in (0, 0.5), got {tail!r}")
    step = float(grid.step)
    a = epsilon * step
    if not math.isfinite(a):
        raise ValidationError(f"epsilon * step = {a!r} is not finite")
    a1 = safe_log_ratio(a)
    n = grid.n
    extra = 0
    if kind == "discrete-laplace":
        # smallest T with beta^T / (1 + beta) <= tail
        extra = max(0, math.ceil((-math.log(tail) - math.log1p(math.exp(-a1))) / a1))
    K = n - 1 + 2 * extra
    if K > MAX_OFFSETS:
        raise ValidationError(
            f"{kind} on {n:,} grid points at epsilon * step = {a:.3g} needs {K:,} offsets; at most {MAX_OFFSETS:,} "
            "(a larger epsilon or step, or a narrower range)"
        )
    if a1 * K - math.log(-math.expm1(-a1)) > _EXPONENT_CAP:
        raise ValidationError(
            f"epsilon * step * (range in steps) = {a * K:.4g} is too large: the probability of the far end would "
            f"underflow float64 and make the release infinitely non-private; use a smaller epsilon or a coarser step "
            f"(epsilon * (hi - lo) at most {_EXPONENT_CAP:g})"
        )
    table = ExactTable.from_matrix(offset_weights(a1, K)[None, :])
    return NumberMechanism(grid, epsilon, kind, a1, -extra, n - 1 + extra, table,
                           tail if kind == "discrete-laplace" else 0.0)


@declared("discrete-laplace")
def discrete_laplace(space: MetricSpace, epsilon: float, *, tail: float = DEFAULT_TAIL,
                     outputs: Any = None) -> Any:
    """Registry builder: the discrete Laplace mechanism on an equally spaced 1-d line space.

    Outputs are the line extended by T steps at both ends (an
    :class:`~metricdp.outputs.OutputSet` the builder makes: ``outputs`` must be None),
    T as in :func:`number_mechanism`; the matrix is certified (audited) like every exact family.

    Examples
    --------
    >>> from metricdp.spaces import MetricSpace
    >>> m = discrete_laplace(MetricSpace.from_points([[0.0], [1.0], [2.0]]), 2.0)
    >>> m.m, m.audit().epsilon <= 2.0
    (39, True)
    """
    if outputs is not None:
        raise ValidationError("discrete-laplace makes its own outputs (the line extended past its ends); "
                              "it takes no output set")
    from ..outputs import OutputSet
    from .base import certify
    from .geometric import _line_ranks

    epsilon = check_epsilon(epsilon)
    line = _line_ranks(space)
    if line is None or space.points is None or space.points.shape[1] != 1:
        raise ValidationError("discrete-laplace needs an equally spaced line of 1-d points (h*0, h*1, ...)")
    ranks, h = line
    end = int(np.flatnonzero(ranks == 0)[0])
    x0 = float(space.points[end, 0])
    sign = 1.0 if space.points[:, 0].max() > x0 else -1.0
    grid = NumericGrid(0, (space.n - 1) * h, h)
    mech = number_mechanism(grid, epsilon, "discrete-laplace", tail=tail)
    k = np.arange(mech.lo_rank, mech.hi_rank + 1)
    pts = x0 + sign * h * k.astype(np.float64)
    labels = [space.labels[int(np.flatnonzero(ranks == r)[0])] if 0 <= r < space.n else repr(float(p))
              for r, p in zip(k.tolist(), pts.tolist(), strict=True)]
    cross = h * np.abs(ranks[:, None] - k[None, :]).astype(np.float64)
    outputs = OutputSet.from_distances(space, cross, labels)
    matrix = mech.matrix()[ranks]  # rows in the space's order
    params = {"tail": tail, "log_ratio": mech.log_ratio, "step": h, "extension": -mech.lo_rank}
    return certify(matrix, space, epsilon, "discrete-laplace", params, outputs=outputs)

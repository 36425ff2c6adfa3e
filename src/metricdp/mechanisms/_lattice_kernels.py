r"""Compiled loops of the exact lattice sampler and the points writer (numba, the optional ``fast`` extra).

Each kernel runs, row by row in one call, the *same* decisions as the numpy code it
replaces (which stays the reference the tests compare them with):

* :func:`level_count` -- :meth:`metricdp.mechanisms.lattice_batch._Level.count`'s certain
  part: the count of table entries above W, and a flag for rows whose W equals an entry
  (those go to the exact path in Python, as in numpy);
* :func:`accept` -- :meth:`~metricdp.mechanisms.lattice_batch.LatticeSampler._accept`'s
  float bounds (``docs/proofs/lattice_points.md``, section 2) with the same operations in
  the same order; an undecided row is flagged for the exact path;
* :func:`forward` / :func:`inverse` -- :class:`metricdp.location.projection.TangentPlane`'s
  formulas (post-processing and snapping; their float error is the delta of the proof);
* :func:`gather_fields` -- a column's unquoted fields as Arrow buffers, as
  :func:`metricdp.tabular.csvsplit.field_values` gathers them;
* :func:`parse_decimals` -- a column's plain decimals of up to 15 digits as floats,
  exactly as :func:`metricdp.io.parse_decimal` reads them (every other field flagged);
* :func:`split_plain` -- :func:`metricdp.tabular.csv.split_records` of a chunk with no
  quote, carriage return, NUL or 0xEF byte (every other chunk, and every refusal, is numpy's);
* :func:`splice_table` -- :func:`metricdp.tabular.csvsplit.splice` in one pass;
* :func:`splice_points` -- the CSV output of a chunk: the input bytes with the two
  coordinate fields replaced by fixed-decimal texts and dropped ranges removed, as
  :func:`metricdp.tabular.csvsplit.splice` with :func:`metricdp.streaming.points.format_fixed`.

The decisions are exact whatever the float arithmetic does within the proved bounds (a
fused multiply-add, if LLVM used one, is at least as accurate as two roundings). Without
numba, ``KERNELS`` is None and numpy runs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._numba import njit
from ..spaces import EARTH_RADIUS_KM

__all__ = ["KERNELS"]

KERNELS: Any = None


_LN2 = math.log(2.0)
_COEF = np.array([1.0 / math.factorial(i) for i in range(17)])
_TWO64 = 2.0**64
_MARGIN = 2.0**-32
_GAMMA_REL = 2.0**-48
_GAMMA_CAP = 60.0
_BIG = 1 << 31
_R = float(EARTH_RADIUS_KM)
_POW10 = np.array([10.0**k for k in range(16)])  # exact doubles (10^k < 2^53)

if njit is not None:  # pragma: no branch

    @njit(cache=True, nogil=True)
    def level_count(w: Any, desc: Any, mode: int, p1: float, p2: float) -> tuple[Any, Any]:
        """(count of entries > W, W equals an entry) per row; desc non-increasing uint64."""
        n = w.size
        size = desc.size
        c = np.empty(n, dtype=np.int64)
        eq = np.zeros(n, dtype=np.bool_)
        for r in range(n):
            wr = w[r]
            u = (float(wr) + 0.5) * 2.0**-64
            if mode == 0:
                g = math.ceil(-math.log(u) / p1) - 1.0
            else:
                g = math.ceil(-math.log(u * (1.0 - p2) + p2) / p1) - 1.0
            k = 0 if not g > 0.0 else size if g > size else int(g)
            ok = (k == 0 or desc[k - 1] > wr) and (k == size or desc[k] < wr)
            if not ok:  # binary search: number of entries > wr in a non-increasing array
                lo, hi = 0, size
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if desc[mid] > wr:
                        lo = mid + 1
                    else:
                        hi = mid
                k = lo
                if k < size and desc[k] == wr:
                    eq[r] = True
            c[r] = k
        return c, eq

    @njit(cache=True, nogil=True)
    def _exp_neg(x: float, coef: Any) -> float:
        k = np.floor(x / _LN2)
        f = x - k * _LN2
        p = coef[16]
        for i in range(15, -1, -1):
            p = p * f + coef[i]
        return math.ldexp(1.0 / p, -int(k))

    @njit(cache=True, nogil=True)
    def _to_u64(x: float) -> Any:
        """An integral float in [0, 2^64) as uint64, exactly (a direct cast goes through int64 above 2^63)."""
        if x >= 9223372036854775808.0:
            return np.uint64(np.int64(x - 9223372036854775808.0)) + np.uint64(9223372036854775808)
        return np.uint64(np.int64(x))

    @njit(cache=True, nogil=True)
    def accept(a: Any, b: Any, w: Any, alpha: float, beta: float, coef: Any) -> tuple[Any, Any]:
        """(accepted, undecided) per row: the float bounds of LatticeSampler._accept."""
        n = a.size
        acc = np.zeros(n, dtype=np.bool_)
        unsure = np.zeros(n, dtype=np.bool_)
        for r in range(n):
            ar_, br_ = abs(a[r]), abs(b[r])
            if ar_ >= _BIG or br_ >= _BIG:
                unsure[r] = True
                continue
            q = a[r] * a[r] + b[r] * b[r]
            if q == 0:
                acc[r] = True
                continue
            ar = alpha * math.sqrt(float(q))
            bl = beta * float(ar_ + br_)
            gamma = ar - bl
            err = _GAMMA_REL * (ar + bl)
            if err > 0.25:
                unsure[r] = True
                continue
            top = gamma + err
            y = _exp_neg(min(max(top, 0.0), _GAMMA_CAP), coef)
            # np.floor/np.ceil keep floats (math.floor returns an int64, which overflows above 2^63)
            lo = np.floor(y * _TWO64 * (1.0 - _MARGIN)) if top <= _GAMMA_CAP else 0.0
            hi = np.ceil(y * _TWO64 * ((1.0 + 4.0 * err) * (1.0 + _MARGIN)))
            wr = w[r]
            if wr < _to_u64(lo):
                acc[r] = True
            elif hi < _TWO64 and wr >= _to_u64(hi):
                acc[r] = False
            else:
                unsure[r] = True
        return acc, unsure

    @njit(cache=True, nogil=True)
    def forward(lat: Any, lon: Any, lat0: float, lon0: float) -> tuple[Any, Any]:
        """Azimuthal equidistant (x east, y north) km about (lat0, lon0), as TangentPlane.forward."""
        n = lat.size
        x = np.empty(n)
        y = np.empty(n)
        lat1, lon1 = math.radians(lat0), math.radians(lon0)
        c1, s1 = math.cos(lat1), math.sin(lat1)
        for r in range(n):
            lat2 = math.radians(lat[r])
            dlon = math.radians(lon[r]) - lon1
            c2, s2 = math.cos(lat2), math.sin(lat2)
            h = math.sin((lat2 - lat1) / 2) ** 2 + c1 * c2 * math.sin(dlon / 2) ** 2
            c = 2.0 * math.asin(math.sqrt(min(max(h, 0.0), 1.0)))
            theta = math.atan2(math.sin(dlon) * c2, c1 * s2 - s1 * c2 * math.cos(dlon))
            rho = _R * c
            x[r] = rho * math.sin(theta)
            y[r] = rho * math.cos(theta)
        return x, y

    @njit(cache=True, nogil=True)
    def inverse(x: Any, y: Any, lat0: float, lon0: float) -> tuple[Any, Any]:
        """(lat, lon) degrees of plane points, as TangentPlane.inverse (|(x, y)| < pi R)."""
        n = x.size
        lat = np.empty(n)
        lon = np.empty(n)
        lat1, lon1 = math.radians(lat0), math.radians(lon0)
        c1, s1 = math.cos(lat1), math.sin(lat1)
        for r in range(n):
            rho = math.hypot(x[r], y[r])
            theta = math.atan2(x[r], y[r])
            delta = rho / _R
            sd, cd = math.sin(delta), math.cos(delta)
            sin_lat2 = s1 * cd + c1 * sd * math.cos(theta)
            lat2 = math.asin(min(max(sin_lat2, -1.0), 1.0))
            east = math.sin(theta) * sd * c1
            lon2 = lon1 + math.atan2(east, cd - s1 * sin_lat2)
            lon2 = (lon2 + math.pi) % (2 * math.pi) - math.pi
            lat[r] = math.degrees(lat2)
            lon[r] = math.degrees(lon2)
        return lat, lon

    @njit(cache=True, nogil=True)
    def _write_fixed(out: Any, pos: int, v: int, digits: int) -> int:
        if v < 0:
            out[pos] = 45  # '-'
            pos += 1
            v = -v
        scale = 1
        for _ in range(digits):
            scale *= 10
        ip, fp = v // scale, v % scale
        tmp = np.empty(20, dtype=np.uint8)
        k = 0
        while True:
            tmp[k] = 48 + ip % 10
            k += 1
            ip //= 10
            if ip == 0:
                break
        for i in range(k - 1, -1, -1):
            out[pos] = tmp[i]
            pos += 1
        if digits:
            out[pos] = 46  # '.'
            pos += 1
            d = scale // 10
            for _ in range(digits):
                out[pos] = 48 + (fp // d) % 10
                pos += 1
                d //= 10
        return pos

    @njit(cache=True, nogil=True)
    def splice_points(buf: Any, end: int, starts: Any, stops: Any, row: Any, kind: Any, lat: Any, lon: Any,
                      digits: int) -> Any:
        """buf[:end] with range i replaced by the fixed text of lat[row] (kind 0), lon[row] (kind 1) or nothing."""
        out = np.empty(end + 24 * starts.size, dtype=np.uint8)
        pos = 0
        prev = 0
        for i in range(starts.size):
            s = starts[i]
            for t in range(prev, s):
                out[pos] = buf[t]
                pos += 1
            if kind[i] == 0:
                pos = _write_fixed(out, pos, lat[row[i]], digits)
            elif kind[i] == 1:
                pos = _write_fixed(out, pos, lon[row[i]], digits)
            prev = stops[i]
        for t in range(prev, end):
            out[pos] = buf[t]
            pos += 1
        return out[:pos]

    @njit(cache=True, nogil=True)
    def gather_fields(buf: Any, fs: Any, fe: Any) -> tuple[Any, Any, bool]:
        """Fields' bytes as Arrow binary buffers (data, int32 offsets); False when one is quoted (use numpy)."""
        n = fs.size
        offsets = np.empty(n + 1, dtype=np.int32)
        total = 0
        offsets[0] = 0
        for r in range(n):
            a, b = fs[r], fe[r]
            if b > a and buf[a] == 34:  # '"': csvsplit.field_values unquotes
                return np.empty(0, dtype=np.uint8), offsets, False
            total += b - a
            offsets[r + 1] = total
        data = np.empty(total, dtype=np.uint8)
        pos = 0
        for r in range(n):
            for t in range(fs[r], fe[r]):
                data[pos] = buf[t]
                pos += 1
        return data, offsets, True

    @njit(cache=True, nogil=True)
    def parse_decimals(buf: Any, fs: Any, fe: Any) -> tuple[Any, Any]:
        """(value, ok) per field: ``float(text)`` of ``[+-]?(D+(.D*)?|.D+)`` with at most 15 digits.

        Exact by Clinger's fast path: the digits m < 10^15 < 2^53 and 10^k (k <= 15) are
        exact doubles, so ``m / 10^k`` is one correctly rounded IEEE division -- the double
        nearest the decimal, which is what Python's ``float`` returns. Any other field
        (quoted, blank-padded, an exponent, more digits, empty, not a number) is not ok:
        the caller reads it by the one number rule.
        """
        n = fs.size
        out = np.zeros(n)
        ok = np.zeros(n, dtype=np.bool_)
        for r in range(n):
            a, b = fs[r], fe[r]
            neg = False
            if a < b and (buf[a] == 43 or buf[a] == 45):  # '+' '-'
                neg = buf[a] == 45
                a += 1
            m = 0
            digits = 0
            frac = 0
            point = False
            good = a < b
            for t in range(a, b):
                c = buf[t]
                if 48 <= c <= 57:
                    m = m * 10 + (c - 48)
                    digits += 1
                    if point:
                        frac += 1
                elif c == 46 and not point:  # '.'
                    point = True
                else:
                    good = False
                    break
            if not good or digits == 0 or digits > 15:
                continue
            v = m / _POW10[frac]
            out[r] = -v if neg else v
            ok[r] = True
        return out, ok

    @njit(cache=True, nogil=True)
    def splice_table(buf: Any, end: int, starts: Any, stops: Any, table: Any, table_off: Any, choice: Any) -> Any:
        """buf[:end] with range i replaced by table entry choice[i], as csvsplit.splice (ranges sorted, disjoint)."""
        total = end
        for i in range(starts.size):
            total += table_off[choice[i] + 1] - table_off[choice[i]] - (stops[i] - starts[i])
        out = np.empty(total, dtype=np.uint8)
        pos = 0
        prev = 0
        for i in range(starts.size):
            s = starts[i]
            ln = s - prev
            out[pos:pos + ln] = buf[prev:s]
            pos += ln
            a, b = table_off[choice[i]], table_off[choice[i] + 1]
            for t in range(a, b):
                out[pos] = table[t]
                pos += 1
            prev = stops[i]
        ln = end - prev
        out[pos:pos + ln] = buf[prev:end]
        return out

    @njit(cache=True, nogil=True)
    def _refuse_split() -> tuple[bool, int, Any, Any, Any, Any, Any]:
        e = np.empty(0, dtype=np.int64)
        return False, 0, e, e, e, e, e

    @njit(cache=True, nogil=True)
    def split_plain(buf: Any, ncols: int, max_records: int, eof: bool, cap: int) -> tuple[
            bool, int, Any, Any, Any, Any, Any]:
        """tabular.csv.split_records of a buffer without ``"``, ``\\r``, NUL or 0xEF up to its records' end.

        Returns ``(ok, end, starts, stops, lines, delims, first)`` with the same values as
        numpy's split; ``ok`` is False -- use numpy, which also raises the refusals -- for
        any such byte, a record over ``cap`` bytes or another field count than ``ncols``.
        """
        n = buf.size
        end = 0
        nlines = 0
        ncomma = 0
        for i in range(n):
            c = buf[i]
            if c == 10:
                nlines += 1
                end = i + 1
                if nlines == max_records:
                    break
            elif c == 44:
                ncomma += 1
            elif c == 34 or c == 13 or c == 0 or c == 239:
                if nlines < max_records:
                    return _refuse_split()
        tail = eof and nlines < max_records and end < n
        if tail:
            nlines += 1
            end = n
        else:
            ncomma = 0  # commas after the last line break are not in the region: counted again below
            for i in range(end):
                if buf[i] == 44:
                    ncomma += 1
        starts = np.empty(nlines, dtype=np.int64)
        stops = np.empty(nlines, dtype=np.int64)
        lines = np.empty(nlines, dtype=np.int64)
        first = np.empty(nlines, dtype=np.int64)
        delims = np.empty(ncomma, dtype=np.int64)
        k = 0  # records kept (non-empty)
        line = 0
        d = 0
        start = 0
        for i in range(end + 1):
            at_end = i == end
            c = buf[i] if not at_end else 10
            if c == 44:
                delims[d] = i
                d += 1
            elif c == 10 and (not at_end or tail):
                if i > start:
                    if i - start > cap:
                        return _refuse_split()
                    starts[k] = start
                    stops[k] = i
                    lines[k] = line
                    k += 1
                line += 1
                start = i + 1
        # fields per record, and each record's first delimiter
        j = 0
        for r in range(k):
            while j < d and delims[j] < starts[r]:
                j += 1
            first[r] = j
            cnt = 0
            while j + cnt < d and delims[j + cnt] < stops[r]:
                cnt += 1
            if cnt != ncols - 1:
                return _refuse_split()
        return True, end, starts[:k], stops[:k], lines[:k], delims[:d], first[:k]

    KERNELS = {"gather_fields": gather_fields, "parse_decimals": parse_decimals, "splice_table": splice_table,
               "split_plain": split_plain,
               "level_count": level_count, "accept": accept, "forward": forward,
               "inverse": inverse, "splice_points": splice_points, "coef": _COEF}

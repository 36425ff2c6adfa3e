r"""What leaves, by name and by content: the one check that refuses a true copy of the released column.

:func:`~metricdp.tabular.columns.plan_columns` says which columns leave with their TRUE
values. Names lie -- ``latlng`` holding ``"lat,lon"``, a WKT ``geom``, ``breite``, a
latitude spelt with a Cyrillic ``а`` -- values do not. This module decides, once for
every kind, format, engine and the DataFrame API, whether a column the user did not name
in ``keep`` is the released information under another name:

**By name** (:mod:`metricdp.tabular.names`). Names are compared after NFKC
normalisation, dropping format characters (Unicode category ``Cf``: zero-width joiners,
soft hyphens), :meth:`str.casefold`, and a confusable skeleton in the manner of Unicode
TR 39 (Cyrillic and Greek letters that look like Latin ones are mapped to them), then
without punctuation. A name whose key equals a released column's key is a twin
(:func:`~metricdp.tabular.columns.plan_columns` refuses it); for a release of points a
name whose words are a latitude, longitude or coordinate-pair synonym (English, German,
French, Spanish, Portuguese, Italian, Dutch; ``geom``, ``wkt``, ``position``, ...) is a
look-alike (:func:`check_names`).

**By content** (:func:`check_rows`, :class:`ContentScan`). In every block of
:data:`SCAN_ROWS` rows, counted from the table's first row whoever reads it in whatever
chunks (:func:`compared_rows`; :data:`SAMPLE` rows of it, evenly spread, are compared) a kept
column that nobody named in ``keep`` is refused when in MOST compared rows (more than
half of those whose released value is present) its value

* equals the released column's true value after :func:`value_key` (NFKC, casefold, outer
  spaces dropped) -- labels and text tokens, whose release is a different label or token:
  an equal string is the true value itself;
* for numbers, is a number within the release's scale of the true number: ``max(step,
  1/eps)`` in the value's units (:meth:`LeakRule.numbers`): the grid cannot tell values
  closer than a step apart, and the noise's scale is ``1/eps`` -- a column closer to the
  truth than the noise says more than the release;
* for points, is a number within the noise scale of the true latitude or longitude, or a
  coordinate pair (``"lat,lon"``, ``"lat lon"``, ``"[lat, lon]"``, WKT ``POINT(lon lat)``,
  GeoJSON ``{"coordinates": [lon, lat]}``; either order) within that scale of the true
  point: the planar Laplace's mean displacement ``2/eps`` km (:meth:`LeakRule.points`).

**Codes** (:func:`_recoding_hits`). For labels, a column that is a function of the true
label (``0`` for paris, ``1`` for london; a flag ``is_paris``) is the released column, or
part of it, under a dictionary: refused when it is one value per true label in most
compared rows and not one value everywhere, or when it is a number whose variance the
true labels explain to :data:`EXPLAINED` (a noisy code: each city's coordinates, jittered).

**Re-encodings** (:func:`_affine_hits`). A number column that is an affine function of a
true number -- radians, millidegrees, metres north of a public origin, an age in months,
a row number of a file sorted by the value -- carries the truth as exactly as a copy: fit
``truth ~ a * value + b`` by least squares over the compared rows; the column is refused
when the fit lands within the release's scale of the truth in most rows, on at least
:data:`MIN_FIT` rows, and the truths themselves are NOT within that scale of their mean
in most rows (otherwise any column, a constant included, would "fit"). An adversary
holding the file recovers ``a`` and ``b`` from a few rows whose truth it knows, or from
the released column itself, so the fit's accuracy is what the column leaks.

"Most rows" (not "any row") keeps columns that share a value with the released one by
chance (a flag equal to a yes/no label now and then, an id equal to an age) from being
refused, while a copy, a rounding or a re-encoding of the truth -- equal in every row --
is always caught. A column whose matching rows all hold ONE value, beside released values
that vary, is not refused either: a constant says nothing about any row (a country code
within a wide noise scale of every age). A refusal is one :class:`~metricdp.errors.ValidationError` naming the
column, the file and the first row that matched, raised by a scan that runs before the
release writes or reserves anything. A column named in ``keep`` is the user's decision
and is written (and reported as kept); a dropped column is not written and not checked.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import ValidationError
from .names import coordinate_role

__all__ = [
    "SAMPLE",
    "SCAN_ROWS",
    "ContentScan",
    "LeakRule",
    "check_chunk",
    "check_names",
    "check_rows",
    "compared_rows",
    "spread",
    "value_key",
]

#: Rows per block of the scan: "most rows" is decided per block, so a leak in one part of a file is not diluted.
SCAN_ROWS = 65_536
#: Rows compared per block, evenly spread (all of a smaller block): a copy of the truth matches in every row.
SAMPLE = 512
#: Fewest rows on which an affine re-encoding is fitted: two numbers fit any two rows exactly.
MIN_FIT = 10
_KM_PER_DEGREE = 111.32


def value_key(value: object) -> str:
    """A value as compared for equality: its text, NFKC, format characters dropped, casefolded, outer spaces dropped.

    Bytes are read as UTF-8 text and a sequence of one element as that element, so
    ``b"paris"``, ``["paris"]`` and ``"pa\u200bris"`` are all the label ``paris``.

    An ASCII text skips the normalisation, which cannot change it: every ASCII character
    is its own NFKC form, and none is a format character (ASCII's controls are ``Cc``).
    """
    if type(value) is str:  # the common case, first
        text = value
    else:
        if isinstance(value, (bytes, bytearray, memoryview)):
            value = bytes(value).decode("utf-8", "replace")
        elif isinstance(value, (list, tuple, np.ndarray)) and len(value) == 1:
            return value_key(value[0])
        elif isinstance(value, dict) and len(value) == 1:
            return value_key(next(iter(value.values())))
        text = str(value)
    if text.isascii():
        return text.casefold().strip()
    text = unicodedata.normalize("NFKC", text)
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf").casefold().strip()


@dataclass(frozen=True)
class LeakRule:
    """What is released and at which scale (module docstring): ``kind`` and the released ``columns``.

    ``scale`` is the distance within which a kept value counts as the true one: in the
    value's units for ``"numbers"``, in km for ``"points"``, unused (equality) for
    ``"labels"`` and ``"text"``.
    """

    kind: str
    columns: tuple[str, ...]
    scale: float = 0.0

    @classmethod
    def labels(cls, column: str) -> LeakRule:
        return cls("labels", (column,))

    @classmethod
    def text(cls, column: str) -> LeakRule:
        return cls("text", (column,))

    @classmethod
    def numbers(cls, column: str, mechanism: Any) -> LeakRule:
        """``max(step, 1/eps)``: the grid's resolution or the noise's scale, whichever is larger."""
        step = float(mechanism.grid.step)
        eps = float(mechanism.epsilon)
        return cls("numbers", (column,), max(step, 1.0 / eps if eps > 0 else math.inf))

    @classmethod
    def points(cls, lat: str, lon: str, epsilon_per_km: float | None) -> LeakRule:
        """The planar Laplace's mean displacement ``2/eps`` km (1 km when eps is not known)."""
        scale = 2.0 / epsilon_per_km if epsilon_per_km and epsilon_per_km > 0 else 1.0
        return cls("points", (lat, lon), scale)


def check_names(header: Sequence[str], unacknowledged: Sequence[str], rule: LeakRule, where: str) -> None:
    """Refuse an unacknowledged column whose name says it holds a released coordinate (points only)."""
    if rule.kind != "points":
        return
    twins = [h for h in unacknowledged if coordinate_role(h) is not None]
    if twins:
        lat, lon = rule.columns
        raise ValidationError(
            f"{where}: column(s) {', '.join(map(repr, twins))} look like the released coordinates ({lat!r}, {lon!r}) "
            "and would leave with their true values: drop each one, or keep it on purpose if it is not a location"
        )


# ---------------------------------------------------------------------------------- content
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
#: The characters an ASCII text that :func:`float` reads starts with, after its sign: a digit, a point,
#: ``inf`` or ``nan`` in any case.
_FLOAT_START = frozenset("0123456789.iInN")


def _number(value: object) -> float | None:
    if type(value) is str:  # the common case, first
        text = value.strip()
    elif value is None or isinstance(value, bool):
        return None
    elif isinstance(value, (int, float, np.integer, np.floating)):
        x = float(value)
        return x if math.isfinite(x) else None
    else:
        text = str(value).strip()
    if not text or len(text) > 64:
        return None
    if text.isascii() and text.lstrip("+-")[:1] not in _FLOAT_START:
        return None  # no number: float() reads no ASCII text that starts otherwise, and raising costs more
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _pair(value: object) -> tuple[float, float] | None:
    """Two numbers in a value (a pair, WKT, GeoJSON-like text or a sequence), else None."""
    if value is None or isinstance(value, (int, float, bool, np.integer, np.floating)):
        return None
    if isinstance(value, (list, tuple, np.ndarray)):
        nums = [_number(v) for v in list(value)[:3]]
    elif isinstance(value, dict):
        return _pair(value.get("coordinates"))
    else:
        text = str(value)
        if len(text) > 256:
            return None
        nums = [float(m) for m in _NUMBER.findall(text)]
    if len(nums) != 2 or any(v is None for v in nums):
        return None
    return float(nums[0]), float(nums[1])  # type: ignore[arg-type]


def _km(lat: float, lon: float, lat2: float, lon2: float) -> float:
    dlon = (lon2 - lon + 180.0) % 360.0 - 180.0
    return _KM_PER_DEGREE * math.hypot(lat2 - lat, dlon * math.cos(math.radians((lat + lat2) / 2)))


def _each(reading: Callable[[Any], Any], values: Sequence[Any]) -> list[Any]:
    """``reading`` of every value (None for a missing one), once per distinct text: equal texts read alike.

    Only exact ``str`` values share a reading: ``1``, ``1.0`` and ``True`` are equal keys of
    a dict, yet :func:`value_key` reads them apart.
    """
    memo: dict[str, Any] = {}
    out: list[Any] = []
    for v in values:
        if v is None:
            out.append(None)
        elif type(v) is str:
            got = memo.get(v, memo)
            if got is memo:
                got = memo[v] = reading(v)
            out.append(got)
        else:
            out.append(reading(v))
    return out


class _Column:
    """One column's compared values in a block and their readings, each made once, when first asked for.

    A true value meets every unnamed column and each rule, and a label column holds a few
    texts many times: reading each value once per block (:func:`_each`), not once per
    comparison, is what keeps the check cheap beside the release. ``keys[k]`` is
    :func:`value_key` of value ``k``, ``numbers[k]`` its number; both None when it is missing.
    """

    def __init__(self, values: Sequence[Any]) -> None:
        self.values = values

    @cached_property
    def keys(self) -> list[str | None]:
        return _each(value_key, self.values)

    @cached_property
    def numbers(self) -> list[float | None]:
        return _each(_number, self.values)

    @cached_property
    def filled(self) -> list[bool]:
        """Whether each value is present: neither missing nor blank."""
        return [v is not None and str(v).strip() != "" for v in self.values]


def _near_point(scale: float, lat: float, lon: float, value: Any, x: float | None) -> bool:
    """Whether ``value`` (its number ``x``) is the true latitude, longitude or point within ``scale`` km."""
    if x is not None:
        return (abs(x - lat) * _KM_PER_DEGREE <= scale
                or abs(x - lon) * _KM_PER_DEGREE * max(math.cos(math.radians(lat)), 1e-3) <= scale)
    pair = _pair(value)
    if pair is None:
        return False
    a, b = pair
    return (abs(a) <= 90 and _km(lat, lon, a, b) <= scale) or (abs(b) <= 90 and _km(lat, lon, b, a) <= scale)


def _hits(rule: LeakRule, truth: Sequence[_Column], column: _Column, present: Sequence[int]) -> list[int]:
    """The compared rows where ``column`` holds the true value by ``rule`` (module docstring)."""
    values = column.values
    if rule.kind in ("labels", "text"):
        true, keys = truth[0].keys, column.keys
        return [k for k in present if keys[k] is not None and keys[k] == true[k]]
    if rule.kind == "numbers":
        t, x = truth[0].numbers, column.numbers
        hits = []
        for k in present:
            if values[k] is None:
                continue
            tk, xk = t[k], x[k]
            if tk is None or xk is None:  # a text: equal to the true text
                if column.keys[k] == truth[0].keys[k]:
                    hits.append(k)
            elif abs(xk - tk) <= rule.scale:
                hits.append(k)
        return hits
    lat, lon, x = truth[0].numbers, truth[1].numbers, column.numbers
    return [k for k in present if values[k] is not None and lat[k] is not None and lon[k] is not None
            and _near_point(rule.scale, lat[k], lon[k], values[k], x[k])]  # type: ignore[arg-type]


def _recoding_hits(rule: LeakRule, truth: _Column, column: _Column, present: Sequence[int]) -> list[int]:
    """Rows where the column is a function of the true label: a code (``0, 1, 2``), a one-hot flag.

    Rows are grouped by their TRUE label; a group of at least two rows whose column values
    all agree is coded. Returned when coded rows are most compared rows, on at least
    :data:`MIN_FIT` rows, and the code takes at least two values there (a constant says
    nothing). The direction matters: a column that the label determines changes with the
    row's label, so it carries it; a person's id, which may determine the label in a file
    where each person has one, does not change when the label does, and is not refused.
    """
    if rule.kind != "labels" or len(present) < MIN_FIT:
        return []
    labels, keys = truth.keys, column.keys
    groups: dict[str | None, list[int]] = {}
    for k in present:
        groups.setdefault(labels[k], []).append(k)
    hits: list[int] = []
    codes: set[str] = set()
    for rows in groups.values():
        seen = {"" if keys[k] is None else keys[k] for k in rows}
        if len(rows) >= 2 and len(seen) == 1:
            hits.extend(rows)
            codes |= seen  # type: ignore[arg-type]
    if 2 * len(hits) > len(present) and len(codes) >= 2:
        return sorted(hits)
    return list(present) if _explained(groups, column.numbers) >= EXPLAINED else []


#: Share of a number column's variance that the true labels explain, above which the
#: column is a noisy code of them (coordinates jittered around each city's centre).
EXPLAINED = 0.99


def _explained(groups: Mapping[Any, Sequence[int]], numbers: Sequence[float | None]) -> float:
    """1 - within-label / total sum of squares of a number column (0 when it is not one, or constant)."""
    nums = {g: [x for x in (numbers[k] for k in rows) if x is not None] for g, rows in groups.items()}
    everything = [x for xs in nums.values() for x in xs]
    if len(everything) < MIN_FIT or sum(len(xs) >= 2 for xs in nums.values()) < 2:
        return 0.0
    total = float(np.var(everything)) * len(everything)
    if total <= 0:
        return 0.0
    within = sum(float(np.var(xs)) * len(xs) for xs in nums.values() if xs)
    return 1.0 - within / total


def _affine_hits(rule: LeakRule, truth: Sequence[_Column], column: _Column,
                 present: Sequence[int]) -> tuple[list[int], str]:
    """Rows where ``truth ~ a * value + b`` (least squares) lands within the scale (module docstring).

    Returns the hits and the true column they re-encode; none when the column is not a
    number in :data:`MIN_FIT` rows, is constant, or the truths need no column to be
    guessed within the scale (most within it of their mean).
    """
    if rule.kind not in ("numbers", "points"):
        return [], ""
    numbers = column.numbers
    ks = [k for k in present if numbers[k] is not None]
    if len(ks) < MIN_FIT:
        return [], ""
    x = np.array([numbers[k] for k in ks], dtype=float)
    if np.ptp(x) == 0:
        return [], ""
    for j, name in enumerate(rule.columns):
        true = truth[j].numbers
        t = np.array([true[k] for k in ks], dtype=float)  # a missing number: nan
        if not np.isfinite(t).all():
            continue
        if rule.kind == "numbers":
            tol = np.full(len(ks), rule.scale)
        elif j == 0:
            tol = np.full(len(ks), rule.scale / _KM_PER_DEGREE)
        else:
            lat = np.array([truth[0].numbers[k] or 0.0 for k in ks], dtype=float)
            tol = rule.scale / (_KM_PER_DEGREE * np.maximum(np.cos(np.radians(lat)), 1e-3))
        if 2 * int((np.abs(t - t.mean()) <= tol).sum()) > len(present):
            continue  # the truths' mean alone guesses most rows: a fit would prove nothing
        xc = x - x.mean()
        a = float(xc @ (t - t.mean()) / (xc @ xc))
        fit = a * xc + t.mean()
        hits = [k for k, ok in zip(ks, np.abs(t - fit) <= tol, strict=True) if ok]
        if 2 * len(hits) > len(present):
            return hits, name
    return [], ""


def check_rows(
    rule: LeakRule,
    truths: Sequence[Sequence[Any]],
    others: Mapping[str, Sequence[Any]],
    rows: Sequence[Any],
    where: str,
    *,
    row_word: str = "row",
) -> None:
    """Refuse a column of ``others`` that holds the released values in most of these rows (module docstring).

    ``truths[k]`` is row k's released value(s) (one, or (lat, lon)); ``others`` maps each
    unacknowledged column to its values in the same rows; ``rows[k]`` names row k in the
    error (a line or row number, or an index label). Rows whose released value is missing
    are not compared.
    """
    if len(truths):
        _check_block(rule, [_Column(c) for c in zip(*truths, strict=True)], others, rows.__getitem__, where,
                     row_word)


def _constant(truth: Sequence[_Column], values: Sequence[Any], hits: Sequence[int], present: Sequence[int]) -> bool:
    """Whether the column holds one value where it matches, beside released values that vary: it says nothing
    about any row (a flag, a country code)."""
    return (len({str(values[k]) for k in hits}) == 1
            and len({tuple(str(c.values[k]) for c in truth) for k in present}) > 1)


def _check_block(rule: LeakRule, truth: Sequence[_Column], others: Mapping[str, Sequence[Any]],
                 row: Callable[[int], Any], where: str, row_word: str) -> None:
    """:func:`check_rows` over the released columns' values (``truth[j]``: column ``j``); ``row(k)`` names row k."""
    filled = truth[0].filled
    for c in truth[1:]:
        filled = [a and b for a, b in zip(filled, c.filled, strict=True)]
    present = [k for k, ok in enumerate(filled) if ok]
    if not present:
        return
    for name, values in others.items():
        column = _Column(values)
        hits = _hits(rule, truth, column, present)
        if 2 * len(hits) > len(present) and not _constant(truth, values, hits, present):
            what = {"labels": "the released column's true values", "text": "the released column's true text",
                    "numbers": f"numbers within {rule.scale:g} of the released column's true values",
                    "points": f"coordinates within {rule.scale:g} km of the released true points"}[rule.kind]
            released = " and ".join(repr(c) for c in rule.columns)
            raise ValidationError(
                f"{where}: column {name!r} holds {what} ({released}) in {len(hits)} of {len(present)} compared "
                f"rows, first at {row_word} {row(hits[0])}, and would leave unreleased; drop it, or keep it on "
                "purpose by naming it among the columns to keep"
            )
        coded = _recoding_hits(rule, truth[0], column, present)
        if coded:
            raise ValidationError(
                f"{where}: column {name!r} is a code for the released column's true values ({rule.columns[0]!r}): "
                f"its values tell them apart in {len(coded)} of {len(present)} compared rows, "
                f"first at {row_word} {row(coded[0])}, and would leave unreleased; drop it, or keep it on purpose "
                "by naming it among the columns to keep"
            )
        fitted, true_name = _affine_hits(rule, truth, column, present)
        if fitted:
            raise ValidationError(
                f"{where}: column {name!r} is an affine re-encoding of the released column's true values "
                f"({true_name!r}): a linear fit to it lands within {rule.scale:g}"
                f"{' km' if rule.kind == 'points' else ''} of them in {len(fitted)} of {len(present)} compared rows, "
                f"first at {row_word} {row(fitted[0])}, and would leave unreleased; drop it, or keep it on purpose "
                "by naming it among the columns to keep"
            )


def spread(n: int) -> list[int]:
    """The positions compared in a block of ``n`` rows: all of them, or :data:`SAMPLE` evenly spread."""
    return _spread(n).tolist()


def _spread(n: int) -> NDArray[np.intp]:
    """:func:`spread` as an array (the even positions rounded down, each once)."""
    if n <= SAMPLE:
        return np.arange(n, dtype=np.intp)
    return np.unique(np.linspace(0, n - 1, SAMPLE).astype(np.intp))


def compared_rows(n: int, start: int, stop: int) -> tuple[list[int], list[int]]:
    """Of the rows compared in a table of ``n`` rows, those in ``[start, stop)`` (0-based positions), and each
    one's block (the position of the block's first row): THE rule of which rows are compared.

    The table is cut into blocks of :data:`SCAN_ROWS` rows from its first row (the last one
    shorter), each compared on :func:`spread` of its rows. Every reading of a table follows it
    -- a file's chunks (:class:`ContentScan`), a DataFrame (:func:`metricdp.frames.privatize_frame`),
    a distributed frame's partitions (:mod:`metricdp.integrations._frames`) -- so the verdict
    depends on the rows only, never on where a reader's chunks or an engine's partitions begin:
    whoever holds rows ``[start, stop)`` picks these, and the pieces' picks together are the
    whole table's, block by block.
    """
    rows: list[int] = []
    blocks: list[int] = []
    for first in range(start - start % SCAN_ROWS, min(stop, n), SCAN_ROWS):
        for i in spread(min(n - first, SCAN_ROWS)):
            if start <= first + i < stop:
                rows.append(first + i)
                blocks.append(first)
    return rows, blocks


class ContentScan:
    """:func:`check_rows` over a file's chunks, read in order from its first row, by :func:`compared_rows`.

    :meth:`add` each chunk as it is read, then :meth:`finish`: a block is compared as soon as
    its last row has been added (a copy is refused as it is read), the last, shorter one at
    :meth:`finish`. A block that runs on past a chunk's end is compared when a later chunk (or
    the end) completes it, so the chunks holding its rows are kept until then: memory is at
    most one chunk more, or one block's rows of small chunks. Only the compared rows are read
    (:meth:`~metricdp.tabular.formats.Chunk.values`: a text format decodes those rows only),
    once per chunk for every block it completes. An error names the column and the first line
    (a text format) or data row that matched.
    """

    def __init__(self, rule: LeakRule, others: Sequence[str], where: str) -> None:
        self.rule, self.others, self.where = rule, tuple(others), where
        self._block: list[tuple[Any, int, int]] = []  # the open block's rows: (chunk, first position, count)
        self._held = 0  # rows in the open block
        self._start = 0  # the open block's first row in the file

    def add(self, chunk: Any) -> None:
        """Take the chunk's rows (the file's next ones); compare every block they complete."""
        if not self.others or not chunk.rows:
            return
        done: list[tuple[int, list[tuple[Any, int, int]]]] = []
        at = 0
        while at < chunk.rows:
            take = min(SCAN_ROWS - self._held, chunk.rows - at)
            self._block.append((chunk, at, take))
            self._held += take
            at += take
            if self._held == SCAN_ROWS:
                done.append((self._start, self._block))
                self._start += SCAN_ROWS
                self._block, self._held = [], 0
        self._compare(done)

    def finish(self) -> None:
        """Compare the last block (the file ended)."""
        if self._held:
            done = [(self._start, self._block)]
            self._start += self._held
            self._block, self._held = [], 0
            self._compare(done)

    def _compare(self, blocks: Sequence[tuple[int, Sequence[tuple[Any, int, int]]]]) -> None:
        """Compare these blocks (each: its first row and its rows' chunks), each chunk's compared rows read once."""
        if not blocks:
            return
        rule = self.rule
        wanted: dict[int, tuple[Any, list[NDArray[np.intp]]]] = {}
        plans: list[list[tuple[int, int, int]]] = []  # per block: (chunk key, offset in the chunk's reads, count)
        for start, segments in blocks:
            size = sum(n for _, _, n in segments)
            rows = np.asarray(compared_rows(start + size, start, start + size)[0], dtype=np.intp) - start
            at, parts = 0, []
            for chunk, lo, n in segments:
                pick = rows[(rows >= at) & (rows < at + n)] - at + lo
                _, picks = wanted.setdefault(id(chunk), (chunk, []))
                parts.append((id(chunk), sum(len(p) for p in picks), len(pick)))
                picks.append(pick)
                at += n
            plans.append(parts)
        read = {}
        for key, (chunk, picks) in wanted.items():
            every = np.concatenate(picks)
            read[key] = (chunk, every, [chunk.values(c, every) for c in rule.columns],
                         {c: chunk.values(c, every) for c in self.others})
        word = "line" if next(iter(wanted.values()))[0].unit == "line" else "data row"
        for parts in plans:
            truths: list[list[Any]] = [[] for _ in rule.columns]
            others: dict[str, list[Any]] = {c: [] for c in self.others}
            spots: list[tuple[Any, NDArray[np.intp], int]] = []
            for key, off, n in parts:
                chunk, every, true_values, other_values = read[key]
                for j, values in enumerate(true_values):
                    truths[j].extend(values[off:off + n])
                for c, values in other_values.items():
                    others[c].extend(values[off:off + n])
                spots.extend((chunk, every, k) for k in range(off, off + n))
            _check_block(rule, [_Column(t) for t in truths], others, partial(_spot, spots), self.where, word)


def check_chunk(rule: LeakRule, chunk: Any, others: Sequence[str], where: str) -> None:
    """:class:`ContentScan` of a table read as one chunk (a chunk holding every row of it, from its first)."""
    scan = ContentScan(rule, others, where)
    scan.add(chunk)
    scan.finish()


def _spot(spots: Sequence[tuple[Any, NDArray[np.intp], int]], k: int) -> Any:
    """How an error names compared row ``k`` of a block (``spots[k]``: its chunk, the chunk's reads, its read)."""
    return _place(*spots[k])


def _place(chunk: Any, rows: NDArray[np.intp], k: int) -> Any:
    """How an error names compared row ``k`` (chunk position ``rows[k]``): read for a refusal only."""
    place = chunk.places(rows[k:k + 1])[0]
    return place.item() if isinstance(place, np.generic) else place

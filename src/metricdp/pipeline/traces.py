r"""Traces: the (lat, lon) fixes of persons, released in file order with a state per person.

A file of fixes has a user column (who), a time column (when) and the two coordinate
columns. :class:`Traces` is the :class:`~.kind.Kind` that releases the coordinates of every
row by one of the mechanisms of :mod:`.trace_states` (independent, predictive, one release
per place), each with a state per person (so memory grows with the persons, never with
the rows); the persons get a code each in the order they first come (:class:`_Persons`).

**Order.** The rows of persons may interleave, but the rows of one person must come in
time order in the file: a fix earlier than the person's previous one is refused in one
error naming the person, the two lines (or data rows) and the fix (sort the file by user,
then time), before anything is drawn for that chunk -- and, in an accounted release, in the
first pass, before anything is reserved. Times are numbers, or ISO 8601 times (a typed
timestamp column, or text that reads as one), compared as instants.

**Engines.** The local engine is this module's chunk loop; on Dask and Spark
(``engine=``, :mod:`metricdp.integrations._traces`) each person's fixes are brought into
one partition and released there by this kind, in file order: the same per-person
releases and accounting (:mod:`.trace_budget`), the output's rows grouped by partition.

**Accounting** (:func:`metricdp.streaming.traces.release_traces_file`, ``docs/proofs/trace_accounting.md``). A
person's spend is data dependent under the predictive mechanism (tests and fresh
releases), so the reservation is each person's **worst case**, known from the first pass
(:func:`~.first_pass.first_pass` without a code per row: :meth:`Traces.check` runs the
order check and counts each person's rows and places, so the pass's memory grows with the
persons, never with the rows) before anything is drawn: rows x eps (independent), distinct
cells x eps (per place; with a ledger, only the cells no committed run paid for: their
releases are read back from the ledger's memo and repeated across runs,
:mod:`.trace_places`), and for the predictive mechanism one fresh release then a failed test and
a fresh release at every later fix (capped by what the person has left: the mechanism runs
each person within their grant, reporting untested predictions once it is spent, so a
smaller grant is not an excess). What does not fit is refused or withheld by the policy
(``refuse``: nothing drawn, nothing written, nothing spent; ``drop``: a person's rows past
their grant -- the rows after the first ones in file order, the places after the first
ones, or, for the predictive mechanism, every row of a person who cannot pay one fresh
release -- are left out of the output). The ledger can only commit a reservation whole
(:meth:`~metricdp.accounting.ledger.Ledger.commit`), so **the reservation is what is
committed** -- the safe side: the ledger never records less than was spent -- and the
actual spend of each person (:class:`~metricdp.location.trace_report.TraceReport`) is
reported beside it.

**A spread budget** (a mechanism built with ``spread=B``): each person's eps, or budget
manager, comes from their own counts of the first pass (:meth:`TraceMechanism.fit`: B / rows,
B / places, or the predictive manager's budget B over their rows), so such a release always
runs the first pass; without ``budget`` or ``ledger`` it is accounted against B itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..accounting.accountant import canonical_ids
from ..accounting.composition import from_units
from ..errors import ValidationError
from ..location.trace_report import TraceReport
from ..tabular.formats import Chunk, Points, Released, arrow
from ..tabular.leaks import LeakRule
from .kind import Kind, Parsed, Refusals
from .points import _Never, read_coordinate
from .run import ReleaseStats
from .trace_places import Places
from .trace_states import Fixes, Independent, PerPlace, Predictive, TraceMechanism, Unaccountable, grown

__all__ = ["Fixes", "Independent", "PerPlace", "Predictive", "TraceMechanism", "TraceRun", "Traces"]


class _Persons:
    """The persons of a run: a code per distinct user value, in the order they first come.

    The values seen are kept sorted beside their codes, so a chunk's persons are found by one
    binary search of its distinct values (no Python loop over the persons).
    """

    def __init__(self) -> None:
        self.ids: NDArray[Any] = np.zeros(0)  # the values, by code
        self._sorted: NDArray[Any] = np.zeros(0)
        self._code = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return int(self.ids.size)

    def codes(self, col: Any, chunk: Chunk, name: str, where: str) -> NDArray[np.int64]:
        pa, pc = arrow()
        if col.null_count:
            i = int(np.flatnonzero(np.asarray(col.is_null().to_numpy(zero_copy_only=False)))[0])
            raise ValidationError(f"{where}: {_at(chunk, i)}: user column {name!r} is empty: every fix needs a person")
        indices: NDArray[np.intp] | None = None
        if pa.types.is_integer(col.type):  # integers are looked up row by row: no dictionary to build
            values = np.asarray(col.to_numpy(zero_copy_only=False))
        else:
            enc = pc.dictionary_encode(col)
            _check_ids(enc, chunk, name, where)
            values = np.asarray(enc.dictionary.to_numpy(zero_copy_only=False))
            if values.dtype.kind == "O":
                values = values.astype(str)
            if values.dtype.kind not in "iuU":
                raise ValidationError(f"{where}: user column {name!r} has type {col.type}: person ids must be "
                                      "integers or text")
            indices = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.intp)
            if values.dtype.kind == "U" and (values == "").any():
                i = int(np.flatnonzero(indices == int(np.flatnonzero(values == "")[0]))[0])
                raise ValidationError(f"{where}: {_at(chunk, i)}: user column {name!r} is empty: every fix needs a "
                                      "person")
        if self.ids.size and self.ids.dtype.kind != values.dtype.kind:
            raise ValidationError(f"{where}: {_at(chunk, 0)}: user column {name!r} holds {values.dtype} values "
                                  f"here, {self.ids.dtype} before: one type of person id per file")
        mapped = self._lookup(values, indices)
        return mapped if indices is None else mapped[indices]

    def _lookup(self, values: NDArray[Any], indices: NDArray[np.intp] | None) -> NDArray[np.int64]:
        """The code of each of ``values`` (a chunk's distinct values with the rows' ``indices`` into them, or, None,
        one value per row), new persons coded in the order of their first row."""
        pos = np.searchsorted(self._sorted, values) if self._sorted.size else np.zeros(values.size, dtype=np.intp)
        found = pos < self._sorted.size
        found[found] = self._sorted[pos[found]] == values[found]
        mapped = np.empty(values.size, dtype=np.int64)
        mapped[found] = self._code[pos[found]]
        new = np.flatnonzero(~found)
        if not new.size:
            return mapped
        if indices is None:  # values per row: the distinct new ones, by first row
            fresh, first, inverse = np.unique(values[new], return_index=True, return_inverse=True)
            order = np.argsort(first, kind="stable")
            rank = np.empty(order.size, dtype=np.int64)
            rank[order] = np.arange(order.size)
            mapped[new] = len(self) + rank[inverse.ravel()]
            fresh = fresh[order]
        else:
            new = new[np.argsort(_first_index(indices, new, values.size), kind="stable")]  # by first row
            mapped[new] = len(self) + np.arange(new.size)
            fresh = values[new]
        codes = np.concatenate([self._code, len(self) + np.arange(fresh.size)])
        self.ids = np.concatenate([self.ids.astype(values.dtype) if self.ids.size else values[:0], fresh])
        merged = np.concatenate([self._sorted.astype(values.dtype) if self._sorted.size else values[:0], fresh])
        order = np.argsort(merged, kind="stable")
        self._sorted, self._code = merged[order], codes[order]
        return mapped


def _check_ids(enc: Any, chunk: Chunk, name: str, where: str) -> None:
    """Text ids as the first pass of every kind takes them: at most
    :data:`~metricdp.streaming.persons.MAX_ID_BYTES` bytes of UTF-8, and no NUL (numpy text drops a trailing
    NUL: ``"ann\\0"`` would be ``"ann"``, two persons merged behind the user's back)."""
    pa, pc = arrow()
    ids = enc.dictionary
    if not (pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type)):
        return
    from ..streaming.persons import MAX_ID_BYTES

    long = np.asarray(pc.greater(pc.binary_length(ids), MAX_ID_BYTES).to_numpy(zero_copy_only=False))
    nul = np.asarray(pc.match_substring(ids, "\x00").to_numpy(zero_copy_only=False))
    for bad, why in ((long, f"is an id of more than {MAX_ID_BYTES} bytes: a person id is a name, a number or a "
                            "hash, not a document"), (nul, "holds a NUL character: person ids must be printable text")):
        if bad.any():
            i = int(np.flatnonzero(np.isin(np.asarray(enc.indices.to_numpy(zero_copy_only=False)),
                                           np.flatnonzero(bad)))[0])
            raise ValidationError(f"{where}: {_at(chunk, i)}: user column {name!r} {why}")


def _first_index(indices: NDArray[np.intp], which: NDArray[np.intp], values: int) -> NDArray[np.intp]:
    """The first row of each value ``which`` among ``indices`` (the dictionary codes of a chunk's rows)."""
    first = np.full(values, indices.size, dtype=np.intp)
    np.minimum.at(first, indices, np.arange(indices.size))
    return first[which]


def _at(chunk: Chunk, i: int) -> str:
    """Row ``i`` of ``chunk`` as an error names it: its data row, and its line in a text format."""
    place = int(chunk.places(np.array([i]))[0])
    return f"data row {chunk.first + i + 1}" + (f" (line {place})" if chunk.unit == "line" else "")


def _times(chunk: Chunk, name: str, where: str) -> tuple[NDArray[np.float64], str]:
    """The time column as numbers (``"number"``) or nanoseconds since 1970 (``"time"``), and which; a time
    that is missing, not finite or neither form is refused naming its row."""
    pa, pc = arrow()
    col = chunk.column(name)
    if col.null_count:
        i = int(np.flatnonzero(np.asarray(col.is_null().to_numpy(zero_copy_only=False)))[0])
        raise ValidationError(f"{where}: {_at(chunk, i)}: time column {name!r} is empty")
    if pa.types.is_timestamp(col.type) or pa.types.is_date(col.type):
        out, mode = _instants(pc.cast(col, pa.timestamp("ns", tz=getattr(col.type, "tz", None)))), "time"
    elif not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        out, mode = read_coordinate(chunk, name, where), "number"
    else:
        try:
            out, mode = np.asarray(pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False), np.float64), "number"
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            try:
                out, mode = _instants(pc.cast(col, pa.timestamp("ns"))), "time"
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise _unread(col, chunk, name, where) from None
    bad = ~np.isfinite(out)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        shown = chunk.texts(name, np.array([i]))[0]
        raise ValidationError(f"{where}: {_at(chunk, i)}: time column {name!r} is {shown!r}, not a finite time")
    return out, mode


def _instants(ns: Any) -> NDArray[np.float64]:
    pa, pc = arrow()
    return np.asarray(pc.cast(ns, pa.int64()).to_numpy(zero_copy_only=False), dtype=np.float64)


def _unread(col: Any, chunk: Chunk, name: str, where: str) -> ValidationError:
    """The error of a text time column that reads neither as numbers nor as ISO 8601 times: the first culprit."""
    pa, pc = arrow()
    for i, text in enumerate(col.to_pylist()):
        one = pa.array([text])
        for kind in (pa.float64(), pa.timestamp("ns")):
            try:
                pc.cast(one, kind)
                break
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                continue
        else:
            return ValidationError(f"{where}: {_at(chunk, i)}: time column {name!r} is {text!r}, neither a number "
                                   "nor an ISO 8601 time (without a time zone)")
    return ValidationError(f"{where}: time column {name!r} holds both numbers and ISO 8601 times from data row "
                           f"{chunk.first + 1}: one form of time per file")


class _Order:
    """Each person's last (time, place) of one pass: a fix earlier than its person's previous one is refused."""

    def __init__(self) -> None:
        self.time = np.zeros(0)
        self.place = np.zeros(0, dtype=np.int64)

    def check(self, fixes: Fixes, ids: NDArray[Any], user: str, mode: str, where: str) -> None:
        codes, t = fixes.persons, fixes.times
        if not codes.size:
            return
        n = int(codes.max()) + 1
        self.time, self.place = grown(self.time, n, -np.inf), grown(self.place, n, -1)
        order = np.argsort(codes, kind="stable")
        c, tt = codes[order], t[order]
        head = np.r_[True, c[1:] != c[:-1]]
        prev_t = np.where(head, self.time[c], np.r_[-np.inf, tt[:-1]])
        prev_row = np.where(head, -1, np.r_[0, order[:-1]])
        bad = np.flatnonzero(tt < prev_t)
        if bad.size:
            k = bad[np.argmin(order[bad])]  # the first such fix in the file
            row = int(order[k])
            before = (int(self.place[c[k]]) if head[k] else
                      int(fixes.places[int(prev_row[k])]))
            word = "line" if fixes.unit == "line" else "data row"
            who = ids[int(c[k])].item()
            raise ValidationError(
                f"{where}: person {who!r}: {word} {int(fixes.places[row])} (time {_shown(tt[k], mode)}) "
                f"comes after {word} {before} (time {_shown(prev_t[k], mode)}) but is earlier: the fixes of one "
                f"person must be in time order; sort the file by {user!r}, then by time")
        tail = np.r_[c[1:] != c[:-1], True]
        self.time[c[tail]] = tt[tail]
        self.place[c[tail]] = fixes.places[order[tail]]


def _shown(t: float, mode: str) -> str:
    if mode == "time":
        return str(np.datetime64(int(t), "ns").astype("datetime64[ms]")).replace("T", " ")
    return repr(float(t)) if not float(t).is_integer() else str(int(t))


class Traces(Kind):
    """The ``(lat, lon)`` of every fix released by ``mechanism`` per person of ``user`` in the order of ``time``.

    ``digits``: decimals of a released coordinate written in a text format (a typed format
    writes float64).
    """

    width = 2
    unit = "km"
    refuses_empty = True
    #: a large text input is read by the compiled kernels, and parsed ahead in the one reading thread: the
    #: persons' codes are given there, in file order; the order check and every draw stay in the caller's
    compiled = True

    def __init__(self, user: str, time: str, lat: str, lon: str, mechanism: TraceMechanism, *, digits: int = 6,
                 where: str = "input") -> None:
        if len({user, time, lat, lon}) != 4:
            raise ValidationError(f"{where}: the user, time, latitude and longitude columns must be four different "
                                  f"columns, got {user!r}, {time!r}, {lat!r}, {lon!r}")
        self.user, self.time, self.lat, self.lon = user, time, lat, lon
        self.mechanism, self.digits, self.where = mechanism, digits, where
        self.columns = (lat, lon)
        self.geometry = (lat, lon)
        self.persons = _Persons()
        self._order = _Order()
        self._mode: str | None = None
        self.rows = np.zeros(0, dtype=np.int64)  # the first pass's rows per person
        self.seen = Places(mechanism.cell_count)  # the first pass's distinct (person, cell)

    @property
    def epsilon(self) -> float:
        """One fresh release's eps; with a spread budget (each person's own eps), the budget: its most."""
        eps = self.mechanism.epsilon if self.mechanism.epsilon is not None else self.mechanism.spread
        return float(eps or 0.0)

    def begin(self) -> None:
        """Start a pass over the file: the order is checked anew (the persons' codes stay)."""
        self._order = _Order()

    def parse_empty(self) -> Fixes:
        return Fixes(np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros((0, 2)), np.zeros(0, dtype=np.int64))

    def rule(self) -> LeakRule:
        return LeakRule.points(self.lat, self.lon, self.mechanism.epsilon)

    def parse(self, chunk: Chunk) -> Parsed:
        if not chunk.rows:
            return Parsed(self.parse_empty(), np.zeros(0, dtype=np.intp))
        pts = np.column_stack([read_coordinate(chunk, self.lat, self.where),
                               read_coordinate(chunk, self.lon, self.where)])
        _check_latlon(pts, chunk, self.lat, self.lon, self.where)
        times, mode = _times(chunk, self.time, self.where)
        if self._mode is None:
            self._mode = mode
        elif mode != self._mode:
            raise ValidationError(f"{self.where}: time column {self.time!r} holds {mode}s from data row "
                                  f"{chunk.first + 1} on, {self._mode}s before: one form of time per file")
        codes = self.persons.codes(chunk.column(self.user), chunk, self.user, self.where)
        cell = self.mechanism.cells(pts)
        if cell is not None and (cell < 0).any():
            i = int(np.flatnonzero(cell < 0)[0])
            fix = (float(pts[i, 0]), float(pts[i, 1]))
            raise ValidationError(f"{self.where}: {_at(chunk, i)}: {fix!r} lies in no public cell: "
                                  f"{int((cell < 0).sum())} fix(es) of this chunk outside the region")
        return Parsed(Fixes(codes, times, pts, chunk.places(np.arange(chunk.rows)), chunk.unit),
                      np.zeros(0, dtype=np.intp))

    def check(self, values: Fixes, first_row: int) -> None:
        """The first pass: the order, and each person's rows and places (for the worst case)."""
        self._order.check(values, self.persons.ids, self.user, self._mode or "number", self.where)
        n = len(self.persons)
        self.rows = grown(self.rows, n, 0)
        np.add.at(self.rows, values.persons, 1)
        cell = self.mechanism.cells(values.latlon)
        if cell is not None:
            self.seen.add(values.persons, cell, first_row)

    def refusals(self) -> Refusals:
        return _Never()

    def release(self, values: Fixes, first_row: int) -> NDArray[np.float64]:
        return self.select(first_row, values)[1]

    def select(self, first_row: int, values: Fixes) -> tuple[NDArray[np.bool_] | None, NDArray[np.float64]]:
        """The kept rows of a chunk and their releases (the order checked before anything is drawn)."""
        self._order.check(values, self.persons.ids, self.user, self._mode or "number", self.where)
        if not values.persons.size:
            return None, np.zeros((0, 2))
        try:
            return self.mechanism.release(values)
        except Unaccountable as ex:
            raise ValidationError(f"{self.where}: person {self.persons.ids[ex.code].item()!r}: {ex}") from None

    def render(self, released: NDArray[np.float64]) -> list[Released]:
        return [Points(self.lat, self.lon, np.asarray(released, dtype=np.float64), self.digits)]

    def check_written(self, rows: int, where: str) -> None:
        if rows == 0:
            raise ValidationError(f"{where}: no data rows")

    def report(self) -> TraceReport:
        """Per person of the release: eps spent, fresh releases, reuses, tests, passed tests."""
        n = len(self.persons)
        c = self.mechanism.counts(n)
        ids = canonical_ids(self.persons.ids) if n else np.zeros(0, dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        return TraceReport(ids[order], *(c[i][order] for i in range(5)))


def _check_latlon(pts: NDArray[np.float64], chunk: Chunk, lat: str, lon: str, where: str) -> None:
    bad = ~(np.isfinite(pts).all(axis=1) & (np.abs(pts[:, 0]) <= 90) & (np.abs(pts[:, 1]) <= 180))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        fix = (float(pts[i, 0]), float(pts[i, 1]))
        raise ValidationError(f"{where}: {_at(chunk, i)}: {fix!r} in columns {lat!r}, {lon!r} is not a latitude "
                              "in [-90, 90] and a longitude in [-180, 180]")


@dataclass(frozen=True)
class TraceRun:
    """What a trace release did: the pass's ``stats``, the per-person ``report`` (actual spend), and, when
    accounted, each person's ``reserved`` units (what the ledger or the budget was charged, in the report's
    order), the rows ``withheld`` and the persons ``over`` their budget."""

    stats: ReleaseStats
    report: TraceReport
    mechanism: str
    reserved: NDArray[np.int64] | None = None
    withheld: int = 0
    over: int = 0
    run_id: str | None = None

    def write_report(self, path: str | PathLike[str], *, inputs: tuple[str | PathLike[str], ...] = ()) -> None:
        """The per-person report as CSV (``person, eps_spent, eps_reserved, fresh, reused, tests, passed``; eps
        per km, ``eps_reserved`` empty when not accounted), written whole or not at all, never over ``inputs``.

        It holds the person ids: it is published only where the release's user column is.
        """
        import csv
        import io

        from ..io import atomic_write

        r = self.report
        text = io.StringIO()
        out = csv.writer(text, lineterminator="\n")
        out.writerow(["person", "eps_spent", "eps_reserved", "fresh", "reused", "tests", "passed"])
        reserved = [""] * len(r) if self.reserved is None else [repr(float(e)) for e in from_units(self.reserved)]
        out.writerows(zip(r.persons.tolist(), (repr(float(e)) for e in r.eps_spent), reserved, r.fresh.tolist(),
                          r.reused.tolist(), r.tests.tolist(), r.passed.tolist(), strict=True))
        with atomic_write(path, "wb", inputs=inputs) as fh:
            fh.write(text.getvalue().encode("utf-8"))

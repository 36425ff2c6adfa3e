"""What leaves: for a table and a release, which columns are released, kept unreleased, dropped.

A release protects the released column(s) only. Every other column of the input leaves
with its TRUE values unless it is dropped, so a privacy engineer signing off a released
file must see that list. The policy, decided here once for every command and engine:

* the released columns must each appear exactly once in the header, and every header
  name once (a copy of a released column would leave its true values beside the
  release); a column whose name equals a released one up to case and punctuation
  (``City``, ``city_`` beside ``city``; compared by :func:`metricdp.tabular.names.name_key`:
  NFKC, format characters dropped, casefolded, Cyrillic/Greek look-alike letters mapped to
  Latin) is refused unless ``keep`` or ``drop`` names it;
* ``drop`` names columns removed from the output, ``keep`` names columns written
  unchanged on purpose; an unknown name in either, a name in both, or a released
  column in either is refused (a typo must not silently keep a column);
* every other column is kept, as before, but NAMED: :attr:`ColumnPlan.unreleased`
  lists all columns leaving with true values and :attr:`ColumnPlan.unacknowledged`
  those the user did not name in ``keep``. Commands print them (stderr, ``--json``).

Keeping by default (rather than refusing an unacknowledged column) keeps the common
case -- an id or a timestamp next to a released city -- one flag shorter and keeps
existing pipelines working; the notice is the sign-off. Columns that *look like* a
released quantity (a second latitude next to released coordinates) are a different
matter: :func:`look_alikes` finds them by name, and :mod:`metricdp.tabular.leaks`
refuses them by name and by content (a copy under any name) unless they are kept or
dropped by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError
from .csv import check_names
from .names import coordinate_role, name_key

__all__ = ["ColumnPlan", "look_alikes", "plan_columns", "refuse_twins"]


@dataclass(frozen=True)
class ColumnPlan:
    """The fate of each header column (names in header order)."""

    header: tuple[str, ...]
    released: tuple[str, ...]
    kept: tuple[str, ...]  # unreleased and written, named in ``keep``
    unacknowledged: tuple[str, ...]  # unreleased and written, named by nobody
    dropped: tuple[str, ...]

    @property
    def unreleased(self) -> tuple[str, ...]:
        """Every column written with its true values (kept or unacknowledged), header order."""
        out = set(self.kept) | set(self.unacknowledged)
        return tuple(h for h in self.header if h in out)

    @property
    def written(self) -> tuple[str, ...]:
        """The output's columns, in header order."""
        gone = set(self.dropped)
        return tuple(h for h in self.header if h not in gone)

    def index(self, name: str) -> int:
        """Position of ``name`` in the input header."""
        return self.header.index(name)

    @property
    def dropped_indices(self) -> tuple[int, ...]:
        return tuple(self.header.index(h) for h in self.dropped)

    def as_dict(self) -> dict[str, Any]:
        """The plan for ``--json`` (lists of names)."""
        return {
            "released": list(self.released),
            "unreleased": list(self.unreleased),
            "unacknowledged": list(self.unacknowledged),
            "dropped": list(self.dropped),
        }


def plan_columns(
    header: Sequence[str],
    released: Sequence[str],
    *,
    keep: Iterable[str] = (),
    drop: Iterable[str] = (),
    where: str = "input",
) -> ColumnPlan:
    """The :class:`ColumnPlan` for ``header`` releasing ``released``; refusals as in the module docstring.

    Raises :class:`ValidationError` naming ``where`` and the column: an empty or
    duplicated header name (a duplicated released column said so), a released column
    missing, a ``keep``/``drop`` name unknown, in both lists, or a released column, a
    column named like a released one (case, punctuation) that neither list names.
    """
    header = tuple(header)
    keep_t, drop_t = tuple(dict.fromkeys(keep)), tuple(dict.fromkeys(drop))
    check_names(header, where, released)
    seen = set(header)
    available = ", ".join(repr(h) for h in header)
    for name in released:
        if name not in seen:
            raise ValidationError(f"{where}: no column {name!r}; available: {available}")
    if len(set(released)) != len(released):
        raise ValidationError(f"{where}: column {released[0]!r} is released twice")
    for what, names in (("kept", keep_t), ("dropped", drop_t)):
        for name in names:
            if name not in seen:
                raise ValidationError(f"{where}: no column {name!r} to be {what}; available: {available}")
            if name in released:
                raise ValidationError(f"{where}: column {name!r} is released; it cannot also be {what}")
    both = [n for n in keep_t if n in drop_t]
    if both:
        raise ValidationError(f"{where}: column {both[0]!r} is both kept and dropped")
    rel, kp, dr = set(released), set(keep_t), set(drop_t)
    refuse_twins(header, released, rel | kp | dr, where)
    return ColumnPlan(
        header=header,
        released=tuple(h for h in header if h in rel),
        kept=tuple(h for h in header if h in kp),
        unacknowledged=tuple(h for h in header if h not in rel | kp | dr),
        dropped=tuple(h for h in header if h in dr),
    )


def refuse_twins(names: Iterable[str], released: Sequence[str], named: set[str], where: str) -> None:
    """Refuse a name in ``names`` (not in ``named``) equal to a released one after :func:`~.names.name_key`."""
    norms = {_norm(r): r for r in released}
    twins = [h for h in names if h not in named and h not in norms.values() and _norm(h) in norms]
    if twins:
        raise ValidationError(
            f"{where}: column {twins[0]!r} is named like the released column {norms[_norm(twins[0])]!r} and would "
            "leave with its true values; name it among the columns to keep or to drop"
        )


def _norm(name: str) -> str:
    return name_key(name)


def look_alikes(plan: ColumnPlan) -> tuple[str, ...]:
    """Unacknowledged columns that look like a released coordinate: a true copy would leave.

    A column looks like a released one when their names are equal after
    :func:`~metricdp.tabular.names.name_key` (``Lat``, `` lat``, ``lat_``, ``lаt`` with a
    Cyrillic ``а`` beside ``lat``), or when a released column is a coordinate and the
    column's name is a latitude, longitude or coordinate-pair word in one of a few
    languages (:func:`~metricdp.tabular.names.coordinate_role`: ``lat2``, ``home_lat``,
    ``latlng``, ``geom``, ``breite``, ``longitud``, ``position``).
    """
    coordinates = any(coordinate_role(r) in ("lat", "lon") for r in plan.released)
    norms = {_norm(r) for r in plan.released}
    return tuple(h for h in plan.unacknowledged
                 if _norm(h) in norms or (coordinates and coordinate_role(h) is not None))

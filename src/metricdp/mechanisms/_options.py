"""Command-line options derived from the families' declared parameters.

``metricdp build`` has one option per declared ``flag`` (type, range, default and help
from the :class:`~metricdp.mechanisms.registry.Param`), ``metricdp text`` one per flag of
the matrix-free families (:data:`~metricdp.mechanisms.registry.SAMPLER_FAMILIES`), and
the CLI names the flag of a parameter through :func:`flag_of` when it reports an error.
The import path of these names is :mod:`metricdp.mechanisms.registry`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ._params import Param

if TYPE_CHECKING:  # pragma: no cover
    from .registry import Family, SamplerFamily

__all__ = ["Option", "flag_of", "options"]


@dataclass(frozen=True)
class Option:
    """One command-line option: the parameter it sets and the families that declare it."""

    param: Param
    families: tuple[str, ...]

    @property
    def flag(self) -> str:
        assert self.param.flag is not None
        return self.param.flag

    @property
    def keyword(self) -> str:
        """The Python identifier of the option (``--base-weights`` -> ``base_weights``)."""
        return self.flag[2:].replace("-", "_")


def options(entries: Iterable[Family | SamplerFamily]) -> dict[str, Option]:
    """Flag -> :class:`Option` over the declared flags of ``entries``, in declaration order.

    Families may share a flag (``--samples``, ``--calibrate``) only if they declare it
    alike: same name, kind, default, range and choices (else a RuntimeError: the table
    itself is wrong), so one option has one type, range and default on the command line.
    """
    out: dict[str, Option] = {}
    for entry in entries:
        for p in entry.params:
            if p.flag is None:
                continue
            seen = out.get(p.flag)
            if seen is None:
                out[p.flag] = Option(p, (entry.name,))
                continue
            if replace(seen.param, help="") != replace(p, help=""):
                raise RuntimeError(f"{entry.name} declares {p.flag} unlike {', '.join(seen.families)}")
            out[p.flag] = Option(seen.param, (*seen.families, entry.name))
    return out


def flag_of(family: Family | SamplerFamily, name: str) -> str | None:
    """The command-line flag of ``family``'s parameter ``name`` (None: Python-only or undeclared)."""
    param = family.find(name)
    return None if param is None else param.flag

"""The declared parameter of a mechanism family, and its one validation.

A :class:`Param` states a builder keyword's kind, range, choices and default once; every
check of a value given for it (:meth:`Param.check`) and every description of its allowed
values (:meth:`Param.describe`) is derived from that declaration, as scikit-learn's
``_param_validation`` derives its checks from declared constraints. One invalid value
gives one :class:`~metricdp.errors.ValidationError` naming the family, the parameter, the
allowed values and the value received. The table of families that declare them is
:mod:`metricdp.mechanisms.registry` (the import path of :class:`Param`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .._validation import check_number
from ..errors import ValidationError

__all__ = ["Kind", "Param"]

Kind = Literal["bool", "int", "float", "choice", "vector", "floats", "matrix", "rng"]


@dataclass(frozen=True)
class Param:
    """One declared parameter of a family.

    Attributes
    ----------
    name : str
        The builder's keyword.
    kind : str
        ``bool``; ``int`` / ``float`` (within ``[minimum, maximum]``, bounds included
        unless ``open_minimum``); ``choice`` (one of ``choices``); ``vector`` (n finite
        non-negative numbers, one per point: weights, priors; read from a per-label file
        on the command line); ``floats`` (a sequence of numbers within the bounds);
        ``matrix`` (an n x n array; Python only); ``rng`` (None, a seed or a Generator).
    default : object
        The builder's default: the builder's signature has the same one (a test asserts
        it), and the CLI shows it. ``None`` is then a valid value meaning "not given".
    help : str
        One line for ``--help`` and the docs.
    flag : str or None
        The command-line option; None when the parameter is Python-only.
    aliases : tuple of str
        Short forms of ``flag`` (``-r``).
    """

    name: str
    kind: Kind
    default: Any = None
    help: str = ""
    flag: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    open_minimum: bool = False
    choices: tuple[str, ...] = ()
    required: bool = False
    open_maximum: bool = False
    aliases: tuple[str, ...] = ()

    @property
    def optional(self) -> bool:
        """Whether ``None`` is a valid value (the default is None and the parameter is not required)."""
        return self.default is None and not self.required

    def describe(self) -> str:
        """The allowed values in words (``--help`` and the docs): ``integer >= 2, <= 1e+08``."""
        if self.kind in ("int", "float", "floats"):
            bounds = []
            if self.minimum is not None:
                bounds.append(f"{'>' if self.open_minimum else '>='} {self.minimum:g}")
            if self.maximum is not None:
                bounds.append(f"{'<' if self.open_maximum else '<='} {self.maximum:g}")
            what = {"int": "integer", "float": "number", "floats": "numbers"}[self.kind]
            return f"{what}{' ' if bounds else ''}{', '.join(bounds)}"
        if self.kind == "choice":
            return " | ".join(self.choices)
        if self.kind == "vector":
            return "one non-negative number per point"
        return self.kind

    def check(self, value: Any, family: str, *, where: str | None = None) -> Any:
        """The validated value, or one ValidationError naming family, parameter and value.

        ``where`` replaces the subject of the message (``"family: parameter 'name'"``):
        the CLI passes its flag, so the same template names what the user typed.
        """
        where = where or f"{family}: parameter {self.name!r}"
        if value is None and (self.optional or self.kind in ("vector", "matrix", "rng")):
            return None
        if self.kind == "bool":
            if not isinstance(value, bool | np.bool_):
                raise ValidationError(f"{where} must be True or False, got {value!r}")
            return bool(value)
        if self.kind in ("int", "float"):
            return self._number(value, where)
        if self.kind == "choice":
            if not isinstance(value, str) or value not in self.choices:
                raise ValidationError(f"{where} must be one of {', '.join(self.choices)}, got {value!r}")
            return value
        if self.kind == "floats":
            if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
                raise ValidationError(f"{where} must be a sequence of numbers, got {value!r}")
            return tuple(self._number(v, where) for v in value)
        if self.kind in ("vector", "matrix"):
            try:
                arr = np.asarray(value, dtype=np.float64)
            except (TypeError, ValueError):
                raise ValidationError(f"{where} must be numeric, got {type(value).__name__}") from None
            ndim = 1 if self.kind == "vector" else 2
            if arr.ndim != ndim or not np.all(np.isfinite(arr)) or np.any(arr < 0):
                raise ValidationError(
                    f"{where} must be a {ndim}-d array of finite non-negative numbers, got shape {arr.shape}"
                )
            return arr
        return value  # rng: normalised by the builder's check_rng

    def _number(self, value: Any, where: str) -> Any:
        if self.kind == "int" and not isinstance(value, bool | np.bool_) and isinstance(value, float | np.floating) \
                and not float(value).is_integer():
            raise ValidationError(f"{where} must be an integer, got {value!r}")
        x = check_number(value, where, minimum=self.minimum, maximum=self.maximum, open_minimum=self.open_minimum,
                         open_maximum=self.open_maximum)
        return int(x) if self.kind == "int" else x

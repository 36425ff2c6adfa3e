"""The settings of a result, as one block a user can paste into a data-release note.

A number without its settings cannot be checked or reproduced: "expected loss 12.3 km"
says nothing until it says which mechanism, at which epsilon per which unit, under which
prior, on which input. :class:`Settings` holds exactly those facts, and every command that
reports a result (``evaluate``, ``report``, ``explore``) renders them through it, as text
(:meth:`Settings.text`) or as the ``settings`` key of its JSON (:meth:`Settings.as_dict`):

* the mechanism (one family, or the families compared);
* epsilon with its unit (one value, or the grid of values compared);
* the prior: the file it was read from, or ``uniform``;
* the target the epsilon was chosen for, when one was (a calibration's expected distance);
* the metricdp version;
* the input file's name and the SHA-256 of its content, so that a reader can tell whether
  the file in hand is the one the numbers came from (a name alone can be reused).

The hash is of the bytes, read in blocks, so a file of any size is hashed in constant
memory. The file's name is kept as given (its base name), never its directory: a path can
carry a user's name or a project's layout that a release note need not publish.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from ._version import __version__
from .errors import ValidationError

__all__ = ["Settings", "file_sha256", "settings_for"]

_BLOCK = 1 << 20


def file_sha256(path: str | PathLike[str]) -> str:
    """The SHA-256 of a file's bytes, as 64 hex digits (read in 1 MiB blocks)."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            while block := fh.read(_BLOCK):
                h.update(block)
    except OSError as ex:
        raise ValidationError(f"{path}: cannot be read to hash it ({ex.strerror or ex})") from None
    return h.hexdigest()


def _number(x: float) -> str:
    return f"{x:.6g}"


@dataclass(frozen=True)
class Settings:
    """What a result was computed from; see the module docstring.

    ``epsilon`` is one value or the tuple of values compared; ``unit`` the unit of distance
    it is per (``""``: the space's own units). ``prior`` is the prior's file name, or
    ``"uniform"``. ``target`` (optional) is the target the epsilon was chosen for, as text
    with its unit. ``input`` and ``input_sha256`` name the input file and its content.
    """

    mechanism: str
    epsilon: float | tuple[float, ...]
    unit: str = ""
    prior: str = "uniform"
    target: str | None = None
    input: str | None = None
    input_sha256: str | None = None
    version: str = __version__

    def epsilon_text(self) -> str:
        """``0.5 per km``; a grid: ``20 values from 0.1 to 10 per km (log-spaced)`` or the list when short."""
        per = f" per {self.unit}" if self.unit else " per unit of distance"
        if isinstance(self.epsilon, tuple):
            values = self.epsilon
            if len(values) <= 4:
                return ", ".join(map(_number, values)) + per
            ratios = [b / a for a, b in itertools.pairwise(values)]
            log = all(math.isclose(r, ratios[0], rel_tol=1e-6) for r in ratios)
            how = " (log-spaced)" if log else ""
            return f"{len(values)} values from {_number(values[0])} to {_number(values[-1])}{per}{how}"
        return _number(self.epsilon) + per

    def as_dict(self) -> dict[str, Any]:
        """The ``settings`` key of a command's JSON (epsilon as a number or a list of numbers)."""
        eps: Any = list(self.epsilon) if isinstance(self.epsilon, tuple) else self.epsilon
        return {"mechanism": self.mechanism, "epsilon": eps, "epsilon_unit": self.unit or None,
                "prior": self.prior, "target": self.target, "metricdp_version": self.version,
                "input": self.input, "input_sha256": self.input_sha256}

    def rows(self) -> list[tuple[str, str]]:
        """The block as (name, value) lines, in the order :meth:`text` writes them."""
        rows = [("mechanism", self.mechanism), ("epsilon", self.epsilon_text()), ("prior", self.prior)]
        if self.target is not None:
            rows.append(("target", self.target))
        rows.append(("metricdp", self.version))
        if self.input is not None:
            rows.append(("input", self.input))
            rows.append(("input sha256", self.input_sha256 or "not hashed"))
        return rows

    def text(self) -> str:
        """The block as plain text: a ``settings`` line, then one indented ``name: value`` line per setting."""
        width = max(len(k) for k, _ in self.rows())
        return "settings\n" + "".join(f"  {k + ':':<{width + 1}} {v}\n" for k, v in self.rows())


def settings_for(
    mechanism: str | Sequence[str],
    epsilon: float | Sequence[float],
    *,
    unit: str = "",
    prior: str | PathLike[str] | None = None,
    target: str | None = None,
    input: str | PathLike[str] | None = None,
) -> Settings:
    """The :class:`Settings` of a result: names the files by their base names and hashes the input.

    ``mechanism`` is a family name or the families compared; ``epsilon`` a value or the
    values compared; ``prior`` the prior's file (None: uniform); ``input`` the file the
    result was computed from (hashed here: :func:`file_sha256`).

    Examples
    --------
    >>> s = settings_for("exponential", 0.5, unit="km")
    >>> s.rows()[:3]
    [('mechanism', 'exponential'), ('epsilon', '0.5 per km'), ('prior', 'uniform')]
    """
    name = mechanism if isinstance(mechanism, str) else ", ".join(mechanism)
    eps: float | tuple[float, ...] = (float(epsilon) if isinstance(epsilon, int | float)
                                      else tuple(float(e) for e in epsilon))
    return Settings(
        mechanism=name,
        epsilon=eps,
        unit=unit,
        prior="uniform" if prior is None else Path(prior).name,
        target=target,
        input=None if input is None else Path(input).name,
        input_sha256=None if input is None else file_sha256(input),
    )

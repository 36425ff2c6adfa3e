"""Mechanism families and the registry that lists them.

:func:`names` lists the families, :func:`build` builds any of them by name, :func:`get`
returns a family's entry (parameters, exactness, description): see
:mod:`metricdp.mechanisms.registry`. Each family lives in its own module (the LP families
:mod:`.optimal`, :mod:`.spanner` and :mod:`.constopt` solve their LPs with the solver layer
:mod:`metricdp.lp`); import a builder from its module
(``from metricdp.mechanisms.exponential import exponential``).

Convention of every package ``__init__`` in metricdp: it re-exports classes and functions
whose names differ from its submodules, and never binds a submodule's name to anything but
that submodule. Submodules are imported on first attribute access (PEP 562), so
``metricdp.mechanisms.krr`` works without importing every family up front.
"""

from __future__ import annotations

from .._lazy import submodule_getattr
from .base import Mechanism, certify
from .file import load_mechanism
from .registry import build, get, names

__all__ = ["Mechanism", "build", "certify", "get", "load_mechanism", "names"]

#: Submodules are read from the package's directory on first attribute access (PEP 562).
__getattr__ = submodule_getattr(__name__, __path__)

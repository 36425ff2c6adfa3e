"""PEP 562 access to a package's submodules and lazy names: ``import metricdp.text`` then ``metricdp.text.stats``.

Every package ``__init__`` of metricdp ends with
``__getattr__ = submodule_getattr(__name__, __path__)``: a submodule is imported on its
first attribute access, so ``pkg.module`` always gives the module (the package's
convention: a name equal to a submodule is that submodule) without importing every
submodule, or an optional dependency, up front. The names are read from the package's
directory (:func:`pkgutil.iter_modules`), never listed by hand: a hand list lost two
modules of :mod:`metricdp.mechanisms` once.

A package may also pass ``names``, its public names defined in submodules (name -> module
relative to the package): ``pkg.name`` then imports that module on first access and caches
the value in the package, so that ``from pkg import name`` works while ``import pkg`` stays
cheap (``metricdp`` itself: scipy and pyarrow load only with the names that need them).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["submodule_getattr"]


def submodule_getattr(
    package: str, path: Iterable[str], names: Mapping[str, str] | None = None
) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package`` (its ``__name__`` and ``__path__``)."""
    modules = frozenset(m.name for m in pkgutil.iter_modules(list(path)))
    lazy = dict(names or {})
    shadowing = sorted(set(lazy) & modules)
    if shadowing:  # the package's convention: a name equal to a submodule is that submodule
        raise ImportError(f"{package}: lazy names equal to submodules: {shadowing}")

    def __getattr__(name: str) -> Any:
        if name in modules:
            return importlib.import_module(f"{package}.{name}")
        if name in lazy:
            value = getattr(importlib.import_module(f"{package}.{lazy[name]}"), name)
            setattr(sys.modules[package], name, value)  # later accesses skip this function
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__

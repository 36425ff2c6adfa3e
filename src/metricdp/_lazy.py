"""PEP 562 access to a package's submodules: ``import metricdp.text`` then ``metricdp.text.stats``.

Every package ``__init__`` of metricdp ends with
``__getattr__ = submodule_getattr(__name__, __path__)``: a submodule is imported on its
first attribute access, so ``pkg.module`` always gives the module (the package's
convention: a name equal to a submodule is that submodule) without importing every
submodule, or an optional dependency, up front. The names are read from the package's
directory (:func:`pkgutil.iter_modules`), never listed by hand: a hand list lost two
modules of :mod:`metricdp.mechanisms` once.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from types import ModuleType

__all__ = ["submodule_getattr"]


def submodule_getattr(package: str, path: Iterable[str]) -> Callable[[str], ModuleType]:
    """A module-level ``__getattr__`` for ``package`` (its ``__name__`` and ``__path__``)."""
    names = frozenset(m.name for m in pkgutil.iter_modules(list(path)))

    def __getattr__(name: str) -> ModuleType:
        if name in names:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__

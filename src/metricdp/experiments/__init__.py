"""Reproductions of the papers' experiments, one module each, driven by a seed.

Every experiment writes its numbers (CSV), a plot (PNG) and a short markdown summary into
an output directory; ``metricdp experiment NAME --out DIR`` runs it from the command line
and ``--quick`` runs a small version in CI. :mod:`._plot` holds the shared plotting
helpers. docs/experiments.md reports the full runs next to the papers' numbers.
"""

from .._lazy import submodule_getattr

__getattr__ = submodule_getattr(__name__, __path__)

"""The package convention of ``metricdp.lp``: no name shadows a submodule; solver names only."""

from __future__ import annotations

import importlib
import pkgutil
import types

import metricdp.lp as lp


def _submodules(package: types.ModuleType) -> list[str]:
    return [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]


def test_every_submodule_attribute_is_the_submodule():
    names = _submodules(lp)
    assert {"metricdp.lp.core", "metricdp.lp.ipm", "metricdp.lp.colgen", "metricdp.lp.certificate"} <= set(names)
    for full in names:
        module = importlib.import_module(full)
        parent, _, leaf = full.rpartition(".")
        assert getattr(importlib.import_module(parent), leaf) is module, full


def test_exports_are_solver_names_not_modules():
    assert set(lp.__all__) == {"SolveResult", "solve_lp", "require_optimal", "Deadline", "LPSolution", "RetryPolicy"}
    for name in lp.__all__:
        assert not isinstance(getattr(lp, name), types.ModuleType)


def test_the_lp_mechanisms_live_in_mechanisms():
    from metricdp.mechanisms.constopt import constopt
    from metricdp.mechanisms.optimal import optimal
    from metricdp.mechanisms.spanner import spanner

    assert callable(optimal) and callable(spanner) and callable(constopt)
    assert not any(name.startswith(("metricdp.lp.optimal", "metricdp.lp.spanner", "metricdp.lp.constopt"))
                   for name in _submodules(lp))

"""The package convention of ``metricdp.mechanisms.lp``: no name shadows a submodule."""

from __future__ import annotations

import importlib
import pkgutil
import types

import metricdp.mechanisms.lp as lp


def _submodules(package: types.ModuleType) -> list[str]:
    return [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]


def test_every_submodule_attribute_is_the_submodule():
    names = _submodules(lp)
    assert {"metricdp.mechanisms.lp.optimal", "metricdp.mechanisms.lp.constopt.builder"} <= set(names)
    for full in names:
        module = importlib.import_module(full)
        parent, _, leaf = full.rpartition(".")
        assert getattr(importlib.import_module(parent), leaf) is module, full


def test_builders_live_in_their_modules():
    from metricdp.mechanisms.lp.constopt import constopt
    from metricdp.mechanisms.lp.optimal import optimal
    from metricdp.mechanisms.lp.spanner import spanner

    assert callable(optimal) and callable(spanner) and callable(constopt)
    assert set(lp.__all__) >= {"SolveResult", "solve_lp", "Spanner", "greedy_spanner", "Deadline", "LPSolution"}
    for name in lp.__all__:
        assert not isinstance(getattr(lp, name), types.ModuleType)

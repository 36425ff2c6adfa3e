"""metricdp.accounting sits at the floor: it imports only errors, _random, _resources, _validation, _numba (the
loader of numba for its compiled HMAC kernel), _optional (the extras, for a SQLAlchemy ledger) and itself."""

from __future__ import annotations

from tests.test_imports import import_graph

ALLOWED = {"metricdp.errors", "metricdp._random", "metricdp._resources", "metricdp._validation", "metricdp._numba",
           "metricdp._optional"}


def test_accounting_imports_only_the_floor() -> None:
    graph = import_graph()
    package = {m for m in graph if m == "metricdp.accounting" or m.startswith("metricdp.accounting.")}
    modules = {"composition", "accountant", "ledger"}
    assert {f"metricdp.accounting.{m}" for m in modules} <= package
    outside = {(m, t) for m in package for t in graph[m] if t not in package and t not in ALLOWED}
    assert not outside, sorted(outside)

"""The suite's collection order (tests/conftest.py): engine tests first, Spark's then Dask's, stably."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from tests.conftest import pytest_collection_modifyitems


def _item(name: str, *fixtures: str) -> Any:
    return SimpleNamespace(name=name, fixturenames=list(fixtures))


def test_spark_then_dask_then_the_rest_in_their_order() -> None:
    items = [
        _item("test_a"),
        _item("test_b", "scheduler"),
        _item("test_c[spark]"),
        _item("test_d", "tmp_path"),
        _item("test_e", "spark"),
        _item("test_f[Dask-csv]"),
        _item("metricdp.integrations.spark.privatize_spark"),  # a doctest: no fixturenames attribute needed
    ]
    pytest_collection_modifyitems(items)
    assert [i.name for i in items] == [
        "test_c[spark]", "test_e", "metricdp.integrations.spark.privatize_spark",
        "test_b", "test_f[Dask-csv]",
        "test_a", "test_d",
    ]

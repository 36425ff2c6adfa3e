"""Shared fixtures: a deterministic hypothesis profile and small random spaces; the collection order;
doctests that import an optional package skip (with the extra to install) where it is missing."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from metricdp._optional import EXTRAS
from tests.helpers import needs

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=int(os.environ.get("METRICDP_HYPOTHESIS_EXAMPLES", "25")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("ci")


@pytest.fixture(autouse=True, scope="session")
def _user_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The user's cache (the packaged GloVe's text structures) in a directory of the run, never the home's."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


def _engine_rank(item: pytest.Item) -> int:
    """0: needs the Spark session, 1: the Dask cluster, 2: neither (by fixture, parameter id or test name)."""
    names = set(getattr(item, "fixturenames", ()))
    text = item.name.lower()
    if "spark" in names or "spark" in text:
        return 0
    if "scheduler" in names or "dask" in text:
        return 1
    return 2


def _extra_of(module: str) -> str | None:
    """The extra that installs top-level ``module``: the one named after it, else the first listing it."""
    if module in EXTRAS and module in EXTRAS[module]:
        return module
    return next((extra for extra, modules in EXTRAS.items() if module in modules), None)


_IMPORT = re.compile(r"^\s*(?:import|from)\s+([A-Za-z_]\w*)", re.M)


def _doctest_needs(item: pytest.Item) -> set[str]:
    """The extras whose packages a doctest's examples import (none for another item)."""
    dtest = getattr(item, "dtest", None)
    sources = "".join(example.source for example in dtest.examples) if dtest is not None else ""
    extras = {_extra_of(m) for m in _IMPORT.findall(sources)}
    return {e for e in extras if e is not None}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The engine tests first, Spark's then Dask's (a stable sort: every worker collects the same order).

    Each pytest-xdist worker starts its own session-scoped Spark session (a JVM, ~30 s) and Dask
    cluster. ``--dist worksteal`` hands each worker a contiguous share of the collection and steals
    only from the tail of a share, so with the engine tests at the head they all run on the first
    worker: one JVM and one cluster per run instead of one per worker that happened to get one.
    A doctest that imports an optional package (``import pandas as pd``) skips where its extra is missing.
    """
    for item in items:
        if extras := _doctest_needs(item):
            item.add_marker(needs(*sorted(extras)))
    items.sort(key=_engine_rank)

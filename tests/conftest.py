"""Shared fixtures: a deterministic hypothesis profile and small random spaces."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=int(os.environ.get("METRICDP_HYPOTHESIS_EXAMPLES", "25")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("ci")


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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The engine tests first, Spark's then Dask's (a stable sort: every worker collects the same order).

    Each pytest-xdist worker starts its own session-scoped Spark session (a JVM, ~30 s) and Dask
    cluster. ``--dist worksteal`` hands each worker a contiguous share of the collection and steals
    only from the tail of a share, so with the engine tests at the head they all run on the first
    worker: one JVM and one cluster per run instead of one per worker that happened to get one.
    """
    items.sort(key=_engine_rank)

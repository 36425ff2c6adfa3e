"""The plan of a dense build: its figures, and a refusal before work with what would fit."""

from __future__ import annotations

import pytest

from metricdp.errors import ResourceLimitError
from metricdp.location.cells import planar_laplace_cells
from metricdp.mechanisms.dense_plan import ARRAYS, check_dense_plan, plan_dense
from metricdp.mechanisms.exponential import exponential
from metricdp.spaces import MetricSpace


def test_plan_figures_hand_computed() -> None:
    plan = plan_dense("planar-laplace", 5_000)
    assert plan.bytes == ARRAYS["planar-laplace"] * 8 * 5_000**2  # 1.8 GB
    assert plan.audit == "lattice-chain" and not plan.remap
    assert plan_dense("exponential", 100).audit == "dense"
    remap = plan_dense("exponential", 5_000, remap=True)
    assert remap.audit == "kernel + post-processing" and remap.bytes == 7 * 8 * 5_000**2
    assert remap.seconds > plan_dense("exponential", 5_000).seconds
    assert "5,000 points" in plan.summary() and "lattice-chain" in plan.summary()
    assert plan.as_dict()["bytes"] == plan.bytes


def test_a_plan_over_the_limit_is_refused_with_what_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "1GiB")
    check_dense_plan(plan_dense("planar-laplace", 3_000))  # 648 MB: fits
    with pytest.raises(ResourceLimitError) as info:
        check_dense_plan(plan_dense("planar-laplace", 20_000))  # 28.8 GB
    text = str(info.value)
    assert "20,000 points" in text and "29 GB" in text and "smaller region" in text
    assert "at most about 3,861 points fit" in text  # sqrt(2^30 / 72) = 3861.7
    assert "--" not in text  # a library message names no flag


def test_builders_refuse_before_allocating(monkeypatch: pytest.MonkeyPatch) -> None:
    space = MetricSpace.grid(6, 6, 1.0)
    cells = MetricSpace.from_points([[40.0, -74.0], [40.0, -73.99], [40.01, -74.0]], metric="haversine")
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "100B")  # the spaces were made; their mechanisms are refused
    with pytest.raises(ResourceLimitError, match="exponential on 36 points needs about 73 kB"):
        exponential(space, 1.0)
    with pytest.raises(ResourceLimitError, match="planar-laplace on 3 points"):
        planar_laplace_cells(cells, 1.0)

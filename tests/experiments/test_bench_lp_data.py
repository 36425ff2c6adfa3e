"""The LP benchmark's data sets (no download, deterministic in n and seed)."""

from __future__ import annotations

import pytest

from metricdp import ValidationError
from metricdp.experiments.bench_lp_data import bench_data, bench_space


def test_every_data_set_without_extras_builds_and_a_bad_name_is_refused() -> None:
    assert bench_space(5, "gaussian").n == 5
    space, prior = bench_data(9, "grid", seed=3)
    assert space.n == 9 and prior is not None and prior.sum() == pytest.approx(1.0)
    with pytest.raises(ValidationError, match="square"):
        bench_data(10, "grid")
    with pytest.raises(ValidationError, match="data must be one of glove, gaussian, geo, grid"):
        bench_data(10, "fasttext")

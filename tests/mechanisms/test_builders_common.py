"""What every non-LP builder shares: a non-space first argument is one clear error."""

from __future__ import annotations

import pytest

from metricdp import ValidationError
from metricdp.mechanisms.exponential import exponential, weighted_exponential
from metricdp.mechanisms.geometric import geometric
from metricdp.mechanisms.krr import krr
from metricdp.mechanisms.madlib import madlib
from metricdp.mechanisms.planar_laplace import planar_laplace
from metricdp.mechanisms.subsampled import subsampled_exponential

BUILDERS = {
    "exponential": lambda s: exponential(s, 1.0),
    "weighted_exponential": lambda s: weighted_exponential(s, 1.0, [1.0, 1.0]),
    "geometric": lambda s: geometric(s, 1.0),
    "krr": lambda s: krr(s, 1.0),
    "madlib": lambda s: madlib(s, 1.0),
    "planar_laplace": lambda s: planar_laplace(s, 1.0),
    "subsampled_exponential": lambda s: subsampled_exponential(s, 1.0, candidates=2),
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
@pytest.mark.parametrize("bad", [None, [[0.0, 1.0], [1.0, 0.0]]])
def test_a_non_space_is_a_validation_error(name: str, bad: object) -> None:
    with pytest.raises(ValidationError, match=r"space must be a MetricSpace, got (NoneType|list)"):
        BUILDERS[name](bad)

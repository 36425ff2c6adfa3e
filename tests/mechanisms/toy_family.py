"""A toy mechanism family for tests/mechanisms/test_registry.py: the one module a new family needs.

``toy`` is the exponential mechanism at eps / spread: for spread >= 1 its audited level is
at most eps (the exponential mechanism at eps' is eps'-mDP, Imola et al., Section 3.1), so
:func:`certify` passes. Its registry entry is the test's fixture; nothing in ``metricdp.cli``
knows it.
"""

from __future__ import annotations

from metricdp.mechanisms.base import Mechanism, certify
from metricdp.mechanisms.exponential import exponential_matrix
from metricdp.mechanisms.registry import Family, Param, declared
from metricdp.spaces import MetricSpace, check_space

#: The one registry entry (registered by the test's fixture).
ENTRY = Family(
    "toy", "tests.mechanisms.toy_family:toy", "the exponential mechanism at eps / spread (a test family)",
    (Param("spread", "float", 2.0, "divisor of epsilon in the exponent", "--spread", minimum=1.0),),
)


@declared("toy")
def toy(space: MetricSpace, epsilon: float, *, spread: float = 2.0) -> Mechanism:
    space = check_space(space)
    return certify(exponential_matrix(space.distances, epsilon / spread), space, epsilon, "toy", {"spread": spread})

r"""Local differential privacy frequency oracles as channels.

k-RR (:class:`GRR`), optimized unary encoding (:class:`OUE`), optimized local hashing
(:class:`OLH`), subset selection (:class:`SubsetSelection`) and Hadamard response
(:class:`HadamardResponse`), each eps-LDP (= eps-mDP under the discrete metric) with an
exact sampler from the OS's secure source by default, support counts, Wang et al.'s
unbiased estimate, and a k x k *support channel* that the library's estimators
(:func:`metricdp.estimation.ibu`, :func:`metricdp.estimation.matrix_inversion`) take as
they take any mechanism matrix (:mod:`metricdp.ldp._base` explains why it is right).
Longitudinal collection with memoized reports: :func:`privatize_longitudinal`. Heavy
hitters over domains too large to enumerate: :class:`PrefixExtendingMethod`
(:mod:`metricdp.ldp.heavy_hitters`).

>>> import numpy as np
>>> from metricdp.estimation import ibu
>>> oracle = OUE(k=4, epsilon=1.0)
>>> values = np.repeat([0, 1, 2, 3], [20_000, 15_000, 10_000, 5_000])
>>> reports = oracle.sample(values, rng=7)   # experiments; oracle.privatize(values) for real data
>>> est = ibu(oracle.support(reports), oracle.channel()).estimate
>>> est.round(1).tolist()
[0.4, 0.3, 0.2, 0.1]
"""

from ._base import FrequencyOracle, discrete_metric
from .hashing import OLH
from .heavy_hitters import HeavyHitters, PrefixExtendingMethod
from .memo import privatize_longitudinal
from .oracles import GRR, OUE, HadamardResponse, SubsetSelection

__all__ = [
    "GRR",
    "OLH",
    "OUE",
    "FrequencyOracle",
    "HadamardResponse",
    "HeavyHitters",
    "PrefixExtendingMethod",
    "SubsetSelection",
    "discrete_metric",
    "privatize_longitudinal",
]

"""Privatize data where it already lives: Dask and Spark DataFrames.

* :func:`metricdp.integrations.dask.privatize_dask` -- ``map_partitions`` with the
  mechanism in the task graph once;
* :func:`metricdp.integrations.spark.privatize_spark` -- ``mapInPandas`` with the
  mechanism broadcast once.

Both draw each partition's releases from its own stream: the operating system's secure
source by default, or, with a ``seed`` (experiments only, with a
:class:`~metricdp.errors.PrivacyLeakWarning`), the child of
``numpy.random.SeedSequence(seed)`` spawned for that partition
(:func:`partition_rng`). The engines are optional extras (``metricdp[dask]``,
``metricdp[spark]``) and are imported only when these modules are.
"""

from __future__ import annotations

from ._common import partition_rng

__all__ = ["partition_rng"]

from .._lazy import submodule_getattr

__getattr__ = submodule_getattr(__name__, __path__)

"""Privatize data where it already lives: Dask and Spark DataFrames.

* :func:`metricdp.integrations.dask.privatize_dask` -- ``map_partitions`` with the
  mechanism in the task graph once;
* :func:`metricdp.integrations.spark.privatize_spark` -- ``mapInPandas`` with the
  mechanism broadcast once.

Files (``privatize_file_dask``, ``privatize_file_spark``, the numbers' and points' entry
points; the CLI's ``--engine``) are not read by pandas' or Spark's readers: ONE driver
(:mod:`._run`) checks the whole file with the local engine's reader and column plan
(:mod:`metricdp.tabular`), runs each piece of whole records on the engine's backend
(:class:`._backend.Backend`: Dask's or Spark's, the driver never asks which) as the local
engine releases a chunk (the pipeline's kind of value and the format's writer:
:mod:`._pieces`), checks the row counts and publishes atomically; every engine failure is
one typed error (:class:`~metricdp.errors.EngineError`, or the input's
:class:`~metricdp.errors.ValidationError`).

All draw each partition's releases from its own stream: the operating system's secure
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

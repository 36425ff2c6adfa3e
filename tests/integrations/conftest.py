"""One Dask cluster and one Spark session for all integration tests (a JVM start costs ~20 s or more).

``spark_unavailable`` is the reason Spark tests skip (no pyspark, no Java), None when they can run.
"""

from __future__ import annotations

import os
import sys

import pytest

from tests.helpers import missing

#: Why Spark tests skip here (no pyspark or pandas, no Java), None when they can run.
spark_unavailable = missing("spark", "java")
#: Why Dask tests skip here, None when they can run.
dask_unavailable = missing("dask")


@pytest.fixture(scope="session")
def spark():
    """A local[2] SparkSession shared by every test of the run (stopped at the end)."""
    if spark_unavailable:
        pytest.skip(spark_unavailable)
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("OFF")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def scheduler():
    """A local Dask cluster with real worker processes, shared by every test of the run."""
    if dask_unavailable:
        pytest.skip(dask_unavailable)
    import logging

    import distributed

    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=logging.CRITICAL
    ) as cluster:
        yield cluster.scheduler_address


@pytest.fixture(params=[
    pytest.param("dask", marks=pytest.mark.skipif(bool(dask_unavailable), reason=str(dask_unavailable))),
    pytest.param("spark", marks=pytest.mark.skipif(bool(spark_unavailable), reason=str(spark_unavailable))),
])
def engine(request: pytest.FixtureRequest) -> tuple[str, dict[str, object]]:
    """The engine's name and where it runs (the shared cluster or session)."""
    if request.param == "dask":
        return "dask", {"scheduler": request.getfixturevalue("scheduler")}
    request.getfixturevalue("spark")
    return "spark", {}

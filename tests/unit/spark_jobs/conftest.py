"""A local Spark session (with the job's jars and Delta) for the DataFrame-level unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_jobs.session import local_session


@pytest.fixture(scope="session")
def spark(spark_jar_paths: list[Path]) -> Iterator[SparkSession]:
    session = local_session(spark_jar_paths, extra={"spark.driver.memory": "2g"})
    session.sparkContext.setLogLevel("ERROR")
    yield session

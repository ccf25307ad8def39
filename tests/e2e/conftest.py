"""Spark for the merge job's end-to-end tests: one local session per test session (the same
settings as tests/unit/spark_jobs, so whichever starts it first serves both)."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from pyspark.sql import SparkSession

from spark_jobs.session import local_session

_prefixes = itertools.count()
os.environ["TZ"] = "UTC"  # PySpark turns timestamps into naive local datetimes
time.tzset()


@pytest.fixture(scope="session")
def spark(spark_jar_paths: list[Path]) -> Iterator[SparkSession]:
    session = local_session(spark_jar_paths, extra={"spark.driver.memory": "2g"})
    session.sparkContext.setLogLevel("ERROR")
    yield session


@pytest.fixture(scope="session")
def registry_client(registry) -> SchemaRegistryClient:  # type: ignore[no-untyped-def]
    return SchemaRegistryClient({"url": registry.url})


@pytest.fixture
def prefix() -> str:
    """A topic prefix of its own per test (topics and subjects never collide)."""
    return f"m{int(time.time())}x{next(_prefixes)}"

"""Fixtures of the merge job's end-to-end tests (the `spark` session is in tests/conftest.py)."""

from __future__ import annotations

import itertools
import os
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from devstack.s3 import S3

from tests.support.producer import ProducerRun

_prefixes = itertools.count()
os.environ["TZ"] = "UTC"  # PySpark turns timestamps into naive local datetimes
time.tzset()


@pytest.fixture(scope="session")
def registry_client(registry) -> SchemaRegistryClient:  # type: ignore[no-untyped-def]
    return SchemaRegistryClient({"url": registry.url})


@pytest.fixture
def prefix() -> str:
    """A topic prefix of its own per test (topics and subjects never collide)."""
    return f"m{int(time.time())}x{next(_prefixes)}"


@pytest.fixture
def seed() -> int:
    """The random workload's seed: random per run, printed (pytest shows it with a failure),
    PGCDC_ACCEPTANCE_SEED to replay one."""
    value = int(os.environ.get("PGCDC_ACCEPTANCE_SEED") or random.randrange(2**31))
    print(f"\nacceptance seed: {value} (replay with PGCDC_ACCEPTANCE_SEED={value})")
    return value


@pytest.fixture
def producer_runs() -> Iterator[list[ProducerRun]]:
    """`pgcdc run` processes a test starts (`ProducerRun`), stopped and their slots dropped."""
    runs: list[ProducerRun] = []
    yield runs
    for run in runs:
        run.drop()


@pytest.fixture
def s3a_spark(spark: Any, s3: S3) -> Iterator[Any]:
    """The shared session, its S3A filesystem pointed at the test server.

    Set on the running session's Hadoop configuration (every filesystem instance created after
    reads it; each test's bucket is new, so its S3A instance is too); harmless to local paths."""
    env = s3.env()
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in {
        "fs.s3a.endpoint": s3.endpoint,
        "fs.s3a.endpoint.region": env["AWS_REGION"],
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.access.key": env["AWS_ACCESS_KEY_ID"],
        "fs.s3a.secret.key": env["AWS_SECRET_ACCESS_KEY"],
    }.items():
        hadoop.set(key, value)
    yield spark

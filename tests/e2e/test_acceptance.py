"""Acceptance: PostgreSQL → `pgcdc run` → Kafka → merge job → Delta, under a seeded random
workload, with and without faults; at the end every Delta table equals its PostgreSQL table.

The seed is random per run and printed (and named in every failure); set
PGCDC_ACCEPTANCE_SEED to replay one."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from acceptance_support import SCHEMA, ProducerRun, Workload, differences
from pyspark.sql import SparkSession

from spark_jobs.config import MergeConfig
from spark_jobs.job import run_merge, start_merge

pytestmark = pytest.mark.e2e


@pytest.fixture
def seed() -> int:
    value = int(os.environ.get("PGCDC_ACCEPTANCE_SEED") or random.randrange(2**31))
    print(f"\nacceptance seed: {value} (replay with PGCDC_ACCEPTANCE_SEED={value})")
    return value


def reset(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        for (gid,) in conn.execute("SELECT gid FROM pg_prepared_xacts WHERE gid LIKE 'acc-%'"
                                   ).fetchall():
            conn.execute(f"ROLLBACK PREPARED '{gid}'")


def merge_config(kafka: Any, registry: Any, prefix: str, target: Path, **kw: Any) -> MergeConfig:
    return MergeConfig(bootstrap_servers=kafka.bootstrap, schema_registry_url=registry.url,
                       target=str(target), topic_prefix=prefix, **kw)


def assert_equal(spark: SparkSession, dsn: str, target: Path, seed: int,
                 workload: Workload) -> None:
    diffs = differences(spark, dsn, target)
    assert not diffs, (f"seed {seed}: Delta differs from PostgreSQL:\n" + "\n".join(diffs)
                       + f"\noperations: {workload.log}")


def wait_batches(query: Any, processor: Any, count: int, seed: int,
                 timeout: float = 240.0) -> None:
    """Until the live merge query has completed `count` micro-batches (not a timing
    assertion: a bound on a hang)."""
    deadline = time.monotonic() + timeout
    while processor.stats.batches < count:
        assert query.exception() is None, f"seed {seed}: merge query failed: {query.exception()}"
        assert time.monotonic() < deadline, f"seed {seed}: merge made no progress"
        time.sleep(0.5)


@pytest.fixture
def producer_runs() -> Iterator[list[ProducerRun]]:
    runs: list[ProducerRun] = []
    yield runs
    for run in runs:
        run.drop()


@pytest.mark.parametrize("server", ["pg18"])
def test_random_workload_ends_with_equal_tables(
        server: str, request: pytest.FixtureRequest, spark: SparkSession, kafka: Any,
        registry: Any, seed: int, tmp_path: Path, producer_runs: list[ProducerRun]) -> None:
    pg = request.getfixturevalue(server)
    reset(pg.dsn)
    workload = Workload(pg.dsn, seed)
    workload.create()
    producer = ProducerRun(pg.dsn, kafka.bootstrap, registry.url, tmp_path)
    producer_runs.append(producer)
    producer.start()  # initial snapshot of the rows created above, then streaming
    producer.wait_caught_up()

    target = tmp_path / "lake"
    query, processor = start_merge(spark, merge_config(kafka, registry, producer.prefix, target,
                                                       trigger="2s"))
    try:
        wait_batches(query, processor, 1, seed)  # the snapshot's rows merged
        workload.run(80)
        wait_batches(query, processor, processor.stats.batches + 1, seed)
        workload.big_transaction()
        workload.run(80)
        producer.wait_caught_up()
        assert query.exception() is None, f"seed {seed}: {query.exception()}"
    finally:
        query.stop()
        processor.close()
    assert producer.alive(), producer.output()
    stats = run_merge(spark, merge_config(kafka, registry, producer.prefix, target,
                                          trigger="available-now"))
    assert stats.dead_letters == 0, f"seed {seed}"
    assert processor.stats.batches + stats.batches >= 2
    assert_equal(spark, pg.dsn, target, seed, workload)

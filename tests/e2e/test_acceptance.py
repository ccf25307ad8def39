"""Acceptance: PostgreSQL → `pgcdc run` → Kafka → merge job → Delta, under a seeded random
workload, with and without faults; at the end every Delta table equals its PostgreSQL table.

The seed (the `seed` fixture of tests/e2e/conftest.py) is random per run and printed (and
named in every failure); set PGCDC_ACCEPTANCE_SEED to replay one."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession

from spark_jobs.runtime.config import MergeConfig
from spark_jobs.runtime.query import run_merge, start_merge
from tests.support.acceptance import SCHEMA, Shapes, Workload, differences
from tests.support.producer import ProducerRun

pytestmark = pytest.mark.e2e


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


#: PGCDC_ACCEPTANCE_VALUE_FORMAT=debezium runs the random workload on topics in Debezium's
#: value format (issue 39), with the types that format encodes specially (`Shapes`), a widened
#: column, the producer killed and restarted (events sent again: stale duplicates) and deleted
#: keys written again. Not in the suite's run: every batch of such a topic takes the Spark
#: path with Python decoders (14 min in a run here, on a busy machine; the suite has 30).
DEBEZIUM_FORMAT = os.environ.get("PGCDC_ACCEPTANCE_VALUE_FORMAT") == "debezium"


@pytest.mark.parametrize("server", ["pg18"])
def test_random_workload_ends_with_equal_tables(
        server: str, request: pytest.FixtureRequest, spark: SparkSession, kafka: Any,
        registry: Any, seed: int, tmp_path: Path, producer_runs: list[ProducerRun]) -> None:
    pg = request.getfixturevalue(server)
    reset(pg.dsn)
    workload = Workload(pg.dsn, seed)
    workload.create()
    shapes = Shapes(pg.dsn, seed)
    extra = []
    if DEBEZIUM_FORMAT:
        shapes.create()
        extra = ["--value-format", "debezium", "--truncate-records", "every-partition"]
    producer = ProducerRun(pg.dsn, kafka.bootstrap, registry.url, f"{SCHEMA}.*", extra=extra)
    producer_runs.append(producer)
    # initial snapshot of the rows created above, then streaming
    producer.start(tmp_path, wait=False)
    producer.wait_caught_up()

    target = tmp_path / "lake"
    query, processor = start_merge(spark, merge_config(kafka, registry, producer.prefix, target,
                                                       trigger="2s"))
    try:
        wait_batches(query, processor, 1, seed)  # the snapshot's rows merged
        workload.run(80)
        if DEBEZIUM_FORMAT:
            shapes.change()
            producer.stop(signal.SIGKILL)  # what it sent after its confirmed LSN comes again
            producer.start(tmp_path, wait=False)
            shapes.widen()
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
    if DEBEZIUM_FORMAT:
        shape_diffs = shapes.differences(spark, target)
        assert not shape_diffs, f"seed {seed}: {shape_diffs}"


# Faults: a PostgreSQL and a Kafka of the test's own (restarted here; the session's servers
# stay untouched for other tests), the session's registry.
PG_SETTINGS = {"logical_decoding_work_mem": "'64kB'", "fsync": "off", "full_page_writes": "off"}


@pytest.fixture
def own_servers(work_dir: Path) -> Iterator[tuple[Any, Any]]:
    from devstack.kafka import Kafka
    from devstack.maven import resolve_pom
    from devstack.ports import free_port
    from devstack.postgres import Postgres, embedded_pg18_bin
    from devstack.stack import cache_dir

    bin_dir = embedded_pg18_bin()
    assert bin_dir is not None, "PostgreSQL 18 binaries missing (dev extra)"
    tag = uuid.uuid4().hex[:6]
    pg = Postgres(bin_dir, work_dir / f"acc-pg-{tag}", free_port(), dict(PG_SETTINGS))
    broker = Kafka(resolve_pom(cache_dir(), "kafka.pom.xml"), work_dir / f"acc-kafka-{tag}",
                   free_port(), free_port())
    pg.start()
    try:
        broker.start()
        try:
            yield pg, broker
        finally:
            broker.stop()
    finally:
        pg.stop()


def test_faults_nothing_lost_nothing_left_over(
        own_servers: tuple[Any, Any], spark: SparkSession, registry: Any, seed: int,
        tmp_path: Path, producer_runs: list[ProducerRun]) -> None:
    pg, broker = own_servers
    rng = random.Random(seed + 1)  # fault timing; the workload has its own
    workload = Workload(pg.dsn, seed)
    workload.create()
    producer = ProducerRun(pg.dsn, broker.bootstrap, registry.url, f"{SCHEMA}.*")
    producer_runs.append(producer)
    events: list[str] = []

    def kill_producer_during(action: Any) -> None:
        """SIGKILL `pgcdc run` at a random moment while `action` runs, then restart it."""
        worker = threading.Thread(target=action)
        worker.start()
        time.sleep(rng.uniform(0.1, 2.0))
        producer.stop(signal.SIGKILL)
        worker.join()
        events.append("producer SIGKILL")
        producer.start(tmp_path, wait=False)

    # 1. killed during the initial snapshot (or just after), restarted
    producer.start(tmp_path, wait=False)
    time.sleep(rng.uniform(0.2, 3.0))
    producer.stop(signal.SIGKILL)
    events.append("producer SIGKILL during snapshot")
    producer.start(tmp_path, wait=False)
    producer.wait_caught_up()

    target = tmp_path / "lake"
    config = merge_config(broker, registry, producer.prefix, target, trigger="2s")
    query, processor = start_merge(spark, config)
    try:
        wait_batches(query, processor, 1, seed)
        # 2. producer killed at random points of the live workload
        for _ in range(2):
            kill_producer_during(lambda: workload.run(30))
        kill_producer_during(workload.big_transaction)
        producer.wait_caught_up()

        # 3. the merge job killed mid-flight and restarted from its checkpoint
        workload.run(30)
        time.sleep(rng.uniform(0.5, 4.0))
        query.stop()
        processor.close()
        events.append("merge query stopped")
        query, processor = start_merge(spark, config)

        # 4. the Kafka broker restarted while changes keep coming
        workload.run(20)
        broker.stop()
        events.append("Kafka stopped")
        workload.run(20)
        time.sleep(rng.uniform(1.0, 5.0))
        broker.start()
        events.append("Kafka started")
        producer.wait_caught_up(timeout=300)
        if query.exception() is not None:  # the Kafka source may give up: restart it
            events.append(f"merge query failed during the outage: {query.exception()}")
            processor.close()
            query, processor = start_merge(spark, config)

        # 5. PostgreSQL restarted: the producer reconnects by itself
        workload.run(20)
        pg.stop()
        events.append("PostgreSQL stopped")
        time.sleep(rng.uniform(0.5, 3.0))
        pg.start()
        events.append("PostgreSQL started")
        workload.run(30)
        producer.wait_caught_up(timeout=400)
        assert query.exception() is None, f"seed {seed}: {query.exception()}"
    finally:
        query.stop()
        processor.close()
        print(f"faults: {events}")
    assert producer.alive(), producer.output()
    stats = run_merge(spark, merge_config(broker, registry, producer.prefix, target,
                                          trigger="available-now"))
    assert stats.dead_letters == 0, f"seed {seed}"
    assert_equal(spark, pg.dsn, target, seed, workload)

"""`pgcdc run --exactly-once`: SIGKILLs of the producer at random points (streaming, and in the
middle of the initial snapshot), a Kafka broker restart and a PostgreSQL restart under a running
workload; a read_committed reader sees every change exactly once, folding the topic gives
PostgreSQL's table, and so do the merge job's Delta tables."""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from spark_jobs.runtime.config import MergeConfig
from spark_jobs.runtime.query import run_merge
from spark_jobs.verify.compare import compare, lake_rows, pg_rows
from tests.support.cdc_checks import Record, execute, read_records, rows
from tests.support.kafka import caught_up
from tests.support.producer import ProducerRun, current_lsn
from tests.support.table_state import final_state

pytestmark = pytest.mark.integration


class _Workload(threading.Thread):
    """Small transactions (insert, update, delete, several rows) until stopped; rides out a
    PostgreSQL restart by reconnecting."""

    def __init__(self, dsn: str, table: str, seed: int) -> None:
        super().__init__(daemon=True)
        self.dsn, self.table, self.rng = dsn, table, random.Random(seed)
        self.done = threading.Event()
        self.committed = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        next_id = 1
        conn: psycopg.Connection[Any] | None = None
        while not self.done.is_set():
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.dsn, autocommit=False)
                with conn.transaction():
                    for _ in range(self.rng.randint(1, 4)):
                        op = self.rng.random()
                        if op < 0.5 or next_id < 5:
                            conn.execute(f"INSERT INTO {self.table} VALUES (%s, 0)", (next_id,))
                            next_id += 1
                        elif op < 0.85:
                            conn.execute(f"UPDATE {self.table} SET n = n + 1 WHERE id = %s",
                                         (self.rng.randrange(1, next_id),))
                        else:
                            conn.execute(f"DELETE FROM {self.table} WHERE id = %s",
                                         (self.rng.randrange(1, next_id),))
                self.committed += 1
                time.sleep(0.01)
            except psycopg.OperationalError:
                conn = None  # the server restarts; an uncommitted transaction is just lost
                time.sleep(0.5)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                self.error = exc
                return
        if conn is not None:
            conn.close()


def _fold(records: list[Record]) -> list[tuple[int, int]]:
    """(id, n) of the table a consumer builds from `records` (in contract order)."""
    state = final_state([r.value for r in records if r.value is not None])
    return sorted((k, row["n"]) for k, row in state.items())


def _assert_lake_equals_postgres(spark: Any, kafka: Any, registry: Any, dsn: str, prefix: str,
                                 table: str, target: Path) -> None:
    """The merge job (read_committed, available-now) builds the Delta table PostgreSQL has."""
    stats = run_merge(spark, MergeConfig(bootstrap_servers=kafka.bootstrap,
                                         schema_registry_url=registry.url, target=str(target),
                                         topic_prefix=prefix, trigger="available-now"))
    assert stats.dead_letters == 0
    result = compare(f"public.{table}", pg_rows(dsn, "public", table),
                     lake_rows(spark, str(target / "public" / table), ["id"]))
    assert result.equal, result.differences


def test_exactly_once_through_kills_and_restarts(pg15, kafka, registry, spark, log_dir,
                                                 tmp_path) -> None:
    rng = random.Random(13)
    run = ProducerRun(pg15.dsn, kafka.bootstrap, registry.url, "-",
                      ["--snapshot", "never", "--exactly-once",
                       "--exactly-once-batch-ms", "50"])
    table = f"eo_{run.tag}"
    run.tables = f"public.{table}"
    topic = f"{run.prefix}.public.{table}"
    execute(pg15.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, n int NOT NULL)")
    workload = _Workload(pg15.dsn, table, seed=13)
    try:
        run.start(log_dir)
        workload.start()
        for _ in range(6):  # SIGKILL at random points while changes stream
            time.sleep(rng.uniform(0.3, 2.0))
            assert run.stop(signal.SIGKILL) == -signal.SIGKILL
            run.start(log_dir)
        time.sleep(1.0)
        kafka.stop()  # the broker goes away mid-transaction, then comes back
        time.sleep(2.0)
        kafka.start()
        time.sleep(3.0)
        pg15.stop()
        pg15.start()
        time.sleep(2.0)
        run.stop(signal.SIGKILL)
        run.start(log_dir)
        time.sleep(1.0)
        workload.done.set()
        workload.join(30)
        assert workload.error is None, workload.error
        assert workload.committed > 50
        run.wait_confirmed(current_lsn(pg15.dsn), timeout=120)
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        workload.done.set()
        run.drop()

    records = read_records(kafka.bootstrap, registry.url, topic, min_count=1, timeout=60)
    positions = [(r.value["source"]["commit_lsn"], r.value["source"]["txn_index"])
                 for r in records]
    duplicates = len(positions) - len(set(positions))
    assert duplicates == 0, f"{duplicates} of {len(positions)} events published twice"

    assert _fold(records) == rows(pg15.dsn, f"SELECT id, n FROM {table} ORDER BY id")
    _assert_lake_equals_postgres(spark, kafka, registry, pg15.dsn, run.prefix, table,
                                 tmp_path / "lake")


SNAPSHOT_ROWS = 200_000


def _wait_for_first_records(run: ProducerRun, bootstrap: str, topic: str,
                            timeout: float = 120.0) -> int:
    """Until `topic` holds records (committed or not): the snapshot is under way."""
    # read_uncommitted: the high watermark, not the last stable offset (0 until a commit)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eo-watch",
                         "isolation.level": "read_uncommitted"})
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            assert run.proc is not None and run.proc.poll() is None, run.output()[-3000:]
            try:
                high = sum(consumer.get_watermark_offsets(TopicPartition(topic, p), 1.0)[1]
                           for p in (0, 1))
            except KafkaException:
                high = 0  # the topic does not exist yet
            if high > 0:
                return high
            time.sleep(0.02)
    finally:
        consumer.close()
    raise AssertionError(f"no snapshot record in {topic} after {timeout}s: {run.output()}")


def _slots(dsn: str, tag: str) -> list[str]:
    return [r[0] for r in rows(dsn, "SELECT slot_name FROM pg_replication_slots"
                                    f" WHERE slot_name LIKE '%{tag}%' ORDER BY 1")]


def test_snapshot_killed_midway_is_never_seen(pg15, kafka, registry, spark, log_dir,
                                              tmp_path) -> None:
    """SIGKILL in the middle of the initial snapshot: no slot is kept and the next run takes a
    new snapshot; the killed attempt's rows are in the topic but only in aborted transactions,
    so a read_committed reader sees one truncate per partition and each row exactly once, all
    from the new snapshot, then the streamed changes."""
    run = ProducerRun(pg15.dsn, kafka.bootstrap, registry.url, "-",
                      ["--exactly-once", "--topic-partitions", "2", "--snapshot-workers", "2",
                       "--snapshot-chunk-rows", "20000"])
    table = f"eosnap_{run.tag}"
    run.tables = f"public.{table}"
    topic = f"{run.prefix}.public.{table}"
    n = SNAPSHOT_ROWS
    execute(pg15.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, n int NOT NULL, pad text)",
            f"INSERT INTO {table} SELECT i, 0, repeat('p', 40) FROM generate_series(1, {n}) i")
    try:
        run.start(log_dir, wait=False)
        _wait_for_first_records(run, kafka.bootstrap, topic)
        assert run.stop(signal.SIGKILL) == -signal.SIGKILL
        assert "snapshot done" not in run.output(), "the kill came after the snapshot"
        deadline = time.monotonic() + 30  # the temporary slot goes with its connection
        while _slots(pg15.dsn, run.tag) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _slots(pg15.dsn, run.tag) == [], "a slot outlived the killed snapshot"
        # Between the attempts: the new snapshot must show these, the old one did not.
        execute(pg15.dsn, f"DELETE FROM {table} WHERE id <= 10",
                f"UPDATE {table} SET n = 1 WHERE id BETWEEN 11 AND 20",
                f"INSERT INTO {table} SELECT i, 2, 'new' FROM generate_series({n + 1}, {n + 10}) i")
        # One chunk now, so one reader (a thread): the killed attempt's second reader is not
        # restarted, and its open transaction must still be aborted at once.
        run.extra[-1] = str(2 * n)
        run.start(log_dir, wait=False)
        run.wait_streaming(timeout=180)
        execute(pg15.dsn, f"UPDATE {table} SET n = 3 WHERE id BETWEEN 21 AND 30",
                f"DELETE FROM {table} WHERE id BETWEEN 31 AND 40",
                f"INSERT INTO {table} SELECT i, 4, 'streamed' "
                f"FROM generate_series({n + 11}, {n + 20}) i")
        run.wait_confirmed(current_lsn(pg15.dsn), timeout=120)
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.drop()

    records = [r for r in read_records(kafka.bootstrap, registry.url, topic, min_count=n + 32,
                                       timeout=120) if r.value is not None]
    snapshot = [r for r in records if r.value["source"]["snapshot"] == "true"]
    truncates = [r for r in snapshot if r.value["op"] == "t"]
    reads = [r for r in snapshot if r.value["op"] == "r"]
    # The new attempt only: one truncate per partition (the topic existed), at its point P.
    assert sorted(r.partition for r in truncates) == [0, 1]
    points = {r.value["source"]["commit_lsn"] for r in snapshot}
    assert len(points) == 1, f"snapshot events of {len(points)} attempts are visible"
    ids = Counter(r.value["after"]["id"] for r in reads)
    twice = [i for i, c in ids.items() if c > 1]
    assert not twice, f"{len(twice)} rows read twice, e.g. {twice[:5]}"
    assert set(ids) == set(range(11, n + 11))  # the state at the new attempt's point
    assert {r.value["after"]["id"]: r.value["after"]["n"] for r in reads
            if r.value["after"]["id"] <= 20 or r.value["after"]["id"] > n} == \
        {**{i: 1 for i in range(11, 21)}, **{i: 2 for i in range(n + 1, n + 11)}}
    streamed = [r for r in records if r.value["source"]["snapshot"] != "true"]
    assert len(streamed) == 30
    positions = [(r.value["source"]["commit_lsn"], r.value["source"]["txn_index"])
                 for r in records if r.value["op"] != "t"]
    assert len(positions) == len(set(positions))
    assert _fold(records) == rows(pg15.dsn, f"SELECT id, n FROM {table} ORDER BY id")

    # The killed attempt did publish: its rows are in the log, in aborted transactions.
    everything = _count_values(kafka.bootstrap, topic)
    print(f"{everything - len(records)} records of the killed attempt, aborted")
    assert everything > len(records)
    _assert_lake_equals_postgres(spark, kafka, registry, pg15.dsn, run.prefix, table,
                                 tmp_path / "lake")


def _count_values(bootstrap: str, topic: str) -> int:
    """Records with a value in `topic`, aborted transactions included (read_uncommitted)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eo-count",
                         "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
    count, idle_since = 0, time.monotonic()
    try:
        while time.monotonic() - idle_since < 3.0:  # everything was written long before
            batch = consumer.consume(5000, 0.5)
            if batch:
                idle_since = time.monotonic()
            elif caught_up(consumer):  # every record up to the high watermark was read
                break
            count += sum(1 for m in batch if m.error() is None and m.value() is not None)
    finally:
        consumer.close()
    return count


def test_streamed_and_prepared_transactions_once_across_a_kill(pg15, kafka, registry,
                                                                log_dir) -> None:
    """A transaction streamed in progress and one held prepared across a SIGKILL are published
    once, at their commit; what committed meanwhile is not published again although the slot
    could not be confirmed past the prepared transaction's start."""
    run = ProducerRun(pg15.dsn, kafka.bootstrap, registry.url, "-",
                      ["--snapshot", "never", "--exactly-once"])
    table = f"eo2pc_{run.tag}"
    run.tables = f"public.{table}"
    topic = f"{run.prefix}.public.{table}"
    execute(pg15.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
    insert = (f"INSERT INTO {table} SELECT i, repeat('x', 50) "
              "FROM generate_series(%s::int, %s::int) i")
    try:
        run.start(log_dir)
        with psycopg.connect(pg15.dsn, autocommit=True) as conn:
            conn.execute("BEGIN")
            conn.execute(insert, (1000, 3999))  # larger than logical_decoding_work_mem: streamed
            conn.execute("COMMIT")
            conn.execute("BEGIN")
            conn.execute(insert, (5000, 7999))
            conn.execute(f"PREPARE TRANSACTION 'g_{run.tag}'")  # type: ignore[arg-type]
            conn.execute(insert, (1, 10))  # commits while the prepared one is held
            read_records(kafka.bootstrap, registry.url, topic, min_count=3010, idle_s=0.5)
            time.sleep(1.0)  # let a confirmation go out (it stops below the prepared one)
            assert run.stop(signal.SIGKILL) == -signal.SIGKILL
            run.start(log_dir)
            conn.execute(f"COMMIT PREPARED 'g_{run.tag}'")  # type: ignore[arg-type]
        run.wait_confirmed(current_lsn(pg15.dsn), timeout=120)
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.drop()

    records = read_records(kafka.bootstrap, registry.url, topic, min_count=6010)
    ids = [r.value["after"]["id"] for r in records]
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} events published twice"
    assert sorted(ids) == [*range(1, 11), *range(1000, 4000), *range(5000, 8000)]

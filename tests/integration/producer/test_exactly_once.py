"""`pgcdc run --exactly-once`: SIGKILLs of the producer at random points, a Kafka broker restart
and a PostgreSQL restart under a running workload; a read_committed reader sees every change
exactly once, and folding the topic gives PostgreSQL's table."""

from __future__ import annotations

import random
import signal
import threading
import time
from typing import Any

import psycopg
import pytest
from cdc_checks import execute, read_records, rows
from producer_support import ProducerRun, current_lsn

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


def test_exactly_once_through_kills_and_restarts(pg15, kafka, registry, log_dir) -> None:
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

    state: dict[int, int] = {}
    for record in sorted(records, key=lambda r: (r.value["source"]["commit_lsn"],
                                                 r.value["source"]["txn_index"])):
        if record.value["op"] == "d":
            state.pop(record.value["before"]["id"], None)
        else:
            state[record.value["after"]["id"]] = record.value["after"]["n"]
    assert sorted(state.items()) == rows(pg15.dsn, f"SELECT id, n FROM {table} ORDER BY id")


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

"""`pgcdc run`'s initial snapshot end to end (PostgreSQL 15/18, Kafka, registry): rows that
exist before the run arrive as `r` events at the consistent point, changes during the snapshot
arrive exactly once, an interrupted snapshot is restarted without leaving a slot behind."""

from __future__ import annotations

import datetime as dt
import random
import signal
import threading
import time
import uuid
from decimal import Decimal

import psycopg
import pytest
from confluent_kafka import Consumer, TopicPartition
from devstack.ports import free_port

from tests.support.producer import ProducerRun, current_lsn
from tests.support.snapshot import (
    consistent_point,
    final_state,
    launch,
    read_events,
    slots,
    table_rows,
    wait_exit,
    wait_no_slots,
    wait_records,
)

pytestmark = pytest.mark.integration

BIG = "".join(random.Random(3).choice("abcdefghij0123456789") for _ in range(9000))
ROWS = [
    (1, "tab\there, newline\nthere, back\\slash, quote\" é ☃", Decimal("12.34"),
     dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC), dt.date(2024, 2, 29),
     ["a", "b c", None, "d\\e"], '{"k": [1, "two", null]}', b"\x00\x01\\\n\xff", True, 0.1,
     uuid.UUID("12345678-1234-5678-1234-567812345678"), dt.timedelta(days=1, seconds=7.5),
     BIG, None),
    (2, None, None, None, None, None, None, None, None, None, None, None, None, None),
    (3, "", Decimal("-0.01"), dt.datetime(1999, 12, 31, 23, 59, 59, tzinfo=dt.UTC),
     dt.date(1, 1, 1), [], "[]", b"", False, -1.5e300, uuid.UUID(int=0), dt.timedelta(0),
     "short", None),
]
COLUMNS = ("id int PRIMARY KEY, name text, amount numeric(10,2), created timestamptz, day date,"
           " tags text[], doc jsonb, raw bytea, flag boolean, ratio float8, uid uuid,"
           " span interval, big text, nothing text")


def _execute(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def _insert(dsn: str, table: str, rows: list[tuple[object, ...]], id_offset: int = 0) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        for row in rows:
            marks = ", ".join(["%s"] * len(row))
            conn.execute(f"INSERT INTO {table} VALUES ({marks})", (row[0] + id_offset, *row[1:]))


def test_existing_rows_arrive_as_snapshot_reads(postgres, producer_run, log_dir) -> None:
    run = producer_run("public.snapvals_*")
    table = f"snapvals_{run.tag}"
    _execute(postgres.dsn, f"CREATE TABLE {table} ({COLUMNS})",
             f"ALTER TABLE {table} ALTER COLUMN big SET STORAGE EXTERNAL")
    _insert(postgres.dsn, table, ROWS)
    run.start(log_dir)
    lsn = consistent_point(run)
    assert slots(postgres.dsn, run.slot) == [(run.slot, False)]  # the temporary one is gone
    _insert(postgres.dsn, table, ROWS, id_offset=100)  # the same values, streamed this time
    end = current_lsn(postgres.dsn)
    run.wait_confirmed(end)

    events = read_events(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                         min_count=6)
    ops = [e.value["op"] for e in events]
    assert ops == ["r", "r", "r", "c", "c", "c"]  # a new topic: no truncate first
    reads, creates = events[:3], events[3:]
    for index, read in enumerate(reads):
        source = read.value["source"]
        assert (source["commit_lsn"], source["lsn"], source["txn_index"]) == (lsn, lsn, index)
        assert source["snapshot"] == "true" and read.key == {"id": index + 1}
    for read, create in zip(reads, creates, strict=True):
        assert create.value["source"]["commit_lsn"] > lsn
        assert create.value["source"]["snapshot"] == "false"
        # Same Relation, same schema id; COPY text and pgoutput text give the same values.
        assert read.value_schema_id == create.value_schema_id
        assert {**read.value["after"], "id": 0} == {**create.value["after"], "id": 0}
    first = reads[0].value["after"]
    assert first["name"] == ROWS[0][1] and first["raw"] == ROWS[0][7]
    assert first["tags"] == ["a", "b c", None, "d\\e"] and first["big"] == BIG
    assert first["created"] == ROWS[0][3] and first["amount"] == Decimal("12.34")
    assert reads[1].value["after"] == {**{k: None for k in first}, "id": 2}

    assert run.stop(signal.SIGTERM) == 0
    assert run.confirmed_lsn() >= end


def _writer(dsn: str, table: str, first_new_id: int, stop: threading.Event,
            commits: list[float]) -> None:
    """Small transactions until `stop`: insert fresh ids, update and delete existing ones."""
    rng = random.Random(11)
    next_id = first_new_id
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not stop.is_set():
            with conn.transaction():
                conn.execute(f"INSERT INTO {table} VALUES (%s, 0, 'new')", (next_id,))
                conn.execute(f"UPDATE {table} SET v = v + 1, note = %s WHERE id = %s",
                             (f"w{next_id}", rng.randrange(1, first_new_id)))
                conn.execute(f"DELETE FROM {table} WHERE id = %s",
                             (rng.randrange(1, first_new_id),))
            commits.append(time.time())
            next_id += 1
            time.sleep(0.002)


def test_changes_during_the_snapshot_arrive_exactly_once(postgres, producer_run,
                                                         log_dir) -> None:
    run = producer_run("public.snapbusy_*", "--snapshot-workers", "2",
                       "--snapshot-chunk-rows", "5000")
    table = f"snapbusy_{run.tag}"
    rows = 60_000
    _execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, v int, note text)",
             f"INSERT INTO {table} SELECT g, 0, 'seed' FROM generate_series(1, {rows}) g",
             f"ANALYZE {table}")
    stop = threading.Event()
    commits: list[float] = []
    writer = threading.Thread(target=_writer, args=(postgres.dsn, table, rows + 1, stop,
                                                    commits))
    writer.start()
    try:
        time.sleep(0.3)
        run.start(log_dir)  # returns once the snapshot is done and the slot streams
        streaming_at = time.time()
        time.sleep(1.0)
    finally:
        stop.set()
        writer.join()
    lsn = consistent_point(run)
    end = current_lsn(postgres.dsn)
    run.wait_confirmed(end)
    assert run.stop(signal.SIGTERM) == 0

    values = [e.value for e in read_events(run.bootstrap, run.registry_url,
                                           f"{run.prefix}.public.{table}", min_count=rows // 2)]
    reads = [v for v in values if v["op"] == "r"]
    streamed = [v for v in values if v["op"] in ("c", "u", "d")]
    assert all(v["source"]["commit_lsn"] == lsn for v in reads)
    assert all(v["source"]["commit_lsn"] > lsn for v in streamed)
    # The writer was busy on both sides of the consistent point, and during the snapshot.
    assert any(v["after"]["note"] != "seed" for v in reads)
    assert any(v["source"]["ts_ms"] < streaming_at * 1000 for v in streamed)
    # Exactly once: one read per row, no change twice, nothing both read and streamed.
    read_ids = [v["after"]["id"] for v in reads]
    assert len(read_ids) == len(set(read_ids))
    positions = [(v["source"]["commit_lsn"], v["source"]["txn_index"]) for v in values]
    assert len(positions) == len(set(positions))
    inserted = {v["after"]["id"] for v in streamed if v["op"] == "c"}
    assert inserted and not inserted & set(read_ids)
    # No gap: replaying the events gives the table.
    state = final_state(values)
    expected = table_rows(postgres.dsn, f"SELECT id, v, note FROM {table}")
    assert {k: (s["v"], s["note"]) for k, s in state.items()} == \
        {k: (r["v"], r["note"]) for k, r in expected.items()}


def test_interrupted_snapshot_is_restarted(postgres, producer_run, log_dir) -> None:
    run = producer_run("public.snapkill_*", "--snapshot-workers", "2",
                       "--snapshot-chunk-rows", "20000")
    table = f"snapkill_{run.tag}"
    rows = 200_000
    _execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, v int, note text)",
             f"INSERT INTO {table} SELECT g, 0, 'seed' FROM generate_series(1, {rows}) g",
             f"ANALYZE {table}")
    launch(run, log_dir)
    wait_records(run.bootstrap, f"{run.prefix}.public.{table}", 1000)
    first_log = run.output()
    assert "snapshot done" not in first_log, "the snapshot finished before the kill"
    assert run.stop(signal.SIGKILL) == -signal.SIGKILL
    first_lsn = consistent_point(run)
    wait_no_slots(postgres.dsn, run.slot)  # the temporary slot went with its connection

    # Between the attempts: rows deleted and updated with no slot to record it.
    _execute(postgres.dsn, f"DELETE FROM {table} WHERE id <= 100",
             f"UPDATE {table} SET v = -1 WHERE id BETWEEN 101 AND 200")
    run.start(log_dir)
    second_lsn = consistent_point(run)
    assert second_lsn > first_lsn
    _execute(postgres.dsn, f"UPDATE {table} SET v = 7 WHERE id = 300")
    end = current_lsn(postgres.dsn)
    run.wait_confirmed(end)
    assert slots(postgres.dsn, run.slot) == [(run.slot, False)]
    assert run.stop(signal.SIGTERM) == 0

    values = [e.value for e in read_events(run.bootstrap, run.registry_url,
                                           f"{run.prefix}.public.{table}",
                                           min_count=rows - 100)]
    assert any(v["source"]["commit_lsn"] == first_lsn for v in values)  # the first attempt's
    truncates = [v["source"] for v in values if v["op"] == "t"]
    assert [(t["commit_lsn"], t["txn_index"]) for t in truncates] == [(second_lsn, -1)]
    state = final_state(values)
    expected = table_rows(postgres.dsn, f"SELECT id, v, note FROM {table}")
    assert {k: s["v"] for k, s in state.items()} == {k: r["v"] for k, r in expected.items()}


@pytest.mark.parametrize("workers", ["1", "2", "1-exactly-once", "2-exactly-once"])
def test_sigterm_during_the_snapshot_exits_0_and_keeps_no_slot(postgres, producer_run, log_dir,
                                                               workers: str) -> None:
    exactly_once = workers.endswith("-exactly-once")
    run = producer_run("public.snapterm_*", "--snapshot-workers", workers[0],
                       "--snapshot-chunk-rows", "20000",
                       *(["--exactly-once"] if exactly_once else []))
    table = f"snapterm_{run.tag}"
    _execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, note text)",
             f"INSERT INTO {table} SELECT g, 'x' FROM generate_series(1, 200000) g")
    launch(run, log_dir)
    wait_records(run.bootstrap, f"{run.prefix}.public.{table}", 1000)
    assert run.stop(signal.SIGTERM) == 0
    assert "snapshot stopped before it completed" in run.output()
    wait_no_slots(postgres.dsn, run.slot)
    if exactly_once:  # the stopped attempt was aborted: read_committed sees none of it
        partition = TopicPartition(f"{run.prefix}.public.{table}", 0, 0)
        ends = {}
        for isolation in ("read_committed", "read_uncommitted"):
            consumer = Consumer({"bootstrap.servers": run.bootstrap, "group.id": "t-eo-term",
                                 "isolation.level": isolation})
            try:
                ends[isolation] = consumer.get_watermark_offsets(partition, timeout=10)[1]
                consumer.assign([partition])
                seen = [m for m in consumer.consume(1000, 3.0) if m.error() is None]
            finally:
                consumer.close()
            if isolation == "read_committed":
                assert seen == []
        # the transaction was aborted on the way out, not left open (the stable offset is the end)
        assert ends["read_committed"] == ends["read_uncommitted"] > 1000


def test_initial_only_exits_0_without_a_slot_and_never_skips_the_snapshot(postgres, producer_run,
                                                          log_dir) -> None:
    run = producer_run("public.snaponly_*", "--snapshot", "initial_only")
    table = f"snaponly_{run.tag}"
    _execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, note text)",
             f"INSERT INTO {table} SELECT g, 'x' FROM generate_series(1, 1000) g")
    launch(run, log_dir)
    assert wait_exit(run) == 0, run.output()
    assert slots(postgres.dsn, run.slot) == []
    events = read_events(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                         min_count=1000)
    assert sorted(e.value["after"]["id"] for e in events) == list(range(1, 1001))
    # Again, into the same topics: the new snapshot replaces the old one (truncate first).
    _execute(postgres.dsn, f"DELETE FROM {table} WHERE id > 10")
    launch(run, log_dir)
    assert wait_exit(run) == 0, run.output()
    events = read_events(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                         min_count=1011)
    assert [e.value["op"] for e in events[1000:]] == ["t", *["r"] * 10]
    assert sorted(final_state([e.value for e in events])) == list(range(1, 11))

    never = producer_run("public.snaponly_*", "--snapshot", "never")
    never.start(log_dir)
    _execute(postgres.dsn, f"INSERT INTO {table} VALUES (5000, 'y')")
    end = current_lsn(postgres.dsn)
    never.wait_confirmed(end)
    assert never.stop() == 0
    events = read_events(never.bootstrap, never.registry_url,
                         f"{never.prefix}.public.{table}", min_count=1)
    assert [e.value["op"] for e in events] == ["c"]


def test_unreachable_registry_fails_the_snapshot_in_one_line(postgres, producer_run,
                                                             log_dir) -> None:
    run = producer_run("public.snapnoreg_*", "--schema-registry-attempts", "2")
    run.registry_url = f"http://127.0.0.1:{free_port()}/apis/ccompat/v7"
    table = f"snapnoreg_{run.tag}"
    _execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY)",
             f"INSERT INTO {table} VALUES (1)")
    launch(run, log_dir)
    assert wait_exit(run, 180) == 1
    out = run.output()
    last = out.strip().splitlines()[-1]
    assert last.startswith("pgcdc run:") and "registry" in last.lower() and "Traceback" not in out
    wait_no_slots(postgres.dsn, run.slot)


def test_unreachable_kafka_fails_the_snapshot_in_one_line(pg15, kafka, registry,
                                                          log_dir) -> None:
    run = ProducerRun(pg15.dsn, f"127.0.0.1:{free_port()}", registry.url, "public.snapnok_*",
                      ["--kafka-timeout-s", "3"])
    table = f"snapnok_{run.tag}"
    _execute(pg15.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY)",
             f"INSERT INTO {table} VALUES (1)")
    try:
        launch(run, log_dir)
        assert wait_exit(run, 180) == 1
        out = run.output()
        last = out.strip().splitlines()[-1]
        assert last.startswith("pgcdc run:") and "Traceback" not in out
        assert "kafka" in last.lower() or "topic" in last.lower()
        wait_no_slots(pg15.dsn, run.slot)
    finally:
        _execute(pg15.dsn, f"DROP PUBLICATION IF EXISTS pub_{run.tag}")

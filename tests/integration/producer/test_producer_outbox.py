"""Issue 37, part 5: the outbox event router on a real server, with exactly-once on.

An application writes outbox rows the usual ways -- insert then delete in one transaction, and
insert now, delete later in another -- for several aggregate types, updates one (ignored) and
leaves old rows from before pgcdc started. A read_committed consumer then finds on each routed
topic ``outbox.<tag>.<aggregatetype>`` exactly the inserted events, in commit order, keyed by
``aggregateid``, valued by the jsonb payload's text, with the ``id`` and ``type`` headers; the
deletes, the update and the old rows (not replayed by the initial snapshot) publish nothing,
and the outbox table's own topic is never created. The slot is confirmed past the last
transaction only once Kafka holds its events (the same ticket path as table records). An
incremental snapshot asked for the outbox table (`pgcdc snapshot`) reads nothing of it either.

A second outbox's payload is a composite type: its events are Avro, decoded through the registry
to the composite's values (a NULL attribute, a quoted text with commas, quotes and backslashes,
a numeric, a timestamp, an array, a nested composite), the schema under the routed topic's value
subject, a new version after ``ALTER TYPE ... ADD ATTRIBUTE``; the server's record text parses to
its attributes (`pgtypes.record`). Both of pgoutput's forms of a composite (text output, and
with binary tuples its send output) decode to the same values on 15 and 18 through the source
catalog's reading of the type (`test_composite_payloads_decode_from_both_formats`)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition

from connector.avro import SchemaRegistry, decode
from connector.avro.payload import payload_codec
from connector.pgtypes import TypeCatalog
from connector.pgtypes.record import parse_record_text
from connector.source_catalog import PostgresCatalog
from tests.support.kafka import caught_up
from tests.support.producer import PGCDC, current_lsn

pytestmark = pytest.mark.integration

AGGREGATES = ("Order", "Customer", "Invoice")


Record = tuple[bytes | None, bytes | None, dict[str, bytes | None]]


def _read(bootstrap: str, topics: list[str], count: int, timeout: float = 60.0
          ) -> dict[str, list[Record]]:
    """(key, value, headers) of each topic's records, read_committed, once `count` are read
    and the consumer has caught up (so a surplus record would be seen too)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    out: dict[str, list[Record]] = {t: [] for t in topics}
    deadline = time.monotonic() + timeout
    try:
        partitions = []
        for topic in topics:
            while True:
                meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
                if meta is not None and meta.error is None and meta.partitions:
                    break
                assert time.monotonic() < deadline, f"topic {topic} never appeared"
                time.sleep(0.3)
            partitions += [TopicPartition(topic, p, 0) for p in meta.partitions]
        consumer.assign(partitions)
        read = 0
        while time.monotonic() < deadline:
            good = [m for m in consumer.consume(100, 0.2) if m.error() is None]
            for m in good:
                out[m.topic()].append((m.key(), m.value(), dict(m.headers() or [])))
            read += len(good)
            if not good and read >= count and caught_up(consumer):
                break
    finally:
        consumer.close()
    return out


def _snapshot_done(dsn: str, run: Any) -> None:
    deadline = time.monotonic() + 60
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            row = conn.execute("SELECT state, message FROM pgcdc_signal WHERE slot = %s",
                               (run.slot,)).fetchone()
            if row is not None and row[0] in ("done", "failed"):
                assert row[0] == "done", row
                return
            assert time.monotonic() < deadline, run.output()[-4000:]
            time.sleep(0.2)


NOTE = 'a,"b" \\c (x) '  # record_out quotes it and doubles the quote and the backslash


def test_outbox_events_are_routed_exactly_once(postgres, kafka, registry, producer_run, log_dir,
                                               tmp_path: Path) -> None:
    run = producer_run("-", "--exactly-once", "--exactly-once-batch-ms", "50")
    outbox, composite = f"outbox_{run.tag}", f"obc_{run.tag}"
    run.tables = f"public.{outbox},public.{composite}"
    routed_prefix = f"outbox.{run.tag}."
    config = tmp_path / "pgcdc.yaml"
    config.write_text(yaml.safe_dump({"table_settings": {
        f"public.{outbox}": {"outbox": {"topic_prefix": routed_prefix}},
        f"public.{composite}": {"outbox": {"topic_prefix": routed_prefix}}},
        "status_interval_s": 0.5}))  # confirmed soon after Kafka acknowledged
    run.extra += ["--config", str(config)]
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {outbox} (id uuid PRIMARY KEY, aggregatetype varchar(255)"
                     " NOT NULL, aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL,"
                     " payload jsonb)")
        # Delivered before pgcdc started: the initial snapshot does not replay them.
        conn.execute(f"INSERT INTO {outbox} VALUES (gen_random_uuid(), 'Order', 'old',"
                     " 'OrderCreated', '{}')")
        conn.execute(f"CREATE TYPE line_{run.tag} AS (sku text, qty int)")
        conn.execute(f"CREATE TYPE event_{run.tag} AS (n int, note text, amount numeric(10,2),"
                     f" at timestamp, tags text[], line line_{run.tag}, missing int)")
        conn.execute(f"CREATE TABLE {composite} (id uuid PRIMARY KEY, aggregatetype text NOT"
                     f" NULL, aggregateid text NOT NULL, type text NOT NULL,"
                     f" payload event_{run.tag})")
    run.start(log_dir)

    expected: dict[str, list[tuple[bytes, bytes, dict[str, bytes | None]]]] = {
        a: [] for a in AGGREGATES}
    late_deletes: list[str] = []

    def insert(conn: psycopg.Connection[Any], n: int) -> str:
        aggregate, event_id = AGGREGATES[n % 3], str(uuid.uuid4())
        payload = {"n": n, "lines": [{"sku": f"s{n}", "qty": n}], "note": "ünïcode"}
        conn.execute(f"INSERT INTO {outbox} VALUES (%s, %s, %s, %s, %s)",  # type: ignore
                     (event_id, aggregate, f"agg-{n % 4}", f"{aggregate}Changed",
                      json.dumps(payload)))
        stored = conn.execute(f"SELECT payload::text FROM {outbox} WHERE id = %s",  # type: ignore
                              (event_id,)).fetchone()
        assert stored is not None
        expected[aggregate].append((f"agg-{n % 4}".encode(), stored[0].encode(), {
            "id": event_id.encode(), "type": f"{aggregate}Changed".encode()}))
        return event_id

    with psycopg.connect(postgres.dsn) as conn:
        for n in range(12):
            with conn.transaction():  # the application's way: insert, delete at once
                event_id = insert(conn, n)
                if n % 2 == 0:
                    conn.execute(f"DELETE FROM {outbox} WHERE id = %s",  # type: ignore
                                 (event_id,))
                else:
                    late_deletes.append(event_id)
        with conn.transaction():  # several events in one transaction
            for n in range(12, 15):
                late_deletes.append(insert(conn, n))
        with conn.transaction():  # an update publishes nothing (Debezium: a warning)
            conn.execute(f"UPDATE {outbox} SET type = 'Changed' WHERE id = %s",  # type: ignore
                         (late_deletes[0],))
        with conn.transaction():  # the clean-up, later, in a transaction of its own
            conn.execute(f"DELETE FROM {outbox} WHERE id = ANY(%s::uuid[])",  # type: ignore
                         (late_deletes,))
    shipped = _composite_events(postgres.dsn, composite, run.tag)
    # An incremental snapshot asked for the outbox table reads nothing of it (the old row stays).
    out = subprocess.run([PGCDC, "snapshot", "--dsn", postgres.dsn, "--slot", run.slot,
                          "--publication", f"pub_{run.tag}", "--tables", f"public.{outbox}"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    _snapshot_done(postgres.dsn, run)
    run.wait_confirmed(current_lsn(postgres.dsn), timeout=60)

    got = _read(kafka.bootstrap, [routed_prefix + a for a in (*AGGREGATES, "Shipment")],
                sum(map(len, expected.values())) + len(shipped))
    for aggregate in AGGREGATES:  # each topic in commit order; nothing else
        assert got[routed_prefix + aggregate] == expected[aggregate], aggregate
    shipments = got[routed_prefix + "Shipment"]
    schemas = SchemaRegistry(registry.url)
    assert [(key, decode(value or b"", schemas.schema).value) for key, value, _ in shipments] \
        == shipped  # the deletes published nothing
    subject = f"{routed_prefix}Shipment-value"
    assert schemas.client.get_versions(subject) == [1, 2]  # ALTER TYPE: a new version
    latest = json.loads(schemas.client.get_latest_version(subject).schema.schema_str)
    assert (latest["name"], [f["name"] for f in latest["fields"]]) == (
        f"event_{run.tag}", ["n", "note", "amount", "at", "tags", "line", "missing", "extra"])
    schemas.close()
    admin = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "x"})
    topics = set(admin.list_topics(timeout=10).topics)
    admin.close()
    assert f"{run.prefix}.public.{outbox}" not in topics  # its own topic: never written
    assert f"{run.prefix}.public.{composite}" not in topics
    assert {t for t in topics if t.startswith(routed_prefix)} == {
        routed_prefix + a for a in (*AGGREGATES, "Shipment")}
    assert "were updated and nothing was published" in run.output()
    assert "is an outbox table, whose rows are events already routed" in run.output()
    assert run.stop() == 0, run.output()[-3000:]


def _composite_events(dsn: str, table: str, tag: str) -> list[tuple[bytes, dict[str, Any]]]:
    """The application's insert-then-delete of composite payloads, before and after ALTER TYPE
    ... ADD ATTRIBUTE; returns the (key, decoded value) each should publish."""
    first = {"n": 1, "note": NOTE, "amount": Decimal("1234.50"),
             "at": dt.datetime(2024, 2, 29, 12, 34, 56, 789000), "tags": ["x,y", None, ""],
             "line": {"sku": 's"1', "qty": 2}, "missing": None}
    second = {**first, "n": 2, "note": "", "line": None, "extra": 9}

    def emit(conn: psycopg.Connection[Any], key: str, event: dict[str, Any],
             extra: str) -> tuple[Any, ...]:
        with conn.transaction():  # insert then delete, as an application does
            row = conn.execute(
                f"INSERT INTO {table} VALUES (gen_random_uuid(), 'Shipment', %s, 'Shipped',"  # type: ignore
                f" ROW(%s::int, %s::text, %s::numeric, %s::timestamp, %s::text[],"
                f" CASE WHEN %s::text IS NULL THEN NULL"
                f" ELSE ROW(%s::text, %s::int)::line_{tag} END,"
                f" NULL{extra})::event_{tag}) RETURNING id, payload::text, (payload).tags::text",
                (key, event["n"], event["note"], event["amount"], event["at"], event["tags"],
                 *((None, None, None) if event["line"] is None else
                   ("x", event["line"]["sku"], event["line"]["qty"])))).fetchone()
            assert row is not None
            conn.execute(f"DELETE FROM {table} WHERE id = %s", (row[0],))  # type: ignore
        return tuple(row)

    with psycopg.connect(dsn) as conn:
        _, text, tags = emit(conn, "ship-1", first, "")
        # the server's record text, parsed: each attribute's own text
        assert parse_record_text(text) == ["1", NOTE, "1234.50", "2024-02-29 12:34:56.789",
                                           tags, '("s""1",2)', None]
        with conn.transaction():
            conn.execute(f"ALTER TYPE event_{tag} ADD ATTRIBUTE extra int")  # type: ignore
        emit(conn, "ship-2", second, ", 9")
    return [(b"ship-1", first), (b"ship-2", second)]


@pytest.mark.all_pg_versions  # the catalog queries and both record formats on 15 and 18
def test_composite_payloads_decode_from_both_formats(postgres) -> None:
    """What pgoutput sends of a composite (its text output, or with binary tuples its send
    output) decodes through the source catalog's reading of the type -- nested composite,
    domain over it, array, a dropped attribute -- to the same values; a value written before
    ADD ATTRIBUTE decodes with the type's first attributes."""
    tag = uuid.uuid4().hex[:8]
    with psycopg.connect(postgres.dsn) as conn:
        conn.execute(f"CREATE TYPE l_{tag} AS (sku text, qty int);"
                     f"CREATE DOMAIN dl_{tag} AS l_{tag};"
                     f"CREATE TYPE e_{tag} AS (n int, gone int, note text, amount numeric(10,2),"
                     f" at timestamptz, tags int[], line dl_{tag});"
                     f"ALTER TYPE e_{tag} DROP ATTRIBUTE gone")
        oid = int(conn.execute(f"SELECT 'e_{tag}'::regtype::oid::int8").fetchone()[0])  # type: ignore[index]
        conn.execute(f"CREATE TEMP TABLE v (v e_{tag})")
        at = dt.datetime(2024, 2, 29, 12, 34, 56, 789000, tzinfo=dt.UTC)
        conn.execute(f"INSERT INTO v VALUES (ROW(1, %s::text, 1234.5, %s::timestamptz,"  # type: ignore[arg-type]
                     f" '{{1,NULL,3}}', ROW(%s::text, 2)::l_{tag})::e_{tag})", (NOTE, at, 's"1'))
        text = conn.execute("SELECT v::text FROM v").fetchone()[0]  # type: ignore[index]
        binary = conn.execute("SELECT record_send(v) FROM v").fetchone()[0]  # type: ignore[index]
        types = TypeCatalog()
        PostgresCatalog(conn, types).prepare_composite(oid)
        codec = payload_codec(types, oid, where="payload")
        expected = {"n": 1, "note": NOTE, "amount": Decimal("1234.50"),
                    "at": (at - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(
                        microseconds=1), "tags": [1, None, 3],
                    "line": {"sku": 's"1', "qty": 2}}
        assert codec.text(text) == expected
        assert codec.binary(bytes(binary)) == expected
        assert types.composite(oid).intact == 1  # type: ignore[union-attr]  # n, then gone
        conn.rollback()

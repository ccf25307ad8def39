"""ALTER TABLE ADD / DROP COLUMN mid-stream: a new value schema version per table version,
accepted under BACKWARD compatibility, every record decodable with its writer schema and with
the newest one."""

from __future__ import annotations

import io
import time

import psycopg
import pytest
from confluent_kafka import Consumer, TopicPartition
from fastavro import parse_schema, schemaless_reader

from connector.avro import SchemaRegistry, unframe
from tests.support.cdc_checks import (
    execute,
    in_order,
    read_records,
    set_compatibility,
    stream_run,
    subject_versions,
)
from tests.support.producer import current_lsn

pytestmark = pytest.mark.integration


def test_add_and_drop_column_mid_stream(postgres, producer_run, log_dir) -> None:
    # The ADD COLUMN ... DEFAULT would re-sync the table (`r` events after these; see
    # tests/integration/snapshot/test_snapshot_resync_ddl.py): this test is about the stream.
    run = stream_run(producer_run, "--no-resync-on-ddl")
    table = f"ddl_{run.tag}"
    topic = f"{run.prefix}.public.{table}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, a text)")
    run.start(log_dir)
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (1, 'one')")
    read_records(run.bootstrap, run.registry_url, topic, min_count=1, idle_s=0)
    for subject in (f"{topic}-key", f"{topic}-value"):  # what Confluent's registry defaults to
        set_compatibility(run.registry_url, subject, "BACKWARD")

    execute(postgres.dsn, f"ALTER TABLE {table} ADD COLUMN b int",
            f"INSERT INTO {table} VALUES (2, 'two', 2)",
            f"UPDATE {table} SET a = 'one2' WHERE id = 1",
            f"ALTER TABLE {table} DROP COLUMN a",
            f"INSERT INTO {table} VALUES (3, 3)")
    with psycopg.connect(postgres.dsn, autocommit=True) as conn, conn.transaction():
        conn.execute(f"INSERT INTO {table} VALUES (4, 4)")  # type: ignore[arg-type]
        conn.execute(f"ALTER TABLE {table} ADD COLUMN c text DEFAULT 'x'")  # type: ignore[arg-type]
        conn.execute(f"INSERT INTO {table} (id, b, c) VALUES (5, 5, 'five')")  # type: ignore[arg-type]
    end = current_lsn(postgres.dsn)

    records = in_order(read_records(run.bootstrap, run.registry_url, topic, min_count=6))
    got = [(r.value["op"], r.value["after"]) for r in records]
    assert got == [("c", {"id": 1, "a": "one"}), ("c", {"id": 2, "a": "two", "b": 2}),
                   ("u", {"id": 1, "a": "one2", "b": None}), ("c", {"id": 3, "b": 3}),
                   ("c", {"id": 4, "b": 4}), ("c", {"id": 5, "b": 5, "c": "five"})]
    ids = [r.value_schema_id for r in records]
    assert ids[1] == ids[2] and ids[3] == ids[4]
    assert len(set(ids)) == 4  # (id, a), (id, a, b), (id, b), (id, b, c)
    assert len(subject_versions(run.registry_url, f"{topic}-value")) == 4
    assert len(subject_versions(run.registry_url, f"{topic}-key")) == 1

    # A consumer reading every version with the newest schema (Avro schema resolution).
    newest = _read_with(run.bootstrap, run.registry_url, topic, max(ids), 6)
    assert [v["after"] for v in newest] == [
        {"id": 1, "b": None, "c": None}, {"id": 2, "b": 2, "c": None},
        {"id": 1, "b": None, "c": None}, {"id": 3, "b": 3, "c": None},
        {"id": 4, "b": 4, "c": None}, {"id": 5, "b": 5, "c": "five"}]
    run.wait_confirmed(end)
    assert run.stop() == 0


def _read_with(bootstrap: str, registry_url: str, topic: str, reader_id: int,
               count: int) -> list[dict]:
    """The first `count` values of `topic` (one partition) decoded with their writer schema
    resolved to the reader schema `reader_id`."""
    registry = SchemaRegistry(registry_url)
    reader = parse_schema(registry.schema(reader_id))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[dict] = []
        deadline = time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                schema_id, body = unframe(msg.value())
                writer = parse_schema(registry.schema(schema_id))
                values.append(schemaless_reader(io.BytesIO(body), writer, reader))
        return values
    finally:
        consumer.close()

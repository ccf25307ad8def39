"""Each service of the real stack does its job: the tests everything else stands on."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

pytestmark = pytest.mark.integration


def test_postgres_slot_streams_a_change(postgres) -> None:
    slot = f"stack_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS stack_probe (id int PRIMARY KEY, v text)")
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (slot,))
        try:
            conn.execute("INSERT INTO stack_probe VALUES (1, 'hello')")
            rows = conn.execute(
                "SELECT data FROM pg_logical_slot_get_changes(%s, NULL, NULL)", (slot,)
            ).fetchall()
        finally:
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    changes = [r[0] for r in rows]
    assert any("INSERT" in c and "'hello'" in c for c in changes), changes


def test_kafka_produces_and_consumes(kafka) -> None:
    topic = f"stack-probe-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "enable.idempotence": True})
    producer.produce(topic, key=b"k", value=b"v1")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": topic,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        msg = None
        for _ in range(60):
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                break
        assert msg is not None and msg.error() is None
        assert (msg.key(), msg.value()) == (b"k", b"v1")
    finally:
        consumer.close()


def test_registry_round_trips_an_avro_schema(registry) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    subject = f"probe-{uuid.uuid4().hex[:8]}-value"
    schema = {"type": "record", "name": "Probe", "namespace": "pgcdc.test",
              "fields": [{"name": "id", "type": "long"}]}
    schema_id = client.register_schema(subject, Schema(json.dumps(schema), "AVRO"))
    fetched = client.get_schema(schema_id)
    assert json.loads(fetched.schema_str) == schema
    assert subject in client.get_subjects()
    # Registering the same schema again gives the same id (the producer relies on it).
    assert client.register_schema(subject, Schema(json.dumps(schema), "AVRO")) == schema_id

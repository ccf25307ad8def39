"""Schemas through a real Confluent-compatible registry (Apicurio's ccompat API) and events
through real Kafka: register, fetch by id, produce, consume, decode; evolution; failures."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from decimal import Decimal
from typing import Any

import pytest
from confluent_kafka import Producer

from connector.avro import (
    AvroEncoder,
    CodecFactory,
    SchemaRegistry,
    SourceInfo,
    TransactionBlock,
    decode,
    derive_table_schemas,
    key_subject,
    registry_ids,
    unframe,
    value_subject,
)
from connector.errors import SchemaError
from connector.pgoutput.messages import UNCHANGED_TOAST, Message, Relation, RelationColumn
from connector.pgtypes import TypeCatalog, oids
from tests.support.kafka import consume, unique

pytestmark = pytest.mark.integration

UTC = dt.UTC


def numeric(p: int, s: int) -> int:
    return ((p << 16) | s) + 4


def orders(table: str, *extra: RelationColumn) -> Relation:
    return Relation(None, 16400, "public", table, "d", (
        RelationColumn(1, "id", oids.INT8, -1),
        RelationColumn(0, "price", oids.NUMERIC, numeric(10, 2)),
        RelationColumn(0, "placed at", oids.TIMESTAMPTZ, -1),
        RelationColumn(0, "note", oids.TEXT, -1),
        RelationColumn(0, "tags", oids.ARRAY_OF[oids.TEXT], -1),
        RelationColumn(0, "ref", oids.UUID, -1),
        *extra,
    ))


def source(index: int) -> SourceInfo:
    return SourceInfo(commit_lsn=0x2_0000_0000 + 100, txn_index=index, ts_ms=1_700_000_000_000,
                      xid=900, lsn=0x2_0000_0000 + index)


def test_register_fetch_by_id_and_cache(registry: Any) -> None:
    prefix = unique("reg")
    schemas = derive_table_schemas(orders("orders"), TypeCatalog(), prefix=prefix, db="shop")
    client = SchemaRegistry(registry.url)
    key_id = client.register_key(schemas.topic, schemas.key_json)  # type: ignore[arg-type]
    value_id = client.register_value(schemas.topic, schemas.value_json)
    calls = client.calls
    for _ in range(100):  # the registry is asked once per schema version, not per event
        assert client.register_value(schemas.topic, schemas.value_json) == value_id
        assert client.register_key(schemas.topic, schemas.key_json) == key_id  # type: ignore[arg-type]
    assert client.calls == calls

    fresh = SchemaRegistry(registry.url)  # another process: fetch by id
    assert fresh.schema(value_id) == schemas.value_schema
    assert fresh.schema(key_id) == schemas.key_schema
    subjects = fresh.client.get_subjects()
    assert key_subject(schemas.topic) in subjects and value_subject(schemas.topic) in subjects
    # a restart re-registers the byte-identical text and gets the same ids back
    assert fresh.register_value(schemas.topic, schemas.value_json) == value_id
    assert fresh.client.get_versions(value_subject(schemas.topic)) == [1]


def test_events_through_kafka_decode_with_fetched_schemas(kafka: Any, registry: Any) -> None:
    codecs = CodecFactory(TypeCatalog(), None, registry_ids(SchemaRegistry(registry.url)),
                          prefix=unique("rt"), db="shop")
    codec = codecs.codec(orders("orders"))
    assert codecs.codec(orders("orders")) is codec  # once per table version
    rows = [
        ("1", "10.50", "2024-05-01 12:00:00+00", "first", "{a,NULL}", str(uuid.UUID(int=7))),
        ("2", None, "infinity", UNCHANGED_TOAST, "{}", None),
        ("3", "1.00", None, "t", "{x}", None),
    ]
    produced = [codec.change_from_tuples("c", None, rows[0], source(0)),
                codec.change_from_tuples("u", None, rows[1], source(1),
                                         transaction=TransactionBlock("900:1", 2, 2)),
                codec.change_from_tuples("c", None, rows[2], source(2))]
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for key, value in produced:
        producer.produce(codec.topic, value, key)
    assert producer.flush(30) == 0

    records = consume(kafka.bootstrap, codec.topic, 3)
    reader = SchemaRegistry(registry.url)  # the consumer side knows nothing but ids
    events = [decode(r.value(), reader.schema).value for r in records]
    keys = [decode(r.key(), reader.schema).value for r in records]
    assert keys == [{"id": 1}, {"id": 2}, {"id": 3}]
    assert unframe(records[0].value())[0] == codec.value_id
    assert events[0]["after"] == {"id": 1, "price": Decimal("10.50"),
                                  "placed_x0020at": dt.datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
                                  "note": "first", "tags": ["a", None], "ref": uuid.UUID(int=7)}
    clamped = events[1]  # infinity: the last instant every reader holds (schemas/README.md)
    assert clamped["after"]["placed_x0020at"] == dt.datetime(9999, 12, 30, 23, 59, 59, 999999,
                                                             tzinfo=UTC)
    assert clamped["unchanged_toast"] == ["note"]
    assert clamped["transaction"] == {"id": "900:1", "total_order": 2,
                                      "data_collection_order": 2}
    assert events[2]["after"]["tags"] == ["x"]
    assert [e["source"]["txn_index"] for e in events] == [0, 1, 2]
    assert {e["source"]["commit_lsn"] for e in events} == {0x2_0000_0000 + 100}


def test_schema_evolution_added_and_dropped_column(kafka: Any, registry: Any) -> None:
    prefix = unique("evo")
    client = SchemaRegistry(registry.url)
    catalog = TypeCatalog()
    v1 = derive_table_schemas(orders("items"), catalog, prefix=prefix, db="shop")
    subject = value_subject(v1.topic)
    v1_id = client.register(subject, v1.value_json)
    client.set_compatibility(subject, "BACKWARD")  # what Confluent enforces by default

    added = RelationColumn(0, "discount", oids.NUMERIC, numeric(5, 2))
    v2 = derive_table_schemas(orders("items", added), catalog, prefix=prefix, db="shop")
    assert client.is_compatible(subject, v2.value_json)
    v2_id = client.register(subject, v2.value_json)
    assert v2_id != v1_id
    dropped = Relation(None, 16400, "public", "items", "d",
                       tuple(c for c in orders("items", added).columns if c.name != "note"))
    v3 = derive_table_schemas(dropped, catalog, prefix=prefix, db="shop")
    assert client.is_compatible(subject, v3.value_json)
    v3_id = client.register(subject, v3.value_json)
    assert client.client.get_versions(subject) == [1, 2, 3]
    assert v1.key_json == v2.key_json == v3.key_json  # the key (and partitioning) is stable

    codecs = CodecFactory(catalog, None, registry_ids(client), prefix=prefix, db="shop")
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    row = ("1", "1.00", None, "n", None, None)
    for relation, values in ((orders("items"), row),
                             (orders("items", added), (*row, "0.25")),
                             (dropped, ("1", "1.00", None, None, None, "0.25"))):
        codec = codecs.codec(relation)
        key, value = codec.change_from_tuples("c", None, values, source(0))
        producer.produce(codec.topic, value, key)
    assert producer.flush(30) == 0
    records = consume(kafka.bootstrap, v1.topic, 3)
    reader = SchemaRegistry(registry.url)
    ids = [unframe(r.value())[0] for r in records]
    assert ids == [v1_id, v2_id, v3_id]
    afters = [decode(r.value(), reader.schema).value["after"] for r in records]
    assert "discount" not in afters[0] and afters[1]["discount"] == Decimal("0.25")
    assert "note" not in afters[2]


def test_the_unparsed_field_keeps_registered_envelopes_compatible(kafka: Any,
                                                                  registry: Any) -> None:
    """Envelopes registered before `unparsed` existed: the new one registers under the same
    subject with BACKWARD, FORWARD and FULL compatibility (a field with a default), and each
    side's events read with the other's schema. Control: without the default the registry
    refuses it, so the check is a real one."""
    import io
    import json

    from fastavro import parse_schema, schemaless_reader

    prefix = unique("unparsed")
    client = SchemaRegistry(registry.url)
    catalog = TypeCatalog()
    new = derive_table_schemas(orders("t"), catalog, prefix=prefix, db="d")
    assert [f["name"] for f in new.value_schema["fields"]][-2:] == ["unchanged_toast",
                                                                    "unparsed"]
    old_schema = json.loads(new.value_json)
    old_schema["fields"] = old_schema["fields"][:-1]  # the Envelope as registered before
    subject = value_subject(new.topic)
    old_id = client.register(subject, json.dumps(old_schema))
    no_default = json.loads(new.value_json)
    del no_default["fields"][-1]["default"]
    for level in ("BACKWARD", "FORWARD", "FULL"):
        client.set_compatibility(subject, level)
        assert client.is_compatible(subject, new.value_json), level
    client.set_compatibility(subject, "BACKWARD")
    assert not client.is_compatible(subject, json.dumps(no_default))
    client.set_compatibility(subject, "FULL")
    new_id = client.register(subject, new.value_json)
    assert new_id != old_id and client.client.get_versions(subject) == [1, 2]

    codecs = CodecFactory(catalog, None, registry_ids(client), prefix=prefix, db="d")
    codec = codecs.codec(orders("t"))
    assert codec.value_id == new_id
    _, value = codec.change_from_tuples("c", None, ("1", "12345678901.5", "not a time", "n",
                                                    None, None), source(0))
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    producer.produce(codec.topic, value)
    assert producer.flush(30) == 0
    [record] = consume(kafka.bootstrap, codec.topic, 1)
    event = decode(record.value(), SchemaRegistry(registry.url).schema).value
    assert event["after"]["price"] is None and event["after"]["placed_x0020at"] is None
    assert event["unparsed"] == {"price": "12345678901.5", "placed_x0020at": "not a time"}
    body = bytes(unframe(record.value())[1])
    as_old = schemaless_reader(io.BytesIO(body), parse_schema(new.value_schema),
                               parse_schema(old_schema))
    assert "unparsed" not in as_old and as_old["after"]["note"] == "n"  # FORWARD: old readers
    old_codec = codecs.codec(orders("t"))
    old_body = bytes(unframe(old_codec.change_from_tuples(
        "c", None, ("2", "1.00", None, None, None, None), source(1))[1])[1])[:-1]  # no field
    as_new = schemaless_reader(io.BytesIO(old_body), parse_schema(old_schema),
                               parse_schema(new.value_schema))
    assert as_new["unparsed"] is None and as_new["after"]["id"] == 2  # BACKWARD: new readers


def test_incompatible_schema_is_refused_with_one_clear_line(registry: Any) -> None:
    prefix = unique("bad")
    client = SchemaRegistry(registry.url)
    catalog = TypeCatalog()
    v1 = derive_table_schemas(orders("t"), catalog, prefix=prefix, db="d")
    subject = value_subject(v1.topic)
    client.register(subject, v1.value_json)
    client.set_compatibility(subject, "BACKWARD")
    changed = Relation(None, 1, "public", "t", "d", tuple(
        c._replace(type_oid=oids.BOOL) if c.name == "note" else c for c in orders("t").columns))
    v2 = derive_table_schemas(changed, catalog, prefix=prefix, db="d")
    assert not client.is_compatible(subject, v2.value_json)
    with pytest.raises(SchemaError) as raised:
        client.register(subject, v2.value_json)
    message = str(raised.value)
    assert "\n" not in message
    assert subject in message and "HTTP 409" in message
    assert "io.apicurio" not in message  # the quirk function removed the Java class name


def test_compatibility_of_a_new_subject(registry: Any) -> None:
    schemas = derive_table_schemas(orders("t"), TypeCatalog(), prefix=unique("new"), db="d")
    assert SchemaRegistry(registry.url).is_compatible(value_subject(schemas.topic),
                                                      schemas.value_json)


def test_unreachable_registry_is_one_line_after_bounded_retries() -> None:
    client = SchemaRegistry("http://user:pw@127.0.0.1:9/apis/ccompat/v7", attempts=3,
                            backoff_s=0.05, timeout_s=2)
    started = time.monotonic()
    with pytest.raises(SchemaError) as raised:
        client.register("x-value", '{"type":"string"}')
    message = str(raised.value)
    assert "\n" not in message
    assert "unreachable after 3 attempts" in message and "127.0.0.1:9" in message
    assert "pw" not in message
    assert client.calls == 3
    assert time.monotonic() - started < 30


def test_control_topics(kafka: Any, registry: Any) -> None:
    prefix = unique("ctl")
    encoder = AvroEncoder(SchemaRegistry(registry.url), prefix=prefix, db="shop")
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    message = Message(None, 1, 0x300, "audit", b"\x00payload")
    records = [
        encoder.message(message, SourceInfo(commit_lsn=0x300, txn_index=0, ts_ms=5)),
        encoder.transaction_begin(901, 0x400, 6),
        encoder.transaction_end(901, 0x400, 6, {"public.orders": 2, "public.items": 1},
                                end_lsn=0x410),
        encoder.heartbeat(0x410, restart_lsn=0x3F0, ts_ms=7),
    ]
    for record in records:
        producer.produce(record.topic, record.value, record.key)
    assert producer.flush(30) == 0
    reader = SchemaRegistry(registry.url)

    (msg,) = consume(kafka.bootstrap, f"{prefix}.message", 1)
    assert msg.key() == b"audit"
    value = decode(msg.value(), reader.schema).value
    assert (value["op"], value["prefix"], value["content"], value["transactional"],
            value["lsn"]) == ("m", "audit", b"\x00payload", True, 0x300)
    assert (value["source"]["schema"], value["source"]["commit_lsn"]) == ("", 0x300)

    begin, end = consume(kafka.bootstrap, f"{prefix}.transaction", 2)
    assert begin.key() == end.key() == f"901:{0x400}".encode()
    begin_value = decode(begin.value(), reader.schema).value
    end_value = decode(end.value(), reader.schema).value
    assert (begin_value["status"], begin_value["event_count"]) == ("BEGIN", None)
    assert (end_value["status"], end_value["event_count"], end_value["end_lsn"]) == (
        "END", 3, 0x410)
    assert end_value["data_collections"] == [
        {"data_collection": "public.orders", "event_count": 2},
        {"data_collection": "public.items", "event_count": 1}]

    (beat,) = consume(kafka.bootstrap, f"{prefix}.heartbeat", 1)
    assert beat.key() is None
    assert decode(beat.value(), reader.schema).value == {"name": prefix, "db": "shop",
                                                         "ts_ms": 7, "lsn": 0x410,
                                                         "restart_lsn": 0x3F0}

"""The outbox event router (connector/outbox.py): the routing decision from a decoded row
(topic, key, value, headers), the settings and their refusals, and the publisher's hook
(inserts routed under the transaction's ticket; updates, deletes, truncates publish nothing;
the outbox table's own topic never written). Fakes of the publisher's seams from
test_publisher.py; no server."""

from __future__ import annotations

import json
import logging
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.assembler import Transaction
from connector.assembler.transaction import Change, ChangeMessage, Changes
from connector.avro import AvroEncoder, CodecFactory, decode, registry_ids, value_subject
from connector.config import Config
from connector.errors import ConfigError
from connector.outbox import OutboxRoutes, OutboxSetting, RoutedRecord, parse_outbox_settings
from connector.pgoutput.messages import (
    BinaryValue,
    Delete,
    Insert,
    Relation,
    RelationColumn,
    Truncate,
    Update,
)
from connector.pgtypes import TypeCatalog, oids
from connector.publisher import Publisher
from connector.replication.published import parse_table_settings, sets_publication
from connector.sink.acks import AckTracker
from connector.sink.producer import KafkaSink
from tests.unit.test_publisher import (
    COMMIT_LSN,
    END_LSN,
    ITEMS,
    XID,
    MemoryRegistry,
    RecordingSink,
    RecordingTicket,
    RecordingTracker,
)

OUTBOX = Relation(None, 16500, "public", "outbox", "d", (
    RelationColumn(1, "id", oids.UUID, -1),
    RelationColumn(0, "aggregatetype", oids.VARCHAR, 259),
    RelationColumn(0, "aggregateid", oids.VARCHAR, 259),
    RelationColumn(0, "type", oids.VARCHAR, 259),
    RelationColumn(0, "payload", oids.JSONB, -1)))
EVENT_ID = "4d47e190-0402-4048-bc2c-89dd54343cdc"
PAYLOAD = '{"id": 1, "customerId": 123}'


def routes(table_settings: dict[str, object], prefix: str = "app") -> OutboxRoutes:
    return OutboxRoutes(parse_table_settings(table_settings),
                        parse_outbox_settings(table_settings, topic_prefix=prefix),
                        reserved_prefix=prefix)


def router(relation: Relation = OUTBOX, outbox: object = True):  # type: ignore[no-untyped-def]
    found = routes({"public.*": {"outbox": outbox}}).router(
        relation, TypeCatalog().row_loaders(relation.columns))
    assert found is not None
    return found


# ---------------------------------------------------------------- the routing decision

def test_an_insert_routes_by_debeziums_defaults() -> None:
    record = router().route((EVENT_ID, "Order", "1", "OrderCreated", PAYLOAD))
    assert record == RoutedRecord("outbox.event.Order", b"1", PAYLOAD.encode(),
                                  [("id", EVENT_ID.encode()), ("type", b"OrderCreated")])


def test_binary_tuples_give_the_same_record() -> None:
    raw = uuid.UUID(EVENT_ID).bytes
    record = router().route((BinaryValue(raw), BinaryValue(b"Order"), BinaryValue(b"1"),
                             BinaryValue(b"OrderCreated"), BinaryValue(b"\x01" + PAYLOAD.encode())))
    assert record == router().route((EVENT_ID, "Order", "1", "OrderCreated", PAYLOAD))


@given(st.binary(max_size=300))
def test_a_bytea_payload_is_its_bytes(payload: bytes) -> None:
    relation = OUTBOX._replace(columns=(*OUTBOX.columns[:4],
                                        RelationColumn(0, "payload", oids.BYTEA, -1)))
    text = router(relation).route((EVENT_ID, "Order", "1", "t", "\\x" + payload.hex()))
    binary = router(relation).route((EVENT_ID, "Order", "1", "t", BinaryValue(payload)))
    assert text.value == binary.value == payload


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               max_size=200))
def test_a_text_payload_is_its_utf8(payload: str) -> None:
    relation = OUTBOX._replace(columns=(*OUTBOX.columns[:4],
                                        RelationColumn(0, "payload", oids.TEXT, -1)))
    assert router(relation).route((EVENT_ID, "Order", "1", "t", payload)).value == \
        payload.encode()


def test_null_key_payload_and_type_are_null_not_text() -> None:
    record = router().route((EVENT_ID, "Order", None, None, None))
    assert (record.key, record.value) == (None, None)
    assert record.headers == [("id", EVENT_ID.encode()), ("type", None)]


def test_columns_prefix_and_headers_are_configurable() -> None:
    relation = Relation(None, 16501, "public", "events", "d", (
        RelationColumn(1, "event_id", oids.INT8, -1),
        RelationColumn(0, "stream", oids.TEXT, -1),
        RelationColumn(0, "body", oids.JSON, -1)))
    got = router(relation, {"topic_prefix": "", "route_by": "stream", "key": None,
                            "id": "event_id", "type": None, "payload": "body"})
    assert got.route(("42", "billing.invoices", '{"a" : 1}')) == RoutedRecord(
        "billing.invoices", None, b'{"a" : 1}', [("id", b"42")])


@pytest.mark.parametrize("aggregate, why", [
    (None, "no aggregatetype"), ("", "an empty aggregatetype"),
    ("Order Line", "which Kafka refuses"), ("x" * 250, "which Kafka refuses")])
def test_an_unroutable_event_stops_with_its_id(aggregate: str | None, why: str) -> None:
    with pytest.raises(ConfigError, match=why) as caught:
        router().route((EVENT_ID, aggregate, "1", "t", PAYLOAD))
    assert EVENT_ID in str(caught.value)


def test_a_routed_topic_inside_pgcdcs_own_topics_is_refused() -> None:
    with pytest.raises(ConfigError, match="pgcdc's own app"):
        router(outbox={"topic_prefix": ""}).route((EVENT_ID, "app.offsets", "1", "t", "{}"))


def test_a_missing_column_is_named() -> None:
    relation = OUTBOX._replace(columns=OUTBOX.columns[:3])
    with pytest.raises(ConfigError, match=r"no column for type \(type\), payload \(payload\)"):
        router(relation)


# ---------------------------------------------------------------- settings

def test_outbox_true_is_debeziums_defaults_and_first_match_wins() -> None:
    found = routes({"public.keep": {"columns": ["id"]}, "public.*": {"outbox": True}})
    assert found.setting_for("public", "outbox") == OutboxSetting("public.*")
    assert found.setting_for("public", "keep") is None  # its first match has no outbox
    assert found.setting_for("other", "outbox") is None
    assert OutboxSetting("p") == OutboxSetting(
        "p", topic_prefix="outbox.event.", route_by="aggregatetype", key="aggregateid",
        id="id", type="type", payload="payload", on_update="warn")


@pytest.mark.parametrize("outbox, message", [
    ("yes", "expected true or a mapping"),
    ({"topic": "x"}, "unknown key"),
    ({"payload": ""}, "payload must be a column name"),
    ({"route_by": None}, "route_by must be a column name"),
    ({"on_update": "ignore"}, "on_update must be one of warn, error, fatal"),
    ({"topic_prefix": "a b"}, "is not the start of a Kafka topic name"),
    ({"topic_prefix": "app.events."}, "inside pgcdc's own topics"),
])
def test_malformed_settings_are_one_line(outbox: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_outbox_settings({"public.outbox": {"outbox": outbox}}, topic_prefix="app")


def test_an_outbox_alone_sets_nothing_in_the_publication() -> None:
    settings = {"public.outbox": {"outbox": True}}
    assert not sets_publication(parse_table_settings(settings))
    cfg = Config(dsn="dbname=x", bootstrap_servers="k:9092", schema_registry_url="http://r",
                 table_settings=settings, create_publication=False).validate()
    assert cfg.outbox_routes().is_outbox("public", "outbox")
    with pytest.raises(ConfigError, match="columns and where are set in the publication"):
        Config(dsn="dbname=x", bootstrap_servers="k:9092", schema_registry_url="http://r",
               table_settings={**settings, "public.t": {"where": "id > 1"}},
               create_publication=False).validate()


# ---------------------------------------------------------------- the publisher's hook

class HeaderSink(RecordingSink):
    def __init__(self) -> None:
        super().__init__()
        self.headers: list[object] = []

    def produce(self, topic: str, key: bytes | None, value: bytes | None,
                ticket: RecordingTicket, *, headers: object = None) -> None:
        super().produce(topic, key, value, ticket)
        self.headers.append(headers)


def publisher(outbox: object = True) -> tuple[Publisher, HeaderSink, RecordingTracker,
                                              MemoryRegistry]:
    registry, sink, tracker = MemoryRegistry(), HeaderSink(), RecordingTracker()
    codecs = CodecFactory(TypeCatalog(), None, registry_ids(registry), prefix="app", db="shop")
    return (Publisher(codecs, AvroEncoder(registry, prefix="app", db="shop"), sink, tracker,
                      outboxes=routes({"public.outbox": {"outbox": outbox}})),
            sink, tracker, registry)


def transaction(changes: list[tuple[Relation, ChangeMessage]]) -> Transaction:
    return Transaction(XID, COMMIT_LSN, END_LSN, 0, Changes([
        Change(relation, msg, COMMIT_LSN - 0x100 + i, i, XID, COMMIT_LSN, 0)
        for i, (relation, msg) in enumerate(changes)]), COMMIT_LSN - 0x100)


def row(event: int, aggregate: str) -> tuple[str, str, str, str, str]:
    return (str(uuid.UUID(int=event)), aggregate, str(event % 2), "Created", f'{{"n": {event}}}')


def test_inserts_are_routed_in_order_and_the_rest_publishes_nothing(
        caplog: pytest.LogCaptureFixture) -> None:
    pub, sink, tracker, registry = publisher()
    oid = OUTBOX.relation_id
    with caplog.at_level(logging.WARNING, "connector.outbox"):
        pub.publish(transaction([
            (OUTBOX, Insert(None, oid, row(1, "Order"))),
            (OUTBOX, Insert(None, oid, row(2, "Customer"))),
            (ITEMS, Insert(None, ITEMS.relation_id, ("7", "seven"))),
            (OUTBOX, Insert(None, oid, row(3, "Order"))),
            (OUTBOX, Update(None, oid, None, None, row(3, "Order"))),
            (OUTBOX, Update(None, oid, None, None, row(1, "Order"))),
            (OUTBOX, Delete(None, oid, "K", row(1, "Order"))),
            (OUTBOX, Truncate(None, 0, (oid,))),
        ]))
    [ticket] = tracker.tickets
    assert ticket.sealed and {r[4] for r in sink.records} == {ticket}
    assert [(r[0], r[1], r[2], r[3]) for r in sink.records if r[1] != "app.public.items"] == [
        ("record", "outbox.event.Order", b"1", b'{"n": 1}'),
        ("record", "outbox.event.Customer", b"0", b'{"n": 2}'),
        ("record", "outbox.event.Order", b"1", b'{"n": 3}')]
    assert [r[1] for r in sink.records].count("app.public.items") == 1
    assert sink.headers[0] == [("id", str(uuid.UUID(int=1)).encode()), ("type", b"Created")]
    # the outbox table's own topic is never written, nor its schema registered
    assert "app.public.outbox" not in {r[1] for r in sink.records}
    assert registry.schemas and not any("outbox" in json.dumps(s) for s in registry.schemas)
    assert len([r for r in caplog.records if "updated" in r.getMessage()]) == 1  # once


def test_an_update_stops_when_on_update_is_fatal() -> None:
    pub, sink, _, _ = publisher({"on_update": "fatal"})
    with pytest.raises(ConfigError, match="a row was updated"):
        pub.publish(transaction([(OUTBOX, Update(None, OUTBOX.relation_id, None, None,
                                                 row(1, "Order")))]))
    assert sink.records == []


# ---------------------------------------------------------------- the sink's side

class _Librdkafka:
    """librdkafka's produce as the sink sees it: takes every record."""

    def __init__(self) -> None:
        self.taken: list[tuple[str, bytes | None, bytes | None, object]] = []

    def produce(self, topic: str, value: bytes | None, key: bytes | None, partition: int,
                **kwargs: object) -> None:
        self.taken.append((topic, key, value, kwargs.get("headers")))

    def poll(self, timeout: float = 0) -> int:
        return 0


def test_a_routed_record_keeps_its_headers_and_counts_against_its_ticket() -> None:
    shrunk: list[str] = []
    tracker = AckTracker(start_lsn=10)
    # the oversized policy (for Avro events) at 1 byte: a routed record must not meet it
    sink = KafkaSink({"bootstrap.servers": "k:9092"}, tracker, max_event_bytes=1,
                     oversized=lambda topic, key, value: shrunk.append(topic) or None)
    sink._producer = librdkafka = _Librdkafka()  # type: ignore[assignment]
    txn = tracker.begin(20)
    record = router().route((EVENT_ID, "Order", "1", "OrderCreated", PAYLOAD))
    sink.produce(record.topic, record.key, record.value, txn, headers=record.headers)
    assert librdkafka.taken == [("outbox.event.Order", b"1", PAYLOAD.encode(),
                                 [("id", EVENT_ID.encode()), ("type", b"OrderCreated")])]
    assert txn.expected == 1 and shrunk == []
    txn.seal()
    assert tracker.delivered_lsn() == 10  # not before Kafka acknowledged it


# ---------------------------------------------------------------- payload formats

EVENT_TYPE = 70010
COMPOSITE_OUTBOX = OUTBOX._replace(columns=(*OUTBOX.columns[:4],
                                            RelationColumn(0, "payload", EVENT_TYPE, -1)))


class SubjectRegistry(MemoryRegistry):
    def __init__(self) -> None:
        super().__init__()
        self.subjects: list[str] = []

    def register_value(self, topic: str, schema: object) -> int:
        self.subjects.append(value_subject(topic))  # the subject the real registry uses
        return super().register_value(topic, schema)


def composite_publisher(outbox: object) -> tuple[Publisher, HeaderSink, SubjectRegistry]:
    registry, sink, tracker = SubjectRegistry(), HeaderSink(), RecordingTracker()
    types = TypeCatalog()
    types.add_rows([(EVENT_TYPE, "public", "order_event", "c", 0, -1, 0, 0, -1, ",", "C")])
    types.add_composite_rows([EVENT_TYPE], [(EVENT_TYPE, "n", oids.INT4, -1, 0),
                                            (EVENT_TYPE, "note", oids.TEXT, -1, 0)])
    codecs = CodecFactory(types, None, registry_ids(registry), prefix="app", db="shop")
    return (Publisher(codecs, AvroEncoder(registry, prefix="app", db="shop"), sink, tracker,
                      outboxes=routes({"public.outbox": {"outbox": outbox}})), sink, registry)


@pytest.mark.parametrize("outbox, relation, payload, expected", [
    (True, COMPOSITE_OUTBOX, '(1,"a, b")', {"n": 1, "note": "a, b"}),  # auto: a composite
    ({"payload_format": "avro"}, COMPOSITE_OUTBOX, "(2,)", {"n": 2, "note": None}),
    ({"payload_format": "avro"}, OUTBOX, '{"n": 3}', '{"n": 3}'),  # jsonb's own Avro type
    ({"payload_format": "stored"}, COMPOSITE_OUTBOX, "(4,x)", b"(4,x)"),  # its text
    (True, OUTBOX, '{"n": 5}', b'{"n": 5}'),  # auto: json as stored
    (True, COMPOSITE_OUTBOX, BinaryValue(  # binary tuples: record_send's form
        b"\0\0\0\2" b"\0\0\0\x17\0\0\0\4\0\0\0\6" b"\0\0\0\x19\xff\xff\xff\xff"),
     {"n": 6, "note": None}),
])
def test_the_payload_format(outbox: object, relation: Relation, payload: str | bytes,
                            expected: object) -> None:
    pub, sink, registry = composite_publisher(outbox)
    pub.publish(transaction([(relation, Insert(None, relation.relation_id,
                                               (EVENT_ID, "Order", "1", "Created", payload)))]))
    [(_, topic, key, value, _)] = sink.records
    assert (topic, key) == ("outbox.event.Order", b"1")
    if isinstance(expected, bytes):
        assert value == expected and registry.schemas == []
        return
    assert value is not None and decode(value, registry.schema).value == expected
    assert registry.subjects == ["outbox.event.Order-value"]  # the routed topic's value


def test_a_bad_payload_format_is_one_line() -> None:
    with pytest.raises(ConfigError, match="payload_format must be one of auto, avro, stored"):
        parse_outbox_settings({"t": {"outbox": {"payload_format": "json"}}}, topic_prefix="a")

"""`Publisher` against fakes of its seams: a sink that records what it is handed, a tracker that
issues recording tickets, incremental snapshots that record their window's calls. The records'
bytes are decoded with the schemas the publisher registered (an in-memory registry)."""

from __future__ import annotations

import json
from typing import Any

from connector.assembler import LogicalMessage, Transaction
from connector.assembler.transaction import Change, ChangeMessage, Changes
from connector.avro import AvroEncoder, CodecFactory, decode, registry_ids
from connector.control import HEARTBEAT_PREFIX, WATERMARK_PREFIX
from connector.pgoutput.messages import (
    UNCHANGED_TOAST,
    Delete,
    Insert,
    Message,
    Relation,
    RelationColumn,
    Truncate,
    Update,
)
from connector.pgtypes import TypeCatalog, oids
from connector.publisher import Publisher

ITEMS = Relation(None, 16384, "public", "items", "d", (
    RelationColumn(1, "id", oids.INT8, -1), RelationColumn(0, "body", oids.TEXT, -1)))
XID, COMMIT_LSN, END_LSN = 731, 0x5_0000_1000, 0x5_0000_1100
TOPIC = "app.public.items"


class MemoryRegistry:
    """Schema ids in registration order; `schema(id)` gives the schema back for decoding."""

    def __init__(self) -> None:
        self.schemas: list[dict[str, Any]] = []

    def register_key(self, topic: str, schema: Any) -> int:
        return self.register_value(topic, schema)

    def register_value(self, topic: str, schema: Any) -> int:
        self.schemas.append(json.loads(schema) if isinstance(schema, str) else dict(schema))
        return len(self.schemas)

    def schema(self, schema_id: int) -> dict[str, Any]:
        return self.schemas[schema_id - 1]


class RecordingTicket:
    def __init__(self, end_lsn: int) -> None:
        self.end_lsn = end_lsn
        self.sealed = False

    def seal(self) -> None:
        assert not self.sealed, "sealed twice"
        self.sealed = True


class RecordingTracker:
    def __init__(self, delivered: int | None = None) -> None:
        self.tickets: list[RecordingTicket] = []
        self.delivered = delivered

    def begin(self, end_lsn: int) -> RecordingTicket:
        self.tickets.append(RecordingTicket(end_lsn))
        return self.tickets[-1]

    def delivered_lsn(self) -> int | None:
        return self.delivered


class RecordingSink:
    """(kind, topic, key, value, ticket): kind is "record", "delete" or "truncate"."""

    def __init__(self) -> None:
        self.records: list[tuple[str, str, bytes | None, bytes | None, RecordingTicket]] = []
        self.bytes = 0

    def produce(self, topic: str, key: bytes | None, value: bytes | None,
                ticket: RecordingTicket) -> None:
        self._record("record", topic, key, value, ticket)

    def produce_delete(self, topic: str, key: bytes | None, value: bytes,
                       ticket: RecordingTicket) -> None:
        self._record("delete", topic, key, value, ticket)

    def produce_truncate(self, topic: str, value: bytes, ticket: RecordingTicket) -> int:
        self._record("truncate", topic, None, value, ticket)
        return 1

    def _record(self, kind: str, topic: str, key: bytes | None, value: bytes | None,
                ticket: RecordingTicket) -> None:
        self.records.append((kind, topic, key, value, ticket))
        self.bytes += len(key or b"") + len(value or b"")


class RecordingWindow:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def changed(self, relation_id: int, key: bytes) -> None:
        self.calls.append(("changed", relation_id, key))

    def truncated(self, relation_id: int) -> None:
        self.calls.append(("truncated", relation_id))


class RecordingSnapshots:
    def __init__(self, window: RecordingWindow | None) -> None:
        self.open_window = window
        self.watermarks: list[tuple[bytes, int, RecordingTicket]] = []
        # Shared with the window: a transaction is announced before its changes are.
        self.calls: list[tuple[object, ...]] = window.calls if window is not None else []

    def watermark(self, content: bytes, end_lsn: int, ticket: RecordingTicket) -> None:
        self.watermarks.append((content, end_lsn, ticket))

    def transaction(self, xid: int, commit_lsn: int, end_lsn: int,
                    ticket: RecordingTicket) -> None:
        self.calls.append(("transaction", xid, commit_lsn, end_lsn, ticket))


class Setup:
    def __init__(self, *, window: bool = True, transaction_topic: bool = False) -> None:
        self.registry = MemoryRegistry()
        self.sink = RecordingSink()
        self.tracker = RecordingTracker(delivered=0x4_0000_0000)
        self.window = RecordingWindow() if window else None
        self.snapshots = RecordingSnapshots(self.window)
        codecs = CodecFactory(TypeCatalog(), None, registry_ids(self.registry),
                              prefix="app", db="shop")
        encoder = AvroEncoder(self.registry, prefix="app", db="shop")
        self.publisher = Publisher(codecs, encoder, self.sink, self.tracker,
                                   snapshots=self.snapshots, transaction_topic=transaction_topic)

    def decoded(self, data: bytes | None) -> Any:
        return None if data is None else decode(data, self.registry.schema).value


def transaction(messages: list[ChangeMessage], end_lsn: int = END_LSN) -> Transaction:
    changes = [Change(None if isinstance(msg, Message) else ITEMS, msg, COMMIT_LSN - 0x100 + i,
                      i, XID, COMMIT_LSN, 0) for i, msg in enumerate(messages)]
    return Transaction(XID, COMMIT_LSN, end_lsn, 0, Changes(changes), COMMIT_LSN - 0x100)


def test_row_changes_become_records_under_the_transactions_sealed_ticket() -> None:
    s = Setup()
    rid = ITEMS.relation_id
    s.publisher.publish(transaction([
        Insert(None, rid, ("1", "one")),
        Update(None, rid, None, None, ("1", "uno")),
        Update(None, rid, "K", ("1", None), ("10", "diez")),  # the key changed
        Delete(None, rid, "K", ("10", None)),
        Truncate(None, 0, (rid,)),
    ]))
    [ticket] = s.tracker.tickets
    assert ticket.end_lsn == END_LSN and ticket.sealed
    assert {r[4] for r in s.sink.records} == {ticket}
    assert {r[1] for r in s.sink.records} == {TOPIC}
    got = [(kind, s.decoded(key), s.decoded(value)) for kind, _, key, value, _ in s.sink.records]
    assert [(kind, key, value["op"]) for kind, key, value in got] == [
        ("record", {"id": 1}, "c"), ("record", {"id": 1}, "u"),
        ("delete", {"id": 1}, "d"), ("record", {"id": 10}, "c"),
        ("delete", {"id": 10}, "d"), ("truncate", None, "t")]
    assert got[0][2]["after"] == {"id": 1, "body": "one"}
    assert got[1][2]["after"] == {"id": 1, "body": "uno"}
    assert got[3][2]["after"] == {"id": 10, "body": "diez"}
    assert [value["source"]["txn_index"] for _, _, value in got] == [0, 1, 2, 2, 3, 4]
    assert all(value["source"]["commit_lsn"] == COMMIT_LSN for _, _, value in got)
    # every changed key (both of a key change) and the truncated table, in stream order
    keys = [r[2] for r in s.sink.records]
    assert s.window is not None
    [ticket] = s.tracker.tickets  # announced to the snapshots first, under its ticket
    assert s.window.calls == [("transaction", XID, COMMIT_LSN, END_LSN, ticket),
                              ("changed", rid, keys[0]), ("changed", rid, keys[1]),
                                ("changed", rid, keys[2]), ("changed", rid, keys[3]),
                                ("changed", rid, keys[4]), ("truncated", rid)]


def test_an_update_with_a_toasted_value_fills_it_from_the_old_row() -> None:
    s = Setup()
    s.publisher.publish(transaction([Update(None, ITEMS.relation_id, "O", ("1", "kept"),
                                            ("1", UNCHANGED_TOAST))]))
    value = s.decoded(s.sink.records[0][3])
    assert value["after"] == {"id": 1, "body": "kept"} and value["unchanged_toast"] == []


def test_without_an_open_window_changes_are_only_published() -> None:
    s = Setup(window=False)
    s.publisher.publish(transaction([Insert(None, ITEMS.relation_id, ("1", "one")),
                                     Delete(None, ITEMS.relation_id, "K", ("1", None))]))
    assert [r[0] for r in s.sink.records] == ["record", "delete"]


def test_messages_in_a_transaction_by_prefix() -> None:
    s = Setup()
    s.publisher.publish(transaction([
        Message(XID, 1, COMMIT_LSN - 0x100, "app.audit", b"hello"),
        Message(XID, 1, COMMIT_LSN - 0xff, HEARTBEAT_PREFIX, b""),
        Message(XID, 1, COMMIT_LSN - 0xfe, WATERMARK_PREFIX, b"high"),
    ]))
    [ticket] = s.tracker.tickets
    assert ticket.sealed
    assert [(r[1], r[4]) for r in s.sink.records] == [("app.message", ticket),
                                                      ("app.heartbeat", ticket)]
    message = s.decoded(s.sink.records[0][3])
    assert (message["prefix"], message["content"]) == ("app.audit", b"hello")
    assert s.snapshots.watermarks == [(b"high", END_LSN, ticket)]


def test_non_transactional_messages_each_under_a_ticket_of_their_own() -> None:
    s = Setup()
    for lsn, prefix in ((0x100, HEARTBEAT_PREFIX), (0x200, WATERMARK_PREFIX),
                        (0x300, "app.audit")):
        s.publisher.publish_message(LogicalMessage(Message(None, 0, lsn, prefix, b"low"), lsn),
                                    lsn + 1)
    heartbeat, watermark, message = s.tracker.tickets
    assert [t.end_lsn for t in s.tracker.tickets] == [0x101, 0x201, 0x301]
    assert all(t.sealed for t in s.tracker.tickets)
    assert s.snapshots.watermarks == [(b"low", 0x201, watermark)]
    assert [(r[1], r[4]) for r in s.sink.records] == [("app.message", message)]
    assert s.decoded(s.sink.records[0][3])["content"] == b"low"
    assert heartbeat is not message


def test_the_transaction_topic_frames_the_events_under_the_same_ticket() -> None:
    s = Setup(transaction_topic=True)
    s.publisher.publish(transaction([Insert(None, ITEMS.relation_id, ("1", "one"))]))
    [ticket] = s.tracker.tickets
    assert [(r[1], r[4]) for r in s.sink.records] == [
        ("app.transaction", ticket), (TOPIC, ticket), ("app.transaction", ticket)]
    end = s.decoded(s.sink.records[2][3])
    assert (end["status"], end["event_count"]) == ("END", 1)


def test_a_new_relation_version_gets_its_own_codec() -> None:
    s = Setup()
    s.publisher.publish(transaction([Insert(None, ITEMS.relation_id, ("1", "one"))]))
    altered = ITEMS._replace(columns=(*ITEMS.columns, RelationColumn(0, "qty", oids.INT4, -1)))
    insert = Insert(None, ITEMS.relation_id, ("2", "two", "3"))
    s.publisher.publish(Transaction(XID + 1, COMMIT_LSN + 0x1000, END_LSN + 0x1000, 0, Changes(
        [Change(altered, insert, COMMIT_LSN + 0xf00, 0, XID + 1, COMMIT_LSN + 0x1000, 0)]),
        COMMIT_LSN + 0xf00))
    assert [s.decoded(r[3])["after"] for r in s.sink.records] == [
        {"id": 1, "body": "one"}, {"id": 2, "body": "two", "qty": 3}]


def test_the_signal_tables_changes_are_dropped_before_kafka() -> None:
    """FOR ALL TABLES publishes pgcdc's own signal table: its changes get no schema, no topic,
    no record, and do not count as events; a user table's change beside them is published."""
    signal = Relation(None, 16390, "public", "pgcdc_signal", "d", (
        RelationColumn(1, "id", oids.INT8, -1), RelationColumn(0, "state", oids.TEXT, -1)))
    s = Setup()
    changes = [Change(signal, Insert(None, signal.relation_id, ("1", "pending")),
                      COMMIT_LSN - 0x100, 0, XID, COMMIT_LSN, 0),
               Change(ITEMS, Insert(None, ITEMS.relation_id, ("1", "one")),
                      COMMIT_LSN - 0xff, 1, XID, COMMIT_LSN, 0),
               Change(signal, Update(None, signal.relation_id, None, None, ("1", "done")),
                      COMMIT_LSN - 0xfe, 2, XID, COMMIT_LSN, 0),
               Change(signal, Truncate(None, 0, (signal.relation_id,)),
                      COMMIT_LSN - 0xfd, 3, XID, COMMIT_LSN, 0)]
    s.publisher.publish(Transaction(XID, COMMIT_LSN, END_LSN, 0, Changes(changes),
                                    COMMIT_LSN - 0x100))
    [ticket] = s.tracker.tickets
    assert ticket.sealed
    assert [(r[0], r[1]) for r in s.sink.records] == [("record", TOPIC)]
    assert s.decoded(s.sink.records[0][3])["after"] == {"id": 1, "body": "one"}
    # Only the items table's schemas were registered (key and value).
    assert [schema["name"] for schema in s.registry.schemas] == ["Key", "Envelope"]
    assert s.window is not None
    assert [c[1] for c in s.window.calls if c[0] != "transaction"] == [ITEMS.relation_id]
    # A table named alike in another schema is a user table.
    other = Relation(None, 16391, "app", "pgcdc_signal", "d", signal.columns)
    s.publisher.publish(Transaction(XID + 1, COMMIT_LSN + 0x200, END_LSN + 0x200, 0, Changes([
        Change(other, Insert(None, other.relation_id, ("2", "x")), COMMIT_LSN + 0x100, 0,
               XID + 1, COMMIT_LSN + 0x200, 0)]), COMMIT_LSN + 0x100))
    assert s.sink.records[-1][1] == "app.app.pgcdc_signal"

"""Tables dropped upstream on the producer's side (pure): a ``pgcdc.drop`` message's content
(connector/replication/drops.py) and the drop event the publisher makes of it -- a truncate on
the table's topic at the message's position, written with a drop schema that names the dropped
relation id, whatever the session knows of the table."""

from __future__ import annotations

from typing import Any

import pytest

from connector.avro import AvroEncoder, CodecFactory, registry_ids
from connector.avro.registry import value_subject
from connector.avro.schema import DROPPED, RELATION_ID
from connector.control import DROP_PREFIX
from connector.errors import DecodeError
from connector.pgoutput.messages import Insert, Message
from connector.pgtypes import TypeCatalog
from connector.publisher import Publisher
from connector.replication.drops import DroppedTable, parse_dropped, standby_hint
from spark_jobs.rules.incarnation import Drop, drop_of
from tests.unit.test_publisher import (
    COMMIT_LSN,
    ITEMS,
    TOPIC,
    XID,
    MemoryRegistry,
    Setup,
    transaction,
)

DROPPED_ITEMS = DroppedTable("public", "items", ITEMS.relation_id, "slot_a", 0x5_0000_0800)


class SubjectRegistry(MemoryRegistry):
    """MemoryRegistry that knows which subjects have a version."""

    def __init__(self) -> None:
        super().__init__()
        self.subjects: set[str] = set()

    def register_value(self, topic: str, schema: Any) -> int:
        self.subjects.add(value_subject(topic))
        return super().register_value(topic, schema)

    def has_subject(self, subject: str) -> bool:
        return subject in self.subjects


def setup(slot: str | None = "slot_a", registry: SubjectRegistry | None = None,
          publication: str | None = None) -> Setup:
    """`tests.unit.test_publisher.Setup` over a `SubjectRegistry` (shared: another session)."""
    s = Setup()
    s.registry = registry = registry or SubjectRegistry()
    codecs = CodecFactory(TypeCatalog(), None, registry_ids(registry),  # type: ignore[arg-type]
                          prefix="app", db="shop")
    encoder = AvroEncoder(registry, prefix="app", db="shop")  # type: ignore[arg-type]
    s.publisher = Publisher(codecs, encoder, s.sink, s.tracker, snapshots=s.snapshots,
                            slot=slot, publication=publication)
    return s


def drop_message(drop: DroppedTable = DROPPED_ITEMS) -> Message:
    return Message(XID, 1, COMMIT_LSN - 0x80, DROP_PREFIX, drop.content().encode())


def test_the_content_round_trips_and_anything_else_is_refused() -> None:
    assert parse_dropped(DROPPED_ITEMS.content().encode()) == DROPPED_ITEMS
    for bad in (b"{", b"{}", b'{"schema": 1, "table": "t", "relation_id": 1, "slot": "s",'
                b' "seen_lsn": 0}'):
        with pytest.raises(ValueError, match="not a pgcdc.drop message"):
            parse_dropped(bad)
    # A standby cannot write it: the statement to run on the primary, quotes doubled.
    quoted = DroppedTable("o'k", "t", 1, "s", 2)
    assert standby_hint(quoted) == ("SELECT pg_logical_emit_message(true, 'pgcdc.drop', "
                                    + "'" + quoted.content().replace("'", "''") + "')")


def test_a_drop_is_a_truncate_at_the_messages_position_written_with_a_drop_schema() -> None:
    s = setup()
    rid = ITEMS.relation_id
    s.publisher.publish(transaction([Insert(None, rid, ("1", "one"))]))
    # Another session (a restart): no Relation of the dropped table is known.
    assert isinstance(s.registry, SubjectRegistry)
    fresh = setup(registry=s.registry)
    fresh.publisher.publish(transaction([drop_message()]))
    [(kind, topic, key, value, ticket)] = fresh.sink.records
    assert (kind, topic, key) == ("truncate", TOPIC, None) and ticket.sealed
    event = fresh.decoded(value)
    assert (event["op"], event["before"], event["after"]) == ("t", None, None)
    assert (event["source"]["commit_lsn"], event["source"]["txn_index"]) == (COMMIT_LSN, 0)
    assert (event["source"]["schema"], event["source"]["table"]) == ("public", "items")
    schema = s.registry.schema(int.from_bytes(value[1:5], "big"))
    assert (schema[RELATION_ID], schema[DROPPED]) == (rid, DROPPED_ITEMS.seen_lsn)
    assert drop_of(schema) == Drop(rid, DROPPED_ITEMS.seen_lsn)  # what the merge job reads
    assert schema["name"] == "Envelope" and schema["namespace"] == "app.public.items"


def test_another_slots_drop_a_topic_without_events_or_no_slot_publish_nothing() -> None:
    known = SubjectRegistry()
    known.subjects.add(value_subject(TOPIC))
    other = setup(registry=known)
    other.publisher.publish(transaction([drop_message(DroppedTable(
        "public", "items", 1, "slot_b", 0))]))
    never = setup()  # the table never had an event: no subject, nothing to empty
    never.publisher.publish(transaction([drop_message()]))
    off = setup(slot=None, registry=known)
    off.publisher.publish(transaction([drop_message()]))
    assert other.sink.records == never.sink.records == off.sink.records == []
    assert all(t.sealed for s in (other, never, off) for t in s.tracker.tickets)


def test_a_message_that_cannot_be_read_stops_the_stream() -> None:
    s = setup()
    with pytest.raises(DecodeError, match="not a pgcdc.drop message"):
        s.publisher.publish(transaction([Message(XID, 1, COMMIT_LSN, DROP_PREFIX, b"{")]))


def test_the_table_triggers_drop_names_the_publication_and_is_published_once() -> None:
    """table_trigger's sql_drop trigger writes the drop in the DROP's transaction for the
    publication's producers; the watcher's own message for it, later, adds nothing."""
    known = SubjectRegistry()
    known.subjects.add(value_subject(TOPIC))
    by_trigger = DroppedTable("public", "items", ITEMS.relation_id, "", 0x5_0000_0900, "pub_a")
    assert parse_dropped(by_trigger.content().encode()) == by_trigger
    assert "publication" not in DROPPED_ITEMS.content()  # the watcher's, as before
    s = setup(registry=known, publication="pub_a")
    s.publisher.publish(transaction([drop_message(by_trigger)]))
    s.publisher.publish(transaction([drop_message(DROPPED_ITEMS)]))  # the watcher's
    [(kind, topic, _, value, _)] = s.sink.records
    assert (kind, topic) == ("truncate", TOPIC)
    assert s.registry.schema(int.from_bytes(value[1:5], "big"))[DROPPED] == by_trigger.seen_lsn
    other = setup(registry=known, publication="pub_b")  # another publication's producer
    other.publisher.publish(transaction([drop_message(by_trigger)]))
    assert other.sink.records == []

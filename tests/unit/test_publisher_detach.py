"""detach_deletes on the producer's side (pure): a ``pgcdc.detach`` message's content
(connector/replication/partitions.py) and the deletes the publisher makes of it -- the same
events as streamed key-only DELETEs, at the message's position in its transaction."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.control import DETACH_PREFIX
from connector.errors import DecodeError
from connector.pgoutput.messages import Delete, Insert, Message, Relation, RelationColumn
from connector.pgtypes import oids
from connector.replication.partitions import DetachedKeys, detach_deletes, parse_detached_keys
from tests.unit.test_publisher import COMMIT_LSN, ITEMS, TOPIC, XID, Setup, transaction

# Captured from PostgreSQL 15 (pg_logical_slot_get_binary_changes after a DETACH with the
# event trigger installed): a root keyed (id, ts), its partition's keys in text form.
CAPTURED = (b'{"root" : 16437, "schema" : "public", "table" : "m", "partition" : "public.m_2",'
            b' "columns" : ["id","ts"], "keys" : [["100", "2025-01-05 04:00:00+00"],'
            b' ["101", "2025-01-05 05:00:00+00"]]}')
MEASURES = Relation(None, 16437, "public", "m", "d", (
    RelationColumn(0, "v", oids.TEXT, -1), RelationColumn(1, "ts", oids.TIMESTAMPTZ, -1),
    RelationColumn(1, "id", oids.INT4, -1)))


def test_a_captured_message_parses() -> None:
    assert parse_detached_keys(CAPTURED) == DetachedKeys(
        16437, "public", "m", "public.m_2", ("id", "ts"),
        [("100", "2025-01-05 04:00:00+00"), ("101", "2025-01-05 05:00:00+00")])


@given(st.lists(st.tuples(st.text(), st.none() | st.text()), max_size=20))
def test_any_text_keys_round_trip(keys: list[tuple[str, str | None]]) -> None:
    content = json.dumps({"root": 1, "schema": "s", "table": "t", "partition": "s.p",
                          "columns": ["a", "b"], "keys": keys}).encode()
    assert parse_detached_keys(content).keys == keys


@pytest.mark.parametrize("content", [
    b"not json", b"{}", b'{"root": 1, "schema": "s", "table": "t", "partition": "p",'
    b' "columns": ["a"], "keys": [["1", "2"]]}',
    b'{"root": 1, "schema": "s", "table": "t", "partition": "p", "columns": ["a"],'
    b' "keys": [[1]]}',
    b'{"root": 1, "schema": "s", "table": "t", "partition": "p", "columns": [],'
    b' "keys": []}'])
def test_anything_else_is_refused(content: bytes) -> None:
    with pytest.raises(ValueError):
        parse_detached_keys(content)


def test_keys_fill_the_roots_key_columns_by_name_and_leave_the_others_null() -> None:
    # The root's column order is its own (ts before id here); the message names its columns.
    assert detach_deletes(MEASURES, parse_detached_keys(CAPTURED)) == [
        (None, "2025-01-05 04:00:00+00", "100"), (None, "2025-01-05 05:00:00+00", "101")]


def test_a_key_column_missing_from_the_message_is_refused() -> None:
    detached = parse_detached_keys(CAPTURED)._replace(columns=("id", "other"))
    with pytest.raises(ValueError, match="not its key column ts"):
        detach_deletes(MEASURES, detached)


def detach_message(*ids: str, root: int = ITEMS.relation_id) -> Message:
    content = json.dumps({"root": root, "schema": "public", "table": "items",
                          "partition": "public.items_1", "columns": ["id"],
                          "keys": [[i] for i in ids]}).encode()
    return Message(XID, 1, COMMIT_LSN - 0x80, DETACH_PREFIX, content)


def with_roots(s: Setup, found: Relation | None) -> list[tuple[int, str, str]]:
    asked: list[tuple[int, str, str]] = []

    def lookup(oid: int, schema: str, table: str) -> Relation | None:
        asked.append((oid, schema, table))
        return found

    s.publisher.detached_roots = lookup
    return asked


def test_each_key_is_a_delete_at_the_messages_position_before_later_changes() -> None:
    s = Setup()
    asked = with_roots(s, ITEMS)
    rid = ITEMS.relation_id
    # The DETACH, then the same key inserted again through another partition (a DEFAULT one).
    s.publisher.publish(transaction([Insert(None, rid, ("9", "kept")), detach_message("1", "2"),
                                     Insert(None, rid, ("1", "again"))]))
    assert asked == [(rid, "public", "items")]
    [ticket] = s.tracker.tickets
    assert ticket.sealed and {r[4] for r in s.sink.records} == {ticket}
    got = [(kind, topic, s.decoded(key), s.decoded(value)) for kind, topic, key, value, _
           in s.sink.records]
    assert [(kind, topic, key, value["op"], value["source"]["txn_index"])
            for kind, topic, key, value in got] == [
        ("record", TOPIC, {"id": 9}, "c", 0), ("delete", TOPIC, {"id": 1}, "d", 1),
        ("delete", TOPIC, {"id": 2}, "d", 1), ("record", TOPIC, {"id": 1}, "c", 2)]
    # An open incremental-snapshot window drops each deleted key from its chunk.
    assert s.window is not None
    assert [c[2] for c in s.window.calls[1:]] == [r[2] for r in s.sink.records]


def test_a_delete_is_the_event_a_streamed_key_only_delete_makes() -> None:
    detached, streamed = Setup(), Setup()
    with_roots(detached, ITEMS)
    detached.publisher.publish(transaction([detach_message("7")]))
    streamed.publisher.publish(transaction([Delete(None, ITEMS.relation_id, "K", ("7", None))]))
    [(kind, topic, key, value, _)] = detached.sink.records
    [(kind2, topic2, key2, value2, _)] = streamed.sink.records
    assert (kind, topic, key) == (kind2, topic2, key2)
    event, streamed_event = detached.decoded(value), streamed.decoded(value2)
    event.pop("ts_ms"), streamed_event.pop("ts_ms")  # when it was made
    assert event == streamed_event
    assert event["before"] == {"id": 7, "body": None}


def test_without_detach_deletes_or_for_a_root_not_published_here_nothing_is_published() -> None:
    off = Setup()  # the option off: dropped, never a message event
    off.publisher.publish(transaction([detach_message("1")]))
    other = Setup()
    with_roots(other, None)  # this publication does not publish that root through itself
    other.publisher.publish(transaction([detach_message("1")]))
    assert off.sink.records == other.sink.records == []
    assert all(t.sealed for t in off.tracker.tickets + other.tracker.tickets)


def test_a_message_that_cannot_be_applied_stops_the_stream() -> None:
    s = Setup()
    with_roots(s, ITEMS)
    bad = Message(XID, 1, COMMIT_LSN, DETACH_PREFIX, b"{")
    with pytest.raises(DecodeError, match="pgcdc.detach message"):
        s.publisher.publish(transaction([bad]))
    other_key = Relation(None, ITEMS.relation_id, "public", "items", "d", (
        RelationColumn(0, "id", oids.INT8, -1), RelationColumn(1, "body", oids.TEXT, -1)))
    with_roots(s, other_key)
    with pytest.raises(DecodeError, match="not its key column body"):
        s.publisher.publish(transaction([detach_message("1")]))

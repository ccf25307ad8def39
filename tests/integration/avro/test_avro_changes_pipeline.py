"""The path the pipeline takes, on real Kafka and registry: an assembler Transaction ->
Publisher (CodecFactory's codecs, AvroEncoder's control records) -> KafkaSink -> AckTracker
delivered LSN; consumed back and decoded by schema id."""

from __future__ import annotations

from typing import Any

import pytest

from connector.assembler.transaction import Change, Changes, Transaction
from connector.avro import AvroEncoder, CodecFactory, SchemaRegistry, decode, registry_ids
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
from connector.pgoutput.timestamps import pg_timestamp_to_ms
from connector.pgtypes import TypeCatalog, oids
from connector.publisher import Publisher
from connector.sink import AckTracker, KafkaSink, TopicCreator, TopicSpec
from tests.support.kafka import consume, unique

pytestmark = pytest.mark.integration

XID, COMMIT_LSN, END_LSN, COMMIT_TS = 731, 0x5_0000_1000, 0x5_0000_1030, 770_000_000_000_000

ITEMS = Relation(None, 16500, "public", "items", "d", (
    RelationColumn(1, "id", oids.INT4, -1),
    RelationColumn(0, "body", oids.TEXT, -1),
    RelationColumn(0, "grid", oids.ARRAY_OF[oids.INT4], -1),
))
LOGS = Relation(None, 16501, "public", "logs", "n", (RelationColumn(0, "line", oids.TEXT, -1),))


def changes() -> list[Change]:
    messages: list[tuple[Relation | None, Any]] = [
        (ITEMS, Insert(None, 16500, ("1", "hello", "{{1,2},{3,4}}"))),
        (ITEMS, Insert(None, 16500, ("2", "world", None))),
        (LOGS, Insert(None, 16501, ("keyless",))),
        (ITEMS, Update(None, 16500, None, None, ("1", UNCHANGED_TOAST, "{{5,6}}"))),
        (ITEMS, Update(None, 16500, "K", ("2", None, None), ("20", "moved", None))),
        (ITEMS, Delete(None, 16500, "K", ("1", None, None))),
        (None, Message(None, 1, COMMIT_LSN - 8, "app", b"hi")),
        (ITEMS, Truncate(None, 0, (16500,))),
    ]
    return [Change(rel, msg, COMMIT_LSN - 0x100 + i, i, XID, COMMIT_LSN, COMMIT_TS)
            for i, (rel, msg) in enumerate(messages)]


class Facts:
    """The catalog facts PostgreSQL would give (this test has no database): grid is int[][]."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def prepare_types(self, relation: Relation) -> None:
        self.asked.append(relation.name)

    def array_dims(self, relation: Relation) -> dict[str, int]:
        return {"grid": 2} if relation.name == "items" else {}

    def key_columns(self, relation: Relation) -> list[str] | None:
        return None

    def column_defaults(self, relation: Relation) -> dict[str, str]:
        return {}


def test_changes_through_publisher_and_sink(kafka: Any, registry: Any) -> None:
    prefix = unique("pipe")
    settings = {"bootstrap.servers": kafka.bootstrap}
    registry_client = SchemaRegistry(registry.url)
    facts = Facts()
    codecs = CodecFactory(TypeCatalog(), facts, registry_ids(registry_client), prefix=prefix,
                          db="app")
    tracker = AckTracker(start_lsn=0x5_0000_0000)
    sink = KafkaSink(settings, tracker, topics=TopicCreator(settings, TopicSpec(partitions=3)),
                     tombstones=True)
    publisher = Publisher(codecs, AvroEncoder(registry_client, prefix=prefix, db="app"), sink,
                          tracker)

    publisher.publish(Transaction(XID, COMMIT_LSN, END_LSN, COMMIT_TS, Changes(changes()),
                                  COMMIT_LSN - 0x100))
    sink.close()
    assert tracker.delivered_lsn() == END_LSN
    assert facts.asked == ["items", "logs"]  # once per Relation version

    reader = SchemaRegistry(registry.url)
    # 2 c, u, the key change as d + tombstone + c, d + tombstone, t on each of 3 partitions
    items = consume(kafka.bootstrap, f"{prefix}.public.items", 2 + 1 + 3 + 2 + 3)
    events = [(decode(r.key(), reader.schema).value if r.key() else None,
               decode(r.value(), reader.schema).value if r.value() else None, r.partition())
              for r in items]
    by_index: dict[int, list[Any]] = {}
    for event in events:
        if event[1] is not None and event[1]["op"] != "t":
            by_index.setdefault(event[1]["source"]["txn_index"], []).append(event)
    assert by_index[0][0][0] == {"id": 1}
    assert by_index[0][0][1]["after"] == {"id": 1, "body": "hello", "grid": [[1, 2], [3, 4]]}
    assert by_index[3][0][1]["op"] == "u" and by_index[3][0][1]["unchanged_toast"] == ["body"]
    assert by_index[3][0][1]["after"]["grid"] == [[5, 6]]
    # the key changed: the old key's row is deleted, the new key's row created
    moved = {e[1]["op"]: e for e in by_index[4]}
    assert moved["d"][0] == {"id": 2} and moved["c"][0] == {"id": 20}
    assert moved["d"][1]["before"] == {"id": 2, "body": None, "grid": None}
    assert moved["c"][1]["after"] == {"id": 20, "body": "moved", "grid": None}
    assert by_index[5][0][1]["op"] == "d" and by_index[5][0][1]["after"] is None
    tombstones = [e for e in events if e[1] is None]
    assert sorted(t[0]["id"] for t in tombstones) == [1, 2]
    truncates = [e for e in events if e[1] is not None and e[1]["op"] == "t"]
    assert sorted(t[2] for t in truncates) == [0, 1, 2]
    assert all(t[0] is None and t[1]["source"]["txn_index"] == 7 for t in truncates)
    for _, value, _ in events:
        if value is not None:
            source = value["source"]
            assert (source["commit_lsn"], source["txId"], source["ts_ms"], source["db"]) == (
                COMMIT_LSN, XID, pg_timestamp_to_ms(COMMIT_TS), "app")
            assert value["transaction"]["id"] == f"{XID}:{COMMIT_LSN}"
    # one row, one partition: every event of id 1 landed together
    assert len({e[2] for e in events if e[0] == {"id": 1}}) == 1

    (log,) = consume(kafka.bootstrap, f"{prefix}.public.logs", 1)
    assert log.key() is None
    assert decode(log.value(), reader.schema).value["after"] == {"line": "keyless"}
    (message,) = consume(kafka.bootstrap, f"{prefix}.message", 1)
    decoded = decode(message.value(), reader.schema).value
    assert (decoded["prefix"], decoded["content"], decoded["source"]["txn_index"]) == (
        "app", b"hi", 6)


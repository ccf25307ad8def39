"""The path the pipeline takes, on real Kafka and registry: assembler Changes -> AvroEncoder ->
KafkaSink (by op) -> AckTracker watermark; consumed back and decoded by schema id."""

from __future__ import annotations

from typing import Any

import pytest

from connector.assembler.transaction import Change
from connector.avro import AvroEncoder, SchemaRegistry, TransactionBlock, decode
from connector.avro.encoder import transaction_id
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


def test_changes_through_encoder_and_sink(kafka: Any, registry: Any) -> None:
    prefix = unique("pipe")
    settings = {"bootstrap.servers": kafka.bootstrap}
    encoder = AvroEncoder(SchemaRegistry(registry.url), TypeCatalog(), prefix=prefix, db="app",
                          array_dims=lambda rel: {"grid": 2} if rel.name == "items" else {})
    tracker = AckTracker(start_lsn=0x5_0000_0000)
    sink = KafkaSink(settings, tracker, topics=TopicCreator(settings, TopicSpec(partitions=3)),
                     tombstones=True)

    txn = tracker.begin(END_LSN)
    for total, change in enumerate(changes(), start=1):
        block = TransactionBlock(transaction_id(XID, COMMIT_LSN), total, total)
        record = encoder.change(change, transaction=block)
        if record.op == "t":
            sink.produce_to_all_partitions(record.topic, record.key, record.value or b"", txn)
        elif record.op == "d":
            sink.produce_delete(record.topic, record.key, record.value or b"", txn)
        else:
            sink.produce(record.topic, record.key, record.value, txn)
    txn.seal()
    sink.close()
    assert tracker.watermark() == END_LSN

    reader = SchemaRegistry(registry.url)
    items = consume(kafka.bootstrap, f"{prefix}.public.items", 5 + 1 + 3)  # + tombstone + 3 t
    events = [(decode(r.key(), reader.schema).value if r.key() else None,
               decode(r.value(), reader.schema).value if r.value() else None, r.partition())
              for r in items]
    by_index = {e[1]["source"]["txn_index"]: e for e in events if e[1] is not None}
    assert by_index[0][0] == {"id": 1}
    assert by_index[0][1]["after"] == {"id": 1, "body": "hello", "grid": [[1, 2], [3, 4]]}
    assert by_index[3][1]["op"] == "u" and by_index[3][1]["unchanged_toast"] == ["body"]
    assert by_index[3][1]["after"]["grid"] == [[5, 6]]
    assert by_index[4][0] == {"id": 20}  # keyed by the new key
    assert by_index[4][1]["before"] == {"id": 2, "body": None, "grid": None}
    assert by_index[5][1]["op"] == "d" and by_index[5][1]["after"] is None
    tombstones = [e for e in events if e[1] is None]
    assert [t[0] for t in tombstones] == [{"id": 1}]
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


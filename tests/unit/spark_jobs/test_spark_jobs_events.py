"""The merge job's test events (tests/support/events.py) are the producer's: the same bytes as
the `Publisher` gives for the same transaction, from pgoutput messages as PostgreSQL sends
them (the types by OID, the values in text format)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from connector.assembler.transaction import Change, Changes, Transaction
from connector.avro import AvroEncoder, CodecFactory, TransactionBlock, decode, registry_ids
from connector.pgoutput.messages import (
    UNCHANGED_TOAST,
    Delete,
    Insert,
    Relation,
    RelationColumn,
    Truncate,
    Update,
)
from connector.pgoutput.timestamps import pg_timestamp_to_ms
from connector.pgtypes import TypeCatalog, oids
from connector.publisher import Publisher
from connector.sink import AckTracker
from tests.support.avro import numeric_typmod
from tests.support.events import LocalRegistry, pg_text, relation_id, table_events

XID, COMMIT_LSN, END_LSN, COMMIT_TS = 731, 0x5_0000_1000, 0x5_0000_1030, 770_000_000_000_000
COLUMNS = [("id", "int8"), ("name", "varchar(20)"), ("amount", "numeric(10,2)"),
           ("created", "timestamptz"), ("starts", "time"), ("bio", "text"), ("vip", "bool")]
# What pgoutput sends for that table (a Relation message) and for its rows (text values).
ORDERS = Relation(None, relation_id("public", "orders"), "public", "orders", "d", (
    RelationColumn(1, "id", oids.INT8, -1), RelationColumn(0, "name", oids.VARCHAR, 24),
    RelationColumn(0, "amount", oids.NUMERIC, numeric_typmod(10, 2)),
    RelationColumn(0, "created", oids.TIMESTAMPTZ, -1), RelationColumn(0, "starts", oids.TIME, -1),
    RelationColumn(0, "bio", oids.TEXT, -1), RelationColumn(0, "vip", oids.BOOL, -1)))
ROW = {"id": 1, "name": "ann", "amount": Decimal("12.50"),
       "created": dt.datetime(2024, 1, 2, 3, 4, 5, 500000, tzinfo=dt.UTC),
       "starts": dt.time(8, 30, 0, 5), "bio": "long bio", "vip": True}
TEXT = ("1", "ann", "12.50", "2024-01-02 03:04:05.5+00", "08:30:00.000005", "long bio", "t")
CHANGES: list[tuple[str, Any, dict[str, Any]]] = [  # (op, pgoutput message, our arguments)
    ("c", Insert(None, 1, TEXT), {"after": ROW}),
    ("u", Update(None, 1, None, None, ("1", "bea", "12.50", "2024-01-02 03:04:05.5+00",
                                       "08:30:00.000005", UNCHANGED_TOAST, "f")),
     {"after": {**ROW, "name": "bea", "bio": None, "vip": False}, "unchanged_toast": ["bio"]}),
    ("d", Delete(None, 1, "K", ("1", None, None, None, None, None, None)),
     {"before": {"id": 1}}),
    ("t", Truncate(None, 0, (1,)), {}),
]


class RecordingSink:
    """The sink's side of the Publisher: every record it was handed, in order."""

    def __init__(self) -> None:
        self.bytes = 0
        self.records: list[tuple[str, bytes | None, bytes | None]] = []

    def produce(self, topic: str, key: bytes | None, value: bytes | None, ticket: Any, *,
                partition: int | None = None) -> None:
        self.records.append((topic, key, value))

    def produce_delete(self, topic: str, key: bytes | None, value: bytes, ticket: Any) -> None:
        self.produce(topic, key, value, ticket)

    def produce_truncate(self, topic: str, value: bytes, ticket: Any) -> int:
        self.produce(topic, None, value, ticket)
        return 1


def test_pg_text_is_postgresqls_text_output() -> None:
    assert [pg_text(v) for v in ROW.values()] == list(TEXT)
    assert pg_text(dt.datetime(2024, 1, 2, tzinfo=dt.timezone(-dt.timedelta(hours=5,
                                                                           minutes=30)))) \
        == "2024-01-02 00:00:00-05:30"
    with pytest.raises(TypeError):
        pg_text(object())


def test_events_are_the_bytes_pgcdc_run_publishes() -> None:
    registry = LocalRegistry()
    sink = RecordingSink()
    codecs = CodecFactory(TypeCatalog(), None, registry_ids(registry), prefix="shop",
                          db="postgres")
    encoder = AvroEncoder(registry, prefix="shop", db="postgres")  # no control records here
    publisher = Publisher(codecs, encoder, sink, AckTracker())  # type: ignore[arg-type]
    changes = Changes([Change(ORDERS, msg, COMMIT_LSN - 0x100 + i, i, XID, COMMIT_LSN,
                              COMMIT_TS) for i, (_, msg, _) in enumerate(CHANGES)])
    publisher.publish(Transaction(XID, COMMIT_LSN, END_LSN, COMMIT_TS, changes,
                                  COMMIT_LSN - 0x200))
    assert len(sink.records) == len(CHANGES)

    table = table_events(registry, "shop", "public", "orders", COLUMNS, ["id"])
    ours: list[tuple[str, bytes | None, bytes | None]] = []
    for i, ((op, _, kwargs), (_, _, published)) in enumerate(zip(CHANGES, sink.records,
                                                                  strict=True)):
        assert published is not None
        # the one field that is not the change's: when the producer wrote it (wall clock)
        fields: dict[str, Any] = dict(
            ts_ms=pg_timestamp_to_ms(COMMIT_TS),
            written_ms=decode(published, registry.schema).value["ts_ms"],
            xid=XID, change_lsn=COMMIT_LSN - 0x100 + i,
            transaction=TransactionBlock(f"{XID}:{COMMIT_LSN}", i + 1, i + 1))
        if op == "t":
            ours.append((table.topic, None, table.truncate(COMMIT_LSN, i, **fields)))
        else:
            ours.append((table.topic, *table.change(op, COMMIT_LSN, i, **kwargs, **fields)))
    assert ours == sink.records
    assert table.key_id is not None and sorted(registry.schemas) == [table.key_id, table.value_id]

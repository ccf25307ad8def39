"""Committed transactions → Kafka records: the mapping of schemas/README.md, in one place.

One `Publisher` per replication session. It asks the source catalog (an IO edge) about types,
array dimensions and primary keys once per Relation version, then turns each change into
Confluent-framed Avro records handed to the sink under the transaction's delivery ticket.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Protocol

from connector import metrics
from connector.assembler import Change, LogicalMessage, Transaction
from connector.avro import AvroEncoder, Encoded, SourceInfo, TableCodec, TransactionBlock
from connector.pgoutput.messages import (
    UNCHANGED_TOAST,
    Delete,
    Insert,
    Message,
    Relation,
    Truncate,
    TupleData,
    Update,
)
from connector.pgoutput.timestamps import PG_EPOCH
from connector.sink import DeliveryTracker, KafkaSink, Ticket

log = logging.getLogger(__name__)

_PG_EPOCH_MS = int(PG_EPOCH.timestamp() * 1000)
HEARTBEAT_PREFIX = "pgcdc.heartbeat"


class SourceCatalog(Protocol):
    """What the publisher needs to know about a table beyond its Relation message."""

    def prepare_types(self, relation: Relation) -> None: ...

    def array_dims(self, relation: Relation) -> dict[str, int]: ...

    def key_columns(self, relation: Relation) -> list[str] | None: ...


def pg_ts_to_ms(micros: int) -> int:
    return _PG_EPOCH_MS + micros // 1000


def fill_unchanged_toast(new: TupleData, old: TupleData | None) -> TupleData:
    """Replace unchanged-TOAST markers of `new` with the old row's values (REPLICA IDENTITY FULL
    sends them); without an old row the markers stay and end up in `unchanged_toast`."""
    if old is None or UNCHANGED_TOAST not in new:
        return new
    return tuple(o if n is UNCHANGED_TOAST and o is not UNCHANGED_TOAST else n
                 for n, o in zip(new, old, strict=True))


class Publisher:
    def __init__(self, encoder: AvroEncoder, sink: KafkaSink, tracker: DeliveryTracker,
                 catalog: SourceCatalog, *, transaction_topic: bool = False) -> None:
        self.encoder = encoder
        self.sink = sink
        self.tracker = tracker
        self.catalog = catalog
        self.transaction_topic = transaction_topic
        self._codecs: dict[Relation, TableCodec] = {}

    def codec(self, relation: Relation) -> TableCodec:
        codec = self._codecs.get(relation)
        if codec is None:
            self.catalog.prepare_types(relation)
            codec = self.encoder.table(relation, array_dims=self.catalog.array_dims(relation),
                                       key_columns=self.catalog.key_columns(relation))
            self._codecs[relation] = codec
        return codec

    def publish(self, txn: Transaction) -> None:
        """Produce every event of a committed transaction under one delivery ticket."""
        ticket = self.tracker.begin(txn.end_lsn)
        ts_ms = pg_ts_to_ms(txn.commit_timestamp)
        block_id = f"{txn.xid}:{txn.commit_lsn}"
        per_table: Counter[str] = Counter()
        if self.transaction_topic:
            self._send(self.encoder.transaction_begin(txn.xid, txn.commit_lsn, ts_ms,
                                                      end_lsn=txn.end_lsn), ticket)
        for total, change in enumerate(txn.changes, start=1):
            source = SourceInfo(txn.commit_lsn, change.position, ts_ms, txn.xid, change.wal_lsn)
            if change.relation is None:
                assert isinstance(change.message, Message)
                if change.message.prefix != HEARTBEAT_PREFIX:
                    self._send(self.encoder.message(change.message, source), ticket)
                continue
            name = f"{change.relation.namespace}.{change.relation.name}"
            per_table[name] += 1
            block = TransactionBlock(block_id, total, per_table[name])
            self._publish_change(change, source, block, ticket)
        if self.transaction_topic:
            self._send(self.encoder.transaction_end(txn.xid, txn.commit_lsn, ts_ms, per_table,
                                                    end_lsn=txn.end_lsn), ticket)
        ticket.seal()
        metrics.TRANSACTIONS.inc()

    def _publish_change(self, change: Change, source: SourceInfo, block: TransactionBlock,
                        ticket: Ticket) -> None:
        assert change.relation is not None
        codec = self.codec(change.relation)
        msg = change.message
        topic = codec.topic
        if isinstance(msg, Insert):
            self._produce(codec, "c", codec.key_from_tuple(msg.new),
                          codec.value_from_tuples("c", None, msg.new, source, transaction=block),
                          ticket)
        elif isinstance(msg, Update):
            new = fill_unchanged_toast(msg.new, msg.old if msg.old_kind == "O" else None)
            new_key = codec.key_from_tuple(new)
            old_key = codec.key_from_tuple(msg.old) if msg.old is not None else new_key
            if old_key != new_key:
                # The key changed: the old key's row is gone, a new key's row appears (so a
                # consumer keyed by the Kafka key sees both, each in its own partition).
                self.sink.produce_delete(topic, old_key, codec.value_from_tuples(
                    "d", msg.old, None, source, transaction=block), ticket)
                self._produce(codec, "c", new_key, codec.value_from_tuples(
                    "c", None, new, source, transaction=block), ticket)
            else:
                self._produce(codec, "u", new_key, codec.value_from_tuples(
                    "u", msg.old, new, source, transaction=block), ticket)
        elif isinstance(msg, Delete):
            self.sink.produce_delete(topic, codec.key_from_tuple(msg.old), codec.value_from_tuples(
                "d", msg.old, None, source, transaction=block), ticket)
            metrics.EVENTS.labels(topic, "d").inc()
        elif isinstance(msg, Truncate):
            self.sink.produce_to_all_partitions(
                topic, None, codec.truncate(source, transaction=block), ticket)
            metrics.EVENTS.labels(topic, "t").inc()

    def _produce(self, codec: TableCodec, op: str, key: bytes | None, value: bytes,
                 ticket: Ticket) -> None:
        self.sink.produce(codec.topic, key, value, ticket)
        metrics.EVENTS.labels(codec.topic, op).inc()

    def _send(self, record: Encoded, ticket: Ticket) -> None:
        self.sink.produce(record.topic, record.key, record.value, ticket)

    def publish_message(self, item: LogicalMessage, confirm_lsn: int) -> None:
        """A non-transactional logical decoding message (our own heartbeats are not published:
        they only move the confirmed position of an otherwise idle slot)."""
        ticket = self.tracker.begin(confirm_lsn)
        msg = item.message
        if msg.prefix != HEARTBEAT_PREFIX:
            source = SourceInfo(msg.lsn, 0, time.time_ns() // 1_000_000, None, msg.lsn)
            self._send(self.encoder.message(msg, source), ticket)
        ticket.seal()


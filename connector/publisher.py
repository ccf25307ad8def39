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
        self._toast_warned: set[int] = set()
        self._codecs: dict[Relation, TableCodec] = {}
        # The hot path's cache: a Relation's hash walks every column, so changes look their
        # codec up by the identity of the (shared) Relation object; the entry keeps it alive.
        self._by_identity: dict[int, tuple[Relation, TableCodec, str]] = {}
        self._events: Counter[tuple[str, str]] = Counter()  # metrics, flushed per transaction

    def codec(self, relation: Relation) -> TableCodec:
        return self._lookup(relation)[1]

    def _lookup(self, relation: Relation) -> tuple[Relation, TableCodec, str]:
        """(relation, its codec, "schema.table"), built once per Relation version."""
        entry = self._by_identity.get(id(relation))
        if entry is not None and entry[0] is relation:
            return entry
        codec = self._codecs.get(relation)
        if codec is None:
            self.catalog.prepare_types(relation)
            codec = self.encoder.table(relation, array_dims=self.catalog.array_dims(relation),
                                       key_columns=self.catalog.key_columns(relation))
            self._codecs[relation] = codec
        entry = (relation, codec, f"{relation.namespace}.{relation.name}")
        self._by_identity[id(relation)] = entry
        return entry

    def publish(self, txn: Transaction) -> None:
        """Produce every event of a committed transaction under one delivery ticket."""
        ticket = self.tracker.begin(txn.end_lsn)
        ts_ms = pg_ts_to_ms(txn.commit_timestamp)
        block_id = f"{txn.xid}:{txn.commit_lsn}"
        per_table: Counter[str] = Counter()
        bytes_before = self.sink.bytes
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
            _, codec, name = self._lookup(change.relation)
            per_table[name] += 1
            block = TransactionBlock(block_id, total, per_table[name])
            self._publish_change(codec, change, source, block, ticket)
        if self.transaction_topic:
            self._send(self.encoder.transaction_end(txn.xid, txn.commit_lsn, ts_ms, per_table,
                                                    end_lsn=txn.end_lsn), ticket)
        ticket.seal()
        self._flush_metrics(bytes_before, ts_ms)

    def _flush_metrics(self, bytes_before: int, commit_ts_ms: int) -> None:
        for (topic, op), count in self._events.items():
            metrics.EVENTS.labels(topic, op).inc(count)
        self._events.clear()
        metrics.BYTES.inc(self.sink.bytes - bytes_before)
        metrics.TRANSACTIONS.inc()
        metrics.LAG_MS.set(max(0, time.time_ns() // 1_000_000 - commit_ts_ms))

    def _publish_change(self, codec: TableCodec, change: Change, source: SourceInfo,
                        block: TransactionBlock, ticket: Ticket) -> None:
        msg = change.message
        topic = codec.topic
        events = self._events
        if isinstance(msg, Insert):  # the key from the loaded row: each tuple is loaded once
            key, value = codec.change_from_tuples("c", None, msg.new, source, transaction=block)
            self.sink.produce(topic, key, value, ticket)
            events[topic, "c"] += 1
        elif isinstance(msg, Update):
            new = fill_unchanged_toast(msg.new, msg.old if msg.old_kind == "O" else None)
            new_key = codec.key_from_tuple(new)
            old_key = codec.key_from_tuple(msg.old) if msg.old is not None else new_key
            if old_key != new_key:
                # The key changed: the old key's row is gone, a new key's row appears (so a
                # consumer keyed by the Kafka key sees both, each in its own partition).
                if UNCHANGED_TOAST in new:
                    self._warn_toast_across_key_change(codec.schemas.relation)
                self.sink.produce_delete(topic, old_key, codec.value_from_tuples(
                    "d", msg.old, None, source, transaction=block), ticket)
                self.sink.produce(topic, new_key, codec.value_from_tuples(
                    "c", None, new, source, transaction=block), ticket)
                events[topic, "d"] += 1
                events[topic, "c"] += 1
            else:
                self.sink.produce(topic, new_key, codec.value_from_tuples(
                    "u", msg.old, new, source, transaction=block), ticket)
                events[topic, "u"] += 1
        elif isinstance(msg, Delete):
            key, value = codec.change_from_tuples("d", msg.old, None, source, transaction=block)
            self.sink.produce_delete(topic, key, value, ticket)
            events[topic, "d"] += 1
        elif isinstance(msg, Truncate):
            self.sink.produce_to_all_partitions(
                topic, None, codec.truncate(source, transaction=block), ticket)
            events[topic, "t"] += 1

    def _warn_toast_across_key_change(self, relation: Relation) -> None:
        """PostgreSQL does not re-send an unchanged TOASTed value, and with a key change no
        consumer holds it under the new key: the value is lost unless REPLICA IDENTITY FULL."""
        if relation.relation_id in self._toast_warned:
            return
        self._toast_warned.add(relation.relation_id)
        log.warning("%s.%s: a primary-key change kept a large (TOASTed) value unchanged; "
                    "PostgreSQL does not send it, so the new row's event lists it in "
                    "unchanged_toast with no value to keep. Use ALTER TABLE %s.%s REPLICA "
                    "IDENTITY FULL for tables whose keys change", relation.namespace,
                    relation.name, relation.namespace, relation.name)

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


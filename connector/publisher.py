"""Committed transactions → Kafka records: the mapping of schemas/README.md, in one place.

One `Publisher` per replication session. Its `CodecFactory` (connector/avro/codecs.py) makes
each table version's codec once per Relation version, asking the source catalog (an IO edge)
about types, array dimensions and primary keys; the publisher turns each change into
Confluent-framed Avro records handed to the sink under the transaction's delivery ticket.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Protocol

from connector import metrics
from connector.assembler import LogicalMessage, Transaction
from connector.assembler.transaction import ChangeMessage
from connector.avro import (
    AvroEncoder,
    CodecFactory,
    Encoded,
    SourceInfo,
    TableCodec,
    TransactionBlock,
)
from connector.control import HEARTBEAT_PREFIX, WATERMARK_PREFIX, heartbeat_restart_lsn
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
from connector.pgoutput.timestamps import pg_timestamp_to_ms
from connector.sink import DeliveryTracker, KafkaSink, Ticket
from connector.snapshot.incremental import ChunkWindow

log = logging.getLogger(__name__)

# Builds a NamedTuple (SourceInfo, TransactionBlock) from a tuple of all its fields without
# its Python-level __new__: once per event, so the per-event records cost one allocation each.
_new_tuple = tuple.__new__
# SourceInfo's fields as `publish` builds them: the last three keep their defaults.
_SOURCE_FIELDS = ("commit_lsn", "txn_index", "ts_ms", "xid", "lsn", "snapshot", "xmin",
                  "sequence")
if SourceInfo._fields != _SOURCE_FIELDS:
    raise RuntimeError(f"SourceInfo's fields changed to {SourceInfo._fields}: update "
                       "Publisher.publish, which builds it from a tuple")
_SNAPSHOT, _XMIN, _SEQUENCE = (SourceInfo._field_defaults[f] for f in _SOURCE_FIELDS[5:])
if TransactionBlock._fields != ("id", "total_order", "data_collection_order"):
    raise RuntimeError(f"TransactionBlock's fields changed to {TransactionBlock._fields}: "
                       "update Publisher.publish, which builds it from a tuple")

# A codec cache entry: (relation, codec, "schema.table", topic, and the metrics keys
# (topic, op) for c, u, d, t), built once per Relation version.
_Entry = tuple[Relation, TableCodec, str, str, tuple[str, str], tuple[str, str],
               tuple[str, str], tuple[str, str]]




def fill_unchanged_toast(new: TupleData, old: TupleData | None) -> TupleData:
    """Replace unchanged-TOAST markers of `new` with the old row's values (REPLICA IDENTITY FULL
    sends them); without an old row the markers stay and end up in `unchanged_toast`."""
    if old is None or UNCHANGED_TOAST not in new:
        return new
    return tuple(o if n is UNCHANGED_TOAST and o is not UNCHANGED_TOAST else n
                 for n, o in zip(new, old, strict=True))


class Watermarks(Protocol):
    """The incremental snapshot's side of the stream (`connector.snapshot.resnapshot`)."""

    @property
    def open_window(self) -> ChunkWindow | None: ...  # keys the stream changes drop from it

    def watermark(self, content: bytes, end_lsn: int, ticket: Ticket) -> None: ...


class Publisher:
    def __init__(self, codecs: CodecFactory, encoder: AvroEncoder, sink: KafkaSink,
                 tracker: DeliveryTracker, *, transaction_topic: bool = False) -> None:
        self.codecs = codecs
        self.encoder = encoder
        self.sink = sink
        self.tracker = tracker
        self.transaction_topic = transaction_topic
        self._toast_warned: set[int] = set()
        # The hot path's cache: a Relation's hash walks every column, so changes look their
        # codec up by the identity of the (shared) Relation object; the entry keeps it alive.
        self._by_identity: dict[int, _Entry] = {}
        self._events: Counter[tuple[str, str]] = Counter()  # metrics, flushed per transaction
        self.watermarks: Watermarks | None = None
        self._window: ChunkWindow | None = None  # the open chunk window, for this transaction

    def _lookup(self, relation: Relation) -> _Entry:
        """(relation, its codec, "schema.table", topic, metrics keys), built once per Relation
        version."""
        entry = self._by_identity.get(id(relation))
        if entry is not None and entry[0] is relation:
            return entry
        codec = self.codecs.codec(relation)
        topic = codec.topic
        name = f"{relation.namespace}.{relation.name}"
        entry = (relation, codec, name, topic,
                 (name, "c"), (name, "u"), (name, "d"), (name, "t"))
        self._by_identity[id(relation)] = entry
        return entry

    def publish(self, txn: Transaction) -> None:
        """Produce every event of a committed transaction under one delivery ticket."""
        ticket = self.tracker.begin(txn.end_lsn)
        xid = txn.xid
        commit_lsn = txn.commit_lsn
        ts_ms = pg_timestamp_to_ms(txn.commit_timestamp)
        block_id = f"{xid}:{commit_lsn}"
        per_table: dict[str, int] = {}
        bytes_before = self.sink.bytes
        if self.transaction_topic:
            self._send(self.encoder.transaction_begin(xid, commit_lsn, ts_ms,
                                                      end_lsn=txn.end_lsn), ticket)
        # The loop runs once per event: locals for everything it calls, inserts (the most
        # common change) handled inline, the rest by _publish_change.
        by_identity = self._by_identity
        produce = self.sink.produce
        events = self._events
        heartbeats = 0
        # Our watermarks are transactions of their own: a window opens or closes only between
        # the transactions that change tables.
        window = self._window = self.watermarks.open_window if self.watermarks else None
        for total, change in enumerate(txn.changes, start=1):
            relation, msg, wal_lsn, position, _, _, _ = change
            source = _new_tuple(SourceInfo, (commit_lsn, position, ts_ms, xid, wal_lsn,
                                             _SNAPSHOT, _XMIN, _SEQUENCE))
            if relation is None:
                assert isinstance(msg, Message)
                if msg.prefix == HEARTBEAT_PREFIX:
                    heartbeats += 1
                    self._send(self.encoder.heartbeat(self.tracker.delivered_lsn() or 0,
                                                      restart_lsn=heartbeat_restart_lsn(msg.content)),
                               ticket)
                elif msg.prefix == WATERMARK_PREFIX:
                    heartbeats += 1  # not a change either
                    if self.watermarks is not None:
                        self.watermarks.watermark(msg.content, txn.end_lsn, ticket)
                else:
                    self._send(self.encoder.message(msg, source), ticket)
                continue
            entry = by_identity.get(id(relation))
            if entry is None or entry[0] is not relation:
                entry = self._lookup(relation)
            name = entry[2]
            count = per_table.get(name, 0) + 1
            per_table[name] = count
            block = _new_tuple(TransactionBlock, (block_id, total, count))
            if type(msg) is Insert:  # the key from the loaded row: each tuple is loaded once
                key, value = entry[1].change_from_tuples("c", None, msg.new, source,
                                                         transaction=block)
                produce(entry[3], key, value, ticket)
                events[entry[4]] += 1
                if window is not None and key is not None:
                    window.changed(relation.relation_id, key)
            else:
                self._publish_change(entry, msg, source, block, ticket)
        if self.transaction_topic:
            self._send(self.encoder.transaction_end(txn.xid, txn.commit_lsn, ts_ms, per_table,
                                                    end_lsn=txn.end_lsn), ticket)
        ticket.seal()
        self._flush_metrics(bytes_before, ts_ms, carried_events=len(txn.changes) > heartbeats)

    def _flush_metrics(self, bytes_before: int, commit_ts_ms: int, *,
                       carried_events: bool) -> None:
        for (table, op), count in self._events.items():
            metrics.EVENTS.labels(table, op).inc(count)
        self._events.clear()
        metrics.LAG_MS.set(max(0, time.time_ns() // 1_000_000 - commit_ts_ms))
        metrics.BYTES.inc(self.sink.bytes - bytes_before)
        if carried_events:  # not a transaction of only our heartbeats
            metrics.TRANSACTIONS.inc()

    def _publish_change(self, entry: _Entry, msg: ChangeMessage, source: SourceInfo,
                        block: TransactionBlock, ticket: Ticket) -> None:
        codec = entry[1]
        topic = entry[3]
        events = self._events
        if isinstance(msg, Insert):  # the key from the loaded row: each tuple is loaded once
            key, value = codec.change_from_tuples("c", None, msg.new, source, transaction=block)
            self.sink.produce(topic, key, value, ticket)
            events[entry[4]] += 1
            self._changed(codec, key)
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
                events[entry[6]] += 1
                events[entry[4]] += 1
                self._changed(codec, old_key)
            else:
                self.sink.produce(topic, new_key, codec.value_from_tuples(
                    "u", msg.old, new, source, transaction=block), ticket)
                events[entry[5]] += 1
            self._changed(codec, new_key)
        elif isinstance(msg, Delete):
            key, value = codec.change_from_tuples("d", msg.old, None, source, transaction=block)
            self.sink.produce_delete(topic, key, value, ticket)
            events[entry[6]] += 1
            self._changed(codec, key)
        elif isinstance(msg, Truncate):
            self.sink.produce_truncate(topic, codec.truncate(source, transaction=block), ticket)
            events[entry[7]] += 1
            if self._window is not None:
                self._window.truncated(codec.schemas.relation.relation_id)

    def _changed(self, codec: TableCodec, key: bytes | None) -> None:
        if self._window is not None and key is not None:
            self._window.changed(codec.schemas.relation.relation_id, key)

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
        """A non-transactional logical decoding message (our heartbeats are transactional, see
        `Pipeline._heartbeat`: one with our heartbeat prefix here is not published; an
        incremental snapshot's low watermark is one)."""
        ticket = self.tracker.begin(confirm_lsn)
        msg = item.message
        if msg.prefix == WATERMARK_PREFIX:
            if self.watermarks is not None:
                self.watermarks.watermark(msg.content, confirm_lsn, ticket)
        elif msg.prefix != HEARTBEAT_PREFIX:
            source = SourceInfo(msg.lsn, 0, time.time_ns() // 1_000_000, None, msg.lsn)
            self._send(self.encoder.message(msg, source), ticket)
        ticket.seal()


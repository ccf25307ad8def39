"""Committed transactions → Kafka records: the mapping of schemas/README.md, in one place.

One `Publisher` per replication session. Its `CodecFactory` (connector/avro/codecs.py) makes
each table version's codec once per Relation version, asking the source catalog (an IO edge)
about types, array dimensions and primary keys; the publisher turns each change into
Confluent-framed Avro records handed to the sink under the transaction's delivery ticket.

pgcdc's own signal table (`connector.names.SIGNAL_TABLE`) is never published as a user table:
a FOR ALL TABLES publication sends its changes, and they are dropped here, before any schema is
registered or topic made for it (counted, like heartbeats, as pgcdc's own, not as events).

An outbox table (connector/outbox.py) has no codec either: its inserts are routed as outbox
events (`_route`), under the transaction's ticket like every record, so they are confirmed to
PostgreSQL only once Kafka acknowledged them (with exactly-once: in the same Kafka
transaction); its updates, deletes and truncates publish nothing. Its payload is Avro when
`OutboxSetting.payload_is_avro` says (`_outbox_payload`): the schema derived from the payload
column's type and registered by the registry every other topic uses.

A ``pgcdc.detach`` message (``detach_deletes``: the keys of a partition DETACHed from a root
published through it, written by the event trigger in the DETACH's transaction;
connector/replication/detach_trigger.py) is never published as a message. With a `RootLookup`
each key becomes a delete on the root's topic, at the message's position in the transaction
(so a later change of the same key in the stream, e.g. re-inserted through a DEFAULT
partition, comes after it), built exactly as a streamed key-only DELETE: the root's codec
over a 'K' tuple of text values, the same event for the merge job. Without one (the option
off, the trigger installed for another pgcdc) the message is dropped.

A ``pgcdc.drop`` message (a published table dropped upstream, written by the table watcher:
connector/replication/drops.py) is never published as a message either. For this producer's
slot it becomes the table's drop event on its topic, at the message's position: a truncate
written with a drop schema of its own (`AvroEncoder.drop`: the dropped relation id and the
position it was last seen at), so the merge job empties the lake table only if it still holds
that incarnation or an older one (spark_jobs/rules/incarnation.py), and it is producible
whatever this session knows of the table (no Relation is needed). A topic that never had an
event gets none. Messages for another slot are dropped (but those naming this publication,
written by the table_trigger's sql_drop trigger in the DROP's transaction), and so is a second
message for a relation id this session already published the drop of (the watcher's, after the
trigger's: connector/replication/drops.py).
"""

from __future__ import annotations

import builtins
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Protocol, cast

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
from connector.avro.payload import AvroPayload, PayloadCodec, payload_codec
from connector.control import (
    DETACH_PREFIX,
    DROP_PREFIX,
    HEARTBEAT_PREFIX,
    ROWS_PREFIX,
    WATERMARK_PREFIX,
    heartbeat_restart_lsn,
)
from connector.errors import DecodeError
from connector.names import SIGNAL_TABLE, table_topic
from connector.outbox import OutboxRouter, OutboxRoutes, OutboxSetting
from connector.pgoutput.lsn import lsn_to_str
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
from connector.replication.drops import parse_dropped
from connector.replication.partitions import detach_deletes, parse_detached_keys
from connector.sink import Ticket

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


class _TableEntry:
    """A Relation version's codec and names, built once per Relation version by
    `Publisher._lookup`. It keeps `relation` alive, so the cache's key (the Relation's `id`)
    cannot be reused by another object while the entry is cached. `created`/`updated`/
    `deleted`/`truncated` are the metrics keys (table, op) of its events. `dropped`: pgcdc's
    own signal table, whose changes are not published (no codec: no schema, no topic), or an
    outbox table, whose changes `outbox` routes instead."""

    __slots__ = ("relation", "codec", "dropped", "outbox", "name", "topic", "created", "updated",
                 "deleted", "truncated")

    def __init__(self, relation: Relation, codec: TableCodec | None,
                 outbox: OutboxRouter | None = None) -> None:
        self.relation = relation
        self.dropped = codec is None
        self.outbox = outbox
        # Never read when dropped: `publish` skips such a change before using it.
        self.codec = cast(TableCodec, codec)
        self.name = name = f"{relation.namespace}.{relation.name}"
        self.topic = codec.topic if codec is not None else ""
        self.created = (name, "c")
        self.updated = (name, "u")
        self.deleted = (name, "d")
        self.truncated = (name, "t")


def fill_unchanged_toast(new: TupleData, old: TupleData | None) -> TupleData:
    """Replace unchanged-TOAST markers of `new` with the old row's values (REPLICA IDENTITY FULL
    sends them); without an old row the markers stay and end up in `unchanged_toast`."""
    if old is None or UNCHANGED_TOAST not in new:
        return new
    return tuple(o if n is UNCHANGED_TOAST and o is not UNCHANGED_TOAST else n
                 for n, o in zip(new, old, strict=True))


#: (root OID, schema, table) -> the root's Relation as this stream publishes it, or None: this
#: publication does not publish that root through itself (`Publisher` module docstring).
RootLookup = Callable[[int, str, str], Relation | None]


class OpenWindow(Protocol):
    """The open chunk window of an incremental snapshot: the keys the stream changes are dropped
    from the chunk's rows (`connector.snapshot.incremental.ChunkWindow`)."""

    def changed(self, relation_id: int, key: bytes) -> None: ...

    def truncated(self, relation_id: int) -> None: ...


class SnapshotWindows(Protocol):
    """The incremental snapshots' side of the stream (`connector.snapshot.incremental.driver`): the
    window the stream's changes are checked against, the DBLog watermark messages, and each
    transaction before its events (a read-only chunk closes there)."""

    @property
    def open_window(self) -> OpenWindow | None: ...

    def watermark(self, content: bytes, end_lsn: int, ticket: Ticket) -> None: ...

    def transaction(self, xid: int, commit_lsn: int, end_lsn: int, ticket: Ticket) -> None:
        """Called before each transaction's events, under its ticket (read-only chunks)."""
        ...


class RecordSink(Protocol):
    """What the publisher hands records to (`connector.sink.KafkaSink`): each record under the
    delivery ticket of its transaction; `bytes` counts the key + value bytes handed so far."""

    def produce(self, topic: str, key: builtins.bytes | None, value: builtins.bytes | None,
                ticket: Ticket, *,
                headers: list[tuple[str, str | builtins.bytes | None]] | None = None
                ) -> None: ...

    def produce_delete(self, topic: str, key: builtins.bytes | None, value: builtins.bytes,
                       ticket: Ticket) -> None: ...

    def produce_truncate(self, topic: str, value: builtins.bytes, ticket: Ticket) -> int: ...

    @property
    def bytes(self) -> int: ...


class TicketIssuer(Protocol):
    """What the publisher asks of the delivery tracker (`connector.sink.DeliveryTracker`): one
    ticket per transaction, opened in commit order, and the delivered LSN for heartbeats."""

    def begin(self, end_lsn: int) -> Ticket: ...

    def delivered_lsn(self) -> int | None: ...


class Publisher:
    """One replication session's mapping of transactions to records (module docstring).

    Invariants: every record of a transaction is handed to the sink under the one ticket
    `tracker.begin(end_lsn)` opened for it, and the ticket is sealed after its last record, so
    the delivered LSN can pass a transaction only once all of it is acknowledged. Every row
    change is reported to the incremental snapshots' open window (a keyed change its key, a
    truncate its table) before the next transaction is published."""

    def __init__(self, codecs: CodecFactory, encoder: AvroEncoder, sink: RecordSink,
                 tracker: TicketIssuer, *, snapshots: SnapshotWindows | None = None,
                 transaction_topic: bool = False, outboxes: OutboxRoutes | None = None,
                 detached_roots: RootLookup | None = None, slot: str | None = None,
                 publication: str | None = None) -> None:
        """`snapshots`: the incremental snapshots this stream serves (None: none; our
        watermark messages are then not published either). `outboxes`: the tables whose
        inserts are routed as outbox events (connector/outbox.py). `detached_roots`: with
        detach_deletes, how a ``pgcdc.detach`` message's root is found (None: dropped).
        `slot`: this stream's slot, whose ``pgcdc.drop`` messages are applied (None: none),
        as are those naming `publication` (the table_trigger's)."""
        self.slot = slot
        self.publication = publication
        self._drops: set[tuple[int, str, str]] = set()  # drop events published this session
        self.outboxes = outboxes
        self.detached_roots = detached_roots
        self.codecs = codecs
        self.encoder = encoder
        self.sink = sink
        self.tracker = tracker
        self.snapshots = snapshots
        self.transaction_topic = transaction_topic
        self._toast_warned: set[int] = set()
        # The hot path's cache: a Relation's hash walks every column, so changes look their
        # codec up by the identity of the (shared) Relation object; the entry keeps it alive.
        self._by_identity: dict[int, _TableEntry] = {}
        self._events: Counter[tuple[str, str]] = Counter()  # metrics, flushed per transaction
        self._window: OpenWindow | None = None  # the open chunk window, for this transaction

    def _lookup(self, relation: Relation) -> _TableEntry:
        """The cache entry of `relation`, built once per Relation version."""
        entry = self._by_identity.get(id(relation))
        if entry is not None and entry.relation is relation:
            return entry
        ours = (relation.namespace, relation.name) == SIGNAL_TABLE
        outbox = None if ours else self._outbox_router(relation)
        entry = _TableEntry(relation, None if ours or outbox is not None
                            else self.codecs.codec(relation), outbox)
        self._by_identity[id(relation)] = entry
        return entry

    def _outbox_router(self, relation: Relation) -> OutboxRouter | None:
        """The router of an outbox table's version (None: not an outbox)."""
        outboxes = self.outboxes
        if not outboxes or not outboxes.is_outbox(relation.namespace, relation.name):
            return None
        if self.codecs.facts is not None:  # the loaders of its types (domains...)
            self.codecs.facts.prepare_types(relation)
        setting = outboxes.setting_for(relation.namespace, relation.name)
        assert setting is not None
        return outboxes.router(relation, self.codecs.types.row_loaders(relation.columns),
                               self._outbox_payload(setting, relation))

    def _outbox_payload(self, setting: OutboxSetting, relation: Relation) -> AvroPayload | None:
        """The Avro encoder of an outbox table version's payload column (None: as stored, or
        no such column, which the router reports)."""
        column = next((c for c in relation.columns if c.name == setting.payload), None)
        if column is None:
            return None
        types, facts = self.codecs.types, self.codecs.facts
        if not setting.payload_is_avro(types.composite(column.type_oid) is not None):
            return None
        where = f"outbox table {relation.namespace}.{relation.name}, column {column.name}"
        dims = 1 if facts is None else facts.array_dims(relation).get(column.name, 1)

        def derive(refresh: bool, attributes: int | None) -> PayloadCodec:
            if facts is not None:
                facts.prepare_composite(column.type_oid, refresh=refresh)
            return payload_codec(types, column.type_oid, column.type_modifier, dims,
                                 where=where, value_format=self.codecs.value_format,
                                 attributes=attributes)

        return AvroPayload(derive, self.encoder.registry.register_value, where)

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
        controls = 0  # pgcdc's own messages: not changes
        # Our watermarks are transactions of their own: a window opens or closes only between
        # the transactions that change tables.
        snapshots = self.snapshots
        if snapshots is not None:  # a read-only chunk past its horizon goes out first
            snapshots.transaction(xid, commit_lsn, txn.end_lsn, ticket)
        window = self._window = snapshots.open_window if snapshots is not None else None
        for total, change in enumerate(txn.changes, start=1):
            relation, msg, wal_lsn, position, _, _, _ = change
            source = _new_tuple(SourceInfo, (commit_lsn, position, ts_ms, xid, wal_lsn,
                                             _SNAPSHOT, _XMIN, _SEQUENCE))
            if relation is None:
                assert isinstance(msg, Message)
                if msg.prefix == DETACH_PREFIX:
                    if not self._detach(msg, source, block_id, total, per_table, ticket):
                        controls += 1
                elif msg.prefix == DROP_PREFIX:
                    if not self._dropped(msg, source, ticket):
                        controls += 1
                elif not self._publish_message(msg, source, txn.end_lsn, ticket,
                                               transactional=True):
                    controls += 1
                continue
            entry = by_identity.get(id(relation))
            if entry is None or entry.relation is not relation:
                entry = self._lookup(relation)
            if entry.dropped:  # pgcdc's signal table (FOR ALL TABLES publishes it), an outbox
                if entry.outbox is None:
                    controls += 1
                else:
                    self._route(entry, msg, ticket)
                continue
            name = entry.name
            count = per_table.get(name, 0) + 1
            per_table[name] = count
            block = _new_tuple(TransactionBlock, (block_id, total, count))
            if type(msg) is Insert:  # the key from the loaded row: each tuple is loaded once
                key, value = entry.codec.change_from_tuples("c", None, msg.new, source,
                                                            transaction=block)
                produce(entry.topic, key, value, ticket)
                events[entry.created] += 1
                if window is not None and key is not None:
                    window.changed(relation.relation_id, key)
            else:
                self._publish_change(entry, msg, source, block, ticket)
        if self.transaction_topic:
            self._send(self.encoder.transaction_end(txn.xid, txn.commit_lsn, ts_ms, per_table,
                                                    end_lsn=txn.end_lsn), ticket)
        ticket.seal()
        self._flush_metrics(bytes_before, ts_ms, carried_events=len(txn.changes) > controls)

    def _flush_metrics(self, bytes_before: int, commit_ts_ms: int, *,
                       carried_events: bool) -> None:
        for (table, op), count in self._events.items():
            metrics.EVENTS.labels(table, op).inc(count)
        self._events.clear()
        metrics.LAG_MS.set(max(0, time.time_ns() // 1_000_000 - commit_ts_ms))
        metrics.BYTES.inc(self.sink.bytes - bytes_before)
        if carried_events:  # not a transaction of only our heartbeats
            metrics.TRANSACTIONS.inc()

    def _publish_change(self, entry: _TableEntry, msg: ChangeMessage, source: SourceInfo,
                        block: TransactionBlock, ticket: Ticket) -> None:
        """An update, delete or truncate (inserts are `publish`'s inline path)."""
        codec = entry.codec
        topic = entry.topic
        events = self._events
        if isinstance(msg, Update):
            new = fill_unchanged_toast(msg.new, msg.old if msg.old_kind == "O" else None)
            new_key = codec.key_from_tuple(new)
            old_key = codec.key_from_tuple(msg.old) if msg.old is not None else new_key
            if old_key != new_key:
                # The key changed: the old key's row is gone, a new key's row appears (so a
                # consumer keyed by the Kafka key sees both, each in its own partition).
                if UNCHANGED_TOAST in new:
                    self._warn_toast_across_key_change(entry.relation)
                self.sink.produce_delete(topic, old_key, codec.value_from_tuples(
                    "d", msg.old, None, source, transaction=block), ticket)
                self.sink.produce(topic, new_key, codec.value_from_tuples(
                    "c", None, new, source, transaction=block), ticket)
                events[entry.deleted] += 1
                events[entry.created] += 1
                self._changed(entry, old_key)
            else:
                self.sink.produce(topic, new_key, codec.value_from_tuples(
                    "u", msg.old, new, source, transaction=block), ticket)
                events[entry.updated] += 1
            self._changed(entry, new_key)
        elif isinstance(msg, Delete):
            key, value = codec.change_from_tuples("d", msg.old, None, source, transaction=block)
            self.sink.produce_delete(topic, key, value, ticket)
            events[entry.deleted] += 1
            self._changed(entry, key)
        elif isinstance(msg, Truncate):
            self.sink.produce_truncate(topic, codec.truncate(source, transaction=block), ticket)
            events[entry.truncated] += 1
            if self._window is not None:
                self._window.truncated(entry.relation.relation_id)

    def _detach(self, msg: Message, source: SourceInfo, block_id: str, total: int,
                per_table: dict[str, int], ticket: Ticket) -> bool:
        """A ``pgcdc.detach`` message: a delete per key on the root's topic, at `source` (the
        message's position); True when it published any. A message this stream cannot apply
        stops it (a `DecodeError` naming the partition): skipping would leave the rows."""
        lookup = self.detached_roots
        if lookup is None:
            return False
        try:
            detached = parse_detached_keys(msg.content)
        except ValueError as exc:
            raise DecodeError(f"{DETACH_PREFIX} message: {exc}", lsn=lsn_to_str(msg.lsn)) from None
        relation = lookup(detached.root_oid, detached.schema, detached.table)
        if relation is None:  # not published through its root by this publication
            return False
        entry = self._lookup(relation)
        if entry.dropped:
            return False
        try:
            tuples = detach_deletes(relation, detached)
        except ValueError as exc:
            raise DecodeError(f"{exc}: re-read the root (pgcdc snapshot --tables "
                              f"{entry.name})", lsn=lsn_to_str(msg.lsn)) from None
        codec = entry.codec
        count = per_table.get(entry.name, 0)
        for old in tuples:
            count += 1
            block = _new_tuple(TransactionBlock, (block_id, total, count))
            key, value = codec.change_from_tuples("d", old, None, source, transaction=block)
            self.sink.produce_delete(entry.topic, key, value, ticket)
            self._changed(entry, key)
        per_table[entry.name] = count
        self._events[entry.deleted] += len(tuples)
        return bool(tuples)

    def _dropped(self, msg: Message, source: SourceInfo, ticket: Ticket) -> bool:
        """A ``pgcdc.drop`` message: the table's drop event on its topic, at `source` (the
        message's position); True when one was published. A message this stream cannot read
        stops it (a `DecodeError`): skipping would leave the dropped table's rows."""
        if self.slot is None:
            return False
        try:
            dropped = parse_dropped(msg.content)
        except ValueError as exc:
            raise DecodeError(str(exc), lsn=lsn_to_str(msg.lsn)) from None
        if dropped.slot != self.slot and not (dropped.publication and
                                              dropped.publication == self.publication):
            return False  # another pgcdc's table
        seen = (dropped.relation_id, dropped.schema, dropped.table)
        if seen in self._drops:  # the trigger's, then the watcher's: one drop event
            return False
        self._drops.add(seen)
        codecs = self.codecs
        topic = table_topic(codecs.prefix, dropped.schema, dropped.table)
        record = self.encoder.drop(topic, dropped.schema, dropped.table, dropped.relation_id,
                                   dropped.seen_lsn, source, value_format=codecs.value_format,
                                   truncate_records=codecs.truncate_records)
        if record is None or record.value is None:
            log.info("table %s.%s was dropped; its topic %s has no event, so no drop event",
                     dropped.schema, dropped.table, topic)
            return False
        self.sink.produce_truncate(topic, record.value, ticket)
        self._events[(f"{dropped.schema}.{dropped.table}", "t")] += 1
        log.info("table %s.%s (relation id %d) was dropped: drop event on %s at %s",
                 dropped.schema, dropped.table, dropped.relation_id, topic,
                 lsn_to_str(source.commit_lsn))
        return True

    def _route(self, entry: _TableEntry, msg: ChangeMessage, ticket: Ticket) -> None:
        """An outbox table's change: an insert is an outbox event on its routed topic; an
        update is ignored as its `on_update` says; deletes (the clean-up) and truncates
        publish nothing."""
        router = entry.outbox
        assert router is not None
        if type(msg) is Insert:
            record = router.route(msg.new)
            self.sink.produce(record.topic, record.key, record.value, ticket,
                              headers=record.headers)
            self._events[entry.created] += 1
        elif isinstance(msg, Update):
            router.ignored_update()

    def _changed(self, entry: _TableEntry, key: bytes | None) -> None:
        if self._window is not None and key is not None:
            self._window.changed(entry.relation.relation_id, key)

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

    def _publish_message(self, msg: Message, source: SourceInfo, end_lsn: int, ticket: Ticket,
                         *, transactional: bool) -> bool:
        """A logical decoding message, by its prefix: pgcdc's heartbeat (transactional, see
        `Pipeline._heartbeat`) becomes a heartbeat record, and one outside a transaction is not
        ours to publish; a DBLog watermark goes to the incremental snapshots under the
        transaction's `ticket`; any other message is published. True: it was published as a
        change (a user's message), False: it was one of pgcdc's own."""
        if msg.prefix == HEARTBEAT_PREFIX:
            if transactional:
                self._send(self.encoder.heartbeat(
                    self.tracker.delivered_lsn() or 0,
                    restart_lsn=heartbeat_restart_lsn(msg.content)), ticket)
            return False
        if msg.prefix == WATERMARK_PREFIX:
            if self.snapshots is not None:
                self.snapshots.watermark(msg.content, end_lsn, ticket)
            return False
        if msg.prefix in (DETACH_PREFIX, DROP_PREFIX, ROWS_PREFIX):  # never a user's message
            return False
        self._send(self.encoder.message(msg, source), ticket)
        return True

    def publish_message(self, item: LogicalMessage, confirm_lsn: int) -> None:
        """A non-transactional logical decoding message (an incremental snapshot's low
        watermark is one), under a ticket of its own ending at `confirm_lsn`."""
        ticket = self.tracker.begin(confirm_lsn)
        msg = item.message
        source = SourceInfo(msg.lsn, 0, time.time_ns() // 1_000_000, None, msg.lsn)
        self._publish_message(msg, source, confirm_lsn, ticket, transactional=False)
        ticket.seal()

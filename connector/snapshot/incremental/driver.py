"""The incremental snapshot's driver: runs the requests of its channels (the signal table, the
``<prefix>.signal`` topic: `channel`, `stores`) inside a streaming session.

The algorithms and why they are correct: `window` (DBLog watermarks written into the WAL) and
`readonly` (no write: the read's snapshot and a WAL horizon), chosen per request by
`channel.read_only_chunks`. This is their IO on the stream's thread: the pipeline calls
`tick` between reads of the stream (it starts the next chunk when none is in flight, takes a
chunk the reader's thread has read, closes a read-only chunk once the stream passed its
horizon, and records the progress of chunks Kafka acknowledged), and the publisher calls
`transaction` before each transaction it publishes (a read-only chunk's rows go out before the
first transaction committed past its horizon), `watermark` for each of our watermark messages
it meets in a transaction, and keeps `open_window.changed` informed while a window is open.
Each chunk looks up its one table in the catalog (`tables.published_table`) on the driver's
connection; the chunk's own SQL (watermarks, the wait, the COPY) and its row encoding run in
the reader's thread, on a connection of its own (`reader`: why the hand-over keeps both
windows' arguments), so the stream never waits for a chunk's read. A table of a request that
no longer exists under its name (dropped or renamed since it was requested: an application's
schema changes) is skipped with one INFO line, the request goes on with the next; one that
exists but is not published fails the request. A table without a key (or keyed by the whole
row) is read whole at a cut instead of in chunks (`whole`: its read in the reader's thread,
its truncate and rows published here when the stream meets its marker), or, read-only, fails
the request with the reason (`whole.table_method`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
from psycopg import sql

from connector.avro import SourceInfo, TableCodec
from connector.errors import SourceError, first_line, is_privilege_error
from connector.names import TableName
from connector.pgoutput.lsn import lsn_to_str
from connector.pgoutput.messages import COLUMN_KEY, Relation
from connector.replication.features import ServerFeatures
from connector.replication.lock_free import lock_wait_bounded
from connector.sink import DeliveryTracker, Sink, Ticket

from ..tables import SnapshotTable, published_table
from . import readonly, signals
from .channel import read_only_chunks
from .chunk_query import chunk_copy_statement
from .reader import ChunkRead, ChunkReader, ChunkSpec, PendingRead, Stopped
from .signal_topic import SignalTopic, TopicRequests
from .stores import RequestStore, TableRequests
from .whole import (
    Busy,
    CutMarker,
    WholeRead,
    WholeSpec,
    lock_statement,
    retry_delay,
    table_method,
    whole_copy_statement,
)
from .window import ChunkAcks, ChunkWindow, SentChunk, Watermark

log = logging.getLogger(__name__)

__all__ = ["IncrementalSnapshots"]

POLL_INTERVAL_S = 1.0
TRUNCATE_INDEX = -1  # txn_index of a whole-table read's truncate: before its row 0
PRUNE_XIDS = 10_000  # streamed xids kept between read-only chunks before they are pruned


@dataclass
class KeyRangeChunk:
    """One chunk of an incremental snapshot (rows in key order), from its start on: read by
    the `ChunkReader`'s thread (`pending`) while the stream goes on, then loaded into its
    window on the stream's thread and produced there (`reader` says when)."""

    request: int
    table_index: int
    table: SnapshotTable
    codec: TableCodec
    window: ChunkWindow
    pending: PendingRead
    read: bool = False  # loaded into the window
    last_key: tuple[str, ...] | None = None  # after the read; None: the table is exhausted
    # Read-only, after the read: when the window closes (`readonly.Chunk`; its rows and the
    # keys the stream drops from them are the `window`'s).
    policy: readonly.Chunk | None = None


@dataclass
class WholeTable:
    """A table without a key read whole at a cut (`whole`), from its start on: read by the
    `ChunkReader`'s thread (`pending`), published on the stream's thread in the transaction
    of its marker."""

    request: int
    table_index: int
    table: SnapshotTable
    codec: TableCodec
    marker: CutMarker
    pending: PendingRead


class IncrementalSnapshots:
    def __init__(self, dsn: str, slot: str, publication: str, features: ServerFeatures,
                 codec_for: Callable[[Relation], TableCodec], sink: Sink,
                 tracker: DeliveryTracker, *, chunk_rows: int,
                 table_requests: bool = True, signal_topic: SignalTopic | None = None,
                 standby: bool = False, position: int = 0) -> None:
        """`table_requests`: take requests from the signal table; `signal_topic`: from the
        ``<prefix>.signal`` topic too (closed with the driver); `standby`: the streamed server
        is one (every chunk read-only); `position`: where the stream starts (P of a read-only
        chunk opened before any transaction was published)."""
        self.slot = slot
        self.publication = publication
        self.features = features
        self.codec_for = codec_for  # Relation -> TableCodec: the stream's own codecs
        self.sink = sink
        self.tracker = tracker
        self.chunk_rows = chunk_rows
        self.run = uuid.uuid4().hex[:12]
        self.dsn = dsn
        self._conn: psycopg.Connection[tuple] | None = None  # type: ignore[type-arg]
        self.reader = ChunkReader(dsn)  # the chunks' reads, in a thread and connection of
        # their own
        self.chunk: KeyRangeChunk | None = None  # read, its watermarks not yet streamed
        self.whole: WholeTable | None = None  # a keyless table read whole, not yet published
        self.busy_attempts = 0  # whole-table reads in a row whose lock was not granted
        self.sequence = 0
        self.request: signals.SnapshotRequest | None = None
        self.table_index = 0
        self.last_key: tuple[str, ...] | None = None
        self.acks = ChunkAcks()  # chunks produced, not yet acknowledged by Kafka
        self.next_poll = 0.0
        self.waited = False  # the last chunk's start gave up on a lock (said once)
        # Told each chunk's table as its rows are published (`DdlResync.published`).
        self.on_read: Callable[[Relation], None] | None = None
        # Tables whose rows no snapshot re-publishes (outbox tables: connector/outbox.py).
        self.skip: Callable[[TableName], bool] | None = None
        # Where requests come from, in this order.
        self.stores: list[RequestStore] = [TableRequests(lambda: self.conn)] \
            if table_requests else []
        self.signal_topic = signal_topic
        if signal_topic is not None:
            self.stores.append(TopicRequests(signal_topic))
        self.enabled = bool(self.stores)  # False: no channel to take requests from
        self.store: RequestStore | None = None  # the current request's
        self.standby = standby  # the streamed server is a standby: every chunk read-only
        # Read-only chunks: the end of the last transaction published (P), and the xids of
        # the transactions streamed that a snapshot may not see yet (`readonly`, step 3).
        self.last_end = position
        self.last_commit = 0  # commit LSN of the last transaction published
        self.recent = readonly.RecentXids()
        self.track_xids = standby or any(s.channel == "kafka" for s in self.stores)

    @property
    def open_window(self) -> ChunkWindow | None:
        """The window between a low watermark the stream has passed and its high one: the
        publisher drops the keys it changes from it."""
        chunk = self.chunk
        return chunk.window if chunk is not None and chunk.window.open else None

    @property
    def conn(self) -> psycopg.Connection[tuple]:  # type: ignore[type-arg]
        """Opened at the first poll; reopened after a failure (the next tick retries)."""
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.dsn, autocommit=True,
                                         application_name="pgcdc incremental snapshot")
        return self._conn

    def close(self) -> None:
        self.reader.close()
        if self._conn is not None:
            self._conn.close()
        if self.signal_topic is not None:
            self.signal_topic.close()

    # ------------------------------------------------------------------ pipeline side

    def tick(self, wal_end: int = 0) -> None:
        """Record acknowledged chunks; read the next chunk if none is in flight; close a
        read-only chunk the stream has passed (`wal_end`: everything before it was streamed)."""
        if not self.enabled:
            return
        try:
            self._record_acknowledged()
            now = time.monotonic()
            chunk = self.chunk
            if chunk is not None:
                if not chunk.read:
                    self._collect(chunk, wal_end)
                elif chunk.policy is not None and chunk.policy.passed(wal_end):
                    self._send_now(chunk, max(wal_end, self.last_end))
                return
            if self.whole is not None:
                self._tick_whole(self.whole, now)
                return
            if now < self.next_poll or self.reader.busy:
                return
            self.next_poll = now + POLL_INTERVAL_S
            if len(self.recent) > PRUNE_XIDS:
                self._prune_xids()
            if not self._current_request():
                return
            # Its table's lookup opens the table (pg_relation_size): on the stream's thread,
            # it must not wait on a migration's lock (replication/lock_free.py).
            with lock_wait_bounded(self.conn):
                self._start_chunk()
            self.waited = False
        except psycopg.errors.LockNotAvailable as exc:  # its table is locked: a later poll
            (log.debug if self.waited else log.info)(
                "incremental snapshot %d: %s (its table is locked by another session, a "
                "migration's?); trying again", self.request.id if self.request else 0,
                first_line(exc))
            self.waited = True
        except psycopg.OperationalError as exc:  # the connection: the session reconnects
            raise SourceError(f"incremental snapshot: {first_line(exc)}",
                              transient=True) from None
        except psycopg.Error as exc:  # the request (a table dropped, no privilege, ...)
            self.chunk = None
            if is_privilege_error(exc):
                lacks = signals.lacking_grant(exc, self.conn.info.user)
                if self.request is None or signals.SIGNAL_TABLE.table in str(exc):
                    raise lacks from None  # the signal table itself: nothing can go on
                self._fail(self.request.id, str(lacks))
                return
            if self.request is None:
                raise SourceError(f"incremental snapshot: {first_line(exc)}") from None
            self._fail(self.request.id, first_line(exc))

    def _current_request(self) -> bool:
        """Whether there is a request to work on (a new one, or the current one not
        cancelled): the channels are asked in order, and one request runs at a time."""
        if self.request is not None and self.store is not None:
            store = self.store
            if store.available() and store.state_of(self.request.id) in ("pending", "running"):
                return True
            log.info("incremental snapshot %d cancelled", self.request.id)
            self.request = None
        for store in self.stores:
            found = store.next_request(self.slot) if store.available() else None
            if found is not None:
                break
        else:
            return False
        self.request, self.store = found, store
        self.table_index, self.last_key = found.table_index, found.last_key
        log.info("incremental snapshot %d of %s (%s, %s): %s", found.id,
                 ", ".join(found.tables), f"requested over {store.channel}",
                 "read-only chunks" if self._read_only(found) else "watermarks in the WAL",
                 "resuming" if found.state == "running" else "starting")
        store.mark_running(found.id)
        return True

    def _read_only(self, request: signals.SnapshotRequest) -> bool:
        return read_only_chunks(standby=self.standby, channel=request.channel)

    def _start_chunk(self) -> None:
        """Start the next chunk: its read goes to the reader's thread (`reader`), its window
        opens here (read-only: at once, at P; DBLog: when the stream meets the low
        watermark the reader writes)."""
        request = self.request
        assert request is not None
        if self.table_index >= len(request.tables):
            # Done only once Kafka has every chunk: until then a restart must read the last
            # chunk again (`window`, "When a request is done").
            if self.acks.may_finish(request.id, self.table_index, len(request.tables)):
                assert self.store is not None
                self.store.set_state(request.id, "done")
                log.info("incremental snapshot %d done", request.id)
                self.request = None
            return
        name = request.tables[self.table_index]
        table = self._table(name)
        if table is None:
            if not self._exists(name):  # the others of the request are still read
                log.info("incremental snapshot %d: %s was dropped or renamed since it was "
                         "requested: skipped", request.id, name)
                self.table_index, self.last_key = self.table_index + 1, None
                return
            self._fail(request.id, f"{name} is not in publication {self.publication}")
            return
        if self.skip is not None and self.skip(table.table_name):
            log.info("incremental snapshot %d: %s is an outbox table, whose rows are events "
                     "already routed: not read again", request.id, name)
            self.table_index, self.last_key = self.table_index + 1, None
            return
        read_only = self._read_only(request)
        key = None if table.relation.replica_identity == "f" else self._key(table)
        method, reason = table_method(replica_identity=table.relation.replica_identity,
                                      has_key=key is not None, read_only=read_only,
                                      partition_of_root=table.read_from is not None)
        if method is None:
            self._fail(request.id, f"{name} {reason}")
            return
        if method == "whole" or key is None:
            self._start_whole(request, table)
            return
        self.sequence += 1
        relation = table.relation
        columns = [c.name for c in relation.columns]
        codec = self.codec_for(relation)
        window = ChunkWindow(self.sequence, relation.relation_id)
        if read_only:
            window.low_seen()  # open from P on: every transaction streamed later
        spec = ChunkSpec(
            chunk_copy_statement(relation.namespace, relation.name, columns, key,
                                 self.last_key, self.chunk_rows, table.row_filter),
            codec.copy_encoder("r"), [columns.index(k) for k, _ in key], self.chunk_rows,
            self.run, self.sequence,
            position=self.last_end if read_only else None,
            before=self.recent.copy() if read_only else None)
        self.chunk = KeyRangeChunk(request.id, self.table_index, table, codec, window,
                                   self.reader.start(spec))

    def _start_whole(self, request: signals.SnapshotRequest, table: SnapshotTable) -> None:
        """Read a table without a key whole at a cut (`whole`): the lock, the marker and the
        COPY in the reader's thread; the stream publishes the rows at the marker."""
        self.sequence += 1
        relation = table.relation
        columns = [c.name for c in relation.columns]
        codec = self.codec_for(relation)
        marker = CutMarker(self.run, self.sequence)
        spec = WholeSpec(lock_statement(relation.namespace, relation.name),
                         whole_copy_statement(relation.namespace, relation.name, columns,
                                              table.row_filter),
                         codec.copy_encoder("r"), marker)
        log.info("incremental snapshot %d: %s has no key: read whole at one point of the "
                 "stream (its writes wait while it is read)", request.id, table.name)
        self.whole = WholeTable(request.id, self.table_index, table, codec, marker,
                                self.reader.start_whole(spec))

    def _tick_whole(self, whole: WholeTable, now: float) -> None:
        """A whole-table read whose thread failed is given up (its marker, if its transaction
        committed after all, is ignored): tried again later when the lock was busy; another
        error is the tick's. One that succeeded waits for its marker in the stream."""
        pending = whole.pending
        if not pending.done.is_set() or pending.error is None:
            return
        self.whole = None
        if pending.result is not None:
            pending.result.spool.close()
        error = pending.error
        if isinstance(error, Stopped):
            return
        if isinstance(error, Busy):
            wait = retry_delay(self.busy_attempts)
            self.busy_attempts += 1
            log.info("incremental snapshot %d: %s is being written by a long transaction (its "
                     "SHARE lock was not granted): trying again in %.0f s", whole.request,
                     whole.table.name, wait)
            self.next_poll = now + wait
            return
        raise error

    def _send_whole(self, whole: WholeTable, ticket: Ticket) -> None:
        """Publish a whole-table read (`whole`) under its marker's transaction's `ticket`: a
        truncate at (m, -1), then every row at (m, n). The request moves past the table once
        Kafka has them all."""
        result: WholeRead | None = whole.pending.result
        if result is None:  # stored before the marker's transaction committed (`reader`)
            raise RuntimeError(f"whole-table read {whole.marker.sequence}: marker before the "
                               "read")
        self.whole = None  # (a failure below: the request takes the table again)
        self.busy_attempts = 0
        codec = whole.codec
        topic = codec.topic
        produce = self.sink.produce
        position = result.position
        spool = result.spool
        try:
            self.sink.produce_truncate(topic, codec.truncate(SourceInfo(
                position, TRUNCATE_INDEX, time.time_ns() // 1_000_000, None, position,
                "incremental")), ticket)
            for key, value in spool.events():
                produce(topic, key, value, ticket)
        finally:
            spool.close()
        if self.on_read is not None:
            self.on_read(whole.table.relation)
        self.table_index, self.last_key = whole.table_index + 1, None
        self.acks.sent(SentChunk(ticket.end_lsn, whole.request, self.table_index, None,
                                 spool.count))
        log.info("incremental snapshot %d: %s published whole (a truncate and %d rows at %s); "
                 "done with it once Kafka acknowledges them", whole.request, whole.table.name,
                 spool.count, lsn_to_str(position))
        self.next_poll = 0.0  # the next table at once

    def _collect(self, chunk: KeyRangeChunk, wal_end: int) -> None:
        """The reader's thread is done with `chunk`: its error is raised here (handled as the
        tick's own), its rows loaded; a read-only chunk whose horizon the stream already
        passed is produced at once (`reader`)."""
        pending = chunk.pending
        if not pending.done.is_set():
            return
        if pending.error is not None:
            self.chunk = None
            if isinstance(pending.error, Stopped):
                return
            raise pending.error
        assert pending.result is not None
        self._load(chunk, pending.result)
        policy = chunk.policy
        # The stream passed h before the rows came: a transaction committed past it was
        # published, or a keepalive reached it.
        if policy is not None and (policy.streamed(self.last_commit, set()) or
                                   policy.passed(wal_end)):
            self._send_now(chunk, max(wal_end, self.last_end))

    def _load(self, chunk: KeyRangeChunk, read: ChunkRead) -> None:
        """On the stream's thread: the rows into the window (dropping the keys the stream
        changed since the window opened)."""
        chunk.policy = read.policy
        chunk.window.load(read.events)
        chunk.last_key = read.last_key
        chunk.read = True
        if read.policy is not None:
            self.recent.unseen(read.policy.snapshot)  # forget what every later read sees
        if self.on_read is not None:
            self.on_read(chunk.table.relation)

    def _send_now(self, chunk: KeyRangeChunk, end_lsn: int) -> None:
        """A read-only chunk the stream has passed, between two transactions: its rows under
        a ticket of their own, ending at `end_lsn` (not before any ticket begun: the stream's
        position)."""
        ticket = self.tracker.begin(end_lsn)
        self._send(chunk, ticket.end_lsn, ticket)
        ticket.seal()

    def _prune_xids(self) -> None:
        """Forget the streamed xids every snapshot sees now (`RecentXids.unseen`)."""
        row = self.conn.execute("SELECT pg_current_snapshot()::text").fetchone()
        assert row is not None
        self.recent.unseen(readonly.Snapshot.parse(row[0]))

    def _table(self, name: str) -> SnapshotTable | None:
        """The published table a request names (its stored ``schema.table`` text): one catalog
        lookup of the tables the text may name, the first in (schema, table) order."""
        return published_table(self.conn, self.publication, self.features,
                               TableName.readings(name))

    def _exists(self, name: str) -> bool:
        """Whether a relation of the name a request stored exists now (to_regclass: no error
        for one dropped or renamed since)."""
        readings = [sql.Identifier(*r).as_string(self.conn) for r in TableName.readings(name)]
        row = self.conn.execute("SELECT coalesce(bool_or(to_regclass(x) IS NOT NULL), false)"
                                " FROM unnest(%s::text[]) AS x", (readings,)).fetchone()
        return bool(row and row[0])

    def _key(self, table: SnapshotTable) -> list[tuple[str, str]] | None:
        """(column, type) of the key the chunks are ordered by: the replica identity's columns
        (None for NOTHING, or a missing index)."""
        relation = table.relation
        if relation.replica_identity == "n":
            return None
        names = [c.name for c in relation.columns if c.flags & COLUMN_KEY]
        if not names:
            return None
        types: dict[str, str] = dict(self.conn.execute(
            "SELECT attname::text, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped",
            (relation.relation_id,)).fetchall())
        return [(n, types[n]) for n in names]

    def _fail(self, request_id: int, message: str) -> None:
        log.error("incremental snapshot %d failed: %s", request_id, message)
        if self.store is not None:
            self.store.set_state(request_id, "failed", message)
        self.request = None

    def _record_acknowledged(self) -> None:
        for chunk in self.acks.acknowledged(self.tracker.delivered_lsn()):
            # One request at a time, done only once its chunks are all acknowledged: a
            # chunk's request is the current one (or one cancelled meanwhile, same store).
            if self.store is not None:
                self.store.record_progress(chunk.request, chunk.table_index, chunk.last_key,
                                           chunk.rows)

    # ------------------------------------------------------------------ publisher side

    def transaction(self, xid: int, commit_lsn: int, end_lsn: int, ticket: Ticket) -> None:
        """A transaction the publisher is about to publish under `ticket`: a read-only chunk
        whose horizon it is past produces its rows first (`readonly`, step 5); its xid is
        kept for the visibility check of the next reads (step 3)."""
        if self.track_xids:
            self.recent.streamed(xid)
        chunk = self.chunk
        if chunk is not None and not chunk.read and chunk.pending.done.is_set() and \
                chunk.pending.error is None:  # read meanwhile (an error waits for the tick)
            assert chunk.pending.result is not None
            self._load(chunk, chunk.pending.result)
        if chunk is not None and chunk.policy is not None and \
                chunk.policy.streamed(commit_lsn, set()):  # the window drops keys itself
            self._send(chunk, end_lsn, ticket)
        self.last_end = end_lsn
        self.last_commit = commit_lsn

    def watermark(self, content: bytes, end_lsn: int, ticket: Ticket) -> None:
        """One of our watermark messages, met in the stream: the low one (non-transactional)
        opens the chunk's window, the high one (in a transaction ending at `end_lsn`) produces
        the window's events under that transaction's `ticket`; a whole-table read's marker
        (`whole.CutMarker`, transactional) produces its truncate and rows under its
        transaction's ticket. Marks of another run (a killed producer's, replayed after a
        restart) or of an attempt given up are ignored."""
        marker = CutMarker.parse(content)
        if marker is not None:
            if self.whole is not None and marker == self.whole.marker:
                self._send_whole(self.whole, ticket)
            return
        mark = Watermark.parse(content)
        chunk = self.chunk
        if mark is None or chunk is None or mark.run != self.run or \
                mark.chunk != chunk.window.chunk:
            return
        if not mark.high:
            chunk.window.low_seen()
            return
        if not chunk.read:  # stored before the high watermark was written (`reader`)
            result = chunk.pending.result
            if result is None:
                raise RuntimeError(f"chunk {mark.chunk}: high watermark before the read")
            self._load(chunk, result)
        self._send(chunk, end_lsn, ticket)

    def _send(self, chunk: KeyRangeChunk, end_lsn: int, ticket: Ticket) -> None:
        """Produce the chunk's rows still in its window under `ticket` (acknowledged with the
        transaction ending at `end_lsn`) and move the request on."""
        events = chunk.window.high_seen()
        topic = chunk.codec.topic
        produce = self.sink.produce
        for key, value in events:
            produce(topic, key, value, ticket)
        self.chunk = None
        if chunk.last_key is None:
            self.table_index, self.last_key = chunk.table_index + 1, None
        else:
            self.table_index, self.last_key = chunk.table_index, chunk.last_key
        self.acks.sent(SentChunk(end_lsn, chunk.request, self.table_index, self.last_key,
                                 len(events)))
        request = self.request
        if request is not None and request.id == chunk.request and \
                self.table_index >= len(request.tables):
            log.info("incremental snapshot %d: last chunk sent, done once Kafka acknowledges "
                     "it", chunk.request)
        self.next_poll = 0.0  # the next chunk at once

"""The incremental snapshot's driver: runs the requests of its channels (the signal table, the
``<prefix>.signal`` topic: `channel`, `stores`) inside a streaming session.

The algorithms and why they are correct: `window` (DBLog watermarks written into the WAL) and
`readonly` (no write: the read's snapshot and a WAL horizon), chosen per request by
`channel.read_only_chunks`. This is their IO: the pipeline calls `tick` between reads of the
stream (it reads the next chunk when none is in flight, closes a read-only chunk once the
stream passed its horizon, and records the progress of chunks Kafka acknowledged), and the
publisher calls `transaction` before each transaction it publishes (a read-only chunk's rows
go out before the first transaction committed past its horizon), `watermark` for each of our
watermark messages it meets in a transaction, and keeps `open_window.changed` informed while a
window is open. Each chunk looks up its one table in the catalog (`tables.published_table`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from connector.avro import SourceInfo, TableCodec
from connector.control import WATERMARK_PREFIX
from connector.errors import SourceError, first_line, is_privilege_error
from connector.names import TableName
from connector.pgoutput.messages import COLUMN_KEY, Relation
from connector.replication.features import ServerFeatures
from connector.sink import DeliveryTracker, Sink, Ticket

from ..copytext import parse_copy_text
from ..tables import SnapshotTable, published_table
from . import readonly, signals
from .channel import read_only_chunks
from .chunk_query import chunk_copy_statement
from .signal_topic import SignalTopic, TopicRequests
from .stores import RequestStore, TableRequests
from .window import ChunkAcks, ChunkWindow, SentChunk, Watermark

log = logging.getLogger(__name__)

__all__ = ["IncrementalSnapshots"]

POLL_INTERVAL_S = 1.0
XIP_CHECK_S = 0.01  # how often a chunk checks whether older transactions have ended
XIP_WAIT_LOG_S = 10.0
PRUNE_XIDS = 10_000  # streamed xids kept between read-only chunks before they are pruned

# A WAL position no commit visible in the read's snapshot lies beyond (`readonly`, step 2).
# On a standby the receive position (a commit is replayed after it was received), or the
# replay position when the walreceiver restarted (it then reports the start of a segment).
HORIZON = ("SELECT (CASE WHEN pg_is_in_recovery() THEN greatest(pg_last_wal_receive_lsn(), "
           "pg_last_wal_replay_lsn()) ELSE pg_current_wal_insert_lsn() END) - '0/0'")


@dataclass
class KeyRangeChunk:
    """One chunk of an incremental snapshot (rows in key order), from its low watermark on:
    waiting for older transactions, then read, then waiting for its high watermark in the
    stream."""

    request: int
    table_index: int
    table: SnapshotTable
    codec: TableCodec
    key: list[tuple[str, str]]
    window: ChunkWindow
    low: int  # the low watermark's LSN: the rows' position
    running: str  # the transactions running at the low watermark (txid_snapshot text)
    since: float  # monotonic time of the low watermark
    read: bool = False
    last_key: tuple[str, ...] | None = None  # after the read; None: the table is exhausted
    read_only: bool = False  # `readonly`: `low` is P, the window opened at once
    # Read-only, after the read: when the window closes (`readonly.Chunk`; its rows and the
    # keys the stream drops from them are the `window`'s).
    policy: readonly.Chunk | None = None


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
        self.chunk: KeyRangeChunk | None = None  # read, its watermarks not yet streamed
        self.sequence = 0
        self.request: signals.SnapshotRequest | None = None
        self.table_index = 0
        self.last_key: tuple[str, ...] | None = None
        self.acks = ChunkAcks()  # chunks produced, not yet acknowledged by Kafka
        self.next_poll = 0.0
        self.next_wait_warning = 0.0
        self.next_check = 0.0
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
                if not chunk.read and now >= self.next_check:
                    self.next_check = now + XIP_CHECK_S
                    self._read_when_ready(chunk, now)
                if chunk.policy is not None and chunk.policy.passed(wal_end):
                    ticket = self.tracker.begin(max(wal_end, self.last_end))
                    self._send(chunk, ticket.end_lsn, ticket)
                    ticket.seal()
                return
            if now < self.next_poll:
                return
            self.next_poll = now + POLL_INTERVAL_S
            if len(self.recent) > PRUNE_XIDS:
                self._prune_xids()
            if not self._current_request():
                return
            self._start_chunk()
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
        finally:
            conn = self._conn
            if conn is not None and not conn.closed and conn.info.transaction_status in (
                    psycopg.pq.TransactionStatus.INTRANS, psycopg.pq.TransactionStatus.INERROR):
                conn.execute("ROLLBACK")  # a read-only chunk's read that failed

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
        """Emit the next chunk's low watermark; the read follows once the transactions running
        now have ended (at once, usually)."""
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
            self._fail(request.id, f"{name} is not in publication {self.publication}")
            return
        if self.skip is not None and self.skip(table.table_name):
            log.info("incremental snapshot %d: %s is an outbox table, whose rows are events "
                     "already routed: not read again", request.id, name)
            self.table_index, self.last_key = self.table_index + 1, None
            return
        if table.relation.replica_identity == "f":
            self._fail(request.id, f"{name} has REPLICA IDENTITY FULL: its events are keyed "
                       "by the whole row, so a snapshot row cannot be told from a changed one")
            return
        key = self._key(table)
        if key is None:
            self._fail(request.id, f"{name} has no primary key (or replica identity index): "
                       "an incremental snapshot needs one to tell its rows from newer changes")
            return
        self.sequence += 1
        if self._read_only(request):
            window = ChunkWindow(self.sequence, table.relation.relation_id)
            window.low_seen()  # open from P on: every transaction streamed later
            self.chunk = KeyRangeChunk(request.id, self.table_index, table,
                                       self.codec_for(table.relation), key, window,
                                       self.last_end, "", time.monotonic(), read_only=True)
            self._read_read_only(self.chunk, self.chunk.since)
            return
        low = self._emit(Watermark(self.run, self.sequence, high=False))
        # The txid_* spelling exists on every supported server (pg_current_snapshot: 13+).
        running = self.conn.execute("SELECT txid_current_snapshot()::text").fetchone()
        assert running is not None
        chunk = KeyRangeChunk(request.id, self.table_index, table,
                              self.codec_for(table.relation), key,
                              ChunkWindow(self.sequence, table.relation.relation_id), low,
                              running[0], time.monotonic())
        self.chunk = chunk
        self._read_when_ready(chunk, chunk.since)

    def _read_when_ready(self, chunk: KeyRangeChunk, now: float) -> None:
        """Read the chunk once every transaction running at its low watermark has ended (see
        "The visibility race"); meanwhile the stream goes on and the window remembers the keys
        it changes."""
        if chunk.read_only:
            self._read_read_only(chunk, now)
            return
        if self.conn.execute(
                "SELECT count(*) FROM txid_snapshot_xip(%s::txid_snapshot) x "
                "WHERE txid_status(x) = 'in progress'", (chunk.running,)).fetchone() != (0,):
            if now - chunk.since > XIP_WAIT_LOG_S and now >= self.next_wait_warning:
                log.warning("incremental snapshot: waiting for transactions that were running "
                            "when the chunk started to end (long-running, or idle in "
                            "transaction?)")
                self.next_wait_warning = now + 60
            return
        relation = chunk.table.relation
        columns = [c.name for c in relation.columns]
        statement = chunk_copy_statement(*chunk.table.source, columns, chunk.key,
                                         self.last_key, self.chunk_rows,
                                         chunk.table.row_filter)
        events: dict[bytes, bytes] = {}
        last = self._read_events(statement, chunk.codec, events, chunk.low)
        chunk.window.load(events)
        if self.on_read is not None:
            self.on_read(relation)
        self._emit(Watermark(self.run, chunk.window.chunk, high=True))
        if len(events) >= self.chunk_rows:
            row = parse_copy_text(last)
            chunk.last_key = tuple(str(row[columns.index(k)]) for k, _ in chunk.key)
        chunk.read = True

    def _read_read_only(self, chunk: KeyRangeChunk, now: float) -> None:
        """`readonly` steps 2 and 3: the snapshot S, the chunk and the horizon h in one
        REPEATABLE READ transaction; the read is dropped (and tried again at the next check)
        while S misses a transaction the stream already delivered."""
        relation = chunk.table.relation
        columns = [c.name for c in relation.columns]
        conn = self.conn
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        row = conn.execute("SELECT pg_current_snapshot()::text").fetchone()
        assert row is not None
        snapshot = readonly.Snapshot.parse(row[0])
        if self.recent.unseen(snapshot):  # not ready (`readonly.Chunk.ready`): read again
            conn.execute("ROLLBACK")
            if now - chunk.since > XIP_WAIT_LOG_S and now >= self.next_wait_warning:
                log.warning("incremental snapshot: a transaction the stream delivered is "
                            "still not visible to a new snapshot (a standby replaying slowly?)")
                self.next_wait_warning = now + 60
            return
        statement = chunk_copy_statement(relation.namespace, relation.name, columns, chunk.key,
                                         self.last_key, self.chunk_rows,
                                         chunk.table.row_filter)
        events: dict[bytes, bytes] = {}
        last = self._read_events(statement, chunk.codec, events, chunk.low)
        horizon = conn.execute(HORIZON).fetchone()
        conn.execute("COMMIT")
        assert horizon is not None
        chunk.policy = readonly.Chunk(chunk.low, snapshot, int(horizon[0]))
        chunk.window.load(events)
        if self.on_read is not None:
            self.on_read(relation)
        if len(events) >= self.chunk_rows:
            parsed = parse_copy_text(last)
            chunk.last_key = tuple(str(parsed[columns.index(k)]) for k, _ in chunk.key)
        chunk.read = True

    def _prune_xids(self) -> None:
        """Forget the streamed xids every snapshot sees now (`RecentXids.unseen`)."""
        row = self.conn.execute("SELECT pg_current_snapshot()::text").fetchone()
        assert row is not None
        self.recent.unseen(readonly.Snapshot.parse(row[0]))

    def _read_events(self, statement: Any, codec: TableCodec, events: dict[bytes, bytes],
                     low: int) -> bytes:
        """COPY the chunk into `events` (key -> value, each row an ``r`` event at (low, n));
        returns the last COPY line (the next chunk's bound)."""
        encode = codec.copy_encoder("r")
        ts_ms = time.time_ns() // 1_000_000
        last = b""
        with self.conn.cursor().copy(statement) as copy:
            for number, data in enumerate(copy):
                line = bytes(data)
                source = SourceInfo(low, number, ts_ms, None, low, "incremental")
                event = encode(line, source, None, None)
                assert event[0] is not None  # the table has a key (checked by the caller)
                events[event[0]] = event[1]
                last = line
        return last

    def _table(self, name: str) -> SnapshotTable | None:
        """The published table a request names (its stored ``schema.table`` text): one catalog
        lookup of the tables the text may name, the first in (schema, table) order."""
        return published_table(self.conn, self.publication, self.features,
                               TableName.readings(name))

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

    def _emit(self, mark: Watermark) -> int:
        """Write a watermark into the WAL; its LSN. The low one is non-transactional (decoded
        where it was written), the high one transactional (its commit flushes both)."""
        row = self.conn.execute("SELECT pg_logical_emit_message(%s, %s, %s) - '0/0'",
                                (mark.high, WATERMARK_PREFIX, mark.content())).fetchone()
        assert row is not None
        return int(row[0])

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
        if chunk is not None and chunk.policy is not None and \
                chunk.policy.streamed(commit_lsn, set()):  # the window drops keys itself
            self._send(chunk, end_lsn, ticket)
        self.last_end = end_lsn

    def watermark(self, content: bytes, end_lsn: int, ticket: Ticket) -> None:
        """One of our watermark messages, met in the stream: the low one (non-transactional)
        opens the chunk's window, the high one (in a transaction ending at `end_lsn`) produces
        the window's events under that transaction's `ticket`. Watermarks of another run (a
        killed producer's, replayed after a restart) are ignored."""
        mark = Watermark.parse(content)
        chunk = self.chunk
        if mark is None or chunk is None or mark.run != self.run or \
                mark.chunk != chunk.window.chunk:
            return
        if not mark.high:
            chunk.window.low_seen()
            return
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

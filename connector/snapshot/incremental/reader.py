"""The incremental snapshot's chunk reader: a chunk's SQL (watermarks, the wait for older
transactions, the COPY by key) and its row encoding, in a thread with its own connection, so
the stream goes on consuming and publishing while a chunk is read (issue 36, part 3).

Who does what. The stream's thread (`driver`) decides what to read (the request, the table,
its key, the bound), opens the chunk's window, and later produces the rows: production to
Kafka, the window and every decision that depends on the stream's order stay on the stream's
thread. This thread only reads, and hands over one `ChunkRead` per chunk; it never touches the
window, the sink or the delivery tracker. One chunk is read at a time (the driver starts the
next one only once the last one was produced and its thread ended), each in a thread of its
own (a chunk takes ~0.1 s; a thread is ~0.1 ms), on the reader's one connection.

Why the hand-over keeps the windows' arguments (`window`, `readonly`). Both arguments are
about *positions*: where the read's snapshot lies in the WAL (l and the wait on the xip list;
P, S and h) and where the rows are produced relative to the stream's transactions (at the high
watermark's transaction; before the first transaction committed past h). Neither says which
thread reads, nor when, in wall time, the rows reach the stream's thread:

* DBLog: the thread emits the low watermark, waits for the transactions running then to end,
  reads, stores the `ChunkRead` (`PendingRead.result`) and only then emits the high
  watermark. The stream decodes the high watermark after it was written, so when it meets it
  the read is there to take (a happens-before through the server: the store precedes the
  ``pg_logical_emit_message`` call that makes the record the stream decodes). Meanwhile the
  window is open from the low watermark on and remembers every key the stream changes
  (`ChunkWindow.touched`), dropped at the load: the same window as when the read blocked the
  stream, only the stream no longer waits.
* Read-only: P is taken on the stream's thread when the chunk opens (between two published
  transactions) with a copy of the xids streamed before P (`RecentXids.copy`): the read's S
  must see exactly those (`readonly` step 3; a transaction streamed after P is the window's
  business, so the copy, not the live set, is checked: the live set grows while the thread
  reads and would reject good reads for ever under load). The result reaches the stream's
  thread after some transactions past P were published; the window dropped their keys. If
  one of them committed past h, the stream already passed h: the rows are produced at once,
  before the next transaction (`IncrementalSnapshots._collect`). A key such a transaction
  changed was dropped, and every other key's events past h come after the rows, so "older in
  both orders, or newer in both" holds as in `readonly`; dropping the keys of a transaction
  past h only leaves their newer state to the stream.

* A table without a key, read whole (`whole`, `start_whole`): the thread takes the table's
  SHARE lock, writes the transactional cut marker, COPYs every row into a spool file, stores
  the `WholeRead` and only then commits. The stream decodes the marker at that commit, so
  when it meets it the read is there to take, as with a DBLog high watermark.

The GIL: the encoding is one C call per row that holds it (~1.5 µs); the stream's thread gets
it back at the next switch interval (5 ms), and the COPY's network waits release it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from connector.avro import SourceInfo
from connector.avro.table_codec import CopyEncoder
from connector.control import WATERMARK_PREFIX
from connector.pgtypes.session import OUTPUT_STATEMENTS

from ..copytext import parse_copy_text
from . import readonly
from .whole import LOCK_TIMEOUT_S, Busy, Spool, WholeRead, WholeSpec
from .window import Watermark

log = logging.getLogger(__name__)

__all__ = ["ChunkRead", "ChunkReader", "ChunkSpec", "PendingRead"]

XIP_CHECK_S = 0.01  # how often a chunk checks whether older transactions have ended
XIP_WAIT_LOG_S = 10.0

# A WAL position no commit visible in the read's snapshot lies beyond (`readonly`, step 2).
# On a standby the receive position (a commit is replayed after it was received), or the
# replay position when the walreceiver restarted (it then reports the start of a segment).
HORIZON = ("SELECT (CASE WHEN pg_is_in_recovery() THEN greatest(pg_last_wal_receive_lsn(), "
           "pg_last_wal_replay_lsn()) ELSE pg_current_wal_insert_lsn() END) - '0/0'")


class Stopped(Exception):
    """The reader was closed while a chunk waited: nothing was read."""


@dataclass(frozen=True)
class ChunkSpec:
    """What to read, decided on the stream's thread: the COPY `statement`, the `encode`r of
    the table's codec, the key columns' positions among the copied columns (the next chunk's
    bound), and the window kind's inputs."""

    statement: Any  # psycopg.sql.Composed
    encode: CopyEncoder
    key_columns: list[int]
    limit: int
    run: str
    sequence: int
    # Read-only: P and the xids streamed before it; None for a DBLog chunk.
    position: int | None = None
    before: readonly.RecentXids | None = None


@dataclass
class ChunkRead:
    """A chunk as read: its events (key -> value, key order), where the next chunk starts
    (None: the table is exhausted), and for a read-only chunk its window policy."""

    events: dict[bytes, bytes]
    last_key: tuple[str, ...] | None
    policy: readonly.Chunk | None = None


class PendingRead:
    """A chunk being read. `result` is set before a DBLog chunk's high watermark is emitted
    (a whole-table read's before its lock is released: `whole`); `done` once the thread ended,
    with `result` or `error`."""

    def __init__(self) -> None:
        self.result: Any = None  # ChunkRead (a chunk) or WholeRead (`start_whole`)
        self.error: BaseException | None = None
        self.done = threading.Event()


class ChunkReader:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._conn: psycopg.Connection[tuple] | None = None  # type: ignore[type-arg]
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def _connection(self) -> psycopg.Connection[tuple]:  # type: ignore[type-arg]
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.dsn, autocommit=True,
                                         application_name="pgcdc incremental snapshot reader")
            for setting in OUTPUT_STATEMENTS:  # the chunks' text as the stream's
                self._conn.execute(setting)
        return self._conn

    @property
    def busy(self) -> bool:
        """The last chunk's thread has not ended: a DBLog chunk's rows can be produced while
        its thread still waits for the reply to its high watermark (the stream decoded it
        first), and its connection is in use until then."""
        return self._thread is not None and self._thread.is_alive()

    def start(self, spec: ChunkSpec) -> PendingRead:
        """Read `spec` in a thread of its own (the previous one has ended)."""
        if self.busy:
            raise RuntimeError("a chunk is still being read")
        pending = PendingRead()
        read: Callable[[Any, ChunkSpec, PendingRead], ChunkRead] = \
            self._read_only if spec.position is not None else self._read_dblog
        self._thread = threading.Thread(target=self._run, args=(read, spec, pending),
                                        name="pgcdc-chunk-reader", daemon=True)
        self._thread.start()
        return pending

    def start_whole(self, spec: WholeSpec) -> PendingRead:
        """Read a table whole at a cut (`whole`), in a thread of its own (the previous one has
        ended); its `PendingRead.result` is a `WholeRead`."""
        if self.busy:
            raise RuntimeError("a chunk is still being read")
        pending = PendingRead()
        self._thread = threading.Thread(target=self._run, args=(_read_whole, spec, pending),
                                        name="pgcdc-whole-reader", daemon=True)
        self._thread.start()
        return pending

    def close(self) -> None:
        """Stop a chunk waiting for older transactions; close the connection once no chunk
        uses it (a read in progress closes it when it ends)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread.is_alive():
            thread.join(5.0)
            if thread.is_alive():
                return
        if self._conn is not None:
            self._conn.close()

    def _run(self, read: Callable[[Any, Any, PendingRead], Any], spec: Any,
             pending: PendingRead) -> None:
        try:
            pending.result = read(self._connection(), spec, pending)
        except BaseException as exc:  # noqa: BLE001 -- handed to the stream's thread
            pending.error = exc
            conn = self._conn
            try:
                if conn is not None and not conn.closed and conn.info.transaction_status in (
                        psycopg.pq.TransactionStatus.INTRANS,
                        psycopg.pq.TransactionStatus.INERROR):
                    conn.execute("ROLLBACK")  # a read-only chunk's read that failed
            except psycopg.Error:
                conn.close()  # type: ignore[union-attr]
        finally:
            if self._stop.is_set() and self._conn is not None:
                self._conn.close()
            pending.done.set()

    def _wait_until(self, ready: Callable[[], bool], waiting_for: str) -> None:
        """Poll `ready` every XIP_CHECK_S until it holds, warning after XIP_WAIT_LOG_S and
        then every minute; `Stopped` when the reader is closed meanwhile."""
        since = time.monotonic()
        next_warning = since + XIP_WAIT_LOG_S
        while not ready():
            if self._stop.wait(XIP_CHECK_S):
                raise Stopped()
            if time.monotonic() >= next_warning:
                log.warning("incremental snapshot: %s, for %.0f s", waiting_for,
                            time.monotonic() - since)
                next_warning += 60

    def _read_dblog(self, conn: Any, spec: ChunkSpec, pending: PendingRead) -> ChunkRead:
        """`window` steps 1-4: the low watermark, the wait for the transactions running then
        (the visibility race), the read, then the high watermark (after the result is
        stored: the stream takes it when it meets the high watermark)."""
        low = _emit(conn, Watermark(spec.run, spec.sequence, high=False))
        # The txid_* spelling exists on every supported server (pg_current_snapshot: 13+).
        row = conn.execute("SELECT txid_current_snapshot()::text").fetchone()
        running = row[0]
        self._wait_until(
            lambda: conn.execute(
                "SELECT count(*) FROM txid_snapshot_xip(%s::txid_snapshot) x "
                "WHERE txid_status(x) = 'in progress'", (running,)).fetchone() == (0,),
            "waiting for transactions that were running when the chunk started to end "
            "(long-running, or idle in transaction?)")
        result = _copy(conn, spec, low)
        pending.result = result
        _emit(conn, Watermark(spec.run, spec.sequence, high=True))
        return result

    def _read_only(self, conn: Any, spec: ChunkSpec, pending: PendingRead) -> ChunkRead:
        """`readonly` steps 2 and 3: the snapshot S, the chunk and the horizon h in one
        REPEATABLE READ transaction, read again while S misses a transaction streamed
        before P."""
        before = spec.before
        assert spec.position is not None and before is not None
        taken: list[readonly.Snapshot] = []

        def sees_every_streamed_transaction() -> bool:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            row = conn.execute("SELECT pg_current_snapshot()::text").fetchone()
            taken[:] = [readonly.Snapshot.parse(row[0])]
            if not before.unseen(taken[0]):
                return True  # the transaction stays open: the chunk is read in it
            conn.execute("ROLLBACK")  # not ready (`readonly.Chunk.ready`): read again
            return False

        self._wait_until(sees_every_streamed_transaction,
                         "a transaction the stream delivered is still not visible to a new "
                         "snapshot (a standby replaying slowly?)")
        snapshot = taken[0]
        result = _copy(conn, spec, spec.position)
        horizon = conn.execute(HORIZON).fetchone()
        conn.execute("COMMIT")
        result.policy = readonly.Chunk(spec.position, snapshot, int(horizon[0]))
        return result


def _emit(conn: Any, mark: Watermark) -> int:
    """Write a watermark into the WAL; its LSN. The low one is non-transactional (decoded
    where it was written), the high one transactional (its commit flushes both)."""
    row = conn.execute("SELECT pg_logical_emit_message(%s, %s, %s) - '0/0'",
                       (mark.high, WATERMARK_PREFIX, mark.content())).fetchone()
    return int(row[0])


def _copy(conn: Any, spec: ChunkSpec, position: int) -> ChunkRead:
    """COPY the chunk, each row an ``r`` event at (position, n)."""
    encode = spec.encode
    ts_ms = time.time_ns() // 1_000_000
    events: dict[bytes, bytes] = {}
    last = b""
    with conn.cursor().copy(spec.statement) as copy:
        for number, data in enumerate(copy):
            line = bytes(data)
            event = encode(line, SourceInfo(position, number, ts_ms, None, position,
                                            "incremental"), None, None)
            assert event[0] is not None  # the table has a key (checked by the driver)
            events[event[0]] = event[1]
            last = line
    last_key = None
    if len(events) >= spec.limit:
        row = parse_copy_text(last)
        last_key = tuple(str(row[i]) for i in spec.key_columns)
    return ChunkRead(events, last_key)


def _read_whole(conn: Any, spec: WholeSpec, pending: PendingRead) -> WholeRead:
    """`whole` steps 1-4: the SHARE lock, the marker (the snapshot), the COPY into a spool,
    the hand-over, then the commit that puts the marker in the stream and lets the table's
    writers go on."""
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    conn.execute(f"SET LOCAL lock_timeout = {int(LOCK_TIMEOUT_S * 1000)}")
    try:
        conn.execute(spec.lock)
    except psycopg.errors.LockNotAvailable:
        conn.execute("ROLLBACK")
        raise Busy() from None
    row = conn.execute("SELECT pg_logical_emit_message(true, %s, %s) - '0/0'",
                       (WATERMARK_PREFIX, spec.marker.content())).fetchone()
    position = int(row[0])
    encode = spec.encode
    spool = Spool()
    try:
        ts_ms = time.time_ns() // 1_000_000
        with conn.cursor().copy(spec.statement) as copy:
            for number, data in enumerate(copy):
                key, value = encode(bytes(data), SourceInfo(
                    position, number, ts_ms, None, position, "incremental"), None, None)
                spool.add(key, value)
    except BaseException:
        spool.close()
        raise
    result = WholeRead(position, spool)
    pending.result = result  # before the commit: the writers of the table wait until then
    conn.execute("COMMIT")
    return result

"""The incremental snapshot's chunk window: a table's rows re-read in key-ordered chunks while
streaming goes on, and why no chunk row overwrites a newer change (pure).

The algorithm is DBLog's (Netflix, 2020): no lock, no long transaction, no pause of the
stream. For each chunk of a table (rows with key > the previous chunk's last key, in key
order, at most ``chunk_rows``: `chunk_query`), on a normal connection to the source
(`driver`):

1. emit the low watermark: ``pg_logical_emit_message(false, 'pgcdc.snapshot', '<run>:<n>:low')``
   at WAL position l (non-transactional: it is decoded where it was written, so the stream
   sends every transaction committed before l ahead of it and every later one after it);
2. take S0 = ``txid_current_snapshot()`` and wait until every transaction in S0's xip list
   has ended (``txid_status``): see "The visibility race" below. The stream goes on
   meanwhile: keys it changes after l are remembered and dropped from the rows once read;
3. read the chunk, one statement (its own snapshot S):
   ``COPY (SELECT <published columns> FROM t WHERE (k1, k2) > (...) ORDER BY k1, k2 LIMIT n)``,
   and encode each row as an ``r`` event with ``source.snapshot = "incremental"``,
   ``source.commit_lsn = source.lsn = l`` and ``source.txn_index`` = its number in the chunk;
4. emit the high watermark ``'<run>:<n>:high'`` in a transaction of its own, committing at h
   (its commit flushes the WAL, so both watermarks reach the walsender at once), and hold the
   chunk's events in memory (the chunk window).

The stream, meanwhile: between the low and the high watermark, every change of the table
removes its key (old and new key of an update) from the window, and a truncate empties it. At
the high watermark the events still in the window are produced, in key order, under the
delivery ticket of the high watermark's transaction (it confirms h once Kafka has them all).

Why a snapshot row never overwrites a newer change. Take a key k of the chunk and a transaction
X that changed k, with commit record at c (its events carry commit_lsn = c):

* c < l: X is visible in S (step 2 closes the race below), so the chunk row already shows X's
  effect. X's events come before the row in Kafka offset order (the stream sent X before l,
  the row goes out at h) and in the merge job's order ((c, ...) < (l, ...)): the row repeats
  the state X left.
* l <= c < h: X's events arrive inside the window, so k's row is dropped: the stream itself
  carries k's newer state (and a delete leaves nothing to re-insert).
* c > h: X's events come after the row in offset order (one partition per key, the publisher
  produces in stream order) and in the merge job's order ((c, ...) > (l, ...)).

So for every key the chunk publishes, every event of it in Kafka is either older than the
row in both orders, or newer in both: the last event per key is the row's current state, and
every key the chunk reads is published, by the snapshot or by the stream. A key inserted after
S with a value below the chunk's last key is published by the stream (c > l). Keys above the
last key belong to later chunks.

The visibility race. PostgreSQL writes a commit record to WAL before it removes the
transaction from the proc array, and a snapshot treats a transaction as running until it is
removed; synchronous commit (the WAL flush) and synchronous replication wait between the two.
So X can have c < l and still be invisible to S: the chunk row would show k before X, after
X's events were published, a stale overwrite (DBLog and Debezium leave this open). Step 2
closes it: X was still in the proc array when S0 was taken (after l), so X is in S0's xip
list, and S is taken only once every such transaction has ended. The wait is for
transactions that were running when the chunk started; a long idle-in-transaction session
delays the chunk (logged), not the stream, and breaks nothing.

When a request is done. A chunk's events are in Kafka only once the delivery ticket of its
high watermark's transaction completes: the tracker's `delivered_lsn()` (the flush LSN) reaches that
transaction's end. Until then the chunk is "sent", not acknowledged, and the request's progress
in the signal table (its `table_index` and `last_key`, where a restarted producer resumes)
stays at the last acknowledged chunk. A request is marked done only when its tables are all read
*and* none of its chunks is still unacknowledged (`ChunkAcks.may_finish`): a producer killed
before Kafka acknowledged the last chunk finds the request running and reads that chunk again,
and the progress counts every chunk, the last one included.

Tables without a primary key (or replica identity index), or keyed by the whole row (REPLICA
IDENTITY FULL), are not chunked: without a key neither the window nor a consumer can tell a
snapshot row from a changed one. They are read whole at one cut in the stream instead
(`whole`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

__all__ = ["ChunkAcks", "ChunkWindow", "SentChunk", "Watermark"]


@dataclass(frozen=True)
class Watermark:
    """A chunk's low or high watermark, as the content of a logical decoding message. `run`
    tells this process's watermarks from a killed one's, replayed after a restart."""

    run: str
    chunk: int
    high: bool

    def content(self) -> bytes:
        return f"{self.run}:{self.chunk}:{'high' if self.high else 'low'}".encode()

    @classmethod
    def parse(cls, content: bytes) -> Watermark | None:
        """The watermark `content` holds, or None when it is not one."""
        try:
            run, chunk, kind = content.decode().rsplit(":", 2)
            if kind not in ("low", "high") or not run:
                return None
            return cls(run, int(chunk), kind == "high")
        except ValueError:  # also UnicodeDecodeError
            return None


@dataclass
class ChunkWindow:
    """One chunk between its watermarks: the rows read (key -> event, in key order) and,
    once the low watermark went by, the keys the stream changed. The rows may be read after
    the stream passed the low watermark (the read waits for older transactions): keys changed
    before they are loaded are remembered and dropped at `load`. Pure: keys are whatever the
    caller compares them as (the encoded Kafka key)."""

    chunk: int
    relation_id: int
    rows: dict[bytes, bytes] = field(default_factory=dict)  # key -> the row's event value
    open: bool = False  # the low watermark has been seen in the stream
    loaded: bool = False  # the rows have been read
    touched: set[bytes] = field(default_factory=set)  # changed in the window before `load`
    emptied: bool = False  # truncated in the window before `load`

    def low_seen(self) -> None:
        self.open = True

    def load(self, rows: dict[bytes, bytes]) -> None:
        """The chunk as read: rows the stream changed (or truncated) since the low watermark
        are older than the stream's events, so they are left out."""
        self.rows = {} if self.emptied else rows
        for key in self.touched:
            self.rows.pop(key, None)
        self.touched.clear()
        self.loaded = True

    def changed(self, relation_id: int, key: bytes) -> None:
        """A streamed change of `key` in table `relation_id`: a chunk row with that key is
        older than the stream's event, so it is not published."""
        if self.open and relation_id == self.relation_id:
            if self.loaded:
                self.rows.pop(key, None)
            else:
                self.touched.add(key)

    def truncated(self, relation_id: int) -> None:
        """A streamed truncate of the table: every row read is older than it (a read that
        started before the truncate was visible would return rows it removed)."""
        if self.open and relation_id == self.relation_id:
            self.rows.clear()
            self.emptied = not self.loaded

    def high_seen(self) -> list[tuple[bytes, bytes]]:
        """The (key, value) events to publish at the high watermark, in key order."""
        if not self.open or not self.loaded:
            raise RuntimeError(f"chunk {self.chunk}: high watermark before the low one or "
                               "before the read")
        return list(self.rows.items())


@dataclass(frozen=True)
class SentChunk:
    """A chunk produced at its high watermark, and where its request goes on once Kafka has it."""

    end_lsn: int  # the end of the high watermark's transaction: acknowledged when the flush
    # LSN reaches it
    request: int
    table_index: int  # the table the next chunk reads (past the last: the request is read)
    last_key: tuple[str, ...] | None  # the next chunk starts after it (None: table start)
    rows: int


class ChunkAcks:
    """The chunks produced and not yet acknowledged by Kafka, oldest first; the policy of when a
    request may be marked done (see "When a request is done"). Pure: the caller passes the
    delivery tracker's `delivered_lsn()`."""

    def __init__(self) -> None:
        self._sent: deque[SentChunk] = deque()

    def sent(self, chunk: SentChunk) -> None:
        self._sent.append(chunk)

    def acknowledged(self, delivered_lsn: int | None) -> list[SentChunk]:
        """The chunks Kafka acknowledged since the last call (the flush LSN is `delivered_lsn`), in
        the order they were produced: each one's progress is recorded."""
        done: list[SentChunk] = []
        while self._sent and delivered_lsn is not None and \
                self._sent[0].end_lsn <= delivered_lsn:
            done.append(self._sent.popleft())
        return done

    def pending(self, request: int) -> bool:
        """Whether a chunk of `request` is still waiting for Kafka."""
        return any(chunk.request == request for chunk in self._sent)

    def may_finish(self, request: int, table_index: int, tables: int) -> bool:
        """Whether `request` may be marked done: every table read (`table_index` past the
        last of its `tables`) and every chunk of it acknowledged."""
        return table_index >= tables and not self.pending(request)


"""Chunk watermarks without writes: the incremental snapshot's window on a standby, or for a
role that may only SELECT (issue 36, part 2). Pure: the driver reads the snapshot and the WAL
position, the stream hands in its transactions. The written-watermark window it replaces is
`window` (DBLog); this module keeps its guarantee with what a read-only server can say.

A standby cannot write the low and high watermark messages of `window`. What it can say,
without writing, is *which transactions a read sees*: ``pg_current_snapshot()`` gives the
read's snapshot S = (xmin, xmax, xip) (Debezium's read-only incremental snapshots use the same
function); the stream gives each transaction's xid (pgoutput BEGIN) and commit position. A
chunk (rows of one table with key > the previous chunk's last key, in key order) goes:

1. Open. Between two transactions of the stream, note P, the end LSN of the last transaction
   the stream delivered (`Open.position`). Every transaction streamed so far has its commit
   record *before* P (commit c, end e <= P, records are >= 24 bytes: c < P); every one
   streamed later has its commit record at or after P (the stream decodes commits in WAL
   order, and commit records do not overlap).
2. Read, in one REPEATABLE READ transaction: S = ``pg_current_snapshot()`` as its first
   statement (the transaction's snapshot, the one the chunk query then reads with); the chunk
   query; then h, a WAL position no commit visible in S lies beyond: ``pg_current_wal_insert_
   lsn()`` on a primary (a commit record is inserted before the transaction becomes visible),
   ``pg_last_wal_receive_lsn()`` on a standby (a commit becomes visible there when the startup
   process replays it, after the walreceiver flushed it; the replay position can lag the redo
   it reports, the receive position cannot), or the replay position when that is greater (a
   restarted walreceiver reports the start of the segment it asks for).
3. Ready (`Chunk.ready`): every transaction streamed before P must be visible in S. The
   visibility race of `window` has a read-only form: a commit record is in the WAL (and may be
   decoded, published) before the transaction leaves the proc array, so a read can miss a
   transaction whose events are already in Kafka; its row would be older than those events,
   published after them: a stale overwrite. So the driver keeps the xids of the transactions
   it streamed (`RecentXids`, only those a later snapshot may still not see: xid >= the last
   xmin, pruned as xmin moves on, since a snapshot's xmin never goes back) and discards a read
   whose S misses one of those streamed before P (a copy taken at P, `RecentXids.copy`: the
   read runs in a thread of its own while the stream adds more, `reader`), reading again a
   moment later (a committed transaction leaves the proc array within microseconds; on a
   standby, at the next replayed record). This is
   the read-only counterpart of `window`'s wait on the xip list, and it closes the same race.
4. The window: every transaction the stream delivers from P on with its commit at or before
   h removes the keys it changed from the chunk's rows (a truncate: all of them)
   (`Chunk.streamed`).
5. Close: the first transaction with commit > h, or a keepalive at or past h, closes the window
   (`Chunk.passed`): the rows left are produced *before* that transaction's events, with
   ``source.commit_lsn = P`` (as `window`'s rows carry their low watermark l).

Why a chunk row never overwrites a newer change. Take a published key k and a transaction X
that changed it, commit record at c:

* X streamed before P (c < P): X is visible in S (step 3), so the row already shows X's
  effect; X's events came before the row in offset order and in the merge job's order
  (c < P).
* P <= c <= h: X is streamed inside the window and dropped k: k is not published by the
  chunk (contradiction; the stream carries k's newer state).
* c > h: X is not visible in S (a commit visible in S lies before h: step 2), and X is
  streamed after the window closed: its events come after the row in offset order (the rows
  are produced before the closing transaction, one partition per key) and in merge order
  (c > h >= P).

So every event of k in Kafka is older than the row in both orders, or newer in both, and the
row shows k's state after every transaction committed before P and before none committed
after h: since no transaction changed k between P and h (else k was dropped), the row shows
k's state at every position in [P, h] -- the property the consistent cuts rely on for
incremental snapshot rows (spark_jobs/rules/cut_policy.py "Snapshot rows"), with P in the role of l.
A transaction visible in S but streamed after P has c <= h (step 2) and so dropped its keys:
no row shows a state "from the future" of its position P.

xids: pgoutput's BEGIN carries a 32-bit xid, ``pg_current_snapshot()`` 64-bit ones (epoch and
xid). A streamed xid is widened against the snapshot's xmax (`widen`): every transaction the
check compares is within 2^31 of it (PostgreSQL's wraparound protection keeps running and
recently committed xids there).

What it costs compared with `window`: nothing is written (no WAL, no signal table: requests
come over Kafka, `<prefix>.signal`); a chunk waits for the stream to pass h, as `window`'s waits
for its high watermark, but h is found by a keepalive rather than a message: on an idle server
the walsender sends one when the producer's status shows it caught up (at most
``wal_sender_timeout / 2``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Chunk", "RecentXids", "Snapshot", "widen"]

_EPOCH = 1 << 32
_HALF = 1 << 31


def widen(xid: int, reference: int) -> int:
    """The 64-bit xid (epoch << 32 | xid) of 32-bit `xid`, taken as the one nearest to the
    64-bit `reference` (a snapshot's xmax): within 2^31 of it either way."""
    candidate = (reference & ~(_EPOCH - 1)) | (xid & (_EPOCH - 1))
    if candidate - reference > _HALF:
        candidate -= _EPOCH
    elif reference - candidate >= _HALF:
        candidate += _EPOCH
    return candidate


@dataclass(frozen=True)
class Snapshot:
    """``pg_current_snapshot()``: 64-bit xids; visible: committed before it was taken."""

    xmin: int
    xmax: int
    xip: frozenset[int]

    @classmethod
    def parse(cls, text: str) -> Snapshot:
        """PostgreSQL's text form ``xmin:xmax:xip1,xip2,...``."""
        xmin, xmax, xip = text.split(":")
        return cls(int(xmin), int(xmax), frozenset(int(x) for x in xip.split(",") if x))

    def sees(self, xid: int) -> bool:
        """Whether committed transaction `xid` (64-bit) is visible in this snapshot."""
        return xid < self.xmin or (xid < self.xmax and xid not in self.xip)


class RecentXids:
    """The xids of streamed (committed) transactions a later snapshot may still not see: all
    with xid >= the xmin of the newest snapshot checked. A snapshot's xmin never goes back, so
    the ones below it are visible to every later snapshot and are forgotten."""

    def __init__(self) -> None:
        self._xids: set[int] = set()  # 32-bit, as pgoutput sends them
        self._floor: int | None = None  # the newest xmin (64-bit)

    def streamed(self, xid: int) -> None:
        self._xids.add(xid & (_EPOCH - 1))

    def unseen(self, snapshot: Snapshot) -> list[int]:
        """The streamed xids `snapshot` does not see (64-bit; empty: it sees them all); those
        below its xmin are forgotten."""
        if self._floor is None or snapshot.xmin > self._floor:
            self._floor = snapshot.xmin
        wide = {x: widen(x, snapshot.xmax) for x in self._xids}
        self._xids = {x for x, w in wide.items() if w >= snapshot.xmin}
        return sorted(w for x, w in wide.items() if w >= snapshot.xmin and not snapshot.sees(w))

    def __len__(self) -> int:
        return len(self._xids)

    def copy(self) -> RecentXids:
        """The xids streamed so far, apart from the ones streamed later: what a chunk opened
        now must see (the reader's thread checks it while the stream adds to this one)."""
        twin = RecentXids()
        twin._xids = set(self._xids)
        twin._floor = self._floor
        return twin


@dataclass
class Chunk:
    """One chunk's window (steps 1-5 above). Keys are whatever the caller compares them as
    (the encoded Kafka key); `rows` maps key -> the row's event (whatever the caller keeps)."""

    position: int  # P: end LSN of the last transaction streamed before the chunk opened
    snapshot: Snapshot  # S, the read's snapshot
    horizon: int  # h: no commit visible in S lies beyond it
    rows: dict[bytes, Any] = field(default_factory=dict)
    closed: bool = False

    def ready(self, recent: RecentXids) -> bool:
        """Whether the read may be used: S sees every transaction streamed before P (else read
        again: the visibility race, step 3)."""
        return not recent.unseen(self.snapshot)

    def streamed(self, commit_lsn: int, keys: set[bytes] | None) -> bool:
        """A transaction the stream delivers (commit record at `commit_lsn`, the keys of this
        table it changed; None: it truncated the table). Returns True when it closes the
        window: the caller produces `rows` before the transaction's events."""
        if self.closed:
            return False
        if commit_lsn > self.horizon:
            self.closed = True
            return True
        if keys is None:
            self.rows.clear()
        else:
            for key in keys:
                self.rows.pop(key, None)
        return False

    def passed(self, wal_end: int) -> bool:
        """A keepalive: the stream has decoded everything before `wal_end`. True when it
        closes the window: at `wal_end` >= h no commit visible in S is left to stream (its
        record starts before h); an idle server's keepalive reaches h exactly, and no later
        WAL may ever come."""
        if not self.closed and wal_end >= self.horizon:
            self.closed = True
            return True
        return False

"""The read-only chunk window (connector/snapshot/incremental/readonly.py), proved on random
histories of a server: transactions committing in WAL order, each becoming visible to new
snapshots some time after its commit record (the visibility race), the stream decoding commits
in order, a chunk opened between two streamed transactions and read in a snapshot taken later.
Whatever the history, folding Kafka's records per key in offset order, or by the merge job's
position order, gives the table's final state, and every published row shows its key's state
at the chunk's position P and at every position up to h. Without the ready check the race
makes a stale overwrite (a counterexample, found and pinned)."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from connector.snapshot.incremental.readonly import Chunk, RecentXids, Snapshot, widen

KEYS = 6
RECORD = 24  # a commit record's size in the model's WAL
EPOCH = 1 << 32


@dataclass(frozen=True)
class Txn:
    xid: int  # 64-bit
    commit: int  # commit record start (its end: commit + RECORD)
    visible_at: int  # the time it leaves the proc array (>= its commit time)
    writes: tuple[tuple[int, int | None], ...]  # (key, value; None: delete)

    @property
    def end(self) -> int:
        return self.commit + RECORD

    @property
    def keys(self) -> set[bytes]:
        return {bytes([k]) for k, _ in self.writes}


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Txn], int, int, int]:
    """Transactions in commit order (commit i at time i), each visible from time i + delay;
    xids in start order (a permutation of the commit order) near an epoch boundary; the
    chunk's open time, its first read time, and how many transactions the stream published
    while the reader's thread read (the read reaches the stream's thread after them)."""
    n = draw(st.integers(1, 14))
    base = draw(st.sampled_from([3, EPOCH - 6, 5 * EPOCH - 2]))
    order = draw(st.permutations(range(n)))
    txns = []
    for i in range(n):
        writes = draw(st.lists(st.tuples(st.integers(0, KEYS - 1),
                                          st.one_of(st.none(), st.integers(0, 99))),
                               min_size=1, max_size=3))
        delay = draw(st.sampled_from([0, 0, 0, 1, 2, 5]))
        txns.append(Txn(base + order[i], 100 + i * 50, i + delay, tuple(writes)))
    opened = draw(st.integers(0, n))  # transactions streamed before the chunk opens
    read_at = draw(st.integers(opened, n + 6))  # time of the first read (>= the open)
    return txns, opened, read_at, draw(st.integers(opened, n))


def snapshot_at(txns: list[Txn], time: int) -> Snapshot:
    """What pg_current_snapshot() says at `time`: completed = visible by then; xmax the
    latest completed xid + 1; xip the others below it (started: every xid of the history
    below xmax is assigned by then in this model)."""
    done = {t.xid for t in txns if t.visible_at <= time}
    xids = {t.xid for t in txns}
    xmax = max(done) + 1 if done else min(xids)
    xip = frozenset(x for x in xids if x < xmax and x not in done)
    return Snapshot(min(xip) if xip else xmax, xmax, xip)


def state(txns: list[Txn], include: object = None) -> dict[bytes, int]:
    table: dict[bytes, int] = {}
    for t in txns:
        if include is not None and not include(t):  # type: ignore[operator]
            continue
        for k, v in t.writes:
            if v is None:
                table.pop(bytes([k]), None)
            else:
                table[bytes([k])] = v
    return table


def run_chunk(txns: list[Txn], opened: int, read_at: int, *, check_ready: bool = True,
              arrive: int | None = None,
              ) -> tuple[list[tuple[bytes, int | None, tuple[int, int]]], Chunk]:
    """Kafka's records of the stream and the chunk, in offset order: (key, value, position).
    The read is done by another thread (connector/snapshot/incremental/reader.py) and reaches
    the stream's thread once `arrive` transactions were published (None: at once): those
    from P on dropped their keys from the window meanwhile, and when one of them committed
    past h the rows go out as they arrive."""
    log: list[tuple[bytes, int | None, tuple[int, int]]] = []
    recent = RecentXids()

    def publish(t: Txn) -> None:
        for i, (k, v) in enumerate(t.writes):
            log.append((bytes([k]), v, (t.commit, i)))

    for t in txns[:opened]:
        publish(t)
        recent.streamed(t.xid & (EPOCH - 1))
    position = txns[opened - 1].end if opened else 50
    before = recent.copy()  # what the reader's thread checks; the stream adds to `recent`
    arrive = opened if arrive is None else arrive
    touched: set[bytes] = set()
    for t in txns[opened:arrive]:  # published while the reader's thread reads
        recent.streamed(t.xid & (EPOCH - 1))
        touched |= t.keys
        publish(t)
    time = max(read_at, opened)
    while True:
        snap = snapshot_at(txns, time)
        written = txns[:time + 1]  # commit record i is written at time i
        horizon = max([t.end for t in written], default=position)
        seen = snap.sees
        chunk = Chunk(position, snap, max(horizon, position),
                      dict(state(txns, lambda t, seen=seen: seen(t.xid))))
        if not check_ready or chunk.ready(before):
            break
        time += 1
    for k in touched:  # the window's load (`ChunkWindow.load`)
        chunk.rows.pop(k, None)
    rows = chunk.rows

    def emit_rows() -> None:
        for i, (k, v) in enumerate(sorted(rows.items())):
            log.append((k, v, (position, -1 - i)))  # before any event at P (none share a key)

    if arrive > opened and chunk.streamed(txns[arrive - 1].commit, set()):
        emit_rows()  # the stream passed h before the rows came (`IncrementalSnapshots._collect`)
    for t in txns[arrive:]:
        if chunk.streamed(t.commit, t.keys):
            emit_rows()
        publish(t)
    if chunk.passed(txns[-1].end + 1 if txns else position + 1):
        emit_rows()
    return log, chunk


def fold(records: list[tuple[bytes, int | None, tuple[int, int]]]) -> dict[bytes, int]:
    table: dict[bytes, int] = {}
    for k, v, _ in records:
        if v is None:
            table.pop(k, None)
        else:
            table[k] = v
    return table


@given(histories())
def test_no_row_overwrites_a_newer_change(history: tuple[list[Txn], int, int, int]) -> None:
    txns, opened, read_at, arrive = history
    log, chunk = run_chunk(txns, opened, read_at, arrive=arrive)
    truth = state(txns)
    assert chunk.closed
    # Offset order (a consumer folding the topic), and the merge job's position order.
    assert fold(log) == truth
    by_key: dict[bytes, list[tuple[tuple[int, int], int | None]]] = {}
    for k, v, pos in log:
        by_key.setdefault(k, []).append((pos, v))
    for k, events in by_key.items():
        positions = [p for p, _ in events]
        assert len(set(positions)) == len(positions), f"two events of {k!r} at one position"
        assert sorted(positions) == positions, f"{k!r}: offset and position orders differ"
    # Each published row is its key's state at P and at every position up to h.
    at_p = state(txns, lambda t: t.commit < chunk.position)
    at_h = state(txns, lambda t: t.commit <= chunk.horizon)
    for k, v in chunk.rows.items():
        assert at_p.get(k) == v == at_h.get(k)


def test_without_the_ready_check_the_race_overwrites() -> None:
    """T10 sets k0 = 1 and its commit record is written (and streamed) at time 1, but it
    leaves the proc array only at time 3: a chunk read at time 2 sees k0 = 5 (T9's), and that
    row, published after T10's event, would overwrite it. The ready check reads again."""
    txns = [Txn(9, 100, 0, ((0, 5),)), Txn(10, 150, 3, ((0, 1),)), Txn(11, 200, 2, ((1, 7),))]
    log, chunk = run_chunk(txns, opened=2, read_at=2, check_ready=False)
    assert chunk.rows.get(b"\x00") == 5  # the value before T10: stale
    assert fold(log) != state(txns)
    log, chunk = run_chunk(txns, opened=2, read_at=2)  # with the check: read again later
    assert chunk.rows.get(b"\x00") == 1
    assert fold(log) == state(txns)


@given(st.integers(0, (1 << 40)), st.integers(-(1 << 31) + 1, (1 << 31) - 1))
def test_widen_finds_the_epoch(reference: int, offset: int) -> None:
    xid = reference + offset
    if xid < 0:
        return
    assert widen(xid & (EPOCH - 1), reference) == xid


def test_snapshot_text_and_visibility() -> None:
    snap = Snapshot.parse("10:20:12,15")
    assert snap == Snapshot(10, 20, frozenset({12, 15}))
    assert [x for x in range(8, 22) if snap.sees(x)] == [8, 9, 10, 11, 13, 14, 16, 17, 18, 19]
    assert Snapshot.parse("7:7:").xip == frozenset()


def test_recent_xids_forget_what_every_later_snapshot_sees() -> None:
    recent = RecentXids()
    for xid in (5, 8, 12):
        recent.streamed(xid)
    assert recent.unseen(Snapshot(6, 13, frozenset({12}))) == [12]
    assert len(recent) == 2  # 5 < xmin 6: seen by every later snapshot
    assert recent.unseen(Snapshot(13, 13, frozenset())) == []
    assert len(recent) == 0


def test_an_idle_servers_keepalive_at_the_horizon_closes_the_window() -> None:
    """On an idle server the walsender's keepalive reaches the WAL insert position h read
    after the chunk, and no later WAL may come: every commit visible in S starts before h, so
    the window closes there (the rows are published); a keepalive short of h does not."""
    chunk = Chunk(100, Snapshot(5, 6, frozenset()), 200, {b"k": 1})
    assert not chunk.passed(199)
    assert chunk.passed(200)
    assert chunk.closed and not chunk.passed(300)  # once

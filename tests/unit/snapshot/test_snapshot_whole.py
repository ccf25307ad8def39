"""A table without a key re-published whole at one cut (connector/snapshot/incremental/whole.py):
which tables are read that way, the marker, the spool, and the order the stream's thread
publishes them in at the marker (a truncate at (m, -1), then the rows at (m, n), under the
marker's transaction's ticket; the request moves on only once Kafka has them)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from connector.avro import SourceInfo
from connector.pgoutput.messages import Relation
from connector.replication.features import ServerFeatures
from connector.sink import AckTracker, Ticket
from connector.snapshot.incremental.driver import IncrementalSnapshots, WholeTable
from connector.snapshot.incremental.reader import PendingRead
from connector.snapshot.incremental.signals import SnapshotRequest
from connector.snapshot.incremental.whole import (
    RETRY_S,
    Busy,
    CutMarker,
    Spool,
    WholeRead,
    retry_delay,
    table_method,
)
from connector.snapshot.incremental.window import Watermark
from connector.snapshot.tables import SnapshotTable

# ---------------------------------------------------------------- which tables, how


@pytest.mark.parametrize(("identity", "has_key", "expected"), [
    ("d", True, "chunks"),  # a primary key
    ("i", True, "chunks"),  # a replica identity index
    ("d", False, "whole"),  # no key: chunks were refused before (the table stayed stale)
    ("n", False, "whole"),  # REPLICA IDENTITY NOTHING (insert-only tables)
    ("f", False, "whole"),  # keyed by the whole row
    ("f", True, "whole"),  # FULL, even with a primary key: its events are keyed by the row
])
def test_a_table_without_a_usable_key_is_read_whole(identity: str, has_key: bool,
                                                     expected: str) -> None:
    assert table_method(replica_identity=identity, has_key=has_key, read_only=False,
                        partition_of_root=False) == (expected, "")


def test_read_only_keeps_chunks_and_refuses_a_whole_read_with_the_reason() -> None:
    assert table_method(replica_identity="d", has_key=True, read_only=True,
                        partition_of_root=False) == ("chunks", "")
    method, reason = table_method(replica_identity="d", has_key=False, read_only=True,
                                  partition_of_root=False)
    assert method is None
    assert "no primary key" in reason and "signal table" in reason


def test_a_keyless_partition_published_through_its_root_is_not_truncated_whole() -> None:
    method, reason = table_method(replica_identity="d", has_key=False, read_only=False,
                                  partition_of_root=True)
    assert method is None and "through its root" in reason


# ---------------------------------------------------------------- the marker, the spool


def test_the_cut_marker_is_no_watermark_and_no_watermark_is_a_marker() -> None:
    marker = CutMarker("a1b2", 7)
    assert CutMarker.parse(marker.content()) == marker
    assert Watermark.parse(marker.content()) is None  # an older producer ignores it
    for high in (False, True):
        assert CutMarker.parse(Watermark("a1b2", 7, high).content()) is None
    for content in (b"", b"x", b":1:cut", b"run:one:cut", b"\xff:1:cut"):
        assert CutMarker.parse(content) is None


def test_the_spool_gives_back_what_was_added_in_order() -> None:
    spool = Spool()
    events: list[tuple[bytes | None, bytes]] = [
        (None, b"v0"), (b"k1", b""), (b"", b"v2"), (None, b"x" * 100_000)]
    for key, value in events:
        spool.add(key, value)
    assert spool.count == 4
    assert list(spool.events()) == events
    assert list(spool.events()) == events  # read again from the start
    spool.close()


# ---------------------------------------------------------------- the order at the marker


class _Codec:
    topic = "p.public.t"

    def truncate(self, source: SourceInfo, **_: Any) -> bytes:
        return f"t@{source.commit_lsn}:{source.txn_index}:{source.snapshot}".encode()


class _Sink:
    """Records what is produced, in order, and acknowledges nothing until told."""

    def __init__(self) -> None:
        self.records: list[tuple[str, bytes | None, bytes | None, Ticket]] = []

    def produce(self, topic: str, key: bytes | None, value: bytes | None, ticket: Ticket,
                **_: Any) -> None:
        ticket.expect()  # type: ignore[attr-defined]
        self.records.append((topic, key, value, ticket))

    def produce_truncate(self, topic: str, value: bytes, ticket: Ticket) -> int:
        for _ in range(3):  # every partition
            self.produce(topic, None, value, ticket)
        return 3

    def ack_all(self) -> None:
        for *_, ticket in self.records:
            ticket.on_delivery(None, None)  # type: ignore[attr-defined]


class _Store:
    channel = "table"

    def __init__(self) -> None:
        self.progress: list[tuple[int, int, tuple[str, ...] | None, int]] = []

    def record_progress(self, request: int, table_index: int,
                        last_key: tuple[str, ...] | None, rows: int) -> None:
        self.progress.append((request, table_index, last_key, rows))


def _driver(sink: _Sink, tracker: AckTracker) -> IncrementalSnapshots:
    snapshots = IncrementalSnapshots("postgresql:///unused", "slot", "pub",
                                      ServerFeatures(150000), lambda r: _Codec(),  # type: ignore
                                      sink, tracker, chunk_rows=10,  # type: ignore[arg-type]
                                      table_requests=False)
    snapshots.store = _Store()  # type: ignore[assignment]
    snapshots.request = SnapshotRequest(5, "slot", ("public.t",), "running", 0, None, 0, 0,
                                        None, None)
    return snapshots


def _whole(snapshots: IncrementalSnapshots, rows: list[bytes], *, position: int = 1000,
           read: bool = True) -> WholeTable:
    relation = Relation(None, 42, "public", "t", "d", ())
    table = SnapshotTable(relation, "r", None, ())
    pending = PendingRead()
    if read:
        spool = Spool()
        for value in rows:
            spool.add(None, value)
        pending.result = WholeRead(position, spool)
    snapshots.sequence += 1
    whole = WholeTable(5, 0, table, _Codec(), CutMarker(snapshots.run, snapshots.sequence),
                       pending)  # type: ignore[arg-type]
    snapshots.whole = whole
    return whole


def test_at_its_marker_the_table_is_a_truncate_then_its_rows_under_that_ticket() -> None:
    sink, tracker = _Sink(), AckTracker(0)
    snapshots = _driver(sink, tracker)
    whole = _whole(snapshots, [b"r0", b"r1", b"r2"], position=1000)
    before = tracker.begin(900)  # a transaction before the marker's: published already
    sink.produce("p.public.t", None, b"older", before)
    before.seal()
    ticket = tracker.begin(1100)  # the marker's transaction (its commit after m = 1000)
    snapshots.watermark(whole.marker.content(), 1100, ticket)
    ticket.seal()
    values = [(r[2], r[3]) for r in sink.records]
    assert values == [(b"older", before)] + [(b"t@1000:-1:incremental", ticket)] * 3 + [
        (b"r0", ticket), (b"r1", ticket), (b"r2", ticket)]
    assert snapshots.whole is None and snapshots.table_index == 1
    # Not done, not moved on, until Kafka has every one of them.
    snapshots._record_acknowledged()
    assert snapshots.store.progress == []  # type: ignore[union-attr]
    assert tracker.delivered_lsn() == 0
    sink.ack_all()
    assert tracker.delivered_lsn() == 1100
    snapshots._record_acknowledged()
    assert snapshots.store.progress == [(5, 1, None, 3)]  # type: ignore[union-attr]


def test_a_marker_of_another_run_or_attempt_publishes_nothing() -> None:
    sink, tracker = _Sink(), AckTracker(0)
    snapshots = _driver(sink, tracker)
    whole = _whole(snapshots, [b"r0"])
    ticket = tracker.begin(1100)
    snapshots.watermark(CutMarker("killed", whole.marker.sequence).content(), 1100, ticket)
    snapshots.watermark(CutMarker(snapshots.run, whole.marker.sequence - 1).content(), 1100,
                        ticket)
    assert sink.records == [] and snapshots.whole is whole
    snapshots.whole = None  # an attempt given up: its own marker is ignored too
    snapshots.watermark(whole.marker.content(), 1100, ticket)
    assert sink.records == []


def test_a_marker_before_its_read_is_refused() -> None:
    sink, tracker = _Sink(), AckTracker(0)
    snapshots = _driver(sink, tracker)
    whole = _whole(snapshots, [], read=False)
    with pytest.raises(RuntimeError, match="marker before the read"):
        snapshots.watermark(whole.marker.content(), 1100, tracker.begin(1100))


def test_an_empty_table_is_still_truncated() -> None:
    sink, tracker = _Sink(), AckTracker(0)
    snapshots = _driver(sink, tracker)
    whole = _whole(snapshots, [], position=500)
    snapshots.watermark(whole.marker.content(), 600, tracker.begin(600))
    assert [r[2] for r in sink.records] == [b"t@500:-1:incremental"] * 3


def test_a_busy_lock_gives_the_attempt_up_and_tries_again_later() -> None:
    sink, tracker = _Sink(), AckTracker(0)
    snapshots = _driver(sink, tracker)
    whole = _whole(snapshots, [], read=False)
    whole.pending.error = Busy()
    whole.pending.done.set()
    now = time.monotonic()
    snapshots._tick_whole(whole, now)
    assert snapshots.whole is None and snapshots.table_index == 0  # the same table again
    assert snapshots.next_poll == now + RETRY_S
    assert sink.records == []
    for _ in range(2):  # busy again: later each time
        snapshots.whole = whole
        snapshots._tick_whole(whole, now)
    assert snapshots.next_poll == now + 4 * RETRY_S
    assert [retry_delay(n) for n in (0, 1, 2, 3, 4, 50)] == [5, 10, 20, 40, 60, 60]


def test_a_read_that_is_still_running_or_waits_for_its_marker_is_kept() -> None:
    sink, tracker = _Sink(), AckTracker(0)
    snapshots = _driver(sink, tracker)
    whole = _whole(snapshots, [b"r0"])
    snapshots._tick_whole(whole, time.monotonic())
    assert snapshots.whole is whole
    whole.pending.done.set()  # read and committed: the marker is on its way
    snapshots._tick_whole(whole, time.monotonic())
    assert snapshots.whole is whole and sink.records == []


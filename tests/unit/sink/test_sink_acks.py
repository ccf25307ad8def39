"""The ack tracker: the delivered LSN is the newest fully acknowledged prefix of transactions."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.errors import SinkError
from connector.sink.acks import AckTracker, DeliveryTracker, PendingTxn


class FakeMsg:
    """What librdkafka hands the delivery callback: only topic() and partition() are read."""

    def __init__(self, topic: str = "t", partition: int = 0) -> None:
        self._topic, self._partition = topic, partition

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition


def ack(txn: PendingTxn, n: int = 1) -> None:
    for _ in range(n):
        txn.on_delivery(None, FakeMsg())


def test_starts_at_the_confirmed_position() -> None:
    assert AckTracker().delivered_lsn() is None
    assert AckTracker(start_lsn=100).delivered_lsn() == 100


def test_advances_only_when_sealed_and_all_acked() -> None:
    tracker = AckTracker(10)
    txn = tracker.begin(100)
    txn.expect(2)
    ack(txn)
    assert tracker.delivered_lsn() == 10
    ack(txn)
    assert tracker.delivered_lsn() == 10  # not sealed: more events may come
    txn.seal()
    assert tracker.delivered_lsn() == 100
    assert tracker.open_transactions == 0


def test_ack_after_seal() -> None:
    tracker = AckTracker()
    txn = tracker.begin(100)
    txn.expect(3)
    txn.seal()
    ack(txn, 2)
    assert tracker.delivered_lsn() is None
    assert tracker.in_flight == 1
    ack(txn)
    assert tracker.delivered_lsn() == 100
    assert tracker.in_flight == 0


def test_out_of_order_acks_wait_for_the_earlier_transaction() -> None:
    tracker = AckTracker(1)
    first, second, third = tracker.begin(100), tracker.begin(200), tracker.begin(300)
    for txn in (first, second, third):
        txn.expect(2)
        txn.seal()
    ack(third, 2)
    ack(second, 2)
    assert tracker.delivered_lsn() == 1  # the first is still in flight
    ack(first)
    assert tracker.delivered_lsn() == 1
    ack(first)
    assert tracker.delivered_lsn() == 300  # all three complete at once


def test_empty_transactions_advance_once_everything_before_is_acked() -> None:
    tracker = AckTracker(1)
    busy = tracker.begin(100)
    busy.expect(1)
    busy.seal()
    empty = tracker.begin(200)
    empty.seal()
    assert tracker.delivered_lsn() == 1
    ack(busy)
    assert tracker.delivered_lsn() == 200
    alone = tracker.begin(300)
    alone.seal()
    assert tracker.delivered_lsn() == 300


def test_failure_freezes_the_watermark_and_raises() -> None:
    tracker = AckTracker(1)
    ok, bad, later = tracker.begin(100), tracker.begin(200), tracker.begin(300)
    for txn in (ok, bad, later):
        txn.expect(1)
        txn.seal()
    ack(ok)
    bad.on_delivery("Local: Message timed out", FakeMsg("shop.public.t", 2))
    ack(later)
    assert tracker.delivered_lsn() == 100
    with pytest.raises(SinkError) as raised:
        tracker.check()
    message = str(raised.value)
    assert "shop.public.t[2]" in message and "Message timed out" in message
    assert "0/C8" in message  # the failed transaction's end LSN
    ack(bad)  # a late success of another copy cannot heal a failed transaction
    assert tracker.delivered_lsn() == 100


def test_begin_must_follow_commit_order() -> None:
    tracker = AckTracker(500)
    with pytest.raises(ValueError):
        tracker.begin(400)
    tracker.begin(600)
    with pytest.raises(ValueError):
        tracker.begin(599)


def test_expect_after_seal_is_a_bug() -> None:
    txn = AckTracker().begin(1)
    txn.seal()
    with pytest.raises(RuntimeError):
        txn.expect()


def test_delivered_counts_batches() -> None:
    tracker = AckTracker()
    txn = tracker.begin(7)
    txn.expect(5)
    txn.seal()
    txn.delivered(5)
    assert tracker.delivered_lsn() == 7


def test_is_a_delivery_tracker() -> None:
    tracker: DeliveryTracker = AckTracker()
    assert tracker.delivered_lsn() is None


@given(st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=30),
       st.randoms(use_true_random=False))
def test_watermark_is_the_longest_fully_acked_prefix(sizes: list[int], rnd: random.Random) -> None:
    tracker = AckTracker(0)
    txns = []
    for i, size in enumerate(sizes):
        txn = tracker.begin((i + 1) * 10)
        txn.expect(size)
        txn.seal()
        txns.append(txn)
    pending = [i for i, size in enumerate(sizes) for _ in range(size)]
    rnd.shuffle(pending)
    acked = [0] * len(sizes)
    for index in pending:
        ack(txns[index])
        acked[index] += 1
        prefix = 0
        for i, size in enumerate(sizes):
            if acked[i] != size:
                break
            prefix = (i + 1) * 10
        assert tracker.delivered_lsn() == prefix
    assert tracker.delivered_lsn() == len(sizes) * 10


def test_callbacks_from_another_thread() -> None:
    tracker = AckTracker(0)
    txns = []
    for i in range(200):
        txn = tracker.begin(i + 1)
        txn.expect(50)
        txn.seal()
        txns.append(txn)
    reports: list[Any] = [t for t in txns for _ in range(50)]
    random.Random(7).shuffle(reports)
    half = len(reports) // 2

    def run(part: list[PendingTxn]) -> None:
        for txn in part:
            ack(txn)

    threads = [threading.Thread(target=run, args=(reports[:half],)),
               threading.Thread(target=run, args=(reports[half:],))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert tracker.delivered_lsn() == 200
    assert tracker.in_flight == 0


def test_all_delivered_completes_sealed_transactions_without_errors() -> None:
    tracker = AckTracker(start_lsn=10)
    first, second, third = tracker.begin(20), tracker.begin(30), tracker.begin(40)
    for txn in (first, second, third):
        txn.expect(3)
    first.seal()
    second.seal()
    second.failed(SinkError("lost"))
    tracker.all_delivered()  # third is not sealed: it may still get events
    assert tracker.delivered_lsn() == 20
    assert tracker.open_transactions == 2

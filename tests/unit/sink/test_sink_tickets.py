"""How the at-least-once sinks count a record against its ticket: once per record librdkafka
took, a refusal failing the ticket, and no ticket they cannot count (a stand-in librdkafka
producer; the real deliveries are tests/integration/sink/test_sink_kafka.py)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from connector.errors import SinkError
from connector.sink.acks import AckTracker
from connector.sink.producer import BulkSink, KafkaSink
from connector.sink.transactional import TransactionalTracker

BASE = {"bootstrap.servers": "k:9092"}


class _Producer:
    """librdkafka's produce as the sink sees it: `full` BufferErrors first (queue full), then
    either `refuse` (a KafkaException) or take the record."""

    def __init__(self, full: int = 0, refuse: KafkaError | None = None) -> None:
        self.full = full
        self.refuse = refuse
        self.taken: list[tuple[str, Any]] = []

    def produce(self, topic: str, value: bytes | None, key: bytes | None, partition: int,
                **kwargs: Any) -> None:
        if self.full:
            self.full -= 1
            raise BufferError("Local: Queue full")
        if self.refuse is not None:
            raise KafkaException(self.refuse)
        self.taken.append((topic, kwargs.get("on_delivery")))

    def poll(self, timeout: float = 0) -> int:
        return 0

    def __len__(self) -> int:
        return len(self.taken)


@pytest.mark.parametrize("mode", [KafkaSink, BulkSink])
def test_a_record_counts_once_even_after_the_queue_was_full(mode: type[KafkaSink]) -> None:
    tracker = AckTracker(start_lsn=10)
    sink = mode(BASE, tracker)
    sink._producer = _Producer(full=3)  # type: ignore[assignment]
    txn = tracker.begin(20)
    sink.produce("t", b"k", b"v", txn)
    sink.produce("t", b"k", b"v", txn, partition=1)
    assert txn.expected == 2
    txn.seal()
    assert tracker.delivered_lsn() == 10  # nothing acknowledged yet


def test_each_record_reports_its_delivery_to_its_ticket() -> None:
    tracker = AckTracker(start_lsn=10)
    sink = KafkaSink(BASE, tracker)
    producer = _Producer()
    sink._producer = producer  # type: ignore[assignment]
    txn = tracker.begin(20)
    sink.produce("t", b"k", b"v", txn)
    txn.seal()
    [(_, report)] = producer.taken
    report(None, None)
    assert tracker.delivered_lsn() == 20


def test_a_refused_record_fails_its_ticket_for_good() -> None:
    tracker = AckTracker(start_lsn=10)
    sink = KafkaSink(BASE, tracker)
    sink._producer = _Producer(refuse=KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))  # type: ignore[assignment]
    txn = tracker.begin(20)
    with pytest.raises(SinkError, match="cannot produce to t: .*transaction ending at LSN"):
        sink.produce("t", b"k", b"v", txn)
    txn.seal()
    assert txn.error is not None and tracker.delivered_lsn() == 10
    with pytest.raises(SinkError, match="cannot produce to t"):
        sink.poll()


def test_an_at_least_once_sink_takes_no_ticket_it_cannot_count() -> None:
    sink = KafkaSink(BASE, AckTracker())
    producer = _Producer()
    sink._producer = producer  # type: ignore[assignment]
    foreign = TransactionalTracker(start_lsn=None, skip_until=None).begin(20)
    with pytest.raises(TypeError, match="not an AckTracker's ticket"):
        sink.produce("t", b"k", b"v", foreign)
    assert producer.taken == []

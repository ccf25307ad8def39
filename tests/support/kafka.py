"""Small helpers of the Avro integration tests (not a test module)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Message, TopicPartition


def unique(name: str) -> str:
    return f"{name}{uuid.uuid4().hex[:8]}"


def consume(bootstrap: str, topic: str, count: int, timeout_s: float = 60.0) -> list[Message]:
    """The first `count` records of `topic` (all partitions), read from the beginning."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("t-"),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    records: list[Message] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(records) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.retriable() or "UNKNOWN_TOPIC" in error.name():
                    continue
                raise AssertionError(f"consume {topic}: {error}")
            records.append(msg)
    finally:
        consumer.close()
    assert len(records) == count, f"got {len(records)} of {count} records from {topic}"
    return records


def values(records: list[Any]) -> list[bytes]:
    return [r.value() for r in records]


def caught_up(consumer: Consumer) -> bool:
    """Whether `consumer` has read every assigned partition up to its current high watermark:
    every record Kafka acknowledged so far (what a test waited for: the producer's exit or its
    confirmed LSN) was read. Readers stop here instead of waiting for seconds of silence.
    A read_committed consumer that stopped before an open transaction's records is not caught up
    (its readers then fall back to waiting for silence)."""
    for tp in consumer.assignment():
        low, high = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
        if high <= low:
            continue
        position = consumer.position([TopicPartition(tp.topic, tp.partition)])[0].offset
        if position < high:  # includes OFFSET_INVALID (< 0): nothing read yet
            return False
    return True

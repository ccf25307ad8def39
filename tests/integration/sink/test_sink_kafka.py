"""The sink against a real Kafka broker: topic creation, delivery tracking, truncate to every
partition, tombstones, and failures that must not advance the delivered LSN."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from connector.errors import SinkError
from connector.sink import AckTracker, BulkSink, KafkaSink, TopicCreator, TopicSpec

pytestmark = pytest.mark.integration


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def read_partitions(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Message]]:
    """Every record of every partition, up to the high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("sink-test"),
                         "enable.auto.commit": False})
    out: dict[int, list[Message]] = {}
    try:
        for partition in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                       timeout=10)
            consumer.assign([TopicPartition(topic, partition, low)])
            records: list[Message] = []
            deadline = time.monotonic() + 30
            while len(records) < high - low and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    records.append(msg)
            out[partition] = records
    finally:
        consumer.close()
    return out


def topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    """The topic's configs. A topic created a moment ago can still be unknown to the broker
    that answers (its metadata is not there yet): asked again for up to 10 s."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    deadline = time.monotonic() + 10
    while True:
        try:
            entries = admin.describe_configs([resource])[resource].result(timeout=30)
            return {name: entry.value for name, entry in entries.items()}
        except KafkaException as exc:
            unknown = exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
            if not unknown or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_created_topics_keep_everything_and_creation_is_idempotent(kafka: Any) -> None:
    settings = {"bootstrap.servers": kafka.bootstrap}
    creator = TopicCreator(settings, TopicSpec(partitions=3))
    topic = unique("sink.retention")
    assert creator.ensure([topic]) == [topic]
    configs = topic_configs(kafka.bootstrap, topic)
    assert configs["retention.ms"] == "-1"
    assert configs["cleanup.policy"] == "delete"
    assert creator.partitions(topic) == 3
    assert creator.ensure([topic]) == []  # remembered
    again = TopicCreator(settings, TopicSpec(partitions=5, retention_ms=1000))
    assert again.ensure([topic]) == []  # exists already: fine, and left as it is
    assert again.partitions(topic) == 3
    assert topic_configs(kafka.bootstrap, topic)["retention.ms"] == "-1"


def test_compacted_topic_with_extra_config(kafka: Any) -> None:
    creator = TopicCreator({"bootstrap.servers": kafka.bootstrap},
                           TopicSpec(cleanup_policy="compact", retention_ms=86_400_000,
                                     configs={"min.compaction.lag.ms": "60000"}))
    topic = unique("sink.compact")
    creator.ensure_one(topic)
    configs = topic_configs(kafka.bootstrap, topic)
    assert (configs["cleanup.policy"], configs["retention.ms"],
            configs["min.compaction.lag.ms"]) == ("compact", "86400000", "60000")


def test_invalid_topic_is_a_sink_error(kafka: Any) -> None:
    creator = TopicCreator({"bootstrap.servers": kafka.bootstrap},
                           TopicSpec(replication_factor=3))  # one broker only
    with pytest.raises(SinkError, match="cannot create topic"):
        creator.ensure([unique("sink.rf3")])


def test_delivered_lsn_follows_acknowledged_transactions(kafka: Any) -> None:
    settings = {"bootstrap.servers": kafka.bootstrap}
    tracker = AckTracker(start_lsn=50)
    sink = KafkaSink(settings, tracker, topics=TopicCreator(settings, TopicSpec(partitions=2)))
    topic = unique("sink.orders")
    for end_lsn, count in ((100, 3), (200, 0), (300, 5)):
        txn = tracker.begin(end_lsn)
        for i in range(count):
            sink.produce(topic, f"k{i}".encode(), f"{end_lsn}:{i}".encode(), txn)
        txn.seal()
    assert tracker.delivered_lsn() == 50  # nothing acknowledged before a poll
    assert sink.flush(30) == 0
    assert tracker.delivered_lsn() == 300
    assert tracker.in_flight == 0
    assert (sink.events, len(sink)) == (8, 0)
    records = read_partitions(kafka.bootstrap, topic, 2)
    assert sorted(r.value() for rs in records.values() for r in rs) == sorted(
        [f"100:{i}".encode() for i in range(3)] + [f"300:{i}".encode() for i in range(5)])
    by_key: dict[bytes, set[int]] = {}
    for partition, rs in records.items():
        for r in rs:
            by_key.setdefault(r.key(), set()).add(partition)
    assert all(len(parts) == 1 for parts in by_key.values())  # one key, one partition
    sink.close()


def test_truncate_lands_in_every_partition_in_order(kafka: Any) -> None:
    settings = {"bootstrap.servers": kafka.bootstrap}
    tracker = AckTracker()
    sink = KafkaSink(settings, tracker, topics=TopicCreator(settings, TopicSpec(partitions=3)))
    topic = unique("sink.trunc")
    txn = tracker.begin(10)
    for i in range(12):
        sink.produce(topic, f"row{i}".encode(), b"before", txn)
    txn.seal()
    txn = tracker.begin(20)
    assert sink.produce_truncate(topic, b"TRUNCATE", txn) == 3
    sink.produce(topic, b"row1", b"after", txn)
    txn.seal()
    sink.close()
    assert tracker.delivered_lsn() == 20
    records = read_partitions(kafka.bootstrap, topic, 3)
    for partition in range(3):
        values = [r.value() for r in records[partition]]
        assert values.count(b"TRUNCATE") == 1, (partition, values)
        cut = values.index(b"TRUNCATE")
        assert set(values[:cut]) <= {b"before"} and set(values[cut + 1:]) <= {b"after"}
        assert records[partition][cut].key() is None


def test_truncate_records_one_writes_partition_zero_and_none_writes_nothing(kafka: Any) -> None:
    settings = {"bootstrap.servers": kafka.bootstrap}
    counts = {}
    for mode in ("one", "none"):
        tracker = AckTracker()
        sink = KafkaSink(settings, tracker, truncate_records=mode,
                         topics=TopicCreator(settings, TopicSpec(partitions=3)))
        topic = unique(f"sink.trunc-{mode}")
        txn = tracker.begin(10)
        sink.produce(topic, b"row", b"before", txn)
        counts[mode] = sink.produce_truncate(topic, b"TRUNCATE", txn)
        txn.seal()
        sink.close()
        assert tracker.delivered_lsn() == 10
        records = read_partitions(kafka.bootstrap, topic, 3)
        truncates = {p: [r.value() for r in rs].count(b"TRUNCATE") for p, rs in records.items()}
        assert sum(truncates.values()) == counts[mode], (mode, truncates)
        if mode == "one":
            assert truncates.get(0) == 1
    assert counts == {"one": 1, "none": 0}


def test_tombstone_after_delete(kafka: Any) -> None:
    settings = {"bootstrap.servers": kafka.bootstrap}
    tracker = AckTracker()
    sink = KafkaSink(settings, tracker, topics=TopicCreator(settings), tombstones=True)
    topic = unique("sink.tomb")
    txn = tracker.begin(5)
    sink.produce_delete(topic, b"k", b"delete-event", txn)
    sink.produce_delete(topic, None, b"keyless-delete", txn)  # nothing to compact: no tombstone
    txn.seal()
    sink.close()
    assert tracker.delivered_lsn() == 5
    records = read_partitions(kafka.bootstrap, topic, 1)[0]
    assert [(r.key(), r.value()) for r in records] == [
        (b"k", b"delete-event"), (b"k", None), (None, b"keyless-delete")]


def test_unreachable_broker_fails_without_advancing(kafka: Any) -> None:
    tracker = AckTracker(start_lsn=1000)
    sink = KafkaSink({"bootstrap.servers": "127.0.0.1:9", "message.timeout.ms": 3000,
                      "socket.connection.setup.timeout.ms": 1000}, tracker)
    txn = tracker.begin(2000)
    sink.produce("sink.nowhere", b"k", b"v", txn)
    txn.seal()
    started = time.monotonic()
    with pytest.raises(SinkError) as raised:
        while time.monotonic() - started < 30:
            sink.poll(0.5)
    assert time.monotonic() - started < 30
    message = str(raised.value)
    assert "sink.nowhere" in message and "timed out" in message.lower()
    assert "\n" not in message
    assert tracker.delivered_lsn() == 1000
    with pytest.raises(SinkError):
        sink.flush(1)


def test_record_too_large_names_topic_and_lsn(kafka: Any) -> None:
    settings = {"bootstrap.servers": kafka.bootstrap, "message.max.bytes": 10_000}
    tracker = AckTracker(start_lsn=7)
    sink = KafkaSink(settings, tracker, topics=TopicCreator(settings))
    topic = unique("sink.big")
    txn = tracker.begin(0x1_0000_0000)
    with pytest.raises(SinkError) as raised:
        sink.produce(topic, b"k", b"x" * 20_000, txn)
    message = str(raised.value)
    assert topic in message and "1/0" in message and "20001 bytes" in message
    txn.seal()
    assert tracker.delivered_lsn() == 7
    with pytest.raises(SinkError):
        sink.poll(0)


def test_a_sink_without_success_reports_completes_only_once_drained(kafka: Any) -> None:
    """`BulkSink` (the snapshot readers' sink): nothing completes per event; close()
    drains the queue and then completes every transaction."""
    settings = {"bootstrap.servers": kafka.bootstrap}
    tracker = AckTracker(start_lsn=50)
    sink = BulkSink(settings, tracker, topics=TopicCreator(settings, TopicSpec(partitions=2)))
    topic = unique("sink.bulk")
    for end_lsn in (100, 200):
        txn = tracker.begin(end_lsn)
        for i in range(500):
            sink.produce(topic, f"k{i}".encode(), f"{end_lsn}:{i}".encode(), txn)
        txn.seal()
    assert sink.flush(30) == 0
    assert tracker.delivered_lsn() == 50  # delivered, but no success report completes anything
    sink.close()
    assert tracker.delivered_lsn() == 200
    assert tracker.open_transactions == 0
    records = read_partitions(kafka.bootstrap, topic, 2)
    assert sum(len(rs) for rs in records.values()) == 1000


def test_a_sink_without_success_reports_still_fails_on_a_failed_delivery(kafka: Any) -> None:
    tracker = AckTracker(start_lsn=1000)
    sink = BulkSink({"bootstrap.servers": "127.0.0.1:9", "message.timeout.ms": 2000,
                     "socket.connection.setup.timeout.ms": 1000}, tracker)
    txn = tracker.begin(2000)
    sink.produce("sink.nowhere", b"k", b"v", txn)
    txn.seal()
    with pytest.raises(SinkError) as raised:
        sink.close(20)
    assert "sink.nowhere" in str(raised.value)
    assert tracker.delivered_lsn() == 1000
    assert tracker.open_transactions == 1

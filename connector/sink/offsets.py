"""The ``<prefix>.offsets`` topic: pgcdc's own records in Kafka, in one compacted partition.

Two kinds of record share it, told apart by their key:

* ``<db>/<slot>``: the committed progress of an exactly-once producer (the end LSN of the
  newest PostgreSQL transaction its last Kafka transaction holds; transactional.py writes it
  with its events, `committed_lsn` reads it back, read_committed);
* ``topic:<name>``: the `TopicLedger`, the partitions pgcdc created each topic with (topics.py
  says why: a deleted or recreated topic is refused, not silently re-created), read
  read_uncommitted."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from connector.errors import SinkError

from .settings import admin_config, producer_config

__all__ = ["LEDGER_KEY_PREFIX", "TopicLedger", "committed_lsn", "ensure_offsets_topic",
           "offsets_topic", "progress_key", "read_ledger"]

log = logging.getLogger(__name__)

#: Key prefix of a ledger record in ``<prefix>.offsets`` (the progress records are ``db/slot``).
LEDGER_KEY_PREFIX = "topic:"


def offsets_topic(prefix: str) -> str:
    """One dot component after the prefix: the merge job's table pattern does not match it."""
    return f"{prefix}.offsets"


def progress_key(db: str, slot: str) -> bytes:
    return f"{db}/{slot}".encode()


def ensure_offsets_topic(settings: Mapping[str, Any], topic: str,
                         replication_factor: int, timeout_s: float = 30.0) -> None:
    """Create the compacted offsets topic (one partition) if missing; `settings`: an admin
    client's (`admin_config`)."""
    admin = AdminClient(dict(settings))
    new = NewTopic(topic, num_partitions=1, replication_factor=replication_factor,
                   config={"cleanup.policy": "compact"})
    try:
        if topic in admin.list_topics(timeout=timeout_s).topics:
            return
        admin.create_topics([new])[topic].result(timeout_s)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise SinkError(f"cannot create offsets topic {topic}: {exc.args[0].str()}",
                            transient=True) from None


def committed_lsn(kafka_config: Mapping[str, Any], topic: str, db: str, slot: str,
                  timeout_s: float = 30.0) -> int | None:
    """The last committed progress of `slot` in `topic` (read_committed), None if there is none."""
    settings = {k: v for k, v in kafka_config.items() if k != "logger"}
    consumer = Consumer({**settings, "group.id": f"pgcdc-offsets-{slot}",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest"})
    key = progress_key(db, slot)
    found: int | None = None
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=timeout_s)
        if high <= 0:
            return None
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout_s
        while True:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                value = msg.value()
                if msg.key() == key and value is not None:
                    found = int(json.loads(value)["end_lsn"])
            position = consumer.position([TopicPartition(topic, 0)])[0].offset
            if position >= high:  # read_committed: past the last stable offset
                return found
            if time.monotonic() > deadline:
                raise SinkError(f"cannot read the committed progress of slot {slot!r} from "
                                f"{topic} within {timeout_s:g} s", transient=True)
    except KafkaException as exc:
        raise SinkError(f"cannot read offsets topic {topic}: {exc.args[0].str()}",
                        transient=True) from None
    finally:
        consumer.close()


class TopicLedger:
    """pgcdc's durable record of the topics it created: ``topic:<name>`` → its partitions, in
    the compacted `topic` (``<prefix>.offsets``), read once, written synchronously."""

    def __init__(self, kafka_config: Mapping[str, Any], topic: str, *,
                 replication_factor: int = 1, timeout_s: float = 30.0) -> None:
        self.topic = topic
        self._config = admin_config(kafka_config)
        self._replication_factor = replication_factor
        self._timeout = timeout_s
        self._records: dict[str, int] | None = None
        self._producer: Producer | None = None
        self._error: str | None = None

    def records(self) -> dict[str, int]:
        """Topic → partitions pgcdc created it with (read from Kafka on first use)."""
        if self._records is None:
            ensure_offsets_topic(self._config, self.topic, self._replication_factor,
                                 self._timeout)
            self._records = read_ledger(self._config, self.topic, self._timeout)
        return self._records

    def record(self, topic: str, partitions: int) -> None:
        """Make `topic` → `partitions` durable before anything is written to `topic`."""
        if self._producer is None:
            self._producer = Producer(producer_config(self._config))
        self._error = None
        value = json.dumps({"topic": topic, "partitions": partitions}).encode()
        self._producer.produce(self.topic, value, (LEDGER_KEY_PREFIX + topic).encode(),
                               on_delivery=self._delivered)
        if self._producer.flush(self._timeout) or self._error is not None:
            raise SinkError(f"cannot record topic {topic} in {self.topic}: "
                            f"{self._error or 'not acknowledged in time'}",
                            transient=self._error is None)  # Kafka slow or restarting
        self.records()[topic] = partitions
        log.info("recorded topic %s (%d partitions) in %s", topic, partitions, self.topic)

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._error = str(err)


_NEW_TOPIC_ERRORS = {KafkaError._UNKNOWN_PARTITION, KafkaError.NOT_LEADER_FOR_PARTITION,
                     KafkaError.LEADER_NOT_AVAILABLE}


def read_ledger(kafka_config: Mapping[str, Any], topic: str, timeout_s: float) -> dict[str, int]:
    """The ledger records of `topic`, last one per key. read_uncommitted: ledger records are
    not transactional, and an exactly-once producer's open transaction must not block this."""
    settings = {k: v for k, v in kafka_config.items() if k != "logger"}
    consumer = Consumer({**settings, "group.id": f"pgcdc-ledger-{topic}",
                         "enable.auto.commit": False, "isolation.level": "read_uncommitted",
                         "auto.offset.reset": "earliest"})
    found: dict[str, int] = {}
    prefix = LEDGER_KEY_PREFIX.encode()
    deadline = time.monotonic() + timeout_s
    try:
        while True:  # a topic created a moment ago may be unknown to the metadata, or have
            # no leader yet, for a while
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0),
                                                           timeout=timeout_s)
                break
            except KafkaException as exc:
                if (exc.args[0].code() not in _NEW_TOPIC_ERRORS
                        or time.monotonic() > deadline):
                    raise
                time.sleep(0.2)
        if high <= low:
            return found
        consumer.assign([TopicPartition(topic, 0, low)])
        while True:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                key = msg.key() or b""
                if key.startswith(prefix):
                    name = key[len(prefix):].decode()
                    value = msg.value()
                    if value is None:
                        found.pop(name, None)
                    else:
                        found[name] = int(json.loads(value)["partitions"])
            if consumer.position([TopicPartition(topic, 0)])[0].offset >= high:
                return found
            if time.monotonic() > deadline:
                raise SinkError(f"cannot read pgcdc's record of its topics from {topic} "
                                f"within {timeout_s:g} s", transient=True)
    except KafkaException as exc:
        raise SinkError(f"cannot read {topic}: {exc.args[0].str()}", transient=True) from None
    finally:
        consumer.close()

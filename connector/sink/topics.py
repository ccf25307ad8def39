"""Create missing topics with the configured partitions, replication and retention.

Defaults keep every event forever (``retention.ms=-1``, ``cleanup.policy=delete``): the topics
are the replayable log the merge job rebuilds tables from. Creating a topic that already exists
is not an error, and an existing topic's settings are never changed.

A topic pgcdc created is never re-created behind its back (issue 24). Kafka brokers create a
missing topic on a producer's first write by default (``auto.create.topics.enable``), with the
broker's partition count: after a deletion, the events and the key→partition mapping would be
gone without a word. So the producer never lets a write create a topic
(``allow.auto.create.topics=false``, forced in producer.py), and pgcdc remembers which topics
it created, and with how many partitions, in a `TopicLedger`: one record per topic (key
``topic:<name>``) in the compacted ``<prefix>.offsets`` topic, written and flushed *before* the
first event goes to the topic. Kafka itself is the record, so it survives restarts and moves of
the producer, and it is written on the path that creates topics, so every topic pgcdc wrote to
is in it (the snapshot's topics too). At a restart, a topic that is recorded but missing was
deleted, not never created; one with another partition count was recreated. `topic_problem`
(pure) says what is wrong and what to do; the `TopicCreator` refuses to (re)create such a topic
when pgcdc is about to write to it (the first change of its table after a restart: the slot
replays whatever was not delivered, so a topic deleted under undelivered changes is refused at
once; one whose table has no new change is refused at that table's next change, before anything
is written), and the sink re-checks its topics every few seconds while streaming. The operator
acknowledges a loss by recreating the topic with the recorded partitions (and re-snapshotting
the table).
The ledger itself is not guarded: deleting ``<prefix>.offsets`` forgets what pgcdc created.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.admin._listoffsets import OffsetSpec
from confluent_kafka.admin._resource import ResourceType
from confluent_kafka.cimpl import NewTopic

from connector.errors import ConfigError, SinkError

from .offsets import TopicLedger
from .settings import admin_config

__all__ = ["TopicCreator", "TopicSpec", "create_failure_transient", "listed_partitions",
           "partition_count", "topic_problem"]

log = logging.getLogger(__name__)

_ALREADY_EXISTS = KafkaError.TOPIC_ALREADY_EXISTS

# CreateTopics answers that mean "the cluster is not ready yet", not "this request is wrong":
# a broker restarting or a controller moving. Kafka marks some of them retriable; a KRaft
# broker that has just restarted is fenced for a few seconds and answers
# INVALID_REPLICATION_FACTOR ("All brokers are currently fenced"), which says "wrong" unless
# read together with its text.
_NOT_READY = frozenset({KafkaError.BROKER_NOT_AVAILABLE, KafkaError.NOT_CONTROLLER,
                        KafkaError.REQUEST_TIMED_OUT, KafkaError.LEADER_NOT_AVAILABLE,
                        KafkaError._TIMED_OUT, KafkaError._TRANSPORT,
                        KafkaError._ALL_BROKERS_DOWN})


def create_failure_transient(error: KafkaError | None) -> bool:
    """Whether a failed CreateTopics may succeed when tried again (the stream is retried from
    the slot with backoff) rather than needing the operator (a replication factor above the
    brokers there are, a refused topic name or setting): `pgcdc run` must not stop because
    Kafka was restarting when a new table's topic was due."""
    if error is None:  # no answer at all: the cluster did not respond in time
        return True
    if error.retriable() or error.code() in _NOT_READY:
        return True
    return error.code() == KafkaError.INVALID_REPLICATION_FACTOR and "fenced" in error.str()


def topic_problem(topic: str, recorded: int | None, actual: int | None) -> str | None:
    """What is wrong with `topic` given the partitions pgcdc created it with (`recorded`, None:
    not pgcdc's) and its partitions now (`actual`, None: it does not exist); None if nothing.
    The message is the one line the CLI prints: what happened and what to do."""
    if recorded is None or actual == recorded:
        return None
    redo = (f"Recreate it with {recorded} partitions (kafka-topics.sh --create --topic {topic} "
            f"--partitions {recorded}) and re-snapshot its table (pgcdc snapshot --tables "
            "<schema.table>) so the topic holds every row again, then restart pgcdc; nothing "
            "Kafka did not take was confirmed to PostgreSQL")
    if actual is None:
        return (f"topic {topic} was deleted after pgcdc created it with {recorded} partitions: "
                f"its events are gone and pgcdc does not let Kafka recreate it silently. {redo}")
    return (f"topic {topic} has {actual} partitions but pgcdc created it with {recorded} (was it "
            "deleted and recreated?): its history and the key-to-partition mapping changed. "
            f"{redo}")

def listed_partitions(metadata: Any, topic: str) -> int | None:
    """`topic`'s partitions in a metadata answer. None: Kafka says it does not exist (not
    listed, or listed with UNKNOWN_TOPIC_OR_PART). 0: it exists but is not usable yet (listed
    with another error or no partitions: a leader being elected on a broker still starting, a
    topic created a moment ago) -- no proof of anything, ask again."""
    info = metadata.topics.get(topic)
    if info is None:
        return None
    if info.error is not None:
        return None if info.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART else 0
    return len(info.partitions)


@dataclass(frozen=True)
class TopicSpec:
    """How new topics are created. `None` partitions/replication: the broker's default."""

    partitions: int | None = 1
    replication_factor: int | None = 1
    retention_ms: int = -1  # -1: unlimited
    cleanup_policy: str = "delete"  # or "compact", "compact,delete"
    configs: Mapping[str, str] = field(default_factory=dict)  # any other topic config

    def __post_init__(self) -> None:
        if self.partitions is not None and self.partitions < 1:
            raise ConfigError(f"topic partitions must be >= 1, not {self.partitions}")
        if self.replication_factor is not None and self.replication_factor < 1:
            raise ConfigError(f"replication factor must be >= 1, not {self.replication_factor}")
        if self.retention_ms < -1:
            raise ConfigError(f"retention.ms must be -1 (unlimited) or >= 0, "
                              f"not {self.retention_ms}")
        policies = set(self.cleanup_policy.replace(" ", "").split(","))
        if not policies or not policies <= {"delete", "compact"}:
            raise ConfigError(f"cleanup.policy must be delete, compact or both, "
                              f"not {self.cleanup_policy!r}")

    def topic_config(self) -> dict[str, str]:
        config = {"retention.ms": str(self.retention_ms),
                  "cleanup.policy": self.cleanup_policy.replace(" ", "")}
        config.update({k: str(v) for k, v in self.configs.items()})
        return config

    def new_topic(self, name: str) -> NewTopic:
        return NewTopic(name,
                        num_partitions=-1 if self.partitions is None else self.partitions,
                        replication_factor=(-1 if self.replication_factor is None
                                            else self.replication_factor),
                        config=self.topic_config())


class TopicCreator:
    """Creates topics once each (idempotent, thread-safe); remembers what it ensured.

    With a `ledger`, every topic it ensures is recorded there, and a recorded topic that is
    missing or has other partitions is refused (`topic_problem`) instead of created."""

    def __init__(self, kafka_config: Mapping[str, Any], spec: TopicSpec | None = None,
                 *, timeout_s: float = 30.0, admin: AdminClient | None = None,
                 ledger: TopicLedger | None = None) -> None:
        self.spec = spec or TopicSpec()
        self._timeout = timeout_s
        self._admin = admin or AdminClient(admin_config(kafka_config))
        self._known: set[str] = set()
        self._lock = threading.Lock()
        self.ledger = ledger

    @property
    def timeout_s(self) -> float:
        """How long each of its Kafka requests may go unanswered (`--kafka-timeout-s`)."""
        return self._timeout

    def known(self, topic: str) -> bool:
        """Whether `topic` was ensured (checked, created, recorded) by this creator before."""
        return topic in self._known

    def recorded(self, topic: str) -> int | None:
        """Partitions pgcdc created `topic` with, per the ledger (None: no ledger or record)."""
        return None if self.ledger is None else self.ledger.records().get(topic)

    def ensure(self, topics: Iterable[str]) -> list[str]:
        """Create those of `topics` that do not exist yet; returns the ones created now."""
        wanted = [t for t in dict.fromkeys(topics) if t not in self._known]
        if not wanted:
            return []
        with self._lock:
            wanted = [t for t in wanted if t not in self._known]
            if not wanted:
                return []
            created = (self._create(wanted) if self.ledger is None
                       else self._create_recorded(wanted, self.ledger))
            self._known.update(wanted)
            return created

    def _create_recorded(self, wanted: list[str], ledger: TopicLedger) -> list[str]:
        """Refuse recorded topics that were deleted or recreated; create the missing others;
        record each (before any event goes there)."""
        existing = self.existing()
        recorded = ledger.records()
        for topic in wanted:
            if existing.get(topic) == 0:  # exists, not usable yet: wait for its partitions
                existing[topic] = self.partitions(topic)
            problem = topic_problem(topic, recorded.get(topic), existing.get(topic))
            if problem is not None:
                raise SinkError(problem)
        missing = [t for t in wanted if t not in existing]
        created = self._create(missing) if missing else []
        for topic in wanted:
            if topic in existing:
                partitions = existing[topic]
            elif topic in created and self.spec.partitions is not None:
                partitions = self.spec.partitions
            else:
                partitions = self.partitions(topic)
            if recorded.get(topic) != partitions:
                ledger.record(topic, partitions)
        return created

    def existing(self) -> dict[str, int]:
        """Every topic of the cluster → its partitions, 0 for one not usable yet
        (`listed_partitions`; a metadata request naming no topic, which never creates one)."""
        try:
            metadata = self._admin.list_topics(timeout=self._timeout)
        except KafkaException as exc:  # while streaming: retried from the slot
            raise SinkError(f"cannot list Kafka topics: {exc} (is Kafka reachable?)",
                            transient=True) from None
        listed = {name: listed_partitions(metadata, name) for name in metadata.topics}
        return {name: partitions for name, partitions in listed.items() if partitions is not None}

    def ensure_one(self, topic: str) -> bool:
        """`ensure([topic])`; True if it was created now."""
        return bool(self.ensure([topic]))

    def _create(self, topics: list[str]) -> list[str]:
        futures = self._admin.create_topics([self.spec.new_topic(t) for t in topics],
                                            operation_timeout=self._timeout,
                                            request_timeout=self._timeout)
        created = []
        for topic, future in futures.items():
            try:
                future.result(timeout=self._timeout)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                if isinstance(error, KafkaError) and error.code() == _ALREADY_EXISTS:
                    continue
                kafka_error = error if isinstance(error, KafkaError) else None
                raise SinkError(f"cannot create topic {topic}: {error or exc}",
                                transient=create_failure_transient(kafka_error)) from None
            except Exception as exc:  # a timeout of the future: the cluster did not answer
                raise SinkError(f"cannot create topic {topic}: {type(exc).__name__}: {exc} "
                                "(is Kafka reachable?)", transient=True) from None
            log.info("created topic %s (%s)", topic, self.spec)
            created.append(topic)
        return created

    def topics_with_events(self, prefix: str) -> list[str]:
        """Topics named ``<prefix>.*`` that ever held an event (some partition's end offset is
        past 0, even if retention removed the events since): the connector published before."""
        try:
            metadata = self._admin.list_topics(timeout=self._timeout)
        except KafkaException as exc:
            raise SinkError(f"cannot list Kafka topics: {exc} (is Kafka reachable?)") from None
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        requests = {TopicPartition(name, partition): latest
                    for name, info in metadata.topics.items()
                    if name.startswith(prefix + ".") and info.error is None
                    for partition in info.partitions}
        if not requests:
            return []
        futures = self._admin.list_offsets(requests, request_timeout=self._timeout)
        held = set()
        for tp, future in futures.items():
            try:
                end = future.result(timeout=self._timeout).offset
            except Exception as exc:  # KafkaException, or a timeout of the future
                raise SinkError(f"cannot read the end offset of {tp.topic}[{tp.partition}]: "
                                f"{exc}") from None
            if end > 0:
                held.add(tp.topic)
        return sorted(held)

    def compacted_topics(self, prefix: str) -> list[str]:
        """Existing table topics ``<prefix>.<schema>.<table>`` whose ``cleanup.policy``
        includes ``compact``. pgcdc's own single-part topics (``<prefix>.offsets``, compacted
        by design, and ``<prefix>.heartbeat``) are not table topics and are left out."""
        try:
            metadata = self._admin.list_topics(timeout=self._timeout)
        except KafkaException as exc:
            raise SinkError(f"cannot list Kafka topics: {exc} (is Kafka reachable?)") from None
        resources = [ConfigResource(ResourceType.TOPIC, name) for name in metadata.topics
                     if name.startswith(prefix + ".") and name[len(prefix) + 1:].count(".") == 1]
        if not resources:
            return []
        futures = self._admin.describe_configs(resources, request_timeout=self._timeout)
        compacted = []
        for resource, future in futures.items():
            try:
                entries = future.result(timeout=self._timeout)
            except Exception as exc:  # KafkaException, or a timeout of the future
                raise SinkError(f"cannot read the configuration of topic {resource.name}: "
                                f"{exc}") from None
            policy = entries.get("cleanup.policy")
            if policy is not None and "compact" in str(policy.value):
                compacted.append(resource.name)
        return sorted(compacted)

    def partitions(self, topic: str) -> int:
        """The partition count of an existing topic (from cluster metadata)."""
        return partition_count(self._admin, topic, self._timeout)


def partition_count(client: Any, topic: str, timeout_s: float) -> int:
    """Partitions of `topic` per `client.list_topics` (Producer or AdminClient). A topic created
    a moment ago may be unknown to the broker's metadata for a while: retry until `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            metadata = client.list_topics(topic, timeout=timeout_s)
        except KafkaException as exc:
            raise SinkError(f"cannot read metadata of topic {topic}: {exc}",
                            transient=True) from None
        info = metadata.topics.get(topic)
        if info is not None and info.error is None and info.partitions:
            return len(info.partitions)
        if time.monotonic() >= deadline:
            reason = info.error if info is not None and info.error is not None else "no partitions"
            raise SinkError(f"topic {topic} is not usable: {reason}")
        time.sleep(0.2)

"""The Kafka producer: idempotent, acks=all, every delivery tracked against its transaction.

    tracker = AckTracker(start_lsn=slot_confirmed_lsn)
    sink = KafkaSink({"bootstrap.servers": ..., **user_settings}, tracker,
                     topics=TopicCreator(settings, TopicSpec(partitions=3)), tombstones=False)
    txn = tracker.begin(end_lsn)
    sink.produce(topic, key, value, txn)
    sink.produce_truncate(topic, truncate_value, txn)   # partitions: truncate_records
    txn.seal()
    sink.poll()                  # serves delivery reports; raises SinkError after a failure
    tracker.delivered_lsn()          # -> flush LSN for PostgreSQL
    sink.close()                 # flush everything (raises if anything stays undelivered)

Retries: librdkafka retries retriable errors itself (with idempotence, without reordering or
duplicates) until ``message.timeout.ms`` (default here 300000 = 5 min) runs out; only then a
delivery report carries an error. Any such error is fatal: the transaction's ticket fails, the
delivered LSN stays below it, and the next `poll`/`flush`/`produce` raises `SinkError` naming topic,
partition and error. PostgreSQL re-sends the unconfirmed transactions after a restart.

Settings: any librdkafka producer setting passes through (TLS, SASL, ``compression.type``...).
``enable.idempotence`` and ``acks`` are forced (changing them would allow loss or reordering),
and so is the absence of ``transactional.id`` (the exactly-once mode is a different tracker).
``queue.buffering.max.kbytes`` defaults to 64 MiB (librdkafka's is 1 GiB) so a huge
transaction cannot balloon memory; when the queue is full `produce` serves delivery reports
until there is room. ``allow.auto.create.topics`` is forced off: a write to a missing topic
must never make the broker create it (topics.py says why; pgcdc creates its topics itself).

Deleted topics (issue 24): the sink remembers, for each topic the `TopicCreator`'s ledger
recorded, the partitions pgcdc created it with, and compares them with the cluster's metadata
(one request naming no topic) at the topic's first use in a session and then at most every
`topic_check_interval_s` seconds from `poll`, and whenever a delivery failed. A missing topic or
another partition count stops the sink for good with `topics.topic_problem`'s line. A topic
created a moment ago is only used once the metadata shows it, and a topic missing from the
listing is asked for by name before it counts as deleted: a broker's metadata lags behind
CreateTopics, and that window must not read as a deletion. Until
then nothing for the missing topic is acknowledged (librdkafka holds the records: it may not
create the topic), so the delivered LSN stays below it. `add_check` adds other such checks (the
registry's, connector/avro/registry.py), run from `poll` too.

Oversized events (issue 24, ``--oversized-events omit``): `produce` is the one seam every
encoded event passes (the publisher's stream, the initial snapshot's readers, the incremental
snapshots), so the size check is here: one compare of the key + value length it computes anyway
with `max_event_bytes` (sys.maxsize without the policy, so the default path is unchanged). A
larger record goes to the `oversized` hook (connector/avro/oversized.py), which returns a smaller
value and its ``pgcdc.omitted`` header, or None: then the record goes out as it is and fails
as without the policy.
"""

from __future__ import annotations

import logging
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Producer

from connector import metrics
from connector.errors import SinkError
from connector.pgoutput.lsn import lsn_to_str

from .acks import PendingTxn, Ticket
from .settings import ANY_PARTITION, PRODUCER_DEFAULTS, Headers, producer_config
from .topics import TopicCreator, listed_partitions, partition_count, topic_problem

__all__ = ["PRODUCER_DEFAULTS", "BulkSink", "KafkaSink", "Oversized", "Sink", "producer_config",
           "truncate_partitions"]

#: `--oversized-events omit`'s hook: (topic, key, value) -> (smaller value, headers), or None
#: to produce the record as it is.
Oversized = Callable[[str, bytes | None, bytes], tuple[bytes, list[tuple[str, bytes]]] | None]

log = logging.getLogger(__name__)

def truncate_partitions(mode: str, partitions: int) -> range:
    """The partitions a truncate is written to, by ``truncate_records`` (schemas/README.md
    "Truncate"): ``every-partition`` all of them, each copy in order with every key (the merge
    job's cut); ``one`` partition 0 only (one record, as Debezium writes it: a consumer
    applying it table-wide in its read order is exact on a topic of one partition);
    ``none`` no record (consumers keep the truncated rows)."""
    if mode == "every-partition":
        return range(partitions)
    if mode == "one":
        return range(1)
    if mode == "none":
        return range(0)
    raise ValueError(f"unknown truncate_records mode {mode!r} (connector.config "
                     "TRUNCATE_RECORDS lists them)")


class Sink(ABC):
    """Produces Confluent-framed events: what every delivery mode shares (topics, size policy,
    deletes and truncates, guards). Each mode is a subclass chosen once by whoever builds the
    sink: `KafkaSink` (at-least-once, every delivery reported to its ticket), `BulkSink`
    (failed deliveries reported only, for bulk loads) and `transactional.TransactionalSink`
    (exactly-once: the Kafka commit decides). A mode's per-record hand-off is its `_send`; the
    shared paths never touch a ticket beyond passing it to `_send` and `_refused`.

    `topics`: creates each topic (once) before its first event; None assumes they exist.
    `tombstones`: `produce_delete` adds a null-value record after each keyed delete.
    `partition_cache_s`: how long a topic's partition count (for truncates) is reused.
    `truncate_records`: which partitions `produce_truncate` writes (`truncate_partitions`).
    `transactional_id`: the producer's, for a caller that runs Kafka transactions.
    """

    def __init__(self, kafka_config: Mapping[str, Any], *,
                 topics: TopicCreator | None = None, tombstones: bool = False,
                 partition_cache_s: float = 10.0, metadata_timeout_s: float = 30.0,
                 transactional_id: str | None = None,
                 topic_check_interval_s: float = 5.0,
                 oversized: Oversized | None = None, max_event_bytes: int = 0,
                 truncate_records: str = "every-partition") -> None:
        truncate_partitions(truncate_records, 1)  # refuses an unknown mode now, not at a truncate
        self.truncate_records = truncate_records
        config = producer_config(kafka_config)
        if transactional_id is not None:
            config["transactional.id"] = transactional_id
        config.update(self._mode_settings())
        config.setdefault("error_cb", self._on_error)
        config.setdefault("logger", logging.getLogger("connector.sink.librdkafka"))
        self._producer = Producer(config)
        self._topics = topics
        self.tombstones = tombstones
        self._partition_cache_s = partition_cache_s
        self._metadata_timeout_s = metadata_timeout_s
        self._ready: set[str] = set()
        self._partitions: dict[str, tuple[int, float]] = {}
        self._fatal: SinkError | None = None
        # Topics the ledger recorded -> their partitions, checked against the cluster.
        self._expected: dict[str, int] = {}
        self._topic_check_interval_s = topic_check_interval_s
        self._next_topic_check = 0.0
        self._checks: list[Callable[[], None]] = []
        self.events = 0  # records handed to librdkafka
        self.bytes = 0  # their key + value bytes
        # --oversized-events omit: a record over `max_event_bytes` goes through `oversized`
        # first (connector/avro/oversized.py); without it the hot path compares with maxsize.
        self._oversized = oversized
        self._omit_above = max_event_bytes if oversized is not None else sys.maxsize

    # ------------------------------------------------------------------ producing

    def produce(self, topic: str, key: bytes | None, value: bytes | None, ticket: Ticket, *,
                partition: int | None = None, headers: Headers | None = None) -> None:
        """Queue one record; its delivery report goes to `ticket`. `headers`: a record that is
        not a change event (a routed outbox event, connector/outbox.py, Avro or not), which the
        oversized policy leaves as it is."""
        if topic not in self._ready:
            self._prepare(topic)
        size = len(value or b"") + len(key or b"")
        if size > self._omit_above and value is not None and headers is None:
            self._produce_oversized(topic, key, value, ticket, partition)
            return
        if partition is None and headers is None:
            try:  # the hot path: the mode's one call into librdkafka
                self._send(topic, value, key, ticket)
            except BufferError:
                self._produce_slow(topic, key, value, ticket, None)
            except KafkaException as exc:
                raise self._refused(topic, key, value, ticket, exc) from None
        else:
            self._produce_slow(topic, key, value, ticket, partition, headers)
        self.events += 1
        self.bytes += size

    def _produce_oversized(self, topic: str, key: bytes | None, value: bytes, ticket: Ticket,
                           partition: int | None) -> None:
        """A record over `max_event_bytes`: made to fit by the policy, with its header; one it
        cannot shrink goes out as it is (and fails as without the policy)."""
        assert self._oversized is not None
        shrunk = self._oversized(topic, key, value)
        headers: Headers | None = None
        if shrunk is not None:
            value, headers = shrunk[0], [*shrunk[1]]
        self._produce_slow(topic, key, value, ticket, partition, headers)
        self.events += 1
        self.bytes += len(value) + len(key or b"")

    def _produce_slow(self, topic: str, key: bytes | None, value: bytes | None, ticket: Ticket,
                      partition: int | None, headers: Headers | None = None
                      ) -> None:
        """`produce` with a partition, or after the local queue was full: waits for room;
        a refused record raises `SinkError` (`_refused`)."""
        chosen = ANY_PARTITION if partition is None else partition
        while True:
            try:
                self._send(topic, value, key, ticket, chosen, headers)
                break
            except BufferError:  # local queue full: serve delivery reports to make room
                self._producer.poll(0.1)
                self._check()
            except KafkaException as exc:
                raise self._refused(topic, key, value, ticket, exc) from None

    def _mode_settings(self) -> dict[str, Any]:
        """The mode's own librdkafka settings, over the user's (none by default)."""
        return {}

    @abstractmethod
    def _send(self, topic: str, value: bytes | None, key: bytes | None, ticket: Ticket,
              partition: int = ANY_PARTITION, headers: Headers | None = None) -> None:
        """Hand one record of `ticket`'s transaction to librdkafka (raises BufferError when
        its queue is full, and then has not taken the record, KafkaException when it refuses
        it)."""

    def _refused(self, topic: str, key: bytes | None, value: bytes | None, ticket: Ticket,
                 exc: KafkaException) -> SinkError:
        """The error of a record librdkafka refused (too large, unknown partition...)."""
        size = len(value or b"") + len(key or b"")
        return SinkError(f"cannot produce to {topic}: {exc.args[0] if exc.args else exc}"
                         f" (record of {size} bytes, transaction ending at LSN "
                         f"{lsn_to_str(ticket.end_lsn)})")

    def produce_delete(self, topic: str, key: bytes | None, value: bytes, ticket: Ticket) -> None:
        """A delete event, followed by a tombstone (same key, null value) when enabled."""
        self.produce(topic, key, value, ticket)
        if self.tombstones and key is not None:
            self.produce(topic, key, None, ticket)

    def produce_truncate(self, topic: str, value: bytes, ticket: Ticket) -> int:
        """A truncate (keyless) into the partitions `truncate_records` chooses; how many."""
        if topic not in self._ready:
            self._prepare(topic)
        chosen = truncate_partitions(self.truncate_records,
                                     self.partitions(topic) if self.truncate_records ==
                                     "every-partition" else 1)
        for partition in chosen:
            self.produce(topic, None, value, ticket, partition=partition)
        return len(chosen)

    def partitions(self, topic: str) -> int:
        """Partition count of `topic` from metadata, cached for `partition_cache_s` seconds."""
        now = time.monotonic()
        cached = self._partitions.get(topic)
        if cached is not None and now - cached[1] < self._partition_cache_s:
            return cached[0]
        count = partition_count(self._producer, topic, self._metadata_timeout_s)
        self._partitions[topic] = (count, now)
        return count

    def _prepare(self, topic: str) -> None:
        if self._topics is not None:
            ensured_before = self._topics.known(topic)
            self._topics.ensure_one(topic)
            recorded = self._topics.recorded(topic)
            if recorded is not None:
                self._expected[topic] = recorded
                if ensured_before:  # in an earlier session: it may be gone since
                    self.check_topics()
                else:  # created now: its absence means something only once metadata had it
                    self._await_visible(topic)
        self._ready.add(topic)

    def _await_visible(self, topic: str) -> None:
        """Wait until the cluster's metadata shows a topic created a moment ago. A broker
        answers CreateTopics before every metadata cache has the topic, and the periodic check
        must not take that window for a deletion."""
        deadline = time.monotonic() + self._metadata_timeout_s
        while True:
            try:
                if self._partitions_now(topic) is not None:
                    return
            except KafkaException as exc:  # no answer yet: the deadline decides
                log.debug("metadata of new topic %s: %s", topic, exc)
            if time.monotonic() >= deadline:
                raise SinkError(f"topic {topic} was created but Kafka's metadata does not show "
                                f"it after {self._metadata_timeout_s:.0f} s; check the brokers")
            time.sleep(0.05)

    # ------------------------------------------------------------------ guards

    def add_check(self, check: Callable[[], None]) -> None:
        """Run `check` (cheap; raises `CdcError` to stop) from every `poll` and before a
        commit (exactly-once)."""
        self._checks.append(check)

    def check_topics(self) -> None:
        """Raise `SinkError` if a recorded topic is gone or has other partitions (sticky)."""
        self._next_topic_check = time.monotonic() + self._topic_check_interval_s
        if not self._expected:
            return
        try:
            metadata = self._producer.list_topics(timeout=self._metadata_timeout_s)
        except KafkaException as exc:  # the metadata is what failed: next time, or a delivery
            log.warning("cannot check the topics: %s", exc.args[0] if exc.args else exc)
            return
        for topic, recorded in self._expected.items():
            actual = listed_partitions(metadata, topic)
            if actual is None:  # one broker's stale cache is no proof: ask for it by name
                try:
                    actual = self._partitions_now(topic)
                except KafkaException as exc:
                    log.warning("cannot check topic %s: %s", topic, exc.args[0] if exc.args
                                else exc)
                    return
            if actual == 0:  # there, not usable yet (a broker starting): check next time
                log.info("topic %s has no usable partitions yet; checking again later", topic)
                continue
            problem = topic_problem(topic, recorded, actual)
            if problem is not None:
                self._fatal = SinkError(problem)
                log.error("%s", problem)
                raise self._fatal

    def _partitions_now(self, topic: str) -> int | None:
        """`topic`'s partitions in a metadata request naming it; None if the cluster does not
        know it, 0 if not usable yet (auto-creation is off, so asking never creates it). Raises
        KafkaException when the cluster does not answer."""
        metadata = self._producer.list_topics(topic, timeout=self._metadata_timeout_s)
        return listed_partitions(metadata, topic)

    def _guard(self) -> None:
        """The periodic checks: recorded topics when due, then the added ones."""
        if self._expected and time.monotonic() >= self._next_topic_check:
            self.check_topics()
        for check in self._checks:
            check()

    # ------------------------------------------------------------------ delivery reports

    def poll(self, timeout_s: float = 0.0) -> int:
        """Serve delivery reports; raises `SinkError` once any delivery failed."""
        served: int = self._producer.poll(timeout_s)
        self._check()
        self._guard()
        return served

    def flush(self, timeout_s: float = 30.0) -> int:
        """Wait for in-flight records; returns how many are still undelivered."""
        remaining: int = self._producer.flush(timeout_s)
        self._check()
        return remaining

    def close(self, timeout_s: float = 30.0) -> None:
        """Deliver everything queued or raise `SinkError`; the delivered LSN is final afterwards."""
        remaining = self.flush(timeout_s)
        if remaining:
            raise SinkError(f"{remaining} events still undelivered after {timeout_s:g} s; "
                            "their transactions are not confirmed to PostgreSQL")

    def __len__(self) -> int:
        """Records queued in librdkafka, not yet acknowledged."""
        return len(self._producer)

    def _check(self) -> None:
        """Raise what stopped the sink for good (a fatal producer, a deleted topic)."""
        if self._fatal is not None:
            raise self._fatal

    def _on_error(self, error: KafkaError) -> None:
        """librdkafka's global errors: fatal ones stop the sink, the rest it retries itself."""
        if error.fatal():
            self._fatal = SinkError(f"Kafka producer failed fatally: {error.str()}")
            log.error("%s", self._fatal)
        else:
            log.warning("Kafka: %s", error.str())

    @property
    def producer(self) -> Producer:
        """The underlying confluent_kafka Producer (for metrics and tests)."""
        return self._producer


def _uncounted(ticket: Ticket) -> TypeError:
    """`KafkaSink` and `BulkSink` count each record against its ticket, so their tickets are
    `PendingTxn`s of the `AckTracker` they were built with (whoever builds the sink pairs the
    two); this is the error for any other ticket. (The check is inline on the hot path.)"""
    return TypeError(f"{type(ticket).__name__} is not an AckTracker's ticket: this sink "
                     "counts every record against its transaction")


class FailedDeliveries(Protocol):
    """What `KafkaSink` asks of its tracker (`AckTracker`): raise the first failed delivery
    its tickets recorded, as `SinkError`."""

    def check(self) -> None: ...


class KafkaSink(Sink):
    """The at-least-once mode: every record is counted against its ticket (`expect`) and its
    delivery report goes to that ticket, so the tracker's delivered LSN never passes an
    unacknowledged record. A failed report or a refused record fails the ticket for good; the
    next `poll`/`flush`/`produce` raises it. Tickets are `PendingTxn`s of `tracker`."""

    def __init__(self, kafka_config: Mapping[str, Any], tracker: FailedDeliveries,
                 **options: Any) -> None:
        super().__init__(kafka_config, **options)
        self._tracker = tracker

    def _send(self, topic: str, value: bytes | None, key: bytes | None, ticket: Ticket,
              partition: int = ANY_PARTITION, headers: Headers | None = None) -> None:
        if not isinstance(ticket, PendingTxn):
            raise _uncounted(ticket)
        self._producer.produce(topic, value, key, partition, on_delivery=ticket.on_delivery,
                               headers=headers)
        ticket.expect(1)  # after the hand-off: a BufferError retry must not count it twice

    def _refused(self, topic: str, key: bytes | None, value: bytes | None, ticket: Ticket,
                 exc: KafkaException) -> SinkError:
        """The refusal fails the record's ticket: its transaction never completes."""
        if not isinstance(ticket, PendingTxn):
            raise _uncounted(ticket)
        error = super()._refused(topic, key, value, ticket, exc)
        ticket.failed(error)
        return error

    def _check(self) -> None:
        super()._check()
        try:
            self._tracker.check()
        except SinkError:
            if self._expected:  # a delivery failed: because a topic went away? Say so.
                self.check_topics()
            raise


class DrainedDeliveries(Protocol):
    """What `BulkSink` asks of its tracker (`AckTracker`): the failures its tickets recorded,
    and "everything handed over was delivered" once the queue drained without one."""

    def check(self) -> None: ...

    def all_delivered(self) -> None: ...


class BulkSink(KafkaSink):
    """A `KafkaSink` for a bulk load that needs only "all delivered" at its end (the initial
    snapshot's readers): librdkafka reports failed deliveries only, with no per-record
    callback (its cheapest path, a third of the client's cost per event saved). Records are
    still counted against their ticket, but nothing completes per event; `close()` drains the
    queue and then tells the tracker everything was delivered. A failed delivery (which record
    of which ticket is not tracked) fails the sink as a whole."""

    def __init__(self, kafka_config: Mapping[str, Any], tracker: DrainedDeliveries,
                 **options: Any) -> None:
        super().__init__(kafka_config, tracker, **options)
        self._drained = tracker

    def _mode_settings(self) -> dict[str, Any]:
        return {"delivery.report.only.error": True, "on_delivery": self._on_failed_delivery}

    def _send(self, topic: str, value: bytes | None, key: bytes | None, ticket: Ticket,
              partition: int = ANY_PARTITION, headers: Headers | None = None) -> None:
        if not isinstance(ticket, PendingTxn):
            raise _uncounted(ticket)
        self._producer.produce(topic, value, key, partition, headers=headers)
        ticket.expect(1)

    def close(self, timeout_s: float = 30.0) -> None:
        super().close(timeout_s)
        self._drained.all_delivered()  # drained, and flush() raised no reported failure

    def _on_failed_delivery(self, err: Any, msg: Any) -> None:
        """The report of a record Kafka did not take: the sink fails as a whole."""
        metrics.DELIVERY_ERRORS.inc()
        where = "?" if msg is None else f"{msg.topic()}[{msg.partition()}]"
        if self._fatal is None:
            self._fatal = SinkError(f"Kafka did not accept an event for {where}: {err}; "
                                    "nothing of this load is acknowledged")
            log.error("%s", self._fatal)

"""Exactly-once delivery: a transactional Kafka producer that commits its progress with its events.

Each Kafka transaction holds whole PostgreSQL transactions and, last, a progress record (the end
LSN of the newest PostgreSQL transaction in it, keyed by slot) in the compacted topic
``<prefix>.offsets``. Both become visible to ``read_committed`` consumers together or not at all.
On start, `committed_lsn` reads that record back; every PostgreSQL transaction ending at or
before it is skipped, even when the slot's confirmed_flush_lsn lags (the slot is confirmed only
after a Kafka commit, so a crash between the two re-sends work Kafka already holds).

    tracker = TransactionalTracker(start_lsn=max(confirmed_flush_lsn, committed))
    sink = TransactionalSink(settings, tracker, slot=..., offsets_topic=..., topics=...)
    txn = tracker.begin(end_lsn); sink.produce(topic, key, value, txn); txn.seal()
    sink.poll()                 # commits a batch once it is big or old enough
    tracker.delivered_lsn()         # -> end LSN of the last committed batch: the flush LSN

A failed commit (broker restart, abortable error) aborts the Kafka transaction, confirms nothing
of it, and raises a transient `SinkError`: the pipeline drops the session and streams again from
the slot, skipping what the offsets topic says is committed. A fenced or otherwise fatal producer
raises a non-transient `SinkError`.

A commit first waits for the batch's deliveries in slices of a second, running the sink's
guards between them (a deleted topic, a schema id the registry no longer knows: producer.py):
records for a deleted topic are never delivered, and without this the commit would wait for
``transaction.timeout.ms``, fail as abortable and be retried. A failed guard aborts the batch
and raises its non-transient error; so does a failed commit when a topic check then finds the
cause.

The initial snapshot's producers use `SnapshotTransaction` instead: one Kafka transaction per
producer for the whole snapshot, committed together at its end
(connector/snapshot/initial/__init__.py).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, Producer

from connector.errors import ConfigError, SinkError
from connector.pgoutput.lsn import lsn_to_str

from .acks import Ticket
from .offsets import committed_lsn, ensure_offsets_topic, offsets_topic, progress_key
from .producer import Oversized, Sink
from .settings import ANY_PARTITION, Headers, producer_config
from .topics import TopicCreator

__all__ = ["SNAPSHOT_TRANSACTION_DEFAULTS", "BatchLimits", "ExactlyOnceSettings",
           "SnapshotTransaction", "TransactionalSink", "TransactionalTracker",
           "exactly_once_sink", "fence", "snapshot_transactional_id", "transactional_id"]

log = logging.getLogger(__name__)


TRANSACTIONAL_DEFAULTS: Mapping[str, Any] = {"transaction.timeout.ms": 60_000,
                                             "message.timeout.ms": 60_000}


@dataclass(frozen=True)
class BatchLimits:
    """When a Kafka transaction is committed: whichever limit is reached first."""

    transactions: int = 1000
    bytes: int = 16 * 1024 * 1024
    seconds: float = 0.1

    def __post_init__(self) -> None:
        if self.transactions < 1 or self.bytes < 1 or self.seconds < 0:
            raise ConfigError("exactly_once_batch_transactions and exactly_once_batch_bytes "
                              "must be >= 1, exactly_once_batch_ms >= 0")


@dataclass(frozen=True)
class ExactlyOnceSettings:
    """What `exactly_once_sink` takes from the configuration (the pipeline builds it)."""

    db: str
    slot: str
    topic_prefix: str
    replication_factor: int  # of the offsets topic
    timeout_s: float  # Kafka requests and metadata
    limits: BatchLimits
    tombstones: bool
    truncate_records: str


def transactional_id(db: str, slot: str) -> str:
    """Stable across restarts, so a restarted instance fences a zombie one."""
    return f"pgcdc-{db}-{slot}"


def snapshot_transactional_id(db: str, slot: str, reader: int | None) -> str:
    """The snapshot coordinator's (`reader` None) and each reader's id: stable across restarts,
    so a re-run's init_transactions aborts what the killed attempt left open at once."""
    base = f"{transactional_id(db, slot)}-snapshot"
    return base if reader is None else f"{base}-{reader}"


class _Ticket:
    """One PostgreSQL transaction in the open Kafka transaction (`TransactionalTracker.begin`):
    its end LSN and whether its last record was handed over. Nothing is counted per record:
    the Kafka commit, not per-record reports, decides what is delivered."""

    __slots__ = ("end_lsn", "sealed")

    def __init__(self, end_lsn: int) -> None:
        self.end_lsn = end_lsn
        self.sealed = False

    def seal(self) -> None:
        self.sealed = True


class TransactionalTracker:
    """`DeliveryTracker` of the exactly-once mode: the delivered LSN moves only at a Kafka commit.

    `start_lsn`: confirmed so far; `skip_until`: committed to Kafka (transactions ending at or
    before it are not produced again)."""

    def __init__(self, start_lsn: int | None, skip_until: int | None) -> None:
        self._delivered = start_lsn
        self.skip_until = skip_until or 0
        self._open: list[_Ticket] = []

    def resume_after(self, committed: int) -> None:
        """Kafka holds everything up to `committed`: skip it, and it may be confirmed."""
        self.skip_until = committed
        self._delivered = max(self._delivered or 0, committed)

    def begin(self, end_lsn: int) -> _Ticket:
        ticket = _Ticket(end_lsn)
        self._open.append(ticket)
        return ticket

    def skips(self, end_lsn: int) -> bool:
        """Kafka already holds the transaction ending at `end_lsn` (an earlier run committed
        it): its records are not produced again."""
        return end_lsn <= self.skip_until

    def delivered_lsn(self) -> int | None:
        return self._delivered

    @property
    def open_transactions(self) -> int:
        return len(self._open)

    @property
    def batch(self) -> list[_Ticket]:
        return self._open

    def committed(self) -> None:
        """The open Kafka transaction committed: its PostgreSQL transactions are delivered."""
        if self._open:
            last = self._open[-1].end_lsn
            self._delivered = max(self._delivered or 0, last)
        self._open = []

    def aborted(self) -> None:
        self._open = []


class TransactionalSink(Sink):
    """The exactly-once `Sink`: records go out in Kafka transactions committed with their
    progress. No record has a delivery report: a failed one fails `commit_transaction`
    (`commit`), and a refused one raises at once (`Sink._refused`)."""

    def __init__(self, kafka_config: Mapping[str, Any], tracker: TransactionalTracker, *,
                 db: str, slot: str, offsets: str, limits: BatchLimits = BatchLimits(),
                 topics: TopicCreator | None = None, tombstones: bool = False,
                 commit_timeout_s: float = 60.0, oversized: Oversized | None = None,
                 max_event_bytes: int = 0, metadata_timeout_s: float = 30.0,
                 truncate_records: str = "every-partition") -> None:
        # librdkafka wants message.timeout.ms <= transaction.timeout.ms; a killed instance's
        # open transaction is aborted by the broker after transaction.timeout.ms at the latest.
        kafka_config = {**TRANSACTIONAL_DEFAULTS, **kafka_config}
        super().__init__(kafka_config, topics=topics, tombstones=tombstones,
                         transactional_id=transactional_id(db, slot), oversized=oversized,
                         max_event_bytes=max_event_bytes, metadata_timeout_s=metadata_timeout_s,
                         truncate_records=truncate_records)
        self._tracker = tracker
        self._key = progress_key(db, slot)
        self._offsets = offsets
        self._limits = limits
        self._commit_timeout_s = commit_timeout_s
        self._in_txn = False
        self._txn_started = 0.0
        self._txn_bytes = 0
        try:
            self._producer.init_transactions(commit_timeout_s)
        except KafkaException as exc:
            raise self._failure("cannot start the transactional producer", exc) from None

    def produce(self, topic: str, key: bytes | None, value: bytes | None, ticket: Ticket, *,
                partition: int | None = None, headers: Headers | None = None) -> None:
        if self._tracker.skips(ticket.end_lsn):
            return
        if not self._in_txn:
            try:
                self._producer.begin_transaction()
            except KafkaException as exc:
                raise self._failure("cannot begin a Kafka transaction", exc) from None
            self._in_txn = True
            self._txn_started = time.monotonic()
            self._txn_bytes = self.bytes
        super().produce(topic, key, value, ticket, partition=partition, headers=headers)

    def _send(self, topic: str, value: bytes | None, key: bytes | None, ticket: Ticket,
              partition: int = ANY_PARTITION, headers: Headers | None = None) -> None:
        self._producer.produce(topic, value, key, partition, headers=headers)

    def poll(self, timeout_s: float = 0.0) -> int:
        served = super().poll(timeout_s)
        if self._batch_full():
            self.commit()
        return served

    def _batch_full(self) -> bool:
        batch = self._tracker.batch
        if not batch or not batch[-1].sealed:
            return False
        limits = self._limits
        return (len(batch) >= limits.transactions
                or self.bytes - self._txn_bytes >= limits.bytes
                or time.monotonic() - self._txn_started >= limits.seconds
                or not self._in_txn)

    def commit(self) -> None:
        """Commit the open batch with its progress record; on failure abort and raise."""
        batch = self._tracker.batch
        if not batch:
            return
        if not self._in_txn:  # only skipped or empty transactions: nothing to write
            self._tracker.committed()
            return
        end_lsn = batch[-1].end_lsn
        try:
            deadline = time.monotonic() + self._commit_timeout_s
            while self._producer.flush(1.0) and time.monotonic() < deadline:
                self._guard()
        except SinkError:
            self._abort()
            raise
        try:
            self._producer.produce(self._offsets, json.dumps(
                {"end_lsn": end_lsn, "lsn": lsn_to_str(end_lsn)}).encode(), self._key)
            self._producer.commit_transaction(max(1.0, deadline - time.monotonic()))
        except KafkaException as exc:
            self._abort()
            if self._expected:
                self.check_topics()  # raises the clear line if a topic is the cause
            raise self._failure(f"Kafka transaction up to LSN {lsn_to_str(end_lsn)} not "
                                "committed (nothing of it is confirmed to PostgreSQL)",
                                exc) from None
        self._in_txn = False
        self._tracker.committed()

    def _abort(self) -> None:
        self._in_txn = False
        self._tracker.aborted()
        try:
            self._producer.abort_transaction(self._commit_timeout_s)
        except KafkaException as exc:
            log.warning("aborting the Kafka transaction failed: %s", exc.args[0].str())

    @staticmethod
    def _failure(what: str, exc: KafkaException) -> SinkError:
        error = exc.args[0]
        if error.fatal():
            return SinkError(f"{what}: {error.str()} (another pgcdc instance with the same slot "
                             "took over, or the producer failed for good)")
        return SinkError(f"{what}: {error.str()}", transient=True)

    def close(self, timeout_s: float = 30.0) -> None:
        """Commit what is sealed (a graceful stop)."""
        batch = self._tracker.batch
        if batch and batch[-1].sealed:
            self.commit()
        elif self._in_txn:
            self._abort()


#: A snapshot's transaction stays open while the snapshot runs: as long as a broker allows by
#: default (transaction.max.timeout.ms = 15 min); user settings win.
SNAPSHOT_TRANSACTION_DEFAULTS: Mapping[str, Any] = {"transaction.timeout.ms": 900_000}


class SnapshotTransaction:
    """The Kafka transaction of one snapshot producer (coordinator or reader), `--exactly-once`.

    Everything a snapshot producer writes stays in one open transaction until the coordinator
    commits them all together (`connector/snapshot/initial`, "Exactly-once"), so a killed
    attempt leaves only aborted records. `commit_if_old` commits early, at a chunk boundary,
    once the transaction is half as old as transaction.timeout.ms: the broker would otherwise
    abort it. Errors are `SinkError`s (never transient here: the snapshot restarts anyway)."""

    def __init__(self, producer: Any, kafka_config: Mapping[str, Any],
                 timeout_s: float = 60.0) -> None:
        self._producer = producer
        self._timeout_s = timeout_s
        settings = {**SNAPSHOT_TRANSACTION_DEFAULTS, **kafka_config}
        self._max_age_s = int(settings["transaction.timeout.ms"]) / 2000
        self._open = False
        self._started = 0.0
        self.early_commits = 0
        self._call("cannot start the snapshot's transactional producer",
                   producer.init_transactions, timeout_s)

    def begin(self) -> None:
        if not self._open:
            self._call("cannot begin a Kafka transaction", self._producer.begin_transaction)
            self._open = True
            self._started = time.monotonic()

    def commit(self) -> None:
        if self._open:
            self._call("snapshot: Kafka transaction not committed",
                       self._producer.commit_transaction, self._timeout_s)
            self._open = False

    def commit_if_old(self) -> bool:
        if self._open and time.monotonic() - self._started >= self._max_age_s:
            log.warning("snapshot: committing a Kafka transaction early (open %.0f s, half of "
                        "transaction.timeout.ms): a crash from now on leaves this attempt's "
                        "committed rows visible to read_committed consumers until the next "
                        "attempt's truncate", time.monotonic() - self._started)
            self.commit()
            self.early_commits += 1
            self.begin()
            return True
        return False

    def abort(self) -> None:
        """Best effort (a stop or error path): a re-run's init_transactions aborts it anyway."""
        if self._open:
            self._open = False
            try:
                self._producer.abort_transaction(self._timeout_s)
            except KafkaException as exc:
                log.warning("aborting the snapshot's Kafka transaction failed: %s",
                            exc.args[0].str())

    @staticmethod
    def _call(what: str, method: Any, *args: Any) -> None:
        try:
            method(*args)
        except KafkaException as exc:
            raise SinkError(f"{what}: {exc.args[0].str()}") from None


def fence(kafka_config: Mapping[str, Any], tid: str, timeout_s: float = 60.0) -> None:
    """Abort whatever an earlier producer with `tid` left open (and fence it), produce nothing."""
    config = producer_config({**SNAPSHOT_TRANSACTION_DEFAULTS, **kafka_config})
    config["transactional.id"] = tid
    producer = Producer(config)
    try:
        producer.init_transactions(timeout_s)
    except KafkaException as exc:
        raise SinkError(f"cannot fence transactional id {tid}: {exc.args[0].str()}") from None
    finally:
        producer.flush(0)


def exactly_once_sink(settings: ExactlyOnceSettings, kafka_settings: Mapping[str, Any],
                      topics: TopicCreator, confirmed_lsn: int | None, *,
                      oversized: Oversized | None = None, max_event_bytes: int = 0
                      ) -> tuple[TransactionalSink, TransactionalTracker]:
    """The pipeline's sink and tracker for ``--exactly-once``, resuming after the committed
    progress of `settings.slot`. The producer starts first: its init_transactions aborts what a
    killed predecessor left open, which read_committed would otherwise wait behind."""
    topic = offsets_topic(settings.topic_prefix)
    ensure_offsets_topic(kafka_settings, topic, settings.replication_factor, settings.timeout_s)
    tracker = TransactionalTracker(confirmed_lsn, None)
    sink = TransactionalSink(kafka_settings, tracker, db=settings.db, slot=settings.slot,
                             offsets=topic, limits=settings.limits, topics=topics,
                             tombstones=settings.tombstones, oversized=oversized,
                             max_event_bytes=max_event_bytes,
                             metadata_timeout_s=settings.timeout_s,
                             truncate_records=settings.truncate_records)
    committed = committed_lsn(kafka_settings, topic, settings.db, settings.slot,
                              settings.timeout_s)
    if committed is not None:
        log.info("exactly-once: Kafka holds slot %s up to %s; skipping what precedes it",
                 settings.slot, lsn_to_str(committed))
        tracker.resume_after(committed)
    return sink, tracker

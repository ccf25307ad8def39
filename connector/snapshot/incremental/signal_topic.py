"""The ``<prefix>.signal`` topic: snapshot requests and their progress in Kafka, never in
PostgreSQL (why one compacted partition of whole-state records: `channel`).

`SignalTopic` is the IO: create the topic, append a record (synchronously: a state is only
taken as recorded once Kafka acknowledged it), and read it to its end (`catch_up`: a request
is picked only from a log read up to the high watermark of that moment, so a ``done`` record
is never missed behind a ``pending`` one). `pgcdc run` reads it in a thread of its own
(`start_read`, `finish_read`: the stream's thread only folds what was read), so Kafka out of
reach delays requests, never the stream. `TopicRequests` is the driver's `RequestStore` over
it.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from connector.errors import SinkError
from connector.names import TableName
from connector.sink.settings import admin_config, producer_config

from .channel import RequestLog, RequestState
from .signals import SnapshotRequest

log = logging.getLogger(__name__)

__all__ = ["SignalTopic", "TopicRequests", "as_request", "new_request_id"]

Records = list[tuple[int, bytes | None]]  # (offset, value)


def new_request_id() -> int:
    """A request id no other sender picks (63 random bits: there is no sequence to ask)."""
    return random.SystemRandom().getrandbits(62) + 1


class SignalTopic:
    def __init__(self, kafka_config: Mapping[str, Any], topic: str, *,
                 replication_factor: int = 1, timeout_s: float = 30.0) -> None:
        self.topic = topic
        self.replication_factor = replication_factor
        self._ensured = False
        self._config = admin_config(kafka_config)
        self._timeout = timeout_s
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._error: str | None = None
        self._offset: int | None = None  # of the record `append` produced
        self._read: _Read | None = None  # a read in its own thread (`start_read`)
        self.log = RequestLog()

    def ensure(self) -> None:
        """Create the topic (compacted, one partition: one order) unless it exists."""
        if self._ensured:
            return
        admin = AdminClient(dict(self._config))
        new = NewTopic(self.topic, num_partitions=1,
                       replication_factor=self.replication_factor,
                       config={"cleanup.policy": "compact"})
        try:
            if self.topic not in admin.list_topics(timeout=self._timeout).topics:
                admin.create_topics([new])[self.topic].result(self._timeout)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise SinkError(f"cannot create signal topic {self.topic}: "
                                f"{exc.args[0].str()}", transient=True) from None
        self._ensured = True

    def append(self, state: RequestState) -> None:
        """Record `state` (returns once Kafka acknowledged it) and apply it to `log`; the
        topic is created first if it does not exist (a re-sync may be the first request)."""
        self.ensure()
        if self._producer is None:
            self._producer = Producer(producer_config(self._config))
        self._error = self._offset = None
        self._producer.produce(self.topic, state.encode(), str(state.id).encode(),
                               on_delivery=self._delivered)
        if self._producer.flush(self._timeout) or self._error is not None:
            raise SinkError(f"cannot record snapshot request {state.id} in {self.topic}: "
                            f"{self._error or 'not acknowledged in time'}",
                            transient=self._error is None)
        self.log.apply(state, self._offset)

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._error = str(err)
        else:
            self._offset = msg.offset()

    def catch_up(self, timeout_s: float | None = None) -> bool:
        """Read the topic up to its current end into `log`; False when it does not exist (no
        request was ever sent this way)."""
        exists, records = self._read_to_end(self._timeout if timeout_s is None else timeout_s)
        self.log.fold_records(records)
        return exists

    @property
    def reading(self) -> bool:
        """A read started by `start_read` is not finished yet."""
        return self._read is not None and not self._read.done.is_set()

    def start_read(self, timeout_s: float) -> None:
        """Read the topic to its end in a thread of its own (`finish_read` takes the result);
        the consumer is used by that thread only."""
        if self.reading:
            return
        read = self._read = _Read()

        def run() -> None:
            try:
                read.exists, read.records = self._read_to_end(timeout_s)
            except BaseException as exc:  # noqa: BLE001 -- handed to the caller's thread
                read.error = exc
            finally:
                read.done.set()

        threading.Thread(target=run, name="pgcdc-signal-reader", daemon=True).start()

    def finish_read(self) -> bool | None:
        """The read `start_read` began, once it finished: its records folded into `log` (a
        state the producer appended meanwhile is kept: `RequestLog.apply`), whether the topic
        exists returned, its error raised. None while it runs, or with no read started."""
        read = self._read
        if read is None or not read.done.is_set():
            return None
        self._read = None
        if read.error is not None:
            raise read.error
        self.log.fold_records(read.records)
        return read.exists

    def _read_to_end(self, timeout: float) -> tuple[bool, Records]:
        """(whether the topic exists, the records up to its current end not read before)."""
        records: Records = []
        if self._consumer is None:
            settings = {k: v for k, v in self._config.items() if k != "logger"}
            self._consumer = Consumer({**settings, "group.id": f"pgcdc-signal-{self.topic}",
                                       "enable.auto.commit": False,
                                       "auto.offset.reset": "earliest",
                                       # read to the end now, not at the broker's next
                                       # fetch deadline (500 ms by default)
                                       "fetch.wait.max.ms": 10})
        consumer = self._consumer
        partition = TopicPartition(self.topic, 0)
        try:
            found = consumer.list_topics(self.topic, timeout=timeout).topics.get(self.topic)
            if found is None or found.error is not None:
                return False, records
            low, high = consumer.get_watermark_offsets(partition, timeout=timeout)
            if not consumer.assignment():
                consumer.assign([TopicPartition(self.topic, 0, low)])
                position = low
            else:
                position = consumer.position([partition])[0].offset
                position = low if position < 0 else position
            deadline = time.monotonic() + timeout
            while position < high:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    position = msg.offset() or 0
                    records.append((position, msg.value()))
                    position += 1
                elif time.monotonic() > deadline:
                    raise SinkError(f"cannot read snapshot requests from {self.topic} within "
                                    f"{timeout:g} s", transient=True)
            return True, records
        except KafkaException as exc:
            raise SinkError(f"cannot read {self.topic}: {exc.args[0].str()}",
                            transient=True) from None

    def close(self) -> None:
        read = self._read
        if read is not None and not read.done.wait(self._timeout):
            return  # the consumer is still in use: left to the process's exit
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        if self._producer is not None:
            self._producer.flush(self._timeout)
            self._producer = None


class _Read:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.exists = False
        self.records: Records = []
        self.error: BaseException | None = None


def as_request(state: RequestState) -> SnapshotRequest:
    """A request as the driver and `pgcdc status` see it (no rate: the topic keeps no start
    time)."""
    return SnapshotRequest(state.id, state.slot, state.tables, state.state, state.table_index,
                           state.last_key, state.chunks, state.rows, state.message, None,
                           channel="kafka")


class TopicRequests:
    """`RequestStore` over the signal topic. `available` has the topic read to its end in a
    thread of its own, at most every `interval_s` (a new request or a cancel is seen within
    it, plus the read's time; the producer's own records are applied as it appends them); the
    other reads answer from what was read, the writes append."""

    channel = "kafka"

    def __init__(self, topic: SignalTopic, *, interval_s: float = 1.0, retry_s: float = 15.0,
                 read_timeout_s: float = 5.0) -> None:
        self.topic = topic
        self.interval_s = interval_s
        self.retry_s = retry_s
        self.read_timeout_s = read_timeout_s
        self._exists = False
        self._read_whole = False  # the last read reached the topic's end
        self._next_read = 0.0

    def available(self) -> bool:
        """Take the last read when it finished, start the next when due; never waits for
        Kafka. Kafka out of reach delays requests, never the stream nor the signal table's
        requests: warned, tried again in `retry_s`; a running request goes on from what was
        read (its own records are applied as they are appended), but no new one is picked
        from a read that stopped short (a ``done`` may lie behind)."""
        now = time.monotonic()
        try:
            exists = self.topic.finish_read()
        except SinkError as exc:
            if not exc.transient:
                raise
            self._read_whole = False
            self._next_read = now + self.retry_s
            log.warning("%s: snapshot requests over Kafka wait; read again in %g s", exc,
                        self.retry_s)
        else:
            if exists is not None:
                self._exists, self._read_whole = exists, True
        if now >= self._next_read and not self.topic.reading:
            self._next_read = now + self.interval_s
            self.topic.start_read(self.read_timeout_s)
        return self._exists

    def next_request(self, slot: str) -> SnapshotRequest | None:
        if not self._read_whole:
            return None
        found = self.topic.log.next_request(slot)
        return None if found is None else as_request(found)

    def state_of(self, request_id: int) -> str | None:
        found = self.topic.log.get(request_id)
        return None if found is None else found.state

    def mark_running(self, request_id: int) -> None:
        found = self.topic.log.get(request_id)
        if found is not None and found.state == "pending":
            self.topic.append(replace(found, state="running"))

    def record_progress(self, request_id: int, table_index: int,
                        last_key: Sequence[str] | None, rows: int) -> None:
        found = self.topic.log.get(request_id)
        if found is not None:
            after = found.progressed(table_index, last_key, rows)
            if after is not found:
                self.topic.append(after)

    def set_state(self, request_id: int, state: str, message: str | None = None) -> None:
        found = self.topic.log.get(request_id)
        if found is not None:
            self.topic.append(replace(found, state=state,
                                      message=found.message if message is None else message))

    def request(self, slot: str, tables: Sequence[TableName],
                message: str | None = None) -> int:
        state = RequestState(new_request_id(), slot, tuple(str(t) for t in tables),
                             message=message, requested_ms=time.time_ns() // 1_000_000)
        self.topic.append(state)
        return state.id

    def pending_includes(self, slot: str, table: TableName) -> bool:
        return self.topic.log.pending_includes(slot, str(table))

    def cancel(self, slot: str) -> int:
        """Cancel every unfinished request of `slot`; how many."""
        unfinished = [s for s in self.topic.log.of_slot(slot) if s.state in ("pending",
                                                                             "running")]
        for state in unfinished:
            self.topic.append(replace(state, state="cancelled"))
        return len(unfinished)

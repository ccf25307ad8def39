"""Which PostgreSQL position Kafka has made durable: the delivery/ack tracker.

The pipeline opens one `PendingTxn` per PostgreSQL transaction (in commit order), tells it how
many events it produced, and seals it when the last one is handed to the producer. Each delivery
report calls `PendingTxn.on_delivery`. `delivered_lsn()` is the end LSN of the newest transaction
whose every event -- and every earlier transaction's -- Kafka acknowledged: the flush LSN the
producer may confirm to PostgreSQL, never further.

    txn = tracker.begin(commit.end_lsn)
    for event in events:
        sink.produce(topic, key, value, txn)      # calls txn.expect() and wires on_delivery
    txn.seal()
    ...
    sink.poll(0)                                 # runs delivery callbacks
    flush_lsn = tracker.delivered_lsn()

A transaction with no events (its tables are not published) is `begin` + `seal`; it advances the
delivered LSN as soon as everything before it is acknowledged.

Threads: librdkafka runs delivery callbacks inside ``poll()``/``flush()`` on the thread that
calls them. A pipeline that polls on the producing thread needs no locking; one that polls from a
second thread is safe too: every state change happens under one lock.

One failed delivery is fatal: the failing transaction never completes, so the delivered LSN stops
below it for good, and `check()` raises `SinkError` naming topic, partition and error.

`DeliveryTracker` is the interface the pipeline depends on, so the transactional (exactly-once)
mode's tracker replaces `AckTracker` without touching it.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Protocol

from connector import metrics
from connector.errors import SinkError
from connector.pgoutput.lsn import lsn_to_str

__all__ = ["AckTracker", "DeliveryTracker", "PendingTxn", "Ticket"]


class Ticket(Protocol):
    """One open transaction as whoever produces its records (publisher, snapshots) sees it:
    passed along with each record to the sink, and `seal`ed after the last one. How a record
    counts against it is the sink's and its tracker's business: `PendingTxn` here (the
    at-least-once sinks count each record and its delivery report), the exactly-once one in
    `connector.sink.transactional` (the Kafka commit decides)."""

    @property
    def end_lsn(self) -> int: ...

    def seal(self) -> None: ...


class DeliveryTracker(Protocol):
    """What the pipeline, the publisher and the snapshots ask of a tracker, whatever the
    delivery mode (`AckTracker`, `transactional.TransactionalTracker`): a ticket per
    transaction, begun in commit order; the delivered LSN (never past what Kafka made durable);
    how many begun transactions are not delivered yet."""

    def begin(self, end_lsn: int) -> Ticket: ...

    def delivered_lsn(self) -> int | None: ...

    @property
    def open_transactions(self) -> int: ...


class PendingTxn:
    """One PostgreSQL transaction's events in flight: a `Ticket` that also counts each record
    handed to the producer (`expect`), its delivery report (`on_delivery`) and a refusal
    (`failed`). Made by `AckTracker.begin` only."""

    __slots__ = ("_lock", "_tracker", "end_lsn", "expected", "acked", "sealed", "error")

    def __init__(self, tracker: AckTracker, end_lsn: int) -> None:
        self._tracker = tracker
        self._lock = tracker._lock
        self.end_lsn = end_lsn
        self.expected = 0
        self.acked = 0
        self.sealed = False
        self.error: SinkError | None = None

    @property
    def done(self) -> bool:
        return self.sealed and self.error is None and self.acked == self.expected

    def expect(self, n: int = 1) -> None:
        """`n` more events of this transaction were handed to the producer.

        No lock (it runs once per event): `expected` is written only by the producing thread,
        and a transaction completes only once `seal()` -- on that same thread, under the lock,
        after its last `expect` -- has set `sealed`. A delivery report on a polling thread that
        reads `expected` before then cannot complete the transaction whatever it reads."""
        if self.sealed:
            raise RuntimeError(f"transaction ending at {self.end_lsn} is already sealed")
        self.expected += n

    def seal(self) -> None:
        """No more events will be added; the transaction can now complete."""
        with self._lock:
            self.sealed = True
            self._tracker._advance()

    def on_delivery(self, err: Any, msg: Any) -> None:
        """librdkafka delivery report (``on_delivery=txn.on_delivery``)."""
        if err is not None:
            metrics.DELIVERY_ERRORS.inc()
            where = "?"
            if msg is not None:
                where = f"{msg.topic()}[{msg.partition()}]"
            self.failed(SinkError(f"Kafka did not accept an event for {where}: {err} "
                                  f"(transaction ending at LSN {lsn_to_str(self.end_lsn)}; "
                                  "its position is not confirmed to PostgreSQL)"))
            return
        with self._lock:
            self.acked += 1
            if self.acked == self.expected and self.sealed:
                self._tracker._advance()

    def delivered(self, n: int = 1) -> None:
        """Count `n` acknowledgements directly (for callers that batch reports)."""
        with self._lock:
            self.acked += n
            self._tracker._advance()

    def failed(self, error: SinkError) -> None:
        """A delivery of this transaction failed for good: it never completes."""
        with self._lock:
            if self.error is None:
                self.error = error
            if self._tracker._error is None:
                self._tracker._error = error


class AckTracker:
    """Delivery tracking for the idempotent (at-least-once) producer. See the module docstring.

    `start_lsn` is the position already confirmed (the slot's confirmed_flush_lsn), returned by
    `delivered_lsn()` until something newer completes; None when unknown.
    """

    def __init__(self, start_lsn: int | None = None) -> None:
        self._lock = threading.Lock()
        self._open: deque[PendingTxn] = deque()
        self._delivered = start_lsn
        self._error: SinkError | None = None

    def begin(self, end_lsn: int) -> PendingTxn:
        """Open the next transaction; transactions must be begun in commit (end LSN) order."""
        with self._lock:
            last = self._open[-1].end_lsn if self._open else self._delivered
            if last is not None and end_lsn < last:
                raise ValueError(f"transaction ending at {lsn_to_str(end_lsn)} begun after one "
                                 f"ending at {lsn_to_str(last)}: begin() must follow commit order")
            txn = PendingTxn(self, end_lsn)
            self._open.append(txn)
            return txn

    def _advance(self) -> None:  # caller holds the lock
        while self._open and self._open[0].done:
            self._delivered = self._open.popleft().end_lsn

    def delivered_lsn(self) -> int | None:
        """End LSN of the newest transaction fully acknowledged along with all before it."""
        with self._lock:
            return self._delivered

    def check(self) -> None:
        """Raise the first delivery failure as `SinkError` (call after poll/flush)."""
        error = self._error
        if error is not None:
            raise error

    @property
    def error(self) -> SinkError | None:
        return self._error

    @property
    def in_flight(self) -> int:
        """Events handed to the producer and not acknowledged yet."""
        with self._lock:
            return sum(t.expected - t.acked for t in self._open)

    def all_delivered(self) -> None:
        """For a sink that reports failed deliveries only (`BulkSink`,
        librdkafka's ``delivery.report.only.error``), once its queue has drained with no
        failure reported: every event handed to it was delivered. Completes every sealed
        transaction that has no error."""
        with self._lock:
            for txn in self._open:
                if txn.sealed and txn.error is None:
                    txn.acked = txn.expected
            self._advance()

    @property
    def open_transactions(self) -> int:
        with self._lock:
            return len(self._open)

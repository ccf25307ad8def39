"""The streaming loop's policies (`pipeline.Pipeline`), pure so they are tested alone.

* `confirmable`: the flush LSN that may be sent to PostgreSQL. The product's promise rests on
  it: PostgreSQL frees WAL up to the flush LSN, so it must never pass a change Kafka has not
  acknowledged. The delivered LSN (`sink.acks`: the end LSN of the newest transaction
  whose every event, and every earlier transaction's, Kafka acknowledged) is confirmable. So
  is the server's own position when nothing is buffered or in flight (an idle slot must not
  hold WAL it has nothing to send for), but never while a transaction is held in the
  assembler (prepared or streamed: it is re-sent from the slot after a restart, so its start
  must stay unconfirmed) or still being delivered.
* `status_due`: when to send a status update (PostgreSQL asked, progress to report at most
  every `STATUS_MIN_INTERVAL_S`, or the keepalive interval passed).
* `reconnect_delay`: how long to wait before the next session after a failure, or None to
  stop: only failures marked transient (a lost connection, an aborted Kafka transaction) are
  retried, with backoff, a bounded number of times.
"""

from __future__ import annotations

from connector.errors import SinkError, SourceError

STATUS_MIN_INTERVAL_S = 1.0  # confirm progress at most this often, unless asked
RECONNECT_BACKOFF_S = (1, 2, 5, 10, 20, 30, 30, 30, 30, 30)


def confirmable(acked: int | None, held_from: int | None, in_flight: bool,
                server_end: int) -> int:
    """`acked`: the delivered LSN (None: nothing yet); `held_from`: the start of the
    oldest transaction the assembler holds (None: none); `in_flight`: a transaction is being
    assembled or delivered; `server_end`: the server's newest WAL position seen."""
    done = acked or 0
    if held_from is not None:
        return min(done, held_from)
    return done if in_flight else max(done, server_end)


def status_due(now: float, last_sent: float, flush: int, confirmed: int, *,
               reply_requested: bool, interval_s: float) -> bool:
    return (reply_requested
            or (flush > confirmed and now - last_sent >= STATUS_MIN_INTERVAL_S)
            or now - last_sent >= interval_s)


def reconnect_delay(exc: SourceError | SinkError, attempt: int, *, stopping: bool) -> float | None:
    """Seconds to wait before retry number `attempt + 1` after `exc`, or None: give up."""
    if stopping or not exc.transient or attempt >= len(RECONNECT_BACKOFF_S):
        return None
    return RECONNECT_BACKOFF_S[attempt]

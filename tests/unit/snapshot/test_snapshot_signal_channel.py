"""The snapshot request channel's decisions (connector/snapshot/incremental/channel.py): which
channel `pgcdc snapshot` writes to, which ones `pgcdc run` reads, which requests get read-only
chunks, and the fold of the ``<prefix>.signal`` records that makes a request run once and
resume after a restart."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.errors import ConfigError, SinkError
from connector.snapshot.incremental import signal_topic
from connector.snapshot.incremental.channel import (
    RequestLog,
    RequestState,
    choose_channel,
    consumed_channels,
    read_only_chunks,
    signal_topic_name,
)
from connector.snapshot.incremental.signal_topic import TopicRequests


@pytest.mark.parametrize("asked, standby, can_write, expected", [
    ("auto", False, True, "table"),  # a primary the role may write: as before
    ("auto", False, False, "kafka"),  # SELECT + REPLICATION only: no write at all
    ("auto", True, False, "kafka"),  # a standby
    ("kafka", False, True, "kafka"),
    ("table", False, False, "table"),  # asked: the missing grant is then named by the write
])
def test_the_channel_of_a_request(asked: str, standby: bool, can_write: bool,
                                  expected: str) -> None:
    assert choose_channel(asked, standby=standby, can_write_table=can_write) == expected


def test_the_signal_table_on_a_standby_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="this server is a standby.*--signal-channel kafka"):
        choose_channel("table", standby=True, can_write_table=False)
    with pytest.raises(ConfigError, match="signal_channel must be one of auto, kafka, table"):
        choose_channel("redis", standby=False, can_write_table=True)


@pytest.mark.parametrize("setting, standby, expected", [
    ("auto", False, (True, True)),
    ("auto", True, (False, True)),  # a standby: its progress cannot be written to the table
    ("kafka", False, (True, True)),  # new tables' snapshots are queued in the table
    ("table", False, (True, False)),
    ("table", True, (False, False)),  # nothing to take requests from
])
def test_the_channels_run_reads(setting: str, standby: bool,
                                expected: tuple[bool, bool]) -> None:
    assert consumed_channels(setting, standby=standby) == expected


def test_read_only_chunks_on_a_standby_or_for_requests_over_kafka() -> None:
    assert read_only_chunks(standby=True, channel="table") is True
    assert read_only_chunks(standby=True, channel="kafka") is True
    assert read_only_chunks(standby=False, channel="kafka") is True  # its sender: no writes
    assert read_only_chunks(standby=False, channel="table") is False  # DBLog watermarks
    assert signal_topic_name("shop") == "shop.signal"


def test_a_record_round_trips_and_junk_is_skipped() -> None:
    state = RequestState(7, "pgcdc", ("public.a", "s.b"), "running", 1, ("10", "x"), 3, 300,
                         "why", 1234)
    assert RequestState.decode(state.encode()) == state
    log = RequestLog()
    log.fold([b"not json", b'{"id": 1}', None, b"[1, 2]", state.encode()])
    assert log.of_slot("pgcdc") == [state]


def test_a_restarted_producer_resumes_the_running_request_and_never_reruns_a_done_one() -> None:
    first = RequestState(1, "pgcdc", ("public.a",), requested_ms=10)
    second = RequestState(2, "pgcdc", ("public.b",), requested_ms=20)
    other_slot = RequestState(3, "other", ("public.c",), requested_ms=5)
    log = RequestLog()
    log.fold([first.encode(), second.encode(), other_slot.encode()])
    assert log.next_request("pgcdc") == first
    # The producer ran the first one, then the second one one chunk far, and was killed.
    done = first.progressed(1, None, 50)
    done = RequestState(**{**done.__dict__, "state": "done"})
    running = second.progressed(0, ("100",), 100)
    restarted = RequestLog()
    restarted.fold([r.encode() for r in (first, second, other_slot, first.progressed(1, None,
                                                                                      50),
                                         done, running)])
    resumed = restarted.next_request("pgcdc")
    assert resumed is not None and resumed.id == 2
    assert (resumed.state, resumed.table_index, resumed.last_key, resumed.chunks,
            resumed.rows) == ("running", 0, ("100",), 1, 100)
    assert restarted.get(1) == done
    assert not restarted.pending_includes("pgcdc", "public.b")  # running, not pending
    assert restarted.pending_includes("other", "public.c")


def test_progress_does_not_undo_a_cancel() -> None:
    cancelled = RequestState(1, "pgcdc", ("public.a",), state="cancelled")
    assert cancelled.progressed(0, ("5",), 10) is cancelled


states = st.builds(RequestState, id=st.integers(1, 4), slot=st.sampled_from(["s1", "s2"]),
                   tables=st.tuples(st.sampled_from(["public.a", "x.b"])),
                   state=st.sampled_from(["pending", "running", "done", "cancelled",
                                          "failed"]),
                   table_index=st.integers(0, 2),
                   last_key=st.none() | st.tuples(st.text(max_size=3)),
                   requested_ms=st.integers(0, 100))


@given(st.lists(states, max_size=12))
def test_compaction_keeps_what_the_fold_decides(records: list[RequestState]) -> None:
    """Kafka compaction keeps the last record of each key (the request id), in offset order:
    the fold of the compacted topic equals the fold of the whole one, so a compacted
    ``<prefix>.signal`` never revives a finished request or loses a running one's progress."""
    whole = RequestLog()
    whole.fold(r.encode() for r in records)
    last = {r.id: i for i, r in enumerate(records)}
    compacted = RequestLog()
    compacted.fold(r.encode() for i, r in enumerate(records) if last[r.id] == i)
    for slot in ("s1", "s2"):
        assert compacted.of_slot(slot) == whole.of_slot(slot)
        assert compacted.next_request(slot) == whole.next_request(slot)
        found = whole.next_request(slot)
        if found is not None:  # never a finished one, a running one before any pending one
            assert found.state in ("pending", "running")
            if found.state == "pending":
                assert all(r.state != "running" for r in whole.of_slot(slot))


class _Topic:
    """A signal topic whose reads fail while `down`, each done (in this fake) as it starts;
    its log holds one pending request."""

    def __init__(self) -> None:
        self.down = False
        self.reads = 0
        self.reading = False
        self.outcome: bool | SinkError | None = None
        self.log = RequestLog()
        self.log.fold([RequestState(7, "slot_a", ("public.t",), requested_ms=1).encode()])

    def start_read(self, timeout_s: float) -> None:
        self.reads += 1
        self.outcome = SinkError("cannot read p.signal: Local: Timed out",
                                 transient=True) if self.down else True

    def finish_read(self) -> bool | None:
        outcome, self.outcome = self.outcome, None
        if isinstance(outcome, SinkError):
            raise outcome
        return outcome


def test_kafka_out_of_reach_delays_requests_never_the_stream(monkeypatch) -> None:
    now = [100.0]
    monkeypatch.setattr(signal_topic.time, "monotonic", lambda: now[0])
    topic = _Topic()
    store = TopicRequests(topic, interval_s=1.0, retry_s=15.0)  # type: ignore[arg-type]
    topic.down = True
    assert store.available() is False  # the read started
    assert store.available() is False and store.next_request("slot_a") is None  # no raise
    now[0] += 5
    assert store.available() is False and topic.reads == 1  # not read again before retry_s
    now[0] += 11
    topic.down = False
    store.available()  # read again
    assert store.available() is True
    found = store.next_request("slot_a")
    assert found is not None and found.id == 7
    topic.down = True  # a running request goes on from what was read
    now[0] += 2
    store.available()
    assert store.available() is True and store.state_of(7) == "pending"
    assert store.next_request("slot_a") is None  # nothing new picked from a short read


def test_a_read_of_an_unreachable_broker_never_holds_the_caller() -> None:
    """The real client against a port nobody listens on: `available` returns at once while
    the read waits out its timeout in its own thread, then the failure is taken (warned) and
    no request is picked."""
    topic = signal_topic.SignalTopic({"bootstrap.servers": "127.0.0.1:9"}, "p.signal",
                                     timeout_s=5.0)
    store = TopicRequests(topic, interval_s=0.0, retry_s=60.0, read_timeout_s=1.0)
    try:
        started = time.monotonic()
        assert store.available() is False
        assert store.available() is False
        assert time.monotonic() - started < 0.5  # the 1 s read did not hold the caller
        assert topic.reading
        deadline = time.monotonic() + 10
        while topic.reading and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not topic.reading
        assert store.available() is False and store.next_request("slot_a") is None
        assert not topic.reading  # the failure was taken: the next read in retry_s
    finally:
        topic.close()


def test_a_read_folded_late_does_not_undo_a_newer_append() -> None:
    """A read run in another thread returns records up to the end it saw; the producer
    appended a newer state of the same request meanwhile (offset 5): folding the read
    afterwards keeps the newer state, while a record read past it (a cancel at 6) wins."""
    log = RequestLog()
    pending = RequestState(7, "slot_a", ("public.t",), requested_ms=1)
    running = RequestState(7, "slot_a", ("public.t",), state="running", chunks=3,
                           requested_ms=1)
    log.apply(running, 5)
    log.fold_records([(0, pending.encode()), (4, pending.encode())])
    assert log.get(7) == running
    cancelled = RequestState(7, "slot_a", ("public.t",), state="cancelled", requested_ms=1)
    log.fold_records([(5, running.encode()), (6, cancelled.encode())])
    assert log.get(7) == cancelled

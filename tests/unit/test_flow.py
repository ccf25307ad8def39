"""The streaming loop's confirm policy (connector/flow.py): PostgreSQL frees WAL up to what
is confirmed, so nothing Kafka has not acknowledged, or the assembler still holds, may be."""

from hypothesis import given
from hypothesis import strategies as st

from connector.flow import STATUS_MIN_INTERVAL_S, confirmable, status_due

lsns = st.integers(0, 2**40)


@given(st.none() | lsns, st.none() | lsns, st.booleans(), lsns)
def test_never_past_what_kafka_acknowledged_unless_idle(acked, held_from, in_flight, server):
    flush = confirmable(acked, held_from, in_flight, server)
    if held_from is not None or in_flight:
        assert flush <= (acked or 0)
    if held_from is not None:
        assert flush <= held_from  # a held transaction is re-sent from the slot
    else:
        assert flush >= (acked or 0)  # progress is never withheld


def test_an_idle_slot_confirms_the_servers_position():
    assert confirmable(100, None, False, 500) == 500
    assert confirmable(None, None, False, 500) == 500
    assert confirmable(100, None, True, 500) == 100  # a transaction on its way
    assert confirmable(100, 80, False, 500) == 80  # a prepared / streamed one held
    assert confirmable(600, None, False, 500) == 600  # acked past the last keepalive


def test_status_is_sent_when_asked_on_progress_at_most_every_second_and_as_keepalive():
    assert status_due(0.1, 0.0, 5, 5, reply_requested=True, interval_s=10)
    assert not status_due(0.5, 0.0, 9, 5, reply_requested=False, interval_s=10)
    assert status_due(STATUS_MIN_INTERVAL_S, 0.0, 9, 5, reply_requested=False, interval_s=10)
    assert not status_due(5.0, 0.0, 5, 5, reply_requested=False, interval_s=10)
    assert status_due(10.0, 0.0, 5, 5, reply_requested=False, interval_s=10)

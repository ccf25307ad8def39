"""The exactly-once tracker: what it skips and when its delivered LSN (the flush LSN) moves."""

from __future__ import annotations

import pytest

from connector.errors import ConfigError
from connector.sink.offsets import offsets_topic
from connector.sink.transactional import BatchLimits, TransactionalTracker, transactional_id


def test_delivered_lsn_moves_only_at_a_kafka_commit() -> None:
    tracker = TransactionalTracker(start_lsn=100, skip_until=None)
    first, second = tracker.begin(200), tracker.begin(300)
    first.seal()
    second.seal()
    assert tracker.delivered_lsn() == 100  # sealed is not committed
    tracker.committed()
    assert tracker.delivered_lsn() == 300
    assert tracker.open_transactions == 0


def test_an_aborted_batch_confirms_nothing() -> None:
    tracker = TransactionalTracker(start_lsn=100, skip_until=None)
    tracker.begin(200).seal()
    tracker.aborted()
    assert tracker.delivered_lsn() == 100
    tracker.committed()  # nothing open any more
    assert tracker.delivered_lsn() == 100


def test_resume_skips_what_kafka_holds_even_when_the_slot_lags() -> None:
    tracker = TransactionalTracker(start_lsn=100, skip_until=None)
    tracker.resume_after(250)
    assert tracker.delivered_lsn() == 250
    assert tracker.skips(200)
    assert tracker.skips(250)
    assert not tracker.skips(251)


def test_names_are_stable_and_outside_the_table_topic_pattern() -> None:
    assert transactional_id("shop", "pgcdc") == transactional_id("shop", "pgcdc")
    assert transactional_id("shop", "a") != transactional_id("shop", "b")
    assert offsets_topic("shop").count(".") == 1  # merge job tables are <prefix>.<schema>.<table>


def test_batch_limits_reject_nonsense() -> None:
    with pytest.raises(ConfigError, match="exactly_once_batch"):
        BatchLimits(transactions=0)

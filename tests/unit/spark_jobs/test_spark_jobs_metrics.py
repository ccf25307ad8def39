"""The merge job's freshness bookkeeping (spark_jobs/runtime/metrics.py): a table is current up
to the newest heartbeat of the last batch that did not fail it; the lag is the newest heartbeat
minus that. Served and scraped during a streaming run: tests/e2e/test_merge_cuts.py."""

from __future__ import annotations

import math

from spark_jobs.runtime.metrics import BatchMetrics, reason_label


def test_tables_that_keep_up_have_no_lag_however_idle() -> None:
    state = BatchMetrics()
    assert state.observe_batch(None, ["public/a"], []) == {}  # no heartbeat read yet
    assert state.observe_batch(10_000, ["public/a", "public/b"], []) == {
        "public/a": 0.0, "public/b": 0.0}
    # public/b had nothing in the next batches: still current
    assert state.observe_batch(25_000, ["public/a", "public/b"], []) == {
        "public/a": 0.0, "public/b": 0.0}


def test_a_failing_table_falls_behind_while_the_others_advance() -> None:
    state = BatchMetrics()
    state.observe_batch(10_000, ["public/a", "public/b"], [])
    assert state.observe_batch(40_000, ["public/a", "public/b"], ["public/b"]) == {
        "public/a": 0.0, "public/b": 30.0}
    # it recovers: current again
    assert state.observe_batch(50_000, ["public/a", "public/b"], [])["public/b"] == 0.0


def test_a_batch_without_heartbeats_keeps_the_newest_one() -> None:
    state = BatchMetrics()
    state.observe_batch(10_000, ["public/a"], [])
    assert state.observe_batch(None, ["public/a"], []) == {"public/a": 0.0}
    assert state.observe_batch(5_000, ["public/a"], []) == {"public/a": 0.0}  # an older one
    assert state.heartbeat_ms == 10_000


def test_a_table_never_applied_is_infinitely_behind() -> None:
    state = BatchMetrics()
    lags = state.observe_batch(10_000, ["public/new"], ["public/new"])
    assert math.isinf(lags["public/new"])


def test_reasons_are_bounded_labels() -> None:
    assert reason_label("column color is new") == "column is new"
    assert reason_label("column size changed type") == "column changed type"
    assert reason_label("a truncate") == "a truncate"

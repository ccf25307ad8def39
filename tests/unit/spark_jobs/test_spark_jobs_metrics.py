"""The merge job's freshness bookkeeping (spark_jobs/runtime/metrics.py): a table is current up
to the newest heartbeat of the last batch that did not fail it; the lag is the newest heartbeat
minus that. Served and scraped during a streaming run: tests/e2e/test_merge_cuts.py."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import pytest
from prometheus_client import REGISTRY

from spark_jobs.lake.phases import InFlight, PhaseClock
from spark_jobs.runtime import metrics
from spark_jobs.runtime.metrics import (
    BatchMetrics,
    Watch,
    offsets_behind,
    reason_label,
    trigger_seconds,
)


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


def test_warnings_come_once_after_three_batches_in_a_row() -> None:
    watch = Watch(trigger_s=1.0)
    said = [watch.batch(2.5, [], {}, ["public/a"]) for _ in range(4)]
    assert [len(s) for s in said] == [0, 0, 1, 0]
    assert "3 batches in a row took longer than the trigger (2.5 s > 1 s)" in said[2][0]
    assert watch.batch(0.5, [], {}, []) == [] and watch.slow == 0  # it recovered: again later
    # a table that cannot be written while the others go on
    said = [watch.batch(0.5, ["public/b"], {}, ["public/a", "public/b"]) for _ in range(3)]
    assert said[2] == ["public/b has not advanced for 3 batches while its topic has records "
                       "(its events go to the dead letters): see the errors above"]
    # a table delta-rs keeps leaving to Spark
    said = [watch.batch(0.5, [], {"public/a": "column color is new"}, ["public/a"])
            for _ in range(3)]
    assert said[:2] == [[], []] and "public/a went through Spark for 3 batches" in said[2][0]
    # available-now: no trigger to keep up with
    assert Watch(trigger_s=None).batch(999, [], {}, []) == []


def test_trigger_seconds() -> None:
    assert [trigger_seconds(t) for t in ("10 seconds", "500 milliseconds", "2 minutes")] == [
        10.0, 0.5, 120.0]


def test_dead_letters_warn_once_per_topic_and_reason() -> None:
    watch = Watch(10.0)
    first = {("pgcdc.public.a", "schema id 7 not in the registry"): 3}
    said = watch.dead_letters(first, "/lake/_dead")
    assert len(said) == 1 and "pgcdc.public.a" in said[0] and "schema id 7" in said[0]
    assert watch.dead_letters(first, "/lake/_dead") == []  # the next batch: counted, not said
    other = {("pgcdc.public.a", "schema id 7 not in the registry"): 1,
             ("pgcdc.public.a", "schema id 9 not in the registry"): 2,
             ("pgcdc.public.b", "schema id 7 not in the registry"): 1}
    said = watch.dead_letters(other, "/lake/_dead")
    assert [("schema id 9" in s, "public.b" in s) for s in said] == [(True, False), (False, True)]


def test_offsets_behind_from_spark_progress() -> None:
    progress = {"sources": [
        {"description": "KafkaV2[Subscribe[a]]",
         "metrics": {"minOffsetsBehindLatest": "0", "avgOffsetsBehindLatest": "2.5",
                     "maxOffsetsBehindLatest": "5"}},
        {"description": "KafkaV2[Subscribe[b]]",
         "metrics": {"minOffsetsBehindLatest": "1", "avgOffsetsBehindLatest": "7.5",
                     "maxOffsetsBehindLatest": "40"}}]}
    assert offsets_behind(progress) == {"min": 0.0, "avg": 5.0, "max": 40.0}
    assert offsets_behind(None) == {}  # no batch yet
    assert offsets_behind({"sources": [{"metrics": {}}]}) == {}  # not a Kafka source


class _Ticks:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_phases_nest_and_count_each_second_once() -> None:
    ticks = _Ticks()
    clock = PhaseClock(ticks)
    with clock.timing("read"):
        ticks.now += 1
    with clock.timing("merge"):
        ticks.now += 2
        with clock.timing("decode"):
            ticks.now += 3
        ticks.now += 4
        with clock.timing("maintenance"):
            ticks.now += 5
    assert clock.take() == {"read": 1, "decode": 3, "open": 0, "merge": 6, "tombstones": 0,
                            "commit": 0, "maintenance": 5}
    assert set(clock.take().values()) == {0}  # taken: the next batch starts at zero


def test_phases_of_threads_add_up_and_do_not_nest_across_threads() -> None:
    clock = PhaseClock()
    barrier = threading.Barrier(2)

    def table() -> None:
        with clock.timing("merge"):
            barrier.wait()
            time.sleep(0.05)

    threads = [threading.Thread(target=table) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    spent = clock.take()
    assert spent["merge"] >= 0.1 and spent["decode"] == 0  # two tables, summed


def test_tables_in_flight_count_the_most_at_once_per_batch() -> None:
    flight = InFlight()
    with flight.table():
        with flight.table(), flight.table():
            assert flight.now == 3
        with flight.table():
            pass
    assert flight.take() == (4, 3)  # four tables began, three at once at most
    with flight.table():
        assert flight.take() == (1, 1)
        with flight.table():
            pass
    assert flight.take() == (1, 2)  # a table still writing at the take counts in the next
    assert flight.now == 0


def test_a_decorated_call_counts_even_when_it_raises() -> None:
    ticks = _Ticks()
    clock = PhaseClock(ticks)

    @clock.timed("commit")
    def fails() -> None:
        ticks.now += 2
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        fails()
    assert clock.take()["commit"] == 2
    with pytest.raises(ValueError, match="unknown phase"):
        with clock.timing("write"):
            pass


def test_kafka_lag_is_the_newest_report_that_had_one() -> None:
    class Query:
        lastProgress: dict[str, Any] | None = None

    query = Query()
    metrics.watch_query(query)

    def served() -> float:
        return REGISTRY.get_sample_value("pgcdc_merge_kafka_offsets_behind", {"stat": "max"})

    assert math.isnan(served())  # no batch yet
    query.lastProgress = {"sources": [{"metrics": {"maxOffsetsBehindLatest": "12"}}]}
    assert served() == 12
    query.lastProgress = {"sources": [{"metrics": {}}]}  # an idle trigger's report
    assert served() == 12
    query.lastProgress = {"sources": [{"metrics": {"maxOffsetsBehindLatest": "0"}}]}
    assert served() == 0


def test_applied_position_is_the_newest_whatever_the_order() -> None:
    state = BatchMetrics()
    state.applied("public/a", 500, 1_700_000_000_000)
    state.applied("public/a", 300, 1_600_000_000_000)  # late duplicates of older changes
    state.applied("public/a", None, None)  # a part with nothing datable (a re-run batch)
    state.applied("public/b", 200, None)
    metrics.publish(state, {})
    sample = REGISTRY.get_sample_value
    assert sample("pgcdc_merge_table_applied_lsn", {"table": "public/a"}) == 500
    assert sample("pgcdc_merge_table_applied_source_timestamp_seconds",
                  {"table": "public/a"}) == 1_700_000_000
    assert sample("pgcdc_merge_table_applied_lsn", {"table": "public/b"}) == 200
    assert sample("pgcdc_merge_table_applied_source_timestamp_seconds",
                  {"table": "public/b"}) is None

"""Which engine takes each topic of a batch, and the fast path's rounds
(spark_jobs/runtime/rounds.py): every table within the limit goes through delta-rs, the
driver holds at most the limit's records at once; every part Spark takes is counted once in
``pgcdc_merge_spark_path_total`` with why."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import REGISTRY

from spark_jobs.runtime import metrics
from spark_jobs.runtime.rounds import (
    FAST_MERGE_OFF,
    OVER_LIMIT,
    SEVERAL_KEYS,
    run_rounds,
    spark_reasons,
    split_batch,
)

topics = st.dictionaries(st.sampled_from([f"p.s.t{i}" for i in range(40)]),
                         st.integers(0, 300), max_size=40)


def test_a_backlog_of_small_tables_goes_fast_in_rounds_and_only_the_big_one_through_spark(
        ) -> None:
    events = {"p.s.big": 120_000, "p.s.a": 40_000, "p.s.b": 40_000, "p.s.c": 30_000,
              "p.s.d": 1, "p.s.keys": 5}
    split = split_batch(events, set(events) - {"p.s.keys"}, 100_000)
    # smallest first: d, c, a fill the first round (70,001), b the second
    assert split.rounds == [["p.s.a", "p.s.c", "p.s.d"], ["p.s.b"]]
    assert split.spark == ["p.s.big", "p.s.keys"]  # the biggest first


def test_nothing_goes_fast_when_no_topic_may_or_none_fits() -> None:
    events = {"p.s.a": 3, "p.s.b": 2}
    assert split_batch(events, set(), 100) == ([], ["p.s.a", "p.s.b"])
    assert split_batch(events, set(events), 1) == ([], ["p.s.a", "p.s.b"])
    assert split_batch({}, set(), 10) == ([], [])


@given(topics, st.data(), st.integers(0, 700))
def test_every_topic_is_taken_once_and_each_round_holds_at_most_the_limit(
        events: dict[str, int], data: st.DataObject, limit: int) -> None:
    fast = data.draw(st.sets(st.sampled_from(sorted(events)))) if events else set()
    split = split_batch(events, fast, limit)
    in_rounds = [t for round_ in split.rounds for t in round_]
    assert sorted(in_rounds + split.spark) == sorted(events)  # each topic exactly once
    assert set(in_rounds) == {t for t in fast if events[t] <= limit}
    assert all(round_ and sum(events[t] for t in round_) <= limit for round_ in split.rounds)
    # next-fit: two consecutive rounds would not fit in one, so there are few rounds
    assert all(sum(events[t] for t in a + b) > limit
               for a, b in zip(split.rounds, split.rounds[1:], strict=False))
    # deterministic: the same split whatever order the batch listed its topics in
    assert split_batch(dict(reversed(list(events.items()))), set(fast), limit) == split
    assert split.spark == sorted(split.spark, key=lambda t: (-events[t], t))


def test_each_spark_part_has_one_reason_and_is_counted_once() -> None:
    # keys/bigkeys: a second key group (the fast path merges on one key); big: over the limit
    events = {"p.s.big": 120_000, "p.s.bigkeys": 150_000, "p.s.keys": 5, "p.s.a": 3,
              "p.s.b": 7}
    fast = set(events) - {"p.s.keys", "p.s.bigkeys"}
    split = split_batch(events, fast, 100_000)
    reasons = spark_reasons(split, fast, fast_merge_on=True)
    assert reasons == {"p.s.big": OVER_LIMIT, "p.s.bigkeys": SEVERAL_KEYS,
                       "p.s.keys": SEVERAL_KEYS}  # the rounds' a and b: none (tried fast)
    off = split_batch(events, set(), 100_000)
    assert spark_reasons(off, set(), fast_merge_on=False) == dict.fromkeys(events,
                                                                          FAST_MERGE_OFF)

    def count(table: str, reason: str) -> float:
        return REGISTRY.get_sample_value("pgcdc_merge_spark_path_total",
                                         {"table": table, "reason": reason}) or 0.0

    tables = {f"s/{t.rsplit('.', 1)[1]}": why for t, why in reasons.items()}
    before = {(t, r): count(t, r) for t in tables for r in (OVER_LIMIT, SEVERAL_KEYS)}
    metrics.count_spark_parts(tables)
    assert {(t, r): count(t, r) - n for (t, r), n in before.items()} == {
        ("s/big", OVER_LIMIT): 1, ("s/big", SEVERAL_KEYS): 0,
        ("s/bigkeys", OVER_LIMIT): 0, ("s/bigkeys", SEVERAL_KEYS): 1,
        ("s/keys", OVER_LIMIT): 0, ("s/keys", SEVERAL_KEYS): 1}


def test_the_job_counts_each_part_it_sends_to_spark_once_where_it_splits_the_batch(
        tmp_path: Path) -> None:
    """`BatchProcessor._split` (the engine decision, without Spark): a part with a second key
    schema and a part over --fast-merge-max-events are counted once each with their reason;
    the parts the fast path tries are not (a decline there is counted where delta-rs
    declines), among them one with events without a key beside keyed ones (they may be its
    truncates: `_fast` declines the part when they are not)."""
    from spark_jobs.events.decode import TopicPlan
    from spark_jobs.runtime.config import MergeConfig
    from spark_jobs.runtime.job import BatchProcessor

    key = {"type": "record", "name": "k", "fields": []}

    def plan(events: int, *key_sids: int | None) -> TopicPlan:
        return TopicPlan(schemas={1: {"type": "record"}}, events=events,
                         keys=dict.fromkeys(key_sids, key))

    plans = {"p.split.keys": plan(5, 4, 3), "p.split.big": plan(50, 3),
             "p.split.small": plan(7, 3), "p.split.keyless": plan(5, None, 3),
             "p.split.none": TopicPlan(events=2)}

    def counts() -> dict[tuple[str, str], float]:
        return {(t, r): REGISTRY.get_sample_value("pgcdc_merge_spark_path_total",
                                                  {"table": t, "reason": r}) or 0.0
                for t in ("split/keys", "split/big", "split/small", "split/keyless",
                          "split/none")
                for r in (OVER_LIMIT, SEVERAL_KEYS, FAST_MERGE_OFF)}

    config = MergeConfig(bootstrap_servers="k:9092", schema_registry_url="http://r",
                         target=str(tmp_path / "lake"), topic_prefix="p",
                         fast_merge_max_events=20)
    before = counts()
    split = BatchProcessor._split(SimpleNamespace(config=config), plans)  # type: ignore[arg-type]
    assert split == ([["p.split.keyless", "p.split.small"]], ["p.split.big", "p.split.keys"])
    after = counts()
    assert {k: n - before[k] for k, n in after.items() if n != before[k]} == {
        ("split/keys", SEVERAL_KEYS): 1, ("split/big", OVER_LIMIT): 1}
    off = replace(config, fast_merge="off")
    BatchProcessor._split(SimpleNamespace(config=off), plans)  # type: ignore[arg-type]
    assert {k: n - after[k] for k, n in counts().items() if n != after[k]} == {
        ("split/keys", FAST_MERGE_OFF): 1, ("split/big", FAST_MERGE_OFF): 1,
        ("split/small", FAST_MERGE_OFF): 1, ("split/keyless", FAST_MERGE_OFF): 1}


@given(topics, st.data(), st.integers(0, 700), st.booleans())
def test_every_spark_topic_and_only_those_have_exactly_one_reason(
        events: dict[str, int], data: st.DataObject, limit: int, on: bool) -> None:
    fast = (data.draw(st.sets(st.sampled_from(sorted(events)))) if events and on else set())
    split = split_batch(events, fast, limit)
    reasons = spark_reasons(split, fast, on)
    assert sorted(reasons) == sorted(split.spark)  # each Spark part once, no fast one
    for topic, why in reasons.items():
        assert why == (FAST_MERGE_OFF if not on else SEVERAL_KEYS if topic not in fast
                       else OVER_LIMIT)
        assert why != OVER_LIMIT or events[topic] > limit


def spark_table(pool: ThreadPoolExecutor, writes: threading.Event, ended: list[str]
                ) -> Future[None]:
    """A Spark-path table's job: writes until `writes` is set (by a timer: nobody else can
    set it while `run_rounds` waits)."""
    def job() -> None:
        writes.wait(timeout=30)
        ended.append("spark table written")
    return pool.submit(job)


def test_a_failed_round_fails_the_batch_only_once_sparks_tables_are_written() -> None:
    """The batch runs again from the checkpoint when a fast round raises: not while its
    first attempt's Spark thread still writes a table (two attempts writing it at once)."""
    events: list[str] = []
    ran: list[int] = []

    def round_(n: int) -> None:
        ran.append(n)
        if n == 2:
            raise RuntimeError("round 2 failed")

    writes = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        job = spark_table(pool, writes, events)
        timer = threading.Timer(0.5, writes.set)
        timer.start()
        try:
            with pytest.raises(RuntimeError, match="round 2 failed"):
                run_rounds([1, 2, 3], round_, [job])
            events.append("batch failed")
            assert job.done()
        finally:
            writes.set()
            timer.cancel()
    assert events == ["spark table written", "batch failed"]
    assert ran == [1, 2]  # no round after the failed one


def test_rounds_that_succeed_do_not_wait_for_sparks_tables() -> None:
    writes = threading.Event()
    ran: list[int] = []
    with ThreadPoolExecutor(1) as pool:
        job = spark_table(pool, writes, [])
        try:
            run_rounds([1, 2], ran.append, [job])
            assert ran == [1, 2] and not job.done()  # Spark's tables write on beside
        finally:
            writes.set()

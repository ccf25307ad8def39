"""Which engine takes each topic of a batch, and the fast path's rounds
(spark_jobs/runtime/rounds.py): every table within the limit goes through delta-rs, the
driver holds at most the limit's records at once."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_jobs.runtime.rounds import run_rounds, split_batch

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

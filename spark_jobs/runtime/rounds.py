"""Which engine takes each topic of a batch, and in which round the fast path takes it (pure).

The fast path (delta-rs, `sinks/delta/delta_rs_writer.py`) gets a table's records on the
driver: one Spark job collects them for several tables at once, and it costs a fraction of a
second per table where the all-Spark path costs seconds. `--fast-merge-max-events` bounds what
the driver holds at once, not which tables go fast: every topic the fast path can take whose
own events are within the limit goes through it, in successive rounds whose records add up to
at most the limit (a round's records are released before the next round's are collected). Only
a topic above the limit by itself, or one the fast path cannot take, goes through Spark.

Invariants (`tests/unit/spark_jobs/test_spark_jobs_rounds.py`):
- every fast-eligible topic with events ≤ limit is in exactly one round, every other topic is
  a Spark topic, and no topic is both;
- each round's events add up to at most the limit;
- rounds are filled smallest topic first (so the first round is what one bounded collect would
  have taken), and two consecutive rounds together exceed the limit (next-fit), so there are
  fewer than 2 x events / limit + 1 rounds;
- the result depends only on the arguments (ties broken by topic name).

`spark_reasons` says why each Spark topic is one (the ``reason`` of
``pgcdc_merge_spark_path_total``, counted once per table part where the split is made; a part
the fast path declines after trying it is counted there instead, with the decline's reason):
fast merge off, several key schemas (a second key group: the fast path merges on one key), or
over the limit by itself.

`run_rounds` runs the rounds beside the Spark path's tables, and keeps a failed batch from
running again while they still write.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from concurrent.futures import Future, wait
from typing import Any, Final, NamedTuple, TypeVar

Round = TypeVar("Round")

#: Why a topic's part goes to Spark without the fast path trying it (`spark_reasons`).
FAST_MERGE_OFF: Final = "fast merge off"
SEVERAL_KEYS: Final = "several key schemas"
OVER_LIMIT: Final = "over --fast-merge-max-events"


class BatchSplit(NamedTuple):
    rounds: list[list[str]]  # the fast path's topics, round by round (each sorted by name)
    spark: list[str]  # the Spark path's topics, the biggest first (the longest start first)


def split_batch(events: Mapping[str, int], fast: Collection[str], limit: int) -> BatchSplit:
    """The topics of `events` (topic → its events in the batch) split between the fast path,
    in rounds of at most `limit` events each, and Spark. `fast`: the topics the fast path can
    take (one key schema, fast merge on); those with more than `limit` events go to Spark."""
    rounds: list[list[str]] = []
    total = limit + 1  # no round open yet
    for topic in sorted((t for t in events if t in fast and events[t] <= limit),
                        key=lambda t: (events[t], t)):
        if total + events[topic] > limit:
            rounds.append([])
            total = 0
        rounds[-1].append(topic)
        total += events[topic]
    taken = {t for round_ in rounds for t in round_}
    spark = sorted((t for t in events if t not in taken), key=lambda t: (-events[t], t))
    return BatchSplit([sorted(round_) for round_ in rounds], spark)


def spark_reasons(split: BatchSplit, fast: Collection[str], fast_merge_on: bool
                  ) -> dict[str, str]:
    """Each Spark topic of `split` (made with `fast`) → why: fast merge is off, the fast path
    cannot take it (several key schemas), or its events are over the limit by itself. The
    topics of the rounds have none: the fast path tries them."""
    return {topic: (FAST_MERGE_OFF if not fast_merge_on else
                    SEVERAL_KEYS if topic not in fast else OVER_LIMIT) for topic in split.spark}


def run_rounds(rounds: Iterable[Round], run: Callable[[Round], None],
               beside: Iterable[Future[Any]]) -> None:
    """Run the fast path's `rounds` one after the other (`run`: one round, its tables
    written), while the Spark path's tables, already started (`beside`), write on: on
    success it returns without waiting for them. When a round raises, no later round runs,
    and the error is raised only once every job of `beside` has ended: the batch fails and
    runs again from the checkpoint, and its next attempt must not write a table the first
    attempt's Spark thread is still writing."""
    try:
        for round_ in rounds:
            run(round_)
    except BaseException:
        wait(list(beside))
        raise

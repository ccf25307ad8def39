"""A history across a change of the key definition (issue 22), through `BatchProcessor` over
static Kafka-shaped DataFrames: `test_spark_jobs_key_schemas.py`'s events (the primary key
`(a)` becomes `(a, b)`, then is dropped) plus a delete under the new key of a row last
written under the old one. Each event changes the row its own key names, so a version opened
under `(a)` is closed by the event keyed `(a, b)`; in any batching and arrival order the
history is the same, and its current versions are the mirror."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from spark_jobs.history.sink import history_path
from spark_jobs.history.versions import FROM_LSN, TO_LSN, TO_OP
from spark_jobs.runtime.config import MergeConfig
from spark_jobs.runtime.job import BatchProcessor
from tests.unit.spark_jobs.test_spark_jobs_key_schemas import _events, _kafka, _rows, _topics


def _with_a_delete_under_the_new_key() -> list[tuple[bytes | None, bytes]]:
    by_ab = _topics()[1]
    events = _events()
    # (2, 5) was last written under the key (a), at 12
    return [*events[:6], by_ab.change("d", 23, 0, before={"a": 2, "b": 5}), *events[6:]]


# (a, b, valid_from, valid_to, closed by)
HISTORY = [(1, 1, 10, None, None), (1, 2, 20, None, None), (1, 3, 21, 22, "d"),
           (2, 1, 11, 12, "u"), (2, 2, 30, None, None), (2, 3, 31, None, None),
           (2, 5, 12, 23, "d")]


def _history(target: Path) -> list[tuple[Any, ...]]:
    rows = DeltaTable(history_path(str(target), "public/t")).to_pyarrow_table().to_pylist()
    return sorted((r["a"], r["b"], r[FROM_LSN], r[TO_LSN], r[TO_OP]) for r in rows)


@pytest.mark.parametrize("order", [[range(9)], [range(3), range(3, 7), range(7, 9)],
                                   [range(3, 7), range(3), range(7, 9)]],
                         ids=["one batch", "three batches", "the old key's events late"])
def test_each_event_changes_the_row_its_own_key_names(spark: SparkSession, tmp_path: Path,
                                                      order: list[range]) -> None:
    schemas = _topics()[3]
    target = tmp_path / "lake"
    config = MergeConfig("unused:9092", "http://unused", str(target), topics=("p.public.t",),
                         history=("public.*",))
    processor = BatchProcessor(spark, config, "test-app", schemas)
    events = _with_a_delete_under_the_new_key()
    try:
        for batch, positions in enumerate(order):
            processor(_kafka(spark, [events[i] for i in positions], positions[0]), batch)
        assert processor.stats.failed_tables == {} and processor.stats.dead_letters == 0
        assert _history(target) == HISTORY
        if order[0][0] == 0:  # the mirror drops (1, 1) arriving after (1, 2) (docs)
            assert _rows(spark, target) == [(a, b) for a, b, _, to, _ in HISTORY if to is None]
        # every event again (a new checkpoint over the same target): nothing changes
        processor(_kafka(spark, events, 0), len(order))
        assert _history(target) == HISTORY
    finally:
        processor.close()

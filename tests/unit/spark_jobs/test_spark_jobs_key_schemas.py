"""Each event is merged by the key it was written with (issue 25): a primary key changed from
`(a)` to `(a, b)`, then dropped (events without a key), in one batch (a replay) or over
several, through `BatchProcessor` over static Kafka-shaped DataFrames."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from spark_jobs.runtime.config import MergeConfig
from spark_jobs.runtime.job import BatchProcessor
from tests.support.events import LocalRegistry, TableEvents, table_events
from tests.support.schemas import FixedSchemas

COLUMNS = [("a", "int8"), ("b", "int8")]


def _topics() -> tuple[TableEvents, TableEvents, TableEvents, FixedSchemas]:
    registry = LocalRegistry()
    by_a, by_ab, keyless = (table_events(registry, "p", "public", "t", COLUMNS, key)
                            for key in (["a"], ["a", "b"], []))
    return by_a, by_ab, keyless, FixedSchemas(registry.schemas)


def _events() -> list[tuple[bytes | None, bytes]]:
    by_a, by_ab, keyless, _ = _topics()
    return [
        by_a.change("c", 10, 0, after={"a": 1, "b": 1}),
        by_a.change("c", 11, 0, after={"a": 2, "b": 1}),
        by_a.change("u", 12, 0, after={"a": 2, "b": 5}),
        # ALTER TABLE t DROP CONSTRAINT t_pkey, ADD PRIMARY KEY (a, b)
        by_ab.change("c", 20, 0, after={"a": 1, "b": 2}),
        by_ab.change("c", 21, 0, after={"a": 1, "b": 3}),
        by_ab.change("d", 22, 0, before={"a": 1, "b": 3}),
        # ALTER TABLE t DROP CONSTRAINT t_pkey: no replica identity, null keys
        keyless.change("c", 30, 0, after={"a": 2, "b": 2}),
        keyless.change("c", 31, 0, after={"a": 2, "b": 3}),
    ]


EXPECTED = [(1, 1), (1, 2), (2, 2), (2, 3), (2, 5)]


def _kafka(spark: SparkSession, records: list[tuple[bytes | None, bytes]], first: int
           ) -> DataFrame:
    return spark.createDataFrame(
        [(k, v, "p.public.t", 0, first + i, dt.datetime(2024, 1, 1), 0)
         for i, (k, v) in enumerate(records)],
        "key binary, value binary, topic string, partition int, offset long, "
        "timestamp timestamp, timestampType int")


def _rows(spark: SparkSession, target: Path) -> list[tuple[int, int]]:
    df = spark.read.format("delta").load(str(target / "public" / "t"))
    return sorted((r["a"], r["b"]) for r in df.collect())


@pytest.mark.parametrize("sizes", [[8], [3, 3, 2]], ids=["one batch", "three batches"])
def test_each_event_is_merged_by_its_own_key(spark: SparkSession, tmp_path: Path,
                                             sizes: list[int]) -> None:
    schemas = _topics()[3]
    target = tmp_path / "lake"
    config = MergeConfig("unused:9092", "http://unused", str(target), topics=("p.public.t",))
    processor = BatchProcessor(spark, config, "test-app", schemas)
    events = _events()
    try:
        start = 0
        for batch, size in enumerate(sizes):
            processor(_kafka(spark, events[start:start + size], start), batch)
            start += size
        assert processor.stats.failed_tables == {} and processor.stats.dead_letters == 0
        assert _rows(spark, target) == EXPECTED
        # every event again (a new checkpoint over the same target): nothing changes
        processor(_kafka(spark, events, 0), len(sizes))
        assert _rows(spark, target) == EXPECTED
    finally:
        processor.close()


def test_a_tombstone_of_another_key_stops_only_its_own_row(spark: SparkSession,
                                                           tmp_path: Path) -> None:
    """An older event keyed by `(a)` arriving after a delete keyed by `(a, b)` (a lagging
    partition): the delete of `(1, 3)` says nothing about the row `(1, 1)`."""
    by_a, by_ab, _, schemas = _topics()
    target = tmp_path / "lake"
    config = MergeConfig("unused:9092", "http://unused", str(target), topics=("p.public.t",))
    processor = BatchProcessor(spark, config, "test-app", schemas)
    try:
        processor(_kafka(spark, [by_ab.change("c", 21, 0, after={"a": 1, "b": 3}),
                                 by_ab.change("d", 22, 0, before={"a": 1, "b": 3})], 0), 0)
        processor(_kafka(spark, [by_a.change("c", 10, 0, after={"a": 1, "b": 1})], 2), 1)
    finally:
        processor.close()
    assert _rows(spark, target) == [(1, 1)]

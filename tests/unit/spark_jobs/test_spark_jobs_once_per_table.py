"""Each table's part of a batch goes to the batch's features once, whichever engine wrote it
(issue 47): its freshness (`BatchMetrics.applied`), its catalog registration, its history, and
a new upstream incarnation (taken by the mirror, the history set aside first when the table is
replaced). Through `BatchProcessor` over static Kafka-shaped DataFrames, with the fast path on
(a small table through delta-rs, a table with two key schemas through Spark, then the other
way round, the first one re-created upstream) and off (everything through Spark); each feature
is counted where the job calls it."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from spark_jobs.runtime import metrics
from spark_jobs.runtime.config import MergeConfig
from spark_jobs.runtime.history_job import HistoryWriter
from spark_jobs.runtime.job import BatchProcessor
from spark_jobs.sinks.delta import DeltaMirror
from tests.support import events as support
from tests.support.events import LocalRegistry, TableEvents, table_events
from tests.support.schemas import FixedSchemas

COLUMNS = [("a", "int8"), ("b", "int8")]
FEATURES = ("freshness", "registration", "history", "incarnation", "replaced")


def _kafka(spark: SparkSession, records: list[tuple[str, bytes | None, bytes]], first: int
           ) -> DataFrame:
    return spark.createDataFrame(
        [(k, v, topic, 0, first + i, dt.datetime(2024, 1, 1), 0)
         for i, (topic, k, v) in enumerate(records)],
        "key binary, value binary, topic string, partition int, offset long, "
        "timestamp timestamp, timestampType int")


def _recreated(registry: LocalRegistry, monkeypatch: pytest.MonkeyPatch) -> TableEvents:
    """public.a dropped and created again upstream: the same columns, a new relation id."""
    with monkeypatch.context() as patch:
        patch.setattr(support, "relation_id", lambda schema, table: 7_000_001)
        return table_events(registry, "p", "public", "a", COLUMNS, ["a"])


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[tuple[str, str]]]:
    """(feature, "<schema>/<table>") -> calls, each feature counted where the job calls it."""
    counted: Counter[tuple[str, str]] = Counter()

    def spy(cls: type, name: str, feature: str, table: Callable[..., str]) -> None:
        real = getattr(cls, name)

        def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
            counted[(feature, table(self, *args))] += 1
            return real(self, *args, **kwargs)
        monkeypatch.setattr(cls, name, counting)

    def rel(path: str) -> str:
        return "/".join(path.rstrip("/").split("/")[-2:])

    spy(metrics.BatchMetrics, "applied", "freshness", lambda self, table, *_: table)
    spy(DeltaMirror, "register", "registration", lambda self, *_: rel(self.path))
    spy(DeltaMirror, "take", "incarnation", lambda self, *_: rel(self.path))
    spy(HistoryWriter, "write", "history", lambda self, spark, table, *_: table.path)
    spy(HistoryWriter, "replaced", "replaced", lambda self, table: table.path)
    yield counted


@pytest.mark.parametrize("fast_merge", ["auto", "off"])
def test_each_feature_takes_each_table_once_whichever_engine_wrote_it(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        calls: Counter[tuple[str, str]], fast_merge: str) -> None:
    registry = LocalRegistry()
    a = table_events(registry, "p", "public", "a", COLUMNS, ["a"])
    b_by_a, b_by_ab = (table_events(registry, "p", "public", "b", COLUMNS, key)
                       for key in (["a"], ["a", "b"]))
    a_again = _recreated(registry, monkeypatch)
    batches = [
        # a: one key schema (delta-rs when on); b: two (Spark, one part per key schema)
        [(a.topic, *a.change("c", 10, 0, after={"a": 1, "b": 1})),
         (a.topic, *a.change("c", 11, 0, after={"a": 2, "b": 1})),
         (b_by_a.topic, *b_by_a.change("c", 12, 0, after={"a": 1, "b": 1})),
         (b_by_ab.topic, *b_by_ab.change("c", 20, 0, after={"a": 1, "b": 2}))],
        # a re-created upstream (Spark replaces it); b: one key schema (delta-rs when on)
        [(a.topic, *a_again.change("c", 30, 0, after={"a": 5, "b": 5})),
         (b_by_ab.topic, *b_by_ab.change("u", 31, 0, after={"a": 1, "b": 2}))],
    ]
    database = f"once47_{fast_merge}"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
    config = MergeConfig("unused:9092", "http://unused", str(tmp_path / "lake"),
                         topics=(a.topic, b_by_a.topic), history=("public.*",),
                         database=database, fast_merge=fast_merge)
    processor = BatchProcessor(spark, config, "test-app", FixedSchemas(registry.schemas))
    expected = [{("incarnation", "public/a"): 1, ("incarnation", "public/b"): 1},
                {("incarnation", "public/a"): 1, ("replaced", "public/a"): 1}]
    fast_tables = []
    try:
        for batch_id, records in enumerate(batches):
            calls.clear()
            processor(_kafka(spark, records, 10 * batch_id), batch_id)
            assert processor.stats.failed_tables == {}
            fast_tables.append(processor.stats.fast_tables)
            assert dict(calls) == {
                **{(f, t): 1 for f in FEATURES[:3] for t in ("public/a", "public/b")},
                **expected[batch_id]}
    finally:
        processor.close()
    # which engine wrote what: on, a then b through delta-rs; off, none
    assert fast_tables == ([1, 2] if fast_merge == "auto" else [0, 0])
    for table in ("public__a", "public__b"):
        assert spark.catalog.tableExists(f"{database}.{table}")
    rows = spark.read.format("delta").load(str(tmp_path / "lake" / "public" / "a")).collect()
    assert [(r["a"], r["b"]) for r in rows] == [(5, 5)]  # the old incarnation's rows went

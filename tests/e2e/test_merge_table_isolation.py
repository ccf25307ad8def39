"""A table the merge job cannot write never blocks the others: its events of the batch go to
the dead letters with a per-table reason, the other tables merge, and re-producing the dead
letters (docs/merge-job.md "Recovering a table") merges them once the cause is fixed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from spark_jobs.runtime.config import MergeConfig
from spark_jobs.runtime.query import run_merge
from tests.support.merge import CdcPublisher, table_rows

pytestmark = pytest.mark.e2e


def _config(kafka: Any, registry: Any, prefix: str, target: Path, **kw: Any) -> MergeConfig:
    return MergeConfig(bootstrap_servers=kafka.bootstrap, schema_registry_url=registry.url,
                       target=str(target), topic_prefix=prefix, trigger="available-now", **kw)


def test_an_unwritable_table_goes_to_the_dead_letters_and_the_others_merge(
        spark: SparkSession, kafka: Any, registry: Any,
        prefix: str, tmp_path: Path) -> None:
    pub = CdcPublisher(kafka.bootstrap, registry.url, prefix)
    sales = pub.table("public", "sales", [("id", "int8"), ("region", "text")], ["id"])
    notes = pub.table("public", "notes", [("id", "int8"), ("body", "text")], ["id"])
    for i in range(3):
        pub.change(sales, "c", 100, i, after={"id": i, "region": "eu"})
        pub.change(notes, "c", 100, 3 + i, after={"id": i, "body": f"b{i}"})
    pub.flush()
    target = tmp_path / "lake"
    # `notes` has no `region` to partition by: that table cannot be created
    stats = run_merge(spark, _config(kafka, registry, prefix, target, partition_by=("region",)))
    assert table_rows(spark, f"{target}/public/sales", "id") == {
        i: {"id": i, "region": "eu"} for i in range(3)}
    assert list(stats.failed_tables) == ["public/notes"]
    assert "region" in stats.failed_tables["public/notes"]
    dead_dir = f"{target}/_pgcdc/dead_letter"
    dead = spark.read.parquet(dead_dir).collect()
    assert sorted(r["offset"] for r in dead) == [0, 1, 2]
    assert {r["topic"] for r in dead} == {notes.topic}
    assert all(r["reason"].startswith("table public/notes not written: ") for r in dead)

    # the next run (a restart) is not blocked either
    pub.change(sales, "u", 200, 0, after={"id": 0, "region": "us"})
    pub.change(notes, "c", 200, 1, after={"id": 9, "body": "b9"})
    pub.flush()
    stats = run_merge(spark, _config(kafka, registry, prefix, target, partition_by=("region",)))
    assert table_rows(spark, f"{target}/public/sales", "id")[0]["region"] == "us"
    assert stats.failed_tables.keys() == {"public/notes"}

    # recovery: fix the cause (no --partition-by), re-produce the dead letters, merge
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for r in spark.read.parquet(dead_dir).collect():
        producer.produce(r["topic"], key=r["key"], value=r["value"], partition=r["partition"])
    assert producer.flush(30) == 0
    stats = run_merge(spark, _config(kafka, registry, prefix, target))
    assert not stats.failed_tables
    assert table_rows(spark, f"{target}/public/notes", "id") == {
        i: {"id": i, "body": f"b{i}"} for i in (0, 1, 2, 9)}

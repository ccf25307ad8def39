"""`--table-property` / `--change-data-feed`: new Delta tables carry the properties, and a
Change Data Feed can be read from them."""

from __future__ import annotations

from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from spark_jobs.runtime.config import parse_args
from spark_jobs.runtime.query import run_merge
from tests.support.merge import CdcPublisher

pytestmark = pytest.mark.e2e


def test_change_data_feed_and_table_properties_on_new_tables(
        spark: SparkSession, kafka, registry,  # type: ignore[no-untyped-def]
        prefix: str, tmp_path: Path) -> None:
    pub = CdcPublisher(kafka.bootstrap, registry.url, prefix)
    items = pub.table("public", "items", [("id", "int8"), ("name", "text")], ["id"])
    pub.change(items, "c", 100, 0, after={"id": 1, "name": "a"})
    pub.change(items, "c", 100, 1, after={"id": 2, "name": "b"})
    pub.change(items, "u", 200, 0, after={"id": 1, "name": "a2"})
    pub.flush()
    target = tmp_path / "lake"
    config = parse_args(["--bootstrap-servers", kafka.bootstrap, "--schema-registry-url",
                         registry.url, "--topic-prefix", prefix, "--target", str(target),
                         "--trigger", "available-now", "--change-data-feed",
                         "--table-property", "delta.logRetentionDuration=interval 60 days"])
    run_merge(spark, config)
    path = f"{target}/public/items"
    detail = DeltaTable.forPath(spark, path).detail().first()
    assert detail is not None
    properties = detail["properties"]
    assert properties["delta.enableChangeDataFeed"] == "true"
    assert properties["delta.logRetentionDuration"] == "interval 60 days"
    feed = (spark.read.format("delta").option("readChangeFeed", "true")
            .option("startingVersion", 0).load(path))
    ids = sorted(r["id"] for r in feed.where("_change_type = 'insert'").collect())
    assert ids == [1, 2]

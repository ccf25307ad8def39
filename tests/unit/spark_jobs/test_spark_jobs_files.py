"""Batch files: a re-run of a batch replaces its own files instead of adding more."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from spark_jobs.lake.files import write_batch_files
from spark_jobs.sinks.parquet_sink import DATE, change_log


def test_rewriting_a_batch_replaces_its_files(spark: SparkSession, tmp_path: Path) -> None:
    dest = str(tmp_path / "log")
    df = spark.createDataFrame([(1, "a", 1_700_000_000_000), (2, "b", 1_700_100_000_000)],
                               "id long, v string, _cdc_ts_ms long")
    write_batch_files(change_log(df), dest, 0, [DATE])
    write_batch_files(change_log(df), dest, 0, [DATE])  # the same batch after a crash
    write_batch_files(change_log(df.limit(1)), dest, 1, [DATE])
    back = spark.read.parquet(dest)
    assert back.count() == 3
    assert sorted(str(r[DATE]) for r in back.select(DATE).distinct().collect()) == [
        "2023-11-14", "2023-11-16"]
    names = sorted(p.name for p in (tmp_path / "log").rglob("*.parquet"))
    assert all(n.startswith("batch-") for n in names)
    assert not (tmp_path / "log" / "_staging").exists() or not any(
        (tmp_path / "log" / "_staging").iterdir())

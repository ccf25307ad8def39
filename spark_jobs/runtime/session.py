"""Spark settings the job needs (Delta) and modest local defaults (tests, benchmark)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from pyspark.sql import SparkSession

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # Parquet timestamps as microseconds: Spark's default INT96 is read by pyarrow/delta-rs
    # as nanoseconds, which cannot hold years before 1677 or after 2262.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}

# Small-machine defaults: few shuffle partitions, Delta's log replay in few tasks, no UI.
LOCAL_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.stopGracefullyOnShutdown": "true",
}


def local_session(jars: Iterable[Path | str], cores: int = 2,
                  extra: Mapping[str, str] | None = None,
                  app_name: str = "pgcdc-merge") -> SparkSession:
    """A local[cores] session with the job's jars; getOrCreate, so one per process."""
    builder = (SparkSession.builder.master(f"local[{cores}]").appName(app_name)
               .config("spark.jars", ",".join(str(j) for j in jars)))
    # Python workers (the Debezium-format decoders, events/debezium.py) run this interpreter,
    # which has the job's packages, as spark-submit's do (submit.submit_env); pyspark reads it
    # from the environment when the context starts.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for key, value in {**DELTA_CONF, **LOCAL_CONF, **(extra or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()

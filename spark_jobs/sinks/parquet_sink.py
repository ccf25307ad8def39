"""`--format parquet`: an append-only change log per table, every event (op and position
included) rather than a mirror; partitioned by the commit date of the change. The `parquet`
format's `TableSink` (registry: `spark_jobs/sinks/__init__.py`)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..lake.files import write_batch_files
from ..rules.names import DATE as DATE  # re-exported
from ..rules.names import TS
from .inputs import BatchFacts, TableSettings


def change_log(changes: DataFrame) -> DataFrame:
    """The rows written to the log: the decoded event as is, plus its commit date."""
    return changes.withColumn(DATE, F.to_date(F.timestamp_millis(F.col(TS))))


def append_change_log(changes: DataFrame, dest: str, batch_id: int,
                      partition_by: Sequence[str] = ()) -> None:
    write_batch_files(change_log(changes), dest, batch_id, [DATE, *partition_by])


def open_sink(settings: TableSettings) -> ParquetSink:
    """The format registry's factory (`spark_jobs/sinks/__init__.py`)."""
    return ParquetSink(settings)


class ParquetSink:
    """One table's change log at `<root>/<schema>/<table>`: each batch's files named by the
    batch id (`files.write_batch_files`: a re-run batch replaces its own files)."""

    mirror = None  # a log, not a mirror: no key groups, incarnations, versions, tombstones

    def __init__(self, settings: TableSettings) -> None:
        self.settings = settings

    @property
    def path(self) -> str:
        return self.settings.path

    def original_names(self, spark: SparkSession) -> bool:
        return False  # the change log's columns have the Avro (sanitized) names

    def apply(self, spark: SparkSession, changes: DataFrame, facts: BatchFacts,
              key: Sequence[str] | None, batch_id: int, part: str = "") -> None:
        # One part per batch: the job splits a batch by key schema only for mirrors.
        append_change_log(changes, self.path, batch_id, self.settings.partition_by)

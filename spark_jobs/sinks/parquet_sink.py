"""`--format parquet`: an append-only change log per table, every event (op and position
included) rather than a mirror; partitioned by the commit date of the change."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..lake.files import write_batch_files
from ..rules.names import DATE as DATE  # re-exported
from ..rules.names import TS


def change_log(changes: DataFrame) -> DataFrame:
    """The rows written to the log: the decoded event as is, plus its commit date."""
    return changes.withColumn(DATE, F.to_date(F.timestamp_millis(F.col(TS))))


def append_change_log(changes: DataFrame, dest: str, batch_id: int,
                      partition_by: Sequence[str] = ()) -> None:
    write_batch_files(change_log(changes), dest, batch_id, [DATE, *partition_by])

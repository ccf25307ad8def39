"""Point-in-time reads of a history table (`--history`): the table as it was at a source
position or a commit time, as Arrow (delta-rs, no Spark) or as a Spark DataFrame.

    from spark_jobs.history.read import as_of_arrow, as_of_spark
    from spark_jobs.history.sink import history_path
    path = history_path("/lake", "public/users")        # <target>/_pgcdc/history/<schema>/<table>
    as_of_arrow(path, lsn=0x16B374D848)                  # every transaction committed <= that LSN
    as_of_spark(spark, path, timestamp="2026-03-03 00:00:00")   # commit time (session time zone)

As of an LSN: the versions opened at or before it and not closed at or before it, so a
transaction is wholly visible or not at all. A consistent cut of the lake (`cuts/manifest.py`,
`<target>/_pgcdc/cuts`) is an LSN: `as_of_arrow(path, lsn=cut.lsn)` reads the history at
that cut. As of a time: by the commit times `__valid_from` / `__valid_to` (PostgreSQL's commit
timestamps, millisecond precision). The SQL of both is `history.as_of_sql` /
`history.as_of_time_sql`."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from ..lake.storage import options_for
from ..rules.changes import q
from ..rules.plan import sql_string
from . import versions as history


def _one(lsn: int | None, timestamp: Any) -> None:
    if (lsn is None) == (timestamp is None):
        raise ValueError("give exactly one of lsn and timestamp")


def _when(timestamp: dt.datetime | int) -> dt.datetime:
    """A commit time: an aware datetime, a naive one (taken as UTC) or epoch milliseconds."""
    if isinstance(timestamp, int):
        return dt.datetime.fromtimestamp(timestamp / 1000, dt.UTC)
    return timestamp if timestamp.tzinfo else timestamp.replace(tzinfo=dt.UTC)


def as_of_arrow(path: str, *, lsn: int | None = None, txn_index: int | None = None,
                timestamp: dt.datetime | int | None = None,
                history_columns: bool = False) -> pa.Table:
    """The rows of the history table at `path` as of `lsn` (with `txn_index`: as of that
    exact position inside the transaction) or as of a commit `timestamp`; without the
    history columns unless asked."""
    _one(lsn, timestamp)
    dataset = DeltaTable(path, storage_options=options_for(path)).to_pyarrow_dataset()
    if lsn is not None:
        idx = (1 << 63) - 2 if txn_index is None else txn_index
        opened = (pc.field(history.FROM_LSN) < lsn) | (
            (pc.field(history.FROM_LSN) == lsn) & (pc.field(history.FROM_IDX) <= idx))
        open_ = pc.field(history.TO_LSN).is_null() | (pc.field(history.TO_LSN) > lsn) | (
            (pc.field(history.TO_LSN) == lsn) & (pc.field(history.TO_IDX) > idx))
    else:
        assert timestamp is not None
        at = pa.scalar(_when(timestamp), dataset.schema.field(history.FROM_TS).type)
        opened = pc.field(history.FROM_TS) <= at
        open_ = pc.field(history.TO_TS).is_null() | (pc.field(history.TO_TS) > at)
    table = dataset.to_table(filter=opened & open_)
    if history_columns:
        return table
    return table.select([c for c in table.column_names if c not in history.HISTORY_COLUMNS])


def as_of_spark(spark: SparkSession, path: str, *, lsn: int | None = None,
                txn_index: int | None = None, timestamp: str | dt.datetime | None = None,
                history_columns: bool = False) -> DataFrame:
    """`as_of_arrow` in Spark: a DataFrame of the history table at `path` (a string
    `timestamp` is a Spark timestamp literal, in the session time zone)."""
    _one(lsn, timestamp)
    df = spark.read.format("delta").load(path)
    if lsn is not None:
        df = df.where(history.as_of_sql(lsn, txn_index))
    else:
        text = timestamp.isoformat(" ") if isinstance(timestamp, dt.datetime) else timestamp
        assert isinstance(text, str)
        df = df.where(history.as_of_time_sql(f"TIMESTAMP '{sql_string(text)}'"))
    if history_columns:
        return df
    return df.select(*[q(c) for c in df.columns if c not in history.HISTORY_COLUMNS])

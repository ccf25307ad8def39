"""A micro-batch's summary and its heartbeat records, in one narrow Spark job.

The batch's plan (`decode.plan_batch`) needs, per (topic, problem, schema id, key schema id):
the events, the oldest and newest Kafka timestamps, and the bytes read; the heartbeats
(`cuts/pending.heartbeat_positions`) need the heartbeat topic's (schema id, body). A Spark
`groupBy` costs a shuffle (two stages) and the heartbeats a second job over the batch: a
quarter of a second or more per batch on 2 cores, paid by every batch, empty ones too. Here
one job brings the few small columns of every record to the driver as Arrow (a row is ~40
bytes without its body; a batch is bounded by `--max-offsets-per-trigger`), and pyarrow
groups them. Bodies come along for heartbeat records only.

The rows are dicts with the keys the groupBy's Rows had (`topic`, PROBLEM, SCHEMA_ID,
KEY_SCHEMA_ID, `n`, `oldest`, `newest`, `bytes`); the order of the groups is not specified.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .wire import BODY, KEY_SCHEMA_ID, PROBLEM, SCHEMA_ID

GROUP = ("topic", PROBLEM, SCHEMA_ID, KEY_SCHEMA_ID)


def summarize(frames: DataFrame, beat_topic: str | None
              ) -> tuple[list[dict[str, Any]], list[tuple[int, bytes]]]:
    """(the batch's summary rows, the (schema id, body) of the decodable records of
    `beat_topic`; none when it is None) of `frames` (`wire.with_frame` rows)."""
    beat = (F.when((F.col("topic") == beat_topic) & F.col(PROBLEM).isNull(), F.col(BODY))
            if beat_topic is not None else F.lit(None).cast("binary"))
    table = frames.select(
        *GROUP, F.unix_millis("timestamp").alias("ts"),
        (F.coalesce(F.octet_length("key"), F.lit(0))
         + F.coalesce(F.octet_length("value"), F.lit(0))).alias("bytes"),
        beat.alias("beat")).toArrow()
    return summary_rows(table), beats(table)


def summary_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The groups of `summarize`'s Arrow table (columns GROUP, `ts`, `bytes`)."""
    if table.num_rows == 0:
        return []
    grouped = table.group_by(list(GROUP), use_threads=False).aggregate([
        ("ts", "count", pc.CountOptions(mode="all")), ("ts", "min"), ("ts", "max"),
        ("bytes", "sum")])
    return [{**{column: row[column] for column in GROUP}, "n": row["ts_count"],
             "oldest": row["ts_min"], "newest": row["ts_max"], "bytes": row["bytes_sum"]}
            for row in grouped.to_pylist()]


def beats(table: pa.Table) -> list[tuple[int, bytes]]:
    """The (schema id, body) pairs of `summarize`'s Arrow table's heartbeat records."""
    found = table.filter(pc.is_valid(table.column("beat")))
    return list(zip(found.column(SCHEMA_ID).to_pylist(), found.column("beat").to_pylist(),
                    strict=True))

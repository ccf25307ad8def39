"""The Confluent wire format as Spark columns: magic byte 0, 4-byte big-endian schema id, body."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

HEADER = 5
PROBLEM = "_problem"
SCHEMA_ID = "_sid"
KEY_SCHEMA_ID = "_key_sid"
BODY = "_body"


def _schema_id(data: Column) -> Column:
    return F.conv(F.hex(F.substring(data, 2, 4)), 16, 10).cast("long")


def _framed(data: Column) -> Column:
    return (F.length(data) >= HEADER) & (F.substring(data, 1, 1) == F.lit(b"\x00"))


def problem(value: Column) -> Column:
    """Why a value cannot be decoded before looking at its schema (NULL when it can)."""
    return (F.when(value.isNull(), F.lit("null value (not a change event)"))
            .when(F.length(value) < HEADER, F.lit("shorter than the 5-byte Confluent header"))
            .when(F.substring(value, 1, 1) != F.lit(b"\x00"), F.lit("magic byte is not 0")))


def with_frame(df: DataFrame) -> DataFrame:
    """Kafka source rows plus the problem, value and key schema ids, and the Avro body."""
    value, key = F.col("value"), F.col("key")
    return df.select(
        "topic", "partition", "offset", "timestamp", "key", "value",
        problem(value).alias(PROBLEM),
        F.when(_framed(value), _schema_id(value)).alias(SCHEMA_ID),
        F.when(key.isNotNull() & _framed(key), _schema_id(key)).alias(KEY_SCHEMA_ID),
        F.when(_framed(value), F.expr(f"substring(value, {HEADER + 1})")).alias(BODY),
    )


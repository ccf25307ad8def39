"""The batch summary and heartbeats in one narrow job (`events/summary.py`) give what the
Spark groupBy and the heartbeat query gave: the plan and the heartbeat positions rest on it."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from connector.avro import frame
from spark_jobs.events.summary import summarize
from spark_jobs.events.wire import KEY_SCHEMA_ID, PROBLEM, SCHEMA_ID, with_frame

KAFKA_ROW = "topic string, partition int, offset long, key binary, value binary, ts long"


def _frames(spark: SparkSession, rows: list[tuple[Any, ...]]) -> Any:
    df = spark.createDataFrame(rows, KAFKA_ROW)
    return with_frame(df.withColumn("timestamp", F.timestamp_millis("ts")).drop("ts"))


def _grouped(frames: Any) -> list[dict[str, Any]]:
    """The summary as the job computed it before: a Spark groupBy."""
    return [r.asDict() for r in frames.groupBy("topic", PROBLEM, SCHEMA_ID, KEY_SCHEMA_ID).agg(
        F.count(F.lit(1)).alias("n"), F.unix_millis(F.min("timestamp")).alias("oldest"),
        F.unix_millis(F.max("timestamp")).alias("newest"),
        F.sum(F.coalesce(F.octet_length("key"), F.lit(0))
              + F.coalesce(F.octet_length("value"), F.lit(0))).alias("bytes")).collect()]


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(str(row[c]) for c in ("topic", PROBLEM, SCHEMA_ID, KEY_SCHEMA_ID))


def test_summary_equals_the_groupby_and_heartbeats_are_the_beat_topics_good_records(
        spark: SparkSession) -> None:
    rows = [
        ("p.s.a", 0, 0, frame(7, b"k"), frame(300, b"abc"), 1_000),
        ("p.s.a", 0, 1, frame(7, b"k"), frame(300, b"abcd"), 3_000),
        ("p.s.a", 0, 2, None, frame(301, b"x"), 2_000),  # another schema, no key
        ("p.s.a", 0, 3, None, None, 5_000),  # a tombstone: a framing problem
        ("p.s.b", 0, 0, b"\x01", b"\x01\x00\x00\x00\x07xyz", 4_000),  # bad magic byte
        ("p.heartbeat", 0, 0, None, frame(9, b"beat1"), 6_000),
        ("p.heartbeat", 0, 1, None, frame(9, b"beat2"), 7_000),
        ("p.heartbeat", 0, 2, None, b"\x00", 8_000),  # too short: no heartbeat
    ]
    frames = _frames(spark, rows)
    summary, beats = summarize(frames, "p.heartbeat")
    assert sorted(summary, key=_key) == sorted(_grouped(frames), key=_key)
    assert sorted((sid, bytes(body)) for sid, body in beats) == [(9, b"beat1"), (9, b"beat2")]
    a = next(r for r in summary if r["topic"] == "p.s.a" and r[SCHEMA_ID] == 300)
    assert (a["n"], a["oldest"], a["newest"], a[KEY_SCHEMA_ID]) == (2, 1_000, 3_000, 7)

    assert summarize(frames, None)[1] == []  # heartbeats not read: no bodies


def test_an_empty_batch_has_no_summary(spark: SparkSession) -> None:
    assert summarize(_frames(spark, []), "p.heartbeat") == ([], [])

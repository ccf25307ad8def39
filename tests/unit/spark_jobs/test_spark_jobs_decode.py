"""Confluent framing as Spark columns, Envelope schema handling, per-batch schema planning."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import SparkSession

from connector.avro import frame
from spark_jobs.events.decode import (
    NotAnEnvelope,
    decode_topic,
    plan_batch,
    split_corrupt,
    undecodable,
    value_record,
)
from spark_jobs.events.wire import KEY_SCHEMA_ID, PROBLEM, SCHEMA_ID, with_frame
from tests.support.events import LocalRegistry, table_events
from tests.support.schemas import FixedSchemas

TABLE = table_events(LocalRegistry(), "p", "s", "t",
                     [("id", "int8"), ("order-id", "int8"), ("note", "text")], ["id"])
ENVELOPE = TABLE.codec.schemas.value_schema
KEY = TABLE.codec.schemas.key_schema
KAFKA_ROW = "topic string, partition int, offset long, key binary, value binary"


def test_value_record_finds_the_named_record() -> None:
    assert [f["name"] for f in value_record(ENVELOPE)["fields"]] == ["id", "order_x002Did", "note"]
    after_first = json.loads(json.dumps(ENVELOPE))
    after_first["fields"][0]["type"], after_first["fields"][1]["type"] = (
        ["null", f"{TABLE.codec.schemas.namespace}.Value"], after_first["fields"][0]["type"])
    assert value_record(after_first)["name"] == "Value"
    with pytest.raises(NotAnEnvelope):
        value_record({"type": "record", "name": "Heartbeat", "fields": []})


def test_framing_columns(spark: SparkSession) -> None:
    rows = [("p.s.t", 0, 0, frame(7, b""), frame(300, b"abc")),
            ("p.s.t", 0, 1, None, None), ("p.s.t", 0, 2, None, b"\x00\x01"),
            ("p.s.t", 0, 3, b"\x01", b"\x01\x00\x00\x00\x07xyz")]
    df = spark.createDataFrame(rows, KAFKA_ROW).selectExpr("*", "current_timestamp() AS timestamp")
    got = {r["offset"]: r for r in with_frame(df).collect()}
    assert (got[0][PROBLEM], got[0][SCHEMA_ID], got[0][KEY_SCHEMA_ID]) == (None, 300, 7)
    assert bytes(got[0]["_body"]) == b"abc"
    assert got[1][PROBLEM].startswith("null value")
    assert got[2][PROBLEM].startswith("shorter than")
    assert (got[3][PROBLEM], got[3][KEY_SCHEMA_ID]) == ("magic byte is not 0", None)


def test_plan_fetches_each_schema_once_and_sorts_out_bad_ids() -> None:
    schemas = FixedSchemas({1: ENVELOPE, 2: KEY, 3: {"type": "record", "name": "X",
                                                    "fields": []}})
    summary = [
        {"topic": "p.s.t", PROBLEM: None, SCHEMA_ID: 1, KEY_SCHEMA_ID: 2, "n": 5},
        {"topic": "p.s.t", PROBLEM: None, SCHEMA_ID: 1, KEY_SCHEMA_ID: None, "n": 1},
        {"topic": "p.s.t", PROBLEM: None, SCHEMA_ID: 9, KEY_SCHEMA_ID: 2, "n": 2},
        {"topic": "p.s.t", PROBLEM: "magic byte is not 0", SCHEMA_ID: None,
         KEY_SCHEMA_ID: None, "n": 1},
        {"topic": "p.s.u", PROBLEM: None, SCHEMA_ID: 3, KEY_SCHEMA_ID: None, "n": 1},
    ]
    plans = plan_batch(summary, schemas)
    t = plans["p.s.t"]
    assert set(t.schemas) == {1} and t.key_columns() == ["id"] and t.events == 9
    assert t.rejected == {9: "unknown schema id 9"} and t.framing_problems == 1
    assert "not a pgcdc change event" in plans["p.s.u"].rejected[3]
    assert schemas.lookups.count(1) == 1


def test_decode_flattens_and_separates_corrupt_bodies(spark: SparkSession) -> None:
    values = [
        TABLE.change("c", 10, 0, after={"id": 1, "order-id": 5, "note": "n"})[1],
        TABLE.change("u", 11, 0, after={"id": 1, "order-id": 6}, unchanged_toast=["note"])[1],
        TABLE.change("d", 12, 0, before={"id": 2})[1],
        # not the producer's: a body cut short, and a schema id no registry gave out
        frame(TABLE.value_id, b"\x02"),
        frame(4, b"\x00"),
    ]
    df = spark.createDataFrame([("p.s.t", 0, i, None, v) for i, v in enumerate(values)],
                               KAFKA_ROW).selectExpr("*", "current_timestamp() AS timestamp")
    frames = with_frame(df)
    plans = plan_batch(frames.groupBy("topic", PROBLEM, SCHEMA_ID, KEY_SCHEMA_ID).count()
                       .withColumnRenamed("count", "n").collect(),
                       FixedSchemas({TABLE.value_id: ENVELOPE}))
    good, corrupt = split_corrupt(decode_topic(frames, "p.s.t", plans["p.s.t"]), frames,
                                  "p.s.t")
    rows = sorted(good.collect(), key=lambda r: r["_kafka_offset"])
    assert [(r["id"], r["order-id"], r["note"], r["_cdc_op"], r["_cdc_commit_lsn"],
             r["_cdc_toast"]) for r in rows] == [
        (1, 5, "n", "c", 10, []), (1, 6, None, "u", 11, ["note"]), (2, None, None, "d", 12, [])]
    assert [(r["offset"], r["reason"]) for r in corrupt.collect()] == [
        (3, "corrupt Avro body for its writer schema")]
    before = undecodable(frames, plans)
    assert before is not None
    assert [(r["offset"], r["reason"]) for r in before.collect()] == [
        (4, "unknown schema id 4")]

"""Confluent framing as Spark columns, Envelope schema handling, per-batch schema planning."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pytest
from pyspark.sql import SparkSession

from spark_jobs.decode import (
    NotAnEnvelope,
    decode_topic,
    plan_batch,
    split_corrupt,
    undecodable,
    value_record,
)
from spark_jobs.events import avro_name, envelope_schema, key_schema, source
from spark_jobs.wire import KEY_SCHEMA_ID, PROBLEM, SCHEMA_ID, frame_bytes, with_frame
from tests.support.schemas import FixedSchemas

COLUMNS = [("id", "long"), ("order-id", "long"), ("note", "string")]
ENVELOPE = envelope_schema("p", "s", "t", COLUMNS)
KEY = key_schema("p", "s", "t", COLUMNS[:1])
KAFKA_ROW = "topic string, partition int, offset long, key binary, value binary"


def body(envelope: dict[str, Any]) -> bytes:
    rename = {"order-id": avro_name("order-id")}
    envelope = {**envelope, **{side: None if envelope[side] is None else {
        rename.get(k, k): v for k, v in envelope[side].items()} for side in ("before", "after")}}
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(ENVELOPE), envelope)
    return buf.getvalue()


def test_avro_names_follow_the_contract() -> None:
    assert [avro_name(n) for n in ["id", "order date", "1st", "a_b-c", "Größe", "a_x0041"]] == [
        "id", "order_x0020date", "_x0031st", "a_x005Fb_x002Dc", "Gr_x00F6_x00DFe",
        "a_x005Fx0041"]


def event(op: str, lsn: int, after: dict[str, Any] | None, before: dict[str, Any] | None = None,
          toast: list[str] | None = None) -> dict[str, Any]:
    return {"before": before, "after": after, "op": op, "ts_ms": 1, "transaction": None,
            "source": source("s", "t", lsn, 0, ts_ms=1), "unchanged_toast": toast or []}


def test_value_record_finds_the_named_record() -> None:
    assert [f["name"] for f in value_record(ENVELOPE)["fields"]] == ["id", "order_x002Did", "note"]
    after_first = json.loads(json.dumps(ENVELOPE))
    after_first["fields"][0]["type"], after_first["fields"][1]["type"] = (
        ["null", "p.s.t.Value"], after_first["fields"][0]["type"])
    assert value_record(after_first)["name"] == "Value"
    with pytest.raises(NotAnEnvelope):
        value_record({"type": "record", "name": "Heartbeat", "fields": []})


def test_framing_columns(spark: SparkSession) -> None:
    rows = [("p.s.t", 0, 0, frame_bytes(7, b""), frame_bytes(300, b"abc")),
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
        frame_bytes(1, body(event("c", 10, {"id": 1, "order-id": 5, "note": "n"}))),
        frame_bytes(1, body(event("u", 11, {"id": 1, "order-id": 6, "note": None}, None,
                                  ["note"]))),
        frame_bytes(1, body(event("d", 12, None, {"id": 2, "order-id": None, "note": None}))),
        frame_bytes(1, b"\x02"),  # cut short
        frame_bytes(4, b"\x00"),  # unknown id
    ]
    df = spark.createDataFrame([("p.s.t", 0, i, None, v) for i, v in enumerate(values)],
                               KAFKA_ROW).selectExpr("*", "current_timestamp() AS timestamp")
    frames = with_frame(df)
    plans = plan_batch(frames.groupBy("topic", PROBLEM, SCHEMA_ID, KEY_SCHEMA_ID).count()
                       .withColumnRenamed("count", "n").collect(), FixedSchemas({1: ENVELOPE}))
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

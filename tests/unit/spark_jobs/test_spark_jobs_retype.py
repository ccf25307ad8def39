"""A column's type changed upstream in a way the lake cannot widen (text → bigint, bigint →
text): the table's new schema wins, stored values convert where they can (NULL otherwise), and
a batch mixing events of the old and new writer schemas merges (issue 25, part 2)."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
)

from spark_jobs.events.decode import decode_topic, plan_batch, split_corrupt
from spark_jobs.events.wire import KEY_SCHEMA_ID, PROBLEM, SCHEMA_ID, with_frame
from spark_jobs.rules.widening import batch_type, column_change
from spark_jobs.runtime.spark_path import table_facts
from spark_jobs.sinks.delta import DeltaMirror
from tests.support.events import LocalRegistry, table_events
from tests.support.schemas import FixedSchemas

KAFKA_ROW = "topic string, partition int, offset long, key binary, value binary"
META = "_cdc_op string, _cdc_commit_lsn long, _cdc_txn_index long, _cdc_ts_ms long, " \
       "_cdc_toast array<string>"


def test_column_change_is_same_widen_or_retype() -> None:
    assert column_change(LongType(), LongType()) == ("same", LongType())
    assert column_change(IntegerType(), LongType()) == ("widen", LongType())
    assert column_change(DecimalType(10, 2), DecimalType(12, 2)) == ("widen", DecimalType(12, 2))
    # narrower sources fit the table's type: it stays
    assert column_change(LongType(), IntegerType()) == ("same", LongType())
    assert column_change(DoubleType(), DecimalType(10, 2)) == ("retype", DecimalType(10, 2))
    assert column_change(DecimalType(12, 2), DecimalType(10, 2)) == ("same", DecimalType(12, 2))
    assert column_change(StringType(), LongType()) == ("retype", LongType())
    assert column_change(LongType(), StringType()) == ("retype", StringType())
    assert column_change(StringType(), TimestampType()) == ("retype", TimestampType())
    # within a batch: the newest writer schema's type, or an older wider one
    assert batch_type(LongType(), StringType()) == LongType()
    assert batch_type(IntegerType(), LongType()) == LongType()
    assert batch_type(StringType(), LongType()) == StringType()


def test_text_to_bigint_and_bigint_to_text_retype_the_table(
        spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sink = DeltaMirror.at(str(tmp_path), f"s/{uuid.uuid4().hex[:8]}", "test-app")

    def apply(batch_id: int, schema: str, rows: list[tuple[object, ...]]) -> None:
        df = spark.createDataFrame(rows, f"{schema}, {META}")
        _, facts = table_facts(df)
        sink.apply(spark, df, facts, ["id"], batch_id)

    apply(0, "id int, code string, n long, w int",
          [(1, "foo", 5, 1, "c", 10, 0, 0, []), (2, "12", 6, 2, "c", 10, 1, 0, []),
           (9, "9", 0, 0, "d", 10, 2, 0, [])])
    big = 2**40
    with caplog.at_level(logging.INFO, logger="spark_jobs.sinks.delta.spark_writer"):
        apply(1, "id long, code long, n string, w long",
              [(3, 7, "x", big, "c", 20, 0, 0, []), (2, 13, "y", 2, "u", 20, 1, 0, [])])
    table = spark.read.format("delta").load(sink.path)
    assert [(f.name, f.dataType) for f in table.schema.fields[:4]] == [
        ("id", LongType()), ("code", LongType()), ("n", StringType()), ("w", LongType())]
    got = {r["id"]: (r["code"], r["n"], r["w"]) for r in table.collect()}
    assert got == {1: (None, "5", 1), 2: (13, "y", 2), 3: (7, "x", big)}
    assert [r["id"] for r in spark.read.format("delta").load(sink.tomb_path).collect()] == [9]
    lines = [r.getMessage() for r in caplog.records]
    assert f"{sink.path}: column code retyped string -> bigint " \
           "(1 values not convertible set NULL)" in lines
    assert f"{sink.path}: column n retyped bigint -> string " \
           "(0 values not convertible set NULL)" in lines
    assert f"{sink.path}: widened {{'id': 'bigint', 'w': 'bigint'}}" in lines
    # a later batch with the narrower type again (bigint → int) keeps the table's type
    apply(2, "id int, code int, n string, w int", [(4, 1, "z", 3, "c", 30, 0, 0, [])])
    table = spark.read.format("delta").load(sink.path)
    assert table.schema["code"].dataType == LongType()
    assert {r["id"]: r["code"] for r in table.collect()}[4] == 1


def test_a_batch_mixing_old_and_new_writer_schemas_merges(spark: SparkSession,
                                                          tmp_path: Path) -> None:
    registry = LocalRegistry()
    # ALTER TABLE t ALTER COLUMN v TYPE bigint USING v::bigint: a new writer schema
    old, new = (table_events(registry, "p", "s", "t", [("id", "int8"), ("v", type_)], ["id"])
                for type_ in ("text", "int8"))

    sink = DeltaMirror.at(str(tmp_path), f"s/{uuid.uuid4().hex[:8]}", "test-app")

    def apply(batch_id: int, values: list[bytes]) -> None:
        df = spark.createDataFrame([("p.s.t", 0, i, None, v) for i, v in enumerate(values)],
                                   KAFKA_ROW).selectExpr("*", "current_timestamp() AS timestamp")
        frames = with_frame(df)
        plans = plan_batch(frames.groupBy("topic", PROBLEM, SCHEMA_ID, KEY_SCHEMA_ID).count()
                           .withColumnRenamed("count", "n").collect(),
                           FixedSchemas(registry.schemas))
        changes, _ = split_corrupt(decode_topic(frames, "p.s.t", plans["p.s.t"]), frames,
                                   "p.s.t")
        _, facts = table_facts(changes)
        sink.apply(spark, changes, facts, ["id"], batch_id)

    apply(0, [old.change("c", 10, 0, after={"id": 1, "v": "foo"})[1],
              old.change("c", 10, 1, after={"id": 4, "v": "4"})[1]])
    # old-schema events ('12', 'bar') still in the batch of the first new-schema one
    apply(1, [old.change("c", 11, 0, after={"id": 2, "v": "12"})[1],
              old.change("u", 12, 0, after={"id": 1, "v": "bar"})[1],
              new.change("c", 13, 0, after={"id": 3, "v": 5})[1]])
    table = spark.read.format("delta").load(sink.path)
    assert table.schema["v"].dataType == LongType()
    assert {r["id"]: r["v"] for r in table.collect()} == {1: None, 2: 12, 3: 5, 4: 4}


def test_a_retype_keeps_column_mapping_partitioning_and_properties(spark: SparkSession,
                                                                    tmp_path: Path) -> None:
    sink = DeltaMirror.at(str(tmp_path), f"s/{uuid.uuid4().hex[:8]}", "test-app",
                             partition_by=["p"], properties={"delta.appendOnly": "false"},
                             column_mapping=True)

    def apply(batch_id: int, schema: str, rows: list[tuple[object, ...]]) -> None:
        df = spark.createDataFrame(rows, f"{schema}, {META}")
        _, facts = table_facts(df)
        sink.apply(spark, df, facts, ["id"], batch_id)

    apply(0, "id int, `order date` string, p int",
          [(1, "2024-01-02", 1, "c", 10, 0, 0, []), (2, "soon", 2, "c", 10, 1, 0, [])])
    apply(1, "id int, `order date` date, p string",
          [(3, None, "x", "c", 20, 0, 0, [])])
    table = spark.read.format("delta").load(sink.path)
    assert str(table.schema["order date"].dataType) == "DateType()"
    assert table.schema["p"].dataType == StringType()
    assert {r["id"]: (str(r["order date"]), r["p"]) for r in table.collect()} == {
        1: ("2024-01-02", "1"), 2: ("None", "2"), 3: ("None", "x")}
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{sink.path}`").first()
    assert detail is not None
    assert detail["partitionColumns"] == ["p"]
    assert detail["properties"]["delta.columnMapping.mode"] == "name"
    assert detail["properties"]["delta.appendOnly"] == "false"

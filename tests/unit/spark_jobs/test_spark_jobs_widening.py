"""Type widening upstream (int → bigint, numeric precision up): the Delta table widens
instead of the MERGE failing with DELTA_CAST_OVERFLOW_IN_TABLE_WRITE."""

from __future__ import annotations

import uuid
from decimal import Decimal
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.types import DecimalType, DoubleType, FloatType, IntegerType, LongType, StringType

from spark_jobs.rules.widening import widened
from spark_jobs.runtime.spark_path import table_facts
from spark_jobs.sinks.delta import DeltaMirror

META = "_cdc_op string, _cdc_commit_lsn long, _cdc_txn_index long, _cdc_ts_ms long, " \
       "_cdc_toast array<string>"


def test_widened_is_what_delta_type_widening_allows() -> None:
    assert widened(IntegerType(), LongType()) == LongType()
    assert widened(LongType(), IntegerType()) is None  # an older, narrower writer schema
    assert widened(FloatType(), DoubleType()) == DoubleType()
    assert widened(DecimalType(10, 2), DecimalType(12, 2)) == DecimalType(12, 2)
    # more scale keeps every integer digit the table had
    assert widened(DecimalType(10, 2), DecimalType(10, 4)) == DecimalType(12, 4)
    assert widened(DecimalType(12, 2), DecimalType(10, 2)) is None
    assert widened(DecimalType(38, 2), DecimalType(38, 4)) is None  # beyond 38 digits
    assert widened(IntegerType(), StringType()) is None


def test_int_to_bigint_and_numeric_precision_up_widen_the_table(spark: SparkSession,
                                                                 tmp_path: Path) -> None:
    sink = DeltaMirror.at(str(tmp_path), f"s/{uuid.uuid4().hex[:8]}", "test-app")

    def apply(batch_id: int, schema: str, rows: list[tuple[object, ...]]) -> None:
        df = spark.createDataFrame(rows, f"{schema}, {META}")
        _, facts = table_facts(df)
        sink.apply(spark, df, facts, ["id"], batch_id)

    apply(0, "id int, n int, amount decimal(6,2)",
          [(1, 7, Decimal("1.50"), "c", 10, 0, 0, []), (2, 8, None, "c", 10, 1, 0, []),
           (3, 9, None, "d", 11, 0, 0, [])])  # a delete: the int key is in the tombstones too
    big = 2**40
    apply(1, "id long, n long, amount decimal(12,2)",
          [(big, big + 1, Decimal("1234567890.25"), "c", 20, 0, 0, []),
           (1, big, Decimal("9999999999.99"), "u", 20, 1, 0, []),
           (big + 5, None, None, "d", 20, 2, 0, [])])
    table = spark.read.format("delta").load(sink.path)
    assert table.schema["id"].dataType == LongType()
    assert table.schema["amount"].dataType == DecimalType(12, 2)
    got = {r["id"]: (r["n"], r["amount"]) for r in table.collect()}
    assert got == {1: (big, Decimal("9999999999.99")), 2: (8, None),
                   big: (big + 1, Decimal("1234567890.25"))}
    tomb = spark.read.format("delta").load(sink.tomb_path)
    assert sorted(r["id"] for r in tomb.collect()) == [3, big + 5]

"""Column names the job uses itself (issue 25): a table whose columns are named like the Kafka
record's fields (`key`, `topic`...), the job's metadata columns (`_cdc_op`, `_kafka_offset`...)
or its temporary columns goes through a whole micro-batch (`BatchProcessor` over a static
Kafka-shaped DataFrame) into Delta and the Parquet change log."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from connector.avro import TableSchemas, frame
from connector.names import from_avro_name
from spark_jobs.rules.changes import META, latest_per_key
from spark_jobs.rules.names import METADATA_COLUMNS, column_names
from spark_jobs.runtime.config import MergeConfig
from spark_jobs.runtime.job import BatchProcessor
from tests.support.events import Column, LocalRegistry, TableEvents, table_events
from tests.support.schemas import FixedSchemas

KAFKA = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
         "headers"]
# Job-internal names of the starting code, and one that equals an escaped metadata name.
OTHERS = ["_e", "_last", "_next", "_problem", "_sid", "_body", "_cdc_other",
          "_x005Fcdc_x005Fop"]
COLUMNS = [*KAFKA, *METADATA_COLUMNS, *OTHERS]
ESCAPED = {m: "_x005F" + m[1:].replace("_", "_x005F") for m in METADATA_COLUMNS}
# The PostgreSQL column `_x005Fcdc_x005Fop` keeps its Avro name: the escaped `_cdc_op` has it.
LAKE = [ESCAPED.get(c, c) for c in COLUMNS[:-1]] + ["_x005Fx005Fcdc_x005Fx005Fop"]


def _table(prefix: str) -> tuple[TableEvents, FixedSchemas]:
    registry = LocalRegistry()
    topic = table_events(registry, prefix, "public", "settings",
                         [(c, "text") for c in COLUMNS], ["key"])
    return topic, FixedSchemas(registry.schemas)


def _schemas(columns: list[Column], key: list[str]) -> TableSchemas:
    return table_events(LocalRegistry(), "p", "s", "t", columns, key).codec.schemas


def _row(key: str, tag: str) -> dict[str, Any]:
    return {c: key if c == "key" else f"{c}:{tag}" for c in COLUMNS}


def _kafka(spark: SparkSession, topic: str, records: list[tuple[bytes | None, bytes]],
           first_offset: int) -> Any:
    ts = dt.datetime(2024, 1, 1)
    return spark.createDataFrame(
        [(k, v, topic, 0, first_offset + i, ts, 0) for i, (k, v) in enumerate(records)],
        "key binary, value binary, topic string, partition int, offset long, "
        "timestamp timestamp, timestampType int")


def test_metadata_names_are_escaped_and_others_kept() -> None:
    record = _schemas([(c, "text") for c in COLUMNS], COLUMNS).key_schema
    assert record is not None
    names = column_names(record)
    assert list(names.values()) == LAKE
    assert list(column_names(record, original=True).values()) == LAKE
    # reversible: the escaped name decodes to the PostgreSQL name
    assert [from_avro_name(ESCAPED[m]) for m in METADATA_COLUMNS] == list(METADATA_COLUMNS)
    assert column_names({"fields": [{"name": "_CDC_OP", "pg_name": "_CDC_OP"}]}) == {
        "_CDC_OP": "_x005FCDC_x005FOP"}  # ignoring case, as Spark resolves names


@pytest.mark.parametrize("fmt", ["delta", "parquet"])
def test_a_table_with_the_jobs_own_column_names_merges(spark: SparkSession, tmp_path: Path,
                                                      fmt: str) -> None:
    prefix = f"p{uuid.uuid4().hex[:6]}"
    table, schemas = _table(prefix)
    target = tmp_path / "lake"
    config = MergeConfig("unused:9092", "http://unused", str(target), topics=(table.topic,),
                         format=fmt)
    processor = BatchProcessor(spark, config, "test-app", schemas)
    try:
        processor(_kafka(spark, table.topic, [
            table.change("c", 10, 0, after=_row("a", "1")),
            table.change("c", 10, 1, after=_row("b", "1")),
            (None, frame(table.value_id, b"\x02")),  # a corrupt body (by hand): a dead letter
        ], 0), 0)
        processor(_kafka(spark, table.topic, [
            table.change("u", 20, 0, after={**_row("a", "2"), "_cdc_toast": None},
                         unchanged_toast=["_cdc_toast"]),
            table.change("d", 20, 1, before=_row("b", "1")),
        ], 3), 1)
    finally:
        processor.close()
    assert processor.stats.failed_tables == {}
    assert processor.stats.dead_letters == 1
    dead = spark.read.parquet(str(target / "_pgcdc" / "dead_letter")).collect()
    assert [(r["topic"], r["offset"], r["reason"]) for r in dead] == [
        (table.topic, 2, "corrupt Avro body for its writer schema")]

    path = str(target / "public" / "settings")
    if fmt == "parquet":
        log = spark.read.parquet(path)
        assert [c for c in log.columns if c not in METADATA_COLUMNS] == LAKE
        got = {(r["key"], r["_cdc_op"]): r for r in log.collect()}
        assert set(got) == {("a", "c"), ("b", "c"), ("a", "u"), ("b", "d")}
        assert got[("a", "u")]["_cdc_toast"] == [ESCAPED["_cdc_toast"]]
        assert got[("a", "u")]["topic"] == "topic:2"
        return
    df = spark.read.format("delta").load(path)
    assert df.columns == [*LAKE, *META]
    rows = [r.asDict() for r in df.collect()]
    expected = {lake: f"{pg}:2" for pg, lake in zip(COLUMNS, LAKE, strict=True)}
    expected.update(key="a", **{ESCAPED["_cdc_toast"]: "_cdc_toast:1"})  # TOAST kept
    assert [{c: r[c] for c in LAKE} for r in rows] == [expected]
    assert (rows[0]["_cdc_op"], rows[0]["_cdc_commit_lsn"]) == ("u", 20)
    tomb = spark.read.format("delta").load(str(target / "_pgcdc" / "tombstones" / "public"
                                               / "settings"))
    assert [r["key"] for r in tomb.collect()] == ["b"]


def test_negative_zero_float_key_is_kept(spark: SparkSession) -> None:
    """PostgreSQL keeps `-0` in a float8 key (and `-0 = 0`): the latest change per key must
    carry the key value of the change, not the grouping's normalized one."""
    df = spark.createDataFrame(
        [(-0.0, "x", "c", 10, 0, 0, []), (-0.0, "y", "u", 11, 0, 0, []),
         (1.5, "z", "c", 10, 1, 0, [])],
        "k double, v string, _cdc_op string, _cdc_commit_lsn long, _cdc_txn_index long, "
        "_cdc_ts_ms long, _cdc_toast array<string>")
    got = {r["v"]: r["k"] for r in latest_per_key(df, ["k"]).collect()}
    assert set(got) == {"y", "z"}
    assert str(got["y"]) == "-0.0"
    toast = {r["v"]: r["k"] for r in latest_per_key(df, ["k"], ["v"]).collect()}
    assert str(toast["y"]) == "-0.0"


def test_negative_zero_float_key_lands_in_delta(spark: SparkSession, tmp_path: Path) -> None:
    """Through the table's first append and a later MERGE (insert and update)."""
    from spark_jobs.runtime.spark_path import table_facts
    from spark_jobs.sinks.delta import DeltaMirror

    schema = ("k double, v string, _cdc_op string, _cdc_commit_lsn long, _cdc_txn_index long, "
              "_cdc_ts_ms long, _cdc_toast array<string>")
    sink = DeltaMirror.at(str(tmp_path), "s/floats", "test-app")
    for batch, change in enumerate([(-0.0, "a", "c", 10), (-0.0, "b", "c", 11),
                                    (-0.0, "b", "u", 12)]):
        df = spark.createDataFrame([(*change, 0, 0, [])], schema)
        sink.apply(spark, df, table_facts(df)[1], ["k", "v"], batch)
    got = sorted((r["v"], str(r["k"]), r["_cdc_commit_lsn"])
                 for r in spark.read.format("delta").load(sink.path).collect())
    assert got == [("a", "-0.0", 10), ("b", "-0.0", 12)]


def test_key_columns_are_named_as_in_the_row() -> None:
    """A key column whose name is only taken in the whole row (here by the escaped `_cdc_op`)
    gets the row's name for it, not the one the key record alone would give."""
    from spark_jobs.events.decode import TopicPlan

    schemas = _schemas([("_cdc_op", "text"), ("_x005Fcdc_x005Fop", "text")],
                       ["_x005Fcdc_x005Fop"])
    plan = TopicPlan(schemas={1: schemas.value_schema}, key_record=schemas.key_schema,
                     key_schema_id=2)
    assert plan.key_columns() == ["_x005Fx005Fcdc_x005Fx005Fop"]
    assert plan.key_columns(original=True) == ["_x005Fx005Fcdc_x005Fx005Fop"]

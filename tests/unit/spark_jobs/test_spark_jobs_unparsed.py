"""The merge job's decoding of the producer's own events ignores the Envelope's `unparsed` map
(schemas/README.md): events written with it -- a typed value fallen back to null, its text in
the map -- and events of the schema registered before it decode side by side."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import SparkSession

from connector.avro import SourceInfo, TableCodec, derive_table_schemas, frame
from connector.pgtypes import oids
from spark_jobs.events.decode import decode_topic, plan_batch, split_corrupt
from spark_jobs.events.wire import KEY_SCHEMA_ID, PROBLEM, SCHEMA_ID, with_frame
from tests.support.avro import catalog, column, relation
from tests.support.schemas import FixedSchemas

KAFKA_ROW = "topic string, partition int, offset long, key binary, value binary"


def test_events_with_unparsed_decode_and_the_map_is_ignored(spark: SparkSession) -> None:
    schemas = derive_table_schemas(relation(column("id", oids.INT8, key=True),
                                            column("d", oids.DATE), column("t", oids.TEXT)),
                                   catalog(), prefix="p", db="d")
    old_schema = json.loads(schemas.value_json)
    old_schema["fields"] = [f for f in old_schema["fields"] if f["name"] != "unparsed"]
    codec = TableCodec(schemas, 1, 2, catalog())
    source = SourceInfo(10, 0, 1)
    _, fell_back = codec.change_from_tuples("c", None, ("1", "not a date", "x"), source)
    _, plain = codec.change_from_tuples("c", None, ("2", "2026-11-25", "y"), source._replace(
        commit_lsn=11))
    as_old = frame(3, plain[5:-1])  # the same event as the old schema wrote it
    values = [fell_back, plain, as_old]
    good = _decoded(spark, schemas, old_schema, values)
    rows = sorted(good.collect(), key=lambda r: r["_kafka_offset"])
    assert [(r["id"], r["d"] is None, r["t"], r["_cdc_op"]) for r in rows] == [
        (1, True, "x", "c"), (2, False, "y", "c"), (2, False, "y", "c")]
    assert "unparsed" not in good.columns


def test_connect_attributes_are_ignored_by_the_merge_jobs_decoding(spark: SparkSession) -> None:
    """The producer's schemas carry Kafka Connect attributes (connect.name / connect.type /
    connect.parameters, schemas/README.md): Spark's from_avro with that writer schema reads
    the same values as with the schema without them (as registered before they existed)."""
    from tests.support.avro import avro_shape, numeric_typmod

    schemas = derive_table_schemas(relation(
        column("id", oids.INT8, key=True), column("s", oids.INT2), column("d", oids.DATE),
        column("tm", oids.TIME), column("ts", oids.TIMESTAMP), column("tz", oids.TIMESTAMPTZ),
        column("u", oids.UUID), column("n", oids.NUMERIC, numeric_typmod(10, 2)),
        column("j", oids.JSONB), column("v", oids.VARCHAR, 9), column("a", 1007)),
        catalog(), prefix="p", db="d")
    assert "connect.parameters" in schemas.value_json and "int16" in schemas.value_json
    old_schema = avro_shape(schemas.value_schema)
    codec = TableCodec(schemas, 1, 2, catalog())
    row = ("1", "-7", "2026-11-25", "12:30:00.5", "2026-11-25 01:02:03",
           "2026-11-25 01:02:03+02", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "12.34",
           '{"k": 1}', "abcde", "{1,NULL,3}")
    _, value = codec.change_from_tuples("c", None, row, SourceInfo(10, 0, 1))
    as_old = frame(3, value[5:])  # the same bytes under the schema without attributes
    new, old = sorted(_decoded(spark, schemas, old_schema, [value, as_old]).collect(),
                      key=lambda r: r["_kafka_offset"])
    names = ["id", "s", "d", "tm", "ts", "tz", "u", "n", "j", "v", "a"]
    assert [new[n] for n in names] == [old[n] for n in names]
    assert (new["id"], new["s"], new["v"], new["a"]) == (1, -7, "abcde", [1, None, 3])
    assert str(new["n"]) == "12.34" and new["u"] == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"


def _decoded(spark: Any, schemas: Any, old_schema: Any, values: list[bytes]) -> Any:
    """`values` (framed with id 2 = the producer's schema, 3 = `old_schema`) decoded as the
    merge job decodes a batch; none may be corrupt."""
    df = spark.createDataFrame([(schemas.topic, 0, i, None, v) for i, v in enumerate(values)],
                               KAFKA_ROW).selectExpr("*", "current_timestamp() AS timestamp")
    frames = with_frame(df)
    plans = plan_batch(frames.groupBy("topic", PROBLEM, SCHEMA_ID, KEY_SCHEMA_ID).count()
                       .withColumnRenamed("count", "n").collect(),
                       FixedSchemas({2: schemas.value_schema, 3: old_schema}))
    good, corrupt = split_corrupt(decode_topic(frames, schemas.topic, plans[schemas.topic]),
                                  frames, schemas.topic)
    assert corrupt.count() == 0
    return good

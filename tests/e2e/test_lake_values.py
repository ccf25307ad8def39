"""Acceptance (issue 15): a table of every type in schemas/README.md -- time, timetz,
±infinity, BC dates, years past 9999 included -- and an int → bigint change go through
`pgcdc run` and the merge job; Spark, delta-rs and a stock confluent-kafka
DeserializingConsumer read the results without error, and the values are right."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pyarrow.parquet as pq
import pytest
from confluent_kafka import DeserializingConsumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from spark_jobs.runtime.config import MergeConfig
from spark_jobs.runtime.job import MergeStats
from spark_jobs.runtime.query import run_merge
from tests.support.merge import CdcPublisher
from tests.support.producer import ProducerRun

pytestmark = pytest.mark.e2e

SCHEMA = "lakev"
BIG = 2**40
DDL = f"""
DROP SCHEMA IF EXISTS {SCHEMA} CASCADE;
CREATE SCHEMA {SCHEMA};
CREATE TYPE {SCHEMA}.mood AS ENUM ('sad', 'happy');
CREATE DOMAIN {SCHEMA}.posint AS int CHECK (VALUE > 0);
CREATE TABLE {SCHEMA}.everything (
    id int PRIMARY KEY, n int, flag bool, i2 smallint, i8 bigint, o oid, f4 real,
    f8 double precision, dec numeric(10,2), num numeric, txt text, vc varchar(10), bp char(3),
    nm name, ch "char", x xml, ip inet, net cidr, mac macaddr, mac8 macaddr8, cash money,
    b bit(3), vb varbit, tz timetz, iv interval, j json, jb jsonb, u uuid, raw bytea, d date,
    t time, t3 time(3), ts timestamp, tstz timestamptz, mood {SCHEMA}.mood,
    pos {SCHEMA}.posint, ints int[], grid int[][], xi xid, x8 xid8, c cid, lsn pg_lsn);
"""
FULL_ROW = f"""INSERT INTO {SCHEMA}.everything VALUES (1, 1, true, 2, 3, 4, 1.5, 2.25, 12.34,
    '1.000000000000000000000000000000000000001', 'text', 'varchar', 'bp', 'name', 'c',
    '<a>1</a>', '10.0.0.1/8', '10.0.0.0/8', '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05',
    12.34, B'101', B'11', '10:00:00+02', '1 day 02:00:00', '{{"a": 1}}', '{{"b": [2]}}',
    '00000000-0000-0000-0000-000000000001', '\\x00ff', '2024-02-29', '13:14:15.123456',
    '01:02:03.456', '2024-01-02 03:04:05.000006', '2024-01-02 03:04:05+00', 'happy', 7,
    '{{1,NULL,3}}', '{{{{1,2}},{{3,4}}}}', '5', '6', '7', '0/16B3748')"""
DATES = "INSERT INTO {s}.everything (id, d, t, tz, ts, tstz) VALUES (%s, %s, %s, %s, %s, %s)"
INSERT = DATES.format(s=SCHEMA)

TOP_DAY, BOTTOM_DAY = dt.date(9999, 12, 31), dt.date(1, 1, 1)
TOP, BOTTOM = dt.datetime(9999, 12, 31, 23, 59, 59, 999999), dt.datetime(1, 1, 1)
TOP_TZ, BOTTOM_TZ = TOP - dt.timedelta(days=1), BOTTOM + dt.timedelta(days=2)  # timestamptz
LAST_MICRO = 86_399_999_999
# id → (d, t, tz, ts, tstz): what every reader must see (schemas/README.md; the lake's time is
# microseconds since midnight, timestamps naive UTC)
EXPECTED = {
    1: (dt.date(2024, 2, 29), 47_655_123_456, "10:00:00+02",
        dt.datetime(2024, 1, 2, 3, 4, 5, 6), dt.datetime(2024, 1, 2, 3, 4, 5)),
    2: (TOP_DAY, LAST_MICRO, "24:00:00+01", TOP, BOTTOM_TZ),                # snapshot: infinities
    3: (BOTTOM_DAY, 0, "00:00:00-03", BOTTOM, TOP_TZ),                      # BC, past 9999
    4: (TOP_DAY, 1, "23:59:59.999999+14", BOTTOM, TOP_TZ),                  # streamed infinities
    BIG: (None, None, None, None, None),
}


def _merge(spark: SparkSession, kafka: Any, registry: Any, prefix: str, target: Path
           ) -> MergeStats:
    stats = run_merge(spark, MergeConfig(
        bootstrap_servers=kafka.bootstrap, schema_registry_url=registry.url, target=str(target),
        topic_prefix=prefix, trigger="available-now"))
    assert stats.dead_letters == 0 and not stats.failed_tables, stats.failed_tables
    return stats


def _consume_all(bootstrap: str, registry_client: SchemaRegistryClient, topic: str,
                 count: int) -> list[Any]:
    """A plain consumer loop with the stock Avro deserializers, as users write it."""
    consumer = DeserializingConsumer({
        "bootstrap.servers": bootstrap, "group.id": f"lakev-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
        "key.deserializer": AvroDeserializer(registry_client),
        "value.deserializer": AvroDeserializer(registry_client)})
    consumer.subscribe([topic])
    values: list[Any] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)  # raises if a record cannot be deserialized
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    assert len(values) == count
    return values


def test_every_type_and_a_widened_key_reach_spark_delta_rs_and_stock_consumers(
        request: pytest.FixtureRequest, spark: SparkSession, kafka: Any, registry: Any,
        registry_client: SchemaRegistryClient, tmp_path: Path) -> None:
    pg = request.getfixturevalue("pg15")  # built with libxml (the xml type); pg18 is not
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.execute(DDL)
        conn.execute(FULL_ROW)
        conn.execute(INSERT, (2, "infinity", "24:00:00", "24:00:00+01", "infinity",
                              "-infinity"))
    producer = ProducerRun(pg.dsn, kafka.bootstrap, registry.url, f"{SCHEMA}.*")
    try:
        producer.start(tmp_path, wait=False)  # rows 1-2 by the initial snapshot, the rest streamed
        producer.wait_caught_up()
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute(INSERT, (3, "0044-03-15 BC", "00:00:00", "00:00:00-03",
                                  "0044-03-15 12:00:00 BC", "12000-01-01 00:00:00+00"))
            conn.execute(INSERT, (4, "12000-06-01", "00:00:00.000001", "23:59:59.999999+14",
                                  "-infinity", "infinity"))
            conn.execute(INSERT, (5, None, None, None, None, None))
            conn.execute(f"DELETE FROM {SCHEMA}.everything WHERE id = 5")  # an int tombstone
        producer.wait_caught_up()
        target = tmp_path / "lake"
        _merge(spark, kafka, registry, producer.prefix, target)  # creates the table: id, n are int

        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute(f"ALTER TABLE {SCHEMA}.everything ALTER COLUMN id TYPE bigint, "
                         "ALTER COLUMN n TYPE bigint, ALTER COLUMN dec TYPE numeric(14,2), "
                         "ALTER COLUMN vc TYPE varchar(40)")
            conn.execute(f"INSERT INTO {SCHEMA}.everything (id, n, dec, vc) VALUES "
                         f"({BIG}, {2**33}, 123456789012.34, '{'v' * 40}')")
            conn.execute(f"UPDATE {SCHEMA}.everything SET n = {2**31 + 5} WHERE id = 1")
        producer.wait_caught_up()
        _merge(spark, kafka, registry, producer.prefix, target)
    finally:
        producer.drop()

    path = f"{target}/{SCHEMA}/everything"
    # Spark
    frame = spark.read.format("delta").load(path)
    assert frame.schema["id"].dataType.simpleString() == "bigint"
    assert frame.schema["t"].dataType.simpleString() == "bigint"
    spark_rows = {r["id"]: r.asDict() for r in frame.collect()}
    assert set(spark_rows) == set(EXPECTED)
    for key, (d, t, tz, ts, tstz) in EXPECTED.items():
        assert (spark_rows[key]["d"], spark_rows[key]["t"], spark_rows[key]["tz"],
                spark_rows[key]["ts"], spark_rows[key]["tstz"]) == (d, t, tz, ts, tstz), key
    full = spark_rows[1]
    assert full["n"] == 2**31 + 5 and spark_rows[BIG]["n"] == 2**33
    assert full["t3"] == 3_723_456_000
    assert spark_rows[BIG]["dec"] == Decimal("123456789012.34")
    assert spark_rows[BIG]["vc"] == "v" * 40
    assert (full["dec"], full["num"], full["u"], full["ints"], full["grid"], full["mood"],
            full["pos"], full["raw"], full["iv"]) == (
        Decimal("12.34"), "1.000000000000000000000000000000000000001",
        "00000000-0000-0000-0000-000000000001", [1, None, 3], [[1, 2], [3, 4]], "happy", 7,
        bytearray(b"\x00\xff"), "P1DT2H")
    assert all(v is not None for v in full.values()), full

    # delta-rs: the same table, the same values
    arrow = DeltaTable(path).to_pyarrow_table().to_pylist()
    rs_rows = {r["id"]: r for r in arrow}
    assert set(rs_rows) == set(EXPECTED)
    for key, (d, t, tz, ts, tstz) in EXPECTED.items():
        got = rs_rows[key]
        aware = got["tstz"].replace(tzinfo=None) if got["tstz"] is not None else None
        assert (got["d"], got["t"], got["tz"], got["ts"], aware) == (d, t, tz, ts, tstz), key
    assert rs_rows[1]["n"] == 2**31 + 5

    # a stock DeserializingConsumer: every event of the topic, none raising on poll()
    values = _consume_all(kafka.bootstrap, registry_client,
                          f"{producer.prefix}.{SCHEMA}.everything", 8)
    after = {v["after"]["id"]: v["after"] for v in values if v and v["after"]}
    assert after[2]["d"] == TOP_DAY and after[2]["t"] == dt.time(23, 59, 59, 999999)
    assert after[2]["ts"] == TOP and after[2]["tstz"] == BOTTOM_TZ.replace(tzinfo=dt.UTC)
    assert after[3]["d"] == BOTTOM_DAY and after[3]["tstz"] == TOP_TZ.replace(tzinfo=dt.UTC)
    assert after[4]["ts"] == BOTTOM and after[BIG]["n"] == 2**33


def test_time_columns_land_in_the_parquet_change_log(
        spark: SparkSession, kafka: Any, registry: Any,
        prefix: str, tmp_path: Path) -> None:
    pub = CdcPublisher(kafka.bootstrap, registry.url, prefix)
    shifts = pub.table("public", "shifts", [
        ("id", "int8"), ("starts", "time"), ("ends", "timetz")], ["id"])
    pub.change(shifts, "c", 100, 0, after={"id": 1, "starts": dt.time(8, 30, 0, 5),
                                            "ends": "17:00:00+02"})
    pub.flush()
    target = tmp_path / "log"
    stats = run_merge(spark, MergeConfig(
        bootstrap_servers=kafka.bootstrap, schema_registry_url=registry.url, target=str(target),
        topic_prefix=prefix, trigger="available-now", format="parquet"))
    assert not stats.failed_tables and stats.dead_letters == 0
    path = f"{target}/public/shifts"
    (row,) = spark.read.parquet(path).collect()
    assert (row["starts"], row["ends"]) == (30_600_000_005, "17:00:00+02")
    # pyarrow skips `_`-prefixed directories (the `_cdc_date=` partitions) unless told
    (arrow_row,) = pq.read_table(path, ignore_prefixes=["."]).to_pylist()
    assert arrow_row["starts"] == 30_600_000_005

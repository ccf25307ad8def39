"""pgcdc's topics into a stock Kafka Connect sink: Debezium's JDBC sink (Connect standalone,
Apicurio's AvroConverter reading Confluent framing from our registry) replicates a PostgreSQL
database into another one, and the copy equals the source.

- ``typed``: a table of the types issue 20 lists (int2, time, timestamp, timestamptz, date,
  uuid, inet, cidr, macaddr, money, jsonb, interval, enum, and timetz and unbounded numeric,
  which Debezium does not keep exact), written into a PRE-CREATED
  table of the same column types: the sink binds each value as its column's type (a
  timestamptz was a bigint before the Connect names), and every value arrives exact;
- ``created``: the same types into a table the SINK CREATES: its columns are typed (smallint,
  time, timestamp, date, uuid...); then ``ALTER TABLE ... ADD COLUMN ... DEFAULT`` on the
  source: the rows that existed before carry the default in the sink too (connect.default;
  --no-resync-on-ddl, so the default alone brings it, not a re-read);
- ``parted``: a topic of 3 partitions with a TRUNCATE between inserts, published with
  ``--truncate-records one`` (the setting for generic sinks): one truncate record, and the
  sink's table is the source's after it;
- ``typed`` again, published by a second producer with ``--value-format debezium`` into the
  same sink (as ``typed_dbz``, a pre-created table): Debezium's own encoding, which the sink
  takes unchanged; every value exact but the ones that format loses (timetz: the same instant
  at UTC; interval: months as 30.4375 days).

Equality is checked value by value as text, both sessions with the stream's settings (UTC,
ISO dates, ISO 8601 intervals), the source value cast to the sink column's type."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support.connect import ConnectStandalone, converter_settings, wait_for
from tests.support.producer import ProducerRun

pytestmark = pytest.mark.e2e

SETTINGS = ("SET TimeZone = 'UTC'; SET DateStyle = 'ISO'; SET IntervalStyle = 'iso_8601';"
            " SET extra_float_digits = 3")
TYPES = """
  id int PRIMARY KEY,
  i2 smallint,
  i4 int,
  i8 bigint,
  f8 float8,
  b bool,
  tm time,
  ts timestamp,
  tstz timestamptz,
  d date,
  u uuid,
  ip inet,
  net cidr,
  mac macaddr,
  cash money,
  j jsonb,
  iv interval,
  mood mood,
  n numeric(10, 2),
  vc varchar(20),
  tz timetz,
  nu numeric,
  txt text
"""
ROW = ("(%s, 7, 70000, 7000000000, 1.5, true, '12:34:56.789012', '2024-02-29 23:59:59.5',"
       " '2024-01-01 12:00:00+05:30', '2024-02-29', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',"
       " '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', '-12.34', '{\"a\": [1, 2]}',"
       " '1 year 2 mons -3 days 04:05:06.5', 'happy', '12345678.90', 'varchar', '12:00:00+01',"
       " '123456789012345678901234567890.1234567890', 'text')")
SOURCE_DDL = f"""
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE typed ({TYPES});
CREATE TABLE created ({TYPES});
CREATE TABLE parted (id int PRIMARY KEY, v text);
"""
SINK_DDL = f"""
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE typed ({TYPES});
CREATE TABLE typed_dbz ({TYPES});
"""
# What --value-format debezium loses (schemas/README.md), compared in what it keeps.
DEBEZIUM_LOSSY = {"tz": "(tz AT TIME ZONE 'UTC')::text",
                  "iv": "extract(epoch FROM iv)::text"}


def _database(server_dsn: str, name: str, ddl: str) -> str:
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name}")
    dsn = server_dsn.replace("dbname=postgres", f"dbname={name}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(ddl)
    return dsn


@pytest.fixture
def databases(pg15: Any) -> Iterator[tuple[str, str]]:
    yield (_database(pg15.dsn, "connect_src", SOURCE_DDL),
           _database(pg15.dsn, "connect_sink", SINK_DDL))


def _rows(dsn: str, table: str, casts: dict[str, str] | None = None) -> list[tuple[Any, ...]]:
    """Every row as text, ordered by id; `casts`: column -> type to cast to first."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SETTINGS)
        columns = [r[0] for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0"
            " AND NOT attisdropped ORDER BY attname", (table,)).fetchall()]
        if casts is not None:
            columns = [c for c in columns if c in casts]
        exprs = ", ".join(f"({c})::{casts[c]}::text" if casts else f"({c})::text"
                          for c in columns)
        return [tuple(r) for r in conn.execute(f"SELECT {exprs} FROM {table} ORDER BY id")]


def _column_types(dsn: str, table: str) -> dict[str, str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {str(n): str(t) for n, t in conn.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
            (table,)).fetchall()}


def _count(dsn: str, table: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()
        if exists is None or exists[0] is None:
            return -1
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        return int(row[0]) if row else -1


def test_debezium_jdbc_sink_replicates_pgcdc_topics(databases: tuple[str, str], kafka: Any,
                                                    registry: Any, tmp_path: Path) -> None:
    source, sink = databases
    with psycopg.connect(source, autocommit=True) as conn:
        for i in range(1, 4):
            conn.execute(f"INSERT INTO typed VALUES {ROW % i}")
            conn.execute(f"INSERT INTO created VALUES {ROW % i}")
        conn.execute("INSERT INTO typed (id) VALUES (4)")  # nulls
        conn.execute("INSERT INTO parted SELECT g, 'before ' || g FROM generate_series(1, 12) g")
    producer = ProducerRun(source, kafka.bootstrap, registry.url, "public.typed,public.created,"
                           "public.parted", extra=["--topic-partitions", "3",
                                                   "--truncate-records", "one",
                                                   "--no-resync-on-ddl"])
    dbz = ProducerRun(source, kafka.bootstrap, registry.url, "public.typed",
                      extra=["--value-format", "debezium"])
    connect = ConnectStandalone(tmp_path / "connect", kafka.bootstrap, {
        "name": "jdbc-sink",
        "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
        "tasks.max": "1",
        "topics.regex": rf"({producer.prefix}|{dbz.prefix})\.public\..*",
        "connection.url": "jdbc:postgresql://" + sink.split("host=")[1].split()[0] + ":"
                          + sink.split("port=")[1].split()[0] + "/connect_sink"
                          # interval and enum columns: PostgreSQL takes their type from the
                          # column (the sink binds our exact strings as varchar otherwise)
                          + "?stringtype=unspecified",
        "connection.username": "postgres",
        "connection.password": "",
        "connection.provider":
            "org.hibernate.engine.jdbc.connections.internal.DriverManagerConnectionProviderImpl",
        "insert.mode": "upsert",
        "delete.enabled": "true",
        "truncate.enabled": "true",
        "primary.key.mode": "record_key",
        "schema.evolution": "basic",
        "transforms": "dbz,route",
        "transforms.dbz.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.dbz.regex": rf"{dbz.prefix}\.public\.typed",
        "transforms.dbz.replacement": "x.public.typed_dbz",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": r"[^.]+\.[^.]+\.(.*)",
        "transforms.route.replacement": "$1",
        **converter_settings(registry.url, "key"),
        **converter_settings(registry.url, "value"),
    })
    connect.start()  # first: its JVM starts while the producer takes its snapshot
    try:
        producer.start(tmp_path, wait=False)
        dbz.start(tmp_path, wait=False)  # both snapshots at once
        producer.wait_streaming()
        dbz.wait_streaming()
        wait_for(lambda: _count(sink, "parted") == 12 and _count(sink, "typed") == 4
                 and _count(sink, "created") == 3 and _count(sink, "typed_dbz") == 4,
                 "snapshot rows in the sink", connect, 90)
        with psycopg.connect(source, autocommit=True) as conn:
            conn.execute("UPDATE typed SET txt = 'updated', i2 = -32768 WHERE id = 2")
            conn.execute("DELETE FROM typed WHERE id = 3")
            conn.execute("ALTER TABLE created ADD COLUMN c3 text DEFAULT 'dflt'")
            conn.execute(f"INSERT INTO created VALUES {ROW[:-1] % 5}, 'given')")
            conn.execute("TRUNCATE parted")
        wait_for(lambda: _count(sink, "parted") == 0 and _count(sink, "created") == 4,
                 "truncate and the new column's row in the sink", connect)
        with psycopg.connect(source, autocommit=True) as conn:
            conn.execute("INSERT INTO parted SELECT g, 'after ' || g FROM generate_series(5, 23) g")
        wait_for(lambda: _count(sink, "parted") == 19 and _count(sink, "typed") == 3
                 and _count(sink, "typed_dbz") == 3, "rows after the truncate", connect)
        time.sleep(1)  # anything the sink would still (wrongly) apply

        # pre-created typed columns: every value exact
        assert _column_types(sink, "typed") == _column_types(source, "typed")
        assert _rows(sink, "typed") == _rows(source, "typed")
        # sink-created: typed columns, values equal as the sink's types hold them
        created = _column_types(sink, "created")
        for column, expected in {"i2": "smallint", "tm": "time", "ts": "timestamp",
                                 "tstz": "timestamp", "d": "date", "u": "uuid",
                                 "n": "numeric(10,2)", "b": "boolean", "i8": "bigint",
                                 "ip": "inet", "net": "cidr", "mac": "macaddr", "cash": "money",
                                 "j": "jsonb", "vc": "character varying(20)"}.items():
            assert created[column].startswith(expected), (column, created[column])
        assert _rows(sink, "created") == _rows(source, "created", created)
        # (columns by name: c3, id) the rows from before ADD COLUMN hold its default in the sink
        assert _rows(sink, "created", {"id": "int", "c3": "text"}) == [
            ("dflt", "1"), ("dflt", "2"), ("dflt", "3"), ("given", "5")]
        assert _rows(sink, "parted") == _rows(source, "parted")

        # --value-format debezium: the sink as it takes Debezium's topics, exact but its losses
        types = _column_types(source, "typed")
        exact = {c: t for c, t in types.items() if c not in DEBEZIUM_LOSSY}
        assert _rows(sink, "typed_dbz", exact) == _rows(source, "typed", exact)
        lossy = ", ".join(DEBEZIUM_LOSSY.values())
        with psycopg.connect(sink, autocommit=True) as conn:
            got = conn.execute(f"SELECT {lossy} FROM typed_dbz ORDER BY id").fetchall()
        # 12:00:00+01 at UTC; 1 year 2 mons -3 days 04:05:06.5 with 30.4375-day months
        assert got == [("11:00:00+00", "36572706.500000")] * 2 + [(None, None)], got
    finally:
        connect.stop()
        producer.stop()
        producer.drop()
        dbz.stop()
        dbz.drop()

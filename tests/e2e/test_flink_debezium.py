"""Flink SQL reads pgcdc's topics as it reads Debezium's (issue 39): a producer with
``--value-format debezium``, Flink 2.2's Kafka connector with ``'format' =
'debezium-avro-confluent'`` on the registry's Confluent API, and the DDL a Flink user writes
for a Debezium PostgreSQL topic (Debezium's encodings: ZonedTimestamp a STRING, MicroTime and
MicroTimestamp a BIGINT of microseconds -- Flink's Avro format holds TIMESTAMP(3) only, which
reads io.debezium.time.Timestamp of a timestamp(3) -- the others Flink's own types). A table
of every common type (REPLICA IDENTITY FULL, as Flink needs of Debezium's topics too):
snapshot rows with extreme values and NULLs, then a TRUNCATE (not written under that setting,
as Debezium: Flink's job does not stop on it) and the rows again, inserts, updates (to and
from NULL, of the key), deletes. The changelog Flink builds equals the source table.

PyFlink runs in its own venv (scripts/devstack/flink.py), the job as a subprocess
(tests/support/flink_sql.py)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import struct
import subprocess
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from devstack.flink import flink_jars, pyflink_python
from devstack.stack import cache_dir
from pyspark.sql import SparkSession

from spark_jobs.events import debezium
from spark_jobs.runtime.config import MergeConfig
from spark_jobs.runtime.query import run_merge
from spark_jobs.verify.compare import compare, lake_rows, pg_rows
from tests.support.producer import ProducerRun

pytestmark = pytest.mark.e2e

JOB = Path(__file__).resolve().parents[1] / "support" / "flink_sql.py"
SOURCE_DDL = """
CREATE TABLE flinked (
  id int PRIMARY KEY, i2 smallint, i8 bigint, f8 float8, f4 real, b bool, n numeric(10, 2),
  txt text, vc varchar(20), d date, tm time, ts timestamp, ts3 timestamp(3), tstz timestamptz,
  u uuid, j jsonb, bts bytea);
ALTER TABLE flinked REPLICA IDENTITY FULL;
INSERT INTO flinked VALUES
  (1, 32767, 9223372036854775807, 1.5, -0.25, true, 99999999.99, 'é ☃', 'v', '2024-02-29',
   '23:59:59.999999', '2024-02-29 12:34:56.123456', '2024-02-29 12:34:56.789',
   '2024-01-01 12:00:00.5+05:30', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2]}',
   '\\x00ff'),
  (2, -32768, -9223372036854775808, -1e300, 3.4e38, false, -99999999.99, '', '', '0001-01-01',
   '00:00:00', '0001-01-01 00:00:00', '9999-12-31 23:59:59.999', '1970-01-01 00:00:00+00',
   '00000000-0000-0000-0000-000000000000', '[]', ''),
  (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   NULL);
"""
CHANGES = """
CREATE TEMP TABLE kept AS SELECT * FROM flinked;
TRUNCATE flinked;
INSERT INTO flinked SELECT * FROM kept;
INSERT INTO flinked (id, txt, ts, tstz) VALUES (4, 'four', '2000-01-01', '2000-01-01 00:00+00');
BEGIN;
UPDATE flinked SET txt = 'x', n = NULL WHERE id = 1;
UPDATE flinked SET txt = 'y', n = 0.01 WHERE id = 1;
COMMIT;
UPDATE flinked SET txt = 'from null', tstz = '2030-06-30 23:59:59.999999-08' WHERE id = 3;
UPDATE flinked SET id = 5 WHERE id = 4;
INSERT INTO flinked (id, txt) VALUES (6, 'gone');
DELETE FROM flinked WHERE id = 6;
UPDATE flinked SET b = NULL, vc = NULL WHERE id = 2;
"""
COLUMNS = ("id INT, i2 SMALLINT, i8 BIGINT, f8 DOUBLE, f4 FLOAT, b BOOLEAN, n DECIMAL(10, 2), "
           "txt STRING, vc STRING, d DATE, tm BIGINT, ts BIGINT, ts3 TIMESTAMP(3), "
           "tstz STRING, u STRING, j STRING, bts BYTES")


def _flink_rows(topic: str, bootstrap: str, registry_url: str) -> list[list[Any]]:
    ddl = (f"CREATE TABLE flinked ({COLUMNS}) WITH ("
           "'connector' = 'kafka', "
           f"'topic' = '{topic}', "
           f"'properties.bootstrap.servers' = '{bootstrap}', "
           "'properties.group.id' = 'flink-test', "
           "'scan.startup.mode' = 'earliest-offset', "
           "'scan.bounded.mode' = 'latest-offset', "
           "'format' = 'debezium-avro-confluent', "
           f"'debezium-avro-confluent.url' = '{registry_url}')")
    spec = {"jars": [str(j) for j in flink_jars(cache_dir())], "ddl": ddl,
            # ts3 as Flink prints it: PyFlink's datetime of a TIMESTAMP(3) goes through a float
            "query": "SELECT id, i2, i8, f8, f4, b, n, txt, vc, d, tm, ts, CAST(ts3 AS STRING),"
                     " tstz, u, j, bts FROM flinked", "key": 0}
    # -I: PyFlink's venv alone (not this project's PYTHONPATH, nor tests/support's avro.py)
    done = subprocess.run([str(pyflink_python(cache_dir())), "-I", str(JOB), json.dumps(spec)],
                          capture_output=True, text=True, timeout=300)
    causes = [ln for ln in done.stderr.splitlines() if "Exception" in ln or "Caused by" in ln]
    assert done.returncode == 0, "\n".join(causes[:12])[:4000]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]


def _plain(value: Any) -> Any:
    """A PostgreSQL value as tests/support/flink_sql.py prints Flink's."""
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, float):
        return repr(value)
    return value


def _real(text: str) -> str:
    return repr(struct.unpack("f", struct.pack("f", float(text)))[0])


def _expected(dsn: str) -> list[list[Any]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        rows = conn.execute(
            "SELECT id, i2, i8, f8, f4::float8, b, n, txt, vc, d,"
            " (extract(epoch FROM tm) * 1000000)::bigint,"
            " (extract(epoch FROM ts) * 1000000)::bigint,"
            " to_char(ts3, 'YYYY-MM-DD HH24:MI:SS.MS'), tstz, u::text, j::text, bts"
            " FROM flinked ORDER BY id").fetchall()
    out = [[_plain(v) for v in row] for row in rows]
    for row in out:
        row[4] = None if row[4] is None else _real(row[4])
    return out


def _merge_equals_source(spark: SparkSession, dsn: str, kafka: Any, registry: Any,
                         prefix: str, target: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The merge job's Delta table of the topic equals PostgreSQL's table, and the job says in
    one line that the topic's truncates are not written."""
    with caplog.at_level(logging.WARNING, logger=debezium.__name__):
        stats = run_merge(spark, MergeConfig(
            bootstrap_servers=kafka.bootstrap, schema_registry_url=registry.url,
            target=str(target), topic_prefix=prefix, trigger="available-now"))
    assert stats.dead_letters == 0 and not stats.failed_tables, stats.failed_tables
    warned = [r.getMessage() for r in caplog.records if r.name == debezium.__name__]
    assert warned == [f"{prefix}.public.flinked: written with --value-format debezium without "
                      "truncates (--truncate-records none): a TRUNCATE on the source is not "
                      "applied to the lake; write them with --truncate-records every-partition"]
    result = compare("flinked", pg_rows(dsn, "public", "flinked"),
                     lake_rows(spark, str(target / "public" / "flinked"), ["id"]))
    assert result.equal and result.lake_count == 4, result.differences


def test_flink_sql_reads_debezium_format_topics(pg15: Any, kafka: Any, registry: Any,
                                                spark: SparkSession, tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    with psycopg.connect(pg15.dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS flinked, other")
        conn.execute(SOURCE_DDL)
    producer = ProducerRun(pg15.dsn, kafka.bootstrap, registry.url, "public.flinked",
                           extra=["--value-format", "debezium"])
    pyflink_python(cache_dir())  # made before the clock starts (once per machine)
    producer.start(tmp_path)
    try:
        with psycopg.connect(pg15.dsn, autocommit=True) as conn:
            conn.execute(CHANGES)
        producer.wait_caught_up()  # every change is in Kafka before Flink reads to the end
        # The merge job over the same topic, in a thread while Flink's job (its own JVM) runs:
        # the two overlap, neither reads as the other's consumer group.
        with ThreadPoolExecutor(1) as pool:
            merged = pool.submit(_merge_equals_source, spark, pg15.dsn, kafka, registry,
                                 producer.prefix, tmp_path / "lake", caplog)
            got = _flink_rows(f"{producer.prefix}.public.flinked", kafka.bootstrap,
                              registry.url)
    finally:
        producer.stop()
        producer.drop()
    # ZonedTimestamp: the same instant as PostgreSQL's timestamptz, at UTC; real: the same
    # float32 (Flink prints its shortest form, PostgreSQL's float8 cast its widened value)
    for row in got:
        row[4] = None if row[4] is None else _real(row[4])
        if row[13] is not None:
            assert row[13].endswith("Z"), row[13]
            row[13] = dt.datetime.fromisoformat(row[13]).isoformat()
    # the TRUNCATE is not in the topic (Debezium's default): Flink's job does not stop on it,
    # and the rows written again after it are the same rows
    assert got == _expected(pg15.dsn)
    assert [row[0] for row in got] == [1, 2, 3, 5]
    merged.result()

"""The lake equals PostgreSQL through any column name and any DDL (issue 25): PostgreSQL 18 →
`pgcdc run` → Kafka → `pgcdc merge` (in-process), with a DDL-heavy workload:

* column names the job's own would have clashed with (`key`, `value`, `topic`, `partition`,
  `offset`, `timestamp`, `timestampType`, `headers`, `_cdc_op`, `_kafka_partition`);
* `ALTER COLUMN ... TYPE` text → bigint, `ADD COLUMN ... DEFAULT`, `DROP EXPRESSION` of a
  generated column, `ALTER TYPE ... RENAME VALUE` (each re-synced by the producer);
* a primary key dropped (rows inserted without one), then added on other columns;
* a table dropped and created again with another key and other column types, once after its
  rows were merged and once in the transaction that changed it last;
* `-0` in a float8 key;
* drops (issue 46): a table dropped, and one dropped and created again empty, after their rows
  were merged: the lake tables end empty (the drop event), their history closed.

Every Delta table ends equal to its PostgreSQL table, no event is dead-lettered, and a
`--replay` rebuild is equal too; history tables of the re-created tables start again."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from spark_jobs.history.sink import history_path
from spark_jobs.runtime.config import MergeConfig
from spark_jobs.runtime.job import MergeStats
from spark_jobs.runtime.query import run_merge
from spark_jobs.verify.compare import compare, lake_names, lake_rows, pg_rows, primary_key
from tests.support.producer import ProducerRun

pytestmark = pytest.mark.e2e
SCHEMA = "ddl"
ODD = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
       "_cdc_op", "_kafka_partition"]
TABLES = ["odd", "retype", "keys", "defaults", "floats", "t", "u", "empty"]
GONE = "gone"  # dropped: no PostgreSQL table to compare with, its lake table ends empty

CREATE = f"""
CREATE SCHEMA {SCHEMA};
CREATE TYPE {SCHEMA}.mood AS ENUM ('sad', 'ok');
CREATE TABLE {SCHEMA}.odd ({", ".join(f'"{c}" text' if c == "key" else f'"{c}" int'
                                      for c in ODD)}, PRIMARY KEY ("key"));
CREATE TABLE {SCHEMA}.retype (id int PRIMARY KEY, v text);
CREATE TABLE {SCHEMA}.keys (a int, b int, v text, PRIMARY KEY (a));
CREATE TABLE {SCHEMA}.defaults (id int PRIMARY KEY, m {SCHEMA}.mood,
    g int GENERATED ALWAYS AS (id * 2) STORED);
CREATE TABLE {SCHEMA}.floats (k float8 PRIMARY KEY, v text);
CREATE TABLE {SCHEMA}.t (id int PRIMARY KEY, v text);
CREATE TABLE {SCHEMA}.u (id int PRIMARY KEY, v text);
CREATE TABLE {SCHEMA}.{GONE} (id int PRIMARY KEY, v text);
CREATE TABLE {SCHEMA}.empty (id int PRIMARY KEY, v text);
INSERT INTO {SCHEMA}.{GONE} SELECT i, 'gone' || i FROM generate_series(1, 3) i;
INSERT INTO {SCHEMA}.empty SELECT i, 'old' || i FROM generate_series(1, 2) i;
INSERT INTO {SCHEMA}.odd VALUES ('a', {", ".join(str(i) for i in range(1, len(ODD)))});
INSERT INTO {SCHEMA}.retype SELECT i, i::text FROM generate_series(1, 3) i;
INSERT INTO {SCHEMA}.keys VALUES (1, 1, 'one');
INSERT INTO {SCHEMA}.defaults (id, m) VALUES (1, 'sad'), (2, 'ok');
INSERT INTO {SCHEMA}.floats VALUES (2.5, 'y');
INSERT INTO {SCHEMA}.t SELECT i, 'old' || i FROM generate_series(1, 4) i;
INSERT INTO {SCHEMA}.u SELECT i, 'old' || i FROM generate_series(1, 3) i;
"""

DDL = [
    f"UPDATE {SCHEMA}.odd SET \"value\" = 42, \"_cdc_op\" = 7 WHERE \"key\" = 'a'",
    f"INSERT INTO {SCHEMA}.odd (\"key\", \"offset\") VALUES ('b', 2)",
    f"ALTER TABLE {SCHEMA}.retype ALTER COLUMN v TYPE bigint USING v::bigint * 10",
    f"UPDATE {SCHEMA}.retype SET v = v + 1 WHERE id = 1",
    f"ALTER TABLE {SCHEMA}.keys DROP CONSTRAINT keys_pkey",
    f"INSERT INTO {SCHEMA}.keys VALUES (2, 2, 'x'), (2, 3, 'y')",  # both stay: no key
    f"ALTER TABLE {SCHEMA}.keys ADD PRIMARY KEY (a, b)",
    f"INSERT INTO {SCHEMA}.keys VALUES (1, 2, 'one-two')",
    f"UPDATE {SCHEMA}.keys SET v = 'y2' WHERE a = 2 AND b = 3",
    f"ALTER TABLE {SCHEMA}.defaults ADD COLUMN c3 text DEFAULT 'dflt'",
    f"ALTER TABLE {SCHEMA}.defaults ALTER COLUMN g DROP EXPRESSION",
    f"ALTER TYPE {SCHEMA}.mood RENAME VALUE 'sad' TO 'blue'",
    f"INSERT INTO {SCHEMA}.floats VALUES ('-0', 'negative zero'), (1.5, 'x')",
    # t: the old table's rows were merged before; the new one, other key and types, alone.
    f"DROP TABLE {SCHEMA}.t",
    f"CREATE TABLE {SCHEMA}.t (k text PRIMARY KEY, v bigint, w text)",
    # Drops: the lake learns them from the producer's drop events (the old t's too, which
    # must not empty the new t: its rows may come before the drop event).
    f"DROP TABLE {SCHEMA}.{GONE}",
    f"DROP TABLE {SCHEMA}.empty",
    f"CREATE TABLE {SCHEMA}.empty (id int PRIMARY KEY, v text)",
]
# u: a change of the old table, then the new one, in one transaction (its rows arrive by the
# snapshot pgcdc takes of a table joining the publication).
RECREATE_U = [
    f"UPDATE {SCHEMA}.u SET v = 'changed' WHERE id = 1",
    f"DROP TABLE {SCHEMA}.u",
    f"CREATE TABLE {SCHEMA}.u (k text PRIMARY KEY, n numeric(6,2))",
    f"INSERT INTO {SCHEMA}.u VALUES ('x', 1.50), ('y', NULL)",
]


def _merge(spark: SparkSession, kafka: Any, registry: Any, prefix: str, target: Path,
           **kw: Any) -> MergeStats:
    stats = run_merge(spark, MergeConfig(
        bootstrap_servers=kafka.bootstrap, schema_registry_url=registry.url,
        target=str(target), topic_prefix=prefix, trigger="available-now",
        history=(f"{SCHEMA}.t", f"{SCHEMA}.u", f"{SCHEMA}.{GONE}", f"{SCHEMA}.empty"), **kw))
    assert stats.dead_letters == 0 and not stats.failed_tables, stats.failed_tables
    return stats


def _differences(spark: SparkSession, dsn: str, target: Path) -> list[str]:
    out = []
    with psycopg.connect(dsn) as conn:
        keys = {t: primary_key(conn, SCHEMA, t) for t in TABLES}
    for table in TABLES:
        result = compare(table, pg_rows(dsn, SCHEMA, table),
                         lake_rows(spark, str(target / SCHEMA / table), keys[table]))
        out += result.differences
    gone = spark.read.format("delta").load(str(target / SCHEMA / GONE)).count()
    return out + ([f"{GONE}: {gone} row(s) in the lake after its DROP"] if gone else [])


def _history(target: Path, table: str) -> list[tuple[Any, ...]]:
    """The history's versions, position and values (the commit times left out)."""
    rows = DeltaTable(history_path(str(target), f"{SCHEMA}/{table}")).to_pyarrow_table()
    names = [c for c in rows.column_names if c not in ("__valid_from", "__valid_to")]
    return sorted(tuple(str(r[c]) for c in names) for r in rows.select(names).to_pylist())


def _published(conn: psycopg.Connection[Any], producer: ProducerRun) -> int:
    row = conn.execute("SELECT count(*) FROM pg_publication_tables WHERE pubname = %s",
                       (f"pub_{producer.tag}",)).fetchone()
    return int(row[0]) if row else 0


def test_ddl_heavy_workload_ends_with_equal_tables(
        spark: SparkSession, pg18: Any, kafka: Any, registry: Any, tmp_path: Path,
        producer_runs: list[ProducerRun]) -> None:
    with psycopg.connect(pg18.dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        conn.execute(CREATE)
    producer = ProducerRun(pg18.dsn, kafka.bootstrap, registry.url, f"{SCHEMA}.*")
    producer_runs.append(producer)
    producer.start(tmp_path, wait=False)
    producer.wait_caught_up()
    target = tmp_path / "lake"
    first = _merge(spark, kafka, registry, producer.prefix, target)
    # New tables are created by the fast path (delta-rs) too, labelled with their relation id.
    assert first.fast_tables > 0
    for table in TABLES:
        assert "pgcdc.relationId" in DeltaTable(
            str(target / SCHEMA / table)).metadata().configuration, table

    with psycopg.connect(pg18.dsn, autocommit=True) as conn:
        for statement in DDL:
            conn.execute(statement)
        with conn.transaction():
            for statement in RECREATE_U:
                conn.execute(statement)
        deadline = time.monotonic() + 60  # both new tables join the publication
        while _published(conn, producer) < len(TABLES):
            assert time.monotonic() < deadline, producer.output()
            time.sleep(0.3)
        conn.execute(f"INSERT INTO {SCHEMA}.t VALUES ('a', 10, 'w'), ('b', NULL, NULL)")
        conn.execute(f"UPDATE {SCHEMA}.defaults SET m = 'ok' WHERE id = 1")
    producer.wait_caught_up()

    differences: list[str] = ["not merged yet"]
    deadline = time.monotonic() + 300  # a loaded machine: a merge can take a minute
    while differences and time.monotonic() < deadline:  # until the re-syncs are in
        _merge(spark, kafka, registry, producer.prefix, target)
        differences = _differences(spark, pg18.dsn, target)
    assert not differences, differences
    for table, columns in (("t", ["k", "v", "w"]), ("u", ["k", "n"])):
        lake = spark.read.format("delta").load(str(target / SCHEMA / table))
        assert [c for c in lake.columns if not c.startswith("_cdc_")] == columns
    odd = spark.read.format("delta").load(str(target / SCHEMA / "odd")).columns
    named = lake_names(ODD, odd)  # each its own column, out of the job's names' way
    assert set(named) == set(ODD) and len(set(named.values())) == len(ODD), odd
    zero = [r["k"] for r in spark.read.format("delta").load(str(target / SCHEMA / "floats"))
            .collect() if r["k"] == 0]
    assert len(zero) == 1 and math.copysign(1, zero[0]) < 0  # -0 stays -0

    rebuilt = tmp_path / "rebuilt"
    _merge(spark, kafka, registry, producer.prefix, rebuilt, replay=True)
    assert not _differences(spark, pg18.dsn, rebuilt)
    # The history of a re-created table starts again with it: its current versions are the
    # table, and streaming and the rebuild agree.
    for table in ("t", "u", "empty"):
        current = [v for v in _history(target, table) if "True" in v]
        assert len(current) == len(pg_rows(pg18.dsn, SCHEMA, table).rows), table
        assert _history(target, table) == _history(rebuilt, table), table
    # The dropped table's history keeps its versions, every one closed at the drop.
    history = _history(target, GONE)
    assert len(history) == 3 and not [v for v in history if "True" in v], history

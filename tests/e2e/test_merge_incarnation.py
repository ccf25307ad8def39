"""A table dropped and created again under the same name (issue 25, part 5): the lake table
holds the new table only, with its columns, whatever batches the two tables' events arrive in,
streaming or rebuilt by `--replay`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from spark_jobs.config import MergeConfig
from spark_jobs.history_sink import history_path
from spark_jobs.job import MergeStats, run_merge
from spark_jobs.verify import compare, lake_rows, pg_rows
from tests.support.acceptance import ProducerRun

pytestmark = pytest.mark.e2e
SCHEMA = "inc"


def _merge(spark: SparkSession, kafka: Any, registry: Any, prefix: str, target: Path,
           **kw: Any) -> MergeStats:
    stats = run_merge(spark, MergeConfig(
        bootstrap_servers=kafka.bootstrap, schema_registry_url=registry.url,
        target=str(target), topic_prefix=prefix, trigger="available-now",
        history=(f"{SCHEMA}.*",), **kw))
    assert stats.dead_letters == 0 and not stats.failed_tables, stats.failed_tables
    return stats


def _differences(spark: SparkSession, dsn: str, target: Path) -> list[str]:
    out = []
    for table, key in (("t", ["id"]), ("u", ["k"])):
        result = compare(table, pg_rows(dsn, SCHEMA, table),
                         lake_rows(spark, str(target / SCHEMA / table), key))
        out += result.differences
    return out


def _history(target: Path, table: str) -> list[tuple[Any, ...]]:
    """The history's versions, position and values (the commit times left out)."""
    rows = DeltaTable(history_path(str(target), f"{SCHEMA}/{table}")).to_pyarrow_table()
    names = [c for c in rows.column_names if c not in ("__valid_from", "__valid_to")]
    return sorted(tuple(str(r[c]) for c in names) for r in rows.select(names).to_pylist())


def test_a_table_created_again_replaces_the_lake_table(
        spark: SparkSession, pg18: Any, kafka: Any, registry: Any, tmp_path: Path) -> None:
    with psycopg.connect(pg18.dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        conn.execute(f"CREATE SCHEMA {SCHEMA}")
        conn.execute(f"CREATE TABLE {SCHEMA}.t (id int PRIMARY KEY, v text)")
        conn.execute(f"CREATE TABLE {SCHEMA}.u (id int PRIMARY KEY, v text)")
        conn.execute(f"INSERT INTO {SCHEMA}.t SELECT i, 'old' || i FROM generate_series(1, 4) i")
        conn.execute(f"INSERT INTO {SCHEMA}.u SELECT i, 'old' || i FROM generate_series(1, 3) i")
    producer = ProducerRun(pg18.dsn, kafka.bootstrap, registry.url, tmp_path,
                           tables=f"{SCHEMA}.*")
    try:
        producer.start()
        producer.wait_caught_up()
        target = tmp_path / "lake"
        first = _merge(spark, kafka, registry, producer.prefix, target)
        assert len(lake_rows(spark, str(target / SCHEMA / "t"), ["id"]).rows) == 4
        # New tables are created by the fast path (delta-rs), labelled with their relation id.
        assert first.fast_tables == 2
        for table in ("t", "u"):
            assert "pgcdc.relationId" in DeltaTable(
                str(target / SCHEMA / table)).metadata().configuration

        with psycopg.connect(pg18.dsn, autocommit=True) as conn:
            # t: the old table's events all merged before; the new one's come alone.
            conn.execute(f"DROP TABLE {SCHEMA}.t")
            conn.execute(f"CREATE TABLE {SCHEMA}.t (id bigint PRIMARY KEY, v int, w text)")
            # u: a change of the old table, then the new one, in one transaction (its rows
            # arrive by the snapshot pgcdc takes of a table joining the publication).
            with conn.transaction():
                conn.execute(f"UPDATE {SCHEMA}.u SET v = 'changed' WHERE id = 1")
                conn.execute(f"DROP TABLE {SCHEMA}.u")
                conn.execute(f"CREATE TABLE {SCHEMA}.u (k text PRIMARY KEY, n numeric(6,2))")
                conn.execute(f"INSERT INTO {SCHEMA}.u VALUES ('x', 1.50), ('y', NULL)")
            deadline = time.monotonic() + 60
            while conn.execute("SELECT count(*) FROM pg_publication_tables WHERE pubname = %s",
                               (f"pub_{producer.tag}",)).fetchone() != (2,):
                assert time.monotonic() < deadline, producer.output()
                time.sleep(0.3)
            conn.execute(f"INSERT INTO {SCHEMA}.t VALUES (1, 10, 'a'), (9, 90, NULL)")
        producer.wait_caught_up()

        differences: list[str] = ["not merged yet"]
        deadline = time.monotonic() + 120
        while differences and time.monotonic() < deadline:  # until u's snapshot is in
            _merge(spark, kafka, registry, producer.prefix, target)
            differences = _differences(spark, pg18.dsn, target)
        assert not differences, differences
        for table, columns in (("t", ["id", "v", "w"]), ("u", ["k", "n"])):
            lake = spark.read.format("delta").load(str(target / SCHEMA / table))
            assert [c for c in lake.columns if not c.startswith("_cdc_")] == columns

        rebuilt = tmp_path / "rebuilt"
        _merge(spark, kafka, registry, producer.prefix, rebuilt, replay=True)
        assert not _differences(spark, pg18.dsn, rebuilt)
        # The history starts again with the new table too: its current versions are the
        # table, and streaming and the rebuild agree.
        for table in ("t", "u"):
            current = [v for v in _history(target, table) if "True" in v]
            assert len(current) == len(pg_rows(pg18.dsn, SCHEMA, table).rows), table
            assert _history(target, table) == _history(rebuilt, table), table
    finally:
        producer.drop()

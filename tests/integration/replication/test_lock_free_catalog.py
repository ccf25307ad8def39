"""connector/replication/lock_free.py against real PostgreSQL 15 and 18: the published tables
read from the catalogs are exactly ``pg_publication_tables``'s, for every kind of publication,
and reading them waits on no lock a migration holds (the view does, on 16+)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from connector.replication import ReplicationAdmin
from connector.replication.features import ServerFeatures
from connector.replication.lock_free import (
    is_lock_timeout,
    lock_wait_bounded,
    published_tables_sql,
)
from connector.tools.status import _published_columns
from tests.support.databases import empty_database

pytestmark = pytest.mark.integration

_SCHEMA = """
CREATE SCHEMA s;
CREATE TABLE plain (id int PRIMARY KEY, v text, w int);
CREATE TABLE listed (id int PRIMARY KEY, v text, w int);
CREATE TABLE filtered (id int PRIMARY KEY, v int);
CREATE TABLE dropped_col (id int PRIMARY KEY, gone int, v text);
ALTER TABLE dropped_col DROP COLUMN gone;
CREATE TABLE gen (id int PRIMARY KEY, v int, g int GENERATED ALWAYS AS (v * 2) STORED);
CREATE UNLOGGED TABLE unlogged (id int PRIMARY KEY);
CREATE TABLE s.in_schema (id int PRIMARY KEY, v text);
CREATE TABLE s.also_listed (id int PRIMARY KEY, v text);
CREATE TABLE root (id int, k int, PRIMARY KEY (id, k)) PARTITION BY LIST (k);
CREATE TABLE root_a PARTITION OF root FOR VALUES IN (1);
CREATE TABLE root_b PARTITION OF root FOR VALUES IN (2, 3) PARTITION BY LIST (k);
CREATE TABLE root_b2 PARTITION OF root_b FOR VALUES IN (2);
CREATE TABLE s.root_b3 PARTITION OF root_b FOR VALUES IN (3);
CREATE TABLE lone_root (id int PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE lone_part PARTITION OF lone_root FOR VALUES FROM (0) TO (10);
CREATE TABLE inherits_parent (id int PRIMARY KEY);
CREATE TABLE inherits_child () INHERITS (inherits_parent);
"""

_PUBLICATIONS = [
    "FOR TABLE plain, filtered WHERE (v > 0), dropped_col, gen",
    "FOR TABLE listed (id, v), gen (id, v)",
    "FOR TABLE root, lone_part, inherits_parent",
    "FOR TABLE root, lone_part WITH (publish_via_partition_root = true)",
    "FOR TABLE root_b, root WITH (publish_via_partition_root = true)",
    "FOR TABLE root_b2, lone_root",
    "FOR ALL TABLES",
    "FOR ALL TABLES WITH (publish_via_partition_root = true)",
    "FOR TABLES IN SCHEMA s",
    "FOR TABLES IN SCHEMA s WITH (publish_via_partition_root = true)",
    "FOR TABLES IN SCHEMA s, TABLE plain, s.also_listed",
    "FOR TABLE root_b WITH (publish = 'insert')",
]


@pytest.fixture
def database(postgres: Any) -> Iterator[tuple[str, ServerFeatures]]:
    with empty_database(postgres.dsn) as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            features = ServerFeatures(conn.info.server_version)
            conn.execute(_SCHEMA)  # type: ignore[arg-type]
            for i, target in enumerate(_PUBLICATIONS):
                conn.execute(f"CREATE PUBLICATION p{i} {target}")  # type: ignore[arg-type]
            if features.publishes_generated_columns:
                conn.execute("CREATE PUBLICATION pgen FOR TABLE gen, plain"
                             " WITH (publish_generated_columns = stored)")
                conn.execute("CREATE PUBLICATION pgenlist FOR TABLE gen (id, g)")
        yield dsn, features


def _rows(conn: psycopg.Connection[Any], source: str) -> list[tuple[Any, ...]]:
    return conn.execute(  # type: ignore[call-overload, no-any-return]
        f"SELECT pubname::text, schemaname::text, tablename::text, attnames::text[],"
        f" rowfilter FROM {source} p ORDER BY 1, 2, 3").fetchall()


def test_published_tables_are_the_views(database) -> None:
    dsn, features = database
    with psycopg.connect(dsn, autocommit=True) as conn:
        view = _rows(conn, "pg_catalog.pg_publication_tables")
        assert len(view) > 40
        assert _rows(conn, published_tables_sql(features)) == view
        relids = conn.execute(
            f"SELECT count(*) FROM {published_tables_sql(features)} p"
            " JOIN pg_class c ON c.oid = p.relid AND c.relname = p.tablename").fetchone()
        assert relids == (len(view),)


def test_reading_them_waits_on_no_lock(database) -> None:
    """ACCESS EXCLUSIVE on a published table (a migration's ALTER TABLE), on a partition, and
    a table created in a transaction still open: the names, relation ids and column lists come
    at once; the view waits on 16+ (it opens each table)."""
    dsn, features = database
    source = published_tables_sql(features)
    with psycopg.connect(dsn) as migration, psycopg.connect(dsn, autocommit=True) as conn:
        plain = _oid(conn, "plain")
        migration.execute("ALTER TABLE plain ADD COLUMN added int")
        migration.execute("LOCK TABLE root_a, s.in_schema, filtered IN ACCESS EXCLUSIVE MODE")
        migration.execute("CREATE TABLE fresh (id int PRIMARY KEY)")
        with lock_wait_bounded(conn):
            rows = conn.execute(f"SELECT pubname::text, tablename::text, relid::int8,"
                                f" attnames::text[] FROM {source} p").fetchall()
            assert ("p0", "plain", plain, ["id", "v", "w"]) in rows
            assert {r[1] for r in rows if r[0] == "p6"} >= {"plain", "root_a", "in_schema"}
        # `pgcdc status`: the tables at once; the row filters' text (PostgreSQL opens the
        # table to print it) left out, said in one line
        admin = ReplicationAdmin(conn)
        assert _published_columns(admin, "p0") == {}
        with lock_wait_bounded(conn):
            assert ("public", "filtered", "d", True) in admin.published_tables("p0")
            # the table watcher's partitions (pg_partition_tree would lock each)
            assert admin.partition_leaves("p2") == {("public", "root"): frozenset(
                {("public", "root_a"), ("public", "root_b2"), ("s", "root_b3")})}
            try:
                conn.execute("SELECT attnames FROM pg_catalog.pg_publication_tables").fetchall()
            except psycopg.Error as exc:
                assert is_lock_timeout(exc) and features.major >= 16, exc
            else:
                assert features.major < 16
        migration.rollback()


def _oid(conn: psycopg.Connection[Any], table: str) -> int:
    row = conn.execute("SELECT oid::int8 FROM pg_class WHERE relname = %s", (table,)).fetchone()
    assert row is not None
    return int(row[0])

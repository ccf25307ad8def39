"""The guard connection's hold on the published tables while the initial snapshot reads them:
ACCESS SHARE locks from before the first read to the end, and a check that no table changed
between the consistent point and its lock.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
from psycopg import sql

from connector.errors import SourceError, first_line, is_privilege_error
from connector.replication.privileges import lacking

from ..tables import SnapshotTable, query_catalog

__all__ = ["check_unchanged", "lock_tables"]

Conn = psycopg.Connection[tuple]  # type: ignore[type-arg]

# What must not change between the consistent point and the moment the table is locked.
_SHAPE_QUERY = """\
SELECT c.relfilenode::int8, array_agg(a.attname::text || ':' || a.atttypid::text || ':' ||
       a.atttypmod::text ORDER BY a.attnum)
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.oid = %s
GROUP BY c.relfilenode"""


def lock_tables(conn: Conn, tables: Sequence[SnapshotTable], timeout_s: float) -> None:
    """ACCESS SHARE locks on every table (partitions included) until `conn`'s transaction ends,
    so no DDL, TRUNCATE or table rewrite runs while the snapshot reads them (what pg_dump does)."""
    if not tables:
        return
    names = sql.SQL(", ").join(sql.Identifier(t.relation.namespace, t.relation.name)
                               for t in tables)
    try:
        conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(
            sql.Literal(f"{int(timeout_s * 1000)}ms")))
        conn.execute(sql.SQL("LOCK TABLE {} IN ACCESS SHARE MODE").format(names))
    except psycopg.Error as exc:
        if is_privilege_error(exc):  # LOCK ... ACCESS SHARE needs SELECT, as the read does
            raise lacking(exc, conn.info.user) from None
        raise SourceError(f"cannot lock the published tables for the snapshot: "
                          f"{first_line(exc)} (another session holds a conflicting lock, "
                          "e.g. a running ALTER TABLE)") from None


def check_unchanged(snapshot_conn: Conn, current_conn: Conn,
                    tables: Sequence[SnapshotTable]) -> None:
    """Fail if a table was altered, truncated or rewritten between the consistent point and its
    lock: its data or columns as of the snapshot would not be what COPY reads now."""
    for table in tables:
        for leaf in table.leaves:
            then = query_catalog(snapshot_conn, _SHAPE_QUERY, (leaf.oid,))
            now = query_catalog(current_conn, _SHAPE_QUERY, (leaf.oid,))
            if then != now:
                raise SourceError(
                    f"table {leaf.schema}.{leaf.name} was altered, truncated or rewritten while "
                    "the snapshot started; run pgcdc again to take a new snapshot")


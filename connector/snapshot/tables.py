"""The published tables as the snapshot sees them, each with the Relation pgoutput would send.

Everything here runs on a connection that imported the exported snapshot, so the catalog rows
read are the ones valid at the slot's consistent point (SQL queries on catalog tables use the
transaction's snapshot). The Relation is built exactly as pgoutput's `logicalrep_write_rel`
builds it, so the snapshot's events and the stream's share one Avro schema (one registry id):

* relation id = the table's OID, namespace = its schema, name = its name, replica identity =
  ``pg_class.relreplident``;
* columns in ``attnum`` order, dropped ones left out, and only the published ones: the
  publication's column list (``pg_publication_tables.attnames``, PostgreSQL 15+); generated
  columns are never sent before PostgreSQL 18 (18 lists them in ``attnames`` when published);
* key flag: every column for REPLICA IDENTITY FULL, the replica identity index's columns for
  USING INDEX, the primary key's for DEFAULT, none for NOTHING (or a missing index);
* type OID = ``atttypid`` (a domain's own OID), type modifier = ``atttypmod``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import psycopg
from psycopg import sql

from connector.errors import SourceError, first_line, is_privilege_error
from connector.pgoutput.messages import COLUMN_KEY, Relation, RelationColumn
from connector.replication.features import ServerFeatures
from connector.replication.privileges import lacking

__all__ = ["SnapshotTable", "build_relation", "check_unchanged", "lock_tables",
           "published_tables"]

Conn = psycopg.Connection[tuple]  # type: ignore[type-arg]

_TABLES_QUERY = """\
SELECT c.oid::int8, n.nspname::text, c.relname::text, c.relkind::text, c.relreplident::text,
       {attnames}, {rowfilter}, c.reltuples::float8
FROM pg_catalog.pg_publication_tables p
JOIN pg_catalog.pg_namespace n ON n.nspname = p.schemaname
JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename
WHERE p.pubname = %s
ORDER BY 2, 3"""

_COLUMNS_QUERY = """\
SELECT a.attname::text, a.atttypid::int8, a.atttypmod::int4,
       c.relreplident = 'f' OR coalesce(a.attnum = ANY (ri.indkey::int2[]), false),
       a.attgenerated <> ''
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
LEFT JOIN pg_catalog.pg_index ri ON ri.indrelid = c.oid
     AND ((c.relreplident = 'd' AND ri.indisprimary)
          OR (c.relreplident = 'i' AND ri.indisreplident))
WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum"""

# The leaves a table's rows live in: itself, or a partitioned table's leaf partitions.
_LEAVES_QUERY = """\
SELECT c.oid::int8, n.nspname::text, c.relname::text,
       pg_catalog.pg_relation_size(c.oid)::int8, c.reltuples::float8
FROM pg_catalog.pg_partition_tree(%s::oid) t
JOIN pg_catalog.pg_class c ON c.oid = t.relid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE t.isleaf AND c.relkind = 'r'
ORDER BY t.level, 2, 3"""

# What must not change between the consistent point and the moment the table is locked.
_SHAPE_QUERY = """\
SELECT c.relfilenode::int8, array_agg(a.attname::text || ':' || a.atttypid::text || ':' ||
       a.atttypmod::text ORDER BY a.attnum)
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.oid = %s
GROUP BY c.relfilenode"""


@dataclass(frozen=True)
class Leaf:
    """A relation whose heap is read: the table itself or one of its leaf partitions."""

    oid: int
    schema: str
    name: str
    blocks: int  # heap size in blocks when planned
    reltuples: float


@dataclass(frozen=True)
class SnapshotTable:
    """One published table: what pgoutput would describe it as, and where its rows are."""

    relation: Relation
    relkind: str
    row_filter: str | None  # the publication's WHERE clause (PostgreSQL 15+)
    leaves: tuple[Leaf, ...]

    @property
    def name(self) -> str:
        return f"{self.relation.namespace}.{self.relation.name}"

    @property
    def estimated_rows(self) -> int | None:
        """pg_class.reltuples over its leaves; None when never vacuumed or analyzed."""
        counts = [leaf.reltuples for leaf in self.leaves]
        if not counts or any(c < 0 for c in counts):
            return None
        return int(sum(counts))


def build_relation(oid: int, schema: str, name: str, replica_identity: str,
                   columns: Sequence[tuple[str, int, int, bool, bool]],
                   published: Sequence[str] | None, features: ServerFeatures) -> Relation:
    """The Relation pgoutput sends for a table (pure; see the module docstring).

    `columns`: (name, type OID, typmod, in the replica identity, generated) in attnum order;
    `published`: the publication's ``attnames`` (None before PostgreSQL 15)."""
    wanted = None if published is None else set(published)
    out = []
    for col_name, type_oid, typmod, key, generated in columns:
        if generated and not features.publishes_generated_columns:
            continue  # pgoutput before 18 never sends generated columns
        if wanted is not None and col_name not in wanted:
            continue
        out.append(RelationColumn(COLUMN_KEY if key else 0, col_name, type_oid, typmod))
    return Relation(None, oid, schema, name, replica_identity, tuple(out))


def _query(conn: Conn, query: str | sql.Composed, params: Sequence[object]) -> list[tuple]:  # type: ignore[type-arg]
    try:
        return conn.execute(query, params).fetchall()
    except psycopg.Error as exc:
        raise SourceError(f"snapshot catalog query failed: {first_line(exc)}") from None


def published_tables(conn: Conn, publication: str, features: ServerFeatures) -> list[SnapshotTable]:
    """Every table of `publication`, as of the snapshot `conn`'s transaction imported."""
    modern = features.publication_column_lists
    query = _TABLES_QUERY.format(attnames="p.attnames::text[]" if modern else "NULL::text[]",
                                 rowfilter="p.rowfilter" if modern else "NULL::text")
    block_size = int(_query(conn, "SELECT current_setting('block_size')::int", ())[0][0])
    tables = []
    for oid, schema, name, relkind, ident, attnames, row_filter, reltuples in _query(
            conn, query, (publication,)):
        columns = _query(conn, _COLUMNS_QUERY, (oid,))
        relation = build_relation(oid, schema, name, ident, columns, attnames, features)
        if relkind == "p":
            leaves = tuple(Leaf(r[0], r[1], r[2], -(-r[3] // block_size), r[4])
                           for r in _query(conn, _LEAVES_QUERY, (oid,)))
        else:
            size = _query(conn, "SELECT pg_catalog.pg_relation_size(%s::oid)::int8", (oid,))
            leaves = (Leaf(oid, schema, name, -(-size[0][0] // block_size), reltuples),)
        tables.append(SnapshotTable(relation, relkind, row_filter, leaves))
    return tables


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
            then = _query(snapshot_conn, _SHAPE_QUERY, (leaf.oid,))
            now = _query(current_conn, _SHAPE_QUERY, (leaf.oid,))
            if then != now:
                raise SourceError(
                    f"table {leaf.schema}.{leaf.name} was altered, truncated or rewritten while "
                    "the snapshot started; run pgcdc again to take a new snapshot")

"""The published tables, each with the Relation pgoutput would send (both snapshots read them).

The initial snapshot reads them on a connection that imported the exported snapshot, so the
catalog rows read are the ones valid at the slot's consistent point (SQL queries on catalog
tables use the transaction's snapshot); the incremental snapshot looks up one table at a time,
as it is now. The Relation is built exactly as pgoutput's `logicalrep_write_rel`
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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import psycopg
from psycopg import sql

from connector.errors import SourceError, first_line
from connector.names import SIGNAL_TABLE, TableName
from connector.pgoutput.messages import COLUMN_KEY, Relation, RelationColumn
from connector.replication.features import ServerFeatures
from connector.replication.lock_free import is_lock_timeout, published_tables_sql

__all__ = ["Leaf", "RootRelations", "SnapshotTable", "build_relation", "published_table",
           "published_tables", "query_catalog"]

Conn = psycopg.Connection[tuple]  # type: ignore[type-arg]

_TABLES_QUERY = """\
SELECT c.oid::int8, n.nspname::text, c.relname::text, c.relkind::text, c.relreplident::text,
       {attnames}, {rowfilter}, c.reltuples::float8
FROM {published} p  -- pg_publication_tables without its locks (replication/lock_free.py)
JOIN pg_catalog.pg_class c ON c.oid = p.relid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE p.pubname = %s{only}
ORDER BY 2, 3"""
# `published_table`: only the tables among the (schema, table) pairs of two arrays.
_ONE_OF = """
  AND (p.schemaname::text, p.tablename::text) IN (SELECT * FROM unnest(%s::text[], %s::text[]))"""

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
    # Where an incremental snapshot reads the rows from, when not the table itself: one
    # partition of a table published through its root (`published_table`).
    read_from: TableName | None = None

    @property
    def source(self) -> TableName:
        """The table an incremental snapshot's chunks read (``FROM``)."""
        return self.read_from or self.table_name

    @property
    def table_name(self) -> TableName:
        return TableName(self.relation.namespace, self.relation.name)

    @property
    def name(self) -> str:
        """``schema.table``, for logs, metrics labels and messages."""
        return str(self.table_name)

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


def query_catalog(conn: Conn, query: str | sql.Composed, params: Sequence[object]
                  ) -> list[tuple]:  # type: ignore[type-arg]
    """The rows of a catalog query; a failure is a `SourceError` naming the snapshot."""
    try:
        return conn.execute(query, params).fetchall()
    except psycopg.Error as exc:
        if is_lock_timeout(exc):  # a table locked (lock_wait_bounded): the caller retries
            raise
        raise SourceError(f"snapshot catalog query failed: {first_line(exc)}") from None


def published_tables(conn: Conn, publication: str, features: ServerFeatures) -> list[SnapshotTable]:
    """Every table of `publication`, as of the snapshot `conn`'s transaction imported, but
    pgcdc's own signal table (a FOR ALL TABLES publication publishes it): its rows are not a
    user table's."""
    return [t for t in _tables(conn, publication, features) if t.table_name != SIGNAL_TABLE]


def published_table(conn: Conn, publication: str, features: ServerFeatures,
                    names: Sequence[TableName]) -> SnapshotTable | None:
    """The first of `names` (in schema, table order) that `publication` publishes, or None:
    one table's catalog rows, not every published table's.

    A partition of a table published through its root (publish_via_partition_root) is not
    published itself: it resolves to its published ancestor, its rows read from the partition
    alone (`SnapshotTable.read_from`) and described as the root, so they go to the root's topic
    under the root's schema, as the stream sends them (connector/replication/partitions.py)."""
    found = next(iter(_tables(conn, publication, features, names)), None)
    return found if found is not None else _through_root(conn, publication, features, names)


# A partition's ancestors, nearest first (pg_partition_ancestors lists the partition itself
# first).
_ANCESTORS_QUERY = """\
SELECT c.oid::int8, n.nspname::text, c.relname::text, an.nspname::text, ac.relname::text
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
CROSS JOIN LATERAL pg_catalog.pg_partition_ancestors(c.oid) WITH ORDINALITY AS a(relid, depth)
JOIN pg_catalog.pg_class ac ON ac.oid = a.relid
JOIN pg_catalog.pg_namespace an ON an.oid = ac.relnamespace
WHERE c.relispartition AND c.relkind = 'r' AND a.relid <> c.oid
  AND (n.nspname::text, c.relname::text) IN (SELECT * FROM unnest(%s::text[], %s::text[]))
ORDER BY 2, 3, a.depth"""


def _through_root(conn: Conn, publication: str, features: ServerFeatures,
                  names: Sequence[TableName]) -> SnapshotTable | None:
    """The published ancestor of the first of `names` that is a leaf partition, reading that
    partition only; None when none is."""
    rows = query_catalog(conn, _ANCESTORS_QUERY, ([n.schema for n in names],
                                                  [n.table for n in names]))
    for oid, schema, name, ancestor_schema, ancestor in rows:
        root = next(iter(_tables(conn, publication, features,
                                 [TableName(ancestor_schema, ancestor)])), None)
        if root is not None:
            return replace(root, leaves=tuple(leaf for leaf in root.leaves if leaf.oid == oid),
                           read_from=TableName(schema, name))
    return None


def _tables(conn: Conn, publication: str, features: ServerFeatures,
            only: Sequence[TableName] | None = None) -> list[SnapshotTable]:
    modern = features.publication_column_lists
    query = _TABLES_QUERY.format(attnames="p.attnames::text[]" if modern else "NULL::text[]",
                                 rowfilter="p.rowfilter" if modern else "NULL::text",
                                 only="" if only is None else _ONE_OF,
                                 published=published_tables_sql(features))
    params: tuple[object, ...] = (publication,) if only is None else (
        publication, [n.schema for n in only], [n.table for n in only])
    block_size = int(query_catalog(conn, "SELECT current_setting('block_size')::int", ())[0][0])
    tables = []
    for oid, schema, name, relkind, ident, attnames, row_filter, reltuples in query_catalog(
            conn, query, params):
        columns = query_catalog(conn, _COLUMNS_QUERY, (oid,))
        relation = build_relation(oid, schema, name, ident, columns, attnames, features)
        if relkind == "p":
            leaves = tuple(Leaf(r[0], r[1], r[2], -(-r[3] // block_size), r[4])
                           for r in query_catalog(conn, _LEAVES_QUERY, (oid,)))
        else:
            size = query_catalog(conn, "SELECT pg_catalog.pg_relation_size(%s::oid)::int8", (oid,))
            leaves = (Leaf(oid, schema, name, -(-size[0][0] // block_size), reltuples),)
        tables.append(SnapshotTable(relation, relkind, row_filter, leaves))
    return tables


class RootRelations:
    """The Relation of a partitioned root a ``pgcdc.detach`` message names, as this stream
    publishes it (the publisher's `RootLookup`, connector/publisher.py): the one the stream
    sent (`streamed`, the assembler's relation cache), else built from the catalog as pgoutput
    would (once per root and session); None when `publication` does not publish that root
    itself (leaf by leaf, or not at all): its deletes are not this stream's."""

    def __init__(self, conn: Conn, publication: str, features: ServerFeatures,
                 streamed: Mapping[int, Relation]) -> None:
        self.conn = conn
        self.publication = publication
        self.features = features
        self.streamed = streamed
        self._read: dict[int, Relation | None] = {}

    def __call__(self, oid: int, schema: str, table: str) -> Relation | None:
        relation = self.streamed.get(oid)
        if relation is not None:
            return relation
        if oid not in self._read:
            found = published_table(self.conn, self.publication, self.features,
                                    [TableName(schema, table)])
            self._read[oid] = found.relation if found is not None and found.read_from is None \
                and found.relation.relation_id == oid else None
        return self._read[oid]

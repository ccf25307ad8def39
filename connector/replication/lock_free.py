"""Catalog reads of the streaming path that never wait on a relation lock (issue 46).

A migration holds locks for as long as its transaction runs: ``ALTER TABLE`` and ``LOCK
TABLE`` take ACCESS EXCLUSIVE, ``CREATE INDEX`` SHARE. Reading the system catalogs themselves
(``pg_class``, ``pg_attribute``, ``pg_publication_rel``, ...) takes no lock on the relations
they describe, but functions that open a relation do, and wait for it: on PostgreSQL 16+
``pg_get_publication_tables`` (behind the view ``pg_publication_tables``) opens every
published table without a column list to list its columns; ``pg_partition_tree`` locks every
partition; ``pg_get_expr`` of a table's default or row filter and ``pg_relation_size`` open
the table (checked on 18 and 15; on 15 the view waits only for its ``rowfilter``). The
producer reads the catalog between reads of the stream (the table watcher, the drop watch, the
re-sync check, an incremental snapshot's table lookup), so one such wait stopped reading WAL,
sending feedback and producing to Kafka for every table until the migration committed.

Two rules keep the stream going while a lock is held:

* The published tables are read from the catalogs (`published_tables_sql`), not the view:
  the same rows as ``pg_publication_tables`` (pubname, schemaname, tablename, attnames,
  rowfilter, plus relid), for every kind of publication (a table list, schemas, FOR ALL
  TABLES, partitions through their root or leaf by leaf, column lists, generated columns).
  Before 16 the view reads the catalogs itself and is used as it is. (Checked against the
  view on 18: tests/integration/replication/test_lock_free_catalog.py; 16 and 17 compute it
  as 18 does, but for generated columns, which they never publish.) A partitioned table's
  partitions come from ``pg_inherits``.
* Whatever must still open a relation on that path runs under ``lock_timeout`` = `LOCK_WAIT_MS`
  on the connection (`lock_wait_bounded`): a statement meeting a held lock fails at once with
  ``lock_not_available`` (`is_lock_timeout`), and the check it belongs to is tried again at its
  next interval (one INFO line while the lock is held, no reconnect). Nothing is skipped for
  good: a check that did not run leaves its state as the previous one left it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from .features import ServerFeatures

__all__ = ["LOCK_WAIT_MS", "is_lock_timeout", "lock_wait_bounded", "published_tables_sql"]

# How long a catalog statement of the streaming path waits for a relation lock before it gives
# up (the check runs again at its next interval): short next to the stream's 200 ms read.
LOCK_WAIT_MS = 100

# pg_publication_tables as PostgreSQL 16+ computes it (pg_get_publication_tables), from the
# catalogs only: what each publication names (its tables with their column lists, the tables
# of its schemas, or every table), a partitioned table replaced by its leaf partitions unless
# the publication publishes through the root, where a partition whose ancestor it names is
# left out. A table of a schema the publication names has no column list or row filter there.
# Columns without a list: the live ones, generated ones only where published (18: stored,
# publish_generated_columns = stored).
_PUBLISHED_16 = """\
(WITH RECURSIVE pub AS (
   SELECT oid AS pubid, pubname, puballtables, pubviaroot, {gencols} AS gencols
   FROM pg_catalog.pg_publication),
 tree AS (  -- each partition's ancestors (pg_inherits, no lock): (relid, ancestor)
   SELECT i.inhrelid AS relid, i.inhparent AS ancestor FROM pg_catalog.pg_inherits i
   JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid WHERE c.relispartition
   UNION SELECT t.relid, i.inhparent FROM tree t
   JOIN pg_catalog.pg_inherits i ON i.inhrelid = t.ancestor
   JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid WHERE c.relispartition),
 named AS (
   SELECT p.pubid, r.prrelid AS relid, r.prattrs AS attrs, r.prqual AS qual
   FROM pub p JOIN pg_catalog.pg_publication_rel r ON r.prpubid = p.pubid
   WHERE NOT p.puballtables AND NOT EXISTS (
     SELECT 1 FROM pg_catalog.pg_publication_namespace s JOIN pg_catalog.pg_class c
       ON c.relnamespace = s.pnnspid WHERE s.pnpubid = p.pubid AND c.oid = r.prrelid)
   UNION ALL
   SELECT p.pubid, c.oid, NULL, NULL FROM pub p
   JOIN pg_catalog.pg_publication_namespace s ON s.pnpubid = p.pubid
   JOIN pg_catalog.pg_class c ON c.relnamespace = s.pnnspid
   WHERE NOT p.puballtables AND c.relkind IN ('r', 'p') AND c.relpersistence = 'p'
     AND c.oid >= 16384
   UNION ALL
   SELECT p.pubid, c.oid, NULL, NULL FROM pub p JOIN pg_catalog.pg_class c ON p.puballtables
   WHERE c.relkind IN ('r', 'p') AND c.relpersistence = 'p' AND c.oid >= 16384
     AND NOT (p.pubviaroot AND c.relispartition) AND (p.pubviaroot OR c.relkind = 'r')),
 expanded AS (  -- leaf by leaf: a partitioned table stands for its leaf partitions
   SELECT n.pubid, n.relid, n.attrs, n.qual FROM named n
   JOIN pub p ON p.pubid = n.pubid JOIN pg_catalog.pg_class c ON c.oid = n.relid
   WHERE p.pubviaroot OR c.relkind <> 'p'
   UNION
   SELECT n.pubid, t.relid, NULL::pg_catalog.int2vector, NULL::pg_catalog.pg_node_tree
   FROM named n JOIN pub p ON p.pubid = n.pubid AND NOT p.pubviaroot
   JOIN tree t ON t.ancestor = n.relid JOIN pg_catalog.pg_class c ON c.oid = t.relid
   WHERE c.relkind <> 'p' AND NOT EXISTS (
     SELECT 1 FROM named o WHERE o.pubid = n.pubid AND o.relid = t.relid)),
 kept AS (  -- through the root: not a partition whose ancestor is published too
   SELECT e.* FROM expanded e JOIN pub p ON p.pubid = e.pubid
   WHERE NOT p.pubviaroot OR NOT EXISTS (
     SELECT 1 FROM tree t JOIN expanded a ON a.pubid = e.pubid AND a.relid = t.ancestor
     WHERE t.relid = e.relid))
 SELECT p.pubname, n.nspname AS schemaname, c.relname AS tablename, k.relid,
   ARRAY(SELECT a.attname FROM pg_catalog.pg_attribute a
         WHERE a.attrelid = k.relid AND a.attnum > 0 AND NOT a.attisdropped
           AND CASE WHEN k.attrs IS NOT NULL THEN a.attnum = ANY (k.attrs::int2[])
                    ELSE a.attgenerated = '' OR (p.gencols AND a.attgenerated = 's') END
         ORDER BY a.attnum) AS attnames,
   CASE WHEN k.qual IS NOT NULL THEN pg_catalog.pg_get_expr(k.qual, k.relid) END AS rowfilter
 FROM kept k JOIN pub p ON p.pubid = k.pubid
 JOIN pg_catalog.pg_class c ON c.oid = k.relid
 JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace)"""


def published_tables_sql(features: ServerFeatures) -> str:
    """What to put after FROM instead of ``pg_catalog.pg_publication_tables``: the same
    columns (and `relid`) without opening any relation (module docstring; a row filter's text,
    `rowfilter`, still opens its table: select it only where `lock_wait_bounded` guards
    the statement)."""
    if features.major < 16:  # the view reads the catalogs itself
        return "(SELECT t.*, c.oid AS relid FROM pg_catalog.pg_publication_tables t" \
            " JOIN pg_catalog.pg_namespace n ON n.nspname = t.schemaname" \
            " JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = t.tablename)"
    gencols = "pubgencols = 's'" if features.publishes_generated_columns else "false"
    return _PUBLISHED_16.format(gencols=gencols)


@contextmanager
def lock_wait_bounded(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """Within: `conn`'s statements give up on a lock held elsewhere after `LOCK_WAIT_MS`
    (`is_lock_timeout`); after, its own setting again. For the checks the stream loop runs
    (autocommit, outside a transaction): a Relation's catalog lookup, which the stream cannot
    go past without, still waits."""
    conn.execute("SELECT pg_catalog.set_config('lock_timeout', %s, false)",
                 (f"{LOCK_WAIT_MS}ms",))
    try:
        yield
    finally:
        if not conn.closed:  # (a connection lost: nothing to reset)
            conn.execute("RESET lock_timeout")


def is_lock_timeout(exc: BaseException) -> bool:
    """Whether a psycopg error is a lock wait given up (`lock_wait_bounded`: lock_not_available):
    another session holds a lock on a relation the statement needs; retry later. (An
    `OperationalError` subclass, but the connection is fine.)"""
    return getattr(exc, "sqlstate", None) == "55P03"

"""The re-sync's catalog reads: per published table, a digest of its catalog rows and its
live columns as `rewrites.Column`s.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from connector.names import TableName
from connector.replication.features import ServerFeatures
from connector.replication.lock_free import published_tables_sql

from .rewrites import Column

__all__ = ["catalog_columns", "catalog_digests"]

Conn = psycopg.Connection[tuple]  # type: ignore[type-arg]

# Per published table and live column: what `rewrites.Column` holds. `fills` is true for a
# column whose existing rows have a value: a stored missing value (a non-volatile default), or
# a default, identity or domain default at all (a volatile one rewrote the table, and a later
# rewrite clears atthasmissing); only looked at for a column that is new.
_COLUMNS_QUERY = """\
SELECT c.oid::int8, n.nspname::text, c.relname::text, a.attnum::int4, a.attname::text,
       a.atttypid::int8, a.atttypmod::int4, pg_catalog.format_type(a.atttypid, a.atttypmod),
       (a.attgenerated <> '' AND NOT %(generated)s)
         OR NOT coalesce(a.attname = ANY ({attnames}), true),
       a.atthasmissing OR a.atthasdef OR a.attidentity <> '' OR t.typdefaultbin IS NOT NULL,
       CASE WHEN t.typtype = 'e' OR et.typtype = 'e' THEN
         (SELECT array_agg(ARRAY[e.oid::text, e.enumlabel::text] ORDER BY e.oid)
            FROM pg_catalog.pg_enum e
           WHERE e.enumtypid = CASE WHEN t.typtype = 'e' THEN t.oid ELSE et.oid END) END
FROM {published} p  -- pg_publication_tables without its locks (lock_free.py)
JOIN pg_catalog.pg_class c ON c.oid = p.relid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_catalog.pg_type et ON et.oid = t.typelem AND t.typcategory = 'A'
WHERE p.pubname = %(publication)s {only}
ORDER BY c.oid, a.attnum"""

# One row per table: the versions (xmin) of its pg_class and pg_attribute rows and its
# published columns. Every DDL the check looks for writes one of those rows (an enum rename
# writes pg_enum: `_ENUMS_QUERY`), so a check fetches the columns above only for the tables
# whose digest changed. A changed digest without a changed column (ALTER TABLE ... SET
# (fillfactor), a frozen catalog row) costs that fetch, nothing more.
_DIGEST_QUERY = """
SELECT c.oid::int8, c.xmin::text || ':' || coalesce(({attnames})::text, '') || ':'
       || string_agg(a.xmin::text, ',' ORDER BY a.attnum)
FROM {published} p  -- pg_publication_tables without its locks (lock_free.py)
JOIN pg_catalog.pg_class c ON c.oid = p.relid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
WHERE p.pubname = %(publication)s
GROUP BY c.oid, c.xmin, ({attnames})::text"""
_ENUMS_QUERY = "SELECT string_agg(xmin::text, ',' ORDER BY oid) FROM pg_catalog.pg_enum"


def _columns_query(features: ServerFeatures, only: str = "") -> str:
    return _COLUMNS_QUERY.format(
        attnames="p.attnames::text[]" if features.publication_column_lists else "NULL::text[]",
        only=only, published=published_tables_sql(features))


def catalog_digests(conn: Conn, publication: str, features: ServerFeatures
                    ) -> tuple[dict[int, str], str]:
    """relation id -> a digest that changes with its `catalog_columns`, for every published
    table; and one of every enum's labels."""
    attnames = "p.attnames::text[]" if features.publication_column_lists else "NULL::text[]"
    rows = conn.execute(_DIGEST_QUERY.format(attnames=attnames,
                                             published=published_tables_sql(features)),
                        {"publication": publication}).fetchall()
    enums = conn.execute(_ENUMS_QUERY).fetchone()
    return {int(oid): str(digest) for oid, digest in rows}, str(enums[0] if enums else "")


def catalog_columns(conn: Conn, publication: str, features: ServerFeatures,
                    relation_ids: Sequence[int] | None = None
                    ) -> dict[int, tuple[TableName, list[Column]]]:
    """relation id -> (its name, its live columns) of every published table (or of those in
    `relation_ids`)."""
    query = _columns_query(features, "" if relation_ids is None
                           else "AND c.oid = ANY (%(oids)s::oid[])")
    rows = conn.execute(query, {"publication": publication,
                                "oids": None if relation_ids is None else list(relation_ids),
                                "generated": features.publishes_generated_columns}).fetchall()
    out: dict[int, tuple[TableName, list[Column]]] = {}
    for oid, schema, table, attnum, name, type_oid, typmod, text, unpublished, fills, enum in rows:
        labels = tuple((int(o), label) for o, label in enum) if enum else ()
        out.setdefault(oid, (TableName(schema, table), []))[1].append(
            Column(attnum, name, type_oid, typmod, bool(unpublished), bool(fills), labels, text))
    return out

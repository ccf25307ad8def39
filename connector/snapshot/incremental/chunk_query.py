"""The incremental snapshot's read of one chunk: the next rows of a table in key order (pure).
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import sql

__all__ = ["chunk_copy_statement"]


def chunk_copy_statement(schema: str, table: str, columns: Sequence[str],
                         key: Sequence[tuple[str, str]], after: Sequence[str] | None,
                         limit: int, row_filter: str | None = None) -> sql.Composed:
    """COPY of the next chunk: the published `columns` of rows whose key is above `after` (the
    previous chunk's last key in text form, as COPY gave it; None for the first chunk), in key
    order, `limit` rows at most. `key` is (column, type as ``format_type`` spells it) per key
    column: each bound is cast to its column's type, so it compares as the index does.
    `row_filter`: the publication's WHERE clause of the table (PostgreSQL 15+): the chunk holds
    only the rows the stream publishes, as the initial snapshot's (initial/plan.py)."""
    key_list = sql.SQL(", ").join(sql.Identifier(name) for name, _ in key)
    conditions: list[sql.Composable] = []
    if after is not None:
        if len(after) != len(key):
            raise ValueError(f"{len(after)} bound values for {len(key)} key columns")
        bounds = sql.SQL(", ").join(
            sql.SQL("{}::{}").format(sql.Literal(value), sql.SQL(type_name))
            for value, (_, type_name) in zip(after, key, strict=True))
        conditions.append(sql.SQL("({}) > ({})").format(key_list, bounds))
    if row_filter:
        conditions.append(sql.SQL("({})").format(sql.SQL(row_filter)))
    where: sql.Composable = sql.SQL(" WHERE {}").format(sql.SQL(" AND ").join(conditions)) \
        if conditions else sql.SQL("")
    return sql.SQL("COPY (SELECT {} FROM {}{} ORDER BY {} LIMIT {}) TO STDOUT").format(
        sql.SQL(", ").join(sql.Identifier(c) for c in columns),
        sql.Identifier(schema, table), where, key_list, sql.Literal(limit))

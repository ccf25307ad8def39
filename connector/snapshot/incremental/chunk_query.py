"""The incremental snapshot's read of one chunk: the next rows of a table in key order (pure).
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import sql

__all__ = ["chunk_copy_statement"]


def chunk_copy_statement(schema: str, table: str, columns: Sequence[str],
                         key: Sequence[tuple[str, str]], after: Sequence[str] | None,
                         limit: int) -> sql.Composed:
    """COPY of the next chunk: the published `columns` of rows whose key is above `after` (the
    previous chunk's last key in text form, as COPY gave it; None for the first chunk), in key
    order, `limit` rows at most. `key` is (column, type as ``format_type`` spells it) per key
    column: each bound is cast to its column's type, so it compares as the index does."""
    key_list = sql.SQL(", ").join(sql.Identifier(name) for name, _ in key)
    where: sql.Composable = sql.SQL("")
    if after is not None:
        if len(after) != len(key):
            raise ValueError(f"{len(after)} bound values for {len(key)} key columns")
        bounds = sql.SQL(", ").join(
            sql.SQL("{}::{}").format(sql.Literal(value), sql.SQL(type_name))
            for value, (_, type_name) in zip(after, key, strict=True))
        where = sql.SQL(" WHERE ({}) > ({})").format(key_list, bounds)
    return sql.SQL("COPY (SELECT {} FROM {}{} ORDER BY {} LIMIT {}) TO STDOUT").format(
        sql.SQL(", ").join(sql.Identifier(c) for c in columns),
        sql.Identifier(schema, table), where, key_list, sql.Literal(limit))

"""The incremental snapshot's chunk query on real PostgreSQL 15/18: key order as the index
sees it (composite keys, text under the column's collation), every row exactly once."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from psycopg import sql

from connector.snapshot.copytext import parse_copy_text
from connector.snapshot.incremental.chunk_query import chunk_copy_statement

pytestmark = pytest.mark.integration


def _chunks(conn: psycopg.Connection[Any], schema: str, table: str, columns: list[str],
            key: list[tuple[str, str]], limit: int) -> list[list[tuple[str | None, ...]]]:
    """Every chunk in turn, each bound taken from the previous chunk's last row, as the
    snapshot does."""
    chunks: list[list[tuple[str | None, ...]]] = []
    after = None
    while True:
        rows = []
        with conn.cursor().copy(chunk_copy_statement(schema, table, columns, key, after,
                                                     limit)) as copy:
            for line in copy:
                rows.append(parse_copy_text(bytes(line).rstrip(b"\n")))
        if not rows:
            return chunks
        chunks.append(rows)
        positions = [columns.index(name) for name, _ in key]
        after = [str(rows[-1][i]) for i in positions]


def test_composite_and_text_keys_are_read_once_in_index_order(postgres: Any) -> None:
    schema = f"s_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL(
            'CREATE TABLE {}."Mixed Case" (region text, n bigint, "v a l" text, '
            "PRIMARY KEY (region, n))").format(sql.Identifier(schema)))
        conn.execute(sql.SQL(
            """INSERT INTO {}."Mixed Case" SELECT r, n, r || n FROM
               unnest(ARRAY['b', 'a', 'a b', 'é', 'Z', 'it''s', '']) r,
               generate_series(-3, 9) n""").format(sql.Identifier(schema)))
        expected = conn.execute(sql.SQL(
            'SELECT region, n::text AS n_text, "v a l" FROM {}."Mixed Case" '
            "ORDER BY region, n").format(sql.Identifier(schema))).fetchall()
        chunks = _chunks(conn, schema, "Mixed Case", ["region", "n", "v a l"],
                         [("region", "text"), ("n", "bigint")], limit=10)
    assert [len(c) for c in chunks] == [10] * 9 + [1]
    assert [row for chunk in chunks for row in chunk] == expected


def test_a_numeric_key_compares_as_a_number_not_as_text(postgres: Any) -> None:
    table = f"t_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY)").format(
            sql.Identifier(table)))
        conn.execute(sql.SQL("INSERT INTO {} SELECT generate_series(1, 25)").format(
            sql.Identifier(table)))
        chunks = _chunks(conn, "public", table, ["id"], [("id", "integer")], limit=9)
    # As text, '9' > '10': the second chunk would start after 9 and skip 10..19.
    assert [[int(r[0]) for r in c] for c in chunks] == [
        list(range(1, 10)), list(range(10, 19)), list(range(19, 26))]

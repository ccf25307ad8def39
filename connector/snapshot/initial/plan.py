"""The initial snapshot's plan: the published tables split into block ranges that readers COPY
independently (pure).

A block range (`BlockRange`, the initial snapshot's chunk) is a range of heap blocks of one
leaf relation, read with a TID range scan
(``ctid >= '(a,0)' AND ctid < '(b,0)'``, PostgreSQL 14+), so chunks of one table cost no more
than one sequential scan together. The last chunk of a leaf is open-ended, so rows in blocks
added after planning are not missed (the snapshot cannot see them anyway). Chunk sizes come
from ``pg_class.reltuples / relpages``; a table too small for two chunks (or on PostgreSQL
before 14, where a ctid range would be a full scan) is one chunk.

Row numbers (``source.txn_index``): chunk `ordinal` of a table numbers its rows from
``ordinal << 32`` on, so positions stay unique per table however chunks are spread over
readers; a table read as one chunk numbers its rows 0, 1, 2, ...
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg import sql

from ..tables import Leaf, SnapshotTable

__all__ = ["ROW_NUMBER_SHIFT", "BlockRange", "copy_statement", "plan_chunks"]

ROW_NUMBER_SHIFT = 32
ASSUMED_ROWS_PER_BLOCK = 50  # when a table was never analyzed (reltuples unknown)


@dataclass(frozen=True)
class BlockRange:
    """One chunk of the initial snapshot: blocks [start_block, end_block) of `leaf`."""

    table: int  # index of the table in the planned list
    ordinal: int  # chunk number within its table
    leaf: Leaf
    start_block: int | None  # None: from the first block
    end_block: int | None  # None: to the last block (exclusive bound otherwise)

    @property
    def first_row_number(self) -> int:
        return self.ordinal << ROW_NUMBER_SHIFT


def _blocks_per_chunk(leaf: Leaf, chunk_rows: int) -> int:
    if leaf.reltuples > 0 and leaf.blocks > 0:
        density = max(leaf.reltuples / leaf.blocks, 1.0)
    else:
        density = ASSUMED_ROWS_PER_BLOCK
    return max(1, int(chunk_rows / density))


def plan_chunks(tables: Sequence[SnapshotTable], chunk_rows: int, *,
                tid_range_scans: bool = True) -> list[BlockRange]:
    """Chunks of every table, in table order (the readers take them first come first served)."""
    chunks: list[BlockRange] = []
    for index, table in enumerate(tables):
        ordinal = 0
        for leaf in table.leaves:
            step = _blocks_per_chunk(leaf, chunk_rows)
            if not tid_range_scans or leaf.blocks <= step:
                chunks.append(BlockRange(index, ordinal, leaf, None, None))
                ordinal += 1
                continue
            start = 0
            while start < leaf.blocks:
                end = start + step
                chunks.append(BlockRange(index, ordinal, leaf, start or None,
                                    end if end < leaf.blocks else None))
                ordinal += 1
                start = end
    return chunks


def copy_statement(table: SnapshotTable, chunk: BlockRange, *,
                   binary: bool = False) -> sql.Composed:
    """``COPY (SELECT <published columns> FROM ONLY <leaf> WHERE <ctid range> AND
    (<row filter>)) TO STDOUT``: the chunk's rows, columns in the Relation's order."""
    columns = sql.SQL(", ").join(sql.Identifier(c.name) for c in table.relation.columns)
    conditions: list[sql.Composable] = []
    if chunk.start_block is not None:
        conditions.append(sql.SQL("ctid >= {}::tid").format(
            sql.Literal(f"({chunk.start_block},0)")))
    if chunk.end_block is not None:
        conditions.append(sql.SQL("ctid < {}::tid").format(
            sql.Literal(f"({chunk.end_block},0)")))
    if table.row_filter:
        conditions.append(sql.SQL("({})").format(sql.SQL(table.row_filter)))
    where = sql.SQL(" WHERE {}").format(sql.SQL(" AND ").join(conditions)) if conditions \
        else sql.SQL("")
    fmt = sql.SQL(" (FORMAT binary)") if binary else sql.SQL("")
    return sql.SQL("COPY (SELECT {} FROM ONLY {}{}) TO STDOUT{}").format(
        columns, sql.Identifier(chunk.leaf.schema, chunk.leaf.name), where, fmt)

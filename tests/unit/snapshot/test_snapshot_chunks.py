"""BlockRange planning and COPY statements of the snapshot (pure)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from connector.pgoutput.messages import Relation, RelationColumn
from connector.snapshot.initial.plan import (
    ROW_NUMBER_SHIFT,
    BlockRange,
    copy_statement,
    plan_chunks,
)
from connector.snapshot.tables import Leaf, SnapshotTable


def _table(*leaves: Leaf, row_filter: str | None = None, relkind: str = "r") -> SnapshotTable:
    columns = (RelationColumn(1, "id", 23, -1), RelationColumn(0, "Odd Name", 25, -1))
    return SnapshotTable(Relation(None, 1, "public", "t", "d", columns), relkind, row_filter,
                         leaves)


def test_a_small_table_is_one_chunk_numbered_from_zero() -> None:
    table = _table(Leaf(1, "public", "t", 10, 500.0))
    chunks = plan_chunks([table], 1000)
    assert chunks == [BlockRange(0, 0, table.leaves[0], None, None)]
    assert chunks[0].first_row_number == 0


def test_a_large_table_is_cut_into_contiguous_block_ranges() -> None:
    leaf = Leaf(1, "public", "t", 1000, 100_000.0)  # 100 rows per block
    chunks = plan_chunks([_table(leaf)], 25_000)
    assert [(c.start_block, c.end_block) for c in chunks] == \
        [(None, 250), (250, 500), (500, 750), (750, None)]
    assert [c.first_row_number for c in chunks] == [i << ROW_NUMBER_SHIFT for i in range(4)]


def test_without_tid_range_scans_a_table_is_one_chunk() -> None:
    leaf = Leaf(1, "public", "t", 1000, 100_000.0)
    assert len(plan_chunks([_table(leaf)], 1000, tid_range_scans=False)) == 1


def test_an_unanalyzed_table_assumes_a_density() -> None:
    leaf = Leaf(1, "public", "t", 1000, -1.0)
    chunks = plan_chunks([_table(leaf)], 5000)  # 50 rows per block assumed: 100 blocks each
    assert len(chunks) == 10 and chunks[1].start_block == 100


def test_partitions_continue_the_ordinals_of_their_table() -> None:
    first = Leaf(2, "public", "p1", 400, 40_000.0)
    second = Leaf(3, "public", "p2", 10, 10.0)
    other = _table(Leaf(4, "public", "u", 1, 1.0))
    chunks = plan_chunks([_table(first, second, relkind="p"), other], 20_000)
    assert [(c.table, c.ordinal, c.leaf.name) for c in chunks] == \
        [(0, 0, "p1"), (0, 1, "p1"), (0, 2, "p2"), (1, 0, "u")]


@given(st.integers(1, 100_000), st.floats(0, 1e7), st.integers(1, 1_000_000))
def test_chunks_cover_every_block_once(blocks: int, reltuples: float, chunk_rows: int) -> None:
    chunks = plan_chunks([_table(Leaf(1, "public", "t", blocks, reltuples))], chunk_rows)
    bounds = [(c.start_block or 0, c.end_block) for c in chunks]
    assert bounds[0][0] == 0 and bounds[-1][1] is None
    for (_, end), (start, _) in zip(bounds, bounds[1:], strict=False):
        assert end == start
    assert all(end is None or start < end for start, end in bounds)


def test_copy_statement_quotes_names_and_adds_ranges_and_filter() -> None:
    leaf = Leaf(1, "my schema", "t", 1000, 1e5)
    table = _table(leaf, row_filter="(id > 5)")
    whole = copy_statement(table, BlockRange(0, 0, leaf, None, None)).as_string(None)
    assert whole == ('COPY (SELECT "id", "Odd Name" FROM ONLY "my schema"."t"'
                     " WHERE ((id > 5))) TO STDOUT")
    middle = copy_statement(_table(leaf), BlockRange(0, 1, leaf, 10, 20),
                            binary=True).as_string(None)
    assert middle == ('COPY (SELECT "id", "Odd Name" FROM ONLY "my schema"."t"'
                      " WHERE ctid >= '(10,0)'::tid AND ctid < '(20,0)'::tid) TO STDOUT"
                      " (FORMAT binary)")

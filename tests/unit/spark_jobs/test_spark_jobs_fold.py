"""The fast path's batch rules over Python rows (spark_jobs/rules/fold.py), without Spark: what
`changes.latest_per_key` and `plan.not_deleted_later` say, including Spark's key equality."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from spark_jobs.rules.changes import IDX, LSN, OP, TOAST, Position, before_position
from spark_jobs.rules.fold import (
    after_position,
    latest_per_key,
    newest_tombstones,
    not_deleted_later,
    row_changes,
    truncate_cut,
)


def row(k: Any, op: str, lsn: int, idx: int = 0, toast: tuple[str, ...] = (), **cols: Any
        ) -> dict[str, Any]:
    return {"k": k, **cols, OP: op, LSN: lsn, IDX: idx, TOAST: list(toast)}


def test_last_change_per_key_wins_whatever_the_arrival_order() -> None:
    rows = [row(1, "u", 20, v="b"), row(1, "c", 10, v="a"), row(2, "c", 10, 1, v="x"),
            row(1, "u", 20, 1, v="c")]
    got = {r["k"]: r["v"] for r in latest_per_key(rows, ["k"])}
    assert got == {1: "c", 2: "x"}


@given(st.lists(st.tuples(st.sampled_from([0, 1, -0.0, 0.0, float("nan"), "a", None]),
                          st.integers(1, 4), st.integers(0, 2), st.integers(0, 9)),
                max_size=30))
def test_the_one_pass_without_toast_picks_what_the_sorted_fold_picks(
        changes: list[tuple[Any, int, int, int]]) -> None:
    """Without TOAST columns the last change per key is found in one pass; a TOAST column
    no change holds takes the sorted path, whose winners are the same rows (duplicates at
    one position: the last to arrive)."""
    rows = [row(k, "u", lsn, idx, v=v) for k, lsn, idx, v in changes]
    one_pass = latest_per_key(rows, ["k"])
    assert [id(r) for r in one_pass] == [id(r) for r in latest_per_key(rows, ["k"], ["absent"])]


def test_unchanged_toast_takes_the_last_carried_value_or_stays_unchanged() -> None:
    rows = [row(1, "c", 10, v="a", big="B1"), row(1, "u", 20, toast=("big",), v="b", big=None),
            row(2, "u", 30, toast=("big",), v="z", big=None)]
    got = {r["k"]: (r["v"], r["big"], r[TOAST]) for r in latest_per_key(rows, ["k"], ["big"])}
    # key 1 carries B1 from its insert; key 2 has no carrier: the MERGE keeps the stored value
    assert got == {1: ("b", "B1", []), 2: ("z", None, ["big"])}


def test_a_delete_carries_nothing_forward() -> None:
    rows = [row(1, "c", 10, big="B1"), row(1, "d", 20, big=None),
            row(1, "c", 30, toast=("big",), big=None)]
    [got] = latest_per_key(rows, ["k"], ["big"])
    assert (got[OP], got["big"], got[TOAST]) == ("c", None, [])


def test_keys_compare_as_spark_compares_them() -> None:
    rows = [row(-0.0, "c", 10, v="neg"), row(0.0, "u", 20, v="pos"),
            row(math.nan, "c", 10, v="n1"), row(math.nan, "u", 20, v="n2"),
            row(None, "c", 10, v="a"), row(None, "u", 20, v="b")]
    got = sorted(r["v"] for r in latest_per_key(rows, ["k"]))
    assert got == ["b", "n2", "pos"]
    # the key value is the winning change's own (-0.0 kept when it wins)
    [only] = latest_per_key([row(0.0, "c", 10), row(-0.0, "u", 20)], ["k"])
    assert math.copysign(1, only["k"]) == -1


def test_tombstones_drop_older_changes_and_match_other_keys_when_set() -> None:
    changes = [row(1, "c", 10, b=5), row(2, "c", 50, b=5), row(3, "c", 10, b=6)]
    tombstones = [{"k": 1, "b": None, LSN: 20, IDX: 0},  # written under key (k) alone
                  {"k": 2, "b": 5, LSN: 20, IDX: 0},  # older than the change
                  {"k": 3, "b": 7, LSN: 20, IDX: 0}]  # another value of b
    kept = not_deleted_later(changes, tombstones, ["k"], ["b"])
    assert sorted(r["k"] for r in kept) == [2, 3]
    # a tombstone at the very position of the change drops it too ("at or after")
    assert not_deleted_later([row(1, "c", 20)], tombstones, ["k"]) == []


def test_truncate_cut_and_newest_tombstones() -> None:
    rows = [row(1, "c", 10), row(2, "c", 20), row(3, "c", 20, 1)]
    assert [r["k"] for r in after_position(rows, Position(20, 0))] == [3]
    assert after_position(rows, None) == rows
    tombs = [{"k": 1, LSN: 5, IDX: 0}, {"k": 1, LSN: 9, IDX: 0}, {"k": 2, LSN: 1, IDX: 0}]
    assert sorted((t["k"], t[LSN]) for t in newest_tombstones(tombs, ["k"])) == [(1, 9), (2, 1)]


def test_a_truncate_is_a_cut_in_the_tables_events() -> None:
    """The batch's last truncate cuts the table unless its cut so far is later; of the batch,
    only the changes after the cut apply, in order, and no truncate itself."""
    batch = [row(1, "c", 10), row(None, "t", 20), row(2, "c", 25), row(None, "t", 30, 2),
             row(3, "c", 30, 3), row(4, "u", 30, 1), row(None, "t", 20)]  # a copy of one
    assert truncate_cut(batch, None) == Position(30, 2)
    assert truncate_cut(batch, Position(25, 0)) == Position(30, 2)
    assert truncate_cut(batch, Position(40, 0)) == Position(40, 0)  # an older truncate: none
    assert truncate_cut([row(1, "c", 10)], Position(5, 0)) == Position(5, 0)
    assert truncate_cut([row(1, "c", 10)], None) is None
    assert [r["k"] for r in row_changes(batch, Position(30, 2))] == [3]
    assert [r["k"] for r in row_changes(batch, None)] == [1, 2, 3, 4]
    # what the cut deletes from the table and its tombstones (Spark and DataFusion SQL)
    assert before_position(Position(30, 2)) == (
        f"{LSN} < 30 OR ({LSN} = 30 AND {IDX} < 2)")


def test_a_keyless_table_published_whole_keeps_only_the_cut_and_what_follows() -> None:
    """A table without a key re-published whole at m = 20 (connector/snapshot/incremental/
    whole.py): a truncate at (20, -1) in every partition, its rows as `r` at (20, n), then the
    stream. Keyed by position (no key), each row is one lake row; an older insert that a
    lagging partition delivers in a later batch is before the cut and stays out."""
    def keyless(op: str, lsn: int, idx: int, v: str | None = None) -> dict[str, Any]:
        return {"v": v, OP: op, LSN: lsn, IDX: idx, TOAST: []}

    batch = [keyless("c", 10, 0, "a"), keyless("c", 10, 1, "a"),  # the old values, twice
             *[keyless("t", 20, -1)] * 3,
             keyless("r", 20, 0, "a'"), keyless("r", 20, 1, "a'"), keyless("c", 30, 0, "b")]
    cut = truncate_cut(batch, None)
    assert cut == Position(20, -1)
    rows = latest_per_key(row_changes(batch, cut), [LSN, IDX])
    assert sorted((r["v"], r[LSN], r[IDX]) for r in rows) == [
        ("a'", 20, 0), ("a'", 20, 1), ("b", 30, 0)]
    late = [keyless("c", 15, 0, "x"), keyless("c", 40, 0, "y")]
    assert truncate_cut(late, cut) == cut
    assert [r["v"] for r in row_changes(late, cut)] == ["y"]
    # the lake's rows before it go; its rows at (20, n) stay
    assert before_position(cut) == f"{LSN} < 20 OR ({LSN} = 20 AND {IDX} < -1)"

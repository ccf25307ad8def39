"""latest-per-key, TOAST carry-forward and truncate placement over small DataFrames."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession

from spark_jobs.rules.changes import (
    Position,
    after_position,
    latest_per_key,
    row_changes,
    truncate_position,
)

SCHEMA = ("id long, name string, bio string, _cdc_op string, _cdc_commit_lsn long, "
          "_cdc_txn_index long, _cdc_ts_ms long, _cdc_toast array<string>")
Change = tuple[int, str | None, str | None, str, int, int, int, list[str]]


def ch(id_: int, op: str, lsn: int, idx: int = 0, name: str | None = None,
       bio: str | None = None, toast: tuple[str, ...] = ()) -> Change:
    return (id_, name, bio, op, lsn, idx, 0, list(toast))


def frame(spark: SparkSession, changes: list[Change]) -> DataFrame:
    return spark.createDataFrame(changes, SCHEMA)


def by_id(df: DataFrame) -> dict[int, dict[str, Any]]:
    return {r["id"]: r.asDict() for r in df.collect()}


def test_latest_change_per_key_wins_by_commit_lsn_then_txn_index(spark: SparkSession) -> None:
    df = frame(spark, [ch(1, "c", 10, 0, "a"), ch(1, "u", 20, 1, "c"), ch(1, "u", 20, 0, "b"),
                       ch(2, "c", 10, 1, "x"), ch(2, "d", 30, 0), ch(3, "u", 5, 9, "z")])
    got = by_id(latest_per_key(df, ["id"]))
    assert {k: (v["_cdc_op"], v["name"]) for k, v in got.items()} == {
        1: ("u", "c"), 2: ("d", None), 3: ("u", "z")}
    assert got[1]["_cdc_commit_lsn"] == 20 and got[1]["_cdc_txn_index"] == 1


def test_unchanged_toast_value_is_carried_from_an_earlier_change(spark: SparkSession) -> None:
    df = frame(spark, [
        ch(1, "c", 10, 0, "a", "big"), ch(1, "u", 20, 0, "b", None, ("bio",)),
        ch(1, "u", 30, 0, "c", None, ("bio",)),  # carried over two updates
        ch(2, "u", 20, 1, "x", None, ("bio",)),  # nothing earlier here: keep the stored value
        ch(3, "c", 10, 2, "p", None), ch(3, "u", 20, 2, "q", None, ("bio",)),  # NULL is a value
        ch(4, "c", 10, 3, "k", "old"), ch(4, "d", 20, 3), ch(4, "c", 30, 3, "k", "new"),
    ])
    got = by_id(latest_per_key(df, ["id"], ["bio"]))
    assert (got[1]["name"], got[1]["bio"], got[1]["_cdc_toast"]) == ("c", "big", [])
    assert (got[2]["bio"], got[2]["_cdc_toast"]) == (None, ["bio"])
    assert (got[3]["bio"], got[3]["_cdc_toast"]) == (None, [])
    assert (got[4]["bio"], got[4]["_cdc_toast"]) == ("new", [])


def test_truncate_placement(spark: SparkSession) -> None:
    assert truncate_position([None, Position(5, 0), Position(7, 1), None]) == Position(7, 1)
    assert truncate_position([None]) is None
    df = frame(spark, [ch(1, "c", 5, 0), ch(2, "c", 7, 0), ch(0, "t", 7, 1), ch(3, "c", 7, 2),
                       ch(4, "c", 9, 0)])
    kept = after_position(row_changes(df), Position(7, 1))
    assert sorted(r["id"] for r in kept.collect()) == [3, 4]
    assert after_position(df, None).count() == 5


# A model of what the latest change per key must be, to check against on random histories.
def model(changes: list[Change]) -> dict[int, tuple[str, str | None, str | None, list[str]]]:
    out: dict[int, tuple[str, str | None, str | None, list[str]]] = {}
    for c in sorted(changes, key=lambda c: (c[4], c[5])):
        id_, name, bio, op, _, _, _, toast = c
        if op != "d" and "bio" in toast:
            if id_ in out and "bio" not in out[id_][3]:
                bio, toast = out[id_][2], []
        out[id_] = (op, name, bio, list(toast))
    return out


@st.composite
def histories(draw: st.DrawFn) -> list[Change]:
    n = draw(st.integers(1, 12))
    positions = draw(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 3)), min_size=n,
                              max_size=n, unique=True))
    out = []
    for lsn, idx in positions:
        op = draw(st.sampled_from(["c", "u", "d"]))
        toast = ("bio",) if op == "u" and draw(st.booleans()) else ()
        bio = None if toast or op == "d" else draw(st.sampled_from([None, "x", "y"]))
        out.append(ch(draw(st.integers(0, 2)), op, lsn, idx, f"n{lsn}.{idx}", bio, toast))
    return out


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(histories())
def test_latest_per_key_matches_the_model(spark: SparkSession, changes: list[Change]) -> None:
    got = by_id(latest_per_key(frame(spark, changes), ["id"], ["bio"]))
    assert {k: (v["_cdc_op"], v["name"], v["bio"], v["_cdc_toast"]) for k, v in got.items()} \
        == model(changes)

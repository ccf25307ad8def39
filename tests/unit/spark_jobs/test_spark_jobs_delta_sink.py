"""The Delta side of a micro-batch, fed flattened changes directly (no Kafka): ordering,
deletes and tombstones, truncates, TOAST, schema evolution — checked against a model over
random histories split into random batches with duplicates."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession

from spark_jobs.runtime.spark_path import table_facts
from spark_jobs.sinks.delta import DeltaMirror

SCHEMA = ("id long, name string, bio string, _cdc_op string, _cdc_commit_lsn long, "
          "_cdc_txn_index long, _cdc_ts_ms long, _cdc_toast array<string>")
Change = tuple[int | None, str | None, str | None, str, int, int, int, list[str]]


def ch(id_: int | None, op: str, lsn: int, idx: int = 0, name: str | None = None,
       bio: str | None = None, toast: tuple[str, ...] = ()) -> Change:
    return (id_, name, bio, op, lsn, idx, 0, list(toast))


def apply(spark: SparkSession, sink: DeltaMirror, batch_id: int, changes: list[Change],
          schema: str = SCHEMA, key: list[str] | None = None) -> None:
    df: DataFrame = spark.createDataFrame(changes, schema)
    _, facts = table_facts(df)
    sink.apply(spark, df, facts, ["id"] if key is None else key, batch_id)


def rows(spark: SparkSession, sink: DeltaMirror) -> dict[Any, tuple[Any, ...]]:
    df = spark.read.format("delta").load(sink.path)
    cols = [c for c in df.columns if not c.startswith("_cdc_")]
    return {r["id"]: tuple(r[c] for c in cols[1:]) for r in df.collect()}


def new_sink(tmp: Path) -> DeltaMirror:
    return DeltaMirror.at(str(tmp), f"s/{uuid.uuid4().hex[:8]}", "test-app")


def test_older_changes_never_win_and_deletes_stay_deleted(spark: SparkSession,
                                                           tmp_path: Path) -> None:
    sink = new_sink(tmp_path)
    apply(spark, sink, 0, [ch(1, "c", 10, 0, "a"), ch(2, "c", 10, 1, "b"), ch(3, "d", 12)])
    apply(spark, sink, 1, [ch(1, "u", 20, 0, "a2"), ch(2, "d", 20, 1),
                           ch(1, "c", 10, 0, "a")])  # the old insert again, in the same batch
    assert rows(spark, sink) == {1: ("a2", None)}
    # replays: the old inserts, the old update: no resurrection, no regression
    apply(spark, sink, 2, [ch(2, "c", 10, 1, "b"), ch(1, "c", 10, 0, "a"), ch(3, "c", 5, 0, "x")])
    assert rows(spark, sink) == {1: ("a2", None)}
    # a re-insert after the delete is newer: it lives
    apply(spark, sink, 3, [ch(2, "c", 30, 0, "b2")])
    assert rows(spark, sink) == {1: ("a2", None), 2: ("b2", None)}
    # tombstones of 2 (older than its live row now: harmless) and of 3 (never inserted)
    tomb = spark.read.format("delta").load(sink.tomb_path).collect()
    assert sorted(r["id"] for r in tomb) == [2, 3]


def test_same_batch_id_again_is_skipped_by_delta(spark: SparkSession, tmp_path: Path) -> None:
    sink = new_sink(tmp_path)
    apply(spark, sink, 0, [ch(1, "c", 10, 0, "a")])
    apply(spark, sink, 1, [ch(1, "u", 20, 0, "b")])
    version = spark.sql(f"DESCRIBE HISTORY delta.`{sink.path}`").first()["version"]  # type: ignore[index]
    apply(spark, sink, 1, [ch(1, "u", 30, 0, "c")])  # a re-run of batch 1 (txnVersion seen)
    assert spark.sql(f"DESCRIBE HISTORY delta.`{sink.path}`").first()["version"] == version  # type: ignore[index]
    assert rows(spark, sink) == {1: ("b", None)}


def test_truncate_removes_older_rows_and_later_duplicates(spark: SparkSession,
                                                          tmp_path: Path) -> None:
    sink = new_sink(tmp_path)
    apply(spark, sink, 0, [ch(1, "c", 10, 0, "a"), ch(2, "c", 10, 1, "b")])
    # one partition's copy of the truncate, then a change after it, then the other copy
    apply(spark, sink, 1, [ch(None, "t", 20, 0), ch(3, "c", 30, 0, "c")])
    apply(spark, sink, 2, [ch(2, "u", 15, 0, "late"), ch(None, "t", 20, 0)])
    assert rows(spark, sink) == {3: ("c", None)}
    # a fresh sink (a restarted job) reads the watermark back from the table
    again = DeltaMirror.at(str(tmp_path), sink.path.rsplit("/", 2)[1] + "/"
                              + sink.path.rsplit("/", 1)[1], "test-app")
    apply(spark, again, 3, [ch(1, "c", 10, 0, "a")])
    assert rows(spark, again) == {3: ("c", None)}


def test_toast_keeps_the_stored_value_and_columns_evolve(spark: SparkSession,
                                                         tmp_path: Path) -> None:
    sink = new_sink(tmp_path)
    apply(spark, sink, 0, [ch(1, "c", 10, 0, "a", "big"), ch(2, "c", 10, 1, "b", "big2")])
    apply(spark, sink, 1, [ch(1, "u", 20, 0, "a2", None, ("bio",))])
    assert rows(spark, sink) == {1: ("a2", "big"), 2: ("b", "big2")}
    # bio dropped, color added: a new writer schema
    evolved = ("id long, name string, color string, _cdc_op string, _cdc_commit_lsn long, "
               "_cdc_txn_index long, _cdc_ts_ms long, _cdc_toast array<string>")
    apply(spark, sink, 2, [(1, "a3", "red", "u", 30, 0, 0, []),
                           (3, "c", "blue", "c", 30, 1, 0, [])], evolved)
    assert rows(spark, sink) == {1: ("a3", None, "red"), 2: ("b", "big2", None),
                                 3: ("c", None, "blue")}


def test_table_without_key_keeps_each_change_once(spark: SparkSession, tmp_path: Path) -> None:
    sink = new_sink(tmp_path)
    apply(spark, sink, 0, [ch(1, "c", 10, 0, "a"), ch(1, "c", 10, 1, "a")], key=[])
    apply(spark, sink, 1, [ch(1, "c", 10, 1, "a"), ch(2, "c", 11, 0, "b")], key=[])
    assert spark.read.format("delta").load(sink.path).count() == 3


# -- model-based: random histories, random batches, duplicates --------------------------------
def model(changes: list[Change]) -> dict[int, tuple[str | None, str | None]]:
    state: dict[int, tuple[str | None, str | None]] = {}
    for c in sorted(set(map(lambda c: (*c[:7], tuple(c[7])), changes)), key=lambda c: c[4:6]):
        id_, name, bio, op, _, _, _, toast = c
        if op == "t":
            state.clear()
        elif op == "d":
            state.pop(id_, None)  # type: ignore[arg-type]
        else:
            keep = "bio" in toast and id_ in state
            state[id_] = (name, state[id_][1] if keep else bio)  # type: ignore[index]
    return state


@st.composite
def batches(draw: st.DrawFn) -> list[list[Change]]:
    n = draw(st.integers(1, 14))
    positions = sorted(draw(st.lists(st.tuples(st.integers(1, 9), st.integers(0, 2)),
                                     min_size=n, max_size=n, unique=True)))
    history: list[Change] = []
    for lsn, idx in positions:
        op = draw(st.sampled_from(["c", "u", "d", "d", "t"] if lsn > 2 else ["c", "u"]))
        if op == "t":
            history.append(ch(None, "t", lsn, idx))
            continue
        toast = ("bio",) if op == "u" and draw(st.booleans()) else ()
        bio = None if toast or op == "d" else f"b{lsn}"
        history.append(ch(draw(st.integers(0, 2)), op, lsn, idx, f"n{lsn}.{idx}", bio, toast))
    # split into consecutive batches, then add duplicates of earlier changes to later batches
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(history) - 1)), max_size=2)))
    parts = [history[a:b] for a, b in zip([0, *cuts], [*cuts, len(history)], strict=True)]
    for i in range(1, len(parts)):
        earlier = [c for p in parts[:i] for c in p]
        parts[i] = parts[i] + draw(st.lists(st.sampled_from(earlier), max_size=2))
    return [p for p in parts if p]


@settings(max_examples=5, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(batches())
def test_batches_with_duplicates_match_the_model(spark: SparkSession, tmp_path: Path,
                                                 parts: list[list[Change]]) -> None:
    sink = new_sink(tmp_path)
    for batch_id, part in enumerate(parts):
        apply(spark, sink, batch_id, part)
    assert {k: v for k, v in rows(spark, sink).items()} == model([c for p in parts for c in p])


def test_a_new_table_is_created_with_its_first_rows_in_one_commit(spark: SparkSession,
                                                                  tmp_path: Path) -> None:
    """The table (and its tombstones) a first batch creates with its rows is the one created
    empty and then merged into: same columns, types, nullability, partitioning and
    properties, same rows; in one commit each (a new table's fixed cost on the Spark path)."""
    from delta.tables import DeltaTable

    from spark_jobs.rules.changes import Position
    from spark_jobs.rules.incarnation import Incarnation

    changes = [ch(1, "c", 10, 0, "a", "x"), ch(2, "c", 10, 1, "b"), ch(2, "d", 11),
               ch(3, "d", 12)]
    sinks = []
    for name in ("with_rows", "created_first"):
        sink = DeltaMirror.at(str(tmp_path), f"s/{name}", "test-app", ["name"],
                                 column_mapping=True)
        sink.state.incarnation = Incarnation(16384, Position(10, 0))
        if name == "created_first":  # the two-commit way: the table made empty, then merged
            sink.spark_writer._create(spark, spark.createDataFrame(changes, SCHEMA))
        apply(spark, sink, 0, changes)
        sinks.append(sink)

    def shape(path: str) -> tuple[Any, ...]:
        detail = DeltaTable.forPath(spark, path).detail().first()
        assert detail is not None
        fields = spark.read.format("delta").load(path).schema.fields  # (physical names vary)
        return ([(f.name, f.dataType.simpleString(), f.nullable) for f in fields],
                detail["partitionColumns"], detail["properties"])

    new, old = sinks
    assert rows(spark, new) == rows(spark, old) == {1: ("a", "x")}
    assert shape(new.path) == shape(old.path)
    assert shape(new.path)[2]["pgcdc.relationId"] == "16384"
    tomb_fields, tomb_partitions, tomb_properties = shape(new.tomb_path)
    assert tomb_fields == [("id", "bigint", True), ("_cdc_commit_lsn", "bigint", True),
                           ("_cdc_txn_index", "bigint", True)]
    assert tomb_partitions == [] and tomb_properties["delta.columnMapping.mode"] == "name"

    def tombstones() -> list[int]:
        return sorted(r["id"] for r in spark.read.format("delta").load(new.tomb_path).collect())

    assert tombstones() == [2, 3]
    assert [DeltaTable.forPath(spark, p).history().count() for p in (new.path, new.tomb_path)] \
        == [1, 1]
    # a re-run of the batch finds the tables there and changes nothing
    apply(spark, new, 0, changes)
    assert rows(spark, new) == {1: ("a", "x")} and tombstones() == [2, 3]
    assert [DeltaTable.forPath(spark, p).history().count() for p in (new.path, new.tomb_path)] \
        == [1, 1]


def test_first_deletes_ask_storage_nothing_more_and_keep_tombstones_left_behind(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new table's first deletes create its tombstones without a separate existence check
    of them (a request less per table on an object store: `DeltaTableState.has_tombstones`);
    tombstones left by a table removed from the lake by hand are still found (by the create)
    and appended to, in place."""
    from delta.tables import DeltaTable

    real = DeltaTable.isDeltaTable
    asked: list[str] = []

    def spy(session: SparkSession, path: str) -> bool:
        asked.append(path)
        return bool(real(session, path))

    monkeypatch.setattr(DeltaTable, "isDeltaTable", staticmethod(spy))
    sink = new_sink(tmp_path)
    apply(spark, sink, 0, [ch(1, "c", 10, 0, "a"), ch(2, "c", 10, 1, "b"), ch(2, "d", 11)])
    assert asked == [sink.path]  # the table, once; not its tombstones
    assert rows(spark, sink) == {1: ("a", None)}

    shutil.rmtree(sink.path)  # the table removed by hand; its tombstones stay
    asked.clear()
    again = DeltaMirror.at(str(tmp_path), sink.path.split("/")[-2] + "/"
                              + sink.path.split("/")[-1], "test-app")
    apply(spark, again, 1, [ch(3, "c", 12, 0, "c"), ch(3, "d", 13), ch(4, "c", 14, 0, "d")])
    assert asked == [again.path]
    assert rows(spark, again) == {4: ("d", None)}
    assert sorted(r["id"] for r in spark.read.format("delta").load(again.tomb_path).collect()) \
        == [2, 3]
    assert DeltaTable.forPath(spark, again.tomb_path).history().count() == 2  # appended to

"""The fast path (delta-rs) and the Spark path write the same tables: random histories split
into random batches with duplicates, each batch applied by a randomly chosen path (a batch
the fast path declines, e.g. a new column, goes through Spark as in the job), compared with
the model the Spark path is tested against (test_spark_jobs_delta_sink.py), row for row
including the change metadata of each row's last change."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StringType

from spark_jobs.events.rows import TopicRows
from spark_jobs.rules.changes import IDX, LSN, OP, TOAST, TS
from spark_jobs.sinks.delta import DeltaMirror
from spark_jobs.sinks.delta.delta_rs_writer import Declined
from tests.unit.spark_jobs.test_spark_jobs_delta_sink import (
    Change,
    apply,
    batches,
    ch,
    model,
)

TYPES = {"id": LongType(), "name": StringType(), "bio": StringType()}


def topic_rows(changes: list[Change]) -> TopicRows:
    out = TopicRows(columns=["id", "name", "bio"])
    for id_, name, bio, op, lsn, idx, ts, toast in changes:
        out.rows.append({"id": id_, "name": name, "bio": bio, OP: op, LSN: lsn, IDX: idx,
                         TS: ts, TOAST: list(toast)})
        out.truncates += op == "t"
        out.deletes += op == "d"
        out.toast.update(toast)
    return out


def apply_either(spark: SparkSession, sink: DeltaMirror, batch_id: int,
                 changes: list[Change], fast: bool, key: list[str] | None = None) -> str:
    """As the job does: the fast path when asked and it does not decline, else Spark."""
    if fast:
        try:
            sink.fast.apply(topic_rows(changes), TYPES, ["id"] if key is None else key,
                            batch_id)
            return "fast"
        except Declined:
            pass
    apply(spark, sink, batch_id, changes, key=key)
    return "spark"


def table(spark: SparkSession, sink: DeltaMirror) -> list[tuple[Any, ...]]:
    df = spark.read.format("delta").load(sink.path)
    return sorted((tuple(r) for r in df.collect()), key=repr)


def new_sink(tmp: Path) -> DeltaMirror:
    return DeltaMirror.at(str(tmp), f"s/{uuid.uuid4().hex[:8]}", "test-app")


@settings(max_examples=4, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(batches(), st.lists(st.booleans(), min_size=3, max_size=3))
def test_fast_and_spark_paths_write_the_same_table(spark: SparkSession, tmp_path: Path,
                                                   parts: list[list[Change]],
                                                   fast: list[bool]) -> None:
    mixed = new_sink(tmp_path)
    for batch_id, part in enumerate(parts):
        apply_either(spark, mixed, batch_id, part, fast[batch_id])
    changes = [c for p in parts for c in p]
    expected = {id_: (*values, *last_change(changes, id_))
                for id_, values in model(changes).items()}
    assert {r[0]: r[1:6] for r in table(spark, mixed)} == expected


def last_change(changes: list[Change], id_: int) -> tuple[str, int, int]:
    """(op, commit_lsn, txn_index) of the key's last change: what the row's metadata says."""
    last = max((c for c in changes if c[0] == id_), key=lambda c: c[4:6])
    return last[3], last[4], last[5]


def test_fast_path_keeps_deletes_deleted_and_toast_values(spark: SparkSession,
                                                          tmp_path: Path) -> None:
    sink = new_sink(tmp_path)
    assert apply_either(spark, sink, 0, [ch(1, "c", 10, 0, "a", "big"), ch(2, "c", 10, 1, "b"),
                                         ch(3, "d", 12)], fast=True) == "fast"
    assert apply_either(spark, sink, 1, [ch(1, "u", 20, 0, "a2", None, ("bio",)),
                                         ch(2, "d", 20, 1), ch(3, "c", 5, 0, "x")],
                        fast=True) == "fast"
    # replays of the old inserts: the tombstones keep 2 and 3 deleted
    assert apply_either(spark, sink, 2, [ch(2, "c", 10, 1, "b"), ch(3, "c", 5, 0, "x")],
                        fast=True) == "fast"
    assert {r[0]: r[1:3] for r in table(spark, sink)} == {1: ("a2", "big")}
    tomb = spark.read.format("delta").load(sink.tomb_path).collect()
    assert sorted(r["id"] for r in tomb) == [2, 3]
    # a re-run of batch 1 (its txn id is recorded) changes nothing
    version = spark.sql(f"DESCRIBE HISTORY delta.`{sink.path}`").first()["version"]  # type: ignore[index]
    apply_either(spark, sink, 1, [ch(1, "u", 30, 0, "other")], fast=True)
    assert spark.sql(f"DESCRIBE HISTORY delta.`{sink.path}`").first()["version"] == version  # type: ignore[index]


def test_a_truncate_goes_through_delta_rs_as_a_cut(spark: SparkSession,
                                                  tmp_path: Path) -> None:
    """`test_truncate_removes_older_rows_and_later_duplicates` (the Spark path's semantics)
    through delta-rs: rows and tombstones before the truncate go, the changes after it in
    the same batch apply, a late duplicate before it is dropped, also by a restarted job
    (the cut is read back from the table) and by the Spark path."""
    sink = new_sink(tmp_path)
    assert apply_either(spark, sink, 0, [ch(1, "c", 10, 0, "a"), ch(2, "c", 10, 1, "b"),
                                         ch(4, "c", 11, 0, "d"), ch(4, "d", 12, 0)],
                        fast=True) == "fast"
    # one partition's copy of the truncate, a change after it and one before it
    assert apply_either(spark, sink, 1, [ch(5, "c", 18, 0, "gone"), ch(None, "t", 20, 0),
                                         ch(3, "c", 30, 0, "c"), ch(5, "c", 31, 0, "e"),
                                         ch(3, "d", 32, 0), ch(6, "c", 33, 0, "f")],
                        fast=True) == "fast"
    assert {r[0]: r[1] for r in table(spark, sink)} == {5: "e", 6: "f"}
    tomb = spark.read.format("delta").load(sink.tomb_path).collect()
    assert sorted((r["id"], r[LSN]) for r in tomb) == [(3, 32)]  # the one at 12 went
    # the other copy of the truncate and a late change before it
    assert apply_either(spark, sink, 2, [ch(2, "u", 15, 0, "late"), ch(None, "t", 20, 0)],
                        fast=True) == "fast"
    again = DeltaMirror.at(str(tmp_path), sink.path.rsplit("/", 2)[1] + "/"
                              + sink.path.rsplit("/", 1)[1], "test-app")
    assert apply_either(spark, again, 3, [ch(1, "c", 10, 0, "a")], fast=True) == "fast"
    apply_either(spark, again, 4, [ch(2, "c", 10, 1, "b")], fast=False)
    assert {r[0]: r[1] for r in table(spark, again)} == {5: "e", 6: "f"}
    # a new table whose first batch holds a truncate: created cut, holding what follows it
    fresh = new_sink(tmp_path)
    assert apply_either(spark, fresh, 0, [ch(1, "c", 10, 0, "a"), ch(None, "t", 20, 0),
                                          ch(2, "c", 21, 0, "b")], fast=True) == "fast"
    assert apply_either(spark, fresh, 1, [ch(1, "c", 10, 0, "a")], fast=False) == "spark"
    assert {r[0]: r[1] for r in table(spark, fresh)} == {2: "b"}


def test_a_new_column_or_type_goes_through_spark(spark: SparkSession, tmp_path: Path) -> None:
    sink = new_sink(tmp_path)
    apply_either(spark, sink, 0, [ch(1, "c", 10, 0, "a")], fast=True)
    with pytest.raises(Declined, match="changed type"):
        sink.fast.apply(topic_rows([ch(1, "u", 11, 0, "b")]),
                        {**TYPES, "id": StringType()}, ["id"], 1)
    wider = topic_rows([ch(1, "u", 11, 0, "b")])
    wider.columns.append("color")
    with pytest.raises(Declined, match="new"):
        sink.fast.apply(wider, {**TYPES, "color": StringType()}, ["id"], 1)


def test_maintenance_keeps_one_tombstone_per_key_and_deletes_deleted(spark: SparkSession,
                                                                     tmp_path: Path) -> None:
    sink = new_sink(tmp_path)
    history = [[ch(1, "c", 10 * b + 1, 0, f"v{b}"), ch(1, "d", 10 * b + 2, 0),
                ch(2, "c", 10 * b + 1, 1, f"w{b}"), ch(2, "d", 10 * b + 3, 0)]
               for b in range(4)]
    for batch_id, part in enumerate(history):
        sink.fast.apply(topic_rows(part), TYPES, ["id"], batch_id, maintain_every=4)
    tomb = spark.read.format("delta").load(sink.tomb_path).collect()
    assert sorted((r["id"], r["_cdc_commit_lsn"]) for r in tomb) == [(1, 32), (2, 33)]
    # the old inserts again: the compacted tombstones still keep both keys deleted
    sink.fast.apply(topic_rows([c for p in history for c in p if c[3] == "c"]), TYPES,
                    ["id"], 4)
    assert table(spark, sink) == []
    sink.fast.apply(topic_rows([ch(2, "c", 40, 0, "back")]), TYPES, ["id"], 5)
    assert [r[:2] for r in table(spark, sink)] == [(2, "back")]

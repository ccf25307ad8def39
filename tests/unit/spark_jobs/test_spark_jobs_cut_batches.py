"""--consistent-cuts through `BatchProcessor` over static Kafka-shaped DataFrames (the shared
Spark session, no Kafka): changes wait for a heartbeat of an earlier batch, the held-back
records come back in the next batch, a batch re-run after a crash gives the same result, and
every cut reads back as the changes at or below it. The Spark path (`BatchCut.hold`); the
delta-rs path's split is `rows.split_held` (test_spark_jobs_cut_policy.py) and the e2e test
(tests/e2e/test_merge_cuts.py) streams through it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from connector.avro import AvroEncoder
from spark_jobs.config import MergeConfig
from spark_jobs.job import BatchProcessor
from spark_jobs.manifest import read_cuts
from tests.support.events import LocalRegistry, TableEvents, table_events
from tests.support.schemas import FixedSchemas

COLUMNS = [("id", "int8"), ("v", "int8")]
REGISTRY = LocalRegistry()
HEARTBEATS = AvroEncoder(REGISTRY, prefix="p", db="d")


def _setup() -> tuple[TableEvents, FixedSchemas]:
    topic = table_events(REGISTRY, "p", "public", "t", COLUMNS, ["id"])
    _beat(0)  # registers the heartbeat schema
    return topic, FixedSchemas(REGISTRY.schemas)


def _beat(lsn: int) -> tuple[str, bytes | None, bytes]:
    topic, key, value = HEARTBEATS.heartbeat(lsn, ts_ms=0)
    return topic, key, value


def _kafka(spark: SparkSession, records: list[tuple[str, bytes | None, bytes]], first: int
           ) -> DataFrame:
    return spark.createDataFrame(
        [(k, v, topic, i % 2, first + i, dt.datetime(2024, 1, 1), 0)
         for i, (topic, k, v) in enumerate(records)],
        "key binary, value binary, topic string, partition int, offset long, "
        "timestamp timestamp, timestampType int")


def _at(target: Path, version: int) -> dict[int, int]:
    rows = DeltaTable(str(target / "public" / "t"), version=version).to_pyarrow_table()
    return {r["id"]: r["v"] for r in rows.to_pylist()}


def test_changes_wait_for_a_heartbeat_and_every_cut_reads_back(
        spark: SparkSession, tmp_path: Path) -> None:
    topic, schemas = _setup()

    def change(lsn: int, id_: int, v: int) -> tuple[str, bytes | None, bytes]:
        return ("p.public.t", *topic.change("u" if lsn > 100 else "c", lsn, 0,
                                            after={"id": id_, "v": v}))

    target = tmp_path / "lake"
    config = MergeConfig("unused:9092", "http://unused", str(target), topic_prefix="p",
                         consistent_cuts=True, fast_merge="off")
    processor = BatchProcessor(spark, config, "test-app", schemas)
    pending = target / "_pgcdc" / "pending" / "test-app"
    batches = [
        [change(10, 1, 1), change(20, 2, 1), _beat(15)],  # no bound yet: both wait
        [change(30, 1, 2), _beat(35)],  # bound 15: lsn 10 applied, 20 and 30 wait
        [_beat(50)],  # bound 35: 20 and 30 applied
        [change(40, 2, 9)],  # bound 50: applied; no heartbeat, same bound next time
        [change(60, 1, 3)],  # bound 50: waits; no cut (the bound did not move)
    ]
    assert processor.store is not None
    write_state = processor.store.write_state

    def crash_once(state: Any) -> None:  # batch 1 stops after its tables, records and cut
        if state.batch_id == 1 and not crashed:
            crashed.append(True)
            raise RuntimeError("crash")
        write_state(state)
    crashed: list[bool] = []
    processor.store.write_state = crash_once  # type: ignore[method-assign]
    try:
        offset = 0
        for batch_id, records in enumerate(batches):
            frame = _kafka(spark, records, offset)
            if batch_id == 1:  # Spark runs the crashed batch again, same id and offsets
                with pytest.raises(RuntimeError, match="crash"):
                    processor(frame, batch_id)
                processor(frame, batch_id)
            processor(frame, batch_id)  # (batch 1: once more after it completed: skipped)
            offset += len(records)
        assert processor.stats.dead_letters == 0 and processor.stats.failed_tables == {}
    finally:
        processor.close()
    cuts = read_cuts(str(target))
    assert [(c.lsn, c.batch_id) for c in cuts] == [(14, 1), (34, 2), (49, 3)]
    assert [_at(target, c.versions["public/t"]) for c in cuts] == [
        {1: 1}, {1: 2, 2: 1}, {1: 2, 2: 9}]
    assert processor.stats.held == 1  # lsn 60, stored for the next batch
    states = sorted(p.name for p in pending.glob("state-*.json"))
    assert states == [f"state-{4:012d}.json"]  # older states and records pruned
    held = spark.read.parquet(str(pending / f"batch-{4:012d}")).collect()
    assert [(r["topic"], r["offset"]) for r in held] == [("p.public.t", 7)]


def test_a_target_filled_without_cuts_gets_none_below_what_it_holds(
        spark: SparkSession, tmp_path: Path) -> None:
    """The tables hold changes up to LSN 60 (written without --consistent-cuts, or by a
    --replay): old heartbeats replayed from the earliest offsets must not give a cut below."""
    topic, schemas = _setup()
    target = tmp_path / "lake"
    rows = [("p.public.t", *topic.change("c", lsn, 0, after={"id": lsn, "v": 1}))
            for lsn in (10, 60)]
    plain = MergeConfig("unused:9092", "http://unused", str(target), topic_prefix="p")
    first = BatchProcessor(spark, plain, "plain-app", schemas)
    try:
        first(_kafka(spark, rows, 0), 0)
    finally:
        first.close()
    config = MergeConfig("unused:9092", "http://unused", str(target), topic_prefix="p",
                         consistent_cuts=True)
    processor = BatchProcessor(spark, config, "cuts-app", schemas)
    try:
        processor(_kafka(spark, [*rows, _beat(35)], 0), 0)
        processor(_kafka(spark, [_beat(80)], 3), 1)  # bound 35: 10 again, a no-op; 60 waits
        assert read_cuts(str(target)) == []  # a cut at 34 would claim 60 is not in the table
        processor(_kafka(spark, [("p.public.t", *topic.change("u", 70, 0,
                                                              after={"id": 10, "v": 2}))],
                         4), 2)  # bound 80
    finally:
        processor.close()
    cuts = read_cuts(str(target))
    assert [(c.lsn, c.batch_id) for c in cuts] == [(79, 2)]
    assert _at(target, cuts[0].versions["public/t"]) == {10: 2, 60: 1}

"""--consistent-cuts through `BatchProcessor` over static Kafka-shaped DataFrames (the shared
Spark session, no Kafka): changes wait for a heartbeat of an earlier batch, the held-back
records come back in the next batch, a batch re-run after a crash gives the same result, and
every cut reads back as the changes at or below it; tombstones expire below the heartbeats
of two batches earlier (spark_jobs/rules/expiry.py), the same after a crash, also without
--consistent-cuts. The Spark path
(`BatchCut.hold`); the delta-rs path's split is `rows.split_held`
(test_spark_jobs_cut_policy.py) and the e2e test (tests/e2e/test_merge_cuts.py) streams
through it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from connector.avro import AvroEncoder
from spark_jobs.cuts.manifest import read_cuts
from spark_jobs.runtime.config import MergeConfig
from spark_jobs.runtime.job import BatchProcessor
from tests.support.events import LocalRegistry, TableEvents, table_events
from tests.support.schemas import FixedSchemas

COLUMNS = [("id", "int8"), ("v", "int8")]
REGISTRY = LocalRegistry()
HEARTBEATS = AvroEncoder(REGISTRY, prefix="p", db="d")


def _setup() -> tuple[TableEvents, FixedSchemas]:
    topic = table_events(REGISTRY, "p", "public", "t", COLUMNS, ["id"])
    _beat(0)  # registers the heartbeat schema
    return topic, FixedSchemas(REGISTRY.schemas)


def _beat(lsn: int, restart_lsn: int | None = None) -> tuple[str, bytes | None, bytes]:
    topic, key, value = HEARTBEATS.heartbeat(lsn, restart_lsn=restart_lsn, ts_ms=0)
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


class _Progress:
    """What the job reads of its StreamingQuery: Spark's report of the last batch."""
    lastProgress: dict[str, Any] | None = None  # noqa: N815 - Spark's name


@pytest.mark.parametrize(("fast_merge", "cuts", "limit"), [
    ("off", True, None), ("auto", True, None), ("auto", False, 0), ("auto", False, None)])
def test_tombstones_expire_below_heartbeats_two_batches_old(
        spark: SparkSession, tmp_path: Path, fast_merge: str, cuts: bool, limit: int | None,
        caplog: pytest.LogCaptureFixture) -> None:
    """Batch 2 expires below min(W, R) = min(30, 25) of batch 0's heartbeat: the tombstone at
    20 goes, the one at 27 stays; batch 2 crashes after the expiry and its re-run deletes with
    the same bound (from batch 1's persisted state). Through Spark and through delta-rs, with
    --consistent-cuts (whose cut keeps the tombstones' version from before the expiry, for
    `pgcdc verify`) and without (the heartbeat state alone, under _pgcdc/heartbeats). Where
    batches are bounded (the default --max-offsets-per-trigger), batch 2 expires only when
    Spark's report of batch 1 says it read all there was: the run first reports batch 1 as
    left behind, and the expiry waits for the re-run, told otherwise."""
    topic, schemas = _setup()

    def change(op: str, lsn: int, id_: int) -> tuple[str, bytes | None, bytes]:
        row = {"id": id_, "v": lsn}
        return ("p.public.t", *topic.change(op, lsn, 0, before=row if op == "d" else None,
                                            after=None if op == "d" else row))

    target = tmp_path / "lake"
    config = MergeConfig("unused:9092", "http://unused", str(target), topic_prefix="p",
                         consistent_cuts=cuts, fast_merge=fast_merge, maintenance_every=1,
                         max_offsets_per_trigger=limit)
    processor = BatchProcessor(spark, config, "test-app", schemas)
    query = _Progress()
    processor.query = query  # type: ignore[assignment]

    def report(batch_id: int, behind: int) -> None:
        query.lastProgress = {"batchId": batch_id, "sources": [
            {"metrics": {"maxOffsetsBehindLatest": str(behind)}}]}
    tombstones = target / "_pgcdc" / "tombstones" / "public" / "t"

    def stones(version: int | None = None) -> list[int]:
        return sorted(r["_cdc_commit_lsn"] for r in DeltaTable(
            str(tombstones), version=version).to_pyarrow_table().to_pylist())
    store = processor.store if cuts else processor.beats
    assert store is not None and (processor.store is None) != cuts
    write_state = store.write_state
    crashed: list[bool] = []

    def crash_once(state: Any) -> None:  # batch 2 stops after its tables and its expiry
        if state.batch_id == 2 and not crashed:
            crashed.append(True)
            raise RuntimeError("crash")
        write_state(state)
    store.write_state = crash_once  # type: ignore[method-assign]
    caplog.set_level("INFO", logger="spark_jobs")  # the job and its expiry (cuts/expiry.py)
    try:
        processor(_kafka(spark, [change("c", 10, 1), change("d", 20, 1), change("c", 12, 2),
                                 change("d", 27, 2), _beat(30, 25)], 0), 0)
        processor(_kafka(spark, [_beat(40, 40)], 5), 1)  # bound 30: all applied
        assert stones() == [20, 27]
        bounded = config.batch_limit is not None
        if bounded:  # batch 1 left records behind: its heartbeats vouch for nothing read yet
            report(1, 7)
            with pytest.raises(RuntimeError):
                processor(_kafka(spark, [], 6), 2)
            assert stones() == [20, 27]
            crashed.clear()
            report(1, 0)
        for _ in range(2):  # the crash, then Spark's re-run: bound 25 both times
            try:
                processor(_kafka(spark, [], 6), 2)
            except RuntimeError:
                assert stones() == [27]
        assert crashed == [True]
        assert stones() == [27]
        assert bounded == any("expiry waits" in r.getMessage() for r in caplog.records)
    finally:
        processor.close()
    expired = [r.getMessage() for r in caplog.records if "expired" in r.getMessage()]
    assert expired == [f"batch 2: {target}/public/t: "
                       "1 tombstone(s) below 0/19 expired"]
    assert _at(target, DeltaTable(str(target / "public" / "t")).version()) == {}
    recorded = read_cuts(str(target))
    if cuts:  # the cuts of batches 1 and 2 read both tombstones, one expired since
        assert [(c.lsn, stones(c.tombstones["public/t"])) for c in recorded] == [
            (29, [20, 27]), (39, [20, 27])]
    else:
        assert recorded == []
        beats = target / "_pgcdc" / "heartbeats" / "test-app"
        assert sorted(p.name for p in beats.glob("state-*.json")) == [
            f"state-{1:012d}.json", f"state-{2:012d}.json"]

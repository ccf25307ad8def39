"""The merge job end to end: events in Kafka (real broker, real registry) → Delta tables."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from connector.names import table_topic
from spark_jobs.rules.names import table_of
from spark_jobs.runtime.config import MergeConfig
from spark_jobs.runtime.job import BatchProcessor
from spark_jobs.runtime.query import ReplayTargetNotEmpty, run_merge, start_merge
from tests.support import merge_scenario as scenario
from tests.support.merge import CdcPublisher, all_tables, table_rows

pytestmark = pytest.mark.e2e


def _config(kafka, registry, prefix: str, target: Path, **kw) -> MergeConfig:  # type: ignore[no-untyped-def]
    return MergeConfig(bootstrap_servers=kafka.bootstrap, schema_registry_url=registry.url,
                       target=str(target), topic_prefix=prefix, **kw)


def _assert_expected(spark: SparkSession, target: Path) -> None:
    for table, rows in scenario.EXPECTED.items():
        got = table_rows(spark, f"{target}/{table}", scenario.KEYS[table])
        assert got == rows, table


def _dead_letters(spark: SparkSession, target: Path) -> list[tuple[str, str]]:
    rows = spark.read.parquet(f"{target}/_pgcdc/dead_letter").collect()
    return sorted((r["topic"].rsplit(".", 1)[-1], r["reason"]) for r in rows)


def test_streaming_batches_then_replay_give_the_expected_tables(
        spark: SparkSession, kafka, registry,  # type: ignore[no-untyped-def]
        prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scenario.publish(CdcPublisher(kafka.bootstrap, registry.url, prefix))

    # small micro-batches: changes of one key, and the truncate copies, spread over batches
    streamed = tmp_path / "streamed"
    stats = run_merge(spark, _config(kafka, registry, prefix, streamed, trigger="available-now",
                                     max_offsets_per_trigger=12))
    assert stats.batches >= 3
    assert stats.fast_tables > 0  # small batches: delta-rs, apart from truncates and such
    _assert_expected(spark, streamed)
    assert stats.dead_letters == scenario.CORRUPT_EVENTS
    dead = _dead_letters(spark, streamed)
    assert [t for t, _ in dead] == ["users", "users"]
    assert any("corrupt Avro body" in r for _, r in dead)
    assert any("unknown schema id 987654" in r for _, r in dead)

    # replay: everything from the earliest offsets in one go, into an empty target, through
    # Spark alone: both paths give the same tables
    replayed = tmp_path / "replayed"
    stats = run_merge(spark, _config(kafka, registry, prefix, replayed, replay=True,
                                     fast_merge="off"))
    assert stats.batches == 1 and stats.fast_tables == 0
    assert all_tables(spark, str(replayed), scenario.TABLES) == all_tables(
        spark, str(streamed), scenario.TABLES)
    assert _dead_letters(spark, replayed) == dead

    # the fast path's tables replayed in one batch with a limit of 6 events: through delta-rs
    # in rounds of at most 6 records on the driver (4, then 6), the same tables
    rounds: list[int] = []
    collect = BatchProcessor._fast_records

    def counted(self, frames, plans, topics):  # type: ignore[no-untyped-def]
        out = collect(self, frames, plans, topics)
        rounds.append(sum(len(r) for r in out.values()))
        return out
    monkeypatch.setattr(BatchProcessor, "_fast_records", counted)
    fast = ["public/events", "inventory/items"]
    in_rounds = tmp_path / "in-rounds"
    stats = run_merge(spark, MergeConfig(
        kafka.bootstrap, registry.url, str(in_rounds), replay=True, fast_merge_max_events=6,
        topics=tuple(f"{prefix}.{t.replace('/', '.')}" for t in fast)))
    assert stats.batches == 1 and stats.fast_tables == 2
    assert rounds == [4, 6]
    assert all_tables(spark, str(in_rounds), fast) == all_tables(spark, str(streamed), fast)

    # a truncate does not cost a table its fast path: orders (the truncate once per
    # partition, a late duplicate from before it) replayed in one batch through delta-rs
    cut = tmp_path / "cut"
    stats = run_merge(spark, MergeConfig(kafka.bootstrap, registry.url, str(cut), replay=True,
                                         topics=(f"{prefix}.public.orders",)))
    assert stats.batches == 1 and stats.fast_tables == 1
    assert table_rows(spark, f"{cut}/public/orders", "id") == scenario.EXPECTED["public/orders"]

    # running again over the same topics changes nothing (all already applied)
    again = run_merge(spark, _config(kafka, registry, prefix, streamed, trigger="available-now"))
    assert again.events == 0
    with pytest.raises(ReplayTargetNotEmpty):
        run_merge(spark, _config(kafka, registry, prefix, replayed, replay=True))

    # A new checkpoint over the existing target (was its own test, which first built the same
    # tables again): every event is applied a second time, and the positions stored with rows,
    # tombstones and the truncate watermark make all of it a no-op.
    before = all_tables(spark, str(streamed), scenario.TABLES)
    stats = run_merge(spark, _config(kafka, registry, prefix, streamed, trigger="available-now",
                                     checkpoint=str(tmp_path / "other-checkpoint"),
                                     max_offsets_per_trigger=15))
    assert stats.events > 0
    assert all_tables(spark, str(streamed), scenario.TABLES) == before
    _assert_expected(spark, streamed)


def test_stopped_between_batches_restarts_from_the_checkpoint(
        spark: SparkSession, kafka, registry,  # type: ignore[no-untyped-def]
        prefix: str, tmp_path: Path) -> None:
    scenario.publish(CdcPublisher(kafka.bootstrap, registry.url, prefix))
    target = tmp_path / "t"
    config = _config(kafka, registry, prefix, target, trigger="1s", max_offsets_per_trigger=10)
    query, processor = start_merge(spark, config)
    try:
        deadline = time.monotonic() + 180
        while processor.stats.batches < 2 and time.monotonic() < deadline:
            assert query.exception() is None
            time.sleep(0.2)
    finally:
        query.stop()  # interrupts whatever the query is doing
    assert processor.stats.batches >= 2
    resumed = run_merge(spark, _config(kafka, registry, prefix, target,
                                       trigger="available-now"))
    assert resumed.events > 0
    _assert_expected(spark, target)


def test_parquet_change_log_keeps_every_event(
        spark: SparkSession, kafka, registry,  # type: ignore[no-untyped-def]
        prefix: str, tmp_path: Path) -> None:
    scenario.publish(CdcPublisher(kafka.bootstrap, registry.url, prefix))
    target = tmp_path / "log"
    stats = run_merge(spark, _config(kafka, registry, prefix, target, format="parquet",
                                     trigger="available-now", max_offsets_per_trigger=20))
    assert stats.dead_letters == scenario.CORRUPT_EVENTS
    orders = spark.read.parquet(f"{target}/public/orders")
    ops = sorted((r["_cdc_commit_lsn"], r["_cdc_op"]) for r in orders.collect())
    # 4 inserts, an update, the truncate once per partition, 3 later changes, the duplicate
    assert ops == [(110, "c")] * 5 + [(210, "u"), (310, "t"), (310, "t"), (410, "c"),
                                      (420, "c"), (510, "u")]
    assert "_cdc_date" in orders.columns and "_kafka_offset" in orders.columns
    users = spark.read.parquet(f"{target}/public/users")
    assert users.count() == 16  # every decodable users event, duplicates included
    toast = users.where("_cdc_commit_lsn = 600").select("_cdc_toast").collect()
    assert [r[0] for r in toast] == [["bio"], ["bio"]]


def test_lookalike_tables_land_in_distinct_delta_tables(
        spark: SparkSession, kafka, registry,  # type: ignore[no-untyped-def]
        prefix: str, tmp_path: Path) -> None:
    """`x y` / `x_y`, `a.b` / `a_b` and `Users` / `users` used to share topics and Delta
    tables (rows overwriting each other); each now has its own (schemas/README.md, "Names")."""
    publisher = CdcPublisher(kafka.bootstrap, registry.url, prefix)
    names = ["x y", "x_y", "a.b", "a_b", "Users", "users"]
    for i, name in enumerate(names):
        t = publisher.table("public", name, [("id", "int8"), ("name", "text")], ["id"])
        publisher.change(t, "c", 100 + i, 0, after={"id": 1, "name": name})
    publisher.flush()
    target = tmp_path / "t"
    run_merge(spark, _config(kafka, registry, prefix, target, trigger="available-now"))
    paths = {name: f"{target}/{table_of(table_topic(prefix, 'public', name)).path}"
             for name in names}
    assert len(set(paths.values())) == len(names)
    for name, path in paths.items():
        assert table_rows(spark, path, "id") == {1: {"id": 1, "name": name}}, name

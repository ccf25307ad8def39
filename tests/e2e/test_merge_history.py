"""History tables end to end (`--history`): a random workload (with multi-row primary-key
changes, each row's delete and create at one position) published to real Kafka with
late events, duplicates and three partitions (truncates on each), merged in small streaming
batches (the fast path and Spark), then replayed through Spark alone: the history tables
are the same, and as of every commit LSN they hold the topic
folded up to it."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from connector.names import table_topic
from spark_jobs.history.read import as_of_arrow, as_of_spark
from spark_jobs.history.sink import history_path
from spark_jobs.history.versions import at_lsn
from spark_jobs.rules.changes import Position
from spark_jobs.rules.names import table_of
from spark_jobs.runtime.config import MergeConfig
from spark_jobs.runtime.query import ReplayTargetNotEmpty, _check_replay, run_merge
from tests.support.events import TableEvents
from tests.support.merge import CdcPublisher

pytestmark = pytest.mark.e2e
COLUMNS = ["id", "name", "bio", "score", "color"]
V1 = [("id", "int8"), ("name", "text"), ("bio", "text"), ("score", "int4")]
V2 = [("id", "int8"), ("name", "text"), ("bio", "text"), ("color", "text")]  # ADD/DROP


def workload(rng: random.Random, steps: int = 50) -> list[dict[str, Any]]:
    """Source changes in commit order: (schema version, op, position, row, unchanged TOAST)."""
    out: list[dict[str, Any]] = []
    live: set[int] = set()
    for step in range(steps):
        lsn, idx, v2 = 1000 + 10 * step, 0, step >= steps // 2

        def row(k: int, toast: bool = False, v2: bool = v2) -> dict[str, Any]:
            r = {"id": k, "name": rng.choice(["ann", "bob", "cy"]),
                 "bio": None if toast else rng.choice(["b1", "b2", None])}
            r["color" if v2 else "score"] = (rng.choice(["red", "blue"]) if v2
                                             else rng.randint(0, 2))
            return r

        def add(op: str, r: dict[str, Any], toast: tuple[str, ...] = (), v2: bool = v2,
                lsn: int = lsn, half: bool = False) -> None:
            """`half`: the delete of a key change, whose create follows at the same index."""
            nonlocal idx
            out.append({"v2": v2, "op": op, "lsn": lsn, "idx": idx, "row": r, "toast": toast})
            idx += 0 if half else 1
        # a truncate with the schema change (one Spark batch for both: Spark batches cost);
        # late events sent after it include older ones, which it must close
        kind = "truncate" if step == steps // 2 else rng.choice(
            ["insert", "insert", "update", "toast", "delete", "rekey"])
        k = rng.randint(1, 8)
        if kind == "truncate":
            add("t", {})
            live.clear()
        elif k not in live:
            add("c", row(k))
            live.add(k)
        elif kind == "delete":
            add("d", {"id": k})
            live.discard(k)
        elif kind == "rekey":  # UPDATE ... SET id = id + 100 WHERE id IN (up to 3 rows):
            # per row a delete and a create at the row's txn_index, as the producer writes
            for moved in sorted(m for m in live if m + 100 not in live)[:3]:
                add("d", {"id": moved}, half=True)
                add("c", row(moved + 100))
                live.discard(moved)
                live.add(moved + 100)
        else:
            toast = ("bio",) if kind == "toast" else ()
            add("u", row(k, bool(toast)), toast)
    return out


def publish(pub: CdcPublisher, events: list[dict[str, Any]], rng: random.Random) -> None:
    """In commit order, but a tenth of the changes held back and sent last (late), and a
    tenth sent twice (duplicates)."""
    v1 = pub.table("public", "people", V1, ["id"], partitions=3)
    v2 = pub.table("public", "people", V2, ["id"], partitions=3)
    late = [e for e in events if e["op"] != "t" and rng.random() < 0.1]
    again = [e for e in events if e["op"] != "t" and rng.random() < 0.1]
    held = {id(e) for e in late}

    def send(e: dict[str, Any]) -> None:
        t: TableEvents = v2 if e["v2"] else v1
        if e["op"] == "t":
            pub.truncate(t, e["lsn"], e["idx"])
            return
        cols = [c for c, _ in (V2 if e["v2"] else V1)]
        image = {c: e["row"].get(c) for c in cols}
        if e["op"] == "d":
            pub.change(t, "d", e["lsn"], e["idx"], before=image)
        else:
            pub.change(t, e["op"], e["lsn"], e["idx"], after=image, unchanged_toast=e["toast"])
    for e in events:
        if id(e) not in held:
            send(e)
    for e in late + again:
        send(e)
    pub.flush()


def fold(events: list[dict[str, Any]], at: Position) -> dict[int, dict[str, Any]]:
    table: dict[int, dict[str, Any]] = {}
    for e in events:  # in commit order already
        if (e["lsn"], e["idx"]) > at:
            break
        if e["op"] == "t":
            table.clear()
        elif e["op"] == "d":
            table.pop(e["row"]["id"], None)
        else:
            old = table.get(e["row"]["id"]) or {}
            table[e["row"]["id"]] = {c: old.get(c) if c in e["toast"] else e["row"].get(c)
                                     for c in COLUMNS}
    return table


def _config(kafka, registry, prefix: str, target: Path, **kw: Any) -> MergeConfig:  # type: ignore[no-untyped-def]
    return MergeConfig(bootstrap_servers=kafka.bootstrap, schema_registry_url=registry.url,
                       target=str(target), topic_prefix=prefix, history=("public.*",), **kw)


def _rows(path: str) -> tuple[list[str], list[str]]:
    table = DeltaTable(path).to_pyarrow_table()
    return sorted(table.column_names), sorted(map(repr, (
        dict(sorted(r.items())) for r in table.to_pylist())))


def test_history_streamed_equals_replayed_and_as_of_is_the_fold(
        spark: SparkSession, kafka, registry, prefix: str,  # type: ignore[no-untyped-def]
        tmp_path: Path) -> None:
    rng = random.Random(22)
    events = workload(rng)
    publish(CdcPublisher(kafka.bootstrap, registry.url, prefix), events, rng)
    rel = table_of(table_topic(prefix, "public", "people")).path

    streamed = tmp_path / "streamed"
    stats = run_merge(spark, _config(kafka, registry, prefix, streamed, trigger="available-now",
                                     max_offsets_per_trigger=30, database=f"lake_{prefix}"))
    assert stats.batches >= 2 and stats.fast_tables > 0 and not stats.failed_tables
    path = history_path(str(streamed), rel)
    for lsn in sorted({e["lsn"] for e in events}) + [999, 10**6]:
        got = {r["id"]: {c: r.get(c) for c in COLUMNS}
               for r in as_of_arrow(path, lsn=lsn).to_pylist()}
        assert got == fold(events, at_lsn(lsn)), lsn
    registered = spark.table(f"lake_{prefix}.public__people__history")  # --database
    assert registered.count() == DeltaTable(path).to_pyarrow_table().num_rows
    middle = events[len(events) // 2]["lsn"]
    spark_view = as_of_spark(spark, path, lsn=middle).collect()
    assert sorted(r["id"] for r in spark_view) == sorted(fold(events, at_lsn(middle)))

    replayed = tmp_path / "replayed"
    stats = run_merge(spark, _config(kafka, registry, prefix, replayed, replay=True,
                                     fast_merge="off"))
    assert stats.batches == 1 and stats.fast_tables == 0
    assert _rows(history_path(str(replayed), rel)) == _rows(path)
    # (a new checkpoint over a kept target, a re-run batch: test_spark_jobs_history_sink.py)


def test_replay_refuses_a_target_with_history_left(spark: SparkSession, tmp_path: Path) -> None:
    """Old events in a history log would join the replayed ones (same positions: dropped as
    duplicates), so --replay wants them gone like the tables."""
    (tmp_path / "_pgcdc" / "history_log" / "public").mkdir(parents=True)
    config = MergeConfig(bootstrap_servers="k:1", schema_registry_url="http://r",
                         target=str(tmp_path), topic_prefix="p", replay=True)
    with pytest.raises(ReplayTargetNotEmpty):
        _check_replay(spark, config)
    (tmp_path / "_pgcdc" / "history_log" / "public").rmdir()
    _check_replay(spark, config)  # an empty directory is no history


def test_as_of_in_spark_equals_as_of_in_arrow(spark: SparkSession, tmp_path: Path) -> None:
    """The two readers agree, by LSN, by exact position and by commit time (Spark's timestamp
    literal in the session time zone, UTC here)."""
    from pyspark.sql.types import LongType

    from spark_jobs.history.sink import HistorySink
    from spark_jobs.history.versions import Tracking
    from spark_jobs.rules.changes import IDX, LSN, OP, TOAST, TS

    def event(k: int, op: str, lsn: int, idx: int = 0, **cols: Any) -> dict[str, Any]:
        return {"id": k, **cols, OP: op, LSN: lsn, IDX: idx, TS: lsn * 1000, TOAST: []}
    HistorySink(str(tmp_path), "s/t", "app", Tracking()).apply(
        [event(1, "c", 100, v=1), event(1, "d", 200), event(1, "c", 200, 1, v=2),
         event(2, "c", 300, v=3), event(1, "u", 400, v=4)],
        {"id": LongType(), "v": LongType()}, ["id"], 0)
    path = history_path(str(tmp_path), "s/t")

    def same(arrow: Any, df: Any) -> None:
        assert sorted(map(repr, arrow.to_pylist())) == sorted(
            repr(r.asDict()) for r in df.collect())
    for lsn in (99, 100, 200, 350, 400):
        same(as_of_arrow(path, lsn=lsn), as_of_spark(spark, path, lsn=lsn))
    same(as_of_arrow(path, lsn=200, txn_index=0), as_of_spark(spark, path, lsn=200, txn_index=0))
    for seconds in (150, 200, 250, 400):
        at = f"1970-01-01 00:{seconds // 60:02d}:{seconds % 60:02d}"
        same(as_of_arrow(path, timestamp=seconds * 1000), as_of_spark(spark, path, timestamp=at))
    assert [r["v"] for r in as_of_spark(spark, path, timestamp="1970-01-01 00:05:00").where(
        "id = 1").collect()] == [2]

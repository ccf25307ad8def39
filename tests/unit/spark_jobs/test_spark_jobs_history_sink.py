"""The history tables through delta-rs (spark_jobs/history/sink.py), on local Delta tables:
random batches of a random workload, delivered out of order with duplicates, re-run batches
and a second app id, give the versions `history.versions` computes from the set of events."""

from __future__ import annotations

import datetime as dt
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.types import (
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

from spark_jobs.history.read import as_of_arrow
from spark_jobs.history.sink import HistorySink, history_path
from spark_jobs.history.versions import CURRENT, FROM_LSN, FROM_TS, TO_LSN, Tracking, versions
from spark_jobs.rules.changes import OP
from tests.unit.spark_jobs.test_spark_jobs_history import COLUMNS, KEY, event, workloads

TYPES = {"k": LongType(), "a": LongType(), "b": StringType(), "big": StringType(),
         "late": LongType()}


def stored(target: Path) -> list[dict[str, Any]]:
    rows = DeltaTable(history_path(str(target), "s/t")).to_pyarrow_table().to_pylist()
    return sorted(({c: r.get(c) for c in [*COLUMNS, FROM_LSN, TO_LSN]} for r in rows), key=repr)


def expected(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(({c: v[c] for c in [*COLUMNS, FROM_LSN, TO_LSN]}
                   for v in versions(events, KEY, COLUMNS)), key=repr)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data(), source=workloads())
def test_batches_in_any_order_give_the_versions_of_the_event_set(
        tmp_path_factory: Any, data: st.DataObject, source: list[dict[str, Any]]) -> None:
    target = tmp_path_factory.mktemp("lake")
    dup = data.draw(st.lists(st.sampled_from(source), max_size=4))
    arrival = data.draw(st.permutations(source + dup))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(arrival)), max_size=3)))
    sink = HistorySink(str(target), "s/t", "app", Tracking())
    batches = [arrival[lo:hi] for lo, hi in zip([0, *cuts], [*cuts, len(arrival)], strict=True)]
    for batch_id, batch in enumerate(batches):
        sink.apply(batch, {c: TYPES[c] for c in COLUMNS if any(c in e for e in batch)}, KEY,
                   batch_id)
        if data.draw(st.booleans()):  # re-run by Spark after a crash: nothing changes
            assert sink.apply(batch, TYPES, KEY, batch_id).written == 0
    if not any(e[OP] != "t" for e in source):
        return
    assert stored(target) == expected(source)
    # a new checkpoint (another app id) over the same events changes nothing
    other = HistorySink(str(target), "s/t", "other-app", Tracking())
    other.apply(arrival, TYPES, KEY, 0)
    assert stored(target) == expected(source)


def test_columns_added_and_widened_and_timestamps(tmp_path: Path) -> None:
    sink = HistorySink(str(tmp_path), "s/t", "app", Tracking())
    sink.apply([event(1, "c", 100, a=1), event(2, "c", 100, 1, a=2)],
               {"k": LongType(), "a": IntegerType()}, KEY, 0)
    sink.apply([event(1, "u", 200, a=2**40, big="x")],
               {"k": LongType(), "a": LongType(), "big": StringType()}, KEY, 1)
    table = DeltaTable(history_path(str(tmp_path), "s/t"))
    types = {f.name: f.type for f in table.schema().fields}
    assert str(types["a"]) == 'PrimitiveType("long")' and "big" in types
    rows = sorted(table.to_pyarrow_table().to_pylist(), key=lambda r: (r["k"], r[FROM_LSN]))
    assert [(r["k"], r["a"], r["big"], r[TO_LSN]) for r in rows] == [
        (1, 1, None, 200), (1, 2**40, "x", None), (2, 2, None, None)]
    assert rows[0][FROM_TS].timestamp() == 100.0  # _cdc_ts_ms 100,000: commit time


def test_a_late_event_can_merge_versions_away(tmp_path: Path) -> None:
    """An update arriving first opens a version; the older insert with the same values, late,
    makes it an in-place update of the insert's version: the stored row goes."""
    sink = HistorySink(str(tmp_path), "s/t", "app", Tracking())
    types = {"k": LongType(), "a": LongType()}
    sink.apply([event(1, "u", 300, a=1)], types, KEY, 0)
    sink.apply([event(1, "c", 100, a=1)], types, KEY, 1)
    rows = DeltaTable(history_path(str(tmp_path), "s/t")).to_pyarrow_table().to_pylist()
    assert [(r[FROM_LSN], r[TO_LSN]) for r in rows] == [(100, None)]


def test_a_truncate_recomputes_only_the_keys_open_at_it(tmp_path: Path) -> None:
    """A truncate closes the versions open at it: only their keys are recomputed; its copy
    from another partition, in a later batch, recomputes nothing."""
    sink = HistorySink(str(tmp_path), "s/t", "app", Tracking())
    types = {"k": LongType(), "a": LongType()}
    before = [event(1, "c", 100, a=1), event(1, "d", 150), event(2, "c", 200, a=2),
              event(3, "c", 400, a=3)]
    assert sink.apply(before, types, KEY, 0) == (3, 0, 3)  # new keys: extended
    truncate = event(None, "t", 300)
    assert sink.apply([truncate], types, KEY, 1) == (1, 1, 0)  # key 2 closed at 300
    assert sink.apply([truncate], types, KEY, 2) == (0, 0, 0)
    late = event(3, "u", 250, a=4)  # a late version of key 3, open at the truncate
    assert sink.apply([late, truncate], types, KEY, 3) == (1, 1, 0)
    assert stored(tmp_path) == expected([*before, truncate, late])
    assert sorted((r["k"], r[FROM_LSN], r[TO_LSN]) for r in stored(tmp_path)) == [
        (1, 100, 150), (2, 200, 300), (3, 250, 300), (3, 400, None)]


def test_in_order_batches_extend_the_current_versions(tmp_path: Path) -> None:
    """Batches whose events all follow the log extend the current versions (no part
    recomputed), a truncate after the log closes every current version, and a late event
    recomputes only its part: the history is `versions` of the whole set throughout."""
    sink = HistorySink(str(tmp_path), "s/t", "app", Tracking.of(only=["a"]))
    types = {"k": LongType(), "a": LongType(), "big": StringType()}
    batches = [
        [event(k, "c", 100 + k, a=k, big="x") for k in range(4)],
        [event(0, "u", 200, a=9, big="y"), event(1, "u", 210, 0, ("big",), a=1),  # in place
         event(2, "d", 220), event(0, "u", 230, 0, ("big",), a=5)],
        [event(None, "t", 300), event(1, "c", 310, a=1, big="z")],
        [event(3, "u", 250, a=7, big="w"), event(2, "c", 400, a=2, big="v")],  # 3 late
    ]
    folded = []
    for batch_id, batch in enumerate(batches):
        folded.append(sink.apply(batch, types, KEY, batch_id)[1:])
        seen = [e for b in batches[:batch_id + 1] for e in b]
        want = sorted(({c: v[c] for c in [*COLUMNS, FROM_LSN, TO_LSN]}
                       for v in versions(seen, KEY, COLUMNS, Tracking.of(only=["a"]))),
                      key=repr)
        assert stored(tmp_path) == want, batch_id
    # (recomputed, extended) parts: the truncate's batch extends every part with a current
    # version; the last batch recomputes key 3 and extends key 2
    assert folded == [(0, 4), (0, 3), (0, 1), (1, 1)]


def test_an_event_behind_another_parts_is_not_late(tmp_path: Path) -> None:
    """Kafka partitions read a little behind each other: an event older than the log's end
    but newer than its own part's logged events extends its part; one older than its own
    part's recomputes it. After a restart, the log's end bounds every part."""
    types = {"k": LongType(), "a": LongType()}
    sink = HistorySink(str(tmp_path), "s/t", "app", Tracking())
    batches = [[event(1, "c", 100, a=1), event(2, "c", 101, a=1)],
               [event(1, "u", 110, a=2)],
               [event(2, "u", 105, a=2), event(1, "u", 120, a=3)],
               [event(1, "u", 115, a=4)]]
    assert [sink.apply(b, types, KEY, i)[1:] for i, b in enumerate(batches)] == [
        (0, 2), (0, 1), (0, 2), (1, 0)]
    restarted = HistorySink(str(tmp_path), "s/t", "app", Tracking())
    batches += [[event(2, "u", 119, a=5)], [event(2, "u", 130, a=6)]]
    assert [restarted.apply(b, types, KEY, 4 + i)[1:] for i, b in enumerate(batches[4:])] == [
        (1, 0), (0, 1)]
    assert stored(tmp_path) == expected([e for b in batches for e in b])


@pytest.mark.parametrize("new_checkpoint", [False, True], ids=["same sink", "new checkpoint"])
def test_a_history_that_misses_logged_events_is_recomputed_whole(
        tmp_path: Path, monkeypatch: Any, new_checkpoint: bool) -> None:
    """The history commit fails after the log's (a crash between the two): the next batch,
    by the same sink or a new checkpoint's, does not extend the stale current versions but
    recomputes the whole table."""
    types = {"k": LongType(), "a": LongType()}
    sink = HistorySink(str(tmp_path), "s/t", "app", Tracking())
    first = [event(1, "c", 100, a=1), event(2, "c", 110, a=1)]
    sink.apply(first, types, KEY, 0)

    def crash(*_: Any) -> None:
        raise OSError("crashed before the history commit")
    lost = [event(1, "u", 200, a=2)]
    with monkeypatch.context() as patched:
        patched.setattr(HistorySink, "_commit", crash)
        with pytest.raises(OSError):
            sink.apply(lost, types, KEY, 1)
    if new_checkpoint:
        sink = HistorySink(str(tmp_path), "s/t", "new-app", Tracking())
    later = [event(1, "u", 300, 0, ("a",)), event(2, "u", 310, a=3)]
    assert sink.apply(later, types, KEY, 5)[1] is None  # the whole table
    assert stored(tmp_path) == expected([*first, *lost, *later])


def test_closed_versions_go_to_their_own_partition_untouched(tmp_path: Path) -> None:
    """The history is partitioned by `__is_current` (a table written unpartitioned is
    rewritten so): a batch that closes current versions reads and rewrites only files of
    the current partition."""
    sink = HistorySink(str(tmp_path), "s/t", "app", Tracking())
    types = {"k": LongType(), "a": LongType()}
    path = history_path(str(tmp_path), "s/t")
    events = [event(k, "c", 100 + k, a=0) for k in range(6)]
    sink.apply(events, types, KEY, 0)
    data = DeltaTable(path).to_pyarrow_table()  # as a history written before the partitioning
    shutil.rmtree(path)
    write_deltalake(path, data)
    assert DeltaTable(path).metadata().partition_columns == []
    for batch_id, lsn in enumerate((200, 300, 400), start=1):
        batch = [event(k, "u", lsn + k, a=lsn) for k in range(6)]
        events += batch
        sink.apply(batch, types, KEY, batch_id)
    table = DeltaTable(path)
    assert table.metadata().partition_columns == [CURRENT]
    metrics = table.history(1)[0]["operationMetrics"]
    assert metrics["num_target_files_skipped_during_scan"] >= 2  # the closed batches' files
    assert stored(tmp_path) == expected(events)


def test_as_of_reads_by_lsn_position_and_time(tmp_path: Path) -> None:
    sink = HistorySink(str(tmp_path), "s/t", "app", Tracking())
    types = {"k": LongType(), "a": LongType()}
    sink.apply([event(1, "c", 100, a=1), event(1, "d", 200, 0), event(1, "c", 200, 1, a=2),
                event(2, "c", 300, a=3)], types, KEY, 0)
    path = history_path(str(tmp_path), "s/t")

    def rows(table: Any) -> list[tuple[int, int]]:
        return sorted((r["k"], r["a"]) for r in table.to_pylist())
    assert rows(as_of_arrow(path, lsn=99)) == []
    assert rows(as_of_arrow(path, lsn=150)) == [(1, 1)]
    assert rows(as_of_arrow(path, lsn=200, txn_index=0)) == []  # inside the key change
    assert rows(as_of_arrow(path, lsn=200)) == [(1, 2)]
    assert rows(as_of_arrow(path, lsn=10**6)) == [(1, 2), (2, 3)]
    assert rows(as_of_arrow(path, timestamp=250_000)) == [(1, 2)]  # epoch ms
    assert as_of_arrow(path, lsn=150).column_names == ["k", "a"]


def test_compaction_keeps_the_rows(tmp_path: Path) -> None:
    sink = HistorySink(str(tmp_path), "s/t", "app", Tracking(), maintain_every=3)
    types = {"k": LongType(), "a": LongType()}
    events = [event(k % 3, "u", 100 + k, a=k) for k in range(7)]
    for batch_id, e in enumerate(events):
        sink.apply([e], types, KEY, batch_id)
    assert stored(tmp_path) == expected(events)
    # one log file per batch without compaction
    assert len(DeltaTable(f"{tmp_path}/_pgcdc/history_log/s/t").file_uris()) < 7


def test_both_paths_inputs_give_the_same_history(tmp_path: Path) -> None:
    """The fast path's Python rows (temporal values as Avro's integers) and the Spark path's
    Arrow table (`toArrow()`: typed arrays, timestamps in the session time zone) of the same
    events make the same history rows."""
    types = {"k": LongType(), "d": DateType(), "ts": TimestampType(),
             "ntz": TimestampNTZType(), "amount": DecimalType(10, 2)}
    micros = 1_700_000_000_123_456
    rows = [{**event(1, "c", 100), "d": 19_000, "ts": micros, "ntz": micros,
             "amount": Decimal("1.50")},
            {**event(1, "u", 200), "d": 19_001, "ts": micros + 1, "ntz": micros,
             "amount": Decimal("2.50")}]
    wall = dt.datetime(2023, 11, 14, 22, 13, 20, 123456)  # `micros` as a UTC wall clock
    at = wall.replace(tzinfo=dt.UTC).astimezone(dt.timezone(dt.timedelta(hours=2)))
    arrow = pa.Table.from_pylist(
        [{**event(1, "c", 100), "d": dt.date(2022, 1, 8), "ts": at, "ntz": wall,
          "amount": Decimal("1.50")},
         {**event(1, "u", 200), "d": dt.date(2022, 1, 9), "ts": at + dt.timedelta(
             microseconds=1), "ntz": wall, "amount": Decimal("2.50")}],
        schema=pa.schema([("k", pa.int64()), ("_cdc_op", pa.string()),
                          ("_cdc_commit_lsn", pa.int64()), ("_cdc_txn_index", pa.int64()),
                          ("_cdc_ts_ms", pa.int64()), ("_cdc_toast", pa.list_(pa.string())),
                          ("d", pa.date32()), ("ts", pa.timestamp("us", tz="Etc/GMT-2")),
                          ("ntz", pa.timestamp("us")), ("amount", pa.decimal128(10, 2))]))
    got = []
    for name, events in (("rows", rows), ("arrow", arrow)):
        HistorySink(str(tmp_path / name), "s/t", "app", Tracking()).apply(
            events, types, KEY, 0)
        table = DeltaTable(history_path(str(tmp_path / name), "s/t")).to_pyarrow_table()
        got.append(sorted(map(repr, table.to_pylist())))
    assert got[0] == got[1] and len(got[0]) == 2

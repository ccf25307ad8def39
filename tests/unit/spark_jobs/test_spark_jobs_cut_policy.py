"""The pure rules of --consistent-cuts (spark_jobs/rules/cut_policy.py): what the bound is, what a
batch holds back, when a cut is recorded, and the state carried across batches, restarts and
new checkpoints."""

from __future__ import annotations

import pytest

from spark_jobs.events.rows import TopicRows, split_held
from spark_jobs.rules.cut_policy import (
    STALE_MS,
    CutState,
    after,
    bound,
    cut_lsn,
    heartbeat_lsns,
    held,
    initial,
    records_cut,
    snapshot_row,
    stale_warning,
)
from spark_jobs.runtime.config import MergeConfig

LSN, OP, IDX, TS, TOAST = "_cdc_commit_lsn", "_cdc_op", "_cdc_txn_index", "_cdc_ts_ms", "_cdc_toast"


def step(state: CutState, batch: int, heartbeat: int | None, recorded: bool | None = None,
         now: int = 0) -> CutState:
    b = bound(state)
    rec = records_cut(state, b) if recorded is None else recorded
    return after(state, batch, b, heartbeat, None, None, {}, rec, now)


def test_no_bound_until_a_heartbeat_of_an_earlier_batch() -> None:
    s0 = initial(None, {}, 0)
    assert bound(s0) is None
    s1 = step(s0, 0, None)
    assert bound(s1) is None  # still no heartbeat
    s2 = step(s1, 1, 500)
    assert s2.bound is None  # batch 1's own heartbeat does not count for batch 1
    assert bound(s2) == 500  # ... it is batch 2's bound
    s3 = step(s2, 2, None)
    assert s3.bound == 500 and s3.last_cut == 499 and bound(s3) == 500


def test_bound_is_the_highest_heartbeat_seen_and_never_goes_back() -> None:
    s = step(step(initial(None, {}, 0), 0, 900), 1, 700)
    assert bound(s) == 900
    assert heartbeat_lsns([None, 0, 300, 200]) == 300
    assert heartbeat_lsns([0, None]) is None


def test_held_back_is_everything_not_vouched_for() -> None:
    # Without a bound everything with a position waits; undecodable records never do.
    assert held(10, None)
    assert not held(None, None)
    assert not held(None, 100)
    # A transaction is vouched for when its commit record starts before the heartbeat's LSN.
    assert not held(99, 100)
    assert held(100, 100)
    assert held(101, 100)


def test_snapshot_rows_at_the_bound_belong_to_the_cut_before_it() -> None:
    assert snapshot_row("r", 5) and snapshot_row("t", -1)
    assert not snapshot_row("t", 0) and not snapshot_row("c", 0) and not snapshot_row(None, None)
    assert not held(100, 100, snapshot=True)  # rows of the snapshot at P = bound
    assert held(101, 100, snapshot=True)
    assert held(100, None, snapshot=True)
    assert held(100, 100, snapshot=False)  # a commit record starting exactly at P


def test_cuts_are_recorded_when_the_bound_advances_only() -> None:
    s = step(step(initial(None, {}, 0), 0, 500), 1, None)
    assert s.last_cut == cut_lsn(500) == 499
    assert not records_cut(s, bound(s))  # an idle batch: same bound
    s = step(s, 2, 800)
    assert not records_cut(s, 500)
    assert records_cut(s, 800)
    assert not records_cut(s, None)


def test_a_new_application_never_records_below_the_manifest() -> None:
    fresh = initial(1000, {"public/a": 7}, 0)
    assert not records_cut(fresh, 900)  # old heartbeats replayed from the earliest offsets
    assert not records_cut(fresh, 1001)  # cut 1000: the one already recorded
    assert records_cut(fresh, 1002)
    assert fresh.versions == {"public/a": 7}


def test_state_keeps_versions_ts_and_pending_and_round_trips() -> None:
    s = initial(None, {"public/a": 1}, 0)
    s = after(s, 4, 500, 600, 1_700_000, "/p/batch-4", {"public/b": 3}, True, 10)
    s = after(s, 5, 600, None, 1_600_000, None, {"public/a": 2}, True, 20)
    assert s.versions == {"public/a": 2, "public/b": 3}
    assert s.source_ts_ms == 1_700_000  # the newest seen so far
    assert s.pending is None and s.batch_id == 5 and s.last_cut == 599
    assert CutState.from_json(s.to_json()) == s


def test_warning_names_the_producer_option_once_heartbeats_stop() -> None:
    s = initial(None, {}, 0)
    assert stale_warning(s, True, "p.heartbeat", STALE_MS - 1) is None
    text = stale_warning(s, True, "p.heartbeat", STALE_MS)
    assert text is not None and "--heartbeat-interval-s" in text and "p.heartbeat" in text
    assert stale_warning(s, False, "p.heartbeat", 10 * STALE_MS) is None  # nothing held
    s = step(s, 0, 500, now=5 * STALE_MS)  # a heartbeat: the clock restarts
    assert stale_warning(s, True, "p.heartbeat", 5 * STALE_MS + 1) is None
    later = stale_warning(s, True, "p.heartbeat", 7 * STALE_MS)
    assert later is not None and "no new heartbeat for" in later


def _row(lsn: int, op: str = "u", idx: int = 0, toast: list[str] | None = None
         ) -> dict[str, object]:
    return {"id": lsn, LSN: lsn, OP: op, IDX: idx, TS: lsn, TOAST: toast or []}


def test_fast_path_split_keeps_counts_of_what_it_applies() -> None:
    batch = TopicRows(rows=[_row(10, "d"), _row(20, toast=["x"]), _row(30, "t"),
                            _row(20, "r", 5), _row(40, "c")],
                      columns=["id"], truncates=1, deletes=1, toast={"x"})
    keep, waiting = split_held(batch, 20)
    assert [r[LSN] for r in keep.rows] == [10, 20]  # the snapshot row at 20 only
    assert waiting == [1, 2, 4]
    assert (keep.deletes, keep.truncates, keep.toast, keep.columns) == (1, 0, set(), ["id"])
    none, all_waiting = split_held(batch, None)
    assert none.rows == [] and all_waiting == [0, 1, 2, 3, 4]


def _config(**kw: object) -> MergeConfig:
    base: dict[str, object] = {"bootstrap_servers": "k:9092", "schema_registry_url": "http://r",
                               "target": "/lake", "topic_prefix": "p", "consistent_cuts": True}
    return MergeConfig(**{**base, **kw})  # type: ignore[arg-type]


def test_config_subscribes_to_heartbeats_and_refuses_what_breaks_the_argument() -> None:
    option, pattern = _config().subscription()
    assert option == "subscribePattern"
    assert pattern == r"^p\.[^.]+\.[^.]+$|^p\.heartbeat$"
    # every run with a prefix subscribes to the heartbeats (one subscription per checkpoint,
    # whatever the run); plain streaming uses them for tombstone expiry, unless it expires none
    assert _config(consistent_cuts=False).subscription()[1] == pattern
    assert _config(consistent_cuts=False).reads_heartbeats
    assert _config(consistent_cuts=False, maintenance_every=0).subscription()[1] == pattern
    assert not _config(consistent_cuts=False, maintenance_every=0).reads_heartbeats
    listed = _config(topic_prefix=None, topics=("x.y.public.a", "x.y.public.b"))
    assert listed.subscription() == ("subscribe", "x.y.public.a,x.y.public.b,x.y.heartbeat")
    for kw, words in [({"trigger": "available-now"}, "available-now"),
                      ({"replay": True}, "available-now"),
                      ({"max_offsets_per_trigger": 10}, "--max-offsets-per-trigger"),
                      ({"format": "parquet"}, "_cdc_commit_lsn"),
                      ({"target": "hdfs://nn/lake"}, "delta-rs"),
                      ({"topic_prefix": None, "topics": ("a.s.t", "b.s.t")}, "one prefix")]:
        with pytest.raises(ValueError, match=words):
            _config(**kw)
    for store in ("s3a://bucket/lake", "abfss://c@a.dfs.core.windows.net/lake", "gs://b/l"):
        assert _config(target=store).consistent_cuts  # delta-rs writes the manifest there


def test_the_command_line_option_reaches_the_config() -> None:
    from spark_jobs.runtime.config import parse_args

    args = ["--bootstrap-servers", "k:9092", "--schema-registry-url", "http://r",
            "--topic-prefix", "p", "--target", "/lake"]
    assert parse_args([*args, "--consistent-cuts"]).consistent_cuts
    assert not parse_args(args).consistent_cuts

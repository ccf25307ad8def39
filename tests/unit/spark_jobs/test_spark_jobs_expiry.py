"""Tombstone expiry (spark_jobs/rules/expiry.py): the bound is min(W, R) of heartbeats read at least
two batches earlier, carried in the persisted per-batch state, so a re-run batch gets the same
one; nothing expires without both numbers; plain streaming expires as --consistent-cuts does,
except where batches read unevenly."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_jobs.rules.cut_policy import CutState, after, bound, initial
from spark_jobs.rules.expiry import expired_predicate, expiry_bound, read_to_listed
from spark_jobs.runtime.config import BATCH_LIMIT, MergeConfig

LSNS = st.one_of(st.none(), st.integers(min_value=1, max_value=2**63 - 1))


@given(LSNS, LSNS)
def test_the_bound_never_passes_either_heartbeat_number(w: int | None, r: int | None) -> None:
    b = expiry_bound(w, r)
    if w is None or r is None:
        assert b is None
    else:
        assert b == min(w, r) and b <= w and b <= r


def test_the_predicate_selects_positions_strictly_below_the_bound() -> None:
    assert expired_predicate(0x1_0000_0010) == f"_cdc_commit_lsn < {0x1_0000_0010}"


def step(state: CutState, batch: int, heartbeat: int | None, restart: int | None
         ) -> CutState:
    return after(state, batch, bound(state), heartbeat, None, None, {}, False, 0, restart)


@given(st.lists(st.tuples(LSNS, LSNS), min_size=1, max_size=8))
def test_a_batch_expires_only_with_heartbeats_two_batches_old(
        beats: list[tuple[int | None, int | None]]) -> None:
    """The bound of batch N (`previous.expiry`, the state after N-1) uses the heartbeats of
    batches up to N-2 only, and survives the state's JSON round trip (the pending store)."""
    states = [initial(None, {}, 0)]
    for n, (w, r) in enumerate(beats):
        states.append(CutState.from_json(step(states[-1], n, w, r).to_json()))
    for n in range(len(beats) + 1):  # batch n's bound: states[n] is the state after n - 1
        older = beats[:max(n - 1, 0)]  # the heartbeats of batches 0 .. n-2
        w = max((b[0] for b in older if b[0]), default=None)
        r = max((b[1] for b in older if b[1]), default=None)
        assert states[n].expiry == expiry_bound(w, r)


def test_a_state_written_before_expiry_existed_reads_back_with_no_bound() -> None:
    old = ('{"advanced_ms": 5, "batch_id": 3, "bound": 100, "last_cut": 99, "pending": null, '
           '"seen": 200, "source_ts_ms": null, "versions": {"public/t": 4}}')
    state = CutState.from_json(old)
    assert (state.restart, state.expiry) == (None, None)
    nxt = step(state, 4, 300, 250)
    assert nxt.expiry is None  # batch 3 read no restart_lsn
    assert step(nxt, 5, None, None).expiry == 250  # batch 4's: min(300, 250)


def test_heartbeats_without_restart_lsn_never_expire_anything() -> None:
    state = initial(None, {}, 0)
    for n in range(4):
        state = step(state, n, 100 * (n + 1), None)
    assert state.seen == 400 and state.expiry is None


def _config(**kw: object) -> MergeConfig:
    base: dict[str, object] = {"bootstrap_servers": "k:9092", "schema_registry_url": "http://r",
                               "target": "/lake", "topic_prefix": "p"}
    return MergeConfig(**{**base, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(("kw", "words"), [
    ({"trigger": "available-now"}, "available-now"),
    ({"replay": True}, "available-now"),
    ({"maintenance_every": 0}, "--maintenance-every 0"),
    ({"format": "parquet"}, "no tombstones"),
    ({"topic_prefix": None, "topics": ("p.s.a", "p.s.b")}, "--topic-prefix"),
])
def test_plain_streaming_expires_nothing_where_batches_read_unevenly(
        kw: dict[str, object], words: str) -> None:
    """Where a heartbeat read in batch N-2 does not vouch for what batch N-1 read (or there is
    nothing to expire, or no heartbeat topic to read), the job says why and uses no
    heartbeats (with a prefix it still subscribes to them: one subscription per
    checkpoint)."""
    config = _config(**kw)
    assert config.expiry_off is not None and words in config.expiry_off
    assert not config.reads_heartbeats
    assert ("heartbeat" in config.subscription()[1]) == bool(config.topic_prefix)


@pytest.mark.parametrize("cuts", [False, True])
def test_streaming_that_reads_evenly_expires_with_or_without_cuts(cuts: bool) -> None:
    config = _config(trigger="1s", consistent_cuts=cuts)
    assert config.expiry_off is None and config.reads_heartbeats
    assert config.subscription()[1].endswith(r"|^p\.heartbeat$")
    listed = _config(topic_prefix=None, topics=("p.s.a",), consistent_cuts=True)
    assert listed.expiry_off is None and listed.subscription()[1] == "p.s.a,p.heartbeat"


def test_plain_streaming_keeps_the_bound_of_cuts_without_a_cut_bound() -> None:
    """Plain streaming steps the state as `BatchProcessor._with_expiry` does (no cut bound,
    nothing held, no versions): the same bound as under --consistent-cuts, batch by batch."""
    beats = [(100, 90), (None, None), (300, 250), (400, 380), (None, None)]
    plain = cuts = initial(None, {}, 0)
    for n, (w, r) in enumerate(beats):
        plain = CutState.from_json(
            after(plain, n, None, w, None, None, {}, False, 0, r).to_json())
        cuts = step(cuts, n, w, r)
        assert plain.expiry == cuts.expiry
    assert [plain.seen, plain.restart, plain.expiry] == [400, 380, 380]  # batch 5: of 0..3
    assert plain.bound is None and plain.pending is None and plain.last_cut is None


@pytest.mark.parametrize(("kw", "limit"), [
    ({}, BATCH_LIMIT),  # streaming, by default
    ({"trigger": "available-now"}, BATCH_LIMIT),  # reads everything, in several batches
    ({"max_offsets_per_trigger": 10}, 10),
    ({"max_offsets_per_trigger": 0}, None),  # everything there
    ({"consistent_cuts": True}, None),  # its argument needs batches that read all listed
])
def test_batches_are_bounded_by_default(kw: dict[str, object], limit: int | None) -> None:
    assert _config(**kw).batch_limit == limit


def test_bounded_streaming_still_expires_and_cuts_refuse_an_explicit_bound() -> None:
    """A bound does not turn expiry off: the job expires after a batch Spark says read all
    there was (`read_to_listed`). --consistent-cuts refuses an explicit bound."""
    assert _config(max_offsets_per_trigger=10).expiry_off is None
    assert _config(max_offsets_per_trigger=0, consistent_cuts=True).batch_limit is None
    with pytest.raises(ValueError, match="--max-offsets-per-trigger"):
        _config(max_offsets_per_trigger=10, consistent_cuts=True)
    with pytest.raises(ValueError, match="positive"):
        _config(max_offsets_per_trigger=-1)


def _progress(batch_id: int, *behind: str | None) -> dict[str, object]:
    return {"batchId": batch_id,
            "sources": [{"metrics": {} if b is None else {"maxOffsetsBehindLatest": b}}
                        for b in behind]}


@pytest.mark.parametrize(("progress", "read_all"), [
    (_progress(6, "0"), True),
    (_progress(6, "0", "0"), True),
    (_progress(6, "12"), False),  # the limit left records behind
    (_progress(6, "0", "3"), False),
    (_progress(7, "0"), False),  # another batch's report (an idle trigger's)
    (_progress(6, None), False),  # no source metrics
    (_progress(6), False),
    (None, False),  # no report yet: a restarted query
])
def test_expiry_needs_the_report_of_the_previous_batch_to_say_it_read_all(
        progress: dict[str, object] | None, read_all: bool) -> None:
    assert read_to_listed(progress, 6) is read_all

"""`pgcdc status`'s lines for incremental snapshot requests (connector/tools/status.py): the
signal table's and those sent over ``<prefix>.signal`` (as the producer folds that topic)."""

from __future__ import annotations

from connector.snapshot.incremental.channel import RequestLog, RequestState
from connector.snapshot.incremental.signal_topic import as_request
from connector.snapshot.incremental.signals import SnapshotRequest
from connector.tools.status import request_lines


def _table_request(id_: int, state: str, **kw: object) -> SnapshotRequest:
    fields: dict = dict(tables=("public.a", "public.b"), table_index=0, last_key=None,
                        chunks=0, rows=0, message=None, rate=None)
    fields.update(kw)
    return SnapshotRequest(id_, "slot_a", state=state, **fields)


def test_signal_table_requests_keep_their_lines() -> None:
    lines = request_lines([
        _table_request(1, "done", chunks=2, rows=300, rate=1500.4),
        _table_request(2, "failed", message="public.b has no primary key"),
        _table_request(3, "running", table_index=1, chunks=4, rows=40_000, rate=12345.6),
        _table_request(4, "pending")])
    assert lines == [
        "incremental snapshot 3: running, at public.b, table 2 of 2; 4 chunk(s), 40000 rows "
        "(12,346 rows/s)",
        "incremental snapshot 4: pending, public.a, public.b; 0 chunk(s), 0 rows",
        # only the last finished one
        "incremental snapshot 2: failed, public.a, public.b; 0 chunk(s), 0 rows; public.b has "
        "no primary key"]


def test_kafka_requests_are_listed_from_the_folded_topic_and_say_so() -> None:
    """The topic holds a whole state per record; the last record of an id wins, and the
    other slot's requests are not listed."""
    log = RequestLog()
    done = RequestState(11, "slot_a", ("public.t",), requested_ms=1)
    log.fold([done.encode(),
              RequestState(11, "slot_a", ("public.t",), "done", 1, None, 3, 25_000,
                           requested_ms=1).encode(),
              RequestState(12, "slot_b", ("public.t",), requested_ms=2).encode(),
              RequestState(13, "slot_a", ("public.t", "public.u"), "running", 1, ("70",), 2,
                           20_000, requested_ms=3).encode()])
    lines = request_lines([as_request(s) for s in log.of_slot("slot_a")], "pgcdc.signal")
    assert lines == [
        "incremental snapshot 13 (over pgcdc.signal): running, at public.u, table 2 of 2; "
        "2 chunk(s), 20000 rows",
        "incremental snapshot 11 (over pgcdc.signal): done, public.t; 3 chunk(s), 25000 rows"]
    assert request_lines([]) == []

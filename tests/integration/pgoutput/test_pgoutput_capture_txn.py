"""Transaction-level messages from real PostgreSQL: logical messages, Origin, streamed
transactions (commit, subtransaction and whole aborts), two-phase commit."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from connector.pgoutput import (
    Begin,
    BeginPrepare,
    Commit,
    CommitPrepared,
    Insert,
    Message,
    Origin,
    Prepare,
    Relation,
    RollbackPrepared,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    StreamStop,
    pg_timestamp_to_datetime,
    str_to_lsn,
)
from tests.support.pgoutput_pg import Sandbox, decode_rows, of_type
from tests.support.walsender import WalSender

pytestmark = pytest.mark.integration

WIDE_ROWS = "INSERT INTO big SELECT g, repeat(md5(g::text), 4) FROM generate_series({}, {}) g"


def streaming_modes(box: Sandbox) -> list[tuple[int, str]]:
    """(protocol, streaming option) pairs the server supports."""
    modes = [(2, "true"), (3, "on")]
    if box.max_proto >= 4:
        modes += [(4, "on"), (4, "parallel")]
    return modes


def big_table(box: Sandbox) -> tuple[str, str]:
    box.sql("CREATE TABLE big (id int PRIMARY KEY, pad text)")
    return box.publication("big"), box.create_slot()


def test_logical_messages(sandbox: Sandbox) -> None:
    sandbox.sql("CREATE TABLE m (id int)")
    pub = sandbox.publication("m")
    slot = sandbox.create_slot()
    plain_lsn = str_to_lsn(sandbox.one(
        "SELECT pg_logical_emit_message(false, 'wm', 'low watermark')::text"))
    sandbox.sql("BEGIN")
    xid = sandbox.one("SELECT txid_current()")
    txn_lsn = str_to_lsn(sandbox.one(
        "SELECT pg_logical_emit_message(true, 'audit', '\\x00ff'::bytea)::text"))
    sandbox.sql("INSERT INTO m VALUES (1)")
    sandbox.sql("COMMIT")
    for proto in range(1, sandbox.max_proto + 1):
        msgs = decode_rows(sandbox.peek(slot, pub, proto, messages=True))
        assert [type(m) for m in msgs] == [Message, Begin, Message, Relation, Insert, Commit]
        assert msgs[0] == Message(None, 0, plain_lsn, "wm", b"low watermark")
        assert not msgs[0].transactional
        assert msgs[2] == Message(None, 1, txn_lsn, "audit", b"\x00\xff")
        assert msgs[2].transactional and msgs[1].xid == xid
        # without the option, no messages
        assert not of_type(decode_rows(sandbox.peek(slot, pub, proto)), Message)


def test_origin(sandbox: Sandbox) -> None:
    sandbox.sql("CREATE TABLE o (id int PRIMARY KEY)")
    pub = sandbox.publication("o")
    slot = sandbox.create_slot()
    origin = sandbox.name("node_a")
    sandbox.sql("SELECT pg_replication_origin_create(%s)", (origin,))
    try:
        sandbox.sql("SELECT pg_replication_origin_session_setup(%s)", (origin,))
        sandbox.sql("BEGIN")
        sandbox.sql("SELECT pg_replication_origin_xact_setup('1/2345678', now())")
        sandbox.sql("INSERT INTO o VALUES (1)")
        sandbox.sql("COMMIT")
        sandbox.sql("SELECT pg_replication_origin_session_reset()")
        sandbox.sql("INSERT INTO o VALUES (2)")  # not from the origin: no Origin message
        for proto in range(1, sandbox.max_proto + 1):
            msgs = decode_rows(sandbox.peek(slot, pub, proto))
            assert [type(m) for m in msgs] == [Begin, Origin, Relation, Insert, Commit,
                                               Begin, Insert, Commit]
            assert msgs[1] == Origin(origin_lsn=0x1_0234_5678, name=origin)
    finally:
        sandbox.sql("SELECT pg_replication_origin_drop(%s)", (origin,))


def check_stream_blocks(msgs: list[Any], xid: int) -> None:
    """Stream Start/Stop pair up, the first segment is flagged, every change carries an xid."""
    starts = of_type(msgs, StreamStart)
    assert starts and starts[0].first_segment and not any(s.first_segment for s in starts[1:])
    assert len(starts) == len(of_type(msgs, StreamStop))
    inside = False
    for m in msgs:
        if isinstance(m, StreamStart):
            assert not inside and m.xid == xid
            inside = True
        elif isinstance(m, StreamStop):
            inside = False
        elif isinstance(m, Insert | Relation | Message):
            assert inside and m.xid is not None


def test_streamed_transaction_commit(sandbox: Sandbox) -> None:
    pub, slot = big_table(sandbox)
    before = datetime.now(UTC) - timedelta(seconds=1)
    sandbox.sql("BEGIN")
    xid = sandbox.one("SELECT txid_current()")
    sandbox.sql(WIDE_ROWS.format(1, 5000))
    sandbox.sql("SELECT pg_logical_emit_message(true, 'in-stream', 'm')")
    sandbox.sql("COMMIT")
    for proto, mode in streaming_modes(sandbox):
        rows = sandbox.peek(slot, pub, proto, streaming=mode, messages=True)
        msgs = decode_rows(rows)
        check_stream_blocks(msgs, xid)
        assert not of_type(msgs, Begin) and not of_type(msgs, Commit)
        inserts = of_type(msgs, Insert)
        assert [i.new[0] for i in inserts] == [str(n) for n in range(1, 5001)]
        assert {i.xid for i in inserts} == {xid}
        assert inserts[0].new[1] == sandbox.one("SELECT pad FROM big WHERE id = 1")
        (rel,) = of_type(msgs, Relation)
        assert rel.xid == xid and rel.relation_id == sandbox.relid("big")
        (message,) = of_type(msgs, Message)
        assert (message.xid, message.prefix, message.content) == (xid, "in-stream", b"m")
        commit = msgs[-1]
        assert isinstance(commit, StreamCommit) and commit.xid == xid and commit.flags == 0
        assert rows[-1].lsn == commit.end_lsn > commit.commit_lsn
        assert before <= pg_timestamp_to_datetime(commit.commit_timestamp) <= datetime.now(UTC)


def test_streamed_subtransaction_abort(sandbox: Sandbox) -> None:
    pub, slot = big_table(sandbox)
    sandbox.sql("BEGIN")
    xid = sandbox.one("SELECT txid_current()")
    sandbox.sql(WIDE_ROWS.format(1, 3000))
    sandbox.sql("SAVEPOINT s1")
    sandbox.sql(WIDE_ROWS.format(3001, 6000))
    sandbox.sql("ROLLBACK TO SAVEPOINT s1")
    sandbox.sql(WIDE_ROWS.format(6001, 6010))
    sandbox.sql("COMMIT")
    for proto, mode in streaming_modes(sandbox):
        msgs = decode_rows(sandbox.peek(slot, pub, proto, streaming=mode))
        check_stream_blocks(msgs, xid)
        (abort,) = of_type(msgs, StreamAbort)
        assert abort.xid == xid and abort.subxid > xid
        # the subtransaction's streamed changes carry its own xid
        sub_ids = {int(i.new[0]) for i in of_type(msgs, Insert) if i.xid == abort.subxid}
        assert sub_ids and sub_ids <= set(range(3001, 6001))
        assert msgs.index(abort) < len(msgs) - 1 and isinstance(msgs[-1], StreamCommit)
        if mode == "parallel":  # protocol 4 parallel: the abort's LSN and time
            assert abort.abort_lsn is not None and abort.abort_lsn > 0
            assert abort.abort_timestamp is not None
            assert abs(pg_timestamp_to_datetime(abort.abort_timestamp) - datetime.now(UTC)
                       ) < timedelta(minutes=1)
        else:
            assert abort.abort_lsn is None and abort.abort_timestamp is None


def test_streamed_transaction_rollback_sql_interface_pg15(sandbox: Sandbox) -> None:
    """Through the SQL interface the whole-transaction abort shows on 15; 18 skips decoding
    transactions it already knows aborted (the walsender test covers it there)."""
    pub, slot = big_table(sandbox)
    sandbox.sql("BEGIN")
    xid = sandbox.one("SELECT txid_current()")
    sandbox.sql(WIDE_ROWS.format(1, 5000))
    sandbox.sql("ROLLBACK")
    msgs = decode_rows(sandbox.peek(slot, pub, 2, streaming="true"))
    if sandbox.version >= 180000:
        assert msgs == []
        return
    check_stream_blocks(msgs, xid)
    assert msgs[-1] == StreamAbort(xid, xid)


@pytest.mark.parametrize("mode", ["on", "parallel"])
def test_streamed_transaction_rollback_live_walsender(
        sandbox: Sandbox, walsender_factory: Callable[[str, dict[str, str]], WalSender],
        mode: str) -> None:
    pub, slot = big_table(sandbox)
    proto = sandbox.max_proto
    if mode == "parallel" and proto < 4:
        mode = "on"  # PostgreSQL 15 has no parallel mode: check the plain abort instead
    sender = walsender_factory(slot, {"proto_version": str(proto), "publication_names": pub,
                                      "streaming": mode})
    sandbox.sql("BEGIN")
    xid = sandbox.one("SELECT txid_current()")
    sandbox.sql(WIDE_ROWS.format(1, 5000))
    # decoded and streamed while still running
    streamed = [m for _, m in sender.read_until(lambda m: type(m) is StreamStop)]
    assert streamed[0] == StreamStart(xid, True)
    sandbox.sql("ROLLBACK")
    _, abort = sender.read_until(lambda m: type(m) is StreamAbort)[-1]
    assert (abort.xid, abort.subxid) == (xid, xid)
    if mode == "parallel":
        assert abort.abort_lsn is not None and abort.abort_lsn > 0
        assert abs(pg_timestamp_to_datetime(abort.abort_timestamp) - datetime.now(UTC)
                   ) < timedelta(minutes=1)
    else:
        assert abort.abort_lsn is None and abort.abort_timestamp is None
    # the frames around the messages parsed too, keepalives included
    assert sender.frames


def test_two_phase_commit_and_rollback_prepared(sandbox: Sandbox) -> None:
    sandbox.sql("CREATE TABLE tp (id int PRIMARY KEY)")
    pub = sandbox.publication("tp")
    slot = sandbox.create_slot(two_phase=True)
    gid_commit, gid_rollback = sandbox.name("gc"), sandbox.name("gr")
    sandbox.sql("BEGIN")
    xid_c = sandbox.one("SELECT txid_current()")
    sandbox.sql("INSERT INTO tp VALUES (1)")
    sandbox.sql(f"PREPARE TRANSACTION '{gid_commit}'")
    sandbox.sql("BEGIN")
    xid_r = sandbox.one("SELECT txid_current()")
    sandbox.sql("INSERT INTO tp VALUES (2)")
    sandbox.sql(f"PREPARE TRANSACTION '{gid_rollback}'")
    sandbox.sql(f"COMMIT PREPARED '{gid_commit}'")
    sandbox.sql(f"ROLLBACK PREPARED '{gid_rollback}'")
    for proto in range(3, sandbox.max_proto + 1):
        msgs = decode_rows(sandbox.peek(slot, pub, proto, two_phase=True))
        assert [type(m) for m in msgs] == [
            BeginPrepare, Relation, Insert, Prepare, BeginPrepare, Insert, Prepare,
            CommitPrepared, RollbackPrepared]
        bp1, _, _, p1, bp2, _, p2, cp, rp = msgs
        assert (bp1.xid, bp1.gid, p1.xid, p1.gid) == (xid_c, gid_commit, xid_c, gid_commit)
        assert (bp2.xid, bp2.gid, p2.xid, p2.gid) == (xid_r, gid_rollback, xid_r, gid_rollback)
        for bp, p in ((bp1, p1), (bp2, p2)):
            assert (bp.prepare_lsn, bp.end_lsn, bp.prepare_timestamp) == (
                p.prepare_lsn, p.end_lsn, p.prepare_timestamp)
            assert p.end_lsn > p.prepare_lsn and p.flags == 0
        assert (cp.xid, cp.gid, cp.flags) == (xid_c, gid_commit, 0)
        assert cp.commit_lsn >= p2.end_lsn and cp.end_lsn > cp.commit_lsn
        assert (rp.xid, rp.gid) == (xid_r, gid_rollback)
        assert rp.prepare_end_lsn == p2.end_lsn and rp.rollback_end_lsn > cp.end_lsn
        assert rp.prepare_timestamp == p2.prepare_timestamp
        assert rp.rollback_timestamp >= cp.commit_timestamp >= p2.prepare_timestamp


def test_stream_prepare(sandbox: Sandbox) -> None:
    sandbox.sql("CREATE TABLE big (id int PRIMARY KEY, pad text)")
    pub = sandbox.publication("big")
    slot = sandbox.create_slot(two_phase=True)
    gid = sandbox.name("big")
    sandbox.sql("BEGIN")
    xid = sandbox.one("SELECT txid_current()")
    sandbox.sql(WIDE_ROWS.format(1, 5000))
    sandbox.sql(f"PREPARE TRANSACTION '{gid}'")
    sandbox.sql(f"COMMIT PREPARED '{gid}'")
    for proto, mode in streaming_modes(sandbox):
        if proto < 3:
            continue
        msgs = decode_rows(sandbox.peek(slot, pub, proto, streaming=mode, two_phase=True))
        check_stream_blocks(msgs, xid)
        assert len(of_type(msgs, Insert)) == 5000
        sp, cp = msgs[-2:]
        assert isinstance(sp, StreamPrepare) and (sp.xid, sp.gid, sp.flags) == (xid, gid, 0)
        assert sp.end_lsn > sp.prepare_lsn
        assert isinstance(cp, CommitPrepared) and (cp.xid, cp.gid) == (xid, gid)
        assert cp.commit_lsn >= sp.end_lsn

"""Two-phase transactions from real PostgreSQL (slot created with two_phase = true): held from
PREPARE TRANSACTION until COMMIT PREPARED (emitted with its commit LSN) or ROLLBACK PREPARED."""

from __future__ import annotations

from typing import Any

import pytest

from connector.assembler import Assembler, Transaction
from connector.errors import DecodeError
from connector.pgoutput import (
    BeginPrepare,
    CommitPrepared,
    Prepare,
    RollbackPrepared,
    StreamPrepare,
    StreamStart,
)
from tests.support.assembler_pg import Db, assemble, of_type, transactions

pytestmark = pytest.mark.integration

PAD = "repeat('x', 200)"


def prepared(conn: Any, gid: str, *statements: str) -> int:
    """Run statements in a transaction and PREPARE it; returns its xid."""
    conn.execute("BEGIN")
    xid = int(conn.execute("SELECT txid_current()").fetchone()[0])
    for statement in statements:
        conn.execute(statement)
    conn.execute(f"PREPARE TRANSACTION '{gid}'")
    return xid


def rows(first: int, last: int) -> str:
    return f"INSERT INTO t SELECT g, {PAD} FROM generate_series({first}, {last}) g"


def ids(txn: Any) -> list[int]:
    return [int(c.message.new[0]) for c in txn.changes]


def test_prepared_transactions_commit_and_rollback(db2pc: Db) -> None:
    db = db2pc
    db.execute("CREATE TABLE t (id int PRIMARY KEY, pad text)")
    slot = db.create_slot(two_phase=True)
    conn = db.connect()
    conn.autocommit = True
    g_small, g_big, g_rb, g_rb_big = (f"{n}_{db.schema}" for n in ("small", "big", "rb",
                                                                   "rbbig"))
    x_small = prepared(conn, g_small, rows(1, 10))
    x_big = prepared(conn, g_big, rows(1001, 4000), "SAVEPOINT s", rows(5001, 7000),
                     "ROLLBACK TO SAVEPOINT s", rows(8001, 8010))
    x_rb = prepared(conn, g_rb, rows(9001, 9005))
    x_rb_big = prepared(conn, g_rb_big, rows(20_001, 23_000))
    conn.execute("INSERT INTO t VALUES (10001, 'plain')")
    conn.execute(f"COMMIT PREPARED '{g_big}'")
    conn.execute(f"ROLLBACK PREPARED '{g_rb}'")
    conn.execute(f"ROLLBACK PREPARED '{g_rb_big}'")

    pairs = db.capture(slot)
    # PostgreSQL sent every prepared transaction at PREPARE time, the big committed one
    # streamed. (The big rolled-back one: PostgreSQL 15 streams it; 18 sees it aborted when
    # decoding and sends it as an empty Begin Prepare .. Prepare.)
    assert {x_small, x_rb} <= {m.xid for m in of_type(pairs, BeginPrepare)}
    assert {x_small, x_rb} <= {m.xid for m in of_type(pairs, Prepare)}
    assert x_big in {m.xid for m in of_type(pairs, StreamPrepare)}
    assert {m.xid for m in of_type(pairs, StreamStart)} <= {x_big, x_rb_big}
    assert {m.xid for m in of_type(pairs, RollbackPrepared)} == {x_rb, x_rb_big}

    asm = Assembler()
    first = transactions(assemble(pairs, asm))
    plain, big = first
    assert big.xid == x_big and plain.xid not in (x_small, x_big, x_rb, x_rb_big)
    (commit_big,) = of_type(pairs, CommitPrepared)
    assert (big.commit_lsn, big.end_lsn, big.commit_timestamp) == (
        commit_big.commit_lsn, commit_big.end_lsn, commit_big.commit_timestamp)
    assert big.gid == g_big and big.streamed and big.prepare_lsn is not None
    assert big.prepare_lsn < big.commit_lsn
    assert ids(big) == list(range(1001, 4001)) + list(range(8001, 8011))
    assert ids(plain) == [10001]
    assert all(c.commit_lsn == commit_big.commit_lsn for c in big.changes)

    # g_small is still prepared: held, and it pins the oldest open LSN at its Begin Prepare
    assert asm.prepared_gids == (g_small,)
    begin_small = next(lsn for lsn, m in pairs if type(m) is BeginPrepare and m.xid == x_small)
    assert asm.oldest_open_lsn == begin_small

    conn.execute(f"COMMIT PREPARED '{g_small}'")
    later = db.capture(slot)
    # The slot has moved past the PREPARE: PostgreSQL sends only COMMIT PREPARED now. That is
    # why the producer must never confirm past the oldest open LSN: a fresh assembler (a restart)
    # cannot know the changes.
    assert [type(m) for _, m in later] == [CommitPrepared]
    with pytest.raises(DecodeError, match="not prepared in this stream"):
        assemble(later, Assembler())
    (small,) = transactions(assemble(later, asm))
    assert small.xid == x_small and small.gid == g_small and not small.streamed
    assert small.commit_lsn == later[0][1].commit_lsn
    assert ids(small) == list(range(1, 11))
    assert asm.oldest_open_lsn is None and asm.prepared_gids == ()

    # what PostgreSQL committed is exactly what the assembler emitted
    table = [r[0] for r in db.execute("SELECT id FROM t ORDER BY id")]
    assert table == sorted(ids(small) + ids(big) + ids(plain))


def test_streamed_prepared_transactions_live(db2pc: Db, tmp_path: Any) -> None:
    # A live walsender decodes each PREPARE before the test decides its fate, so both big
    # transactions are streamed on every server version.
    db = db2pc
    db.execute("CREATE TABLE t (id int PRIMARY KEY, pad text)")
    slot = db.create_slot(two_phase=True)
    live = db.stream(slot)
    conn = db.connect()
    conn.autocommit = True
    g_keep, g_drop = f"keep_{db.schema}", f"drop_{db.schema}"
    asm = Assembler(spill_bytes=32 * 1024, spill_dir=tmp_path)  # both spill to disk too

    x_drop = prepared(conn, g_drop, rows(1, 3000))
    pairs = live.read_until(lambda m: type(m) is StreamPrepare)
    x_keep = prepared(conn, g_keep, rows(5001, 8000), "SAVEPOINT s", rows(9001, 11000),
                      "ROLLBACK TO SAVEPOINT s")
    pairs += live.read_until(lambda m: type(m) is StreamPrepare)
    assert assemble(pairs, asm) == []
    assert set(asm.prepared_gids) == {g_keep, g_drop}
    assert asm.open_spill_files == 2
    assert asm.oldest_open_lsn == next(lsn for lsn, m in pairs if type(m) is StreamStart)

    conn.execute(f"ROLLBACK PREPARED '{g_drop}'")
    conn.execute(f"COMMIT PREPARED '{g_keep}'")
    tail = live.read_until(lambda m: type(m) is CommitPrepared)
    assert [type(m) for _, m in tail] == [RollbackPrepared, CommitPrepared]
    assert asm.feed(*tail[0]) is None
    assert asm.open_spill_files == 1  # the rolled-back one's file is freed at once
    out = asm.feed(*tail[1])
    assert isinstance(out, Transaction)
    with out as txn:
        assert txn.xid == x_keep and txn.xid != x_drop and txn.streamed
        assert txn.changes.spilled
        assert ids(txn) == list(range(5001, 8001))
        assert [c.position for c in txn.changes] == list(range(3000))
    assert asm.open_spill_files == 0 and asm.prepared_gids == () and asm.oldest_open_lsn is None
    assert [r[0] for r in db.execute("SELECT id FROM t ORDER BY id")] == list(range(5001, 8001))

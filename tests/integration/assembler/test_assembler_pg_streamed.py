"""Streamed transactions from real PostgreSQL (logical_decoding_work_mem = 64kB, so a few
thousand wide rows stream), assembled and compared with what PostgreSQL committed."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector.assembler import Assembler
from connector.pgoutput import (
    Commit,
    Insert,
    Message,
    StreamAbort,
    StreamCommit,
    StreamStart,
)
from tests.support.assembler_pg import Db, assemble, of_type, transactions

pytestmark = pytest.mark.integration

PAD = "repeat('x', 200)"


def insert_rows(conn: object, first: int, last: int) -> None:
    conn.execute(f"INSERT INTO t SELECT g, {PAD} FROM generate_series({first}, {last}) g")  # type: ignore[attr-defined]


def xmin_of(conn: object, row_id: int) -> int:
    row = conn.execute("SELECT xmin::text::bigint FROM t WHERE id = %s", (row_id,)).fetchone()  # type: ignore[attr-defined]
    return int(row[0])


def test_savepoint_rollback_in_streamed_transaction(db: Db, tmp_path: Path) -> None:
    db.execute("CREATE TABLE t (id int PRIMARY KEY, pad text)")
    slot = db.create_slot()
    conn = db.connect()
    with conn.transaction():
        top = int(conn.execute("SELECT txid_current()").fetchone()[0])
        insert_rows(conn, 1, 1000)
        conn.execute("SAVEPOINT a")
        insert_rows(conn, 1001, 2500)  # > 64kB: streamed before the rollback
        sub_a = xmin_of(conn, 1001)
        conn.execute("ROLLBACK TO SAVEPOINT a")
        conn.execute("RELEASE SAVEPOINT a")
        conn.execute("SAVEPOINT b")
        insert_rows(conn, 3001, 4500)
        sub_b = xmin_of(conn, 3001)
        conn.execute("RELEASE SAVEPOINT b")
        insert_rows(conn, 5001, 5200)
        conn.execute("SAVEPOINT c")
        conn.execute("SELECT pg_logical_emit_message(true, 'in-c', 'kept')")
        insert_rows(conn, 6001, 6100)
        sub_c = xmin_of(conn, 6001)
        conn.execute("SAVEPOINT d")
        insert_rows(conn, 7001, 8500)
        sub_d = xmin_of(conn, 7001)
        conn.execute("ROLLBACK TO SAVEPOINT d")
        conn.execute("RELEASE SAVEPOINT c")
    assert len({top, sub_a, sub_b, sub_c, sub_d}) == 5  # subtransactions have their own xids

    pairs = db.capture(slot)
    committed = db.execute("SELECT id, xmin::text::bigint FROM t ORDER BY id")

    # What PostgreSQL sent: streamed blocks whose changes carry the SUBtransaction's xid, the
    # rolled-back subtransactions' rows included, then Stream Abort(top, sub).
    streamed = of_type(pairs, Insert)
    assert {i.xid for i in streamed} >= {top, sub_a, sub_b, sub_c, sub_d}
    assert {int(i.new[0]) for i in streamed if i.xid == sub_a} >= set(range(1001, 1100))
    aborts = of_type(pairs, StreamAbort)
    assert (top, sub_a) in {(a.xid, a.subxid) for a in aborts}
    assert (top, sub_d) in {(a.xid, a.subxid) for a in aborts}
    assert all(a.xid == top and a.subxid != top for a in aborts)
    assert {s.xid for s in of_type(pairs, StreamStart)} == {top}
    # a transactional message inside a stream carries the top-level xid, not the subxact's
    (msg,) = of_type(pairs, Message)
    assert msg.xid == top and msg.prefix == "in-c"

    (txn,) = transactions(assemble(pairs))
    assert txn.streamed and txn.xid == top
    (commit,) = of_type(pairs, StreamCommit)
    assert (txn.commit_lsn, txn.end_lsn) == (commit.commit_lsn, commit.end_lsn)
    rows = [c for c in txn.changes if c.op == "c"]
    # exactly the rows PostgreSQL kept, in order, each with the xid that wrote it (its xmin)
    assert [(int(c.message.new[0]), c.message.xid) for c in rows] == committed
    assert {x for _, x in committed} == {top, sub_b, sub_c}
    assert [c.position for c in txn.changes] == list(range(len(txn.changes)))
    assert len(txn.changes) == len(committed) + 1  # + the message
    assert [c.message.prefix for c in txn.changes if c.op == "m"] == ["in-c"]
    assert all(c.commit_lsn == commit.commit_lsn and c.xid == top for c in txn.changes)

    # spilling to disk changes nothing
    asm = Assembler(spill_bytes=16 * 1024, spill_dir=tmp_path)
    (spilled,) = transactions(assemble(pairs, asm))
    assert spilled.changes.spilled
    assert list(spilled.changes) == list(txn.changes)
    spilled.close()
    assert asm.open_spill_files == 0 and list(tmp_path.iterdir()) == []


def test_rolled_back_streamed_transaction_emits_nothing(db: Db) -> None:
    # A live walsender, so PostgreSQL streams the transaction while it runs (decoding after the
    # fact skips a transaction that already aborted).
    db.execute("CREATE TABLE t (id int PRIMARY KEY, pad text)")
    slot = db.create_slot()
    live = db.stream(slot)
    conn = db.connect()
    aborted = int(conn.execute("SELECT txid_current()").fetchone()[0])
    insert_rows(conn, 1, 3000)
    conn.execute("SELECT pg_logical_emit_message(true, 'gone', 'x')")
    insert_rows(conn, 3001, 6000)
    pairs = live.read_until(lambda m: type(m) is Insert and m.xid == aborted
                            and m.new[0] == "2000")
    conn.rollback()
    with conn.transaction():
        kept = int(conn.execute("SELECT txid_current()").fetchone()[0])
        insert_rows(conn, 10_001, 10_002)
    pairs += live.read_until(lambda m: type(m) is Commit)

    # PostgreSQL streamed it, then aborted it
    assert StreamStart(aborted, True) in of_type(pairs, StreamStart)
    assert sum(1 for i in of_type(pairs, Insert) if i.xid == aborted) >= 2000
    assert (aborted, aborted) in {(a.xid, a.subxid) for a in of_type(pairs, StreamAbort)}
    asm = Assembler()
    outputs = assemble(pairs, asm)
    assert [t.xid for t in transactions(outputs)] == [kept]
    (txn,) = transactions(outputs)
    assert [int(c.message.new[0]) for c in txn.changes] == [10_001, 10_002]
    assert db.execute("SELECT count(*) FROM t")[0][0] == 2
    assert asm.pending_xids == () and asm.oldest_open_lsn is None
    # the walsender's XLogData start LSNs are what the assembler records
    assert txn.first_wal_lsn > 0 and all(c.wal_lsn >= txn.first_wal_lsn for c in txn.changes)


def test_interleaved_concurrent_streamed_transactions(db: Db) -> None:
    db.execute("CREATE TABLE t (id int PRIMARY KEY, pad text)")
    slot = db.create_slot()
    a, b = db.connect(), db.connect()
    xa = int(a.execute("SELECT txid_current()").fetchone()[0])
    xb = int(b.execute("SELECT txid_current()").fetchone()[0])
    insert_rows(a, 1, 1500)
    insert_rows(b, 100_001, 101_500)
    insert_rows(a, 1501, 3000)
    b.execute("SAVEPOINT s")
    insert_rows(b, 101_501, 103_000)
    b.execute("ROLLBACK TO SAVEPOINT s")
    insert_rows(b, 103_001, 104_000)
    insert_rows(a, 3001, 4000)
    b.commit()  # B commits first
    insert_rows(a, 4001, 4500)
    a.commit()

    pairs = db.capture(slot)
    starts = [s.xid for s in of_type(pairs, StreamStart)]
    # the blocks really interleave: A, then B, then A again before B commits
    first_b = starts.index(xb)
    assert xa in starts[:first_b] and xa in starts[first_b:]
    assert of_type(pairs, StreamCommit)[0].xid == xb

    tb, ta = transactions(assemble(pairs))
    assert (tb.xid, ta.xid) == (xb, xa)  # commit order
    assert tb.commit_lsn < ta.commit_lsn
    ids_a = [int(c.message.new[0]) for c in ta.changes]
    ids_b = [int(c.message.new[0]) for c in tb.changes]
    table = db.execute("SELECT id, xmin::text::bigint FROM t ORDER BY id")
    assert ids_a == [i for i, _ in table if i < 100_000] == list(range(1, 4501))
    assert ids_b == [i for i, _ in table if i > 100_000]
    assert ids_b == list(range(100_001, 101_501)) + list(range(103_001, 104_001))
    assert {c.xid for c in ta.changes} == {xa} and {c.xid for c in tb.changes} == {xb}
    for txn in (ta, tb):
        assert txn.streamed
        assert [c.position for c in txn.changes] == list(range(len(txn.changes)))

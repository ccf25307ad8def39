"""ALTER TABLE between the changes of one transaction, and logical decoding messages, from
real PostgreSQL."""

from __future__ import annotations

import pytest

from connector.assembler import Assembler, LogicalMessage, Transaction
from connector.pgoutput import Relation, StreamStart
from tests.support.assembler_pg import Db, assemble, of_type, transactions

pytestmark = pytest.mark.integration


def columns(change: object) -> list[str]:
    return [c.name for c in change.relation.columns]  # type: ignore[attr-defined]


def test_alter_table_between_changes(db: Db) -> None:
    db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    slot = db.create_slot()
    conn = db.connect()
    with conn.transaction():
        conn.execute("INSERT INTO t VALUES (1, 'a')")
        conn.execute("ALTER TABLE t ADD COLUMN extra int DEFAULT 7")
        conn.execute("INSERT INTO t VALUES (2, 'b', 8)")
        conn.execute("UPDATE t SET v = 'c' WHERE id = 1")
    pairs = db.capture(slot)
    assert len(of_type(pairs, Relation)) == 2  # PostgreSQL re-sent it after the ALTER

    asm = Assembler()
    (txn,) = transactions(assemble(pairs, asm))
    first, second, third = txn.changes
    assert columns(first) == ["id", "v"]
    assert columns(second) == columns(third) == ["id", "v", "extra"]
    assert first.relation is not second.relation and second.relation is third.relation
    assert asm.relations[second.relation.relation_id] is second.relation  # type: ignore[union-attr]
    assert [c.op for c in txn.changes] == ["c", "c", "u"]
    for change in txn.changes:  # every tuple matches the relation it carries
        assert len(change.message.new) == len(change.relation.columns)  # type: ignore[union-attr]
    assert [tuple(c.message.new) for c in txn.changes] == [  # type: ignore[union-attr]
        ("1", "a"), ("2", "b", "8"), ("1", "c", "7")]
    assert db.execute("SELECT id, v, extra FROM t ORDER BY id") == [(1, "c", 7), (2, "b", 8)]


def test_alter_table_inside_a_streamed_transaction(db: Db) -> None:
    db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    slot = db.create_slot()
    conn = db.connect()
    with conn.transaction():
        conn.execute("INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series(1, 2000) g")
        conn.execute("ALTER TABLE t ADD COLUMN extra int")
        conn.execute("INSERT INTO t SELECT g, repeat('y', 200), g FROM "
                     "generate_series(2001, 4000) g")
    pairs = db.capture(slot)
    assert of_type(pairs, StreamStart)
    (txn,) = transactions(assemble(pairs))
    assert txn.streamed and len(txn.changes) == 4000
    widths = [len(c.relation.columns) for c in txn.changes]  # type: ignore[union-attr]
    assert widths == [2] * 2000 + [3] * 2000
    assert all(len(c.message.new) == len(c.relation.columns)  # type: ignore[union-attr]
               for c in txn.changes)
    assert [int(c.message.new[0]) for c in txn.changes] == [  # type: ignore[union-attr]
        r[0] for r in db.execute("SELECT id FROM t ORDER BY id")]


def test_transactional_and_non_transactional_messages(db: Db) -> None:
    db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    slot = db.create_slot()
    conn = db.connect()
    with conn.transaction():
        xid = int(conn.execute("SELECT txid_current()").fetchone()[0])
        conn.execute("INSERT INTO t VALUES (1, 'a')")
        conn.execute("SELECT pg_logical_emit_message(true, 'audit', 'in the transaction')")
        conn.execute("SELECT pg_logical_emit_message(false, 'beat', 'right now')")
        conn.execute("INSERT INTO t VALUES (2, 'b')")
    with conn.transaction(force_rollback=True):
        conn.execute("INSERT INTO t VALUES (3, 'c')")
        conn.execute("SELECT pg_logical_emit_message(true, 'audit', 'rolled back')")
        conn.execute("SELECT pg_logical_emit_message(false, 'beat', 'survives rollback')")
    with conn.transaction():  # flushes the WAL of the non-transactional message above
        conn.execute("INSERT INTO t VALUES (4, 'd')")
    pairs = db.capture(slot)

    outputs = assemble(pairs)
    kinds = [type(o).__name__ for o in outputs]
    # the non-transactional message comes out at once, before its transaction commits
    assert kinds == ["LogicalMessage", "Transaction", "LogicalMessage", "Transaction"]
    beat, txn, beat2, last = outputs
    assert isinstance(beat, LogicalMessage) and isinstance(beat2, LogicalMessage)
    assert (beat.prefix, beat.content) == ("beat", b"right now")
    assert (beat2.prefix, beat2.content) == ("beat", b"survives rollback")
    assert beat.lsn > 0 and beat.wal_lsn > 0
    assert isinstance(txn, Transaction) and txn.xid == xid
    assert [c.op for c in txn.changes] == ["c", "m", "c"]
    audit = list(txn.changes)[1]
    assert audit.relation is None and audit.position == 1
    assert (audit.message.prefix, audit.message.content) == ("audit", b"in the transaction")
    assert isinstance(last, Transaction)
    assert [c.message.new[0] for c in last.changes] == ["4"]  # type: ignore[union-attr]

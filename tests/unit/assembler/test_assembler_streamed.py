"""Streamed transactions (protocol >= 2): per-xid buffering across interleaved blocks,
subtransaction aborts (cut back to the subtransaction's first change, like PostgreSQL's apply
worker) and whole-transaction aborts."""

from __future__ import annotations

from connector.assembler import Assembler, Transaction
from connector.pgoutput import Origin, Truncate
from tests.support.assembler_script import (
    Script,
    change_values,
    ins,
    relation,
    run,
    tmsg,
    transactions,
)


def test_interleaved_streams_and_plain_transactions() -> None:
    s = Script().add(relation(10))
    s.block(100, ins(10, "a1", "x", xid=100), first=True)
    s.block(200, ins(10, "b1", "x", xid=200), ins(10, "b2", "x", xid=200), first=True)
    s.plain(300, ins(10, "c1", "x"))
    s.block(100, ins(10, "a2", "x", xid=100))
    s.stream_commit(200, 0x9000)
    s.block(100, ins(10, "a3", "x", xid=100))
    s.stream_commit(100, 0x9100)
    out = transactions(run(s.pairs))
    assert [t.xid for t in out] == [300, 200, 100]
    plain, b, a = out
    assert change_values(a) == ["a1", "a2", "a3"] and change_values(b) == ["b1", "b2"]
    assert [c.position for c in a.changes] == [0, 1, 2]
    assert a.streamed and b.streamed and not plain.streamed
    assert all(c.commit_lsn == 0x9100 and c.xid == 100 for c in a.changes)
    assert (a.commit_lsn, a.end_lsn) == (0x9100, 0x9130)
    assert a.first_wal_lsn == s.pairs[1][0]  # its first Stream Start


def test_whole_abort_drops_everything() -> None:
    s = Script().add(relation(10))
    s.block(100, ins(10, "a1", "x", xid=100), ins(10, "a2", "x", xid=101), first=True)
    s.stream_abort(100, 100)
    s.plain(300, ins(10, "c1", "x"))
    asm = Assembler()
    out = transactions(run(s.pairs, asm))
    assert [t.xid for t in out] == [300]
    assert asm.pending_xids == () and asm.oldest_open_lsn is None


def test_subxact_abort_drops_only_its_changes() -> None:
    # top 100: a1; subxact 101: s1, s2 (rolled back); subxact 102: k1 (kept); top again: a2
    s = Script().add(relation(10))
    s.block(100, ins(10, "a1", "x", xid=100), ins(10, "s1", "x", xid=101), first=True)
    s.block(100, ins(10, "s2", "x", xid=101))
    s.stream_abort(100, 101)
    s.block(100, ins(10, "k1", "x", xid=102), ins(10, "a2", "x", xid=100))
    s.stream_commit(100)
    (txn,) = run(s.pairs)
    assert change_values(txn) == ["a1", "k1", "a2"]
    assert [c.position for c in txn.changes] == [0, 1, 2]


def test_subxact_abort_takes_nested_subxacts_and_later_messages() -> None:
    # SAVEPOINT a (101): s1; SAVEPOINT b (102): n1; RELEASE b; message; ROLLBACK TO a.
    # PostgreSQL sends Stream Abort for 102 and 101; even the 101 one alone must drop n1 and
    # the message (which carries the top-level xid) because they came after 101's first change.
    s = Script().add(relation(10))
    s.block(100, ins(10, "a1", "x", xid=100), tmsg("before", xid=100),
            ins(10, "s1", "x", xid=101), ins(10, "n1", "x", xid=102),
            tmsg("inside", xid=100), first=True)
    s.stream_abort(100, 101)
    s.block(100, ins(10, "a2", "x", xid=100))
    s.stream_commit(100)
    (txn,) = run(s.pairs)
    assert change_values(txn) == ["a1", "before", "a2"]


def test_abort_of_released_earlier_subxact_keeps_earlier_siblings() -> None:
    # SAVEPOINT a (101) s1, RELEASE a; SAVEPOINT b (102) s2, ROLLBACK TO b.
    s = Script().add(relation(10))
    s.block(100, ins(10, "s1", "x", xid=101), ins(10, "s2", "x", xid=102), first=True)
    s.block(100, ins(10, "s3", "x", xid=102))
    s.stream_abort(100, 102)
    s.block(100, ins(10, "s4", "x", xid=103))
    s.stream_abort(100, 102)  # a second abort of the same (now empty) subxact: a no-op
    s.stream_commit(100)
    (txn,) = run(s.pairs)
    assert change_values(txn) == ["s1", "s4"]


def test_abort_of_subxact_without_streamed_changes_is_a_noop() -> None:
    s = Script().add(relation(10))
    s.block(100, ins(10, "a1", "x", xid=100), first=True)
    s.stream_abort(100, 555)
    s.stream_commit(100)
    (txn,) = run(s.pairs)
    assert change_values(txn) == ["a1"]


def test_subxact_abort_in_one_stream_does_not_touch_another() -> None:
    s = Script().add(relation(10))
    s.block(100, ins(10, "a1", "x", xid=101), first=True)
    s.block(200, ins(10, "b1", "x", xid=201), first=True)
    s.stream_abort(100, 101)
    s.stream_abort(200, 999)
    s.stream_commit(100)
    s.stream_commit(200)
    a, b = transactions(run(s.pairs))
    assert change_values(a) == [] and change_values(b) == ["b1"]


def test_origin_in_first_stream_block() -> None:
    s = Script().add(relation(10))
    s.block(100, Origin(0, "node_b"), ins(10, "a1", "x", xid=100), first=True)
    s.stream_commit(100)
    (txn,) = run(s.pairs)
    assert txn.origin == Origin(0, "node_b")


def test_streamed_truncate_and_messages_are_events() -> None:
    s = Script().add(relation(10, "a"), relation(11, "b"))
    s.block(100, tmsg("m", xid=100), first=True)
    s.block(100, Truncate(101, 0, (10, 11)))
    s.stream_commit(100)
    (txn,) = run(s.pairs)
    assert [c.op for c in txn.changes] == ["m", "t", "t"]
    assert [c.position for c in txn.changes] == [0, 1, 2]


def test_stream_commit_output_is_transaction() -> None:
    s = Script().add(relation(10))
    s.block(100, ins(10, "a1", "x", xid=100), first=True).stream_commit(100, 0x4242)
    (txn,) = run(s.pairs)
    assert isinstance(txn, Transaction) and txn.commit_lsn == 0x4242

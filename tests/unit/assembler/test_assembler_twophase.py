"""Two-phase transactions: held from Prepare / Stream Prepare until Commit Prepared (emitted
with its commit LSN) or Rollback Prepared (dropped)."""

from __future__ import annotations

from connector.assembler import Assembler
from tests.support.assembler_script import (
    TS,
    Script,
    change_values,
    ins,
    relation,
    run,
    transactions,
)


def test_prepared_then_committed_after_other_transactions() -> None:
    s = Script().add(relation(10))
    s.begin_prepare(100, "g1", 0x5000).add(ins(10, "p1", "x"), ins(10, "p2", "x"))
    s.prepare(100, "g1", 0x5000)
    s.plain(200, ins(10, "c1", "x"))
    s.commit_prepared(100, "g1", 0x8000)
    asm = Assembler()
    outs = [asm.feed(lsn, m) for lsn, m in s.pairs]
    plain, prepared = transactions(o for o in outs if o is not None)
    assert plain.xid == 200 and prepared.xid == 100
    assert outs[-1] is prepared  # emitted by Commit Prepared, not by Prepare
    assert (prepared.commit_lsn, prepared.end_lsn, prepared.commit_timestamp) == (
        0x8000, 0x8030, TS + 5)
    assert (prepared.gid, prepared.prepare_lsn, prepared.prepare_timestamp) == ("g1", 0x5000,
                                                                               TS)
    assert change_values(prepared) == ["p1", "p2"]
    assert [(c.position, c.commit_lsn, c.xid) for c in prepared.changes] == [
        (0, 0x8000, 100), (1, 0x8000, 100)]
    assert asm.prepared_gids == () and asm.oldest_open_lsn is None


def test_prepared_then_rolled_back_emits_nothing() -> None:
    s = Script().add(relation(10))
    s.begin_prepare(100, "g1").add(ins(10, "p1", "x")).prepare(100, "g1")
    asm = Assembler()
    run(s.pairs, asm)
    assert asm.prepared_gids == ("g1",)
    s2 = Script(s.lsn).rollback_prepared(100, "g1")
    assert run(s2.pairs, asm) == []
    assert asm.prepared_gids == () and asm.pending_xids == ()


def test_rollback_prepared_of_unknown_transaction_is_ignored() -> None:
    # PostgreSQL sends ROLLBACK PREPARED also for transactions whose PREPARE it never decoded.
    assert run(Script().rollback_prepared(999, "never-seen").pairs) == []


def test_empty_prepared_transaction() -> None:
    s = Script().begin_prepare(7, "g").prepare(7, "g").commit_prepared(7, "g", 0x9000)
    (txn,) = run(s.pairs)
    assert txn.gid == "g" and len(txn.changes) == 0


def test_streamed_prepare_then_commit_prepared() -> None:
    s = Script().add(relation(10))
    s.block(100, ins(10, "a1", "x", xid=100), ins(10, "s1", "x", xid=101), first=True)
    s.stream_abort(100, 101)
    s.block(100, ins(10, "a2", "x", xid=100))
    s.stream_prepare(100, "g-stream", 0x5000)
    s.plain(200, ins(10, "c1", "x"))
    s.commit_prepared(100, "g-stream", 0x8000)
    plain, txn = transactions(run(s.pairs))
    assert plain.xid == 200
    assert txn.streamed and txn.gid == "g-stream" and txn.commit_lsn == 0x8000
    assert change_values(txn) == ["a1", "a2"]


def test_streamed_prepare_then_rollback_prepared() -> None:
    s = Script().add(relation(10))
    s.block(100, ins(10, "a1", "x", xid=100), first=True)
    s.stream_prepare(100, "g")
    s.rollback_prepared(100, "g")
    asm = Assembler()
    assert run(s.pairs, asm) == []
    assert asm.pending_xids == ()


def test_several_prepared_committed_in_another_order() -> None:
    s = Script().add(relation(10))
    for xid, gid in ((1, "a"), (2, "b"), (3, "c")):
        s.begin_prepare(xid, gid).add(ins(10, gid, "x")).prepare(xid, gid)
    s.commit_prepared(3, "c", 0x9000).rollback_prepared(1, "a").commit_prepared(2, "b", 0x9100)
    out = transactions(run(s.pairs))
    assert [(t.xid, change_values(t)) for t in out] == [(3, ["c"]), (2, ["b"])]

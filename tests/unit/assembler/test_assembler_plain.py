"""Plain Begin..Commit transactions: ordering, positions, truncate events, messages, origin,
relation replacement and the output types."""

from __future__ import annotations

import pytest

from connector.assembler import Assembler, Change, LogicalMessage, Transaction
from connector.errors import DecodeError
from connector.pgoutput import (
    Begin,
    Commit,
    Insert,
    Message,
    Origin,
    Truncate,
    Type,
)
from connector.pgoutput.messages import PgOutputMessage
from tests.support.assembler_script import (
    TS,
    Script,
    dele,
    ins,
    ntmsg,
    relation,
    run,
    summary,
    tmsg,
    transactions,
    upd,
)


def test_plain_transaction_fields_and_positions() -> None:
    r = relation(10)
    s = Script().add(r).begin(500, 0x5000).add(ins(10, "1", "a"), upd(10, "1", "b"),
                                               dele(10, "1")).commit(0x5000)
    (txn,) = run(s.pairs)
    assert isinstance(txn, Transaction)
    assert (txn.xid, txn.commit_lsn, txn.end_lsn, txn.commit_timestamp) == (500, 0x5000,
                                                                            0x5030, TS)
    assert txn.first_wal_lsn == s.pairs[1][0]  # Begin's
    assert txn.origin is None and not txn.streamed and txn.gid is None
    changes = list(txn.changes)
    assert len(txn.changes) == 3
    assert [c.position for c in changes] == [0, 1, 2]
    assert [c.op for c in changes] == ["c", "u", "d"]
    assert [c.wal_lsn for c in changes] == [p[0] for p in s.pairs[2:5]]
    assert all(c.relation is r and c.xid == 500 and c.commit_lsn == 0x5000
               and c.commit_timestamp == TS for c in changes)
    assert [c.message for c in changes] == [p[1] for p in s.pairs[2:5]]
    assert not txn.changes.spilled


def test_transactions_come_out_in_commit_order_one_per_commit() -> None:
    s = Script().add(relation(10))
    for xid in (700, 701, 702):
        s.plain(xid, ins(10, str(xid), "v"))
    asm = Assembler()
    outs = [asm.feed(lsn, m) for lsn, m in s.pairs]
    emitted = [o for o in outs if o is not None]
    assert [t.xid for t in transactions(emitted)] == [700, 701, 702]
    # exactly the Commit messages produced output
    producing = [type(m) for (_, m), o in zip(s.pairs, outs, strict=True) if o is not None]
    assert producing == [Commit] * 3


def test_empty_transaction_is_emitted() -> None:
    (txn,) = run(Script().plain(42).pairs)
    assert isinstance(txn, Transaction) and len(txn.changes) == 0 and list(txn.changes) == []


def test_truncate_is_one_event_per_relation() -> None:
    s = Script().add(relation(10, "a"), relation(11, "b"), relation(12, "c"))
    s.begin(9, 0x9000).add(ins(10, "1", "x")).truncate(11, 12, 10, options=3)
    s.add(ins(10, "2", "y")).commit(0x9000)
    (txn,) = run(s.pairs)
    changes = list(txn.changes)
    assert [c.position for c in changes] == [0, 1, 2, 3, 4]
    assert [c.relation.name if c.relation else None for c in changes] == ["a", "b", "c", "a",
                                                                          "a"]
    trunc = [c for c in changes if c.op == "t"]
    assert len(trunc) == 3 and len({c.wal_lsn for c in trunc}) == 1
    assert all(isinstance(c.message, Truncate) and c.message.cascade for c in trunc)


def test_transactional_message_is_a_change_in_order() -> None:
    s = Script().add(relation(10)).begin(5, 0x5000)
    s.add(ins(10, "1", "a"), tmsg("audit", b"hello"), ins(10, "2", "b")).commit(0x5000)
    (txn,) = run(s.pairs)
    changes = list(txn.changes)
    assert [c.op for c in changes] == ["c", "m", "c"]
    assert changes[1].relation is None and changes[1].message.content == b"hello"
    assert changes[1].position == 1


def test_non_transactional_message_passes_through_at_once() -> None:
    asm = Assembler()
    msg = ntmsg("hb", b"beat", lsn=0x1234)
    out = asm.feed(0x1000, msg)
    assert out == LogicalMessage(msg, 0x1000)
    assert isinstance(out, LogicalMessage)
    assert (out.prefix, out.content, out.lsn) == ("hb", b"beat", 0x1234)
    # also between a transaction's changes (PostgreSQL does not do it, but nothing is lost)
    asm.feed(0x2000, relation(10))
    asm.feed(0x2040, Begin(0x3000, TS, 1))
    assert asm.feed(0x2080, msg) == LogicalMessage(msg, 0x2080)
    assert asm.feed(0x20C0, Commit(0, 0x3000, 0x3030, TS)) is not None


def test_origin_is_recorded() -> None:
    s = Script().add(relation(10)).begin(5, 0x5000)
    s.add(Origin(0xABCD, "node_a"), ins(10, "1", "a")).commit(0x5000)
    (txn,) = run(s.pairs)
    assert txn.origin == Origin(0xABCD, "node_a")
    assert len(txn.changes) == 1


def test_relation_replaced_mid_transaction_changes_keep_their_relation() -> None:
    old = relation(10, columns=("id", "v"))
    new = relation(10, columns=("id", "v", "w"))
    s = Script().add(old).begin(5, 0x5000).add(ins(10, "1", "a"))
    s.add(new, ins(10, "2", "b", "c")).commit(0x5000)
    asm = Assembler()
    (txn,) = run(s.pairs, asm)
    first, second = txn.changes
    assert first.relation is old and second.relation is new
    assert asm.relations[10] is new


def test_relation_replaced_between_transactions_buffered_streams_keep_old() -> None:
    old = relation(10, columns=("id", "v"))
    new = relation(10, columns=("id", "v", "w"), xid=77)
    s = Script().add(old)
    s.block(77, ins(10, "1", "a", xid=77), first=True)
    s.block(77, new, ins(10, "2", "b", "c", xid=77))
    s.stream_commit(77)
    (txn,) = run(s.pairs)
    assert [c.relation for c in txn.changes] == [old, new]
    assert next(iter(txn.changes)).relation is old


def test_type_cache_and_relation_views_are_read_only() -> None:
    asm = Assembler()
    asm.feed(0x10, Type(None, 16500, "public", "mood"))
    asm.feed(0x20, relation(10))
    assert asm.types[16500].name == "mood"
    assert asm.relations[10].name == "t"
    with pytest.raises(TypeError):
        asm.relations[11] = relation(11)  # type: ignore[index]


def test_outputs_are_immutable() -> None:
    s = Script().add(relation(10)).plain(5, ins(10, "1", "a"))
    (txn,) = run(s.pairs)
    change = next(iter(txn.changes))
    assert isinstance(change, Change)
    with pytest.raises(AttributeError):
        txn.xid = 6  # type: ignore[misc]
    with pytest.raises(AttributeError):
        change.position = 3  # type: ignore[misc]
    assert not hasattr(change, "__dict__") and not hasattr(txn, "__dict__")


def test_many_changes_hot_path() -> None:
    s = Script().add(relation(10)).begin(5, 0x5000)
    s.add(*(Insert(None, 10, (str(i), "x" * 20)) for i in range(10_000))).commit(0x5000)
    (txn,) = run(s.pairs)
    assert [c.position for c in txn.changes] == list(range(10_000))
    assert summary(txn)[-1][0] == 10


def _expand(msg: Message) -> list[PgOutputMessage]:
    """A stand-in for pgcdc.rows (connector/replication/table_trigger.py): the content is the
    rows' ids; the messages carry the message's xid."""
    rel = relation(20, "ctas", xid=msg.xid)
    if msg.content == b"bad":
        raise ValueError("not a rows message (bad)")
    return [rel, *(ins(20, v.decode(), None, xid=msg.xid) for v in msg.content.split())]


def test_an_expanded_message_is_replaced_by_its_changes_at_its_position() -> None:
    s = Script().begin(5, 0x5000).add(tmsg("other", b"m"), tmsg("rows", b"1 2"),
                                      ins(20, "3", "c"), ntmsg("rows", b"9")).commit(0x5000)
    asm = Assembler(expanders={"rows": _expand})
    out = run(s.pairs, asm)
    non_transactional, txn = out  # a message without the flag is never expanded
    assert isinstance(non_transactional, LogicalMessage) and non_transactional.prefix == "rows"
    assert isinstance(txn, Transaction)
    changes = list(txn.changes)
    assert [(c.op, c.position) for c in changes] == [("m", 0), ("c", 1), ("c", 2), ("c", 3)]
    assert [c.message.new[0] for c in changes[1:]] == ["1", "2", "3"]  # type: ignore[union-attr]
    # the expanded changes sit at the message's WAL position, under its Relation
    assert changes[1].wal_lsn == changes[2].wal_lsn == s.pairs[2][0]
    assert changes[1].relation == relation(20, "ctas") and asm.relations[20] == relation(20,
                                                                                          "ctas")
    # streamed: the changes carry the stream's xid, and commit with it
    st = Script().block(9, tmsg("rows", b"4", xid=9), first=True).stream_commit(9)
    (streamed,) = run(st.pairs, Assembler(expanders={"rows": _expand}))
    assert [(c.op, c.message.new[0]) for c in streamed.changes] == [  # type: ignore[union-attr]
        ("c", "4")]
    with pytest.raises(DecodeError, match="not a rows message"):
        run(Script().begin(6, 0x6000).add(tmsg("rows", b"bad")).commit(0x6000).pairs,
            Assembler(expanders={"rows": _expand}))

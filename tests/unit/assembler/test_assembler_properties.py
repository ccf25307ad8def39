"""Property tests: streamed transactions generated from random SAVEPOINT / RELEASE / ROLLBACK TO
programs, streamed in random blocks and interleaved at random, come out exactly as the
programs' semantics say (only rows of surviving (sub)transactions, in order, positions 0..n-1),
and identical whatever the interleaving and whatever the spill limit."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.assembler import Assembler, Transaction
from connector.pgoutput import (
    Begin,
    Commit,
    Insert,
    Message,
    PgOutputMessage,
    StreamAbort,
    StreamCommit,
    StreamStart,
    StreamStop,
)
from tests.support.assembler_script import TS, relation

REL = relation(10)


@dataclass
class Frame:
    xid: int | None = None
    writes: list[str] = field(default_factory=list)
    subtree_xids: list[int] = field(default_factory=list)  # assigned in it and released kids


@dataclass
class Program:
    """One streamed transaction: its stream items and the rows it must commit."""

    top: int
    items: list[list[tuple[int, PgOutputMessage]]]  # each item: messages fed back to back
    expected: list[str] | None  # None: the whole transaction aborts


OPS = st.sampled_from(["write", "savepoint", "write", "rollback", "write", "release", "cut",
                       "write", "savepoint", "rollback", "message"])


@st.composite
def programs(draw: Any, top: int, lsn_base: int) -> Program:
    """A transaction with top-level xid `top`; subtransaction xids are top+1, top+2, ..."""
    ops = draw(st.lists(OPS, min_size=8, max_size=80))
    next_xid = top + 1
    lsn = lsn_base
    label = 0
    stack = [Frame(xid=top)]
    items: list[list[tuple[int, PgOutputMessage]]] = []
    block: list[tuple[int, PgOutputMessage]] = []
    first = True

    def tick() -> int:
        nonlocal lsn
        lsn += 0x10
        return lsn

    def close_block() -> None:
        nonlocal block, first
        if block or first:
            items.append([(tick(), StreamStart(top, first)), *block, (tick(), StreamStop())])
            first = False
        block = []

    def assign(depth: int) -> int:
        """PostgreSQL assigns xids to parents before children."""
        nonlocal next_xid
        frame = stack[depth]
        if frame.xid is None:
            assign(depth - 1)
            frame.xid = next_xid
            frame.subtree_xids.append(next_xid)
            next_xid += 1
        return frame.xid

    for op in ops:
        if op == "write":
            label += 1
            value = f"{top}:{label}"
            xid = assign(len(stack) - 1)
            stack[-1].writes.append(value)
            block.append((tick(), Insert(xid, 10, (value,))))
        elif op == "message" and len(stack) == 1:
            label += 1
            value = f"{top}:m{label}"
            stack[-1].writes.append(value)
            block.append((tick(), Message(top, 1, lsn, value, b"")))
        elif op == "savepoint":
            stack.append(Frame())
        elif op == "release" and len(stack) > 1:
            child = stack.pop()
            stack[-1].writes.extend(child.writes)
            stack[-1].subtree_xids.extend(child.subtree_xids)
        elif op == "rollback" and len(stack) > 1:
            aborted = stack.pop()
            xids = aborted.subtree_xids
            if xids:
                # changes not streamed yet are discarded by PostgreSQL, never sent
                if draw(st.booleans()):
                    while block and block[-1][1].xid in xids:
                        block.pop()
                close_block()
                # children first, then the subtransaction itself (DecodeAbort's order)
                items.append([(tick(), StreamAbort(top, x)) for x in reversed(xids)])
            stack.append(Frame())  # ROLLBACK TO keeps the savepoint: a new subtransaction
        elif op == "cut":
            close_block()
    close_block()
    while len(stack) > 1:  # COMMIT releases every open savepoint
        child = stack.pop()
        stack[-1].writes.extend(child.writes)
    if draw(st.sampled_from([False, False, False, False, False, True])):
        items.append([(tick(), StreamAbort(top, top))])
        return Program(top, items, None)
    items.append([(tick(), StreamCommit(top, 0, lsn_base + 0xF000, lsn_base + 0xF030, TS))])
    return Program(top, items, stack[0].writes)


@st.composite
def workloads(draw: Any) -> list[Program]:
    n = draw(st.integers(1, 4))
    progs = [draw(programs(1000 * (i + 1), 0x10_0000 * (i + 1))) for i in range(n)]
    plain = draw(st.integers(0, 3))  # plain transactions between the blocks
    for j in range(plain):
        xid = 9000 + j
        base = 0x90_0000 + 0x1000 * j
        progs.append(Program(xid, [[(base, Begin(base + 0x800, TS, xid)),
                                    (base + 0x10, Insert(None, 10, (f"{xid}:1",))),
                                    (base + 0x20, Commit(0, base + 0x800, base + 0x830, TS))]],
                             [f"{xid}:1"]))
    return progs


def sequential(progs: list[Program]) -> list[tuple[int, PgOutputMessage]]:
    return [pair for p in progs for item in p.items for pair in item]


@st.composite
def interleaved(draw: Any, progs: list[Program]) -> list[tuple[int, PgOutputMessage]]:
    queues = [list(p.items) for p in progs]
    out: list[tuple[int, PgOutputMessage]] = []
    while any(queues):
        live = [q for q in queues if q]
        q = live[draw(st.integers(0, len(live) - 1))]
        out.extend(q.pop(0))
    return out


def assemble(pairs: list[tuple[int, PgOutputMessage]], **limits: Any) -> dict[int, Any]:
    with tempfile.TemporaryDirectory() as spill_dir, Assembler(spill_dir=spill_dir,
                                                               **limits) as asm:
        asm.feed(1, REL)
        result = {}
        for out in asm.feed_all(pairs):
            assert isinstance(out, Transaction)
            changes = list(out.changes)
            result[out.xid] = [(c.position, c.wal_lsn, c.message, c.xid, c.commit_lsn)
                               for c in changes]
            out.close()
        assert asm.pending_xids == () and asm.oldest_open_lsn is None
        assert asm.open_spill_files == 0
    return result


def values(rows: list[tuple[Any, ...]]) -> list[str]:
    return [m.prefix if isinstance(m, Message) else m.new[0] for _, _, m, _, _ in rows]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_interleavings_give_the_semantic_result(data: st.DataObject) -> None:
    progs = data.draw(workloads())
    order = data.draw(interleaved(progs))
    limits = data.draw(st.sampled_from([{}, {"spill_changes": 0}, {"spill_changes": 2},
                                        {"spill_bytes": 400}, {"spill_bytes": 3_000}]))
    seq = assemble(sequential(progs))
    got = assemble(order, **limits)
    assert got == seq
    for p in progs:
        if p.expected is None:
            assert p.top not in got
            continue
        rows = got[p.top]
        assert values(rows) == p.expected
        assert [r[0] for r in rows] == list(range(len(rows)))
        assert all(r[3] == p.top for r in rows)

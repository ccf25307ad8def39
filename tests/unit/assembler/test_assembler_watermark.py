"""The low watermark: the smallest first WAL LSN of any transaction still buffered."""

from __future__ import annotations

from connector.assembler import Assembler
from connector.pgoutput import PgOutputMessage
from tests.support.assembler_script import Script, ins, relation


def feed(asm: Assembler, s: Script, *msgs: PgOutputMessage) -> int:
    """Feed messages at the script's next LSNs; return the LSN of the first."""
    first = s.next_lsn()
    start = len(s.pairs)
    s.add(*msgs)
    for lsn, m in s.pairs[start:]:
        asm.feed(lsn, m)
    return first


def test_oldest_open_lsn_tracks_open_streamed_and_prepared() -> None:
    from connector.pgoutput import (
        Begin,
        BeginPrepare,
        Commit,
        CommitPrepared,
        Prepare,
        StreamAbort,
        StreamCommit,
        StreamStart,
        StreamStop,
    )

    asm = Assembler()
    s = Script()
    feed(asm, s, relation(10))
    assert asm.oldest_open_lsn is None

    # an open plain transaction counts while it is open
    begin = feed(asm, s, Begin(0x9000_0000, 0, 1))
    assert asm.oldest_open_lsn == begin
    feed(asm, s, ins(10, "1", "x"), Commit(0, 0x9000_0000, 0x9000_0030, 0))
    assert asm.oldest_open_lsn is None

    a_start = feed(asm, s, StreamStart(100, True), ins(10, "a", "x", xid=100), StreamStop())
    assert asm.oldest_open_lsn == a_start
    p_start = feed(asm, s, BeginPrepare(0x5000, 0x5030, 0, 200, "g"),
                   ins(10, "p", "x"), Prepare(0, 0x5000, 0x5030, 0, 200, "g"))
    b_start = feed(asm, s, StreamStart(300, True), ins(10, "b", "x", xid=300), StreamStop())
    assert asm.oldest_open_lsn == a_start < p_start < b_start
    assert set(asm.pending_xids) == {100, 200, 300}

    feed(asm, s, StreamCommit(100, 0, 0x9100_0000, 0x9100_0030, 0))
    assert asm.oldest_open_lsn == p_start
    feed(asm, s, CommitPrepared(0, 0x9200_0000, 0x9200_0030, 0, 200, "g"))
    assert asm.oldest_open_lsn == b_start
    feed(asm, s, StreamAbort(300, 300))
    assert asm.oldest_open_lsn is None and asm.pending_xids == ()


def test_later_blocks_do_not_move_the_watermark() -> None:
    from connector.pgoutput import StreamStart, StreamStop

    asm = Assembler()
    s = Script()
    feed(asm, s, relation(10))
    first = feed(asm, s, StreamStart(100, True), ins(10, "a", "x", xid=100), StreamStop())
    for _ in range(3):
        feed(asm, s, StreamStart(100, False), ins(10, "a", "x", xid=100), StreamStop())
    assert asm.oldest_open_lsn == first

"""Protocol violations raise DecodeError carrying the offending message's LSN."""

from __future__ import annotations

import pytest

from connector.assembler import Assembler
from connector.errors import CdcError, DecodeError
from connector.pgoutput import (
    Begin,
    BeginPrepare,
    Commit,
    CommitPrepared,
    Insert,
    Origin,
    PgOutputMessage,
    Prepare,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    StreamStop,
    Truncate,
    lsn_to_str,
)
from tests.support.assembler_script import TS, Script, ins, relation

REL = relation(10)
BAD_LSN = 0x0000_0002_DEAD_BEE0


def fails(prefix: list[PgOutputMessage], bad: PgOutputMessage, match: str) -> DecodeError:
    asm = Assembler()
    s = Script().add(*prefix)
    for lsn, m in s.pairs:
        asm.feed(lsn, m)
    with pytest.raises(DecodeError, match=match) as info:
        asm.feed(BAD_LSN, bad)
    assert info.value.lsn == lsn_to_str(BAD_LSN) == "2/DEADBEE0"
    assert "lsn 2/DEADBEE0" in str(info.value)
    assert isinstance(info.value, CdcError)
    return info.value


BEGIN = Begin(0x5000, TS, 1)


@pytest.mark.parametrize(("prefix", "bad", "match"), [
    ([], Commit(0, 0x5000, 0x5030, TS), "Commit without Begin"),
    ([BEGIN], Begin(0x6000, TS, 2), "Begin of transaction 2 while open: transaction 1"),
    ([BEGIN], Commit(0, 0x5001, 0x5030, TS), "differs from the final LSN"),
    ([REL], ins(10, "1", "a"), "Insert outside a transaction"),
    ([BEGIN], ins(10, "1", "a"), "unknown relation id 10"),
    ([REL, BEGIN], Truncate(None, 0, (10, 11)), "Truncate of unknown relation id 11"),
    ([], Origin(0, "x"), "Origin outside a transaction"),
    ([], StreamStop(), "Stream Stop without Stream Start"),
    ([BEGIN], StreamStop(), "Stream Stop inside transaction 1"),
    ([StreamStart(5, True)], StreamStart(6, True), "inside a stream block of streamed"),
    ([BEGIN], StreamStart(6, True), "Stream Start of transaction 6 while open"),
    ([StreamStart(5, True)], Begin(0x6000, TS, 2), "Begin of transaction 2 inside a stream"),
    ([], StreamStart(5, False), "whose first segment never came"),
    ([StreamStart(5, True), StreamStop()], StreamStart(5, True), "already buffered"),
    ([], StreamCommit(5, 0, 1, 2, TS), "Stream Commit for unknown streamed transaction 5"),
    ([StreamStart(5, True)], StreamCommit(5, 0, 1, 2, TS), "inside a stream block"),
    ([], StreamAbort(5, 6), "Stream Abort for unknown streamed transaction 5"),
    ([StreamStart(5, True)], StreamAbort(5, 6), "Stream Abort of transaction 5 inside a"),
    ([StreamStart(5, True)], CommitPrepared(0, 1, 2, TS, 5, "g"), "inside a stream block"),
    ([], StreamPrepare(0, 1, 2, TS, 5, "g"), "Stream Prepare for unknown"),
    ([REL, StreamStart(5, True)], Insert(None, 10, ("1",)), "without an xid"),
    ([REL, BEGIN], Insert(7, 10, ("1",)), "with an xid outside a stream block"),
    ([], Prepare(0, 1, 2, TS, 5, "g"), "Prepare without Begin Prepare"),
    ([BeginPrepare(1, 2, TS, 5, "g")], Prepare(0, 1, 2, TS, 6, "g"), "ends prepared"),
    ([BeginPrepare(1, 2, TS, 5, "g")], Commit(0, 1, 2, TS), "Commit inside prepared"),
    ([], CommitPrepared(0, 1, 2, TS, 5, "g"), "not prepared in this stream"),
    ([BeginPrepare(1, 2, TS, 5, "g"), Prepare(0, 1, 2, TS, 5, "g")],
     CommitPrepared(0, 1, 2, TS, 5, "h"), "prepared as 'g'"),
    ([BeginPrepare(1, 2, TS, 5, "g"), Prepare(0, 1, 2, TS, 5, "g")],
     BeginPrepare(1, 2, TS, 5, "g"), "already buffered"),
    ([StreamStart(5, True), StreamStop(), StreamPrepare(0, 1, 2, TS, 5, "g")],
     StreamCommit(5, 0, 1, 2, TS), r"unknown streamed transaction 5 \(it is prepared\)"),
])
def test_protocol_violation(prefix: list[PgOutputMessage], bad: PgOutputMessage,
                            match: str) -> None:
    fails(prefix, bad, match)


def test_not_a_message_object() -> None:
    with pytest.raises(DecodeError, match="not a pgoutput message: tuple"):
        Assembler().feed(1, (1, 2))  # type: ignore[arg-type]


def test_error_message_is_actionable() -> None:
    err = fails([REL, BEGIN], Insert(None, 99, ("1",)), "unknown relation id 99")
    assert "no Relation message before it" in err.reason

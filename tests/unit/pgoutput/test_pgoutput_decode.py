"""Each pgoutput message kind, written byte by byte from the spec (independent of the encoder)."""

from __future__ import annotations

import struct

import pytest

from connector.pgoutput import (
    UNCHANGED_TOAST,
    Begin,
    BeginPrepare,
    BinaryValue,
    Commit,
    CommitPrepared,
    Decoder,
    Delete,
    Insert,
    Message,
    Origin,
    Prepare,
    Relation,
    RelationColumn,
    RollbackPrepared,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    StreamStop,
    Truncate,
    Type,
    Update,
    decode_message,
)

LSN1 = 0x0000_0001_16B3_7480
LSN2 = 0x0000_0001_16B3_7500
TS = 760_000_000_123_456  # microseconds since 2000-01-01
XID = 0xFFFF_FFF0  # unsigned on the wire: must not come out negative


def s(text: str) -> bytes:
    return text.encode() + b"\0"


def tup(*cols: bytes) -> bytes:
    return struct.pack("!H", len(cols)) + b"".join(cols)


def t(text: str) -> bytes:
    raw = text.encode()
    return b"t" + struct.pack("!I", len(raw)) + raw


def b(raw: bytes) -> bytes:
    return b"b" + struct.pack("!I", len(raw)) + raw


def test_begin() -> None:
    msg = decode_message(b"B" + struct.pack("!QqI", LSN1, TS, XID))
    assert msg == Begin(final_lsn=LSN1, commit_timestamp=TS, xid=XID)


def test_begin_negative_timestamp_before_2000() -> None:
    msg = decode_message(b"B" + struct.pack("!QqI", LSN1, -1, 7))
    assert isinstance(msg, Begin) and msg.commit_timestamp == -1


def test_commit() -> None:
    msg = decode_message(b"C" + struct.pack("!BQQq", 0, LSN1, LSN2, TS))
    assert msg == Commit(flags=0, commit_lsn=LSN1, end_lsn=LSN2, commit_timestamp=TS)


def test_origin() -> None:
    msg = decode_message(b"O" + struct.pack("!Q", LSN1) + s("node_a"))
    assert msg == Origin(origin_lsn=LSN1, name="node_a")


@pytest.mark.parametrize("flags", [0, 1])
def test_message_transactional_flag(flags: int) -> None:
    content = b"\x00\xffpayload"
    raw = b"M" + struct.pack("!BQ", flags, LSN1) + s("wm") + struct.pack("!I", len(content))
    msg = decode_message(raw + content)
    assert msg == Message(xid=None, flags=flags, lsn=LSN1, prefix="wm", content=content)
    assert isinstance(msg, Message) and msg.transactional is bool(flags)


def test_message_in_stream_has_xid() -> None:
    raw = b"M" + struct.pack("!IBQ", XID, 1, LSN1) + s("p") + struct.pack("!I", 0)
    assert decode_message(raw, streaming=True) == Message(XID, 1, LSN1, "p", b"")


def relation_bytes(xid: bytes = b"") -> bytes:
    return (b"R" + xid + struct.pack("!I", 16385) + s("public") + s("t\u00e9st")
            + struct.pack("!BH", ord("d"), 2)
            + b"\x01" + s("id") + struct.pack("!Ii", 23, -1)
            + b"\x00" + s("name") + struct.pack("!Ii", 1043, 68))


def test_relation() -> None:
    msg = decode_message(relation_bytes())
    assert msg == Relation(
        xid=None, relation_id=16385, namespace="public", name="t\u00e9st", replica_identity="d",
        columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "name", 1043, 68)))
    assert isinstance(msg, Relation)
    assert [c.key for c in msg.columns] == [True, False]


def test_relation_in_stream_and_pg_catalog_namespace() -> None:
    raw = (b"R" + struct.pack("!I", XID) + struct.pack("!I", 1) + s("") + s("r")
           + struct.pack("!BH", ord("f"), 0))
    assert decode_message(raw, streaming=True) == Relation(XID, 1, "", "r", "f", ())


def test_type() -> None:
    raw = b"Y" + struct.pack("!I", 16390) + s("public") + s("mood")
    assert decode_message(raw) == Type(xid=None, type_oid=16390, namespace="public", name="mood")
    streamed = b"Y" + struct.pack("!II", 9, 16390) + s("public") + s("mood")
    assert decode_message(streamed, streaming=True) == Type(9, 16390, "public", "mood")


def test_insert_all_four_tuple_kinds() -> None:
    raw = b"I" + struct.pack("!I", 16385) + b"N" + tup(t("42"), b"n", b"u", b(b"\x00\x01"),
                                                         t("\u20ac"), t(""))
    msg = decode_message(raw)
    assert msg == Insert(None, 16385, ("42", None, UNCHANGED_TOAST, BinaryValue(b"\x00\x01"),
                                       "\u20ac", ""))
    assert isinstance(msg, Insert)
    assert type(msg.new[0]) is str and type(msg.new[3]) is BinaryValue
    assert msg.new[2] is UNCHANGED_TOAST


def test_insert_streamed_and_zero_columns() -> None:
    raw = b"I" + struct.pack("!II", XID, 5) + b"N" + tup()
    assert decode_message(raw, streaming=True) == Insert(XID, 5, ())


def test_update_without_old_tuple() -> None:
    raw = b"U" + struct.pack("!I", 5) + b"N" + tup(t("1"), t("x"))
    assert decode_message(raw) == Update(None, 5, None, None, ("1", "x"))


@pytest.mark.parametrize("kind", ["K", "O"])
def test_update_with_key_or_old_tuple(kind: str) -> None:
    raw = (b"U" + struct.pack("!I", 5) + kind.encode() + tup(t("1"), b"n") + b"N"
           + tup(t("2"), t("y")))
    assert decode_message(raw) == Update(None, 5, kind, ("1", None), ("2", "y"))  # type: ignore[arg-type]


def test_update_streamed() -> None:
    raw = b"U" + struct.pack("!II", XID, 5) + b"O" + tup(b"n") + b"N" + tup(b"u")
    assert decode_message(raw, streaming=True) == Update(XID, 5, "O", (None,), (UNCHANGED_TOAST,))


@pytest.mark.parametrize("kind", ["K", "O"])
def test_delete(kind: str) -> None:
    raw = b"D" + struct.pack("!I", 5) + kind.encode() + tup(t("1"), b"n")
    assert decode_message(raw) == Delete(None, 5, kind, ("1", None))  # type: ignore[arg-type]
    streamed = b"D" + struct.pack("!II", 3, 5) + kind.encode() + tup(t("1"))
    assert decode_message(streamed, streaming=True) == Delete(3, 5, kind, ("1",))  # type: ignore[arg-type]


@pytest.mark.parametrize(("options", "cascade", "restart"),
                         [(0, False, False), (1, True, False), (2, False, True), (3, True, True)])
def test_truncate_option_bits(options: int, cascade: bool, restart: bool) -> None:
    raw = b"T" + struct.pack("!IBII", 2, options, 16385, 16390)
    msg = decode_message(raw)
    assert msg == Truncate(None, options, (16385, 16390))
    assert isinstance(msg, Truncate)
    assert (msg.cascade, msg.restart_identity) == (cascade, restart)


def test_truncate_streamed() -> None:
    raw = b"T" + struct.pack("!IIBI", XID, 1, 0, 7)
    assert decode_message(raw, streaming=True) == Truncate(XID, 0, (7,))


@pytest.mark.parametrize("first", [0, 1])
def test_stream_start_stop(first: int) -> None:
    assert decode_message(b"S" + struct.pack("!IB", XID, first)) == StreamStart(XID, bool(first))
    assert decode_message(b"E") == StreamStop()


def test_stream_commit() -> None:
    raw = b"c" + struct.pack("!IBQQq", XID, 0, LSN1, LSN2, TS)
    assert decode_message(raw) == StreamCommit(XID, 0, LSN1, LSN2, TS)


def test_stream_abort_as_negotiated() -> None:
    """The abort LSN and time come exactly with streaming 'parallel' (protocol 4)."""
    plain = b"A" + struct.pack("!II", 10, 11)
    assert decode_message(plain) == StreamAbort(10, 11, None, None)
    assert Decoder(4).decode(plain) == StreamAbort(10, 11, None, None)
    raw = b"A" + struct.pack("!IIQq", 10, 10, LSN1, TS)
    expected = StreamAbort(xid=10, subxid=10, abort_lsn=LSN1, abort_timestamp=TS)
    assert decode_message(raw, parallel_streaming=True) == expected
    assert Decoder(4, parallel_streaming=True).decode(raw) == expected


@pytest.mark.parametrize(("proto", "parallel"), [(0, False), (5, False), (3, True), (1, True)])
def test_decoder_refuses_what_no_server_negotiates(proto: int, parallel: bool) -> None:
    with pytest.raises(ValueError, match="protocol"):
        Decoder(proto, parallel_streaming=parallel)


def test_two_phase_messages() -> None:
    fixed = struct.pack("!QQqI", LSN1, LSN2, TS, XID)
    assert decode_message(b"b" + fixed + s("gid-1")) == BeginPrepare(LSN1, LSN2, TS, XID, "gid-1")
    flagged = struct.pack("!BQQqI", 0, LSN1, LSN2, TS, XID)
    assert decode_message(b"P" + flagged + s("g")) == Prepare(0, LSN1, LSN2, TS, XID, "g")
    assert decode_message(b"K" + flagged + s("g")) == CommitPrepared(0, LSN1, LSN2, TS, XID, "g")
    assert decode_message(b"p" + flagged + s("g")) == StreamPrepare(0, LSN1, LSN2, TS, XID, "g")
    rollback = b"r" + struct.pack("!BQQqqI", 0, LSN1, LSN2, TS, TS + 5, XID) + s("g")
    assert decode_message(rollback) == RollbackPrepared(0, LSN1, LSN2, TS, TS + 5, XID, "g")


def test_accepts_memoryview_and_bytearray() -> None:
    raw = b"B" + struct.pack("!QqI", LSN1, TS, XID)
    expected = Begin(LSN1, TS, XID)
    assert decode_message(memoryview(b"xx" + raw)[2:]) == expected
    assert decode_message(bytearray(raw)) == expected


def test_messages_are_immutable_and_type_aware() -> None:
    msg = Begin(1, 2, 3)
    with pytest.raises(AttributeError):
        msg.xid = 4  # type: ignore[misc]
    assert msg != (1, 2, 3)
    assert StreamStop() != ()
    assert Prepare(0, 1, 2, 3, 4, "g") != StreamPrepare(0, 1, 2, 3, 4, "g")
    assert hash(Prepare(0, 1, 2, 3, 4, "g")) == hash(Prepare(0, 1, 2, 3, 4, "g"))
    assert not hasattr(msg, "__dict__")


def test_decoder_tracks_stream_blocks() -> None:
    insert_streamed = b"I" + struct.pack("!II", 77, 5) + b"N" + tup(t("1"))
    decoder = Decoder(2)
    assert decoder.decode(b"S" + struct.pack("!IB", 77, 1)) == StreamStart(77, True)
    assert decoder.in_stream
    assert decoder.decode(insert_streamed) == Insert(77, 5, ("1",))
    assert decoder.decode(b"E") == StreamStop()
    assert not decoder.in_stream
    plain = b"I" + struct.pack("!I", 5) + b"N" + tup(t("1"))
    assert decoder.decode(plain) == Insert(None, 5, ("1",))

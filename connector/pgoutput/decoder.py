"""pgoutput bytes -> message objects. Pure and allocation-lean: this is the producer's hot path.

Each message type has one function reading a `bytes` buffer with precompiled `struct.Struct`
unpackers at explicit offsets. Any malformation raises `DecodeError` naming the byte offset;
struct/index/unicode errors never escape (a last-resort guard in `decode_message` converts any
that a check missed).

Messages inside a Stream Start/Stop block carry an extra xid, which the bytes alone cannot
tell: pass `streaming=True` for those, or let `Decoder` track the blocks. Nor can the bytes tell
whether a Stream Abort carries the abort LSN and time: the server adds them exactly when the
client asked for ``streaming 'parallel'`` (protocol 4), so the caller says what it asked for
(`Decoder(proto_version, parallel_streaming=...)`, `decode_message(..., parallel_streaming=)`).

When the C extension is built (`connector.speedups.native`), Insert, Update and Delete (most of
a stream) are decoded by its `read_change` (connector/native/tuple.c), which declines anything
malformed and then runs the Python reader below, so results and errors are the same either way.
The Python readers stay the reference (`PYTHON_READERS`; the tests compare the two).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

from connector.errors import DecodeError
from connector.speedups import native

from .lsn import lsn_to_str
from .messages import (
    UNCHANGED_TOAST,
    Begin,
    BeginPrepare,
    BinaryValue,
    ColumnValue,
    Commit,
    CommitPrepared,
    Delete,
    Insert,
    Message,
    OldTupleKind,
    Origin,
    PgOutputMessage,
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
    TupleData,
    Type,
    Update,
)

_U8: Final = struct.Struct("!B")
_U16: Final = struct.Struct("!H")
_U32: Final = struct.Struct("!I")
_U32_U32: Final = struct.Struct("!II")
_COLUMN_TAIL: Final = struct.Struct("!Ii")  # type OID, type modifier
_REL_PART: Final = struct.Struct("!IB")  # relation OID, tuple part byte
_XID_REL_PART: Final = struct.Struct("!IIB")  # xid, relation OID, tuple part byte
_BEGIN: Final = struct.Struct("!QqI")  # final LSN, commit time, xid
_COMMIT: Final = struct.Struct("!BQQq")  # flags, commit LSN, end LSN, commit time
_ORIGIN_LSN: Final = struct.Struct("!Q")
_MESSAGE_HEAD: Final = struct.Struct("!BQ")  # flags, LSN
_REL_HEAD: Final = struct.Struct("!BH")  # replica identity, column count
_TRUNC_HEAD: Final = struct.Struct("!IB")  # relation count, options
_STREAM_START: Final = struct.Struct("!IB")  # xid, first segment
_STREAM_COMMIT: Final = struct.Struct("!IBQQq")  # xid, flags, commit LSN, end LSN, time
_STREAM_ABORT: Final = struct.Struct("!II")  # xid, subxid
_STREAM_ABORT_V4: Final = struct.Struct("!IIQq")  # + abort LSN, abort time
_BEGIN_PREPARE: Final = struct.Struct("!QQqI")  # prepare LSN, end LSN, time, xid
_PREPARE: Final = struct.Struct("!BQQqI")  # flags, LSN, end LSN, time, xid (P, K, p)
_ROLLBACK_PREPARED: Final = struct.Struct("!BQQqqI")  # flags, 2 LSNs, 2 times, xid

_NAMES: Final = {
    ord("B"): "Begin", ord("M"): "Message", ord("C"): "Commit", ord("O"): "Origin",
    ord("R"): "Relation", ord("Y"): "Type", ord("I"): "Insert", ord("U"): "Update",
    ord("D"): "Delete", ord("T"): "Truncate", ord("S"): "Stream Start", ord("E"): "Stream Stop",
    ord("c"): "Stream Commit", ord("A"): "Stream Abort", ord("b"): "Begin Prepare",
    ord("P"): "Prepare", ord("K"): "Commit Prepared", ord("r"): "Rollback Prepared",
    ord("p"): "Stream Prepare",
}

_Reader = Callable[[bytes, bool], PgOutputMessage]
# NamedTuple's generated __new__ is Python code; tuple.__new__ builds the same object 2x faster.
_new = tuple.__new__


# --- shared parts ------------------------------------------------------------------------------

def _expect_size(buf: bytes, size: int) -> None:
    """Fixed-size messages: reject both truncation and trailing bytes."""
    if len(buf) != size:
        what = "truncated" if len(buf) < size else "trailing bytes after"
        raise DecodeError(f"{what} {_NAMES[buf[0]]} message: expected {size} bytes, got "
                          f"{len(buf)}", offset=min(len(buf), size))


def _expect_end(buf: bytes, offset: int) -> None:
    if offset != len(buf):
        raise DecodeError(f"{len(buf) - offset} trailing bytes after {_NAMES[buf[0]]} message",
                          offset=offset)


def _need(buf: bytes, offset: int, size: int, what: str) -> None:
    if offset + size > len(buf):
        raise DecodeError(f"truncated {_NAMES[buf[0]]} message: {what} needs {size} bytes",
                          offset=offset)


def _cstring(buf: bytes, offset: int) -> tuple[str, int]:
    """A NUL-terminated UTF-8 string starting at offset; returns it and the offset after the NUL."""
    end = buf.find(b"\0", offset)
    if end < 0:
        raise DecodeError(f"unterminated string in {_NAMES[buf[0]]} message", offset=offset)
    try:
        return buf[offset:end].decode(), end + 1
    except UnicodeDecodeError as exc:
        raise DecodeError(f"invalid UTF-8 in string of {_NAMES[buf[0]]} message",
                          offset=offset + exc.start) from None


def _xid(buf: bytes, streaming: bool) -> tuple[int | None, int]:
    """The optional xid of a streamed change; returns it and the offset after it."""
    if not streaming:
        return None, 1
    _need(buf, 1, 4, "xid")
    return _U32.unpack_from(buf, 1)[0], 5


def read_tuple(buf: bytes, offset: int) -> tuple[TupleData, int]:
    """TupleData at offset: returns the values and the offset after them.

    The hottest loop of the producer (one pass per column). Lengths are not checked per
    column: slicing past the end cannot fail, so one check after the loop (and in the error
    handlers) finds a length that overruns the message.
    """
    size = len(buf)
    if offset + 2 > size:
        raise DecodeError("truncated TupleData: missing column count", offset=offset)
    (ncols,) = _U16.unpack_from(buf, offset)
    o = offset + 2
    start = o
    values: list[ColumnValue] = []
    append = values.append
    unpack_len = _U32.unpack_from
    try:
        for _ in range(ncols):
            kind = buf[o]
            if kind == 116:  # 't': the common case first
                start = o + 5
                o = start + unpack_len(buf, o + 1)[0]
                append(buf[start:o].decode())
            elif kind == 110:  # 'n'
                append(None)
                o += 1
            elif kind == 98:  # 'b'
                start = o + 5
                o = start + unpack_len(buf, o + 1)[0]
                append(BinaryValue(buf[start:o]))
            elif kind == 117:  # 'u'
                append(UNCHANGED_TOAST)
                o += 1
            else:
                raise DecodeError(f"unknown TupleData column kind {bytes([kind])!r}", offset=o)
    except IndexError:
        if o > size:
            raise _overrun(o, start) from None
        raise DecodeError(f"truncated TupleData: {ncols} columns announced, "
                          f"{len(values)} present", offset=o) from None
    except struct.error:
        raise DecodeError("truncated TupleData: value length cut off", offset=o + 1) from None
    except UnicodeDecodeError as exc:
        if o > size:
            raise _overrun(o, start) from None
        raise DecodeError("invalid UTF-8 in text value", offset=start + exc.start) from None
    if o > size:
        raise _overrun(o, start)
    return tuple(values), o


def _overrun(end: int, start: int) -> DecodeError:
    return DecodeError(f"value length {end - start} exceeds the message", offset=start - 4)


# --- one reader per message type ---------------------------------------------------------------

def _begin(buf: bytes, streaming: bool) -> Begin:
    if len(buf) != 21:
        _expect_size(buf, 21)
    return _new(Begin, _BEGIN.unpack_from(buf, 1))


def _commit(buf: bytes, streaming: bool) -> Commit:
    if len(buf) != 26:
        _expect_size(buf, 26)
    return _new(Commit, _COMMIT.unpack_from(buf, 1))


def _origin(buf: bytes, streaming: bool) -> Origin:
    _need(buf, 1, 8, "origin LSN")
    (lsn,) = _ORIGIN_LSN.unpack_from(buf, 1)
    name, o = _cstring(buf, 9)
    _expect_end(buf, o)
    return Origin(lsn, name)


def _message(buf: bytes, streaming: bool) -> Message:
    xid, o = _xid(buf, streaming)
    _need(buf, o, 9, "flags and LSN")
    flags, lsn = _MESSAGE_HEAD.unpack_from(buf, o)
    prefix, o = _cstring(buf, o + 9)
    _need(buf, o, 4, "content length")
    (length,) = _U32.unpack_from(buf, o)
    o += 4
    if o + length != len(buf):
        raise DecodeError(f"message content length {length} does not match the "
                          f"{len(buf) - o} bytes left", offset=o - 4)
    return Message(xid, flags, lsn, prefix, buf[o:])


def _relation(buf: bytes, streaming: bool) -> Relation:
    xid, o = _xid(buf, streaming)
    _need(buf, o, 4, "relation OID")
    (relid,) = _U32.unpack_from(buf, o)
    namespace, o = _cstring(buf, o + 4)
    name, o = _cstring(buf, o)
    _need(buf, o, 3, "replica identity and column count")
    ident, ncols = _REL_HEAD.unpack_from(buf, o)
    o += 3
    columns = []
    for _ in range(ncols):
        _need(buf, o, 1, "column flags")
        flags = buf[o]
        colname, o = _cstring(buf, o + 1)
        _need(buf, o, 8, "column type OID and modifier")
        type_oid, typmod = _COLUMN_TAIL.unpack_from(buf, o)
        o += 8
        columns.append(RelationColumn(flags, colname, type_oid, typmod))
    _expect_end(buf, o)
    return Relation(xid, relid, namespace, name, chr(ident), tuple(columns))


def _type(buf: bytes, streaming: bool) -> Type:
    xid, o = _xid(buf, streaming)
    _need(buf, o, 4, "type OID")
    (oid,) = _U32.unpack_from(buf, o)
    namespace, o = _cstring(buf, o + 4)
    name, o = _cstring(buf, o)
    _expect_end(buf, o)
    return Type(xid, oid, namespace, name)


def _head(buf: bytes, streaming: bool) -> tuple[int | None, int, int]:
    """Insert/Update/Delete head, slow path for errors: xid, relation OID, first part byte."""
    if streaming:
        _need(buf, 1, 9, "xid, relation OID and tuple kind")
        return _XID_REL_PART.unpack_from(buf, 1)
    _need(buf, 1, 5, "relation OID and tuple kind")
    return (None, *_REL_PART.unpack_from(buf, 1))


# Insert, Update and Delete are most of a stream: their heads are unpacked inline, in one
# struct call, and a short buffer is reported by `_head`.

def _insert(buf: bytes, streaming: bool) -> Insert:
    try:
        if streaming:
            xid, relid, part = _XID_REL_PART.unpack_from(buf, 1)
            o = 10
        else:
            xid = None
            relid, part = _REL_PART.unpack_from(buf, 1)
            o = 6
    except struct.error:
        _head(buf, streaming)
        raise
    if part != 78:  # 'N'
        raise DecodeError(f"Insert expects a new tuple 'N', got {bytes([part])!r}", offset=o - 1)
    new, o = read_tuple(buf, o)
    if o != len(buf):
        _expect_end(buf, o)
    return _new(Insert, (xid, relid, new))


def _update(buf: bytes, streaming: bool) -> Update:
    try:
        if streaming:
            xid, relid, part = _XID_REL_PART.unpack_from(buf, 1)
            o = 9
        else:
            xid = None
            relid, part = _REL_PART.unpack_from(buf, 1)
            o = 5
    except struct.error:
        _head(buf, streaming)
        raise
    old_kind: OldTupleKind | None = None
    old: TupleData | None = None
    if part == 75 or part == 79:  # 'K' or 'O'
        old_kind = "K" if part == 75 else "O"
        old, o = read_tuple(buf, o + 1)
        _need(buf, o, 1, "new tuple kind")
        part = buf[o]
    if part != 78:  # 'N'
        raise DecodeError(f"Update expects 'K', 'O' or 'N', got {bytes([part])!r}", offset=o)
    new, o = read_tuple(buf, o + 1)
    if o != len(buf):
        _expect_end(buf, o)
    return _new(Update, (xid, relid, old_kind, old, new))


def _delete(buf: bytes, streaming: bool) -> Delete:
    try:
        if streaming:
            xid, relid, part = _XID_REL_PART.unpack_from(buf, 1)
            o = 10
        else:
            xid = None
            relid, part = _REL_PART.unpack_from(buf, 1)
            o = 6
    except struct.error:
        _head(buf, streaming)
        raise
    if part != 75 and part != 79:
        raise DecodeError(f"Delete expects 'K' or 'O', got {bytes([part])!r}", offset=o - 1)
    old, o = read_tuple(buf, o)
    if o != len(buf):
        _expect_end(buf, o)
    return _new(Delete, (xid, relid, "K" if part == 75 else "O", old))


def _truncate(buf: bytes, streaming: bool) -> Truncate:
    xid, o = _xid(buf, streaming)
    _need(buf, o, 5, "relation count and options")
    count, options = _TRUNC_HEAD.unpack_from(buf, o)
    o += 5
    if len(buf) - o != 4 * count:
        raise DecodeError(f"Truncate announces {count} relations but carries "
                          f"{len(buf) - o} bytes of OIDs", offset=o - 5)
    return Truncate(xid, options, struct.unpack_from(f"!{count}I", buf, o))


def _stream_start(buf: bytes, streaming: bool) -> StreamStart:
    _expect_size(buf, 6)
    xid, first = _STREAM_START.unpack_from(buf, 1)
    return StreamStart(xid, first != 0)


def _stream_stop(buf: bytes, streaming: bool) -> StreamStop:
    _expect_size(buf, 1)
    return StreamStop()


def _stream_commit(buf: bytes, streaming: bool) -> StreamCommit:
    _expect_size(buf, 30)
    return StreamCommit(*_STREAM_COMMIT.unpack_from(buf, 1))


def _stream_abort(buf: bytes, streaming: bool) -> StreamAbort:
    _expect_abort_size(buf, 9, "without parallel streaming")
    return StreamAbort(*_STREAM_ABORT.unpack_from(buf, 1))


def _stream_abort_parallel(buf: bytes, streaming: bool) -> StreamAbort:
    """Protocol 4 with ``streaming 'parallel'``: the abort LSN and time follow the xids."""
    _expect_abort_size(buf, 25, "with parallel streaming")
    return StreamAbort(*_STREAM_ABORT_V4.unpack_from(buf, 1))


def _expect_abort_size(buf: bytes, size: int, negotiated: str) -> None:
    # A length that fits the other mode means the decoder was told the wrong mode: say so.
    if len(buf) != size:
        raise DecodeError(f"Stream Abort {negotiated} must be {size} bytes, got {len(buf)}",
                          offset=min(len(buf), size))


def _with_gid(buf: bytes, fixed: struct.Struct) -> tuple[Any, ...]:
    """Two-phase messages: fixed fields, then the GID string ending the message."""
    _need(buf, 1, fixed.size, "fixed fields")
    fields = fixed.unpack_from(buf, 1)
    gid, o = _cstring(buf, 1 + fixed.size)
    _expect_end(buf, o)
    return (*fields, gid)


def _begin_prepare(buf: bytes, streaming: bool) -> BeginPrepare:
    return BeginPrepare._make(_with_gid(buf, _BEGIN_PREPARE))


def _prepare(buf: bytes, streaming: bool) -> Prepare:
    return Prepare._make(_with_gid(buf, _PREPARE))


def _commit_prepared(buf: bytes, streaming: bool) -> CommitPrepared:
    return CommitPrepared._make(_with_gid(buf, _PREPARE))


def _rollback_prepared(buf: bytes, streaming: bool) -> RollbackPrepared:
    return RollbackPrepared._make(_with_gid(buf, _ROLLBACK_PREPARED))


def _stream_prepare(buf: bytes, streaming: bool) -> StreamPrepare:
    return StreamPrepare._make(_with_gid(buf, _PREPARE))


_READERS: Final[dict[int, _Reader]] = {
    ord("B"): _begin, ord("M"): _message, ord("C"): _commit, ord("O"): _origin,
    ord("R"): _relation, ord("Y"): _type, ord("I"): _insert, ord("U"): _update,
    ord("D"): _delete, ord("T"): _truncate, ord("S"): _stream_start, ord("E"): _stream_stop,
    ord("c"): _stream_commit, ord("A"): _stream_abort, ord("b"): _begin_prepare,
    ord("P"): _prepare, ord("K"): _commit_prepared, ord("r"): _rollback_prepared,
    ord("p"): _stream_prepare,
}

# The pure-Python readers, whatever `_READERS` ends up holding (tests compare against these).
PYTHON_READERS: Final[dict[int, _Reader]] = dict(_READERS)
_ABORT: Final = ord("A")

# Insert, Update and Delete through the C extension when it is built: `read_change` decodes
# a well-formed message itself and hands anything else to the Python reader above for its type
# (which raises the precise DecodeError), so results and errors are the same either way.
if native is not None:
    native.setup(Insert, Update, Delete, BinaryValue, UNCHANGED_TOAST, _insert, _update, _delete)
    _READERS[ord("I")] = _READERS[ord("U")] = _READERS[ord("D")] = native.read_change


# --- public API --------------------------------------------------------------------------------

def decode_message(buf: bytes | bytearray | memoryview, *, streaming: bool = False,
                   lsn: int | None = None, parallel_streaming: bool = False) -> PgOutputMessage:
    """Decode one pgoutput message.

    streaming: the message sits inside a Stream Start/Stop block (its changes carry an xid).
    lsn: where the message came from, only to label a DecodeError.
    parallel_streaming: the stream was started with ``streaming 'parallel'`` (protocol 4), so
    a Stream Abort carries the abort LSN and time.
    """
    if type(buf) is not bytes:
        buf = bytes(buf)  # one copy, then every slice below is a cheap bytes slice
    try:
        if not buf:
            raise DecodeError("empty message", offset=0)
        if parallel_streaming and buf[0] == _ABORT:
            return _stream_abort_parallel(buf, streaming)
        reader = _READERS.get(buf[0])
        if reader is None:
            raise DecodeError(f"unknown message type byte {buf[:1]!r}", offset=0)
        return reader(buf, streaming)
    except DecodeError as exc:
        if lsn is None or exc.lsn is not None:
            raise
        raise DecodeError(exc.reason, offset=exc.offset, lsn=lsn_to_str(lsn)) from None
    except (struct.error, IndexError, ValueError, OverflowError) as exc:  # a missed check
        raise DecodeError(f"malformed {_NAMES.get(buf[0], 'unknown')} message: {exc}",
                          lsn=None if lsn is None else lsn_to_str(lsn)) from None


class Decoder:
    """Decodes a message sequence, tracking Stream Start/Stop so streamed xids are read.

    One per replication stream (or capture file); not thread-safe, not shared. Told what the
    stream was started with: `proto_version` (1-4) and whether ``streaming 'parallel'`` was
    asked for (protocol 4 only; then Stream Abort carries the abort LSN and time).
    """

    __slots__ = ("in_stream", "parallel_streaming", "proto_version", "_readers")

    def __init__(self, proto_version: int, *, parallel_streaming: bool = False) -> None:
        if not 1 <= proto_version <= 4:
            raise ValueError(f"pgoutput protocol version {proto_version} is not 1-4")
        if parallel_streaming and proto_version < 4:
            raise ValueError(f"parallel streaming needs protocol 4, not {proto_version}")
        self.proto_version = proto_version
        self.parallel_streaming = parallel_streaming
        self.in_stream = False
        # The module's table itself (tests swap the C readers in and out of it), or a copy
        # with the parallel Stream Abort reader.
        self._readers = ({**_READERS, _ABORT: _stream_abort_parallel} if parallel_streaming
                         else _READERS)

    def decode(self, buf: bytes | bytearray | memoryview, lsn: int | None = None
               ) -> PgOutputMessage:
        if type(buf) is not bytes:
            buf = bytes(buf)
        try:  # fast path: straight to the reader
            msg = self._readers[buf[0]](buf, self.in_stream)
        except Exception:  # noqa: BLE001 - re-decoded below to raise the one proper DecodeError
            msg = decode_message(buf, streaming=self.in_stream, lsn=lsn,
                                 parallel_streaming=self.parallel_streaming)
        cls = type(msg)
        if cls is StreamStart:
            if self.in_stream:
                raise self._error("Stream Start inside a stream block", lsn)
            self.in_stream = True
        elif cls is StreamStop:
            if not self.in_stream:
                raise self._error("Stream Stop outside a stream block", lsn)
            self.in_stream = False
        return msg

    @staticmethod
    def _error(reason: str, lsn: int | None) -> DecodeError:
        return DecodeError(reason, offset=0, lsn=None if lsn is None else lsn_to_str(lsn))

"""Message objects -> pgoutput bytes: the exact inverse of the decoder.

Not on the producer's path (PostgreSQL writes these); used by round-trip property tests, by
benchmarks and by tests elsewhere that need realistic protocol bytes. The optional xid is
written when a message's `xid` is not None, i.e. as if it were inside a stream block.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

from .messages import (
    UNCHANGED_TOAST,
    Begin,
    BeginPrepare,
    BinaryValue,
    Commit,
    CommitPrepared,
    Delete,
    Insert,
    Message,
    Origin,
    PgOutputMessage,
    Prepare,
    Relation,
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

_U16: Final = struct.Struct("!H")
_U32: Final = struct.Struct("!I")
_COLUMN_TAIL: Final = struct.Struct("!Ii")
_VALUE_HEAD: Final = struct.Struct("!cI")


def _cstring(text: str) -> bytes:
    raw = text.encode()
    if b"\0" in raw:
        raise ValueError(f"string contains NUL, not representable in pgoutput: {text!r}")
    return raw + b"\0"


def _xid(xid: int | None) -> bytes:
    return b"" if xid is None else _U32.pack(xid)


def encode_tuple(values: TupleData) -> bytes:
    """TupleData part: column count, then one kind byte (and length + bytes) per column."""
    parts = [_U16.pack(len(values))]
    for value in values:
        if value is None:
            parts.append(b"n")
        elif value is UNCHANGED_TOAST:
            parts.append(b"u")
        elif isinstance(value, BinaryValue):
            parts.append(_VALUE_HEAD.pack(b"b", len(value)))
            parts.append(bytes(value))
        elif isinstance(value, str):
            raw = value.encode()
            parts.append(_VALUE_HEAD.pack(b"t", len(raw)))
            parts.append(raw)
        else:
            raise TypeError(f"not a TupleData value: {value!r}")
    return b"".join(parts)


def _begin(m: Begin) -> bytes:
    return struct.pack("!cQqI", b"B", m.final_lsn, m.commit_timestamp, m.xid)


def _message(m: Message) -> bytes:
    return b"".join((b"M", _xid(m.xid), struct.pack("!BQ", m.flags, m.lsn), _cstring(m.prefix),
                     _U32.pack(len(m.content)), m.content))


def _commit(m: Commit) -> bytes:
    return struct.pack("!cBQQq", b"C", m.flags, m.commit_lsn, m.end_lsn, m.commit_timestamp)


def _origin(m: Origin) -> bytes:
    return struct.pack("!cQ", b"O", m.origin_lsn) + _cstring(m.name)


def _relation(m: Relation) -> bytes:
    parts = [b"R", _xid(m.xid), _U32.pack(m.relation_id), _cstring(m.namespace),
             _cstring(m.name), struct.pack("!BH", ord(m.replica_identity), len(m.columns))]
    for col in m.columns:
        parts += (bytes([col.flags]), _cstring(col.name),
                  _COLUMN_TAIL.pack(col.type_oid, col.type_modifier))
    return b"".join(parts)


def _type(m: Type) -> bytes:
    return b"".join((b"Y", _xid(m.xid), _U32.pack(m.type_oid), _cstring(m.namespace),
                     _cstring(m.name)))


def _insert(m: Insert) -> bytes:
    return b"".join((b"I", _xid(m.xid), _U32.pack(m.relation_id), b"N", encode_tuple(m.new)))


def _update(m: Update) -> bytes:
    parts = [b"U", _xid(m.xid), _U32.pack(m.relation_id)]
    if m.old is not None:
        if m.old_kind not in ("K", "O"):
            raise ValueError(f"Update with an old tuple needs old_kind 'K' or 'O': {m.old_kind!r}")
        parts += (m.old_kind.encode(), encode_tuple(m.old))
    elif m.old_kind is not None:
        raise ValueError("Update has old_kind but no old tuple")
    parts += (b"N", encode_tuple(m.new))
    return b"".join(parts)


def _delete(m: Delete) -> bytes:
    if m.old_kind not in ("K", "O"):
        raise ValueError(f"Delete needs old_kind 'K' or 'O': {m.old_kind!r}")
    return b"".join((b"D", _xid(m.xid), _U32.pack(m.relation_id), m.old_kind.encode(),
                     encode_tuple(m.old)))


def _truncate(m: Truncate) -> bytes:
    count = len(m.relation_ids)
    return b"".join((b"T", _xid(m.xid), struct.pack(f"!IB{count}I", count, m.options,
                                                     *m.relation_ids)))


def _stream_start(m: StreamStart) -> bytes:
    return struct.pack("!cIB", b"S", m.xid, 1 if m.first_segment else 0)


def _stream_stop(m: StreamStop) -> bytes:
    return b"E"


def _stream_commit(m: StreamCommit) -> bytes:
    return struct.pack("!cIBQQq", b"c", m.xid, m.flags, m.commit_lsn, m.end_lsn,
                       m.commit_timestamp)


def _stream_abort(m: StreamAbort) -> bytes:
    if m.abort_lsn is None and m.abort_timestamp is None:
        return struct.pack("!cII", b"A", m.xid, m.subxid)
    if m.abort_lsn is None or m.abort_timestamp is None:
        raise ValueError("Stream Abort needs both abort_lsn and abort_timestamp, or neither")
    return struct.pack("!cIIQq", b"A", m.xid, m.subxid, m.abort_lsn, m.abort_timestamp)


def _begin_prepare(m: BeginPrepare) -> bytes:
    return struct.pack("!cQQqI", b"b", m.prepare_lsn, m.end_lsn, m.prepare_timestamp,
                       m.xid) + _cstring(m.gid)


def _prepare_like(tag: bytes, m: Prepare | CommitPrepared | StreamPrepare) -> bytes:
    return struct.pack("!cBQQqI", tag, *m[:5]) + _cstring(m.gid)


def _rollback_prepared(m: RollbackPrepared) -> bytes:
    return struct.pack("!cBQQqqI", b"r", m.flags, m.prepare_end_lsn, m.rollback_end_lsn,
                       m.prepare_timestamp, m.rollback_timestamp, m.xid) + _cstring(m.gid)


_WRITERS: Final[dict[type, Callable[[Any], bytes]]] = {
    Begin: _begin, Message: _message, Commit: _commit, Origin: _origin, Relation: _relation,
    Type: _type, Insert: _insert, Update: _update, Delete: _delete, Truncate: _truncate,
    StreamStart: _stream_start, StreamStop: _stream_stop, StreamCommit: _stream_commit,
    StreamAbort: _stream_abort, BeginPrepare: _begin_prepare,
    Prepare: lambda m: _prepare_like(b"P", m),
    CommitPrepared: lambda m: _prepare_like(b"K", m),
    RollbackPrepared: _rollback_prepared,
    StreamPrepare: lambda m: _prepare_like(b"p", m),
}


def encode_message(msg: PgOutputMessage) -> bytes:
    """The pgoutput bytes of one message (ValueError/struct.error if a field is out of range)."""
    writer = _WRITERS.get(type(msg))
    if writer is None:
        raise TypeError(f"not a pgoutput message: {msg!r}")
    return writer(msg)

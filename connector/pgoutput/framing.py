"""Walsender COPY BOTH frames around pgoutput messages (protocol section "Streaming Replication").

Server -> client: XLogData ('w') carrying one pgoutput message, and primary keepalive ('k').
Client -> server: standby status update ('r') reporting written/flushed/applied LSNs.
Pure functions over bytes; the socket lives in `connector.replication`.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from connector.errors import DecodeError

_XLOGDATA_HEAD: Final = struct.Struct("!QQq")  # WAL start, WAL end, server clock
XLOGDATA_HEADER: Final = _XLOGDATA_HEAD  # after the 'w' tag (the stream reader's hot path)
_KEEPALIVE: Final = struct.Struct("!QqB")  # WAL end, server clock, reply requested
_STATUS_UPDATE: Final = struct.Struct("!cQQQqB")
XLOGDATA_HEADER_SIZE: Final = 1 + _XLOGDATA_HEAD.size  # 25: the payload starts here


class XLogData(NamedTuple):
    """'w': WAL data; `payload` is one pgoutput message (a memoryview when the frame was one)."""

    wal_start: int
    wal_end: int
    server_clock: int  # microseconds since 2000-01-01
    payload: bytes | memoryview


class PrimaryKeepalive(NamedTuple):
    """'k': the server's WAL end and clock; reply_requested asks for a status update now."""

    wal_end: int
    server_clock: int
    reply_requested: bool


def parse_xlogdata(frame: bytes | memoryview) -> XLogData:
    if len(frame) < XLOGDATA_HEADER_SIZE or frame[0] != 0x77:
        raise DecodeError(f"not an XLogData frame ({len(frame)} bytes)", offset=0)
    start, end, clock = _XLOGDATA_HEAD.unpack_from(frame, 1)
    return XLogData(start, end, clock, frame[XLOGDATA_HEADER_SIZE:])


def parse_keepalive(frame: bytes | memoryview) -> PrimaryKeepalive:
    if len(frame) != 1 + _KEEPALIVE.size or frame[0] != 0x6B:
        raise DecodeError(f"not a primary keepalive frame ({len(frame)} bytes)", offset=0)
    end, clock, reply = _KEEPALIVE.unpack_from(frame, 1)
    return PrimaryKeepalive(end, clock, reply != 0)


def parse_frame(frame: bytes | memoryview) -> XLogData | PrimaryKeepalive:
    """One CopyData payload from the walsender: XLogData or keepalive, else DecodeError."""
    if not frame:
        raise DecodeError("empty replication frame", offset=0)
    tag = frame[0]
    if tag == 0x77:  # 'w'
        return parse_xlogdata(frame)
    if tag == 0x6B:  # 'k'
        return parse_keepalive(frame)
    raise DecodeError(f"unknown replication frame type {bytes([tag])!r}", offset=0)


def build_standby_status_update(write_lsn: int, flush_lsn: int, apply_lsn: int,
                                client_clock: int, reply_requested: bool = False) -> bytes:
    """'r' frame. PostgreSQL may recycle WAL up to `flush_lsn`: report only what Kafka has.

    client_clock: microseconds since 2000-01-01, e.g.
    `timestamps.unix_to_pg_timestamp(time.time())`.
    """
    return _STATUS_UPDATE.pack(b"r", write_lsn, flush_lsn, apply_lsn, client_clock,
                               1 if reply_requested else 0)


def parse_standby_status_update(frame: bytes | memoryview) -> tuple[int, int, int, int, bool]:
    """Inverse of `build_standby_status_update`: (write, flush, apply, clock, reply)."""
    if len(frame) != _STATUS_UPDATE.size or frame[0] != 0x72:
        raise DecodeError(f"not a standby status update ({len(frame)} bytes)", offset=0)
    _, write, flush, apply, clock, reply = _STATUS_UPDATE.unpack_from(frame, 0)
    return write, flush, apply, clock, reply != 0


def build_xlogdata(wal_start: int, wal_end: int, server_clock: int, payload: bytes) -> bytes:
    """An XLogData frame (what the walsender sends): for tests and tools."""
    return b"w" + _XLOGDATA_HEAD.pack(wal_start, wal_end, server_clock) + payload


def build_keepalive(wal_end: int, server_clock: int, reply_requested: bool = False) -> bytes:
    """A primary keepalive frame: for tests and tools."""
    return b"k" + _KEEPALIVE.pack(wal_end, server_clock, 1 if reply_requested else 0)

"""Walsender COPY BOTH frames: XLogData, primary keepalive, standby status update."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.errors import DecodeError
from connector.pgoutput import (
    XLOGDATA_HEADER_SIZE,
    Begin,
    PrimaryKeepalive,
    XLogData,
    build_keepalive,
    build_standby_status_update,
    build_xlogdata,
    decode_message,
    encode_message,
    parse_frame,
    parse_standby_status_update,
    parse_xlogdata,
)

lsn = st.integers(0, 2**64 - 1)
clock = st.integers(-(2**63), 2**63 - 1)


def test_xlogdata_layout_and_payload_view() -> None:
    payload = encode_message(Begin(0x16B3748, 5, 700))
    frame = b"w" + struct.pack("!QQq", 0x100, 0x200, 12345) + payload
    parsed = parse_frame(memoryview(frame))
    assert isinstance(parsed, XLogData)
    assert (parsed.wal_start, parsed.wal_end, parsed.server_clock) == (0x100, 0x200, 12345)
    assert isinstance(parsed.payload, memoryview)  # no copy of the message bytes
    assert decode_message(parsed.payload) == Begin(0x16B3748, 5, 700)
    assert XLOGDATA_HEADER_SIZE == 25


def test_keepalive_layout() -> None:
    frame = b"k" + struct.pack("!QqB", 0x300, 99, 1)
    assert parse_frame(frame) == PrimaryKeepalive(wal_end=0x300, server_clock=99,
                                                  reply_requested=True)
    assert parse_frame(frame[:-1] + b"\x00") == PrimaryKeepalive(0x300, 99, False)


def test_standby_status_update_layout() -> None:
    frame = build_standby_status_update(0x10, 0x20, 0x30, 777, reply_requested=True)
    assert frame == b"r" + struct.pack("!QQQqB", 0x10, 0x20, 0x30, 777, 1)
    assert len(frame) == 34
    assert parse_standby_status_update(frame) == (0x10, 0x20, 0x30, 777, True)


@given(lsn, lsn, clock, st.binary(max_size=50))
def test_xlogdata_round_trip(start: int, end: int, server_clock: int, payload: bytes) -> None:
    parsed = parse_frame(build_xlogdata(start, end, server_clock, payload))
    assert isinstance(parsed, XLogData)
    assert parsed[:3] == (start, end, server_clock) and bytes(parsed.payload) == payload


@given(lsn, clock, st.booleans())
def test_keepalive_round_trip(end: int, server_clock: int, reply: bool) -> None:
    assert parse_frame(build_keepalive(end, server_clock, reply)) == PrimaryKeepalive(
        end, server_clock, reply)


@given(lsn, lsn, lsn, clock, st.booleans())
def test_status_update_round_trip(w: int, f: int, a: int, c: int, reply: bool) -> None:
    assert parse_standby_status_update(build_standby_status_update(w, f, a, c, reply)) == (
        w, f, a, c, reply)


@pytest.mark.parametrize("frame", [b"", b"x123", b"w" + b"\x00" * 23, b"k" + b"\x00" * 16,
                                   b"k" + b"\x00" * 18])
def test_bad_frames(frame: bytes) -> None:
    with pytest.raises(DecodeError):
        parse_frame(frame)


def test_parse_xlogdata_rejects_keepalive() -> None:
    with pytest.raises(DecodeError):
        parse_xlogdata(build_keepalive(1, 2))


@given(st.binary(max_size=60))
def test_any_frame_bytes_parse_or_raise_decode_error(frame: bytes) -> None:
    try:
        parse_frame(frame)
    except DecodeError:
        pass

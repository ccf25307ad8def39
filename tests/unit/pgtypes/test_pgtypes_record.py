"""The composite (record) parsers against a reference encoder written from PostgreSQL's
documented format ("Composite Type Input and Output Syntax"; record_out, record_send), plus
record_in's other accepted spellings. Real servers' output: tests/integration/producer/
test_producer_outbox.py (payloads with quotes, commas, backslashes, NULLs, arrays)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.errors import DecodeError
from connector.pgtypes.record import parse_record_binary, parse_record_text

_SPECIAL = '"\\(),'


def record_out(values: list[str | None]) -> str:
    """PostgreSQL's record_out: NULL is nothing; a value is quoted when empty or holding a
    quote, backslash, parenthesis, comma or whitespace, and inside quotes a quote or a
    backslash is doubled."""
    parts = []
    for value in values:
        if value is None:
            parts.append("")
        elif value == "" or any(c in _SPECIAL or c in " \t\n\r\v\f" for c in value):
            parts.append('"' + "".join(c * 2 if c in '"\\' else c for c in value) + '"')
        else:
            parts.append(value)
    return "(" + ",".join(parts) + ")"


def record_send(values: list[tuple[int, bytes | None]]) -> bytes:
    out = struct.pack(">i", len(values))
    for oid, data in values:
        out += struct.pack(">Ii", oid, -1 if data is None else len(data)) + (data or b"")
    return out


attribute = st.none() | st.text(st.sampled_from('ab ,()"\\\t\n{}é1-')) | st.text()


@given(st.lists(attribute, min_size=1, max_size=8))
def test_text_round_trips_what_record_out_prints(values: list[str | None]) -> None:
    assert parse_record_text(record_out(values)) == values


@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.none() | st.binary()), max_size=8))
def test_binary_round_trips_what_record_send_writes(values: list[tuple[int, bytes | None]]
                                                    ) -> None:
    assert parse_record_binary(record_send(values)) == values


@pytest.mark.parametrize("text, expected", [
    ("(,)", [None, None]),                    # nothing at all: NULL
    ('("",)', ["", None]),                    # an empty string is quoted
    ("()", [None]),                           # one NULL attribute
    ('(1,"a,""b""\\\\c (x) ",1.50)', ["1", 'a,"b"\\c (x) ', "1.50"]),  # from PostgreSQL 15
    ('(a\\,b,c)', ["a,b", "c"]),              # record_in: a backslash outside quotes
    ('("a\\"b")', ['a"b']),                   # ... and inside them
    ('(a"b,c"d)', ["ab,cd"]),                 # quotes around part of an attribute
    ('( a ,b )', [" a ", "b "]),              # whitespace is kept
    ('(a(b)', ["a(b"]),                       # '(' is plain
    ('  (1)  ', ["1"]),                       # whitespace around the parentheses
    ('("{""x,y"",NULL,""""}")', ['{"x,y",NULL,""}']),  # an array attribute
])
def test_text_spellings(text: str, expected: list[str | None]) -> None:
    assert parse_record_text(text) == expected


@pytest.mark.parametrize("text", ["", "1,2", "(1,2", '("a)', "(1)x", "(a\\", "(1,2))"])
def test_malformed_text_is_a_decode_error(text: str) -> None:
    with pytest.raises(DecodeError, match="invalid order_event value"):
        parse_record_text(text, "order_event")


@pytest.mark.parametrize("data", [b"", b"\x00\x00\x00\x01", b"\x00\x00\x00\x01\x00\x00\x00\x17"
                                  b"\x00\x00\x00\x04\x00", record_send([(23, b"ab")]) + b"x",
                                  b"\xff\xff\xff\xff"])
def test_malformed_binary_is_a_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError, match="invalid order_event value"):
        parse_record_binary(data, "order_event")

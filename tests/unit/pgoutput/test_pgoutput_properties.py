"""Property tests: arbitrary bytes never crash the decoder; encode/decode round-trips."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.errors import DecodeError
from connector.pgoutput import (
    MESSAGE_CLASSES,
    Decoder,
    PgOutputMessage,
    decode_message,
    encode_message,
)
from tests.support.pgoutput_strategies import STRATEGIES, any_message, parallel, streamed

TAGS = b"BMCORYIUDTSEcAbPKrp"


def decodes_or_raises_decode_error(buf: bytes, streaming: bool, parallel: bool = False) -> None:
    try:
        decode_message(buf, streaming=streaming, parallel_streaming=parallel)
    except DecodeError:
        pass  # anything else propagates and fails the test


def test_every_message_class_has_a_strategy() -> None:
    assert set(STRATEGIES) == set(MESSAGE_CLASSES)


@given(st.binary(max_size=200), st.booleans(), st.booleans())
@settings(max_examples=1500)
def test_any_bytes_decode_or_raise_decode_error(buf: bytes, streaming: bool,
                                                parallel: bool) -> None:
    decodes_or_raises_decode_error(buf, streaming, parallel)


@given(st.sampled_from(TAGS), st.binary(max_size=120), st.booleans(), st.booleans())
@settings(max_examples=3000)
def test_any_body_after_a_valid_tag(tag: int, body: bytes, streaming: bool,
                                    parallel: bool) -> None:
    decodes_or_raises_decode_error(bytes([tag]) + body, streaming, parallel)


@given(any_message, st.data())
@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_valid_messages(msg: PgOutputMessage, data: st.DataObject) -> None:
    """Near-valid input reaches deep into the readers: truncations, flips, insertions."""
    raw = bytearray(encode_message(msg))
    op = data.draw(st.sampled_from(["cut", "flip", "insert", "drop"]))
    pos = data.draw(st.integers(0, len(raw)))
    if op == "cut":
        raw = raw[:pos]
    elif op == "flip" and pos < len(raw):
        raw[pos] = data.draw(st.integers(0, 255))
    elif op == "insert":
        raw[pos:pos] = data.draw(st.binary(min_size=1, max_size=4))
    elif op == "drop" and pos < len(raw):
        del raw[pos]
    decodes_or_raises_decode_error(bytes(raw), data.draw(st.booleans()), data.draw(st.booleans()))


@pytest.mark.parametrize("cls", MESSAGE_CLASSES, ids=lambda c: c.__name__)
def test_round_trip_each_kind(cls: type) -> None:
    @given(STRATEGIES[cls])
    @settings(max_examples=300)
    def check(msg: PgOutputMessage) -> None:
        raw = encode_message(msg)
        decoded = decode_message(raw, streaming=streamed(msg), parallel_streaming=parallel(msg))
        assert type(decoded) is type(msg)
        assert decoded == msg
        assert encode_message(decoded) == raw

    check()


@given(any_message)
def test_round_trip_through_memoryview(msg: PgOutputMessage) -> None:
    raw = encode_message(msg)
    assert decode_message(memoryview(b"\x00" + raw)[1:], streaming=streamed(msg),
                          parallel_streaming=parallel(msg)) == msg


@given(st.lists(st.binary(max_size=60) | any_message.map(encode_message), max_size=12),
       st.booleans())
@settings(max_examples=800)
def test_decoder_fast_path_never_leaks(buffers: list[bytes], parallel: bool) -> None:
    """Decoder.decode's fast path falls back to decode_message's error reporting."""
    decoder = Decoder(4, parallel_streaming=parallel)
    for buf in buffers:
        try:
            decoder.decode(buf, lsn=7)
        except DecodeError as exc:
            assert exc.lsn == "0/7"

"""The C decoder of Insert/Update/Delete (connector._native) against the Python readers.

The Python readers (`decoder.PYTHON_READERS`) are the reference: for every input the C side
must give an equal object of the same types, or decline (None) exactly where the Python reader
raises, so that the public decoder raises the same DecodeError either way.
"""

from __future__ import annotations

import gc
import os
import pickle
import struct
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.errors import DecodeError
from connector.pgoutput import (
    UNCHANGED_TOAST,
    BinaryValue,
    Decoder,
    Delete,
    Insert,
    PgOutputMessage,
    Update,
    decode_message,
    decoder,
    encode_message,
)
from connector.speedups import native, native_setting
from tests.support.pgoutput_strategies import STRATEGIES, streamed

CHANGES = st.one_of(STRATEGIES[Insert], STRATEGIES[Update], STRATEGIES[Delete])
needs_native = pytest.mark.skipif(native is None,
                                  reason="C extension not built or PGCDC_NATIVE=off")


def test_native_extension_is_built() -> None:
    """CI builds the extension: a silently missing one must fail, not fall back unnoticed."""
    if native_setting(os.environ) == "off":
        pytest.skip("PGCDC_NATIVE=off: pure Python on purpose")
    assert native is not None, (
        "connector._native is not built: pip install -e . (needs a C compiler)")


@needs_native
def test_dispatch_uses_native_for_changes() -> None:
    assert native is not None
    for tag in b"IUD":
        assert decoder.PYTHON_READERS[tag] is not native.read_change
    # the reference table is never the C one, whichever set the conftest fixture installed
    assert all(r.__module__ == decoder.__name__ for r in decoder.PYTHON_READERS.values())


def shape(obj: Any) -> Any:
    """Types all the way down, so `'a' == BinaryValue(b'a')`-style mix-ups cannot pass."""
    if isinstance(obj, tuple):
        return (type(obj), tuple(shape(x) for x in obj))
    return type(obj)


def python_decode(buf: bytes, streaming: bool) -> PgOutputMessage | Exception:
    """The pure-Python reader's result, or the exception it raised."""
    try:
        return decoder.PYTHON_READERS[buf[0]](buf, streaming)
    except Exception as exc:  # noqa: BLE001 - compared below
        return exc


def check_same(buf: bytes, streaming: bool) -> None:
    assert native is not None
    expected = python_decode(buf, streaming)
    got = native.decode_change(buf, streaming)
    if isinstance(expected, Exception):
        assert got is None, f"C decoded what Python rejects ({expected!r}): {got!r}"
        with pytest.raises(DecodeError):
            native.read_change(buf, streaming)  # the fallback: the Python reader's error
    else:
        assert got == expected
        assert shape(got) == shape(expected)
        again = native.read_change(buf, streaming)
        assert again == expected and shape(again) == shape(expected)
    # the public API: a message or a DecodeError, never anything else
    try:
        public = decode_message(buf, streaming=streaming)
    except DecodeError:
        assert isinstance(expected, Exception)
    else:
        assert public == expected and shape(public) == shape(expected)


@needs_native
@given(CHANGES)
@settings(max_examples=2000)
def test_valid_changes_decode_the_same(msg: PgOutputMessage) -> None:
    raw = encode_message(msg)
    stream = streamed(msg)
    expected = decoder.PYTHON_READERS[raw[0]](raw, stream)
    assert expected == msg
    assert native is not None
    got = native.decode_change(raw, stream)
    assert type(got) is type(msg)
    assert got == msg and shape(got) == shape(expected)
    assert shape(native.read_change(raw, stream)) == shape(expected)
    # and read with the other streaming flag: whatever Python makes of it, C must agree
    check_same(raw, not stream)


@needs_native
@given(st.sampled_from(b"IUD"), st.binary(max_size=120), st.booleans())
@settings(max_examples=3000)
def test_any_body_after_a_change_tag(tag: int, body: bytes, streaming: bool) -> None:
    check_same(bytes([tag]) + body, streaming)


@st.composite
def mutated_changes(draw: st.DrawFn) -> bytes:
    raw = bytearray(encode_message(draw(CHANGES)))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["cut", "flip", "insert", "drop", "kind", "length"]))
        pos = draw(st.integers(1, max(1, len(raw))))
        if op == "cut":
            raw = raw[:pos]
        elif op == "flip" and pos < len(raw):
            raw[pos] = draw(st.integers(0, 255))
        elif op == "insert":
            raw[pos:pos] = draw(st.binary(min_size=1, max_size=4))
        elif op == "drop" and pos < len(raw):
            del raw[pos]
        elif op == "kind" and pos < len(raw):  # a plausible byte where a kind byte may be
            raw[pos] = draw(st.sampled_from(b"tnbuKONx\x00"))
        elif op == "length" and pos + 4 <= len(raw):  # a large or off-by-one length
            raw[pos:pos + 4] = struct.pack("!I", draw(st.sampled_from(
                [0, 1, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, len(raw) - pos, len(raw)])))
    return bytes(raw)


@needs_native
@given(mutated_changes(), st.booleans())
@settings(max_examples=3000, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_changes_decode_the_same_or_fail_alike(buf: bytes, streaming: bool) -> None:
    if buf[:1] in (b"I", b"U", b"D"):
        check_same(buf, streaming)
    else:
        try:
            decode_message(buf, streaming=streaming)
        except DecodeError:
            pass


@needs_native
@pytest.mark.parametrize("buf", [
    b"I\x00\x00\x40\x00N\x00\x01t\x00\x00\x00\x02\xc3\x28",  # invalid UTF-8
    b"I\x00\x00\x40\x00N\x00\x01t\x00\x00\x00\x02\xed\xa0\x80",  # a UTF-8 surrogate (overrun)
    b"I\x00\x00\x40\x00N\x00\x01t\x00\x00\x00\x03\xed\xa0\x80",  # a UTF-8 surrogate
    b"I\x00\x00\x40\x00N\x00\x01t\xff\xff\xff\xffab",  # a length past the end
    b"I\x00\x00\x40\x00N\x00\x01t\x00\x00\x00",  # the length cut off
    b"I\x00\x00\x40\x00N\x00\x02n",  # a column missing
    b"I\x00\x00\x40\x00N\x00\x01nn",  # a trailing byte
    b"I\x00\x00\x40\x00N\x00\x01x",  # an unknown kind
    b"I\x00\x00\x40\x00K\x00\x01n",  # Insert with a key tuple
    b"I\x00\x00\x40\x00N\x00",  # the column count cut off
    b"I\x00\x00\x40",  # the head cut off
    b"U\x00\x00\x40\x00K\x00\x01n",  # Update without the new tuple
    b"U\x00\x00\x40\x00K\x00\x01nX\x00\x00",  # Update with a bad new tuple kind
    b"U\x00\x00\x40\x00X\x00\x00",  # Update with a bad first kind
    b"D\x00\x00\x40\x00N\x00\x01n",  # Delete with a new tuple
    b"D\x00\x00\x40\x00O\x00\x01b\x00\x00\x00\x05abc",  # a binary value cut short
])
def test_malformed_changes_fall_back_to_the_python_error(buf: bytes) -> None:
    assert native is not None
    assert native.decode_change(buf, False) is None
    with pytest.raises(DecodeError) as via_c:
        decode_message(buf)
    with pytest.raises(DecodeError) as via_python:
        decoder.PYTHON_READERS[buf[0]](buf, False)
    assert str(via_c.value) == str(via_python.value)


@needs_native
def test_values_built_in_c_behave_like_python_ones() -> None:
    assert native is not None
    msg = Update(0xFFFF_FFFF, 0xFFFF_FFFF, "O", ("é", None, UNCHANGED_TOAST, BinaryValue(b"")),
                 (BinaryValue(b"\x00\xff"), "", "x" * 1000))
    got = native.decode_change(encode_message(msg), True)
    assert got == msg and type(got) is Update and got.xid == 0xFFFF_FFFF
    assert got.old is not None and got.old[2] is UNCHANGED_TOAST
    value = got.new[0]
    assert type(value) is BinaryValue and value == b"\x00\xff" and bytes(value) == b"\x00\xff"
    assert hash(value) == hash(b"\x00\xff") and repr(value) == "BinaryValue(b'\\x00\\xff')"
    assert value[1:] == b"\xff" and value + b"!" == b"\x00\xff!"
    assert pickle.loads(pickle.dumps(got)) == got
    assert got._replace(xid=None) == msg._replace(xid=None)
    assert hash(got) == hash(msg)


@needs_native
def test_decoder_class_routes_changes_through_c_and_reports_errors() -> None:
    msgs = [Insert(None, 1, ("a",)), Update(None, 1, None, None, ("b",)),
            Delete(None, 1, "K", ("a",))]
    dec = Decoder(4)
    for msg in msgs:
        assert dec.decode(encode_message(msg)) == msg
    with pytest.raises(DecodeError, match="trailing"):
        dec.decode(encode_message(msgs[0]) + b"\0", lsn=5)


@needs_native
def test_decode_change_declines_other_input() -> None:
    assert native is not None
    assert native.decode_change(b"", False) is None
    assert native.decode_change(b"B" + bytes(20), False) is None
    assert native.decode_change(bytearray(encode_message(Insert(None, 1, ()))), False) is None
    assert native.decode_change(encode_message(Insert(None, 1, ())), 0) == Insert(None, 1, ())
    with pytest.raises(TypeError):
        native.decode_change(b"I")
    with pytest.raises(TypeError):
        native.setup(1, 2, 3, 4, 5, 6, 7, 8)


@needs_native
def test_no_leaks_on_good_and_bad_input() -> None:
    assert native is not None
    good = [encode_message(m) for m in (
        Insert(7, 1, ("a" * 50, None, BinaryValue(b"xyz"), UNCHANGED_TOAST)),
        Update(7, 1, "O", ("a", "b"), ("c", "d")), Delete(7, 1, "K", ("k", BinaryValue(b"\0"))))]
    bad = [g[:n] for g in good for n in range(len(g))] + [g + b"\0" for g in good]

    def run() -> None:
        for _ in range(200):
            for buf in good:
                native.decode_change(buf, True)
            for buf in bad:
                native.decode_change(buf, True)

    run()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(5):
            run()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    calls = 5 * 200 * (len(good) + len(bad))
    assert grown < 20_000, f"{grown} bytes still allocated after {calls} decodes"

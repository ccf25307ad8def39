"""Malformed input always raises DecodeError with an offset, never a lower-level exception."""

from __future__ import annotations

import struct

import pytest

from connector.errors import CdcError, DecodeError
from connector.pgoutput import Decoder, decode_message

TS = 1


def s(text: str) -> bytes:
    return text.encode() + b"\0"


def tup(*cols: bytes) -> bytes:
    return struct.pack("!H", len(cols)) + b"".join(cols)


def t(raw: bytes) -> bytes:
    return b"t" + struct.pack("!I", len(raw)) + raw


def decode_error(buf: bytes, *, streaming: bool = False, parallel: bool = False
                 ) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        decode_message(buf, streaming=streaming, parallel_streaming=parallel)
    return info.value


def test_decode_error_is_a_cdc_error() -> None:
    assert issubclass(DecodeError, CdcError)


def test_empty_buffer() -> None:
    err = decode_error(b"")
    assert err.offset == 0 and "empty" in str(err)


@pytest.mark.parametrize("tag", [b"Z", b"\x00", b"w", b"k", b"\xff"])
def test_unknown_message_byte(tag: bytes) -> None:
    err = decode_error(tag + b"\x00" * 20)
    assert err.offset == 0 and "unknown message type" in err.reason


@pytest.mark.parametrize(("raw", "size"), [
    (b"B" + struct.pack("!QqI", 1, TS, 2), 21),
    (b"C" + struct.pack("!BQQq", 0, 1, 2, TS), 26),
    (b"S" + struct.pack("!IB", 1, 1), 6),
    (b"c" + struct.pack("!IBQQq", 1, 0, 1, 2, TS), 30),
])
def test_fixed_size_messages_truncated_and_trailing(raw: bytes, size: int) -> None:
    assert len(raw) == size
    for cut in range(1, size):
        err = decode_error(raw[:cut])
        assert "truncated" in err.reason and err.offset == cut
    err = decode_error(raw + b"\x00")
    assert "trailing" in err.reason and err.offset == size


def test_stream_stop_with_payload() -> None:
    assert "trailing" in decode_error(b"E\x00").reason


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("length", [1, 8, 10, 24, 26])
def test_stream_abort_impossible_length(length: int, parallel: bool) -> None:
    err = decode_error(b"A" + b"\x00" * (length - 1), parallel=parallel)
    assert "Stream Abort" in err.reason and err.offset == min(length, 25 if parallel else 9)


def test_stream_abort_of_the_other_mode_is_malformed() -> None:
    """A length that fits only the mode the stream was not started with is an error, not a
    guess: the decoder follows what was negotiated."""
    plain = b"A" + struct.pack("!II", 10, 11)
    with_info = b"A" + struct.pack("!IIQq", 10, 10, 0x16B3748, 5)
    err = decode_error(with_info)
    assert err.reason == "Stream Abort without parallel streaming must be 9 bytes, got 25"
    assert err.offset == 9
    err = decode_error(plain, parallel=True)
    assert err.reason == "Stream Abort with parallel streaming must be 25 bytes, got 9"
    assert err.offset == 9
    with pytest.raises(DecodeError) as info:
        Decoder(4).decode(with_info, lsn=0x1_016B_3748)
    assert (info.value.lsn, info.value.offset) == ("1/16B3748", 9)
    with pytest.raises(DecodeError) as info:
        Decoder(4, parallel_streaming=True).decode(plain, lsn=0x20)
    assert (info.value.lsn, info.value.offset) == ("0/20", 9)


def test_unterminated_string() -> None:
    err = decode_error(b"O" + struct.pack("!Q", 1) + b"name-without-nul")
    assert "unterminated string" in err.reason and err.offset == 9


def test_invalid_utf8_in_string() -> None:
    err = decode_error(b"Y" + struct.pack("!I", 1) + b"ok\0bad\xff\0")
    assert "UTF-8" in err.reason and err.offset == 5 + 3 + 3


def test_invalid_utf8_in_text_value() -> None:
    raw = b"I" + struct.pack("!I", 1) + b"N" + tup(t(b"ab\xc3"))
    err = decode_error(raw)
    assert "UTF-8" in err.reason and err.offset == 1 + 4 + 1 + 2 + 5 + 2


def test_unknown_tuple_kind() -> None:
    raw = b"I" + struct.pack("!I", 1) + b"N" + tup(t(b"1"), b"x")
    err = decode_error(raw)
    assert "unknown TupleData column kind b'x'" in err.reason and err.offset == 6 + 2 + 6


def test_value_length_beyond_message() -> None:
    raw = b"I" + struct.pack("!I", 1) + b"N" + struct.pack("!H", 1) + b"t" + struct.pack(
        "!I", 0xFFFF_FFFF) + b"abc"
    err = decode_error(raw)
    assert "exceeds the message" in err.reason and err.offset == 9


def test_value_length_cut_off() -> None:
    raw = b"I" + struct.pack("!I", 1) + b"N" + struct.pack("!H", 1) + b"t\x00\x00"
    assert "value length cut off" in decode_error(raw).reason


def test_more_columns_announced_than_present() -> None:
    raw = b"I" + struct.pack("!I", 1) + b"N" + struct.pack("!H", 3) + b"n" + b"n"
    err = decode_error(raw)
    assert "3 columns announced, 2 present" in err.reason and err.offset == 10


def test_missing_column_count() -> None:
    assert "column count" in decode_error(b"I" + struct.pack("!I", 1) + b"N\x00").reason


def test_trailing_bytes_after_tuple() -> None:
    raw = b"I" + struct.pack("!I", 1) + b"N" + tup(b"n") + b"junk"
    err = decode_error(raw)
    assert "4 trailing bytes" in err.reason and err.offset == 9


def test_insert_without_new_tuple_marker() -> None:
    assert "'N'" in decode_error(b"I" + struct.pack("!I", 1) + b"K" + tup()).reason


def test_update_bad_part_and_both_old_parts() -> None:
    assert "'K', 'O' or 'N'" in decode_error(b"U" + struct.pack("!I", 1) + b"X" + tup()).reason
    both = b"U" + struct.pack("!I", 1) + b"K" + tup() + b"O" + tup() + b"N" + tup()
    assert "'K', 'O' or 'N'" in decode_error(both).reason
    missing_new = b"U" + struct.pack("!I", 1) + b"O" + tup()
    assert "new tuple" in decode_error(missing_new).reason


def test_delete_needs_key_or_old() -> None:
    assert "'K' or 'O'" in decode_error(b"D" + struct.pack("!I", 1) + b"N" + tup()).reason


def test_truncate_count_mismatch() -> None:
    err = decode_error(b"T" + struct.pack("!IBI", 2, 0, 1))
    assert "announces 2 relations" in err.reason
    huge = decode_error(b"T" + struct.pack("!IB", 0xFFFF_FFFF, 0))
    assert "announces" in huge.reason


def test_message_content_length_mismatch() -> None:
    raw = b"M" + struct.pack("!BQ", 1, 1) + s("p") + struct.pack("!I", 10) + b"short"
    assert "content length 10" in decode_error(raw).reason
    raw = b"M" + struct.pack("!BQ", 1, 1) + s("p") + struct.pack("!I", 1) + b"toolong"
    assert "content length 1" in decode_error(raw).reason


def test_relation_truncated_in_columns() -> None:
    raw = (b"R" + struct.pack("!I", 1) + s("public") + s("t") + struct.pack("!BH", 100, 2)
           + b"\x01" + s("id") + struct.pack("!Ii", 23, -1))
    assert "truncated Relation" in decode_error(raw).reason


def test_streamed_message_without_room_for_xid() -> None:
    assert "xid" in decode_error(b"I\x00\x00", streaming=True).reason


def test_non_streamed_bytes_decoded_as_streamed_fail_cleanly() -> None:
    raw = b"I" + struct.pack("!I", 1) + b"N" + tup(t(b"1"))
    with pytest.raises(DecodeError):
        decode_message(raw, streaming=True)


def test_gid_messages_truncated() -> None:
    raw = b"P" + struct.pack("!BQQqI", 0, 1, 2, 3, 4) + b"gid"
    assert "unterminated" in decode_error(raw).reason
    assert "truncated Prepare" in decode_error(raw[:10]).reason


def test_lsn_labels_the_error() -> None:
    with pytest.raises(DecodeError) as info:
        decode_message(b"Z", lsn=0x1_016B_3748)
    assert info.value.lsn == "1/16B3748"
    assert str(info.value) == "unknown message type byte b'Z' (lsn 1/16B3748, offset 0)"


def test_decoder_rejects_bad_stream_nesting() -> None:
    decoder = Decoder(2)
    with pytest.raises(DecodeError, match="outside a stream block"):
        decoder.decode(b"E")
    decoder.decode(b"S" + struct.pack("!IB", 1, 1))
    with pytest.raises(DecodeError, match="inside a stream block"):
        decoder.decode(b"S" + struct.pack("!IB", 1, 0))
    assert decoder.in_stream  # a rejected message does not change the state

"""Text types, bytea, bool, uuid, bit strings, json, network types, pg_lsn."""

from __future__ import annotations

import struct
from ipaddress import IPv4Address, IPv6Address, ip_interface, ip_network
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.errors import DecodeError
from connector.pgtypes import TypeCatalog, oids
from tests.support.pgtypes_encoders import bytea_escape_out

CATALOG = TypeCatalog()


def text(oid: int, value: str) -> object:
    return CATALOG.text_loader(oid)(value)


def binary(oid: int, value: bytes) -> object:
    return CATALOG.binary_loader(oid)(value)


def test_strings() -> None:
    for oid in (oids.TEXT, oids.VARCHAR, oids.BPCHAR, oids.NAME, oids.XML, oids.UNKNOWN):
        assert text(oid, "ünï ✓ ") == "ünï ✓ "
        assert binary(oid, "ünï ✓ ".encode()) == "ünï ✓ "
        with pytest.raises(DecodeError, match="not UTF-8"):
            binary(oid, b"\xff")


def test_char() -> None:
    assert text(oids.CHAR, "a") == "a" == binary(oids.CHAR, b"a")
    assert binary(oids.CHAR, b"\x00") == "" == binary(oids.CHAR, b"")
    assert binary(oids.CHAR, b"\xe9") == "\\351"  # as charout prints it (PostgreSQL 15+)
    with pytest.raises(DecodeError):
        binary(oids.CHAR, b"ab")


def test_bytea() -> None:
    assert text(oids.BYTEA, "\\x") == b""
    assert text(oids.BYTEA, "\\x00ff10") == b"\x00\xff\x10"
    assert text(oids.BYTEA, "\\x00FF") == b"\x00\xff"
    assert text(oids.BYTEA, "abc") == b"abc"
    assert text(oids.BYTEA, "a\\\\b\\000\\377") == b"a\\b\x00\xff"
    assert binary(oids.BYTEA, b"\x00\x01") == b"\x00\x01"
    for bad in ["\\x0", "\\xzz", "a\\9", "a\\", "\\1"]:
        with pytest.raises(DecodeError, match="bytea"):
            text(oids.BYTEA, bad)


@given(st.binary())
def test_bytea_escape_format_round_trip(value: bytes) -> None:
    assert text(oids.BYTEA, bytea_escape_out(value)) == value
    assert text(oids.BYTEA, "\\x" + value.hex()) == value


def test_bool() -> None:
    assert text(oids.BOOL, "t") is True and text(oids.BOOL, "f") is False
    assert binary(oids.BOOL, b"\x01") is True and binary(oids.BOOL, b"\x00") is False
    for bad in ["true", "", "T"]:
        with pytest.raises(DecodeError, match="bool"):
            text(oids.BOOL, bad)
    with pytest.raises(DecodeError, match="bool"):
        binary(oids.BOOL, b"\x02")


def test_uuid() -> None:
    value = UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
    assert text(oids.UUID, str(value)) == value == binary(oids.UUID, value.bytes)
    with pytest.raises(DecodeError, match="uuid"):
        text(oids.UUID, "a0eebc99")
    with pytest.raises(DecodeError, match="16 bytes"):
        binary(oids.UUID, b"\x00" * 15)


def _bits(value: str) -> bytes:
    size = (len(value) + 7) // 8
    number = int(value.ljust(size * 8, "0"), 2) if value else 0
    return struct.pack(">i", len(value)) + number.to_bytes(size, "big")


@given(st.text(alphabet="01", max_size=100))
def test_bit_strings(value: str) -> None:
    for oid in (oids.BIT, oids.VARBIT):
        assert text(oid, value) == value
        assert binary(oid, _bits(value)) == value


def test_bit_malformed() -> None:
    with pytest.raises(DecodeError, match="bit"):
        binary(oids.VARBIT, struct.pack(">i", 9) + b"\xff")
    with pytest.raises(DecodeError, match="bit"):
        binary(oids.VARBIT, struct.pack(">i", -1))
    with pytest.raises(DecodeError, match="bit"):
        binary(oids.VARBIT, b"\x00")


def test_json() -> None:
    doc = ' {"a": [1, 2.50, null], "a": "dup"} '
    assert text(oids.JSON, doc) == doc == binary(oids.JSON, doc.encode())
    assert text(oids.JSONB, '{"a": 1}') == '{"a": 1}' == binary(oids.JSONB, b'\x01{"a": 1}')
    with pytest.raises(DecodeError, match="version 2"):
        binary(oids.JSONB, b"\x02{}")
    with pytest.raises(DecodeError, match="version none"):
        binary(oids.JSONB, b"")


def _inet(family: int, bits: int, is_cidr: int, address: bytes) -> bytes:
    return bytes([family, bits, is_cidr, len(address)]) + address


def test_inet_and_cidr() -> None:
    v4 = IPv4Address("192.168.1.5").packed
    v6 = IPv6Address("2001:db8::1").packed
    assert text(oids.INET, "192.168.1.5") == IPv4Address("192.168.1.5")
    assert binary(oids.INET, _inet(2, 32, 0, v4)) == IPv4Address("192.168.1.5")
    assert text(oids.INET, "192.168.1.5/24") == ip_interface("192.168.1.5/24")
    assert binary(oids.INET, _inet(2, 24, 0, v4)) == ip_interface("192.168.1.5/24")
    assert text(oids.INET, "192.168.1.5/32") == IPv4Address("192.168.1.5")
    assert binary(oids.INET, _inet(3, 64, 0, v6)) == ip_interface("2001:db8::1/64")
    assert text(oids.INET, "2001:db8::1/64") == ip_interface("2001:db8::1/64")
    assert binary(oids.INET, _inet(3, 128, 0, v6)) == IPv6Address("2001:db8::1")
    net = IPv4Address("10.0.0.0").packed
    assert text(oids.CIDR, "10.0.0.0/8") == ip_network("10.0.0.0/8")
    assert binary(oids.CIDR, _inet(2, 8, 1, net)) == ip_network("10.0.0.0/8")
    assert binary(oids.CIDR, _inet(3, 0, 1, bytes(16))) == ip_network("::/0")
    for bad in [
        b"",
        _inet(4, 8, 0, net),
        _inet(2, 33, 0, net),
        _inet(2, 8, 0, v6),
        b"\x02\x08\x00\x04\x0a",
    ]:
        with pytest.raises(DecodeError, match="inet"):
            binary(oids.INET, bad)
    with pytest.raises(DecodeError, match="cidr"):
        binary(oids.CIDR, _inet(2, 8, 1, v4))  # host bits set
    with pytest.raises(DecodeError, match="inet"):
        text(oids.INET, "300.1.1.1")


def test_macaddr() -> None:
    assert text(oids.MACADDR, "08:00:2b:01:02:03") == "08:00:2b:01:02:03"
    assert binary(oids.MACADDR, bytes.fromhex("08002b0102ff")) == "08:00:2b:01:02:ff"
    assert binary(oids.MACADDR8, bytes.fromhex("08002b0102030405")) == "08:00:2b:01:02:03:04:05"
    with pytest.raises(DecodeError, match="macaddr8"):
        binary(oids.MACADDR8, bytes(6))


def test_pg_lsn_and_transaction_ids() -> None:
    assert text(oids.PG_LSN, "16/B374D848") == "16/B374D848"
    assert binary(oids.PG_LSN, struct.pack(">Q", 0x16_B374D848)) == "16/B374D848"
    assert binary(oids.XID, struct.pack(">I", 2**32 - 1)) == 2**32 - 1
    assert (
        binary(oids.XID8, struct.pack(">Q", 2**64 - 1))
        == 2**64 - 1
        == text(oids.XID8, str(2**64 - 1))
    )
    assert binary(oids.CID, struct.pack(">I", 7)) == 7
    with pytest.raises(DecodeError, match="xid"):
        text(oids.XID, "x")

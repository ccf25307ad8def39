"""bool, uuid, bit/varbit, pg_lsn and the transaction-id types (xid, xid8, cid)."""

from __future__ import annotations

from uuid import UUID, SafeUUID

from . import oids
from ._base import BinaryLoader, TextLoader, bad_value, identity
from ._struct import error, unpack_int4_from, unpack_uint4, unpack_uint8
from .numeric import int_text_loader

_BOOL_TEXT = {"t": True, "f": False}
_BOOL_BINARY = {b"\x01": True, b"\x00": False}


def load_bool_text(data: str) -> bool:
    value = _BOOL_TEXT.get(data)
    if value is None:
        raise bad_value("bool", data, "expected t or f")
    return value


def load_bool_binary(data: bytes) -> bool:
    value = _BOOL_BINARY.get(data)
    if value is None:
        raise bad_value("bool", data, "expected one byte 0 or 1")
    return value


# UUID() validates and normalises many input forms: slow. Like psycopg, build the object
# directly (UUID has __slots__ "int" and "is_safe") from input checked here.
_new_uuid = UUID.__new__
_set = object.__setattr__
_UNKNOWN_SAFETY = SafeUUID.unknown


def _uuid(value: int) -> UUID:
    uuid = _new_uuid(UUID)
    _set(uuid, "int", value)
    _set(uuid, "is_safe", _UNKNOWN_SAFETY)
    return uuid


def load_uuid_text(data: str) -> UUID:
    """PostgreSQL prints the canonical ``8-4-4-4-12`` lowercase hex form."""
    digits = data.replace("-", "")
    # 36 characters of which 4 dashes, the rest ASCII letters and digits: int() then refuses
    # anything but hex digits
    if len(data) == 36 and len(digits) == 32 and digits.isascii() and digits.isalnum():
        try:
            return _uuid(int(digits, 16))
        except ValueError:
            pass
    raise bad_value("uuid", data, "not a UUID")


def load_uuid_binary(data: bytes) -> UUID:
    if len(data) != 16:
        raise bad_value("uuid", data, f"expected 16 bytes, got {len(data)}")
    return _uuid(int.from_bytes(data, "big"))


def load_bit_text(data: str) -> str:
    """bit(n) and bit varying: the string of ``0``/``1``, as printed."""
    return data


def load_bit_binary(data: bytes) -> str:
    """bit_send/varbit_send: int32 bit length, then the bits, most significant first."""
    try:
        nbits: int = unpack_int4_from(data)[0]
    except error:
        raise bad_value("bit", data, "shorter than its 4-byte length") from None
    size = (nbits + 7) // 8
    if nbits < 0 or len(data) != 4 + size:
        raise bad_value("bit", data, f"{nbits} bits do not fit {len(data) - 4} bytes")
    if not nbits:
        return ""
    return format(int.from_bytes(data[4:], "big"), f"0{size * 8}b")[:nbits]


def load_pg_lsn_binary(data: bytes) -> str:
    """pg_lsn_send: uint64; returned as PostgreSQL's ``X/Y`` text."""
    try:
        lsn: int = unpack_uint8(data)[0]
    except error:
        raise bad_value("pg_lsn", data, f"expected 8 bytes, got {len(data)}") from None
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def _uint_binary(type_name: str, size: int) -> BinaryLoader:
    unpack = unpack_uint4 if size == 4 else unpack_uint8

    def load(data: bytes) -> int:
        try:
            value: int = unpack(data)[0]
        except error:
            raise bad_value(type_name, data, f"expected {size} bytes, got {len(data)}") from None
        return value

    return load


TEXT_LOADERS: dict[int, TextLoader] = {
    oids.BOOL: load_bool_text,
    oids.UUID: load_uuid_text,
    oids.BIT: load_bit_text,
    oids.VARBIT: load_bit_text,
    oids.PG_LSN: identity,
    oids.XID: int_text_loader("xid"),
    oids.XID8: int_text_loader("xid8"),
    oids.CID: int_text_loader("cid"),
}

BINARY_LOADERS: dict[int, BinaryLoader] = {
    oids.BOOL: load_bool_binary,
    oids.UUID: load_uuid_binary,
    oids.BIT: load_bit_binary,
    oids.VARBIT: load_bit_binary,
    oids.PG_LSN: load_pg_lsn_binary,
    oids.XID: _uint_binary("xid", 4),
    oids.XID8: _uint_binary("xid8", 8),
    oids.CID: _uint_binary("cid", 4),
}

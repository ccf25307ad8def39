"""Avro binary, written by hand: the per-type encoders of row fields and the pieces of the
Envelope, for the datums pgtypes' converters give (ints for dates and times, str for uuid,
Decimal for decimals).

Every encoder gives the bytes fastavro's ``schemaless_writer`` gives for the same datum
(property-tested in tests/unit/avro/test_avro_envelope_bytes.py), at a fraction of the cost. A
column type they do not handle has no encoder (`type_encoder` is None): fastavro writes its
rows. A value that does not fit its type (an int over 32 bits, a decimal with more fractional
digits than its scale) raises ValueError, never writes bytes a reader would misread.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from decimal import Context, Decimal
from typing import Any, Final

from .schema import ColumnSpec

__all__ = ["BRANCH_1", "NULL", "OP_BYTES", "SNAPSHOT_BYTES", "RowEncoder", "avro_long",
           "avro_string", "optional_long", "row_encoder", "type_encoder", "unparsed_map"]

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1

# Varint pieces of 14 bits: two continuation bytes, or the last one or two bytes.
_CONTINUED: Final = tuple(bytes(((v & 0x7F) | 0x80, (v >> 7) | 0x80)) for v in range(16384))
_LAST: Final = tuple(bytes((v,)) if v < 0x80 else bytes(((v & 0x7F) | 0x80, v >> 7))
                     for v in range(16384))


def _varlong(n: int) -> bytes:
    """Avro long: zig-zag, then base-128 varint (built 14 bits at a time from tables)."""
    if not _INT64_MIN <= n <= _INT64_MAX:
        raise ValueError(f"{n} does not fit an Avro long")
    z = (n << 1) ^ (n >> 63)
    if z < 0x4000:
        return _LAST[z]
    if z < 0x1000_0000:
        return _CONTINUED[z & 0x3FFF] + _LAST[z >> 14]
    parts = []
    while z >= 0x4000:
        parts.append(_CONTINUED[z & 0x3FFF])
        z >>= 14
    parts.append(_LAST[z])
    return b"".join(parts)


_SMALL_LONGS: Final = tuple(_varlong(n) for n in range(16384))


def avro_long(n: int) -> bytes:
    """Avro long (ValueError outside 64 bits)."""
    return _SMALL_LONGS[n] if 0 <= n < 16384 else _varlong(n)


def avro_string(text: str) -> bytes:
    data = text.encode()
    return avro_long(len(data)) + data


def optional_long(n: int | None) -> bytes:
    """["null", "long"]"""
    return b"\x00" if n is None else b"\x02" + avro_long(n)


NULL: Final = b"\x00"  # a union's branch 0 ("null"), an empty map or array
BRANCH_1: Final = b"\x02"  # a union's branch 1
OP_BYTES: Final = {op: avro_string(op) for op in "cudrt"}
SNAPSHOT_BYTES: Final = {flag: avro_string(flag) for flag in ("false", "true", "last")}


def unparsed_map(unparsed: Mapping[str, str] | None) -> bytes:
    """["null", {"type": "map", "values": "string"}]: null when empty (one block otherwise)."""
    if not unparsed:
        return NULL
    return (BRANCH_1 + avro_long(len(unparsed))
            + b"".join(avro_string(name) + avro_string(text) for name, text in unparsed.items())
            + NULL)


_DOUBLE: Final = struct.Struct("<d").pack
_FLOAT: Final = struct.Struct("<f").pack
_EXACT: Final = Context(prec=1000)  # scaleb without rounding
_INTEGER_LOGICAL: Final = frozenset({None, "date", "time-micros", "timestamp-micros",
                                     "local-timestamp-micros"})
#: A record of ``["null", T]`` fields given as {name: None | (branch, datum)} -> its bytes.
RowEncoder = Callable[[Mapping[str, Any]], bytes]


def _int(value: int) -> bytes:
    """Avro int: 32 bits (a wider value is refused, not written as a long a reader misreads)."""
    if not -0x8000_0000 <= value <= 0x7FFF_FFFF:
        raise ValueError(f"{value} does not fit an Avro int")
    return avro_long(value)


def _boolean(value: Any) -> bytes:
    return b"\x01" if value else b"\x00"


def _bytes(value: bytes) -> bytes:
    return avro_long(len(value)) + bytes(value)


def _decimal(scale: int) -> Callable[[Decimal], bytes]:
    """Avro decimal: the unscaled value, big-endian two's complement, as fastavro sizes it."""

    def encode(value: Decimal) -> bytes:
        if value.as_tuple().exponent < -scale:  # type: ignore[operator]
            raise ValueError(f"{value} has more than {scale} fractional digits")
        unscaled = int(value.scaleb(scale, _EXACT))
        data = unscaled.to_bytes((abs(unscaled).bit_length() + 8) // 8, "big", signed=True)
        return avro_long(len(data)) + data

    return encode


def _array(items: Callable[[Any], bytes], nullable: bool) -> Callable[[list[Any]], bytes]:
    def encode(value: list[Any]) -> bytes:
        if not value:
            return NULL
        if nullable:
            body = [NULL if item is None else BRANCH_1 + items(item) for item in value]
        else:
            body = [items(item) for item in value]
        return avro_long(len(value)) + b"".join(body) + NULL

    return encode


def type_encoder(avro_type: Any) -> Callable[[Any], bytes] | None:
    """The hand encoder of one (non-null) column type; None: not handled here."""
    base: Any
    logical: Any
    if isinstance(avro_type, str):
        base, logical = avro_type, None
    elif isinstance(avro_type, dict):
        base, logical = avro_type.get("type"), avro_type.get("logicalType")
    else:
        return None
    if base == "array":
        items = avro_type["items"]
        nullable = isinstance(items, list)
        if nullable and (len(items) != 2 or items[0] != "null"):
            return None
        inner = type_encoder(items[1] if nullable else items)
        return None if inner is None else _array(inner, nullable)
    if base == "int" and logical is None:
        return _int
    if base in ("int", "long") and logical in _INTEGER_LOGICAL:
        return avro_long
    if base == "string" and logical in (None, "uuid"):
        return avro_string
    if base == "bytes" and logical == "decimal":
        return _decimal(int(avro_type.get("scale", 0)))
    simple: dict[Any, Callable[[Any], bytes]] = {
        "boolean": _boolean, "double": _DOUBLE, "float": _FLOAT, "bytes": _bytes}
    return simple.get(base) if logical is None else None


def row_encoder(columns: Sequence[ColumnSpec]) -> RowEncoder | None:
    """Encodes a record of ``["null", T]`` fields given as {name: None | (branch, datum)};
    None when a column type is not handled here (fastavro then writes the record)."""
    fields: list[tuple[str, Callable[[Any], bytes]]] = []
    for column in columns:
        encoder = type_encoder(column.avro_type)
        if encoder is None:
            return None
        fields.append((column.avro_name, encoder))

    def encode(row: Mapping[str, Any]) -> bytes:
        return b"".join([NULL if (value := row[name]) is None else BRANCH_1 + enc(value[1])
                         for name, enc in fields])

    return encode

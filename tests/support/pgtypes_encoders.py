"""Tiny encoders of PostgreSQL's output/send formats, written from the PostgreSQL sources, for
round-trip tests of the loaders (value -> what PostgreSQL would send -> loader -> value)."""

from __future__ import annotations

import struct
from decimal import Decimal
from typing import Any


def numeric_send(value: Decimal) -> bytes:
    """numeric_send: int16 ndigits, int16 weight, uint16 sign, uint16 dscale, base-10000 digits."""
    if value.is_nan():
        return struct.pack(">hhHH", 0, 0, 0xC000, 0)
    if value.is_infinite():
        return struct.pack(">hhHH", 0, 0, 0xF000 if value < 0 else 0xD000, 0)
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    dscale = max(-exponent, 0)
    text = "".join(map(str, digits)).lstrip("0")
    if not text:
        return struct.pack(">hhHH", 0, 0, 0, dscale)
    # align the decimal exponent on a multiple of 4 (base 10000), then cut in groups of 4
    shift = exponent % 4
    text += "0" * shift
    exponent -= shift
    text = "0" * (-len(text) % 4) + text
    groups = [int(text[i : i + 4]) for i in range(0, len(text), 4)]
    weight = len(groups) - 1 + exponent // 4
    while groups and groups[-1] == 0:  # PostgreSQL strips trailing zero digits
        groups.pop()
    return struct.pack(
        f">hhHH{len(groups)}H", len(groups), weight, 0x4000 if sign else 0, dscale, *groups
    )


def array_send(value: list[Any], element_oid: int, encode: Any) -> bytes:
    """array_send of a (rectangular) nested list; ``encode`` makes one element's bytes."""
    dims: list[int] = []
    level: Any = value
    while isinstance(level, list):
        dims.append(len(level))
        if not level:
            break
        level = level[0]
    if not dims or 0 in dims:
        return struct.pack(">iiI", 0, 0, element_oid)
    flat: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item)
        else:
            flat.append(node)

    walk(value)
    out = [struct.pack(">iiI", len(dims), int(None in flat), element_oid)]
    out += [struct.pack(">ii", dim, 1) for dim in dims]
    for item in flat:
        if item is None:
            out.append(struct.pack(">i", -1))
        else:
            data = encode(item)
            out.append(struct.pack(">i", len(data)) + data)
    return b"".join(out)


def _quote(item: str, delimiter: str) -> str:
    """array_out's quoting rule: quote empty, NULL-looking, or special-character elements."""
    needs = (
        item == ""
        or item.upper() == "NULL"
        or any(ch in item for ch in ('"', "\\", "{", "}", delimiter))
        or any(ch in " \t\n\r\v\f" for ch in item)
    )
    if not needs:
        return item
    return '"' + item.replace("\\", "\\\\").replace('"', '\\"') + '"'


def array_out(value: list[Any], delimiter: str = ",") -> str:
    """array_out of a nested list of str / None."""
    if not value:
        return "{}"
    parts = []
    for item in value:
        if isinstance(item, list):
            parts.append(array_out(item, delimiter))
        elif item is None:
            parts.append("NULL")
        else:
            parts.append(_quote(item, delimiter))
    return "{" + delimiter.join(parts) + "}"


def bytea_escape_out(value: bytes) -> str:
    """byteaout with bytea_output = escape."""
    out = []
    for byte in value:
        if byte == 0x5C:
            out.append("\\\\")
        elif byte < 0x20 or byte > 0x7E:
            out.append(f"\\{byte:03o}")
        else:
            out.append(chr(byte))
    return "".join(out)

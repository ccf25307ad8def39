"""Composite values (``CREATE TYPE t AS (...)``, a table's row type): their attributes' texts
or bytes, in order. What each attribute *is* is its own type's loader's business: the caller
loads each with the loader of the attribute's type (`TypeCatalog.composite`), so a composite is
exactly as lossless as its attributes.

Text format (``record_out``/``record_in``, PostgreSQL docs "Composite Types", 8.16.6):
``(a,b,...)``; an attribute is NULL when nothing at all stands between its delimiters (``(,)``
is two NULLs), and ``""`` is an empty string. Double quotes may surround any part of an
attribute; inside them ``""`` and ``\\"`` are a quote and ``\\\\`` a backslash; outside them
a backslash takes the next character literally (and ``(`` is plain). Whitespace is part of
the value (record_in does not trim it; record_out quotes an attribute holding any). Dropped
attributes are not printed: the count is that of the type's live attributes at the change.

Binary format (``record_send``): int32 attribute count, then per attribute its type OID
(int32), its length (int32; -1 for NULL) and that many bytes of the type's send output.
"""

from __future__ import annotations

import re

from ._base import bad_value
from ._struct import INT4, error

__all__ = ["parse_record_binary", "parse_record_text"]

# One attribute's pieces: a quoted run (with its doubled quotes and escapes), an escaped
# character, or a run of plain characters; an attribute ends at an unquoted ',' or ')'.
_PIECE = re.compile(r'"((?:[^"\\]|""|\\.)*)"|\\(.)|([^"\\,)]+)', re.DOTALL)
_UNQUOTE = re.compile(r'""|\\(.)', re.DOTALL)
_unpack_int4_from = INT4.unpack_from


def _unquote(match: re.Match[str]) -> str:
    escaped = match.group(1)
    return '"' if escaped is None else escaped


def parse_record_text(data: str, type_name: str = "record") -> list[str | None]:
    """The attributes of a composite's text output: each one's text, or None for NULL.
    ``()`` is one NULL attribute (as record_in reads it; a type of no attributes prints the
    same). A malformed value raises `DecodeError` naming `type_name`."""
    size = len(data)
    pos = 0
    while pos < size and data[pos].isspace():  # record_in skips leading whitespace
        pos += 1
    if pos >= size or data[pos] != "(":
        raise bad_value(type_name, data, "missing left parenthesis")
    pos += 1
    out: list[str | None] = []
    piece = _PIECE.match
    while True:
        parts: list[str] = []
        present = False  # anything at all, even "": not NULL
        while pos < size and data[pos] not in ",)":
            match = piece(data, pos)
            if match is None:  # an unterminated quote or a trailing backslash
                raise bad_value(type_name, data, f"unterminated {data[pos]!r} at {pos}")
            quoted, escaped, plain = match.groups()
            if quoted is not None:
                parts.append(_UNQUOTE.sub(_unquote, quoted) if '"' in quoted or "\\" in quoted
                             else quoted)
            else:
                parts.append(escaped if escaped is not None else plain)
            present = True
            pos = match.end()
        if pos >= size:
            raise bad_value(type_name, data, "unexpected end of input")
        out.append("".join(parts) if present else None)
        if data[pos] == ")":
            break
        pos += 1  # the ','
    if data[pos + 1:].strip():
        raise bad_value(type_name, data, "junk after right parenthesis")
    return out


def parse_record_binary(data: bytes, type_name: str = "record"
                        ) -> list[tuple[int, bytes | None]]:
    """The attributes of a composite's binary (send) form: (type OID, bytes or None)."""
    try:
        (count,) = _unpack_int4_from(data, 0)
        if count < 0:
            raise bad_value(type_name, data, f"negative attribute count {count}")
        pos = 4
        out: list[tuple[int, bytes | None]] = []
        for _ in range(count):
            oid, length = _unpack_int4_from(data, pos)[0] & 0xFFFFFFFF, \
                _unpack_int4_from(data, pos + 4)[0]
            pos += 8
            if length < 0:
                out.append((oid, None))
                continue
            end = pos + length
            if end > len(data):
                raise bad_value(type_name, data, "attribute runs past the end")
            out.append((oid, bytes(data[pos:end])))
            pos = end
    except error:
        raise bad_value(type_name, data, "truncated") from None
    if pos != len(data):
        raise bad_value(type_name, data, f"{len(data) - pos} bytes after the last attribute")
    return out

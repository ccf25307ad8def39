"""Character types (text, varchar, bpchar, name, "char", xml) and bytea.

Text-format values arrive already decoded (``str``); binary-format values are the server's
send output, UTF-8 (pgoutput sends in the database encoding, which pgcdc expects to be UTF8).
"""

from __future__ import annotations

import re

from . import oids
from ._base import BinaryLoader, TextLoader, bad_value, identity, utf8

load_text_text = identity
load_text_binary = utf8("text")


def load_char_binary(data: bytes) -> str:
    """The one-byte type "char": rendered as its text output does (octal escape above 127)."""
    if len(data) != 1:
        if not data:  # "char" zero byte: text output is the empty string
            return ""
        raise bad_value("char", data, f"expected 1 byte, got {len(data)}")
    byte = data[0]
    if byte == 0:
        return ""
    return chr(byte) if byte < 128 else f"\\{byte:03o}"


# ---------------------------------------------------------------------------- bytea

_ESCAPE = re.compile(r"\\(\\|[0-3][0-7]{2})?")


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code is None:
        raise ValueError("backslash not followed by \\ or three octal digits")
    return "\\" if code == "\\" else chr(int(code, 8))


def load_bytea_text(data: str) -> bytes:
    r"""bytea's text output: hex (``\x0a0b``, the default ``bytea_output``) or the legacy
    escape format (printable ASCII as is, ``\\`` for a backslash, ``\ooo`` octal otherwise)."""
    if data.startswith("\\x"):
        try:
            return bytes.fromhex(data[2:])
        except ValueError:
            raise bad_value("bytea", data, "invalid hex digits") from None
    try:
        if "\\" in data:
            data = _ESCAPE.sub(_unescape, data)
        return data.encode("latin-1")
    except (ValueError, UnicodeEncodeError) as exc:
        raise bad_value("bytea", data, f"invalid escape format: {exc}") from None


def load_bytea_binary(data: bytes) -> bytes:
    return bytes(data)


TEXT_LOADERS: dict[int, TextLoader] = {
    oids.TEXT: identity,
    oids.VARCHAR: identity,
    oids.BPCHAR: identity,
    oids.NAME: identity,
    oids.CHAR: identity,
    oids.XML: identity,
    oids.UNKNOWN: identity,
    oids.BYTEA: load_bytea_text,
}

BINARY_LOADERS: dict[int, BinaryLoader] = {
    oids.TEXT: load_text_binary,
    oids.VARCHAR: utf8("varchar"),
    oids.BPCHAR: utf8("bpchar"),
    oids.NAME: utf8("name"),
    oids.CHAR: load_char_binary,
    oids.XML: utf8("xml"),
    oids.UNKNOWN: utf8("unknown"),
    oids.BYTEA: load_bytea_binary,
}

"""json and jsonb, returned as their JSON text (``str``), not parsed.

The text is kept exactly as PostgreSQL has it (json preserves the input's whitespace, key order
and duplicate keys; jsonb is PostgreSQL's normalised form): it goes to Avro as a string, and
``json.loads`` is one call away for anyone who wants objects.
"""

from __future__ import annotations

from . import oids
from ._base import BinaryLoader, TextLoader, bad_value, identity, utf8

JSONB_VERSION = 1

load_json_text = identity
load_jsonb_text = identity
load_json_binary = utf8("json")


def load_jsonb_binary(data: bytes) -> str:
    """jsonb_send: a version byte (1) then the text."""
    if not data or data[0] != JSONB_VERSION:
        version = data[0] if data else "none"
        raise bad_value("jsonb", data, f"unsupported jsonb format version {version}")
    try:
        return data[1:].decode()
    except UnicodeDecodeError as exc:
        raise bad_value("jsonb", data, f"not UTF-8 ({exc.reason})") from None


TEXT_LOADERS: dict[int, TextLoader] = {oids.JSON: identity, oids.JSONB: identity}
BINARY_LOADERS: dict[int, BinaryLoader] = {
    oids.JSON: load_json_binary,
    oids.JSONB: load_jsonb_binary,
}

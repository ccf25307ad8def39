"""The Confluent wire format of every Kafka key and value pgcdc writes.

A framed message is byte 0 (`MAGIC`), the schema id as 4 bytes big-endian, then the Avro binary
body written with that schema. (Not to be confused with connector/pgoutput/framing.py, which
parses PostgreSQL's replication frames.)

    data = frame(schema_id, body)
    schema_id, body = unframe(data)        # SchemaError: not a Confluent Avro message
"""

from __future__ import annotations

import struct
from typing import Final

from connector.errors import SchemaError

__all__ = ["MAGIC", "frame", "header", "unframe"]

MAGIC: Final = 0
_HEADER: Final = struct.Struct(">bI")


def header(schema_id: int) -> bytes:
    """The 5 bytes in front of every body written with `schema_id`."""
    return _HEADER.pack(MAGIC, schema_id)


def frame(schema_id: int, body: bytes) -> bytes:
    """Confluent wire format: magic byte, schema id, Avro body."""
    return _HEADER.pack(MAGIC, schema_id) + body


def unframe(data: bytes) -> tuple[int, memoryview]:
    """(schema id, Avro body) of a Confluent-framed message."""
    if len(data) < _HEADER.size:
        raise SchemaError(f"not a Confluent Avro message: {len(data)} bytes")
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise SchemaError(f"not a Confluent Avro message: magic byte {magic}")
    return schema_id, memoryview(data)[_HEADER.size:]

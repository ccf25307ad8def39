"""`decode` (connector/avro/fastavro_io.py): its parsed-schema cache is keyed by schema id,
bounded, and never mixes up two lookups that number different schemas alike."""

from __future__ import annotations

import io
from typing import Any

from fastavro import parse_schema, schemaless_writer

from connector.avro import decode, fastavro_io, frame

# Decoding does not depend on the writer: this module runs once.
COMPARES_BOTH_WRITERS = True


def _record(field: str, avro_type: str) -> dict[str, Any]:
    return {"type": "record", "name": "R", "fields": [{"name": field, "type": avro_type}]}


def _framed(schema_id: int, schema: dict[str, Any], datum: Any) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema(schema), datum)
    return frame(schema_id, buf.getvalue())


def test_two_lookups_with_the_same_id_decode_with_their_own_schema() -> None:
    longs, texts = _record("n", "long"), _record("s", "string")
    assert decode(_framed(7, longs, {"n": 5}), {7: longs}.__getitem__).value == {"n": 5}
    assert decode(_framed(7, texts, {"s": "x"}), {7: texts}.__getitem__).value == {"s": "x"}
    assert decode(_framed(7, longs, {"n": 6}), {7: longs}.__getitem__).value == {"n": 6}


def test_the_cache_is_bounded() -> None:
    schema = _record("n", "long")
    for schema_id in range(fastavro_io._MAX_PARSED + 50):
        assert decode(_framed(schema_id, schema, {"n": schema_id}), lambda _: schema
                      ).value == {"n": schema_id}
    assert len(fastavro_io._parsed) == fastavro_io._MAX_PARSED

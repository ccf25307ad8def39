"""fastavro behind pgcdc's rules: schemas parsed with a `SchemaError` on failure, framed
writing (for what the hand encoders of `binary` do not cover), and framed reading.

    parsed = parse_checked(schema, "shop.public.t")       # SchemaError: not valid Avro
    write = framed_writer(parsed, schema_id)               # datum -> framed bytes
    schema_id, value = decode(data, registry.schema)       # the writer schema by its id
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple

from fastavro import parse_schema, schemaless_reader, schemaless_writer

from connector.errors import SchemaError

from .wire import header, unframe

__all__ = ["Decoded", "decode", "framed_writer", "parse_checked", "strip_logical_types"]


def parse_checked(schema: Mapping[str, Any], what: str) -> Any:
    """fastavro's parsed form of `schema`; SchemaError naming `what` when it is not valid."""
    try:
        return parse_schema(dict(schema))
    except Exception as exc:  # fastavro raises SchemaParseError, ValueError, KeyError...
        raise SchemaError(f"invalid Avro schema for {what}: {exc}") from None


def framed_writer(parsed: Any, schema_id: int) -> Callable[[Any], bytes]:
    """datum -> Confluent-framed Avro of the parsed schema, by fastavro."""
    head = header(schema_id)

    def write(datum: Any) -> bytes:
        buf = io.BytesIO()
        buf.write(head)
        schemaless_writer(buf, parsed, datum)
        return buf.getvalue()

    return write


class Decoded(NamedTuple):
    schema_id: int
    value: Any


def strip_logical_types(node: Any) -> Any:
    """A schema without its logical types: readers and writers of it see the raw Avro data
    (ints for dates and timestamps, bytes for decimals)."""
    if isinstance(node, dict):
        return {k: strip_logical_types(v) for k, v in node.items() if k != "logicalType"}
    if isinstance(node, list):
        return [strip_logical_types(v) for v in node]
    return node


_MAX_PARSED: Final = 256
# (schema id, logical types) -> (the schema object the lookup gave, its parsed form). A hit is
# only the very object parsed (`is`): two lookups numbering different schemas alike (tests,
# two registries) never share an entry. At most _MAX_PARSED entries, the oldest dropped first.
_parsed: dict[tuple[int, bool], tuple[Mapping[str, Any], Any]] = {}


def _reader_schema(schema_id: int, schema: Mapping[str, Any], logical_types: bool) -> Any:
    key = (schema_id, logical_types)
    cached = _parsed.get(key)
    if cached is not None and cached[0] is schema:
        return cached[1]
    parsed = parse_schema(dict(schema) if logical_types else strip_logical_types(schema))
    if key not in _parsed and len(_parsed) >= _MAX_PARSED:
        del _parsed[next(iter(_parsed))]
    _parsed[key] = (schema, parsed)
    return parsed


def decode(data: bytes, schema_lookup: Callable[[int], Mapping[str, Any]], *,
           logical_types: bool = True) -> Decoded:
    """Decode a Confluent-framed Avro message with its writer schema (`schema_lookup(id)`,
    e.g. `SchemaRegistry.schema`, which returns the same cached object for an id).
    `logical_types=False` returns the raw Avro data (ints for dates/times/timestamps, bytes for
    decimals)."""
    schema_id, body = unframe(data)
    parsed = _reader_schema(schema_id, schema_lookup(schema_id), logical_types)
    return Decoded(schema_id, schemaless_reader(io.BytesIO(body), parsed, None))

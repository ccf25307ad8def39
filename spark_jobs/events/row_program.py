"""A topic's writer schema compiled for the C row decoder (connector/native/avrodec.c), and the
batch decoding through it: the fast twin of `rows.decode_rows` over fastavro, which stays the
reference and the fallback.

`row_decoder` compiles a writer schema (as `rows.WriterSchema` parses it: `raw_schema`, every
logical type but decimal dropped) into nested tuples, one per Avro type, plus where the row's
values are (the Envelope's before/after/source/op/unchanged_toast, the Value record's fields
that are columns); None when the extension is not in use (`connector.speedups`:
``PGCDC_NATIVE``) or the schema holds anything the C side does not read (a recursive type, a
logical type other than decimal on bytes/fixed, an Envelope without the fields `flatten`
reads, ...): then fastavro decodes it.

`decode` returns the batch's (rows, truncates, deletes, toast columns) through C, or None when
a schema of the batch has no decoder or the C side declines a body (truncated, corrupt,
anything it does not decode exactly as fastavro does): the caller then decodes the whole batch
with fastavro, so the rows are the same either way and an undecodable body still raises
fastavro's error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Context, Decimal
from typing import Any, Protocol, TypeGuard

from connector.speedups import native

from ..rules.changes import IDX, LSN, OP, TOAST, TS

# Envelope field -> its role (avrodec.c ROLE_*); source field -> SRC_*.
_ROLES = {"before": 1, "after": 2, "source": 3, "op": 4, "unchanged_toast": 5}
_SOURCE_ROLES = {"commit_lsn": 1, "txn_index": 2, "ts_ms": 3}
_PRIMITIVE = {"null": "null", "boolean": "boolean", "int": "long", "long": "long",
              "float": "float", "double": "double", "string": "string", "bytes": "bytes"}
_MAX_PRECISION = 1000  # (avrodec.c's bound on a decimal's precision and scale)


class RowDecoder(Protocol):
    """connector._native.RowDecoder (typed here: spark_jobs does not read the stub)."""


class _Unsupported(Exception):
    """A schema shape the C decoder does not read."""


def decimal_of(data: bytes, scale: int, precision: int) -> Decimal:
    """fastavro's decimal of an unscaled big-endian integer (`read_decimal`): rounded to
    `precision` digits, then scaled. The C side calls it beyond 64 bits or the precision."""
    context = Context(prec=precision)
    unscaled = int.from_bytes(data, "big", signed=True)
    return context.create_decimal(unscaled).scaleb(-scale, context)


def program(parsed: Any) -> tuple[Any, ...] | None:
    """The nested-tuple program of a parsed Avro schema (fastavro's `parse_schema` form:
    named types defined once, then referred to by full name); None when unsupported."""
    try:
        return _compile(parsed, parsed.get("__named_schemas", {}) if isinstance(parsed, dict)
                        else {}, ())
    except _Unsupported:
        return None


def _compile(schema: Any, named: Mapping[str, Any], within: tuple[str, ...]) -> tuple[Any, ...]:
    if isinstance(schema, str):
        if schema in _PRIMITIVE:
            return (_PRIMITIVE[schema],)
        if schema in within or schema not in named:  # recursive, or unknown
            raise _Unsupported(schema)
        return _compile(named[schema], named, within)
    if isinstance(schema, list):
        return ("union", tuple(_compile(branch, named, within) for branch in schema))
    if not isinstance(schema, dict):
        raise _Unsupported(repr(schema))
    kind, logical = schema.get("type"), schema.get("logicalType")
    if logical is not None:
        if logical != "decimal" or kind not in ("bytes", "fixed"):
            raise _Unsupported(f"logical type {logical}")
        scale, precision = schema.get("scale", 0), schema.get("precision")
        if not (_int(precision) and _int(scale) and 0 <= scale <= precision <= _MAX_PRECISION
                and precision >= 1):
            raise _Unsupported("decimal")
        if kind == "bytes":
            return ("decimal", scale, precision)
        return ("fixed-decimal", _size(schema), scale, precision)
    if kind in ("record", "error"):
        name = schema.get("name")
        inner = (*within, name) if isinstance(name, str) else within
        fields = schema["fields"]
        return ("record", tuple(f["name"] for f in fields),
                tuple(_compile(f["type"], named, inner) for f in fields))
    if kind == "enum":
        symbols = schema["symbols"]
        if not all(isinstance(s, str) for s in symbols):
            raise _Unsupported("enum")
        return ("enum", tuple(symbols))
    if kind == "fixed":
        return ("fixed", _size(schema))
    if kind == "array":
        return ("array", _compile(schema["items"], named, within))
    if kind == "map":
        return ("map", _compile(schema["values"], named, within))
    return _compile(kind, named, within)  # {"type": "long", ...}, {"type": "<a name>"}


def _int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _size(schema: Mapping[str, Any]) -> int:
    size = schema.get("size")
    if not (_int(size) and 0 <= size < 1 << 30):
        raise _Unsupported("fixed size")
    return size


def row_decoder(parsed: Any, columns: Mapping[str, str], has_toast: bool
                ) -> RowDecoder | None:
    """The C decoder of one writer schema (`columns`: Value field -> row column, `has_toast`:
    as `rows.WriterSchema`); None when the extension is not in use or the schema is not one it
    reads."""
    if native is None:
        return None
    compiled = program(parsed)
    if compiled is None or compiled[0] != "record":
        return None
    _, names, fields = compiled
    roles = tuple(_ROLES.get(n, 0) if n != "unchanged_toast" or has_toast else 0 for n in names)
    if sorted(r for r in roles if r) != [1, 2, 3, 4, 5][:5 if has_toast else 4]:
        return None  # a field `flatten` reads is missing: fastavro's path raises its error
    sides = [_image_record(fields[roles.index(r)]) for r in (1, 2)]
    source = fields[roles.index(3)]
    if sides[0] is None or sides[0] != sides[1] or source[0] != "record":
        return None
    distinct = list(dict.fromkeys(columns.values()))
    if len(distinct) != len(columns):  # two fields in one column: fastavro's path decides
        return None
    slots = tuple(distinct.index(columns[n]) if n in columns else -1 for n in sides[0][1])
    source_roles = tuple(_SOURCE_ROLES.get(n, 0) for n in source[1])
    if sorted(r for r in source_roles if r) != [1, 2, 3]:
        return None
    try:
        decoder: RowDecoder = native.RowDecoder(
            compiled, roles, source_roles, slots, tuple(distinct), (OP, LSN, IDX, TS, TOAST),
            dict(columns) if has_toast else None, Decimal, decimal_of)
    except ValueError:  # a shape the constructor refuses (an op not a string, ...)
        return None
    return decoder


def _image_record(field: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The Value record of before/after: a union of null and one record, or a record."""
    if field[0] == "record":
        return field
    if field[0] != "union":
        return None
    records = [b for b in field[1] if b[0] == "record"]
    others = [b for b in field[1] if b[0] not in ("record", "null")]
    return records[0] if len(records) == 1 and not others else None


def decode(records: Sequence[tuple[int, bytes]], decoders: Mapping[int, RowDecoder | None]
           ) -> tuple[list[dict[str, Any]], int, int, set[str]] | None:
    """(rows, truncates, deletes, the columns rows name unchanged TOAST) of the records
    through C; None: decode them with fastavro."""
    if native is None:
        return None
    out: tuple[list[dict[str, Any]], int, int, set[str]] | None = native.decode_envelopes(
        records if isinstance(records, list) else list(records), dict(decoders))
    return out

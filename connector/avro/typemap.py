"""The one PostgreSQL -> Avro type mapping: each column's Avro type and value converter.

``column_codec(catalog, type_oid, typmod, dims)`` gives, once per column, the Avro type of the
column's values (the schema wraps it in ``["null", T]``) and the function turning what a
`connector.pgtypes` loader returned into the datum an Avro writer takes for it (``None``: the
loaded value is the datum already, so the row loop skips the call). Integers for the date/time
logical types (so naive timestamps are never shifted by the host's time zone), strings where
the type is a string. `connector.pgtypes` only loads values and knows nothing of Avro.

The mapping itself -- which Avro type each PostgreSQL type has, the text forms of the string
types, and the clamping of dates and timestamps to 0001-01-01 .. 9999-12-31 -- is the table
"Column types -> Avro" in schemas/README.md; change it there first. In short: scalars by OID
in ``_SIMPLE`` / ``_LONG`` / ``_STRING`` (anything else, and every user type but arrays and
domains, is a string of its text), numeric(p, s) a decimal up to 38 digits, domains their base
type's, arrays ``dims`` nested Avro arrays (pgoutput does not tell a column's dimensions: the
pipeline passes ``pg_attribute.attndims``, see `ARRAY_DIMS_QUERY` in `connector.avro.schema`).

A typed (non-string) mapping must hold every value PostgreSQL can store of its type; a type
whose values could be refused is a string. A value refused anyway is published by the one
fallback rule of `connector.avro.fallback` (exact text, or null in a typed column), never an
error that stops the stream.

Adding a PostgreSQL type (in this order; each step has its test next to the others):

1. ``connector/pgtypes/oids.py``: its OID (and its array's in ``ARRAY_OF``).
2. ``connector/pgtypes/<family>.py``: text and binary loaders into one Python value, listed in
   the family's ``TEXT_LOADERS``/``BINARY_LOADERS`` (a new family module also joins the loop
   in ``pgtypes/catalog.py``); tests in tests/unit/pgtypes, and against a real server in
   tests/integration/pgtypes/test_pgtypes_vs_postgres.py. No Avro there.
3. Here: its Avro type in ``_SIMPLE``, ``_LONG`` or ``_STRING`` (anything else is a string of
   its text), and a converter in ``_CONVERTERS`` if the loaded value is not the datum; its row
   in schemas/README.md (tests/unit/avro/test_avro_typemap.py).
4. Optional C fast path: a kind in ``connector/avro/native_rows.py`` and its parser in
   ``connector/native/rowenc.c`` (tests/unit/avro/test_avro_native_rows.py proves the same bytes
   as the Python path); without it the column takes the Python path, same bytes.
5. The merge job reads the Avro type with Spark's own mapping; an Avro type Spark reads but
   Delta cannot store needs a rule in ``spark_jobs/lake_types.py`` (as ``time-micros`` has).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import MAX_PREC, Context, Decimal
from ipaddress import (
    IPv4Address,
    IPv4Interface,
    IPv4Network,
    IPv6Address,
    IPv6Interface,
    IPv6Network,
)
from typing import Any, Final, NamedTuple, TypeAlias
from uuid import UUID

from connector.pgtypes import TypeCatalog, oids
from connector.pgtypes.catalog import ResolvedType
from connector.pgtypes.net import address_text
from connector.pgtypes.numeric import numeric_precision_scale
from connector.pgtypes.values import (
    Infinity,
    Interval,
    OutOfRange,
    Unknown,
    offset_text,
    time_text,
)

__all__ = ["JSON_CONNECT_NAME", "MAX_DECIMAL_PRECISION", "AvroSchema", "ColumnCodec",
           "Converter", "column_codec"]

AvroSchema: TypeAlias = str | dict[str, Any] | list[Any]
Converter: TypeAlias = Callable[[Any], Any]

#: numeric(p, s) wider than this goes to Avro as a string: Spark's DecimalType (the merge job)
#: holds at most 38 digits.
MAX_DECIMAL_PRECISION = 38
JSON_CONNECT_NAME: Final = "io.debezium.data.Json"

# oid, xid, cid are unsigned 32-bit: a long holds them all. xid8 is unsigned 64-bit: a
# decimal(20, 0) (``_SIMPLE``), which holds 0 .. 2^64 - 1 exactly and stays a number in the lake.
_LONG = {oids.INT8, oids.OID, oids.XID, oids.CID}
XID8_DECIMAL: Final = (20, 0)
# Types whose datum is their text (``_to_string``); json/jsonb carry a connect.name too.
_STRING = {
    oids.TEXT, oids.VARCHAR, oids.BPCHAR, oids.NAME, oids.CHAR, oids.XML, oids.JSON, oids.JSONB,
    oids.UNKNOWN, oids.INET, oids.CIDR, oids.MACADDR, oids.MACADDR8, oids.BIT, oids.VARBIT,
    oids.PG_LSN, oids.TIMETZ, oids.INTERVAL, oids.MONEY,
}  # fmt: skip
_SIMPLE: dict[int, AvroSchema] = {
    oids.BOOL: "boolean",
    oids.INT2: "int",
    oids.INT4: "int",
    oids.FLOAT4: "float",
    oids.FLOAT8: "double",
    oids.BYTEA: "bytes",
    oids.DATE: {"type": "int", "logicalType": "date"},
    oids.TIME: {"type": "long", "logicalType": "time-micros"},
    oids.TIMESTAMP: {"type": "long", "logicalType": "local-timestamp-micros"},
    oids.TIMESTAMPTZ: {"type": "long", "logicalType": "timestamp-micros"},
    oids.UUID: {"type": "string", "logicalType": "uuid"},
    oids.JSON: {"type": "string", "connect.name": JSON_CONNECT_NAME},
    oids.JSONB: {"type": "string", "connect.name": JSON_CONNECT_NAME},
    oids.XID8: {"type": "bytes", "logicalType": "decimal", "precision": XID8_DECIMAL[0],
                "scale": XID8_DECIMAL[1]},
}


class ColumnCodec(NamedTuple):
    """The Avro type of a column's values (not yet nullable) and how to turn values into it."""

    avro_type: Any  # str | dict | list, JSON-ready
    convert: Converter | None  # None: the loaded value is the datum already


def column_codec(catalog: TypeCatalog, type_oid: int, typmod: int = -1,
                 dims: int = 1) -> ColumnCodec:
    """The codec of a column of type `type_oid` (`dims`: declared array dimensions)."""
    resolved = catalog.resolve(type_oid, typmod)
    if resolved.kind != "array":
        return _scalar(resolved)
    element = resolved.element
    while element is not None and element.kind == "array":  # arrays of array domains
        element = element.element
    assert element is not None
    inner = _scalar(element)
    depth = max(dims, 1)
    avro_type: Any = {"type": "array", "items": ["null", inner.avro_type]}
    for _ in range(depth - 1):
        avro_type = {"type": "array", "items": avro_type}
    return ColumnCodec(avro_type, _array_converter(inner.convert, depth))


def _scalar(resolved: ResolvedType) -> ColumnCodec:
    avro_type = _schema(resolved)
    convert = _converter(resolved, avro_type)
    return ColumnCodec(_copy(avro_type), convert)


def decimal_precision_scale(typmod: int) -> tuple[int, int] | None:
    """Avro decimal (precision, scale) for a numeric column's typmod; None: not a decimal."""
    constraint = numeric_precision_scale(typmod)
    if constraint is None:
        return None
    precision, scale = constraint
    avro_scale = max(scale, 0)
    avro_precision = max(precision - scale, 0) + avro_scale
    if avro_precision > MAX_DECIMAL_PRECISION or avro_precision < 1:
        return None
    return avro_precision, avro_scale


def _decimal(precision: int, scale: int) -> dict[str, Any]:
    return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}


def _schema(resolved: ResolvedType) -> AvroSchema:
    """The Avro type of a scalar (not array) type's values."""
    if resolved.kind != "builtin":
        return "string"
    oid = resolved.oid
    simple = _SIMPLE.get(oid)
    if simple is not None:
        return simple
    if oid in _LONG:
        return "long"
    if oid == oids.NUMERIC:
        decimal = decimal_precision_scale(resolved.typmod)
        return "string" if decimal is None else _decimal(*decimal)
    return "string"


def _converter(resolved: ResolvedType, avro_type: AvroSchema) -> Converter | None:
    """The converter of a scalar type's loaded values to the datum of `avro_type`."""
    if resolved.kind != "builtin" or avro_type == "string" or resolved.oid in _STRING:
        return _to_string
    oid = resolved.oid
    special = _CONVERTERS.get(oid)
    if special is not None:
        return special
    if oid == oids.NUMERIC:
        decimal = decimal_precision_scale(resolved.typmod)
        assert decimal is not None
        return _decimal_converter(decimal[1], decimal[0])
    return None  # the loaded value is the datum


# ---------------------------------------------------------------------------- converters

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_MICROSECOND = dt.timedelta(microseconds=1)
# The range every reader of the events and the lake holds (schemas/README.md).
MIN_DATE_DAYS = dt.date.min.toordinal() - _EPOCH_ORDINAL
MAX_DATE_DAYS = dt.date.max.toordinal() - _EPOCH_ORDINAL
MIN_TIMESTAMP_MICROS = MIN_DATE_DAYS * 86_400_000_000
MAX_TIMESTAMP_MICROS = (MAX_DATE_DAYS + 1) * 86_400_000_000 - 1
MAX_TIME_MICROS = 86_400_000_000 - 1
MIN_TIMESTAMPTZ_MICROS = MIN_TIMESTAMP_MICROS + 2 * 86_400_000_000
MAX_TIMESTAMPTZ_MICROS = MAX_TIMESTAMP_MICROS - 86_400_000_000
_INFINITE_DATE = {Infinity.POSITIVE: MAX_DATE_DAYS, Infinity.NEGATIVE: MIN_DATE_DAYS}
_INFINITE_TIMESTAMP = {Infinity.POSITIVE: MAX_TIMESTAMP_MICROS,
                       Infinity.NEGATIVE: MIN_TIMESTAMP_MICROS}
_IPV6 = (IPv6Address, IPv6Interface, IPv6Network)
_PRINTABLE = (
    UUID,
    OutOfRange,
    Infinity,
    IPv4Address,
    IPv6Address,
    IPv4Interface,
    IPv6Interface,
    IPv4Network,
    IPv6Network,
)  # fmt: skip  (str() of each is PostgreSQL's text)


def _to_string(value: Any) -> Any:
    """Anything to the string PostgreSQL would print (strings stay as they are)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Unknown):
        raw = value.raw
        return raw if isinstance(raw, str) else "\\x" + raw.hex()
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, Interval):
        return value.isoformat()
    if isinstance(value, dt.time):
        return _timetz_string(value)
    if isinstance(value, _IPV6):
        return address_text(value)
    if isinstance(value, _PRINTABLE):
        return str(value)
    if isinstance(value, bytes):
        return "\\x" + value.hex()
    return str(value)


def _timetz_string(value: dt.time) -> str:
    micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000
    text = time_text(micros + value.microsecond)
    offset = value.utcoffset()
    if offset is None:
        return text
    return text + offset_text(offset.days * 86400 + offset.seconds)


def _date(value: Any) -> Any:
    if isinstance(value, dt.date):
        return value.toordinal() - _EPOCH_ORDINAL
    if isinstance(value, OutOfRange):  # BC or after 9999
        return min(max(value.value, MIN_DATE_DAYS), MAX_DATE_DAYS)
    if isinstance(value, Infinity):
        return _INFINITE_DATE[value]
    return value


def _timestamp(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return (value - (_EPOCH if value.tzinfo is None else _EPOCH_UTC)) // _MICROSECOND
    if isinstance(value, OutOfRange):  # BC or after 9999
        return min(max(value.value, MIN_TIMESTAMP_MICROS), MAX_TIMESTAMP_MICROS)
    if isinstance(value, Infinity):
        return _INFINITE_TIMESTAMP[value]
    return value


def _timestamptz(value: Any) -> Any:
    micros = _timestamp(value)
    if isinstance(micros, int):
        return min(max(micros, MIN_TIMESTAMPTZ_MICROS), MAX_TIMESTAMPTZ_MICROS)
    return micros


def _time(value: Any) -> Any:
    if isinstance(value, dt.time):
        seconds = (value.hour * 60 + value.minute) * 60 + value.second
        return seconds * 1_000_000 + value.microsecond
    if isinstance(value, OutOfRange):  # 24:00:00
        return min(value.value, MAX_TIME_MICROS)
    return value


def _decimal_converter(scale: int, precision: int) -> Converter:
    exponent = Decimal(1).scaleb(-scale)
    context = Context(prec=MAX_PREC)
    int_digits = precision - scale

    def convert(value: Any) -> Any:
        if isinstance(value, Decimal):
            if not value.is_finite():
                return None  # NaN (the only non-finite value a numeric(p,s) column takes)
            exact = value.quantize(exponent, context=context)
            # PostgreSQL stores no such value; a reader would round it to the precision.
            if exact and exact.adjusted() >= int_digits:
                raise ValueError(f"numeric value {value} does not fit numeric({precision},"
                                 f"{scale}): more than {int_digits} digits before the point")
            return exact
        return value

    return convert


def _unsigned_decimal(value: Any) -> Any:
    return Decimal(value) if isinstance(value, int) else value


_CONVERTERS: dict[int, Converter] = {
    oids.XID8: _unsigned_decimal,
    oids.DATE: _date,
    oids.TIMESTAMP: _timestamp,
    oids.TIMESTAMPTZ: _timestamptz,
    oids.TIME: _time,
    oids.UUID: _to_string,
}


def _copy(avro_type: Any) -> Any:
    if isinstance(avro_type, dict):
        return {k: _copy(v) for k, v in avro_type.items()}
    if isinstance(avro_type, list):
        return [_copy(v) for v in avro_type]
    return avro_type


# ---------------------------------------------------------------------------- arrays


def _flatten(value: list[Any], out: list[Any]) -> None:
    for item in value:
        if isinstance(item, list):
            _flatten(item, out)
        else:
            out.append(item)


def _depth(value: list[Any]) -> int:
    depth = 1
    while value and isinstance(value[0], list):
        value = value[0]
        depth += 1
    return depth


def _array_converter(element: Converter | None, dims: int) -> Converter:
    def leaf(items: list[Any]) -> list[Any]:
        flat: list[Any] = []
        _flatten(items, flat)
        if element is None:
            return flat
        return [None if item is None else element(item) for item in flat]

    def level(items: list[Any], remaining: int) -> list[Any]:
        if remaining == 1:
            return leaf(items)
        return [level(item if isinstance(item, list) else [item], remaining - 1)
                for item in items]

    def convert(value: Any) -> Any:
        if not isinstance(value, list) or not value:
            return value
        if dims == 1 and not any(isinstance(item, list) for item in value):  # the usual case
            if element is None:
                return value
            return [None if item is None else element(item) for item in value]
        have = _depth(value)
        while have < dims:
            value = [value]
            have += 1
        return level(value, dims)

    return convert

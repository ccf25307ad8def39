"""The Avro type of each PostgreSQL type, and converters from loaded values to Avro data.

``avro_schema(catalog, oid, typmod)`` gives the schema fragment of a column's *values* (the
Avro layer wraps it in ``["null", ...]`` for nullable columns). ``avro_converter(catalog,
oid, typmod)`` gives, once per column, the function turning what the loader returned into
the datum an Avro writer (fastavro) takes for that fragment: integers for the date/time
logical types (so naive timestamps are never shifted by the host's time zone), strings where
the fragment is a string.

=====================  =====================================================================
PostgreSQL             Avro
=====================  =====================================================================
bool                   boolean
int2, int4             int
int8, oid, xid, xid8,  long
cid
float4 / float8        float / double (NaN and infinities included)
numeric(p, s)          bytes, logicalType decimal(p', s'), s' = max(s, 0) and p' the digits
                       needed (PostgreSQL 15 allows s < 0 and s > p); NaN becomes null.
                       Above 38 digits (Spark's limit): string, as unconstrained numeric
numeric                string: the exact decimal (``1.50``, ``NaN``, ``Infinity``, ``-Infinity``)
money                  bytes, decimal(19, lc_monetary's fraction digits)
date                   int, date: days since 1970-01-01
time                   long, time-micros (24:00:00 is 23:59:59.999999)
timestamp,             long, timestamp-micros: microseconds since 1970-01-01 (timestamp: its
timestamptz            wall clock read as UTC)
                       Dates and timestamps are clamped to 0001-01-01 .. 9999-12-31
                       23:59:59.999999, the range every reader holds (Python's datetime,
                       Spark, Parquet statistics, delta-rs): infinity and years after 9999
                       become the upper bound, -infinity and BC dates the lower one;
                       timestamptz to 0001-01-03 .. 9999-12-30 23:59:59.999999 UTC, which
                       stays in that range in every time zone (PySpark shows it in local
                       time, and Python's local-time conversion probes a day back)
timetz                 string, ISO-8601 time with offset as PostgreSQL prints it (12:00:00+05:30)
interval               string, ISO-8601 duration as PostgreSQL's IntervalStyle iso_8601
                       prints it (exact: months, days and microseconds kept apart, each signed)
uuid                   string, logicalType uuid
bytea                  bytes
json, jsonb, xml,      string
text types, enums
inet, cidr, macaddr,   string, PostgreSQL's text
macaddr8, pg_lsn
bit, varbit            string of 0 and 1
arrays                 array of ["null", element]; multi-dimensional arrays are flattened in
                       row-major order (a column's dimensions are not in the Relation message)
domains                their base type's (with the domain's typmod if the column has none)
unknown types          string: their text, or ``\\x``-hex of their binary form
=====================  =====================================================================
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
from typing import Any, TypeAlias
from uuid import UUID

from . import oids
from .catalog import ResolvedType, TypeCatalog
from .net import address_text
from .numeric import numeric_precision_scale
from .values import (
    Infinity,
    Interval,
    OutOfRange,
    Unknown,
    offset_text,
    time_text,
)

__all__ = ["MAX_DECIMAL_PRECISION", "AvroSchema", "Converter", "avro_converter", "avro_schema"]

AvroSchema: TypeAlias = str | dict[str, Any] | list[Any]
Converter: TypeAlias = Callable[[Any], Any]

#: numeric(p, s) wider than this goes to Avro as a string: Spark's DecimalType (the merge job)
#: holds at most 38 digits.
MAX_DECIMAL_PRECISION = 38
#: digits of the largest money value (int8)
MONEY_PRECISION = 19

_LONG = {oids.INT8, oids.OID, oids.XID, oids.XID8, oids.CID}
_STRING = {
    oids.TEXT, oids.VARCHAR, oids.BPCHAR, oids.NAME, oids.CHAR, oids.XML, oids.JSON, oids.JSONB,
    oids.UNKNOWN, oids.INET, oids.CIDR, oids.MACADDR, oids.MACADDR8, oids.BIT, oids.VARBIT,
    oids.PG_LSN, oids.TIMETZ, oids.INTERVAL,
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
    oids.TIMESTAMP: {"type": "long", "logicalType": "timestamp-micros"},
    oids.TIMESTAMPTZ: {"type": "long", "logicalType": "timestamp-micros"},
    oids.UUID: {"type": "string", "logicalType": "uuid"},
}


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


def avro_schema(catalog: TypeCatalog, oid: int, typmod: int = -1) -> AvroSchema:
    """The Avro schema fragment of the values of a column of type ``oid``."""
    return _schema(catalog, catalog.resolve(oid, typmod))


def _schema(catalog: TypeCatalog, resolved: ResolvedType) -> AvroSchema:
    if resolved.kind == "array":
        assert resolved.element is not None
        return {"type": "array", "items": ["null", _schema(catalog, resolved.element)]}
    if resolved.kind != "builtin":
        return "string"
    oid = resolved.oid
    simple = _SIMPLE.get(oid)
    if simple is not None:
        return dict(simple) if isinstance(simple, dict) else simple
    if oid in _LONG:
        return "long"
    if oid == oids.NUMERIC:
        decimal = decimal_precision_scale(resolved.typmod)
        return "string" if decimal is None else _decimal(*decimal)
    if oid == oids.MONEY:
        return _decimal(MONEY_PRECISION, catalog.money_frac_digits)
    return "string"


# ---------------------------------------------------------------------------- converters

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_MICROSECOND = dt.timedelta(microseconds=1)
# The range every reader of the events and the lake holds (see the table above).
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


def _identity(value: Any) -> Any:
    return value


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


def _flatten(value: list[Any]) -> list[Any]:
    if not any(isinstance(item, list) for item in value):
        return value
    flat: list[Any] = []
    for item in value:
        if isinstance(item, list):
            flat.extend(_flatten(item))
        else:
            flat.append(item)
    return flat


def _array_converter(element: Converter) -> Converter:
    if element is _identity:

        def convert_identity(value: Any) -> Any:
            return _flatten(value) if isinstance(value, list) else value

        return convert_identity

    def convert(value: Any) -> Any:
        if not isinstance(value, list):
            return value
        return [None if item is None else element(item) for item in _flatten(value)]

    return convert


_CONVERTERS: dict[int, Converter] = {
    oids.DATE: _date,
    oids.TIMESTAMP: _timestamp,
    oids.TIMESTAMPTZ: _timestamptz,
    oids.TIME: _time,
    oids.UUID: _to_string,
}


def avro_converter(catalog: TypeCatalog, oid: int, typmod: int = -1) -> Converter:
    """The function turning a loaded value of a column of type ``oid`` into the datum of
    :func:`avro_schema`'s fragment. Choose it once per column; ``None`` stays ``None``."""
    return _converter(catalog, catalog.resolve(oid, typmod))


def _converter(catalog: TypeCatalog, resolved: ResolvedType) -> Converter:
    if resolved.kind == "array":
        assert resolved.element is not None
        return _array_converter(_converter(catalog, resolved.element))
    schema = _schema(catalog, resolved)
    if schema == "string":
        return _to_string
    if resolved.kind != "builtin":
        return _to_string
    oid = resolved.oid
    special = _CONVERTERS.get(oid)
    if special is not None:
        return special
    if oid == oids.NUMERIC:
        decimal = decimal_precision_scale(resolved.typmod)
        assert decimal is not None
        return _decimal_converter(decimal[1], decimal[0])
    if oid == oids.MONEY:
        return _decimal_converter(catalog.money_frac_digits, MONEY_PRECISION)
    return _identity

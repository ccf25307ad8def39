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

Each column's type also carries Kafka Connect attributes, Debezium's (schemas/README.md "Kafka
Connect attributes"): ``connect.name`` / ``connect.type`` on the types Connect names
(`CONNECT_NAMES`, `CONNECT_TYPES`, decimals), on every column ``connect.parameters`` with
its source type (`source_column_parameters`), and ``connect.default`` on a column with a
constant default of a JSON-plain Avro type (`connect_default`). Avro ignores them: encoding
and values are the same with or without them.

``value_format="debezium"`` (``--value-format debezium``) takes, per type, the alternative in
the "Debezium format" section at the end instead: Debezium's PostgreSQL connector's default
encoding (schemas/README.md "Debezium value format"); a type it does not list is the same in
both formats, arrays take their element's.

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
   its text), and a converter in ``_CONVERTERS`` if the loaded value is not the datum; its
   Connect name in ``CONNECT_NAMES`` / ``CONNECT_TYPES`` if Connect has one; its row in
   schemas/README.md (tests/unit/avro/test_avro_typemap.py).
4. Optional C fast path: a kind in ``connector/avro/native_rows.py`` and its parser in
   ``connector/native/rowenc.c`` (tests/unit/avro/test_avro_native_rows.py proves the same bytes
   as the Python path); without it the column takes the Python path, same bytes.
5. The merge job reads the Avro type with Spark's own mapping; an Avro type Spark reads but
   Delta cannot store needs a rule in ``spark_jobs/events/lake_types.py`` (as ``time-micros`` has).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
from collections.abc import Callable
from decimal import MAX_PREC, Context, Decimal
from functools import partial
from ipaddress import (
    IPv4Address,
    IPv4Interface,
    IPv4Network,
    IPv6Address,
    IPv6Interface,
    IPv6Network,
)
from typing import Any, Final, Literal, NamedTuple, TypeAlias
from uuid import UUID

from connector.errors import DecodeError
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

__all__ = ["CONNECT_DEFAULT", "CONNECT_NAMES", "CONNECT_TYPES", "DEBEZIUM_FORMAT",
           "JSON_CONNECT_NAME", "MAX_DECIMAL_PRECISION", "VALUE_FORMATS", "parse_hstore",
           "SOURCE_COLUMN_LENGTH", "SOURCE_COLUMN_SCALE", "SOURCE_COLUMN_TYPE", "AvroSchema",
           "ColumnCodec", "Converter", "column_codec", "connect_default",
           "source_column_parameters"]

AvroSchema: TypeAlias = str | dict[str, Any] | list[Any]
Converter: TypeAlias = Callable[[Any], Any]

#: numeric(p, s) wider than this goes to Avro as a string: Spark's DecimalType (the merge job)
#: holds at most 38 digits.
MAX_DECIMAL_PRECISION = 38
JSON_CONNECT_NAME: Final = "io.debezium.data.Json"
#: The value formats (``--value-format``): pgcdc's own (the default: lossless, typed) and
#: Debezium's PostgreSQL connector's default encoding (schemas/README.md "Debezium value format").
DEBEZIUM_FORMAT: Final = "debezium"
VALUE_FORMATS: Final = ("pgcdc", DEBEZIUM_FORMAT)

# ---------------------------------------------------------------------------- Kafka Connect
# Kafka Connect's AvroConverter (Confluent's, Apicurio's) reads these extra attributes of an
# Avro type into the Connect schema a sink sees; Avro itself ignores them (they change neither
# the encoding nor schema resolution, so adding them is a compatible schema change). Debezium's
# names, so that stock sinks (Debezium's JDBC sink...) create typed columns:
#: Connect schema name of the types that have one (the value is the Avro datum as it is).
#: timestamptz is UTC microseconds, which is what MicroTimestamp means to a sink; Debezium's
#: own ZonedTimestamp is a string, not our long. timetz stays a plain string. date is Connect's
#: own Date: AvroConverter turns Avro's ``date`` logical type into it and refuses any other
#: name beside it (Debezium's io.debezium.time.Date has no logical type; ours keeps it).
CONNECT_NAMES: Final[dict[int, str]] = {
    oids.DATE: "org.apache.kafka.connect.data.Date",
    oids.TIME: "io.debezium.time.MicroTime",
    oids.TIMESTAMP: "io.debezium.time.MicroTimestamp",
    oids.TIMESTAMPTZ: "io.debezium.time.MicroTimestamp",
    oids.UUID: "io.debezium.data.Uuid",
    oids.JSON: JSON_CONNECT_NAME,
    oids.JSONB: JSON_CONNECT_NAME,
}
#: Connect type of the types whose Avro type is wider than theirs (Avro has no 16-bit int).
CONNECT_TYPES: Final[dict[int, str]] = {oids.INT2: "int16"}
CONNECT_DECIMAL: Final = "org.apache.kafka.connect.data.Decimal"
#: The column-level ``connect.parameters`` Debezium adds with ``column.propagate.source.type``:
#: the column's PostgreSQL type name upper-cased, and its length / scale from the typmod.
SOURCE_COLUMN_TYPE: Final = "__debezium.source.column.type"
SOURCE_COLUMN_LENGTH: Final = "__debezium.source.column.length"
SOURCE_COLUMN_SCALE: Final = "__debezium.source.column.scale"
_LENGTH_TYPES = {oids.VARCHAR, oids.BPCHAR, oids.BIT, oids.VARBIT}
#: The column default a Connect sink gives the column it creates or adds (Connect schema
#: default). Only on Avro types whose JSON default is plain (no bytes, decimals, arrays): the
#: Avro field's own default must stay null, the first branch of ``["null", T]``.
CONNECT_DEFAULT: Final = "connect.default"
_PLAIN_DEFAULT: Final[dict[str, tuple[type, ...]]] = {
    "boolean": (bool,), "int": (int,), "long": (int,), "float": (int, float),
    "double": (int, float), "string": (str,),
}

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
    oids.INT2: {"type": "int", "connect.type": "int16"},
    oids.INT4: "int",
    oids.FLOAT4: "float",
    oids.FLOAT8: "double",
    oids.BYTEA: "bytes",
    oids.DATE: {"type": "int", "logicalType": "date", "connect.name": CONNECT_NAMES[oids.DATE]},
    oids.TIME: {"type": "long", "logicalType": "time-micros",
                "connect.name": CONNECT_NAMES[oids.TIME]},
    oids.TIMESTAMP: {"type": "long", "logicalType": "local-timestamp-micros",
                     "connect.name": CONNECT_NAMES[oids.TIMESTAMP]},
    oids.TIMESTAMPTZ: {"type": "long", "logicalType": "timestamp-micros",
                       "connect.name": CONNECT_NAMES[oids.TIMESTAMPTZ]},
    oids.UUID: {"type": "string", "logicalType": "uuid", "connect.name": CONNECT_NAMES[oids.UUID]},
    oids.JSON: {"type": "string", "connect.name": JSON_CONNECT_NAME},
    oids.JSONB: {"type": "string", "connect.name": JSON_CONNECT_NAME},
}


class ColumnCodec(NamedTuple):
    """The Avro type of a column's values (not yet nullable) and how to turn values into it."""

    avro_type: Any  # str | dict | list, JSON-ready
    convert: Converter | None  # None: the loaded value is the datum already


def column_codec(catalog: TypeCatalog, type_oid: int, typmod: int = -1,
                 dims: int = 1, default: str | None = None,
                 value_format: str = "pgcdc") -> ColumnCodec:
    """The codec of a column of type `type_oid` (`dims`: declared array dimensions;
    `default`: the text of its constant default, see `connect_default`; `value_format`:
    ``pgcdc`` or ``debezium``, see `VALUE_FORMATS`)."""
    resolved = catalog.resolve(type_oid, typmod)
    # value_format is one of VALUE_FORMATS: Config.validate checks it, the one place
    scalar: Callable[[ResolvedType], ColumnCodec] = (
        partial(_debezium_scalar, catalog.money_frac_digits)
        if value_format == DEBEZIUM_FORMAT else _scalar)
    codec = (_array_codec(resolved, dims, scalar) if resolved.kind == "array"
             else scalar(resolved))
    parameters = source_column_parameters(catalog, type_oid, typmod)
    avro_type = _with_parameters(codec.avro_type, parameters)
    if default is not None:
        value = connect_default(catalog, type_oid, typmod, default, ColumnCodec(avro_type,
                                                                                codec.convert))
        if value is not None:
            typed = avro_type if isinstance(avro_type, dict) else {"type": avro_type}
            typed[CONNECT_DEFAULT] = value
            avro_type = typed
    return ColumnCodec(avro_type, codec.convert)


def connect_default(catalog: TypeCatalog, type_oid: int, typmod: int, text: str,
                    codec: ColumnCodec) -> Any:
    """The ``connect.default`` of a column whose constant default PostgreSQL prints as `text`:
    the Avro datum of that value (loaded and converted as a column value is), when the
    column's Avro type is boolean, int, long, float, double or string (with or without a
    logical type: a date is its days, a timestamp its microseconds). None -- not carried --
    for other Avro types (bytes, decimals, arrays, records), a non-finite float, and a text
    the column's loader or converter does not take."""
    avro_type = codec.avro_type
    base = avro_type.get("type") if isinstance(avro_type, dict) else avro_type
    plain = _PLAIN_DEFAULT.get(base) if isinstance(base, str) else None
    if plain is None:
        return None
    try:
        value = catalog.text_loader(type_oid, typmod)(text)
        datum = value if codec.convert is None else codec.convert(value)
    except (ValueError, ArithmeticError, DecodeError):
        return None
    if not isinstance(datum, plain) or (base != "boolean" and isinstance(datum, bool)):
        return None
    if isinstance(datum, float) and not math.isfinite(datum):
        return None
    return datum


def source_column_parameters(catalog: TypeCatalog, type_oid: int,
                             typmod: int = -1) -> dict[str, str]:
    """Debezium's ``connect.parameters`` naming a column's source type: its PostgreSQL type
    name upper-cased as declared (``INT4``, ``VARCHAR``, ``_INT4`` for int4[], an enum's or a
    domain's own name), with length (and scale) where the typmod gives them: varchar(n),
    bpchar(n), bit(n), varbit(n): length n; numeric(p, s): length p, scale s."""
    pg_type = catalog.get(type_oid)
    if pg_type is None:  # not in pg_type (the pipeline looks every column's type up first)
        return {}
    # a domain known only from a Type message: its base type's name (all the stream tells)
    name = catalog.resolve(type_oid).name if pg_type.from_type_message else pg_type.name
    parameters = {SOURCE_COLUMN_TYPE: name.upper()}
    resolved = catalog.resolve(type_oid, typmod)  # a domain's typmod is its column's
    oid, mod = resolved.oid, resolved.typmod
    if resolved.kind != "builtin" or mod < 0:
        return parameters
    if oid in _LENGTH_TYPES:
        length = mod - 4 if oid in (oids.VARCHAR, oids.BPCHAR) else mod
        parameters[SOURCE_COLUMN_LENGTH] = str(length)
    elif oid == oids.NUMERIC:
        constraint = numeric_precision_scale(mod)
        if constraint is not None:
            parameters[SOURCE_COLUMN_LENGTH] = str(constraint[0])
            parameters[SOURCE_COLUMN_SCALE] = str(constraint[1])
    return parameters


def _with_parameters(avro_type: AvroSchema, parameters: dict[str, str]) -> AvroSchema:
    """`avro_type` (fresh, not shared) with the column's parameters joined to its own; a
    named record (Debezium's VariableScaleDecimal) is shared by its columns and takes none."""
    if not parameters or (isinstance(avro_type, dict) and avro_type.get("type") == "record"):
        return avro_type
    typed: dict[str, Any] = avro_type if isinstance(avro_type, dict) else {"type": avro_type}
    own = typed.get("connect.parameters", {})
    typed["connect.parameters"] = {**own, **parameters}
    return typed


def _array_codec(resolved: ResolvedType, dims: int,
                 scalar: Callable[[ResolvedType], ColumnCodec]) -> ColumnCodec:
    element = resolved.element
    while element is not None and element.kind == "array":  # arrays of array domains
        element = element.element
    assert element is not None
    inner = scalar(element)
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
    """Avro's decimal, with Connect's Decimal name and parameters (AvroConverter reads them)."""
    return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale,
            "connect.name": CONNECT_DECIMAL,
            "connect.parameters": {"scale": str(scale),
                                   "connect.decimal.precision": str(precision)}}


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
    if oid == oids.XID8:
        return _decimal(*XID8_DECIMAL)
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


# ---------------------------------------------------------------------------- Debezium format
# ``--value-format debezium``: each type as Debezium's PostgreSQL connector writes it with its
# default settings (time.precision.mode=adaptive, decimal.handling.mode=precise,
# interval.handling.mode=numeric, hstore.handling.mode=json, binary.handling.mode=bytes), in
# the Avro its AvroConverter writes: ``connect.name``, ``connect.version`` and
# ``connect.parameters`` as Debezium's Connect schemas carry them. A type not handled here is
# the same in both formats (integers, floats, boolean, bytea, the text types, inet, ranges...).
# What each type loses against pgcdc's own format: schemas/README.md "Debezium value format";
# the merge job decodes these back (spark_jobs/events/debezium.py).

DBZ_DATE: Final = "io.debezium.time.Date"
DBZ_TIME: Final = "io.debezium.time.Time"
DBZ_MICRO_TIME: Final = "io.debezium.time.MicroTime"
DBZ_TIMESTAMP: Final = "io.debezium.time.Timestamp"
DBZ_MICRO_TIMESTAMP: Final = "io.debezium.time.MicroTimestamp"
DBZ_ZONED_TIMESTAMP: Final = "io.debezium.time.ZonedTimestamp"
DBZ_ZONED_TIME: Final = "io.debezium.time.ZonedTime"
DBZ_MICRO_DURATION: Final = "io.debezium.time.MicroDuration"
DBZ_BITS: Final = "io.debezium.data.Bits"
DBZ_VARIABLE_SCALE_DECIMAL: Final = "io.debezium.data.VariableScaleDecimal"
#: The precision Confluent's AvroConverter gives a Connect Decimal without one (money).
CONNECT_DEFAULT_DECIMAL_PRECISION: Final = 64
#: Debezium's ``length`` of a bit varying without a declared length (Integer.MAX_VALUE).
UNBOUNDED_BITS: Final = 2**31 - 1
#: interval.handling.mode=numeric: a month is 365.25 / 12 days, in whole microseconds.
MICROS_PER_MONTH: Final = 2_629_800_000_000
_MICROS_PER_DAY: Final = 86_400_000_000
_LONG_RANGE = range(-(2**63), 2**63)
#: Types that only gain a Connect name (the value stays the string it is in pgcdc's format).
_DBZ_STRING_NAMES: Final[dict[int, str]] = {
    oids.XML: "io.debezium.data.Xml", oids.UUID: "io.debezium.data.Uuid",
    oids.JSON: JSON_CONNECT_NAME, oids.JSONB: JSON_CONNECT_NAME,
}  # fmt: skip
_DBZ_ENUM: Final = "io.debezium.data.Enum"
_INT16: Final = {"type": "int", "connect.type": "int16"}
_INT16_RANGE = range(-(2**15), 2**15)
#: EWKB's flag (in the geometry type word) for an SRID after it (PostGIS's EWKB).
_EWKB_SRID_FLAG: Final = 0x20000000


def _debezium_record(name: str, doc: str, fields: list[tuple[str, Any]]) -> dict[str, Any]:
    """A Connect struct as AvroConverter writes it: a record named by its Connect name; an
    optional field (``["null", T]``) defaults to null."""
    namespace, _, short = name.rpartition(".")
    return {"type": "record", "name": short, "namespace": namespace,
            "fields": [{"name": n, "type": t, **({"default": None} if isinstance(t, list)
                                                 and t[0] == "null" else {})}
                       for n, t in fields],
            "connect.doc": doc, "connect.version": 1, "connect.name": name}


#: io.debezium.data.geometry.Point: the coordinates, and their 2D WKB (srid unset).
POINT_RECORD: Final = _debezium_record("io.debezium.data.geometry.Point", "Geometry (POINT)", [
    ("x", "double"), ("y", "double"), ("wkb", ["null", "bytes"]), ("srid", ["null", "int"])])
#: PostGIS geometry / geography: its EWKB as PostGIS gives it, and its SRID (0: none).
GEOMETRY_RECORD: Final = _debezium_record("io.debezium.data.geometry.Geometry", "Geometry", [
    ("wkb", "bytes"), ("srid", ["null", "int"])])
GEOGRAPHY_RECORD: Final = _debezium_record("io.debezium.data.geometry.Geography", "Geography", [
    ("wkb", "bytes"), ("srid", ["null", "int"])])
#: pgvector's sparsevec: its dimensions and index -> value (a Connect map of int16 keys, which
#: AvroConverter writes as an array of MapEntry records).
SPARSE_VECTOR_RECORD: Final = _debezium_record(
    "io.debezium.data.SparseDoubleVector", "Sparse double vector", [
    ("dimensions", _INT16),
    ("vector", {"type": "array", "items": {
        "type": "record", "name": "MapEntry", "namespace": "io.confluent.connect.avro",
        "fields": [{"name": "key", "type": _INT16}, {"name": "value", "type": "double"}]}})])


def _debezium_named(base: str, name: str, parameters: dict[str, str] | None = None
                    ) -> dict[str, Any]:
    """A Debezium semantic type as AvroConverter writes it."""
    out: dict[str, Any] = {"type": base, "connect.version": 1}
    if parameters:
        out["connect.parameters"] = parameters
    out["connect.name"] = name
    return out


def _debezium_decimal(precision: int | None, scale: int) -> dict[str, Any]:
    """Connect's Decimal as AvroConverter writes it (precision 64 when Connect has none)."""
    parameters = {"scale": str(scale)}
    if precision is not None:
        parameters["connect.decimal.precision"] = str(precision)
    return {"type": "bytes", "scale": scale,
            "precision": CONNECT_DEFAULT_DECIMAL_PRECISION if precision is None else precision,
            "connect.version": 1, "connect.parameters": parameters,
            "connect.name": CONNECT_DECIMAL, "logicalType": "decimal"}


VARIABLE_SCALE_DECIMAL: Final[dict[str, Any]] = {
    "type": "record", "name": "VariableScaleDecimal", "namespace": "io.debezium.data",
    "fields": [{"name": "scale", "type": "int"}, {"name": "value", "type": "bytes"}],
    "connect.doc": "Variable scaled decimal", "connect.version": 1,
    "connect.name": DBZ_VARIABLE_SCALE_DECIMAL,
}


def _debezium_scalar(money_frac_digits: int, resolved: ResolvedType) -> ColumnCodec:
    """A scalar type's codec in Debezium's format (pgcdc's where they are the same)."""
    codec = _debezium_codec(resolved, money_frac_digits)
    return _scalar(resolved) if codec is None else ColumnCodec(_copy(codec.avro_type),
                                                               codec.convert)


def _debezium_codec(resolved: ResolvedType, money_frac_digits: int) -> ColumnCodec | None:
    if resolved.kind == "enum":
        return ColumnCodec(_debezium_named("string", _DBZ_ENUM), _to_string)
    if resolved.kind != "builtin":  # core types pgtypes does not load, by OID; extensions'
        return _DBZ_OTHER.get(resolved.oid) or _DBZ_EXTENSIONS.get(resolved.name)
    oid, typmod = resolved.oid, resolved.typmod
    millis = 0 <= typmod <= 3  # time.precision.mode=adaptive: (timestamp|time)(0..3) in ms
    if oid == oids.DATE:
        return ColumnCodec(_debezium_named("int", DBZ_DATE), _date)
    if oid == oids.TIME:
        if millis:
            return ColumnCodec(_debezium_named("int", DBZ_TIME), _time_millis)
        return ColumnCodec(_debezium_named("long", DBZ_MICRO_TIME), _time)
    if oid == oids.TIMESTAMP:
        if millis:
            return ColumnCodec(_debezium_named("long", DBZ_TIMESTAMP), _timestamp_millis)
        return ColumnCodec(_debezium_named("long", DBZ_MICRO_TIMESTAMP), _timestamp)
    if oid == oids.TIMESTAMPTZ:
        return ColumnCodec(_debezium_named("string", DBZ_ZONED_TIMESTAMP), _zoned_timestamp)
    if oid == oids.TIMETZ:
        return ColumnCodec(_debezium_named("string", DBZ_ZONED_TIME), _zoned_time)
    if oid == oids.INTERVAL:
        return ColumnCodec(_debezium_named("long", DBZ_MICRO_DURATION), _micro_duration)
    if oid in (oids.BIT, oids.VARBIT):
        length = typmod if typmod >= 0 else (1 if oid == oids.BIT else UNBOUNDED_BITS)
        if length == 1:
            return ColumnCodec("boolean", _bit_boolean)
        return ColumnCodec(_debezium_named("bytes", DBZ_BITS, {"length": str(length)}),
                           partial(_bits, (length + 7) // 8 if oid == oids.BIT else 0))
    if oid == oids.NUMERIC:
        constraint = numeric_precision_scale(typmod)
        if constraint is None:  # decimal.handling.mode=precise: the value's own scale
            return ColumnCodec(VARIABLE_SCALE_DECIMAL, _variable_scale_decimal)
        precision, scale = constraint
        avro_scale = max(scale, 0)
        avro_precision = max(max(precision - scale, 0) + avro_scale, 1)
        return ColumnCodec(_debezium_decimal(avro_precision, avro_scale),
                           _decimal_converter(avro_scale, avro_precision))
    if oid == oids.MONEY:
        return ColumnCodec(_debezium_decimal(None, money_frac_digits),
                           _money_converter(money_frac_digits))
    name = _DBZ_STRING_NAMES.get(oid)
    if name is not None:
        return ColumnCodec(_debezium_named("string", name), _to_string)
    return None


def _time_millis(value: Any) -> Any:
    micros = _time(value)
    return micros // 1000 if isinstance(micros, int) else micros


def _timestamp_millis(value: Any) -> Any:
    micros = _timestamp(value)
    return micros // 1000 if isinstance(micros, int) else micros


def _fraction(micros: int) -> str:
    """Java's ISO formatters' fraction: none, or the digits without trailing zeros."""
    return "" if not micros else "." + f"{micros:06d}".rstrip("0")


def _zoned_timestamp(value: Any) -> Any:
    """ZonedTimestamp: ISO-8601 in UTC (``2024-01-02T03:04:05.5Z``), clamped as pgcdc's."""
    micros = _timestamptz(value)
    if not isinstance(micros, int):
        return micros
    t = _EPOCH + dt.timedelta(microseconds=micros)
    return (f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:"
            f"{t.second:02d}{_fraction(t.microsecond)}Z")


def _zoned_time(value: Any) -> Any:
    """ZonedTime: the time moved to UTC (``09:04:05.5Z`` for ``12:04:05.5+03``), modulo a day."""
    if not isinstance(value, dt.time):
        raise ValueError(f"timetz value {value!r} has no Debezium ZonedTime")
    offset = value.utcoffset() or dt.timedelta(0)
    micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 \
        + value.microsecond - offset // _MICROSECOND
    micros %= _MICROS_PER_DAY
    seconds, fraction = divmod(micros, 1_000_000)
    return (f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
            f"{_fraction(fraction)}Z")


def _micro_duration(value: Any) -> Any:
    """MicroDuration: months as 30.4375 days, exactly (Debezium sums doubles)."""
    if not isinstance(value, Interval):
        return value
    micros = value.months * MICROS_PER_MONTH + value.days * _MICROS_PER_DAY + value.microseconds
    if value.months in (2**31 - 1, -(2**31)) or micros not in _LONG_RANGE:
        raise ValueError(f"interval {value.isoformat()} has no Debezium MicroDuration")
    return micros


def _bit_boolean(value: Any) -> Any:
    return value == "1" if isinstance(value, str) else value


def _bits(size: int, value: Any) -> Any:
    """Bits: the bit string as a number (first bit most significant), little-endian bytes,
    `size` of them for bit(n), as few as hold it for bit varying."""
    if not isinstance(value, str):
        return value
    number = int(value, 2) if value else 0
    return number.to_bytes(max(size, (number.bit_length() + 7) // 8), "little")


def _unscaled_bytes(number: int) -> bytes:
    """Java's BigInteger.toByteArray: minimal two's complement, big-endian."""
    return number.to_bytes((number if number >= 0 else ~number).bit_length() // 8 + 1, "big",
                           signed=True)


def _variable_scale_decimal(value: Any) -> Any:
    if not isinstance(value, Decimal):
        return value
    if not value.is_finite():  # Debezium has none; the text goes to `unparsed`
        raise ValueError(f"numeric {value} has no Debezium VariableScaleDecimal")
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    if exponent > 0:
        unscaled, exponent = unscaled * 10**exponent, 0
    return {"scale": -exponent, "value": _unscaled_bytes(unscaled)}


def _money_converter(frac_digits: int) -> Converter:
    exponent = Decimal(1).scaleb(-frac_digits)

    def convert(value: Any) -> Any:
        return value.quantize(exponent) if isinstance(value, Decimal) else value

    return convert


def _hstore_json(value: Any) -> Any:
    """hstore.handling.mode=json: ``"a"=>"1", "b"=>NULL`` as ``{"a":"1","b":null}``."""
    if not isinstance(value, str):
        value = _to_string(value)
    return json.dumps(parse_hstore(value), ensure_ascii=False, separators=(",", ":"))


def parse_hstore(text: str) -> dict[str, str | None]:
    """hstore's output text -> its pairs in order. ValueError on anything else."""
    pairs: dict[str, str | None] = {}
    pos, end = 0, len(text)
    while pos < end:
        key, pos = _hstore_quoted(text, pos)
        if not text.startswith("=>", pos):
            raise ValueError(f"not hstore text at {pos}: {text[:80]!r}")
        pos += 2
        if text.startswith("NULL", pos):
            pairs[key], pos = None, pos + 4
        else:
            pairs[key], pos = _hstore_quoted(text, pos)
        if pos < end:
            if not text.startswith(", ", pos):
                raise ValueError(f"not hstore text at {pos}: {text[:80]!r}")
            pos += 2
    return pairs


def _hstore_quoted(text: str, pos: int) -> tuple[str, int]:
    if pos >= len(text) or text[pos] != '"':
        raise ValueError(f"not hstore text at {pos}: {text[:80]!r}")
    out: list[str] = []
    pos += 1
    while pos < len(text):
        ch = text[pos]
        if ch == "\\" and pos + 1 < len(text):
            out.append(text[pos + 1])
            pos += 2
        elif ch == '"':
            return "".join(out), pos + 1
        else:
            out.append(ch)
            pos += 1
    raise ValueError(f"unterminated hstore string: {text[:80]!r}")


# Geometric, text-search and extension types: Debezium's structs, arrays and names, from the
# value's text (pgtypes loads none of them: the value is its text, or Unknown holding it).


def _text(value: Any) -> str:
    text = _to_string(value)
    if not isinstance(text, str):
        raise ValueError(f"{value!r} is not a text value")
    return text


def _floats(text: str, what: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"not {what} text: {text[:80]!r}") from None


def _point(value: Any) -> Any:
    """``(x,y)`` -> Point {x, y, wkb: its 2D WKB, srid: null}, as Debezium's convertPoint."""
    text = _text(value).strip()
    if not (text.startswith("(") and text.endswith(")")):
        raise ValueError(f"not point text: {text[:80]!r}")
    coordinates = _floats(text[1:-1], "point")
    if len(coordinates) != 2:
        raise ValueError(f"not point text: {text[:80]!r}")
    x, y = coordinates
    wkb = b"\x01" + (1).to_bytes(4, "little") + struct.pack("<dd", x, y)
    return {"x": x, "y": y, "wkb": wkb, "srid": None}


def _postgis(value: Any) -> Any:
    """PostGIS's text (hex EWKB) -> Geometry/Geography {wkb: the EWKB bytes, srid: the SRID the
    EWKB carries, else 0}, as Debezium's PostgisGeometry.fromHexEwkb."""
    text = _text(value)
    try:
        ewkb = bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"not hex EWKB: {text[:80]!r}") from None
    if len(ewkb) < 9:
        raise ValueError(f"EWKB too short: {text[:80]!r}")
    order: Literal["little", "big"] = "little" if ewkb[0] else "big"
    srid = 0
    if int.from_bytes(ewkb[1:5], order) & _EWKB_SRID_FLAG:
        srid = int.from_bytes(ewkb[5:9], order, signed=True)
    return {"wkb": ewkb, "srid": srid}


def _debezium_vector(name: str, items: str) -> dict[str, Any]:
    """A named Connect array (DoubleVector, FloatVector) as AvroConverter writes it."""
    return {**_debezium_named("array", name), "items": items}


def _vector(value: Any) -> Any:
    """pgvector's ``[1,2.5,3]`` (vector: DoubleVector; halfvec: FloatVector) -> its values."""
    text = _text(value).strip()
    if not (text.startswith("[") and text.endswith("]")):
        raise ValueError(f"not vector text: {text[:80]!r}")
    return _floats(text[1:-1], "vector") if text[1:-1].strip() else []


def _sparse_vector(value: Any) -> Any:
    """pgvector's ``{1:1.5,3:2}/5`` -> SparseDoubleVector {dimensions, vector: [{key, value}]}
    (indices as written, 1-based); Debezium's int16 holds dimensions and indices up to 32767
    only: a larger one is refused (the fallback: null, the text in ``unparsed``)."""
    text = _text(value).strip()
    body, _, dims = text.rpartition("/")
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError(f"not sparsevec text: {text[:80]!r}")
    try:
        dimensions = int(dims)
        entries = [(int(key), float(number)) for key, _, number in
                   (part.partition(":") for part in body[1:-1].split(",") if part.strip())]
    except ValueError:
        raise ValueError(f"not sparsevec text: {text[:80]!r}") from None
    if dimensions not in _INT16_RANGE or any(key not in _INT16_RANGE for key, _ in entries):
        raise ValueError(f"sparsevec {text[:80]!r} exceeds Debezium's int16 dimensions")
    return {"dimensions": dimensions, "vector": [{"key": k, "value": v} for k, v in entries]}


#: Core types pgtypes does not load, by OID (fixed in every version).
_DBZ_OTHER: Final[dict[int, ColumnCodec]] = {
    oids.POINT: ColumnCodec(POINT_RECORD, _point),
    oids.TSVECTOR: ColumnCodec(_debezium_named("string", "io.debezium.data.Tsvector"), _to_string),
}
#: Extension types Debezium knows by name (their OIDs differ per database).
_DBZ_EXTENSIONS: Final[dict[str, ColumnCodec]] = {
    "hstore": ColumnCodec(_debezium_named("string", JSON_CONNECT_NAME), _hstore_json),
    "ltree": ColumnCodec(_debezium_named("string", "io.debezium.data.Ltree"), _to_string),
    "geometry": ColumnCodec(GEOMETRY_RECORD, _postgis),
    "geography": ColumnCodec(GEOGRAPHY_RECORD, _postgis),
    "vector": ColumnCodec(_debezium_vector("io.debezium.data.DoubleVector", "double"), _vector),
    "halfvec": ColumnCodec(_debezium_vector("io.debezium.data.FloatVector", "float"), _vector),
    "sparsevec": ColumnCodec(SPARSE_VECTOR_RECORD, _sparse_vector),
}

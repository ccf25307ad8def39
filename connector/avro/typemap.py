"""The one PostgreSQL -> Avro type mapping: each column's Avro type and value converter.

``column_codec(catalog, type_oid, typmod, dims)`` gives, once per column, the Avro type of the
column's values (the schema wraps it in ``["null", T]``) and the function turning what a
`connector.pgtypes` loader returned into the datum an Avro writer takes for it (``None``: the
loaded value is the datum already, so the row loop skips the call; the converters are
`connector.avro.datums`'). Integers for the date/time logical types (so naive timestamps are
never shifted by the host's time zone), strings where the type is a string. `connector.pgtypes`
only loads values and knows nothing of Avro.

The mapping itself -- which Avro type each PostgreSQL type has, the text forms of the string
types, and the clamping of dates and timestamps to 0001-01-01 .. 9999-12-31 -- is the table
"Column types -> Avro" in schemas/README.md; change it there first. In short: scalars by OID
in ``_SIMPLE`` / ``_LONG`` / ``_STRING`` (anything else, and every user type but arrays and
domains, is a string of its text), numeric(p, s) a decimal up to 38 digits, domains their base
type's, arrays ``dims`` nested Avro arrays (pgoutput does not tell a column's dimensions: the
pipeline passes ``pg_attribute.attndims``, see `ARRAY_DIMS_QUERY` in `connector.avro.schema`).

Each column's type also carries Kafka Connect attributes, Debezium's (`connector.avro.connect`;
schemas/README.md "Kafka Connect attributes"). Avro ignores them: encoding and values are the
same with or without them.

``value_format="debezium"`` (``--value-format debezium``) takes, per type, the alternative of
`connector.avro.debezium_types` instead: Debezium's PostgreSQL connector's default encoding
(schemas/README.md "Debezium value format"); a type it does not list is the same in both
formats, arrays take their element's.

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
   its text), and a converter (in ``connector/avro/datums.py``) in ``_CONVERTERS`` if the
   loaded value is not the datum; its Connect name in ``connect.py``'s ``CONNECT_NAMES`` /
   ``CONNECT_TYPES`` if Connect has one, its Debezium encoding in ``debezium_types.py`` if
   Debezium's differs; its row in schemas/README.md (tests/unit/avro/test_avro_typemap.py,
   tests/unit/avro/test_avro_debezium_format.py).
4. Optional C fast path: a kind in ``connector/avro/native_rows.py`` and its parser in
   ``connector/native/rowenc.c`` (tests/unit/avro/test_avro_native_rows.py proves the same bytes
   as the Python path); without it the column takes the Python path, same bytes.
5. The merge job reads the Avro type with Spark's own mapping; an Avro type Spark reads but
   Delta cannot store needs a rule in ``spark_jobs/events/lake_types.py`` (as ``time-micros`` has).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Final

from connector.pgtypes import TypeCatalog, oids
from connector.pgtypes.catalog import ResolvedType
from connector.pgtypes.numeric import numeric_precision_scale

from .connect import (
    CONNECT_DECIMAL,
    CONNECT_DEFAULT,
    CONNECT_NAMES,
    JSON_CONNECT_NAME,
    connect_default,
    source_column_parameters,
    with_parameters,
)
from .datums import (
    AvroSchema,
    ColumnCodec,
    Converter,
    date_days,
    decimal_converter,
    time_micros,
    timestamp_micros,
    timestamptz_micros,
    to_string,
    unsigned_decimal,
)
from .debezium_types import debezium_codec

__all__ = ["DEBEZIUM_FORMAT", "MAX_DECIMAL_PRECISION", "VALUE_FORMATS", "column_codec"]

#: numeric(p, s) wider than this goes to Avro as a string: Spark's DecimalType (the merge job)
#: holds at most 38 digits.
MAX_DECIMAL_PRECISION = 38
#: The value formats (``--value-format``): pgcdc's own (the default: lossless, typed) and
#: Debezium's PostgreSQL connector's default encoding (schemas/README.md "Debezium value format").
DEBEZIUM_FORMAT: Final = "debezium"
VALUE_FORMATS: Final = ("pgcdc", DEBEZIUM_FORMAT)

# oid, xid, cid are unsigned 32-bit: a long holds them all. xid8 is unsigned 64-bit: a
# decimal(20, 0) (``_SIMPLE``), which holds 0 .. 2^64 - 1 exactly and stays a number in the lake.
_LONG = {oids.INT8, oids.OID, oids.XID, oids.CID}
XID8_DECIMAL: Final = (20, 0)
# Types whose datum is their text (``to_string``); json/jsonb carry a connect.name too.
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
    avro_type = with_parameters(codec.avro_type, parameters)
    if default is not None:
        value = connect_default(catalog, type_oid, typmod, default, ColumnCodec(avro_type,
                                                                                codec.convert))
        if value is not None:
            typed = avro_type if isinstance(avro_type, dict) else {"type": avro_type}
            typed[CONNECT_DEFAULT] = value
            avro_type = typed
    return ColumnCodec(avro_type, codec.convert)


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


def _debezium_scalar(money_frac_digits: int, resolved: ResolvedType) -> ColumnCodec:
    """A scalar type's codec in Debezium's format (pgcdc's where they are the same)."""
    codec = debezium_codec(resolved, money_frac_digits)
    return _scalar(resolved) if codec is None else ColumnCodec(_copy(codec.avro_type),
                                                               codec.convert)


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
        return to_string
    oid = resolved.oid
    special = _CONVERTERS.get(oid)
    if special is not None:
        return special
    if oid == oids.NUMERIC:
        decimal = decimal_precision_scale(resolved.typmod)
        assert decimal is not None
        return decimal_converter(decimal[1], decimal[0])
    return None  # the loaded value is the datum


_CONVERTERS: dict[int, Converter] = {
    oids.XID8: unsigned_decimal,
    oids.DATE: date_days,
    oids.TIMESTAMP: timestamp_micros,
    oids.TIMESTAMPTZ: timestamptz_micros,
    oids.TIME: time_micros,
    oids.UUID: to_string,
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

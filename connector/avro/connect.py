"""Kafka Connect attributes: Debezium's names on the Avro types, so stock sinks type columns.

Kafka Connect's AvroConverter (Confluent's, Apicurio's) reads extra attributes of an Avro type
into the Connect schema a sink sees; Avro itself ignores them (they change neither the encoding
nor schema resolution, so adding them is a compatible schema change). `connector.avro.typemap`
puts Debezium's (schemas/README.md "Kafka Connect attributes") on each column's type, so that
stock sinks (Debezium's JDBC sink...) create typed columns: ``connect.name`` /
``connect.type`` on the types Connect names (`CONNECT_NAMES`, `CONNECT_TYPES`, decimals), on
every column ``connect.parameters`` with its source type (`source_column_parameters`, joined by
`with_parameters`), and ``connect.default`` on a column with a constant default of a JSON-plain
Avro type (`connect_default`). Encoding and values are the same with or without them.
"""

from __future__ import annotations

import math
from typing import Any, Final

from connector.errors import DecodeError
from connector.pgtypes import TypeCatalog, oids
from connector.pgtypes.numeric import numeric_precision_scale

from .datums import AvroSchema, ColumnCodec

__all__ = ["CONNECT_DECIMAL", "CONNECT_DEFAULT", "CONNECT_NAMES", "CONNECT_TYPES",
           "JSON_CONNECT_NAME", "SOURCE_COLUMN_LENGTH", "SOURCE_COLUMN_SCALE",
           "SOURCE_COLUMN_TYPE", "connect_default", "source_column_parameters",
           "with_parameters"]

JSON_CONNECT_NAME: Final = "io.debezium.data.Json"
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


def with_parameters(avro_type: AvroSchema, parameters: dict[str, str]) -> AvroSchema:
    """`avro_type` (fresh, not shared) with the column's parameters joined to its own; a
    named record (Debezium's VariableScaleDecimal) is shared by its columns and takes none."""
    if not parameters or (isinstance(avro_type, dict) and avro_type.get("type") == "record"):
        return avro_type
    typed: dict[str, Any] = avro_type if isinstance(avro_type, dict) else {"type": avro_type}
    own = typed.get("connect.parameters", {})
    typed["connect.parameters"] = {**own, **parameters}
    return typed

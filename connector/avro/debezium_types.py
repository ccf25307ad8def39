"""The Debezium value format (``--value-format debezium``): each type as Debezium writes it.

Each type as Debezium's PostgreSQL connector writes it with its default settings
(time.precision.mode=adaptive, decimal.handling.mode=precise, interval.handling.mode=numeric,
hstore.handling.mode=json, binary.handling.mode=bytes), in the Avro its AvroConverter writes:
``connect.name``, ``connect.version`` and ``connect.parameters`` as Debezium's Connect schemas
carry them. `debezium_codec` gives a scalar type's codec, None for a type not handled here,
which is the same in both formats (integers, floats, boolean, bytea, the text types, inet,
ranges...): `connector.avro.typemap.column_codec` (the entry point) then takes pgcdc's own, and
arrays take their element's. What each type loses against pgcdc's own format:
schemas/README.md "Debezium value format"; the merge job decodes these back
(spark_jobs/events/debezium.py). The value converters shared with pgcdc's format are
`connector.avro.datums`'.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
from decimal import Decimal
from functools import partial
from typing import Any, Final, Literal

from connector.pgtypes import oids
from connector.pgtypes.catalog import ResolvedType
from connector.pgtypes.numeric import numeric_precision_scale
from connector.pgtypes.values import Interval

from .connect import CONNECT_DECIMAL, JSON_CONNECT_NAME
from .datums import (
    EPOCH,
    MICROSECOND,
    ColumnCodec,
    Converter,
    date_days,
    decimal_converter,
    time_micros,
    timestamp_micros,
    timestamptz_micros,
    to_string,
)

__all__ = ["CONNECT_DEFAULT_DECIMAL_PRECISION", "DBZ_BITS", "DBZ_DATE", "DBZ_MICRO_DURATION",
           "DBZ_MICRO_TIME", "DBZ_MICRO_TIMESTAMP", "DBZ_TIME", "DBZ_TIMESTAMP",
           "DBZ_VARIABLE_SCALE_DECIMAL", "DBZ_ZONED_TIME", "DBZ_ZONED_TIMESTAMP",
           "GEOGRAPHY_RECORD", "GEOMETRY_RECORD", "MICROS_PER_MONTH", "POINT_RECORD",
           "SPARSE_VECTOR_RECORD", "UNBOUNDED_BITS", "VARIABLE_SCALE_DECIMAL", "debezium_codec",
           "parse_hstore"]

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


def debezium_codec(resolved: ResolvedType, money_frac_digits: int) -> ColumnCodec | None:
    """A scalar (not array) type's codec in Debezium's format, None where it is pgcdc's (the
    codec's Avro type is shared: the caller copies it before changing it)."""
    if resolved.kind == "enum":
        return ColumnCodec(_debezium_named("string", _DBZ_ENUM), to_string)
    if resolved.kind != "builtin":  # core types pgtypes does not load, by OID; extensions'
        return _DBZ_OTHER.get(resolved.oid) or _DBZ_EXTENSIONS.get(resolved.name)
    oid, typmod = resolved.oid, resolved.typmod
    millis = 0 <= typmod <= 3  # time.precision.mode=adaptive: (timestamp|time)(0..3) in ms
    if oid == oids.DATE:
        return ColumnCodec(_debezium_named("int", DBZ_DATE), date_days)
    if oid == oids.TIME:
        if millis:
            return ColumnCodec(_debezium_named("int", DBZ_TIME), _time_millis)
        return ColumnCodec(_debezium_named("long", DBZ_MICRO_TIME), time_micros)
    if oid == oids.TIMESTAMP:
        if millis:
            return ColumnCodec(_debezium_named("long", DBZ_TIMESTAMP), _timestamp_millis)
        return ColumnCodec(_debezium_named("long", DBZ_MICRO_TIMESTAMP), timestamp_micros)
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
                           decimal_converter(avro_scale, avro_precision))
    if oid == oids.MONEY:
        return ColumnCodec(_debezium_decimal(None, money_frac_digits),
                           _money_converter(money_frac_digits))
    name = _DBZ_STRING_NAMES.get(oid)
    if name is not None:
        return ColumnCodec(_debezium_named("string", name), to_string)
    return None


def _time_millis(value: Any) -> Any:
    micros = time_micros(value)
    return micros // 1000 if isinstance(micros, int) else micros


def _timestamp_millis(value: Any) -> Any:
    micros = timestamp_micros(value)
    return micros // 1000 if isinstance(micros, int) else micros


def _fraction(micros: int) -> str:
    """Java's ISO formatters' fraction: none, or the digits without trailing zeros."""
    return "" if not micros else "." + f"{micros:06d}".rstrip("0")


def _zoned_timestamp(value: Any) -> Any:
    """ZonedTimestamp: ISO-8601 in UTC (``2024-01-02T03:04:05.5Z``), clamped as pgcdc's."""
    micros = timestamptz_micros(value)
    if not isinstance(micros, int):
        return micros
    t = EPOCH + dt.timedelta(microseconds=micros)
    return (f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:"
            f"{t.second:02d}{_fraction(t.microsecond)}Z")


def _zoned_time(value: Any) -> Any:
    """ZonedTime: the time moved to UTC (``09:04:05.5Z`` for ``12:04:05.5+03``), modulo a day."""
    if not isinstance(value, dt.time):
        raise ValueError(f"timetz value {value!r} has no Debezium ZonedTime")
    offset = value.utcoffset() or dt.timedelta(0)
    micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 \
        + value.microsecond - offset // MICROSECOND
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
        value = to_string(value)
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
    text = to_string(value)
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
    oids.TSVECTOR: ColumnCodec(_debezium_named("string", "io.debezium.data.Tsvector"), to_string),
}
#: Extension types Debezium knows by name (their OIDs differ per database).
_DBZ_EXTENSIONS: Final[dict[str, ColumnCodec]] = {
    "hstore": ColumnCodec(_debezium_named("string", JSON_CONNECT_NAME), _hstore_json),
    "ltree": ColumnCodec(_debezium_named("string", "io.debezium.data.Ltree"), to_string),
    "geometry": ColumnCodec(GEOMETRY_RECORD, _postgis),
    "geography": ColumnCodec(GEOGRAPHY_RECORD, _postgis),
    "vector": ColumnCodec(_debezium_vector("io.debezium.data.DoubleVector", "double"), _vector),
    "halfvec": ColumnCodec(_debezium_vector("io.debezium.data.FloatVector", "float"), _vector),
    "sparsevec": ColumnCodec(SPARSE_VECTOR_RECORD, _sparse_vector),
}

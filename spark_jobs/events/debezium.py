"""Topics written with ``--value-format debezium``: their values back to the lake's types.

The producer marks such a topic's Envelope schema (``pgcdc.value_format: debezium``, and
``pgcdc.truncate_records``: where truncates are written) and gives each column Debezium's
encoding, named by its ``connect.name`` (connector/avro/debezium_types.py). The
job decodes those values to the lake column the same column has from a topic in pgcdc's own
format, so the lake is the same whichever format a topic has, except what the Debezium
format does not carry (schemas/README.md "Debezium value format": timetz offsets, interval
months, the length of a bit varying, hstore's text form). Per Debezium type:

* ``Date`` (days), ``Timestamp`` (ms), ``MicroTimestamp`` (µs): read with the logical type
  pgcdc's format has (`lake_schema`: same binary encoding), so Spark makes the same column;
* ``Time`` (ms, int) → microseconds (long), as pgcdc's ``time-micros`` is stored;
  ``MicroTime`` is that already;
* ``ZonedTimestamp`` (ISO-8601 UTC string) → timestamp (pgcdc: ``timestamp-micros``);
* ``MicroDuration`` (µs, months as 30.4375 days) → the ISO-8601 text of that duration;
* ``Bits`` (little-endian bytes) → the string of bits; ``boolean`` of a bit(1) → ``0``/``1``;
* ``Decimal`` wider than Spark's 38 digits (numeric(p > 38), money) and
  ``VariableScaleDecimal`` (unconstrained numeric) → the decimal's text, as pgcdc's string;
* ``Json`` of an hstore column → hstore's own text;
* ``geometry.Point`` (struct of x, y) → PostgreSQL's point text ``(x,y)``;
  ``geometry.Geometry`` / ``Geography`` (PostGIS: EWKB bytes) → PostGIS's text, the EWKB in
  upper-case hex; ``DoubleVector`` / ``FloatVector`` / ``SparseDoubleVector`` (pgvector) →
  pgvector's text (``[1,2.5]``, ``{1:1.5,3:2}/5``); the numbers printed as PostgreSQL prints
  them (`float8_text`, `float4_text`), so the text is the one pgcdc's format carries;
* everything else (strings, ZonedTime, Tsvector, numbers, decimals up to 38 digits) as it is.

Topics in pgcdc's format are untouched: nothing here applies without the schema's marker.
The fast path (`rows.py`) leaves Debezium-format schemas to this, the Spark path.
"""

from __future__ import annotations

import json
import logging
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import MAX_PREC, Context, Decimal
from functools import partial
from typing import Any, Final

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, StringType

log = logging.getLogger(__name__)

VALUE_FORMAT: Final = "pgcdc.value_format"  # connector/avro/schema.py's VALUE_FORMAT
TRUNCATES: Final = "pgcdc.truncate_records"  # ... and TRUNCATES
DEBEZIUM: Final = "debezium"
SOURCE_TYPE: Final = "__debezium.source.column.type"
MAX_SPARK_PRECISION: Final = 38
_MICROS_PER_DAY: Final = 86_400_000_000
_VARIABLE_SCALE: Final = "io.debezium.data.VariableScaleDecimal"
# The logical type each Debezium temporal name reads as (same binary encoding).
_READ_AS: Final = {
    "io.debezium.time.Date": "date",
    "io.debezium.time.Timestamp": "local-timestamp-millis",
    "io.debezium.time.MicroTimestamp": "local-timestamp-micros",
}
_warned: set[str] = set()


def is_debezium(envelope: dict[str, Any]) -> bool:
    """Whether an Envelope schema is of a topic written with ``--value-format debezium``."""
    return envelope.get(VALUE_FORMAT) == DEBEZIUM


def truncate_warning(topic: str, envelope: dict[str, Any]) -> str | None:
    """The one line the job says (once per topic and run) when a topic's writer schema tells
    that truncates are not written to every partition: the lake then keeps rows the source
    truncated (or, with one copy in partition 0, applies it out of order with other keys)."""
    if not is_debezium(envelope) or topic in _warned:
        return None
    mode = envelope.get(TRUNCATES, "none")
    if mode == "every-partition":
        return None
    _warned.add(topic)
    if mode == "none":
        return (f"{topic}: written with --value-format debezium without truncates "
                "(--truncate-records none): a TRUNCATE on the source is not applied to the "
                "lake; write them with --truncate-records every-partition")
    return (f"{topic}: written with --value-format debezium and --truncate-records {mode}: "
            "a TRUNCATE is exact in the lake only on a topic of one partition; write them "
            "with --truncate-records every-partition")


def note_truncates(topic: str, envelope: dict[str, Any]) -> None:
    warning = truncate_warning(topic, envelope)
    if warning:
        log.warning("%s", warning)


# ---------------------------------------------------------------------------- schema


def lake_schema(schema: Any) -> Any:
    """A Debezium-format writer schema with the temporal names read as pgcdc's logical types
    and decimals wider than Spark's read as their bytes (decoded by `lake_column`)."""
    if isinstance(schema, list):
        return [lake_schema(branch) for branch in schema]
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    logical = _READ_AS.get(schema.get("connect.name", ""))
    if logical is not None:
        out["logicalType"] = logical
    if _wide_decimal(schema):
        del out["logicalType"]
    if "fields" in schema:
        out["fields"] = [{**f, "type": lake_schema(f["type"])} for f in schema["fields"]]
    if "items" in schema:
        out["items"] = lake_schema(schema["items"])
    return out


def _wide_decimal(schema: dict[str, Any]) -> bool:
    return (schema.get("logicalType") == "decimal"
            and int(schema.get("precision", 0)) > MAX_SPARK_PRECISION)


# ---------------------------------------------------------------------------- values


def lake_column(column: Column, field_type: Any) -> Column:
    """`column` (as `from_avro` read it with `lake_schema`) → the lake's value of the column
    whose writer type (without the null branch) is `field_type`."""
    decode = _decoder(field_type, None)
    if decode is None:
        return column
    if decode.spark is not None:
        return decode.spark(column)
    assert decode.python is not None
    result: DataType = StringType()
    for _ in range(decode.depth):
        result = ArrayType(result)
    # Spark runs no Python UDF inside a higher-order function: arrays go whole to the UDF.
    return F.udf(decode.python, result)(column)


@dataclass(frozen=True)
class _Decode:
    """How one Debezium type becomes its lake value: a Spark expression, or (for what Spark
    has no expression for) a Python function of the value giving its text, `depth` arrays
    deep."""

    spark: Callable[[Column], Column] | None = None
    python: Callable[[Any], Any] | None = None
    depth: int = 0


def _decoder(field_type: Any, source_type: str | None) -> _Decode | None:
    if isinstance(field_type, list):
        branches = [b for b in field_type if b != "null"]
        return _decoder(branches[0], source_type) if len(branches) == 1 else None
    if isinstance(field_type, dict) and source_type is None:
        source_type = field_type.get("connect.parameters", {}).get(SOURCE_TYPE)
    if field_type == "boolean" or (isinstance(field_type, dict)
                                   and field_type.get("type") == "boolean"):
        if source_type in ("BIT", "VARBIT", "_BIT", "_VARBIT"):
            return _Decode(spark=lambda c: F.when(c, "1").when(~c, "0"))
        return None
    if isinstance(field_type, str):  # a later column's reference to a named record
        return _BY_NAME.get(field_type)
    if not isinstance(field_type, dict):
        return None
    name = field_type.get("connect.name")
    if name in _BY_NAME:  # the records, and the vectors (named arrays)
        return _BY_NAME[name]
    if field_type.get("type") == "array":
        inner = _decoder(field_type["items"], source_type)
        if inner is None:
            return None
        if inner.spark is not None:
            spark = inner.spark
            return _Decode(spark=lambda c: F.transform(c, spark))
        assert inner.python is not None
        return _Decode(python=partial(_each, inner.python), depth=inner.depth + 1)
    if _wide_decimal(field_type):
        return _Decode(python=partial(_decimal_of, int(field_type.get("scale", 0))))
    if name == "io.debezium.time.Time":
        return _Decode(spark=lambda c: c.cast("long") * 1000)
    if name == "io.debezium.time.ZonedTimestamp":
        return _Decode(spark=lambda c: c.cast("timestamp"))
    if name == "io.debezium.time.MicroDuration":
        return _Decode(python=duration_text)
    if name == "io.debezium.data.Bits":
        padded = 0 if source_type in ("VARBIT", "_VARBIT") else int(
            field_type.get("connect.parameters", {}).get("length", "0"))
        return _Decode(python=partial(_bits_of, padded))
    if name == "io.debezium.data.Json" and source_type in ("HSTORE", "_HSTORE"):
        return _Decode(python=hstore_text)
    return None


def _ewkb_text(column: Column) -> Column:
    return F.upper(F.hex(column.getField("wkb")))


def _each(decode: Callable[[Any], Any], values: list[Any] | None) -> list[Any] | None:
    return None if values is None else [None if v is None else decode(v) for v in values]


def _variable_scale_text(struct: Any) -> str | None:
    return None if struct is None else decimal_text(struct["value"], struct["scale"])


def _decimal_of(scale: int, unscaled: bytes | None) -> str | None:
    return decimal_text(unscaled, scale)


def _bits_of(length: int, data: bytes | None) -> str | None:
    return bits_text(data, length)


def duration_text(micros: int | None) -> str | None:
    """A MicroDuration as ISO-8601 (``P1DT2H3M4.5S``): whole days, then the time (its months
    were made days by the producer; a negative duration's fields are all negative)."""
    if micros is None:
        return None
    sign = -1 if micros < 0 else 1
    days, rest = divmod(abs(micros), _MICROS_PER_DAY)
    hours, rest = divmod(rest, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds, fraction = divmod(rest, 1_000_000)
    if not micros:
        return "PT0S"
    out = ["P"]
    if days:
        out.append(f"{sign * days}D")
    if hours or minutes or seconds or fraction:
        out.append("T")
        if hours:
            out.append(f"{sign * hours}H")
        if minutes:
            out.append(f"{sign * minutes}M")
        if seconds or fraction:
            text = f"{seconds}" + (f".{fraction:06d}".rstrip("0") if fraction else "")
            out.append(f"{'-' if sign < 0 else ''}{text}S")
    return "".join(out)


def bits_text(data: bytes | None, length: int) -> str | None:
    """Debezium's Bits (the number the bits spell, little-endian) → the string of bits,
    `length` of them (a bit(n)); 0: as few as spell it (a bit varying, whose length Debezium
    does not carry)."""
    if data is None:
        return None
    number = int.from_bytes(data, "little")
    return format(number, f"0{length}b") if length else format(number, "b") if number else ""


def decimal_text(unscaled: bytes | None, scale: int | None) -> str | None:
    """An Avro decimal's two's complement big-endian bytes at `scale` → its text (as pgcdc
    writes a numeric too wide for Spark: every digit, the scale's fraction digits)."""
    if unscaled is None or scale is None:
        return None
    number = Decimal(int.from_bytes(unscaled, "big", signed=True))
    return format(number.scaleb(-scale, Context(prec=MAX_PREC)), "f")


def hstore_text(json_text: str | None) -> str | None:
    """hstore.handling.mode=json's object → hstore's own text, pairs in the order given."""
    if json_text is None:
        return None
    pairs = json.loads(json_text)

    def quoted(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return ", ".join(f"{quoted(k)}=>{'NULL' if v is None else quoted(v)}"
                     for k, v in pairs.items())


def point_text(point: Any) -> str | None:
    """A Point struct → PostgreSQL's text of the point, ``(1.5,-2)``."""
    if point is None:
        return None
    return f"({float8_text(point['x'])},{float8_text(point['y'])})"


def vector_text(values: list[float] | None) -> str | None:
    """A DoubleVector / FloatVector → pgvector's text, ``[1,2.5,3]`` (pgvector's values are
    float4 (halfvec's, float2): printed as the float4 they are)."""
    if values is None:
        return None
    return "[" + ",".join(float4_text(v) for v in values) + "]"


def sparse_vector_text(sparse: Any) -> str | None:
    """A SparseDoubleVector → pgvector's text, ``{1:1.5,3:2}/5`` (indices ascending, 1-based
    as the text has them)."""
    if sparse is None:
        return None
    entries = sorted((e["key"], e["value"]) for e in sparse["vector"])
    body = ",".join(f"{k}:{float4_text(v)}" for k, v in entries)
    return f"{{{body}}}/{sparse['dimensions']}"


def float8_text(value: float) -> str:
    """PostgreSQL's text of a float8 (float8out, extra_float_digits 1: the default since 12):
    the shortest digits that read back exactly (Python's repr finds the same), fixed-point
    for decimal exponents -4 .. 14, else ``1.5e+20``; ``NaN``, ``Infinity``, ``-0``."""
    return _pg_float(value, repr(value), 15)


def float4_text(value: float) -> str:
    """PostgreSQL's (and pgvector's) text of a float4 (`value` rounded to one): as
    `float8_text`, with the float4's shortest digits and fixed-point below exponent 6."""
    single = _single(value)
    if not math.isfinite(single):
        return _pg_float(single, "", 6)
    for precision in range(1, 10):  # 9 digits always read back: the shortest is below
        digits = f"{single:.{precision}g}"
        if _single(float(digits)) == single:
            break
    return _pg_float(single, digits, 6)


def _single(value: float) -> float:
    try:
        return float(struct.unpack("<f", struct.pack("<f", value))[0])
    except OverflowError:  # shorter digits of a float4 near its maximum may round past it
        return math.copysign(math.inf, value)


def _pg_float(value: float, digits: str, fixed_below: int) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    number = Decimal(digits).normalize()
    sign, mantissa, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    first = exponent + len(mantissa) - 1  # the decimal exponent of the first digit
    if -4 <= first < fixed_below:
        return format(number, "f")
    rest = "".join(map(str, mantissa[1:]))
    return (f"{'-' if sign else ''}{mantissa[0]}{'.' + rest if rest else ''}"
            f"e{'-' if first < 0 else '+'}{abs(first):02d}")


# The named Debezium types decoded whatever their column (records are named once per schema,
# then referred to by name).
_BY_NAME: Final[dict[str, _Decode]] = {
    _VARIABLE_SCALE: _Decode(python=_variable_scale_text),
    "io.debezium.data.geometry.Point": _Decode(python=point_text),
    "io.debezium.data.geometry.Geometry": _Decode(spark=_ewkb_text),
    "io.debezium.data.geometry.Geography": _Decode(spark=_ewkb_text),
    "io.debezium.data.DoubleVector": _Decode(python=vector_text),
    "io.debezium.data.FloatVector": _Decode(python=vector_text),
    "io.debezium.data.SparseDoubleVector": _Decode(python=sparse_vector_text),
}

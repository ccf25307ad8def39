"""PostgreSQL values -> Avro datums: the value converters both value formats share.

A converter turns what a `connector.pgtypes` loader returned into the datum an Avro writer
takes for the column (`ColumnCodec`: the column's Avro type and its converter, None when the
loaded value is the datum already). Integers for the date/time logical types, so naive
timestamps are never shifted by the host's time zone; the text PostgreSQL prints for a type
that is a string (`to_string`). Dates and timestamps out of 0001-01-01 .. 9999-12-31 (BC,
after 9999, +/-infinity) are clamped to that range, the one every reader of the events and the
lake holds (schemas/README.md "Column types -> Avro").

Which converter each type takes is `connector.avro.typemap`'s mapping (pgcdc's format) and
`connector.avro.debezium_types`' (Debezium's); this module maps nothing.
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
from typing import Any, NamedTuple, TypeAlias
from uuid import UUID

from connector.pgtypes.net import address_text
from connector.pgtypes.values import (
    Infinity,
    Interval,
    OutOfRange,
    Unknown,
    offset_text,
    time_text,
)

__all__ = ["EPOCH", "MAX_DATE_DAYS", "MAX_TIMESTAMPTZ_MICROS", "MAX_TIMESTAMP_MICROS",
           "MAX_TIME_MICROS", "MICROSECOND", "MIN_DATE_DAYS", "MIN_TIMESTAMPTZ_MICROS",
           "MIN_TIMESTAMP_MICROS", "AvroSchema", "ColumnCodec", "Converter", "date_days",
           "decimal_converter", "time_micros", "timestamp_micros", "timestamptz_micros",
           "to_string", "unsigned_decimal"]

AvroSchema: TypeAlias = str | dict[str, Any] | list[Any]
Converter: TypeAlias = Callable[[Any], Any]


class ColumnCodec(NamedTuple):
    """The Avro type of a column's values (not yet nullable) and how to turn values into it."""

    avro_type: Any  # str | dict | list, JSON-ready
    convert: Converter | None  # None: the loaded value is the datum already


EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
MICROSECOND = dt.timedelta(microseconds=1)
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


def to_string(value: Any) -> Any:
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


def date_days(value: Any) -> Any:
    if isinstance(value, dt.date):
        return value.toordinal() - _EPOCH_ORDINAL
    if isinstance(value, OutOfRange):  # BC or after 9999
        return min(max(value.value, MIN_DATE_DAYS), MAX_DATE_DAYS)
    if isinstance(value, Infinity):
        return _INFINITE_DATE[value]
    return value


def timestamp_micros(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return (value - (EPOCH if value.tzinfo is None else _EPOCH_UTC)) // MICROSECOND
    if isinstance(value, OutOfRange):  # BC or after 9999
        return min(max(value.value, MIN_TIMESTAMP_MICROS), MAX_TIMESTAMP_MICROS)
    if isinstance(value, Infinity):
        return _INFINITE_TIMESTAMP[value]
    return value


def timestamptz_micros(value: Any) -> Any:
    micros = timestamp_micros(value)
    if isinstance(micros, int):
        return min(max(micros, MIN_TIMESTAMPTZ_MICROS), MAX_TIMESTAMPTZ_MICROS)
    return micros


def time_micros(value: Any) -> Any:
    if isinstance(value, dt.time):
        seconds = (value.hour * 60 + value.minute) * 60 + value.second
        return seconds * 1_000_000 + value.microsecond
    if isinstance(value, OutOfRange):  # 24:00:00
        return min(value.value, MAX_TIME_MICROS)
    return value


def decimal_converter(scale: int, precision: int) -> Converter:
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


def unsigned_decimal(value: Any) -> Any:
    return Decimal(value) if isinstance(value, int) else value

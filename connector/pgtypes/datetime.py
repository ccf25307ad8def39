"""Dates and times: date, time, timetz, timestamp, timestamptz, interval.

Text format: PostgreSQL's output with ``DateStyle=ISO`` (the default; the producer sets it on
its replication connection). Any ``IntervalStyle`` is understood. timestamptz values are
returned in UTC whatever the session ``TimeZone`` printed (``+05:30``, ``-03``, ``+00:19:32``).

Values Python cannot hold are not errors: ``infinity``/``-infinity`` give
:data:`~connector.pgtypes.values.INFINITY` / ``NEG_INFINITY``; BC dates, years after 9999 and
``24:00:00`` give :class:`~connector.pgtypes.values.OutOfRange` carrying the exact value.
"""

from __future__ import annotations

import datetime as dt
import re
import struct

from . import oids
from ._base import BinaryLoader, TextLoader, bad_value
from ._struct import error, unpack_int4, unpack_int8
from .values import (
    INFINITY,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    INTERVAL_INFINITY,
    INTERVAL_NEG_INFINITY,
    NEG_INFINITY,
    Infinity,
    Interval,
    OutOfRange,
    ymd_to_days,
)

UTC = dt.UTC
_timedelta = dt.timedelta
_PG_EPOCH = dt.datetime(2000, 1, 1)
_PG_EPOCH_UTC = dt.datetime(2000, 1, 1, tzinfo=UTC)
_PG_EPOCH_ORDINAL = dt.date(2000, 1, 1).toordinal()
_MAX_ORDINAL = dt.date.max.toordinal()
_PG_EPOCH_DAYS_SINCE_1970 = 10957
_USECS_PER_SEC = 1_000_000
_USECS_PER_DAY = 86_400_000_000
_PG_EPOCH_MICROS_SINCE_1970 = _PG_EPOCH_DAYS_SINCE_1970 * _USECS_PER_DAY
_INFINITIES = {"infinity": INFINITY, "-infinity": NEG_INFINITY}

_date_fromisoformat = dt.date.fromisoformat
_date_fromordinal = dt.date.fromordinal
_datetime_fromisoformat = dt.datetime.fromisoformat
_time_fromisoformat = dt.time.fromisoformat

_DATE_RE = re.compile(r"(\d{4,})-(\d\d)-(\d\d)( BC)?")
_TIMESTAMP_RE = re.compile(
    r"(\d{4,})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?"
    r"(?:([-+])(\d\d)(?::?(\d\d))?(?::?(\d\d))?)?( BC)?"
)
_TIME_RE = re.compile(
    r"(\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?(?:([-+])(\d\d)(?::?(\d\d))?(?::?(\d\d))?)?"
)
_NOT_ISO = "expected DateStyle ISO output"


def _fraction(text: str | None) -> int:
    return int(text.ljust(6, "0")) if text else 0


def _offset(sign: str | None, hh: str | None, mm: str | None, ss: str | None) -> int:
    """Seconds east of UTC of a printed offset (0 when absent)."""
    if sign is None or hh is None:
        return 0
    seconds = int(hh) * 3600 + int(mm or 0) * 60 + int(ss or 0)
    return -seconds if sign == "-" else seconds


# ---------------------------------------------------------------------------- date


def load_date_text(data: str) -> dt.date | Infinity | OutOfRange:
    if len(data) == 10:
        try:
            return _date_fromisoformat(data)
        except ValueError:
            pass
    special = _INFINITIES.get(data)
    if special is not None:
        return special
    match = _DATE_RE.fullmatch(data)
    if match is None:
        raise bad_value("date", data, _NOT_ISO)
    year = int(match[1])
    if match[4]:
        year = 1 - year  # 1 BC is astronomical year 0
    try:
        if 1 <= year <= 9999:
            return dt.date(year, int(match[2]), int(match[3]))
        return OutOfRange("date", ymd_to_days(year, int(match[2]), int(match[3])))
    except ValueError as exc:
        raise bad_value("date", data, str(exc)) from None


def load_date_binary(data: bytes) -> dt.date | Infinity | OutOfRange:
    """date_send: int32 days since 2000-01-01; INT32_MAX/MIN are +/-infinity."""
    try:
        days: int = unpack_int4(data)[0]
    except error:
        raise bad_value("date", data, f"expected 4 bytes, got {len(data)}") from None
    ordinal = days + _PG_EPOCH_ORDINAL
    if 1 <= ordinal <= _MAX_ORDINAL:
        return _date_fromordinal(ordinal)
    if days == INT32_MAX:
        return INFINITY
    if days == INT32_MIN:
        return NEG_INFINITY
    return OutOfRange("date", days + _PG_EPOCH_DAYS_SINCE_1970)


# ---------------------------------------------------------------------------- timestamp


def _timestamp_micros(type_name: str, data: str) -> int:
    """Microseconds since 1970-01-01 (UTC for an offset) of ISO text Python cannot parse."""
    match = _TIMESTAMP_RE.fullmatch(data)
    if match is None:
        raise bad_value(type_name, data, _NOT_ISO)
    year = int(match[1])
    if match[12]:
        year = 1 - year
    hour, minute, second = int(match[4]), int(match[5]), int(match[6])
    if hour > 23 or minute > 59 or second > 59:
        raise bad_value(type_name, data, "time of day out of range")
    try:
        days = ymd_to_days(year, int(match[2]), int(match[3]))
    except ValueError as exc:
        raise bad_value(type_name, data, str(exc)) from None
    seconds = days * 86400 + hour * 3600 + minute * 60 + second
    seconds -= _offset(match[8], match[9], match[10], match[11])
    return seconds * _USECS_PER_SEC + _fraction(match[7])


def _from_micros(micros: int, tz: bool) -> dt.datetime | OutOfRange:
    """A datetime for microseconds since 1970 when Python can hold it, else OutOfRange."""
    try:
        if tz:
            return _PG_EPOCH_UTC + _timedelta(0, 0, micros - _PG_EPOCH_MICROS_SINCE_1970)
        return _PG_EPOCH + _timedelta(0, 0, micros - _PG_EPOCH_MICROS_SINCE_1970)
    except OverflowError:
        return OutOfRange("timestamptz" if tz else "timestamp", micros)


def load_timestamp_text(data: str) -> dt.datetime | Infinity | OutOfRange:
    try:
        value = _datetime_fromisoformat(data)
    except ValueError:
        special = _INFINITIES.get(data)
        if special is not None:
            return special
        return _from_micros(_timestamp_micros("timestamp", data), tz=False)
    if value.tzinfo is not None:
        raise bad_value("timestamp", data, "a timestamp without time zone has no UTC offset")
    return value


def load_timestamptz_text(data: str) -> dt.datetime | Infinity | OutOfRange:
    """Any UTC offset the session TimeZone printed; the result is in UTC."""
    try:
        value = _datetime_fromisoformat(data)
        tzinfo = value.tzinfo
        if tzinfo is UTC:
            return value
        if tzinfo is None:
            raise bad_value("timestamptz", data, "no UTC offset")
        return value.astimezone(UTC)
    except (ValueError, OverflowError):
        special = _INFINITIES.get(data)
        if special is not None:
            return special
        return _from_micros(_timestamp_micros("timestamptz", data), tz=True)


def load_timestamp_binary(data: bytes) -> dt.datetime | Infinity | OutOfRange:
    """timestamp_send: int64 microseconds since 2000-01-01; INT64_MAX/MIN are +/-infinity."""
    try:
        micros: int = unpack_int8(data)[0]
        seconds, fraction = divmod(micros, 1_000_000)  # timedelta normalises this way faster
        return _PG_EPOCH + _timedelta(0, seconds, fraction)
    except error:
        raise bad_value("timestamp", data, f"expected 8 bytes, got {len(data)}") from None
    except OverflowError:
        if micros == INT64_MAX:
            return INFINITY
        if micros == INT64_MIN:
            return NEG_INFINITY
        return OutOfRange("timestamp", micros + _PG_EPOCH_MICROS_SINCE_1970)


def load_timestamptz_binary(data: bytes) -> dt.datetime | Infinity | OutOfRange:
    """timestamptz_send: int64 microseconds since 2000-01-01 00:00 UTC; the result is in UTC."""
    try:
        micros: int = unpack_int8(data)[0]
        seconds, fraction = divmod(micros, 1_000_000)  # timedelta normalises this way faster
        return _PG_EPOCH_UTC + _timedelta(0, seconds, fraction)
    except error:
        raise bad_value("timestamptz", data, f"expected 8 bytes, got {len(data)}") from None
    except OverflowError:
        if micros == INT64_MAX:
            return INFINITY
        if micros == INT64_MIN:
            return NEG_INFINITY
        return OutOfRange("timestamptz", micros + _PG_EPOCH_MICROS_SINCE_1970)


# ---------------------------------------------------------------------------- time, timetz

_TIMETZ_HEAD = struct.Struct(">qi")
_unpack_timetz = _TIMETZ_HEAD.unpack
_zones: dict[int, dt.timezone] = {0: UTC}


def _zone(seconds_east: int) -> dt.timezone:
    zone = _zones.get(seconds_east)
    if zone is None:
        zone = _zones[seconds_east] = dt.timezone(_timedelta(seconds=seconds_east))
    return zone


def _time_24(type_name: str, data: str) -> OutOfRange:
    """``24:00:00`` (PostgreSQL allows it; Python's time does not)."""
    match = _TIME_RE.fullmatch(data)
    if (
        match is None
        or match[1] != "24"
        or match[2] != "00"
        or match[3] != "00"
        or (match[4] and int(match[4]))
    ):
        raise bad_value(type_name, data, "not a time of day")
    if type_name == "time":
        if match[5]:
            raise bad_value(type_name, data, "a time without time zone has no UTC offset")
        return OutOfRange("time", _USECS_PER_DAY)
    if not match[5]:
        raise bad_value(type_name, data, "no UTC offset")
    return OutOfRange("timetz", _USECS_PER_DAY, _offset(match[5], match[6], match[7], match[8]))


def load_time_text(data: str) -> dt.time | OutOfRange:
    try:
        value = _time_fromisoformat(data)
    except ValueError:
        return _time_24("time", data)
    if value.tzinfo is not None:
        raise bad_value("time", data, "a time without time zone has no UTC offset")
    return value


def load_timetz_text(data: str) -> dt.time | OutOfRange:
    try:
        value = _time_fromisoformat(data)
    except ValueError:
        return _time_24("timetz", data)
    if value.tzinfo is None:
        raise bad_value("timetz", data, "no UTC offset")
    return value


def _time_of_day(micros: int, tzinfo: dt.timezone | None) -> dt.time:
    seconds, fraction = divmod(micros, _USECS_PER_SEC)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return dt.time(hour, minute, second, fraction, tzinfo)


def load_time_binary(data: bytes) -> dt.time | OutOfRange:
    """time_send: int64 microseconds since midnight (86400000000 is 24:00:00)."""
    try:
        micros: int = unpack_int8(data)[0]
    except error:
        raise bad_value("time", data, f"expected 8 bytes, got {len(data)}") from None
    if 0 <= micros < _USECS_PER_DAY:
        return _time_of_day(micros, None)
    if micros == _USECS_PER_DAY:
        return OutOfRange("time", micros)
    raise bad_value("time", data, f"{micros} microseconds is not a time of day")


def load_timetz_binary(data: bytes) -> dt.time | OutOfRange:
    """timetz_send: int64 microseconds since midnight, int32 zone in seconds WEST of UTC."""
    try:
        micros, zone = _unpack_timetz(data)
    except error:
        raise bad_value("timetz", data, f"expected 12 bytes, got {len(data)}") from None
    if not -86400 < zone < 86400:
        raise bad_value("timetz", data, f"UTC offset of {-zone} seconds is out of range")
    if 0 <= micros < _USECS_PER_DAY:
        return _time_of_day(micros, _zone(-zone))
    if micros == _USECS_PER_DAY:
        return OutOfRange("timetz", micros, -zone)
    raise bad_value("timetz", data, f"{micros} microseconds is not a time of day")


# ---------------------------------------------------------------------------- interval

_INTERVAL = struct.Struct(">qii")  # microseconds, days, months
_unpack_interval = _INTERVAL.unpack
_INTERVAL_INFINITIES = {"infinity": INTERVAL_INFINITY, "-infinity": INTERVAL_NEG_INFINITY}
_HMS_RE = re.compile(r"([-+]?)(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?")
_SECONDS_RE = re.compile(r"([-+]?)(\d+)(?:\.(\d{1,6}))?")
_ISO_RE = re.compile(
    r"P(?:([-+]?\d+)Y)?(?:([-+]?\d+)M)?(?:([-+]?\d+)W)?(?:([-+]?\d+)D)?"
    r"(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+(?:\.\d{1,6})?)S)?)?"
)
_UNIT_MICROS = {"hour": 3_600_000_000, "min": 60_000_000, "sec": _USECS_PER_SEC}
_UNITS = {
    "year": "year", "years": "year", "mon": "mon", "mons": "mon", "day": "day", "days": "day",
    "hour": "hour", "hours": "hour", "min": "min", "mins": "min", "sec": "sec", "secs": "sec",
}  # fmt: skip


def _hms(text: str) -> int:
    """``[-]HH:MM:SS[.ffffff]`` (hours may exceed 24) -> signed microseconds."""
    match = _HMS_RE.fullmatch(text)
    if match is None:
        raise ValueError(f"bad time field {text!r}")
    micros = (
        int(match[2]) * 3600 + int(match[3]) * 60 + int(match[4])
    ) * _USECS_PER_SEC + _fraction(match[5])
    return -micros if match[1] == "-" else micros


def _seconds(text: str) -> int:
    """``[-]S[.ffffff]`` -> signed microseconds."""
    match = _SECONDS_RE.fullmatch(text)
    if match is None:
        raise ValueError(f"bad seconds field {text!r}")
    micros = int(match[2]) * _USECS_PER_SEC + _fraction(match[3])
    return -micros if match[1] == "-" else micros


# IntervalStyle postgres as PostgreSQL prints it (the default): one regular expression
_POSTGRES_RE = re.compile(
    r"(?:([-+]?\d+) years? ?)?(?:([-+]?\d+) mons? ?)?(?:([-+]?\d+) days? ?)?"
    r"(?:([-+]?)(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?)?"
)


def _interval_postgres_fast(data: str) -> Interval | None:
    match = _POSTGRES_RE.fullmatch(data)
    if match is None or data[-1:] == " ":
        return None
    years, mons, days, sign, hours, minutes, seconds, fraction = match.groups()
    micros = 0
    if hours is not None:
        micros = (int(hours) * 3600 + int(minutes) * 60 + int(seconds)) * _USECS_PER_SEC
        if fraction:
            micros += int(fraction.ljust(6, "0"))
        if sign == "-":
            micros = -micros
    months = int(mons) if mons else 0
    if years:
        months += int(years) * 12
    return Interval(months, int(days) if days else 0, micros)


def _interval_postgres(tokens: list[str]) -> Interval:
    """IntervalStyle postgres: ``1 year -2 mons +3 days -04:05:06.7``."""
    months = days = micros = 0
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if ":" in token:
            if i != len(tokens) - 1:
                raise ValueError("the time field must come last")
            micros = _hms(token)
            break
        unit = _UNITS.get(tokens[i + 1]) if i + 1 < len(tokens) else None
        if unit == "year":
            months += int(token) * 12
        elif unit == "mon":
            months += int(token)
        elif unit == "day":
            days += int(token)
        else:
            raise ValueError(f"unexpected {token!r}")
        i += 2
    return Interval(months, days, micros)


def _interval_verbose(tokens: list[str]) -> Interval:
    """IntervalStyle postgres_verbose: ``@ 1 year 2 mons -3 days 4 hours 5.5 secs ago``."""
    ago = tokens[-1] == "ago"
    if ago:
        tokens = tokens[:-1]
    months = days = micros = 0
    if tokens != ["@", "0"]:
        if len(tokens) % 2 != 1:
            raise ValueError("expected value/unit pairs")
        for value, unit_text in zip(tokens[1::2], tokens[2::2], strict=True):
            unit = _UNITS.get(unit_text)
            if unit == "year":
                months += int(value) * 12
            elif unit == "mon":
                months += int(value)
            elif unit == "day":
                days += int(value)
            elif unit == "sec":
                micros += _seconds(value)
            elif unit is not None:
                micros += int(value) * _UNIT_MICROS[unit]
            else:
                raise ValueError(f"unknown unit {unit_text!r}")
    if ago:
        return Interval(-months, -days, -micros)
    return Interval(months, days, micros)


def _interval_sql_standard(tokens: list[str]) -> Interval:
    """IntervalStyle sql_standard: ``1-2``, ``3 4:05:06``, ``-4:05:06``, ``+1-2 -3 +4:05:06``."""
    mixed = len(tokens) == 3 and all(token[0] in "+-" for token in tokens)
    sign = 1
    if not mixed and tokens[0][0] in "+-":
        sign = -1 if tokens[0][0] == "-" else 1
        tokens = [tokens[0][1:], *tokens[1:]]
    months = days = micros = 0
    for token in tokens:
        field_sign = 1
        body = token
        if mixed:
            field_sign = -1 if token[0] == "-" else 1
            body = token[1:]
        if ":" in body:
            micros = field_sign * _hms(body)
        elif "-" in body:
            years, _, mons = body.partition("-")
            months = field_sign * (int(years) * 12 + int(mons))
        else:
            days = field_sign * int(body)
    return Interval(sign * months, sign * days, sign * micros)


def _interval_iso(data: str) -> Interval:
    """IntervalStyle iso_8601: ``P1Y-2M3DT-4H5M-6.5S`` (each field signed on its own)."""
    match = _ISO_RE.fullmatch(data)
    if match is None or data in ("P", "PT") or data.endswith("T"):
        raise ValueError("not an ISO-8601 duration")
    years, months, weeks, days, hours, minutes, seconds = match.groups()
    return Interval(
        int(years or 0) * 12 + int(months or 0),
        int(weeks or 0) * 7 + int(days or 0),
        int(hours or 0) * 3_600_000_000
        + int(minutes or 0) * 60_000_000
        + (_seconds(seconds) if seconds else 0),
    )


def load_interval_text(data: str) -> Interval:
    """Any IntervalStyle: postgres (the default), postgres_verbose, sql_standard, iso_8601."""
    if data:
        fast = _interval_postgres_fast(data)
        if fast is not None:
            return fast
    try:
        if data.startswith("P"):
            return _interval_iso(data)
        tokens = data.split()
        if not tokens:
            raise ValueError("empty")
        if tokens[0] == "@":
            return _interval_verbose(tokens)
        special = _INTERVAL_INFINITIES.get(data)
        if special is not None:
            return special
        if any(token.isalpha() for token in tokens):
            return _interval_postgres(tokens)
        return _interval_sql_standard(tokens)
    except (ValueError, IndexError) as exc:
        raise bad_value("interval", data, str(exc)) from None


def load_interval_binary(data: bytes) -> Interval:
    """interval_send: int64 microseconds, int32 days, int32 months."""
    try:
        micros, days, months = _unpack_interval(data)
    except error:
        raise bad_value("interval", data, f"expected 16 bytes, got {len(data)}") from None
    return Interval(months, days, micros)


TEXT_LOADERS: dict[int, TextLoader] = {
    oids.DATE: load_date_text,
    oids.TIME: load_time_text,
    oids.TIMETZ: load_timetz_text,
    oids.TIMESTAMP: load_timestamp_text,
    oids.TIMESTAMPTZ: load_timestamptz_text,
    oids.INTERVAL: load_interval_text,
}

BINARY_LOADERS: dict[int, BinaryLoader] = {
    oids.DATE: load_date_binary,
    oids.TIME: load_time_binary,
    oids.TIMETZ: load_timetz_binary,
    oids.TIMESTAMP: load_timestamp_binary,
    oids.TIMESTAMPTZ: load_timestamptz_binary,
    oids.INTERVAL: load_interval_binary,
}

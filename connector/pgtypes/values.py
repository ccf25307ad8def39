"""The Python values loaders return besides the standard library's own types.

* :class:`Unknown` -- a value of a type pgtypes has no loader for, kept verbatim and flagged.
* :class:`Infinity` -- PostgreSQL's ``infinity`` / ``-infinity`` of date, timestamp, timestamptz.
* :class:`OutOfRange` -- a date/time PostgreSQL accepts but :mod:`datetime` cannot hold
  (BC dates, years after 9999, ``24:00:00``), as the exact integer the Avro encoding uses.
* :class:`Interval` -- PostgreSQL's interval: months, days and microseconds kept apart.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import Enum
from typing import Literal, NamedTuple

__all__ = [
    "INFINITY",
    "INTERVAL_INFINITY",
    "INTERVAL_NEG_INFINITY",
    "NEG_INFINITY",
    "Infinity",
    "Interval",
    "OutOfRange",
    "Unknown",
]

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


@dataclass(frozen=True, slots=True)
class Unknown:
    """A value whose type has no loader (an unregistered OID, a composite, a range, ...).

    ``raw`` is the value exactly as PostgreSQL sent it: ``str`` in the text format, ``bytes``
    (the type's send representation) in the binary format. Nothing is guessed or lost.
    """

    type_oid: int
    raw: str | bytes

    @property
    def binary(self) -> bool:
        return isinstance(self.raw, bytes)


class Infinity(Enum):
    """``infinity`` / ``-infinity`` of date, timestamp and timestamptz.

    Dedicated values rather than ``datetime.max``/``min``, which are ordinary PostgreSQL
    timestamps. In Avro they become the last/first instant of 0001-01-01 .. 9999-12-31 (see
    ``connector.avro.datums``).
    """

    POSITIVE = "infinity"
    NEGATIVE = "-infinity"

    def __str__(self) -> str:
        return self.value


INFINITY = Infinity.POSITIVE
NEG_INFINITY = Infinity.NEGATIVE

OutOfRangeKind = Literal["date", "time", "timetz", "timestamp", "timestamptz"]

_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_DAYS_PER_400Y = 146097
_USECS_PER_DAY = 86_400_000_000


def _days_to_ymd(days: int) -> tuple[int, int, int]:
    """Days since 1970-01-01 -> (astronomical year, month, day), proleptic Gregorian, any year."""
    ordinal = days + _EPOCH_ORDINAL
    shift = 0
    if ordinal < 1:
        shift = (-ordinal) // _DAYS_PER_400Y + 1
    elif ordinal > dt.date.max.toordinal():
        shift = -((ordinal - dt.date.max.toordinal()) // _DAYS_PER_400Y + 1)
    d = dt.date.fromordinal(ordinal + shift * _DAYS_PER_400Y)
    return d.year - 400 * shift, d.month, d.day


def ymd_to_days(year: int, month: int, day: int) -> int:
    """(astronomical year: 0 is 1 BC, month, day) -> days since 1970-01-01, any year.

    Raises ``ValueError`` for an impossible month/day.
    """
    shift = 0
    if year < 1:
        shift = (1 - year) // 400 + 1
    elif year > 9999:
        shift = -((year - 9999) // 400 + 1)
    ordinal = dt.date(year + 400 * shift, month, day).toordinal()
    return ordinal - shift * _DAYS_PER_400Y - _EPOCH_ORDINAL


def _date_text(days: int) -> tuple[str, str]:
    year, month, day = _days_to_ymd(days)
    bc = year <= 0
    return f"{(1 - year) if bc else year:04d}-{month:02d}-{day:02d}", " BC" if bc else ""


def time_text(micros: int) -> str:
    seconds, fraction = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    text = f"{hour:02d}:{minute:02d}:{second:02d}"
    return f"{text}.{fraction:06d}".rstrip("0") if fraction else text


def offset_text(seconds_east: int) -> str:
    """A UTC offset as PostgreSQL prints it: ``+05``, ``-03:30``, ``+00:19:32``."""
    sign = "-" if seconds_east < 0 else "+"
    minutes, second = divmod(abs(seconds_east), 60)
    hour, minute = divmod(minutes, 60)
    text = f"{sign}{hour:02d}"
    if minute or second:
        text += f":{minute:02d}"
    if second:
        text += f":{second:02d}"
    return text


@dataclass(frozen=True, slots=True)
class OutOfRange:
    """A date/time value PostgreSQL accepts but Python's :mod:`datetime` cannot represent.

    ``value`` is exact (the Avro encoding clamps it to 0001-01-01 .. 9999-12-31, see
    ``connector.avro.datums``):

    * ``date``: days since 1970-01-01 (proleptic Gregorian, like PostgreSQL)
    * ``timestamp`` / ``timestamptz``: microseconds since 1970-01-01 00:00:00 (UTC for tz)
    * ``time`` / ``timetz``: microseconds since midnight (only ``24:00:00`` gets here)

    ``utc_offset`` (seconds east of UTC) is set for ``timetz`` only. ``str()`` gives the
    value as PostgreSQL prints it with ``DateStyle=ISO`` and ``TimeZone=UTC``.
    """

    kind: OutOfRangeKind
    value: int
    utc_offset: int | None = None

    def __str__(self) -> str:
        if self.kind == "date":
            date, era = _date_text(self.value)
            return date + era
        if self.kind in ("time", "timetz"):
            text = time_text(self.value)
            return text if self.utc_offset is None else text + offset_text(self.utc_offset)
        days, micros = divmod(self.value, _USECS_PER_DAY)
        date, era = _date_text(days)
        zone = "+00" if self.kind == "timestamptz" else ""
        return f"{date} {time_text(micros)}{zone}{era}"


def _tdiv(a: int, b: int) -> tuple[int, int]:
    """C-style division: quotient truncated toward zero, remainder with the dividend's sign."""
    q = abs(a) // b
    q = -q if a < 0 else q
    return q, a - q * b


def _seconds_text(sec: int, fsec: int) -> str:
    text = str(abs(sec))
    if fsec:
        text += f".{abs(fsec):06d}".rstrip("0")
    return text


class Interval(NamedTuple):
    """A PostgreSQL interval, exactly: its three independent fields.

    ``datetime.timedelta`` cannot hold it (a month is not a fixed number of days);
    :meth:`to_timedelta` converts approximately, as PostgreSQL's own ``extract(epoch)`` does.
    PostgreSQL 17's infinite intervals are :data:`INTERVAL_INFINITY` / :data:`INTERVAL_NEG_INFINITY`
    (all fields at their maximum / minimum, as PostgreSQL stores them).
    """

    months: int
    days: int
    microseconds: int

    @property
    def is_infinite(self) -> bool:
        return self in (INTERVAL_INFINITY, INTERVAL_NEG_INFINITY)

    def isoformat(self) -> str:
        """The ISO-8601 duration, exactly as PostgreSQL prints it with ``IntervalStyle=iso_8601``.

        Each field keeps its own sign (``P1Y-2M3DT-4H``), as PostgreSQL allows;
        infinite intervals give ``infinity`` / ``-infinity``.
        """
        if self == INTERVAL_INFINITY:
            return "infinity"
        if self == INTERVAL_NEG_INFINITY:
            return "-infinity"
        year, mon = _tdiv(self.months, 12)
        hour, rest = _tdiv(self.microseconds, 3_600_000_000)
        minute, rest = _tdiv(rest, 60_000_000)
        sec, fsec = _tdiv(rest, 1_000_000)
        if not (year or mon or self.days or hour or minute or sec or fsec):
            return "PT0S"
        parts = ["P"]
        for value, unit in ((year, "Y"), (mon, "M"), (self.days, "D")):
            if value:
                parts.append(f"{value}{unit}")
        if hour or minute or sec or fsec:
            parts.append("T")
            for value, unit in ((hour, "H"), (minute, "M")):
                if value:
                    parts.append(f"{value}{unit}")
            if sec or fsec:
                parts.append(("-" if sec < 0 or fsec < 0 else "") + _seconds_text(sec, fsec) + "S")
        return "".join(parts)

    def to_timedelta(self) -> dt.timedelta:
        """Approximately, counting a month as 30 days (PostgreSQL's ``justify_days`` rule).

        Raises ``OverflowError`` for infinite or too large intervals.
        """
        if self.is_infinite:
            raise OverflowError("an infinite interval has no timedelta")
        return dt.timedelta(days=self.months * 30 + self.days, microseconds=self.microseconds)

    def __str__(self) -> str:
        return self.isoformat()


INTERVAL_INFINITY = Interval(INT32_MAX, INT32_MAX, INT64_MAX)
INTERVAL_NEG_INFINITY = Interval(INT32_MIN, INT32_MIN, INT64_MIN)

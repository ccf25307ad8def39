"""PostgreSQL TimestampTz on the wire: signed microseconds since 2000-01-01 00:00:00 UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
# Seconds between the Unix epoch and PostgreSQL's epoch.
_PG_EPOCH_UNIX = 946_684_800
_PG_EPOCH_UNIX_MICROS = _PG_EPOCH_UNIX * 1_000_000


def pg_timestamp_to_datetime(micros: int) -> datetime:
    """Microseconds since 2000-01-01 to an aware UTC datetime.

    Raises OverflowError for values outside datetime's range (years 1-9999), which PostgreSQL
    only produces for 'infinity'-like sentinels, never for commit or prepare times.
    """
    return PG_EPOCH + timedelta(microseconds=micros)


def pg_timestamp_to_ms(micros: int) -> int:
    """Microseconds since 2000-01-01 UTC as milliseconds since the Unix epoch (the events'
    ``ts_ms``); floors, so a commit never appears later than it happened."""
    return (micros + _PG_EPOCH_UNIX_MICROS) // 1000


def datetime_to_pg_timestamp(value: datetime) -> int:
    """An aware datetime to microseconds since 2000-01-01 (naive values are taken as UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - PG_EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def unix_to_pg_timestamp(seconds: float) -> int:
    """`time.time()` to a wire timestamp, e.g. the client clock of a standby status update."""
    return round((seconds - _PG_EPOCH_UNIX) * 1_000_000)

"""date, time, timetz, timestamp, timestamptz, interval."""

from __future__ import annotations

import datetime as dt
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.errors import DecodeError
from connector.pgtypes import (
    INFINITY,
    INTERVAL_INFINITY,
    INTERVAL_NEG_INFINITY,
    NEG_INFINITY,
    Interval,
    OutOfRange,
)
from connector.pgtypes.datetime import (
    load_date_binary,
    load_date_text,
    load_interval_binary,
    load_interval_text,
    load_time_binary,
    load_time_text,
    load_timestamp_binary,
    load_timestamp_text,
    load_timestamptz_binary,
    load_timestamptz_text,
    load_timetz_binary,
    load_timetz_text,
)

UTC = dt.UTC
PG_EPOCH_MICROS = 946_684_800_000_000  # 2000-01-01 in microseconds since 1970
# PostgreSQL's range: 4713-11-24 BC .. 294276-12-31 (timestamps), in microseconds since 2000
MIN_TS = -211_813_488_000_000_000
MAX_TS = 9_223_371_331_199_999_999


def _int8(value: int) -> bytes:
    return struct.pack(">q", value)


# ---------------------------------------------------------------------------- date


def test_date() -> None:
    assert load_date_text("2024-02-29") == dt.date(2024, 2, 29)
    assert load_date_binary(struct.pack(">i", 0)) == dt.date(2000, 1, 1)
    assert load_date_binary(struct.pack(">i", -730119)) == dt.date(1, 1, 1)
    assert load_date_text("infinity") is INFINITY
    assert load_date_text("-infinity") is NEG_INFINITY
    assert load_date_binary(struct.pack(">i", 2**31 - 1)) is INFINITY
    assert load_date_binary(struct.pack(">i", -(2**31))) is NEG_INFINITY


def test_bc_and_far_future_dates() -> None:
    bc = load_date_text("0044-03-15 BC")
    assert isinstance(bc, OutOfRange) and bc.kind == "date"
    assert str(bc) == "0044-03-15 BC"
    # 1 BC (astronomical year 0) is a leap year; 1 BC Dec 31 is the day before 0001-01-01
    assert load_date_text("0001-12-31 BC") == OutOfRange("date", -719163)
    assert load_date_text("0001-02-29 BC").value == -719163 - 306  # type: ignore[union-attr]
    assert load_date_text("10000-01-01") == OutOfRange("date", 2932897)
    assert str(OutOfRange("date", 2932897)) == "10000-01-01"
    assert load_date_binary(struct.pack(">i", -730120)) == OutOfRange("date", -719163)
    with pytest.raises(DecodeError, match="day is out of range"):
        load_date_text("0002-02-29 BC")  # 2 BC is not a leap year


@pytest.mark.parametrize("text", ["", "2024-13-01", "01/02/2024", "Tue Jan 02 2024", "20240"])
def test_date_malformed(text: str) -> None:
    with pytest.raises(DecodeError, match="date"):
        load_date_text(text)


@given(st.integers(-2451545, 2147483494 - 2451545))  # 4713-01-01 BC .. 5874897-12-31
def test_date_binary_and_text_agree_over_postgresql_range(days: int) -> None:
    from_binary = load_date_binary(struct.pack(">i", days))
    text = from_binary.isoformat() if isinstance(from_binary, dt.date) else str(from_binary)
    assert load_date_text(text) == from_binary


# ---------------------------------------------------------------------------- timestamps


def test_timestamp() -> None:
    value = dt.datetime(2024, 2, 29, 12, 34, 56, 123456)
    assert load_timestamp_text("2024-02-29 12:34:56.123456") == value
    assert load_timestamp_text("2024-02-29 12:34:56.5") == value.replace(microsecond=500000)
    assert load_timestamp_binary(_int8(0)) == dt.datetime(2000, 1, 1)
    assert load_timestamp_text("infinity") is INFINITY
    assert load_timestamp_binary(_int8(2**63 - 1)) is INFINITY
    assert load_timestamp_binary(_int8(-(2**63))) is NEG_INFINITY
    with pytest.raises(DecodeError, match="has no UTC offset"):
        load_timestamp_text("2024-02-29 12:34:56+00")
    with pytest.raises(DecodeError, match="DateStyle ISO"):
        load_timestamp_text("Thu Feb 29 12:34:56 2024")


def test_timestamptz_offsets_become_utc() -> None:
    expected = dt.datetime(2024, 1, 1, 21, 34, 5, 500000, tzinfo=UTC)
    for text in [
        "2024-01-01 21:34:05.5+00",
        "2024-01-02 03:04:05.5+05:30",
        "2024-01-01 18:04:05.5-03:30",
        "2024-01-01 21:53:37.5+00:19:32",
        "2024-01-01 11:34:05.5-10",
    ]:
        value = load_timestamptz_text(text)
        assert value == expected
        assert value.tzinfo is UTC  # type: ignore[union-attr]
    assert load_timestamptz_binary(_int8(0)) == dt.datetime(2000, 1, 1, tzinfo=UTC)
    assert load_timestamptz_text("-infinity") is NEG_INFINITY
    with pytest.raises(DecodeError, match="no UTC offset"):
        load_timestamptz_text("2024-01-01 21:34:05")


def test_timestamps_beyond_python() -> None:
    bc = load_timestamp_text("0044-03-15 12:00:00.25 BC")
    assert isinstance(bc, OutOfRange)
    assert str(bc) == "0044-03-15 12:00:00.25 BC"
    tz = load_timestamptz_text("0044-03-15 17:30:00.25+05:30 BC")
    assert tz == OutOfRange("timestamptz", bc.value)
    assert str(tz) == "0044-03-15 12:00:00.25+00 BC"
    # a value Python holds in its own zone but not in UTC
    assert load_timestamptz_text("0001-01-01 05:00:00+05:30") == OutOfRange(
        "timestamptz",
        load_timestamp_text("0001-12-31 23:30:00 BC").value,  # type: ignore[union-attr]
    )
    assert load_timestamptz_text("9999-12-31 20:00:00-05") == OutOfRange(
        "timestamptz",
        load_timestamp_text("10000-01-01 01:00:00").value,  # type: ignore[union-attr]
    )
    far = load_timestamp_binary(_int8(MAX_TS))
    assert far == OutOfRange("timestamp", MAX_TS + PG_EPOCH_MICROS)
    assert str(far) == "294276-12-31 23:59:59.999999"
    assert load_timestamp_text(str(far)) == far


@given(st.integers(MIN_TS, MAX_TS))
def test_timestamp_text_and_binary_agree(micros: int) -> None:
    from_binary = load_timestamp_binary(_int8(micros))
    if isinstance(from_binary, dt.datetime):
        text = from_binary.isoformat(" ")
        assert (from_binary - dt.datetime(2000, 1, 1)) // dt.timedelta(microseconds=1) == micros
    else:
        assert isinstance(from_binary, OutOfRange)
        assert from_binary.value == micros + PG_EPOCH_MICROS
        text = str(from_binary)
    assert load_timestamp_text(text) == from_binary


@given(st.integers(MIN_TS, MAX_TS), st.integers(-15 * 3600 - 59 * 60, 15 * 3600 + 59 * 60))
def test_timestamptz_text_in_any_offset(micros: int, offset: int) -> None:
    from_binary = load_timestamptz_binary(_int8(micros))
    # print the instant in a zone `offset` seconds east, as PostgreSQL would
    local = OutOfRange("timestamp", micros + PG_EPOCH_MICROS + offset * 1_000_000)
    date_time, _, era = str(local).partition(" BC")
    sign = "-" if offset < 0 else "+"
    hours, rest = divmod(abs(offset), 3600)
    text = f"{date_time}{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    text += " BC" if " BC" in str(local) else ""
    assert load_timestamptz_text(text) == from_binary


# ---------------------------------------------------------------------------- time, timetz


def test_time() -> None:
    assert load_time_text("12:34:56.5") == dt.time(12, 34, 56, 500000)
    assert load_time_binary(_int8(0)) == dt.time(0)
    assert load_time_binary(_int8(86_399_999_999)) == dt.time(23, 59, 59, 999999)
    assert load_time_text("24:00:00") == load_time_binary(_int8(86_400_000_000))
    assert str(load_time_text("24:00:00")) == "24:00:00"
    with pytest.raises(DecodeError, match="not a time of day"):
        load_time_text("24:00:01")
    with pytest.raises(DecodeError, match="not a time of day"):
        load_time_binary(_int8(86_400_000_001))
    with pytest.raises(DecodeError):
        load_time_binary(_int8(-1))
    with pytest.raises(DecodeError, match="no UTC offset"):
        load_time_text("12:00:00+05")


def test_timetz() -> None:
    zone = dt.timezone(dt.timedelta(hours=5, minutes=30))
    assert load_timetz_text("12:34:56.5+05:30") == dt.time(12, 34, 56, 500000, zone)
    # binary zone is in seconds WEST of UTC
    data = struct.pack(">qi", 45_296_500_000, -19800)
    assert load_timetz_binary(data) == dt.time(12, 34, 56, 500000, zone)
    assert load_timetz_binary(data).utcoffset() == dt.timedelta(hours=5, minutes=30)  # type: ignore[union-attr]
    assert load_timetz_binary(struct.pack(">qi", 0, 0)).tzinfo is UTC  # type: ignore[union-attr]
    seconds = load_timetz_text("08:00:00-15:59:59")
    assert seconds.utcoffset() == -dt.timedelta(hours=15, minutes=59, seconds=59)  # type: ignore[union-attr]
    end = load_timetz_text("24:00:00-03")
    assert end == load_timetz_binary(struct.pack(">qi", 86_400_000_000, 10800))
    assert str(end) == "24:00:00-03"
    with pytest.raises(DecodeError, match="no UTC offset"):
        load_timetz_text("12:00:00")
    with pytest.raises(DecodeError, match="offset"):
        load_timetz_binary(struct.pack(">qi", 0, 86400))
    with pytest.raises(DecodeError, match="12 bytes"):
        load_timetz_binary(b"\x00" * 8)


# ---------------------------------------------------------------------------- interval


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # IntervalStyle postgres
        ("00:00:00", Interval(0, 0, 0)),
        ("1 year 2 mons 3 days 04:05:06.789", Interval(14, 3, 14_706_789_000)),
        ("-1 years -2 mons +3 days -04:05:06", Interval(-14, 3, -14_706_000_000)),
        ("1 day -00:00:01", Interval(0, 1, -1_000_000)),
        ("-00:00:00.000001", Interval(0, 0, -1)),
        ("2562047788:00:54.775807", Interval(0, 0, 2**63 - 1)),
        ("-2562047788:00:54.775808", Interval(0, 0, -(2**63))),
        ("-178956970 years -8 mons", Interval(-(2**31), 0, 0)),
        # postgres_verbose
        ("@ 0", Interval(0, 0, 0)),
        ("@ 1 year 2 mons -3 days 4 hours 5 mins 6.5 secs ago", Interval(-14, 3, -14_706_500_000)),
        ("@ 1 day 1 sec", Interval(0, 1, 1_000_000)),
        ("@ 0.5 secs ago", Interval(0, 0, -500_000)),
        # sql_standard
        ("0", Interval(0, 0, 0)),
        ("1-2", Interval(14, 0, 0)),
        ("-1-2", Interval(-14, 0, 0)),
        ("3 4:05:06.5", Interval(0, 3, 14_706_500_000)),
        ("-3 4:05:06", Interval(0, -3, -14_706_000_000)),
        ("-0:00:01", Interval(0, 0, -1_000_000)),
        ("+1-2 -3 +4:05:06", Interval(14, -3, 14_706_000_000)),
        ("-0-1 +1 -0:00:00.5", Interval(-1, 1, -500_000)),
        # iso_8601
        ("PT0S", Interval(0, 0, 0)),
        ("P1Y2M3DT4H5M6.789S", Interval(14, 3, 14_706_789_000)),
        ("P-1Y-2M3DT-4H-5M-6S", Interval(-14, 3, -14_706_000_000)),
        ("PT-0.5S", Interval(0, 0, -500_000)),
        ("P2W", Interval(0, 14, 0)),
        # PostgreSQL 17+
        ("infinity", INTERVAL_INFINITY),
        ("-infinity", INTERVAL_NEG_INFINITY),
    ],
)
def test_interval_text(text: str, expected: Interval) -> None:
    assert load_interval_text(text) == expected


@pytest.mark.parametrize(
    "text", ["", "P", "PT", "1 fortnight", "1 year 2", "@ 1", "12:00", "P1Y2", "1 day 1 day x"]
)
def test_interval_text_malformed(text: str) -> None:
    with pytest.raises(DecodeError, match="interval"):
        load_interval_text(text)


def test_interval_binary() -> None:
    assert load_interval_binary(struct.pack(">qii", -1, 2, -3)) == Interval(-3, 2, -1)
    with pytest.raises(DecodeError, match="16 bytes"):
        load_interval_binary(b"\x00" * 12)


def test_interval_helpers() -> None:
    assert Interval(14, 3, -1).to_timedelta() == dt.timedelta(days=14 * 30 + 3, microseconds=-1)
    assert INTERVAL_INFINITY.is_infinite and INTERVAL_NEG_INFINITY.isoformat() == "-infinity"
    with pytest.raises(OverflowError):
        INTERVAL_INFINITY.to_timedelta()
    assert str(Interval(0, 0, 0)) == "PT0S"
    assert Interval(-1, 0, 0).isoformat() == "P-1M"
    assert Interval(0, 0, -500_000).isoformat() == "PT-0.5S"


ints32 = st.integers(-(2**31), 2**31 - 1)


@given(ints32, ints32, st.integers(-(2**63), 2**63 - 1))
def test_interval_isoformat_round_trips(months: int, days: int, micros: int) -> None:
    value = Interval(months, days, micros)
    assert load_interval_text(value.isoformat()) == value

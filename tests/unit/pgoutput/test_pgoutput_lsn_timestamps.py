"""LSN text form and PostgreSQL-epoch timestamps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.pgoutput import (
    PG_EPOCH,
    datetime_to_pg_timestamp,
    lsn_to_str,
    pg_timestamp_to_datetime,
    pg_timestamp_to_ms,
    str_to_lsn,
    unix_to_pg_timestamp,
)


@pytest.mark.parametrize(("value", "text"), [
    (0, "0/0"), (0x16B3748, "0/16B3748"), (0x1_0000_0000, "1/0"),
    (2**64 - 1, "FFFFFFFF/FFFFFFFF"), (0xA_0000_00FF, "A/FF"),
])
def test_lsn_text(value: int, text: str) -> None:
    assert lsn_to_str(value) == text
    assert str_to_lsn(text) == value
    assert str_to_lsn(text.lower()) == value


@given(st.integers(0, 2**64 - 1))
def test_lsn_round_trip(value: int) -> None:
    assert str_to_lsn(lsn_to_str(value)) == value


@pytest.mark.parametrize("bad", ["", "16B3748", "0/", "/1", "x/1", "1/2/3", "123456789/0",
                                 "0/-1"])
def test_str_to_lsn_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        str_to_lsn(bad)


@pytest.mark.parametrize("bad", [-1, 2**64])
def test_lsn_to_str_rejects_out_of_range(bad: int) -> None:
    with pytest.raises(ValueError):
        lsn_to_str(bad)


def test_timestamp_epoch_and_known_value() -> None:
    assert pg_timestamp_to_datetime(0) == datetime(2000, 1, 1, tzinfo=UTC) == PG_EPOCH
    # 2024-03-01 12:34:56.789012 UTC
    dt = datetime(2024, 3, 1, 12, 34, 56, 789012, tzinfo=UTC)
    micros = datetime_to_pg_timestamp(dt)
    assert micros == 762_611_696_789_012
    assert pg_timestamp_to_datetime(micros) == dt
    assert pg_timestamp_to_datetime(-1) == PG_EPOCH - timedelta(microseconds=1)


def test_timestamp_to_unix_ms() -> None:
    assert pg_timestamp_to_ms(0) == 946_684_800_000  # 2000-01-01 UTC
    assert pg_timestamp_to_ms(1_500) == 946_684_800_001
    assert pg_timestamp_to_ms(-1_000) == 946_684_799_999
    assert pg_timestamp_to_ms(-1) == 946_684_799_999  # floors, also before the epoch


def test_timestamp_other_zones_and_naive() -> None:
    plus2 = datetime(2000, 1, 1, 2, tzinfo=timezone(timedelta(hours=2)))
    assert datetime_to_pg_timestamp(plus2) == 0
    assert datetime_to_pg_timestamp(datetime(2000, 1, 1, 0, 0, 1)) == 1_000_000


def test_unix_clock() -> None:
    assert unix_to_pg_timestamp(946_684_800.0) == 0
    assert unix_to_pg_timestamp(946_684_801.5) == 1_500_000


@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                    timezones=st.just(UTC)))
def test_timestamp_round_trip(dt: datetime) -> None:
    assert pg_timestamp_to_datetime(datetime_to_pg_timestamp(dt)) == dt

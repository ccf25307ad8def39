"""The PostgreSQL-vs-lake comparison bridges representations only."""

from __future__ import annotations

import datetime as dt

from spark_jobs.verify import normalize


def test_a_time_compares_as_the_lakes_microseconds_since_midnight() -> None:
    assert normalize(dt.time(13, 14, 15, 123456)) == 47_655_123_456
    assert normalize(47_655_123_456) == 47_655_123_456
    zoned = dt.time(10, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert normalize(zoned) == zoned  # timetz (a string in the lake) is left as it is

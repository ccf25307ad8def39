"""Loaded values as JSON (pgcdc decode --typed)."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal
from ipaddress import ip_interface
from uuid import UUID

from connector.pgtypes import INFINITY, Interval, OutOfRange, Unknown, to_jsonable


def test_to_jsonable() -> None:
    values = [
        None, True, 5, "x", 1.5, math.nan, math.inf, -math.inf, Decimal("1E-7"), Decimal("NaN"),
        dt.datetime(2024, 1, 1, tzinfo=dt.UTC), dt.date(2024, 1, 1), dt.time(1, 2),
        Interval(1, 2, 3), b"\x00\xff", Unknown(1, "t"), Unknown(1, b"\x01"), INFINITY,
        OutOfRange("date", -800000), UUID(int=0), ip_interface("10.0.0.1/8"), [[1, None], [2, 3]],
    ]  # fmt: skip
    out = to_jsonable(values)
    json.dumps(out, allow_nan=False)
    assert out == [
        None, True, 5, "x", 1.5, "NaN", "Infinity", "-Infinity", "0.0000001", "NaN",
        "2024-01-01T00:00:00+00:00", "2024-01-01", "01:02:00", "P1M2DT0.000003S", "\\x00ff",
        {"unknown_type": 1, "text": "t"}, {"unknown_type": 1, "binary": "01"}, "infinity",
        "0222-09-04 BC", "00000000-0000-0000-0000-000000000000", "10.0.0.1/8", [[1, None], [2, 3]],
    ]  # fmt: skip

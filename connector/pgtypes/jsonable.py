"""Loaded values as JSON values, for humans and tools (``pgcdc decode --typed``).

Exact where JSON is not: numeric as a string of its digits, floats' NaN and infinities as
strings, bytea as PostgreSQL's ``\\x`` hex, dates and times in ISO-8601, intervals as ISO-8601
durations, values of unknown types as ``{"unknown_type": oid, "text": ...}`` (or
``"binary": hex``).
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

from .values import Infinity, Interval, OutOfRange, Unknown

__all__ = ["to_jsonable"]

_SCALARS = (str, int, bool)  # bool is an int too


def to_jsonable(value: Any) -> Any:
    """``value`` (anything a loader returns) as something ``json.dumps`` writes exactly."""
    if value is None or isinstance(value, _SCALARS):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, list):
        return [to_jsonable(item) for item in value]
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, Interval):
        return value.isoformat()
    if isinstance(value, bytes):
        return "\\x" + value.hex()
    if isinstance(value, Unknown):
        raw = value.raw
        if isinstance(raw, str):
            return {"unknown_type": value.type_oid, "text": raw}
        return {"unknown_type": value.type_oid, "binary": raw.hex()}
    if isinstance(value, Infinity | OutOfRange):
        return str(value)
    return str(value)  # UUID, ipaddress objects: their PostgreSQL text

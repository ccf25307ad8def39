"""`pgcdc decode --typed`: column values converted by `connector.pgtypes` loaders, as JSON.

Tracks Relation (column type OIDs) and Type messages of the capture, picks one loader per
column when a Relation arrives (not per value), and renders the loaded Python values as JSON.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import enum
import ipaddress
import math
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from connector.errors import DecodeError
from connector.pgoutput import (
    UNCHANGED_TOAST,
    BinaryValue,
    PgOutputMessage,
    Relation,
    TupleData,
    Type,
)

Loader = Callable[[Any], Any]


class TypedValues:
    """Relation/Type cache of one capture and the per-column loaders derived from it."""

    def __init__(self) -> None:
        from connector.pgtypes import get_loader  # the registry: (type OID, binary) -> loader

        self._get_loader = get_loader
        self._types: dict[int, Type] = {}
        self._loaders: dict[int, tuple[tuple[Loader, Loader], ...]] = {}

    def observe(self, msg: PgOutputMessage) -> None:
        if isinstance(msg, Type):
            self._types[msg.type_oid] = msg
        elif isinstance(msg, Relation):
            self._loaders[msg.relation_id] = tuple(
                (self._get_loader(c.type_oid, False), self._get_loader(c.type_oid, True))
                for c in msg.columns)

    def render(self, relation_id: int, values: TupleData) -> list[Any]:
        loaders = self._loaders.get(relation_id)
        if loaders is None:
            raise DecodeError(f"change of relation {relation_id} before its Relation message: "
                              "--typed needs the capture from the transaction's start")
        if len(loaders) != len(values):
            raise DecodeError(f"relation {relation_id} has {len(loaders)} columns but the tuple "
                              f"has {len(values)}")
        return [_render(v, pair) for v, pair in zip(values, loaders, strict=True)]


def _render(value: object, loaders: tuple[Loader, Loader]) -> Any:
    if value is None:
        return None
    if value is UNCHANGED_TOAST:
        return {"unchanged_toast": True}
    if isinstance(value, BinaryValue):
        return to_json(loaders[1](bytes(value)))
    return to_json(loaders[0](value))


def to_json(value: Any) -> Any:
    """A loaded Python value as JSON: exact where JSON has no type (Decimal and big ints as text
    only when needed, dates ISO-8601, bytes as PostgreSQL's hex form)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    if isinstance(value, uuid.UUID | ipaddress.IPv4Address | ipaddress.IPv6Address
                  | ipaddress.IPv4Network | ipaddress.IPv6Network
                  | ipaddress.IPv4Interface | ipaddress.IPv6Interface):
        return str(value)
    if isinstance(value, enum.Enum):
        return str(value.value)
    isoformat = getattr(value, "isoformat", None)  # e.g. pgtypes.Interval (a NamedTuple)
    if callable(isoformat):
        return isoformat()
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [to_json(v) for v in value]
    raw = getattr(value, "raw", None)  # pgtypes.Unknown: the value as sent, flagged
    if raw is not None and hasattr(value, "type_oid"):
        text = raw if isinstance(raw, str) else base64.b16encode(raw).decode().lower()
        return {"unknown_type_oid": value.type_oid, "raw": text,
                "format": "text" if isinstance(raw, str) else "binary"}
    return str(value)

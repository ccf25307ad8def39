"""`pgcdc decode --typed`: column values converted by `connector.pgtypes` loaders, as JSON.

The capture alone is the type source: built-in types are known, Type messages describe
domains (by their base type). Types the stream cannot describe (enums, composites) load as
pgtypes' flagged `Unknown` values, rendered `{"unknown_type": oid, "text": ...}`. Loaders are
chosen once per Relation message, not per value.
"""

from __future__ import annotations

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
from connector.pgtypes import RowLoaders, TypeCatalog, to_jsonable


class TypedValues:
    """The Relation/Type state of one capture and the per-relation loaders derived from it."""

    def __init__(self) -> None:
        self._catalog = TypeCatalog()
        self._loaders: dict[int, RowLoaders] = {}

    def observe(self, msg: PgOutputMessage) -> None:
        if isinstance(msg, Type):
            self._catalog.register_type_message(msg.type_oid, msg.namespace, msg.name)
        elif isinstance(msg, Relation):
            self._loaders[msg.relation_id] = self._catalog.row_loaders(msg.columns)

    def render(self, relation_id: int, values: TupleData) -> list[Any]:
        loaders = self._loaders.get(relation_id)
        if loaders is None:
            raise DecodeError(f"change of relation {relation_id} before its Relation message "
                              "(--typed needs the capture from the slot's start)")
        if len(loaders.text) != len(values):
            raise DecodeError(f"relation {relation_id} has {len(loaders.text)} columns but "
                              f"the tuple has {len(values)}")
        out: list[Any] = []
        for i, value in enumerate(values):
            if value is None:
                out.append(None)
            elif value is UNCHANGED_TOAST:
                out.append({"unchanged_toast": True})
            elif isinstance(value, BinaryValue):
                out.append(to_jsonable(loaders.binary[i](bytes(value))))
            else:
                out.append(to_jsonable(loaders.text[i](value)))  # type: ignore[arg-type]
        return out

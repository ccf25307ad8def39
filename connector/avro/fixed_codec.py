"""Encoding of the fixed records (``pgcdc.Message``, ``pgcdc.Heartbeat``,
``pgcdc.TransactionMetadata``): fastavro, framed with their registered id."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connector.errors import SchemaError

from .fastavro_io import framed_writer, parse_checked
from .fixed import fixed_schema

__all__ = ["FixedCodec"]


class FixedCodec:
    """Encodes records of one fixed schema with its registered id."""

    def __init__(self, full_name: str, schema_id: int) -> None:
        self.full_name = full_name
        self.schema = fixed_schema(full_name)
        self.schema_id = schema_id
        self._write = framed_writer(parse_checked(self.schema, full_name), schema_id)

    def encode(self, record: Mapping[str, Any]) -> bytes:
        try:
            return self._write(record)
        except Exception as exc:
            raise SchemaError(f"cannot encode {self.full_name} record: "
                              f"{type(exc).__name__}: {exc}") from None

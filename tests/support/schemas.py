"""A schema registry of fixed ids for unit tests of the merge job's batch logic."""

from __future__ import annotations

from typing import Any

from spark_jobs.events.registry import SchemaCache, SchemaLookupError


class FixedSchemas(SchemaCache):
    """Fixed ids behind the real cache (the real registry is in the e2e tests). `lookups`:
    each id the cache asked for."""

    def __init__(self, schemas: dict[int, dict[str, Any]]) -> None:
        super().__init__("http://registry.invalid")  # never reached: _fetch is ours
        self.schemas = schemas
        self.lookups: list[int] = []

    def _fetch(self, schema_id: int) -> dict[str, Any] | SchemaLookupError:
        self.lookups.append(schema_id)
        if schema_id not in self.schemas:
            return SchemaLookupError(f"unknown schema id {schema_id}")
        return self.schemas[schema_id]

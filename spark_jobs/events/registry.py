"""Writer schemas by id, fetched once per id from a Confluent-compatible Schema Registry."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

log = logging.getLogger(__name__)


class SchemaLookupError(Exception):
    """The registry has no usable schema under this id."""


class RegistryUnavailable(Exception):
    """The registry did not answer: the batch fails (and is retried from the checkpoint) rather
    than sending good events to the dead letter."""


class SchemaCache:
    """Schema id → parsed Avro schema (dict). An id the registry answers 404 for is cached
    as unknown too (ids are immutable); any other failure raises RegistryUnavailable."""

    def __init__(self, url: str, client: SchemaRegistryClient | None = None) -> None:
        self._client = client or SchemaRegistryClient({"url": url})
        self._schemas: dict[int, dict[str, Any] | SchemaLookupError] = {}

    def get(self, schema_id: int) -> dict[str, Any]:
        """The parsed schema, or raise SchemaLookupError with a reason for the dead letter."""
        if schema_id not in self._schemas:
            self._schemas[schema_id] = self._fetch(schema_id)
        found = self._schemas[schema_id]
        if isinstance(found, SchemaLookupError):
            raise found
        return found

    def prefetch(self, schema_ids: Iterable[int]) -> None:
        """Fetch the ids not cached yet, several at a time: a first batch over many tables
        needs hundreds, one registry round trip each."""
        missing = sorted({i for i in schema_ids if i not in self._schemas})
        if len(missing) < 2:
            return
        with ThreadPoolExecutor(min(8, len(missing)), thread_name_prefix="pgcdc-registry") as pool:
            for schema_id, found in zip(missing, pool.map(self._fetch, missing), strict=True):
                self._schemas[schema_id] = found

    def _fetch(self, schema_id: int) -> dict[str, Any] | SchemaLookupError:
        try:
            schema = self._client.get_schema(schema_id)
        except SchemaRegistryError as exc:
            if exc.http_status_code != 404:
                raise RegistryUnavailable(f"schema id {schema_id}: {exc}") from exc
            log.warning("schema id %d is not in the registry: %s", schema_id, exc)
            return SchemaLookupError(f"unknown schema id {schema_id}")
        except Exception as exc:  # connection errors of the HTTP client
            raise RegistryUnavailable(f"schema id {schema_id}: {exc}") from exc
        if (schema.schema_type or "AVRO") != "AVRO":
            return SchemaLookupError(f"schema id {schema_id} is {schema.schema_type}, not AVRO")
        if schema.schema_str is None:
            return SchemaLookupError(f"schema id {schema_id} has no schema text")
        try:
            parsed = json.loads(schema.schema_str)
        except ValueError as exc:
            return SchemaLookupError(f"schema id {schema_id} is not JSON: {exc}")
        if not isinstance(parsed, dict):
            return SchemaLookupError(f"schema id {schema_id} is not an Avro record")
        return parsed

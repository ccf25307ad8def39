"""Schema ids from any Confluent-compatible Schema Registry, registered once per schema version.

    registry = SchemaRegistry("http://registry:8081")       # or {"url": ..., "basic.auth...": ...}
    key_id = registry.register(key_subject(topic), key_schema_json)
    value_id = registry.register(value_subject(topic), value_schema_json)
    registry.schema(value_id)                               # parsed writer schema, cached

Subjects follow TopicNameStrategy (`key_subject` / `value_subject`). `register` caches by
(subject, schema text): a schema version costs one HTTP call per process, never one per event.
Schema texts come from `connector.avro.schema`, which renders them byte-identically for the same
Relation, so restarts re-register the same text and get the same id back.

Failures become `SchemaError` with one line a user can act on:

* registry unreachable / 408 / 429 / 5xx: retried with exponential backoff (`attempts`
  in total, sleeping `backoff_s`, doubling up to `max_backoff_s`), then "schema registry
  <url> unreachable after N attempts: <reason>";
* rejected (409 incompatible, 422 invalid, 401/403 ...): at once, naming the subject and the
  registry's own message.

The confluent-kafka client is used with its own retries off, so this module alone decides.

Registry differences (we test against Apicurio 3's ``/apis/ccompat/v7``; users run Confluent's):
kept in the functions named ``*_quirk`` below, each with a test. Observed and harmless for us:
Apicurio's default compatibility is NONE (Confluent's BACKWARD); Apicurio dedupes a re-registered
schema by its exact text, Confluent by its parsed form (our texts are deterministic, so both
return the existing id).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from connector.errors import SchemaError

from .schema import render

__all__ = ["SchemaRegistry", "canonical_json", "key_subject", "redact_url", "value_subject"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_RETRIABLE_STATUS: Final = frozenset({408, 429, 500, 502, 503, 504})
_SUBJECT_NOT_FOUND: Final = 40401


def key_subject(topic: str) -> str:
    """TopicNameStrategy subject of a topic's keys."""
    return f"{topic}-key"


def value_subject(topic: str) -> str:
    """TopicNameStrategy subject of a topic's values."""
    return f"{topic}-value"


def canonical_json(schema: Mapping[str, Any] | str) -> str:
    """The exact text registered for a schema (`schema.render`); a `str` is taken as
    already-rendered schema text and returned unchanged."""
    return schema if isinstance(schema, str) else render(schema)


def redact_url(url: str) -> str:
    """`url` without user:password (for messages and logs)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def strip_exception_class_quirk(message: str) -> str:
    """Apicurio prefixes error messages with the Java exception class
    (``io.apicurio.registry.rules.RuleViolationException: Incompatible artifact ...``);
    Confluent sends the message alone. Remove such a prefix so both read the same."""
    return re.sub(r"^(?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error): ", "", message)


def missing_subject_is_compatible_quirk(exc: SchemaRegistryError) -> bool:
    """Compatibility of a schema with a subject that does not exist yet: Apicurio answers
    ``true``, Confluent 404 (error 40401). Both mean "nothing to be incompatible with"."""
    return exc.http_status_code == 404 and exc.error_code == _SUBJECT_NOT_FOUND


class SchemaRegistry:
    """A Confluent-compatible registry client with per-process id caches. Not thread-safe."""

    def __init__(self, config: str | Mapping[str, Any], *, attempts: int = 5,
                 backoff_s: float = 0.5, max_backoff_s: float = 10.0,
                 timeout_s: float = 30.0) -> None:
        conf: dict[str, Any] = {"url": config} if isinstance(config, str) else dict(config)
        if not conf.get("url"):
            raise SchemaError("schema registry url is missing")
        if attempts < 1:
            raise SchemaError(f"registry attempts must be >= 1, not {attempts}")
        self.url = redact_url(str(conf["url"]))
        conf.setdefault("timeout", timeout_s)
        conf["max.retries"] = 0  # our loop below decides, once
        try:
            self._client = SchemaRegistryClient(conf)
        except (ValueError, TypeError) as exc:
            raise SchemaError(f"invalid schema registry settings: {_one_line(str(exc))}") from None
        self._attempts = attempts
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._ids: dict[tuple[str, str], int] = {}
        self._schemas: dict[int, dict[str, Any]] = {}
        self.calls = 0  # HTTP round trips made (for tests and metrics)

    @property
    def client(self) -> SchemaRegistryClient:
        return self._client

    def check_reachable(self) -> None:
        """Ask the registry for its subjects once: a wrong URL or credentials fail here, before
        anything is created, with the URL in the message."""
        try:
            self._call("list subjects (GET /subjects)", self._client.get_subjects)
        except SchemaError as exc:
            if "HTTP 404" in str(exc):
                raise SchemaError(
                    f"schema registry {self.url} answered HTTP 404 to GET {self.url}/subjects: "
                    "is it the URL of a Confluent-compatible API? (Apicurio: "
                    "http://<host>:<port>/apis/ccompat/v7)") from None
            raise

    # --------------------------------------------------------------------- registering

    def register(self, subject: str, schema: Mapping[str, Any] | str) -> int:
        """The id of `schema` under `subject`, registering it if needed (cached)."""
        text = canonical_json(schema)
        cache_key = (subject, text)
        found = self._ids.get(cache_key)
        if found is not None:
            return found
        schema_id: int = self._call(
            f"register schema for subject {subject}",
            lambda: self._client.register_schema(subject, Schema(text, "AVRO")))
        self._ids[cache_key] = schema_id
        if schema_id not in self._schemas:
            self._schemas[schema_id] = json.loads(text)
        log.info("schema id %d for subject %s", schema_id, subject)
        return schema_id

    def register_key(self, topic: str, schema: Mapping[str, Any] | str) -> int:
        return self.register(key_subject(topic), schema)

    def register_value(self, topic: str, schema: Mapping[str, Any] | str) -> int:
        return self.register(value_subject(topic), schema)

    # --------------------------------------------------------------------- reading

    def schema(self, schema_id: int) -> dict[str, Any]:
        """The parsed schema with this id (cached; ids are immutable)."""
        found = self._schemas.get(schema_id)
        if found is None:
            registered = self._call(f"fetch schema id {schema_id}",
                                    lambda: self._client.get_schema(schema_id))
            if (registered.schema_type or "AVRO") != "AVRO":
                raise SchemaError(f"schema id {schema_id} is {registered.schema_type}, not AVRO")
            if registered.schema_str is None:
                raise SchemaError(f"schema id {schema_id} has no schema text")
            found = json.loads(registered.schema_str)
            if not isinstance(found, dict):
                raise SchemaError(f"schema id {schema_id} is not an Avro record")
            self._schemas[schema_id] = found
        return found

    def is_compatible(self, subject: str, schema: Mapping[str, Any] | str) -> bool:
        """Whether the registry would accept `schema` as the next version of `subject`,
        under the subject's configured compatibility level."""
        text = canonical_json(schema)
        try:
            result: bool = self._call(
                f"check compatibility for subject {subject}",
                lambda: self._client.test_compatibility(subject, Schema(text, "AVRO")),
                passthrough=missing_subject_is_compatible_quirk)
        except SchemaRegistryError as exc:  # only what `passthrough` let through
            if missing_subject_is_compatible_quirk(exc):
                return True
            raise
        return result

    def set_compatibility(self, subject: str, level: str) -> None:
        """Set a subject's compatibility level (BACKWARD, FORWARD, FULL, NONE, *_TRANSITIVE)."""
        self._call(f"set compatibility {level} for subject {subject}",
                   lambda: self._client.set_compatibility(subject, level.upper()))

    # --------------------------------------------------------------------- errors & retry

    def _call(self, what: str, request: Callable[[], T],
              passthrough: Callable[[SchemaRegistryError], bool] | None = None) -> T:
        delay = self._backoff_s
        last = ""
        for attempt in range(1, self._attempts + 1):
            self.calls += 1
            try:
                return request()
            except SchemaRegistryError as exc:
                if passthrough is not None and passthrough(exc):
                    raise
                if exc.http_status_code not in _RETRIABLE_STATUS:
                    message = strip_exception_class_quirk(_one_line(exc.error_message or ""))
                    raise SchemaError(
                        f"schema registry {self.url} refused to {what}: HTTP "
                        f"{exc.http_status_code} (error {exc.error_code}): {message}") from None
                last = f"HTTP {exc.http_status_code}: {_one_line(exc.error_message or '')}"
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {_one_line(str(exc)) or 'no answer'}"
            if attempt < self._attempts:
                log.warning("schema registry %s: cannot %s (%s); retry %d/%d in %.1f s",
                            self.url, what, last, attempt, self._attempts - 1, delay)
                time.sleep(delay)
                delay = min(delay * 2, self._max_backoff_s)
        raise SchemaError(f"schema registry {self.url} unreachable after {self._attempts} "
                          f"attempts (could not {what}): {last}")

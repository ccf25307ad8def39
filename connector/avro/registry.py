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

Deleted subjects (issue 24). A subject deleted from the registry takes its schema ids with it
(at a hard delete, ``?permanent=true``; seen on Apicurio 3.0.9 too): every record already
written with such an id is undecodable, and a cached id would make every next one undecodable
too, with nothing said.
Asking the registry before each record is out of the question (the hot path), so `watch`
starts a background thread that asks, every few seconds, whether each id this process
registered still resolves (``GET /schemas/ids/<id>``, uncached, its own client). A soft delete
(Confluent's and Apicurio's default) leaves the ids resolvable and the records decodable: pgcdc
goes on; a hard delete (``?permanent=true``) makes them answer 404.
An id answering 404 makes `check_ids` -- which the sink runs from every poll and before an
exactly-once commit -- raise a `SchemaError` naming the id, subject and topic: pgcdc stops.
It does not re-register and go on: a new id would make the next records decodable, but the
topic's earlier records (all of them, not only the last seconds') stay undecodable, and only
the operator can repair that (restore the schema under its id, or re-snapshot the table).
Restarting registers the schema again under a new id: the restart is the acknowledgement.
What the loop published between the deletion and the next sweep (at most one interval) may
carry the dead id, but its WAL is never confirmed to PostgreSQL: the pipeline confirms only
positions a passing sweep vouched for (`SweepGate`, connector/avro/sweep_gate.py, has the
argument), so the restart re-sends those changes under the new id. A registry that cannot be
reached is not a deletion: the sweep warns once, confirmation pauses (the stream goes on) and
the sweep is retried with a doubling interval until the registry answers.

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
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from connector.errors import SchemaError

from .schema import render
from .sweep_gate import SweepGate

__all__ = ["SchemaRegistry", "canonical_json", "gone_id_message", "key_subject", "redact_url",
           "subject_topic", "value_subject"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_RETRIABLE_STATUS: Final = frozenset({408, 429, 500, 502, 503, 504})
_SUBJECT_NOT_FOUND: Final = 40401
_WATCH_THREAD: Final = "pgcdc-registry-watch"


_SWEEPING = threading.local()  # `active` while a thread runs a sweep's requests


def _quiet_watch(record: logging.LogRecord) -> bool:
    """httpx logs each request at INFO: not those of sweeps (one per id, every few seconds)."""
    return not getattr(_SWEEPING, "active", False) or record.levelno > logging.INFO


def key_subject(topic: str) -> str:
    """TopicNameStrategy subject of a topic's keys."""
    return f"{topic}-key"


def value_subject(topic: str) -> str:
    """TopicNameStrategy subject of a topic's values."""
    return f"{topic}-value"


def subject_topic(subject: str) -> str:
    """The topic of a TopicNameStrategy subject (`key_subject` / `value_subject` undone)."""
    for suffix in ("-key", "-value"):
        if subject.endswith(suffix):
            return subject[: -len(suffix)]
    return subject


def gone_id_message(url: str, schema_id: int, subject: str) -> str:
    """The one line pgcdc stops with when the registry no longer resolves an id it used."""
    topic = subject_topic(subject)
    return (f"schema registry {url} no longer knows schema id {schema_id} (subject {subject}, "
            f"deleted?): the records of topic {topic} written with it cannot be decoded, so "
            "pgcdc stops instead of writing more. Restore the schema under the same id, or "
            f"restart pgcdc (it registers the schema again under a new id) and re-snapshot the "
            f"table of {topic} (pgcdc snapshot --tables <schema.table>)")


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
        self._conf = conf
        self._ids: dict[tuple[str, str], int] = {}
        self._schemas: dict[int, dict[str, Any]] = {}
        self.calls = 0  # HTTP round trips made (for tests and metrics)
        self._gone: SchemaError | None = None  # set by the watch thread
        self._watch: threading.Thread | None = None
        self._stop_watch = threading.Event()
        self._sweep_lock = threading.Lock()
        self._unreachable = False  # the last sweep could not reach the registry (warned once)

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

    def has_subject(self, subject: str) -> bool:
        """Whether `subject` has any version registered."""
        try:
            self._call(f"list versions of subject {subject}",
                       lambda: self._client.get_versions(subject),
                       passthrough=lambda exc: exc.http_status_code == 404)
        except SchemaRegistryError as exc:  # only what `passthrough` let through: a 404
            del exc
            return False
        return True

    def set_compatibility(self, subject: str, level: str) -> None:
        """Set a subject's compatibility level (BACKWARD, FORWARD, FULL, NONE, *_TRANSITIVE)."""
        self._call(f"set compatibility {level} for subject {subject}",
                   lambda: self._client.set_compatibility(subject, level.upper()))

    # --------------------------------------------------------------------- watching ids

    def watch(self, gate: SweepGate | None = None, interval_s: float = 5.0) -> None:
        """Start the background re-check of every registered id (once; a daemon thread). Each
        sweep that finds every id vouches, in `gate`, for what was acknowledged when it began
        (connector/avro/sweep_gate.py). A registry that does not answer is asked again after
        `interval_s`, doubled while it stays silent up to the `max_backoff_s` of every other
        request (whichever is longer): confirmation resumes soon after it is back."""
        if self._watch is not None:
            return

        longest = max(interval_s, self._max_backoff_s)

        def sweep_forever() -> None:
            delay = interval_s
            while not self._stop_watch.wait(delay) and self._gone is None:
                delay = interval_s if self.sweep(gate) else min(delay * 2, longest)

        self._watch = threading.Thread(target=sweep_forever, name=_WATCH_THREAD, daemon=True)
        self._watch.start()

    def check_ids(self) -> None:
        """Raise the `SchemaError` of an id the watch found gone (cheap: an attribute read)."""
        if self._gone is not None:
            raise self._gone

    def sweep(self, gate: SweepGate | None = None) -> bool:
        """One sweep (thread-safe; the watch thread's, and the pipeline's last one at a
        graceful stop): sample `gate`, then check every id registered so far -- in this order,
        see sweep_gate.py. All found: the sample becomes confirmable. One gone: `check_ids`
        raises from then on and the gate vouches for nothing more. The registry unreachable:
        nothing is vouched for; a warning the first time, not at each retry. False unless
        every id was found."""
        with self._sweep_lock:
            if self._gone is not None:
                return False
            sample = gate.sample() if gate is not None else None
            gone, trouble = self.verify_ids()
            if gone is not None:
                self._gone = gone
                if gate is not None:
                    gate.fail()
                log.error("%s", gone)
                return False
            if trouble is not None:
                if not self._unreachable:
                    log.warning("schema registry %s: cannot check the schema ids in use (%s): "
                                "nothing more is confirmed to PostgreSQL until it answers "
                                "(the stream goes on; the slot retains the WAL)",
                                self.url, trouble)
                else:
                    log.debug("schema registry %s still cannot be checked: %s", self.url,
                              trouble)
                self._unreachable = True
                return False
            if self._unreachable:
                log.info("schema registry %s answers again: confirming resumes", self.url)
                self._unreachable = False
            if gate is not None:
                gate.passed(sample)
            return True

    def verify_ids(self) -> tuple[SchemaError | None, str | None]:
        """Check every registered id once: (the error for the first one the registry answers
        404 for, None) -- or (None, why the registry could not answer) -- or (None, None): all
        found. ``GET /schemas/ids/<id>`` through a client of its own, so nothing is cached; a
        soft-deleted subject's ids still resolve (Confluent, Apicurio 3), and its records
        still decode.

        One request per id, not per subject: the Confluent API has no per-subject request that
        returns the ids of all its versions (``GET /subjects/<s>/versions`` lists version
        numbers, which do not identify an id: a subject deleted and registered again restarts
        at version 1; ``GET /schemas?subjectPrefix=`` answers 404 on Apicurio 3). A process
        holds about one id per subject (two after a schema change), so it would save little."""
        logging.getLogger("httpx").addFilter(_quiet_watch)  # no request line per id per sweep
        _SWEEPING.active = True
        try:
            return self._verify_ids()
        finally:
            _SWEEPING.active = False

    def _verify_ids(self) -> tuple[SchemaError | None, str | None]:
        with SchemaRegistryClient(dict(self._conf)) as client:
            for (subject, _), schema_id in dict(self._ids).items():
                try:
                    client.get_schema(schema_id)
                except SchemaRegistryError as exc:
                    if exc.http_status_code == 404:
                        return SchemaError(gone_id_message(self.url, schema_id, subject)), None
                    return None, (f"schema id {schema_id}: HTTP {exc.http_status_code} "
                                  f"{_one_line(exc.error_message or '')}".rstrip())
                except httpx.TransportError as exc:
                    return None, (f"schema id {schema_id}: "
                                  f"{_one_line(str(exc)) or type(exc).__name__}")
        return None, None

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the watch thread (if any) and wait for a sweep in progress: a daemon thread
        still inside an HTTP request while the interpreter shuts down can crash it."""
        self._stop_watch.set()
        if self._watch is not None and self._watch is not threading.current_thread():
            self._watch.join(timeout_s)

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

"""``--oversized-events omit`` (issue 24): an event larger than Kafka accepts, made to fit.

By default (``fail``) a record over the producer's ``message.max.bytes`` or the topic's
``max.message.bytes`` stops the run, and every restart meets it again (pipeline.py names the
limits to raise). With ``omit`` the sink (connector/sink/producer.py, the one seam every
encoded event passes) hands each record over `max_event_bytes` (key + Confluent-framed value +
the header) to `OmitOversized`, which decodes the value with its writer schema, sets the largest
non-key column values to null (largest first, as few as needed, in `before` and `after`) and
encodes it again with the same schema id. The omitted columns are named in the record header
``pgcdc.omitted``: comma-separated Avro field names, ``before.`` in front of `before`'s. The
Avro schema and the C encoder stay as they are; the merge job writes null for those columns.

An event that does not fit even with every non-key column null (a huge key) is left as it is,
so it fails as with ``fail``. Each omission logs one warning and counts
``pgcdc_events_oversized_total{table}``.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from fastavro import parse_schema, schemaless_writer

from connector import metrics

from .fastavro_io import decode, strip_logical_types
from .wire import frame, unframe

__all__ = ["OMITTED_HEADER", "OVERSIZED_POLICIES", "LIBRDKAFKA_MESSAGE_MAX_BYTES",
           "OmitOversized", "columns_to_omit", "event_limit"]

log = logging.getLogger(__name__)

OVERSIZED_POLICIES: Final = ("fail", "omit")
OMITTED_HEADER: Final = "pgcdc.omitted"
#: librdkafka's default message.max.bytes: the producer's limit unless --kafka sets it.
LIBRDKAFKA_MESSAGE_MAX_BYTES: Final = 1_000_000

Headers = list[tuple[str, bytes]]


def event_limit(max_event_bytes: int, kafka_settings: Mapping[str, Any]) -> int:
    """The size an event may have: `max_event_bytes`, or (0) the producer's
    ``message.max.bytes`` (librdkafka's default 1,000,000)."""
    if max_event_bytes > 0:
        return max_event_bytes
    return int(kafka_settings.get("message.max.bytes", LIBRDKAFKA_MESSAGE_MAX_BYTES))


def columns_to_omit(sizes: Sequence[tuple[str, int]], excess: int) -> list[str] | None:
    """The policy: which of the candidate fields (name, encoded size) to null so that the event
    shrinks by at least `excess` bytes -- the largest first, as few as needed (a null field
    still takes one byte). None when even all of them are not enough."""
    if excess <= 0:
        return []
    chosen: list[str] = []
    saved = 0
    for name, size in sorted(sizes, key=lambda item: -item[1]):  # stable: after first on ties
        if size <= 1:
            break
        chosen.append(name)
        saved += size - 1
        if saved >= excess:
            return chosen
    return None


def _datum_size(datum: Any) -> int:
    """A field's encoded size in bytes (exact for strings and bytes, about for the rest)."""
    if datum is None:
        return 1
    if isinstance(datum, str):
        n = len(datum.encode())
    elif isinstance(datum, bytes | bytearray):
        n = len(datum)
    elif isinstance(datum, list):
        n = sum(_datum_size(item) for item in datum)
    elif isinstance(datum, dict):
        n = sum(_datum_size(k) + _datum_size(v) for k, v in datum.items())
    else:
        n = 8
    return 1 + n + (n.bit_length() + 6) // 7


class OmitOversized:
    """The ``omit`` policy as the sink's hook: ``(topic, key, value) -> (value, headers)``, or
    None to produce the record as it is (it fits, or cannot be made to)."""

    def __init__(self, schema: Callable[[int], Mapping[str, Any]], limit: int) -> None:
        self._schema = schema  # writer schema by id (the registry's, cached)
        self.limit = limit
        self._writers: dict[int, Any] = {}
        self._keys: dict[int, frozenset[str]] = {}

    def __call__(self, topic: str, key: bytes | None, value: bytes) -> tuple[bytes, Headers] | None:
        try:
            schema_id, _ = unframe(value)
            event = decode(value, self._schema, logical_types=False).value
        except Exception as exc:  # not one of our change events: leave it to Kafka
            log.debug("oversized record of %s not decodable: %s", topic, exc)
            return None
        if not isinstance(event, dict) or "after" not in event or "before" not in event:
            return None
        keys = self._key_fields(key)
        candidates: list[tuple[str, int]] = []
        for side, prefix in (("after", ""), ("before", "before.")):
            row = event[side]
            if row is None:
                continue
            candidates.extend((prefix + name, _datum_size(datum)) for name, datum in row.items()
                              if name not in keys and datum is not None)
        omitted: list[str] = []
        new_value = value
        while True:
            header = len(OMITTED_HEADER) + len(",".join(omitted))
            excess = len(key or b"") + len(new_value) + header - self.limit
            if excess <= 0:
                break
            left = [c for c in candidates if c[0] not in omitted]
            # the header grows by each name taken: room for all of them (a few bytes)
            more = columns_to_omit(left, excess + sum(len(n) + 1 for n, _ in left))
            if more is None:  # sizes are estimates: the encoding decides, with all of them
                more = [n for n, _ in left]
            if not more:  # every non-key column is null and it is still too large
                return None
            for name in more:
                omitted.append(name)
                side, _, field = name.rpartition(".")
                event["before" if side else "after"][field] = None
            new_value = self._encode(schema_id, event)
        if not omitted:
            return None
        table = _table(event)
        metrics.EVENTS_OVERSIZED.labels(table).inc()
        log.warning("%s: an event of %d bytes is over the %d-byte limit "
                    "(--max-event-bytes): published with column(s) %s null (%s), "
                    "%d bytes, named in the %s header", table,
                    len(key or b"") + len(value), self.limit, ", ".join(omitted),
                    ", ".join(f"{n}: {s} bytes" for n, s in candidates if n in omitted),
                    len(new_value), OMITTED_HEADER)
        return new_value, [(OMITTED_HEADER, ",".join(omitted).encode())]

    def _key_fields(self, key: bytes | None) -> frozenset[str]:
        if key is None:
            return frozenset()
        schema_id, _ = unframe(key)
        found = self._keys.get(schema_id)
        if found is None:
            schema = self._schema(schema_id)
            found = frozenset(f["name"] for f in schema.get("fields", ()))
            self._keys[schema_id] = found
        return found

    def _encode(self, schema_id: int, event: Any) -> bytes:
        parsed = self._writers.get(schema_id)
        if parsed is None:
            parsed = parse_schema(strip_logical_types(dict(self._schema(schema_id))))
            self._writers[schema_id] = parsed
        buf = io.BytesIO()
        schemaless_writer(buf, parsed, event)
        return frame(schema_id, buf.getvalue())


def _table(event: Mapping[str, Any]) -> str:
    source = event.get("source") or {}
    return f"{source.get('schema', '?')}.{source.get('table', '?')}"

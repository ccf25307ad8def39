"""The outbox event router: an outbox table's inserts become events on per-aggregate topics,
the way Debezium's outbox ``EventRouter`` SMT routes them with its defaults (docs/publishing.md,
"Outbox"). Pure: no IO (the publisher hands it rows and produces what it returns).

A table is an outbox when the first ``table_settings`` pattern matching it (the rule of
connector/replication/published.py) has an ``outbox`` key: ``outbox: true`` for Debezium's
defaults, or a mapping overriding them (`OutboxSetting`). Per row of the table:

* INSERT -> one record: topic ``<topic_prefix><route_by value>`` (``outbox.event.Order``), key
  the ``key`` column's text (UTF-8; null when the column is null), headers ``id`` and ``type``
  (the columns' text), value the ``payload`` column by ``payload_format``:

  - ``stored``: its bytes as stored (json/jsonb/text: their text as UTF-8; bytea: its bytes;
    any other type: PostgreSQL's text output); no schema is registered;
  - ``avro``: Confluent-framed Avro, the schema derived from the column's type
    (connector/avro/payload.py: a composite's record, any other type's own Avro type) and
    registered under the routed topic's value subject, like a table topic's;
  - ``auto`` (the default): ``avro`` for a composite payload (a ``CREATE TYPE ... AS`` type, a
    row type, a domain over one), ``stored`` for any other.

  A NULL payload is a null value in every format.
* DELETE (the usual clean-up of delivered rows) and TRUNCATE -> nothing.
* UPDATE -> nothing; by ``on_update`` (Debezium's ``table.op.invalid.behavior``) a warning
  (``warn``, the default), an error-level log (``error``) or a stop (``fatal``).

The outbox table's own topic (``<prefix>.<schema>.<table>``) is never written and no schema is
registered for it: its rows are events for other services, not a table to mirror. Nor is it
read by any snapshot (initial or incremental): its rows already in the table are events
delivered before (or to be cleaned up), and replaying them would deliver them twice.

A row that cannot be routed -- a null or empty ``route_by`` value, or one making a topic name
Kafka refuses or one of pgcdc's own ``<prefix>.*`` topics -- stops the producer with one line
naming the event: dropping it would lose an event, and guessing a topic would hide it.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Final, NamedTuple, Protocol

from connector.errors import ConfigError
from connector.names import MAX_TOPIC_LENGTH
from connector.pgoutput.messages import Relation, TupleData
from connector.pgtypes import RowLoaders
from connector.replication.published import TableSetting, setting_for

__all__ = ["ON_UPDATE", "PAYLOAD_FORMATS", "OutboxRouter", "OutboxRoutes", "OutboxSetting",
           "PayloadEncoder", "RoutedRecord", "parse_outbox_settings"]

log = logging.getLogger(__name__)

#: What an UPDATE of an outbox row does (Debezium's ``table.op.invalid.behavior``).
ON_UPDATE: Final = ("warn", "error", "fatal")
#: How the payload becomes the record's value (module docstring).
PAYLOAD_FORMATS: Final = ("auto", "avro", "stored")
# Kafka's topic alphabet and its two reserved names (kafka.common.internals.Topic).
_TOPIC: Final = re.compile(r"[A-Za-z0-9._-]+\Z")
_COLUMN_KEYS: Final = ("route_by", "key", "id", "type", "payload")


@dataclass(frozen=True)
class OutboxSetting:
    """How the outbox tables a pattern matches are routed; the defaults are Debezium's
    (``route.by.field``, ``table.field.event.key``, ``table.field.event.id``, the ``type``
    column, ``table.field.event.payload``, ``route.topic.replacement``). `key`, `id`, `type`:
    None leaves the key null / the header out."""

    pattern: str
    topic_prefix: str = "outbox.event."
    route_by: str = "aggregatetype"
    key: str | None = "aggregateid"
    id: str | None = "id"
    type: str | None = "type"
    payload: str = "payload"
    on_update: str = "warn"
    payload_format: str = "auto"

    def payload_is_avro(self, composite: bool) -> bool:
        """Whether the payload is Avro-encoded, given whether its column is a composite."""
        return self.payload_format == "avro" or (self.payload_format == "auto" and composite)


class PayloadEncoder(Protocol):
    """A payload column's Avro encoder (`connector.avro.payload.AvroPayload`)."""

    def encode(self, topic: str, raw: str | bytes | None) -> bytes | None: ...


def parse_outbox_settings(raw: Mapping[str, Any], *, topic_prefix: str
                          ) -> dict[str, OutboxSetting]:
    """The ``outbox`` keys of ``table_settings`` (pattern -> setting); a malformed one is one
    line. `topic_prefix`: pgcdc's own, which routed topics must stay out of."""
    out: dict[str, OutboxSetting] = {}
    known = [f.name for f in fields(OutboxSetting) if f.name != "pattern"]
    for pattern, value in raw.items():
        if not isinstance(value, dict) or "outbox" not in value:
            continue
        where = f"table_settings: {pattern!r}: outbox"
        given = value["outbox"]
        if given is False:
            continue
        if given is True or given is None:
            given = {}
        if not isinstance(given, dict):
            raise ConfigError(f"{where}: expected true or a mapping of {', '.join(known)}, got "
                              f"{given!r}")
        unknown = sorted(map(str, set(given) - set(known)))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (known: "
                              f"{', '.join(known)})")
        for name in _COLUMN_KEYS:
            optional = name in ("key", "id", "type")
            column = given.get(name, "?")
            if not (isinstance(column, str) and column) and not (optional and column is None):
                raise ConfigError(f"{where}: {name} must be a column name"
                                  f"{' (or null: none)' if optional else ''}, not {column!r}")
        if given.get("on_update", "warn") not in ON_UPDATE:
            raise ConfigError(f"{where}: on_update must be one of {', '.join(ON_UPDATE)}, not "
                              f"{given['on_update']!r}")
        if given.get("payload_format", "auto") not in PAYLOAD_FORMATS:
            raise ConfigError(f"{where}: payload_format must be one of "
                              f"{', '.join(PAYLOAD_FORMATS)}, not {given['payload_format']!r}")
        prefix = given.get("topic_prefix", OutboxSetting.topic_prefix)
        if not isinstance(prefix, str) or (prefix and not _TOPIC.match(prefix)):
            raise ConfigError(f"{where}: topic_prefix {prefix!r} is not the start of a Kafka "
                              "topic name (letters, digits, '.', '_', '-')")
        if prefix.startswith(f"{topic_prefix}."):
            raise ConfigError(f"{where}: topic_prefix {prefix!r} is inside pgcdc's own topics "
                              f"({topic_prefix}.*, read as table topics by the merge job): "
                              "choose another, e.g. outbox.event.")
        out[pattern.strip()] = OutboxSetting(pattern.strip(), **given)
    return out


class OutboxRoutes:
    """Which tables are outboxes: the `OutboxSetting` of the first ``table_settings`` pattern
    matching a table, when that pattern has one (first match wins, as for column lists)."""

    def __init__(self, table_settings: Sequence[TableSetting],
                 outboxes: Mapping[str, OutboxSetting], *, reserved_prefix: str) -> None:
        self.table_settings = table_settings
        self.outboxes = dict(outboxes)
        self.reserved_prefix = reserved_prefix  # pgcdc's topic prefix (`OutboxRouter`)

    def __bool__(self) -> bool:
        return bool(self.outboxes)

    def setting_for(self, schema: str, table: str) -> OutboxSetting | None:
        if not self.outboxes:
            return None
        matched = setting_for(self.table_settings, schema, table)
        return None if matched is None else self.outboxes.get(matched.pattern)

    def is_outbox(self, schema: str, table: str) -> bool:
        return self.setting_for(schema, table) is not None

    def router(self, relation: Relation, loaders: RowLoaders,
               payload: PayloadEncoder | None = None) -> OutboxRouter | None:
        """The router of a table version (None: not an outbox); `payload`: its payload's Avro
        encoder when `OutboxSetting.payload_is_avro` (None: as stored)."""
        setting = self.setting_for(relation.namespace, relation.name)
        if setting is None:
            return None
        return OutboxRouter(setting, relation, loaders, reserved_prefix=self.reserved_prefix,
                            payload=payload)


class RoutedRecord(NamedTuple):
    """One routed event: what the sink produces."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, str | bytes | None]]  # the sink's `Headers`


class OutboxRouter:
    """One outbox table version's routing, built once per Relation: column positions and
    loaders chosen once; `route` turns an inserted row into its record."""

    def __init__(self, setting: OutboxSetting, relation: Relation, loaders: RowLoaders, *,
                 reserved_prefix: str, payload: PayloadEncoder | None = None) -> None:
        self.setting = setting
        self._avro = payload
        self.table = f"{relation.namespace}.{relation.name}"
        self._reserved = f"{reserved_prefix}."
        self._loaders = loaders
        names = [c.name for c in relation.columns]
        missing = [f"{k} ({getattr(setting, k)})" for k in _COLUMN_KEYS
                   if getattr(setting, k) is not None and getattr(setting, k) not in names]
        if missing:
            raise ConfigError(
                f"outbox table {self.table} (table_settings {setting.pattern!r}) has no column "
                f"for {', '.join(missing)}: its columns are {', '.join(names)}; name its "
                "columns under outbox: (route_by, key, id, type, payload)")
        self._route_by = names.index(setting.route_by)
        self._payload = names.index(setting.payload)
        self._key = None if setting.key is None else names.index(setting.key)
        self._headers = [(header, names.index(column)) for header, column in
                         (("id", setting.id), ("type", setting.type)) if column is not None]
        self._warned_update = False

    def route(self, new: TupleData) -> RoutedRecord:
        """The record of an inserted row (see the module docstring)."""
        route_value = self._text(new, self._route_by)
        if not route_value:
            raise ConfigError(
                f"outbox table {self.table}: an event ({self._describe(new)}) has "
                f"{'no' if route_value is None else 'an empty'} {self.setting.route_by} to route "
                "it by; pgcdc stops rather than drop it. Fix the application (make the column "
                "NOT NULL) and move the slot past this event deliberately")
        topic = self.setting.topic_prefix + route_value
        if not _TOPIC.match(topic) or topic in (".", "..") or len(topic) > MAX_TOPIC_LENGTH \
                or topic.startswith(self._reserved):
            raise ConfigError(
                f"outbox table {self.table}: an event ({self._describe(new)}) routes to topic "
                f"{topic!r}, which Kafka refuses (letters, digits, '.', '_', '-'; at most "
                f"{MAX_TOPIC_LENGTH}) or which is one of pgcdc's own {self._reserved}* topics; "
                "pgcdc stops rather than drop it. Use such values in "
                f"{self.setting.route_by} (or another topic_prefix)")
        key = None if self._key is None else self._text(new, self._key)
        value = self._bytes(new, self._payload) if self._avro is None else \
            self._avro.encode(topic, _raw(new[self._payload]))
        return RoutedRecord(
            topic, None if key is None else key.encode(), value,
            [(header, _utf8(self._text(new, i))) for header, i in self._headers])

    def ignored_update(self) -> None:
        """An UPDATE of an outbox row: nothing is published; `on_update` says what else."""
        policy = self.setting.on_update
        if policy == "fatal":
            raise ConfigError(f"outbox table {self.table}: a row was updated; outbox rows are "
                              "inserted (and deleted) only, and on_update is fatal")
        if policy == "error":
            log.error("outbox table %s: a row was updated and nothing was published (outbox "
                      "rows are inserted and deleted only)", self.table)
        elif not self._warned_update:  # warn: once per table version, not once per row
            self._warned_update = True
            log.warning("outbox table %s: rows were updated and nothing was published (outbox "
                        "rows are inserted and deleted only; on_update: error|fatal to be "
                        "told of each)", self.table)

    # ---------------------------------------------------------------- values

    def _text(self, row: TupleData, i: int) -> str | None:
        """A column's value as PostgreSQL's text output: the text tuple as sent; a binary
        tuple's value loaded (text types, integers, uuid)."""
        raw = row[i]
        if isinstance(raw, str):
            return raw
        if not isinstance(raw, bytes):  # null (an insert never has UNCHANGED_TOAST)
            return None
        value = self._loaders.binary[i](raw)
        if isinstance(value, str):
            return value
        if isinstance(value, int | uuid.UUID) and not isinstance(value, bool):
            return str(value)
        raise ConfigError(f"outbox table {self.table}: column {i + 1} arrives in binary form "
                          "and has no text form here: run with binary tuples off (binary: "
                          "false), or use a text, integer or uuid column")

    def _bytes(self, row: TupleData, i: int) -> bytes | None:
        """The payload's bytes as stored: bytea's own bytes, any other type's text as UTF-8."""
        raw = row[i]
        if isinstance(raw, str):
            loaded = self._loaders.text[i](raw)
            return bytes(loaded) if isinstance(loaded, bytes | bytearray) else raw.encode()
        if not isinstance(raw, bytes):
            return None
        loaded = self._loaders.binary[i](raw)
        if isinstance(loaded, bytes | bytearray):
            return bytes(loaded)
        if isinstance(loaded, str):
            return loaded.encode()
        raise ConfigError(f"outbox table {self.table}: the payload column arrives in binary "
                          "form and is not json, jsonb, text or bytea: run with binary tuples "
                          "off (binary: false)")

    def _describe(self, row: TupleData) -> str:
        if not self._headers:
            return "no id column"
        return f"{self.setting.id} {self._text(row, self._headers[0][1])!r}" \
            if self._headers[0][0] == "id" else "no id column"


def _raw(value: object) -> str | bytes | None:
    """A tuple value as sent: text, bytes, or None (null; an insert has no unchanged TOAST)."""
    return value if isinstance(value, str | bytes) else None


def _utf8(text: str | None) -> bytes | None:
    return None if text is None else text.encode()

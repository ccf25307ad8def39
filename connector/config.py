"""`pgcdc run` configuration: defaults < environment < YAML file < command-line flags."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import psycopg
import yaml
from psycopg.conninfo import conninfo_to_dict

from connector.avro.masking import HASH_ENCODINGS, Masking
from connector.avro.typemap import DEBEZIUM_FORMAT, VALUE_FORMATS
from connector.errors import ConfigError, first_line
from connector.outbox import OutboxRoutes, parse_outbox_settings
from connector.replication.admin import KEYLESS_POLICIES, managed_patterns
from connector.replication.published import (
    TableSetting,
    parse_table_settings,
    sets_publication,
    sets_publication_lists,
)
from connector.replication.table_trigger import TriggerSettings

ENV_DEFAULTS = {
    "dsn": "PGCDC_DSN",
    "bootstrap_servers": "KAFKA_BOOTSTRAP_SERVERS",
    "schema_registry_url": "SCHEMA_REGISTRY_URL",
}

SNAPSHOT_MODES = ("initial", "never", "initial_only")
# Where incremental snapshot requests travel (connector/snapshot/incremental/channel.py).
SIGNAL_CHANNELS = ("auto", "kafka", "table")
# An event over max_event_bytes: stop (fail) | publish it with its largest columns null (omit;
# connector/avro/oversized.py).
OVERSIZED_POLICIES = ("fail", "omit")
#: How a truncate is written into a table topic (`connector.sink.producer.truncate_partitions`;
#: schemas/README.md "Truncate": what a consumer sees with each).
TRUNCATE_RECORDS = ("every-partition", "one", "none")
# value_format: one of VALUE_FORMATS (connector/avro/typemap.py; schemas/README.md "Debezium
# value format"): pgcdc's own, or Debezium's PostgreSQL connector's defaults, under which
# truncates are not written unless truncate_records says otherwise (as Debezium).
# Heartbeats on by default: each is one transactional pg_logical_emit_message (a WAL record
# of ~100 bytes and a flush) and one ~100-byte record on <prefix>.heartbeat, 8,640 a day at
# 10 s, negligible beside any workload; in exchange an idle slot advances within 10 s and the
# merge job's consistent cuts lag the stream by at most one trigger plus 10 s.
HEARTBEAT_INTERVAL_S = 10.0

# PostgreSQL's own rules (ReplicationSlotValidateName; NAMEDATALEN - 1 bytes for any name):
# checked here because the server silently truncates a longer name instead of refusing it.
_SLOT_NAME = re.compile(r"[a-z0-9_]{1,63}\Z")
_MAX_NAME_BYTES = 63
# Kafka's topic alphabet; the prefix leaves room for `.<schema>.<table>`.
_TOPIC_PREFIX = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\Z")
_MAX_PREFIX_LENGTH = 200


@dataclass
class Config:
    dsn: str = ""
    bootstrap_servers: str = ""
    schema_registry_url: str = ""
    topic_prefix: str = "pgcdc"
    slot: str = "pgcdc"
    publication: str = "pgcdc"
    tables: list[str] = field(default_factory=lambda: ["*"])
    create_slot: bool = True  # create the slot if missing
    create_publication: bool = True  # create the publication if missing / set its tables
    keyless_tables: str = "refuse"  # tables without a key: refuse | skip | full
    # --tables '*': False (default) = a table list pgcdc keeps up to date (TableWatcher), which
    # never publishes a table without a key before the policy allows it; True = FOR ALL TABLES,
    # which publishes every table from its creation, keyless ones too: PostgreSQL then rejects
    # the application's UPDATE/DELETE on them (refuse: until they get a key; full: until
    # pgcdc's next check, ~2 s). Explicit opt-in only.
    all_tables_publication: bool = False
    # A new table matching --tables joins the table list publication in the transaction that
    # creates it (an event trigger pgcdc installs, a superuser once; connector/replication/
    # table_trigger.py), so every change of it is streamed from its first row. Off: the table
    # watcher adds it within ~2 s, its earlier rows as an incremental snapshot (changes of its
    # first seconds, and a table dropped within them, are not in the topics).
    table_trigger: bool = False
    # Per table, what the publication pgcdc creates or extends publishes (PostgreSQL 15+;
    # docs/publishing.md): `schema.table` pattern -> {columns: [...], where: "<filter>",
    # mask: {column: exclude | null | hash | {truncate: N}}} (masks alone also with
    # create_publication false); and `outbox:` to route the table's inserts as outbox events
    # (any server; "Outbox" there).
    table_settings: dict[str, Any] = field(default_factory=dict)
    # The HMAC-SHA-256 key of `hash` masks (table_settings' mask; connector/avro/masking.py):
    # give it as env:NAME or file:/path. Never shown (repr, logs, status).
    mask_salt: str = field(default="", repr=False)
    mask_hash_encoding: str = "hex"  # hash masks' output: hex | base64
    # PostgreSQL 18: publish the stored generated columns of every table (the publication's
    # publish_generated_columns = stored); per table: name them in table_settings' columns.
    publish_generated_columns: bool = False
    # Partitioned tables published through their root (one topic per partitioned table) or
    # each leaf partition on its own (publish_via_partition_root; docs/publishing.md). None:
    # true for a publication pgcdc creates, an existing one left as it is.
    publish_via_partition_root: bool | None = None
    # A partition DETACHed from a root published through it: publish a delete for each of its
    # keys on the root's topic, at the DETACH's position. Installs event triggers in the
    # database (a superuser, once; connector/replication/detach_trigger.py). Off by default.
    detach_deletes: bool = False
    binary: bool = False  # pgoutput binary tuples (faster for some types)
    failover_slot: bool | None = None  # None: on where the server is 17+ and a primary
    origin: str | None = None  # PostgreSQL 16+: 'none' publishes only local changes
    topic_partitions: int = 1
    topic_replication_factor: int = 1
    topic_retention_ms: int = -1  # unlimited: topics are the replayable log
    tombstones: bool = False  # a null-value record after each delete (Debezium-style)
    # truncates: a copy in every partition (the merge job applies it in order with each key)
    # | one record (partition 0) | none; see TRUNCATE_RECORDS
    truncate_records: str = "every-partition"  # "none" by default under value_format debezium
    # pgcdc (lossless, typed) | debezium: every column as Debezium's PostgreSQL connector
    # encodes it by default, a drop-in for Debezium consumers (docs/debezium-compatibility.md)
    value_format: str = "pgcdc"
    transaction_topic: bool = False  # BEGIN/END markers to <prefix>.transaction
    status_interval_s: float = 10.0  # standby status update period
    # A heartbeat (one logical message, one Kafka record) this often: idle slots advance, and
    # the merge job's consistent cuts and tombstone expiry rest on them. 0: off.
    heartbeat_interval_s: float = HEARTBEAT_INTERVAL_S
    # Capturing from a standby (which cannot write a logical message): the primary's DSN, where
    # the heartbeats are emitted; '' on a standby: heartbeats off (docs/standby.md).
    heartbeat_dsn: str = ""
    spill_bytes: int = 64 * 1024 * 1024  # buffered transaction size before spilling to disk
    # How often the schema ids in use are checked against the registry; WAL is confirmed to
    # PostgreSQL only up to what the last passing check vouched for (sweep_gate.py).
    schema_check_interval_s: float = 5.0
    wal_warn_bytes: int = 1 << 30  # warn (status, run) when a slot holds more WAL
    metrics_port: int = 0  # >0: Prometheus metrics on this port
    metrics_host: str = "0.0.0.0"  # the address /metrics binds (127.0.0.1: this host only)
    snapshot: str = "initial"  # initial (when the slot is new) | never | initial_only
    snapshot_workers: int = 2  # parallel snapshot readers (connections)
    snapshot_chunk_rows: int = 250_000  # rows per snapshot chunk (ctid range), about
    incremental_chunk_rows: int = 10_000  # rows per incremental snapshot chunk (by key)
    # DDL that changes existing rows without row events (ALTER COLUMN TYPE, ADD COLUMN with a
    # default, ...): re-read the table by an incremental snapshot
    # (connector/snapshot/incremental/resync.py).
    resync_on_ddl: bool = True
    # Where incremental snapshot requests travel (connector/snapshot/incremental/channel.py):
    # auto (the signal table on a primary the role may write, <prefix>.signal otherwise, e.g.
    # on a standby) | kafka (never a write on the source) | table (the signal table only).
    signal_channel: str = "auto"
    exactly_once: bool = False  # transactional producer + <prefix>.offsets (sink/transactional.py)
    exactly_once_batch_transactions: int = 1000  # PostgreSQL transactions per Kafka transaction
    exactly_once_batch_bytes: int = 16 * 1024 * 1024  # ... or this many event bytes
    exactly_once_batch_ms: int = 100  # ... or a Kafka transaction this old, whichever first
    oversized_events: str = "fail"  # an event over max_event_bytes: fail | omit
    max_event_bytes: int = 0  # 0: the producer's message.max.bytes (librdkafka: 1,000,000)
    kafka_timeout_s: float = 30.0  # how long a Kafka metadata/admin request may go unanswered
    schema_registry_attempts: int = 5  # tries of a registry request (backoff 0.5 s, doubling)
    kafka: dict[str, Any] = field(default_factory=dict)  # librdkafka settings (TLS/SASL ...)
    schema_registry: dict[str, Any] = field(default_factory=dict)  # registry client settings

    def validate(self) -> Config:
        missing = [f"{name} (--{name.replace('_', '-')} or {env})"
                   for name, env in ENV_DEFAULTS.items() if not getattr(self, name)]
        if missing:
            raise ConfigError("missing " + ", ".join(missing))
        if not self.tables:
            raise ConfigError("no tables to publish (--tables)")
        if self.topic_partitions < 1 or self.topic_replication_factor < 1:
            raise ConfigError("topic partitions and replication factor must be >= 1")
        _check_choice("snapshot", self.snapshot, SNAPSHOT_MODES)
        if self.snapshot_workers < 1 or self.snapshot_chunk_rows < 1 or \
                self.incremental_chunk_rows < 1:
            raise ConfigError("snapshot workers and chunk rows must be >= 1")
        _check_choice("keyless_tables", self.keyless_tables, KEYLESS_POLICIES)
        if self.all_tables_publication and list(self.tables) != ["*"]:
            raise ConfigError("all_tables_publication (FOR ALL TABLES) needs --tables '*', not "
                              f"{','.join(self.tables)!r}")
        if self.all_tables_publication and self.keyless_tables == "skip":
            raise ConfigError("all_tables_publication (FOR ALL TABLES) cannot leave tables "
                              "without a key out: use --keyless-tables full, or drop "
                              "--all-tables-publication (the default table list skips them)")
        published = self.published_settings()
        self.outbox_routes()
        _check_choice("mask_hash_encoding", self.mask_hash_encoding, HASH_ENCODINGS)
        hashed = [s.pattern for s in published if any(r.kind == "hash" for _, r in s.mask)]
        if hashed and not self.mask_salt:
            raise ConfigError(f"table_settings {hashed[0]!r}: a hash mask needs mask_salt, the "
                              "secret key of the hash (mask_salt: env:NAME or file:/path)")
        if sets_publication_lists(published) and not self.create_publication:
            raise ConfigError("table_settings' columns and where are set in the publication "
                              "pgcdc creates or extends: with create_publication false pgcdc "
                              "follows the column lists and filters of your publication; drop "
                              "them (masks are allowed)")
        if self.publish_generated_columns and not self.create_publication:
            raise ConfigError("publish_generated_columns is set in the publication pgcdc "
                              "creates or extends: with create_publication false, set it on "
                              "your publication (ALTER PUBLICATION ... SET "
                              "(publish_generated_columns = stored))")
        if self.publish_via_partition_root is not None and not self.create_publication:
            raise ConfigError("publish_via_partition_root is set in the publication pgcdc "
                              "creates or extends: with create_publication false, set it on "
                              "your publication (ALTER PUBLICATION ... SET "
                              "(publish_via_partition_root = true))")
        if self.table_trigger and not self.create_publication:
            raise ConfigError("table_trigger adds new tables to the publication pgcdc keeps: "
                              "with create_publication false, add them yourself; drop one")
        if self.detach_deletes and self.publish_via_partition_root is False:
            raise ConfigError("detach_deletes deletes a detached partition's rows from its "
                              "root's topic: it needs publish_via_partition_root (leaf by leaf, "
                              "the partition keeps its own topic); drop one")
        if sets_publication(published) and self.all_tables_publication:
            raise ConfigError("table_settings (column lists, row filters) cannot apply to a FOR "
                              "ALL TABLES publication (--all-tables-publication): drop one")
        _check_choice("signal_channel", self.signal_channel, SIGNAL_CHANNELS)
        _check_choice("oversized_events", self.oversized_events, OVERSIZED_POLICIES)
        _check_choice("value_format", self.value_format, VALUE_FORMATS)
        _check_choice("truncate_records", self.truncate_records, TRUNCATE_RECORDS)
        if self.max_event_bytes < 0:
            raise ConfigError(f"max_event_bytes must be >= 0 (0: the producer's "
                              f"message.max.bytes), not {self.max_event_bytes}")
        if self.schema_registry_attempts < 1:
            raise ConfigError(f"schema_registry_attempts must be >= 1, not "
                              f"{self.schema_registry_attempts}")
        if self.kafka_timeout_s <= 0:
            raise ConfigError(f"kafka_timeout_s must be > 0 seconds, not {self.kafka_timeout_s}")
        if self.origin not in (None, "none", "any"):
            raise ConfigError(f"origin must be 'none' or 'any', not {self.origin!r}")
        if self.schema_check_interval_s <= 0:
            raise ConfigError("schema_check_interval_s must be > 0 (seconds)")
        return self.check_names()

    def published_settings(self) -> list[TableSetting]:
        """`table_settings` parsed (a malformed one is a `ConfigError`)."""
        return parse_table_settings(self.table_settings)

    def table_trigger_settings(self) -> TriggerSettings:
        """What the table_trigger event trigger of this publication knows (its patterns; the
        table_settings patterns that give a column list or a row filter, whose tables the
        table watcher adds with them)."""
        return TriggerSettings(
            self.publication,
            managed_patterns(self.tables, all_tables=self.all_tables_publication),
            self.keyless_tables,
            [(s.pattern, s.columns is not None or s.where is not None or bool(s.excluded))
             for s in self.published_settings()])

    def outbox_routes(self) -> OutboxRoutes:
        """The outbox tables of `table_settings` (connector/outbox.py)."""
        return OutboxRoutes(self.published_settings(), parse_outbox_settings(
            self.table_settings, topic_prefix=self.topic_prefix),
            reserved_prefix=self.topic_prefix)

    def masking(self) -> Masking:
        """The column masks of `table_settings`, for every codec factory (stream, snapshots)."""
        return Masking(tuple((s.pattern, s.mask) for s in self.published_settings() if s.mask),
                       self.mask_salt.encode(), self.mask_hash_encoding, self.binary)

    def check_names(self) -> Config:
        """The names and ports every command uses, checked before anything is created."""
        check_dsn(self.dsn)
        if self.heartbeat_dsn:
            check_dsn(self.heartbeat_dsn)
        if not _SLOT_NAME.match(self.slot):
            raise ConfigError(
                f"slot name {self.slot!r} is invalid: PostgreSQL allows 1-63 characters, "
                "lower-case letters, digits and underscores")
        if not self.publication or "\x00" in self.publication \
                or len(self.publication.encode()) > _MAX_NAME_BYTES:
            raise ConfigError(f"publication name {self.publication!r} is invalid: PostgreSQL "
                              f"allows 1-{_MAX_NAME_BYTES} bytes")
        if not _TOPIC_PREFIX.match(self.topic_prefix) \
                or len(self.topic_prefix) > _MAX_PREFIX_LENGTH:
            raise ConfigError(
                f"topic prefix {self.topic_prefix!r} is invalid: Kafka topic names allow letters, "
                f"digits, '_', '-' and single dots between parts, up to {_MAX_PREFIX_LENGTH} "
                "characters for the prefix")
        if not 0 <= self.metrics_port <= 65535:
            raise ConfigError(f"metrics port {self.metrics_port} is not a TCP port (1-65535, "
                              "0 for none)")
        if not self.metrics_host.strip() or any(c.isspace() for c in self.metrics_host):
            raise ConfigError(f"metrics host {self.metrics_host!r} is not an address to bind "
                              "(e.g. 127.0.0.1, 0.0.0.0, ::)")
        return self


def check_dsn(dsn: str) -> None:
    """A malformed libpq connection string is one line, not psycopg's traceback."""
    try:
        conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ConfigError(f"malformed dsn: {first_line(exc)}") from None


def load(config_file: str | None, overrides: dict[str, Any],
         environ: dict[str, str] | None = None, validate: bool = True) -> Config:
    """Build the configuration; `overrides` are flags the user set (None means unset).
    `validate=False` skips the completeness checks (for commands needing only the database)."""
    environ = dict(os.environ) if environ is None else environ
    values: dict[str, Any] = {name: environ[env] for name, env in ENV_DEFAULTS.items()
                              if environ.get(env)}
    if config_file:
        values.update(_read_yaml(Path(config_file)))
    values.update({k: v for k, v in overrides.items() if v is not None})
    known = {f.name for f in fields(Config)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"unknown configuration keys: {', '.join(unknown)}")
    if isinstance(values.get("tables"), str):
        values["tables"] = [t.strip() for t in values["tables"].split(",") if t.strip()]
    _check_types(values)
    if values.get("value_format") == DEBEZIUM_FORMAT and "truncate_records" not in values:
        values["truncate_records"] = "none"  # Debezium's default (skipped.operations=t)
    for key in ("kafka", "schema_registry"):
        values[key] = resolve_secrets(values.get(key, {}), environ)
    for key in ("dsn", "heartbeat_dsn", "mask_salt"):
        if key in values:
            values[key] = resolve_secret(key, values[key], environ)
    cfg = Config(**values)
    return cfg.validate() if validate else cfg


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    """The one rule of a setting that takes one of a few names (snapshot, value_format...)."""
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}, not {value!r}")


# Field annotation (a string: `from __future__ import annotations`) -> accepted value types.
_ACCEPTED: dict[str, tuple[type, ...]] = {
    "str": (str,), "str | None": (str, type(None)), "bool": (bool,),
    "bool | None": (bool, type(None)), "int": (int,),
    "float": (int, float), "list[str]": (list,), "dict[str, Any]": (dict,),
}


def _check_types(values: dict[str, Any]) -> None:
    """One clear line for a value of the wrong type (`topic_partitions: lots` in YAML)."""
    for f in fields(Config):
        if f.name not in values:
            continue
        value, accepted = values[f.name], _ACCEPTED[str(f.type)]
        wrong = not isinstance(value, accepted) or (
            isinstance(value, bool) and bool not in accepted)  # YAML `yes` is not a number
        if isinstance(value, list):
            wrong = wrong or not all(isinstance(item, str) for item in value)
        if wrong:
            expected = {"str": "a string", "str | None": "a string", "bool": "true or false",
                        "bool | None": "true or false",
                        "int": "an integer", "float": "a number",
                        "list[str]": "a list of strings",
                        "dict[str, Any]": "a mapping"}[str(f.type)]
            raise ConfigError(f"configuration key {f.name}: expected {expected}, "
                              f"got {value!r}")


# Settings whose value may be `env:NAME` or `file:/path`, so that secrets stay out of flags
# (visible in `ps`) and of config files.
SECRET_KEYS = ("sasl.password", "ssl.key.password", "basic.auth.user.info")


def resolve_secret(key: str, value: str, environ: dict[str, str]) -> str:
    """`env:NAME` -> that environment variable, `file:/path` -> the file without its final
    newline; any other value as it is."""
    if value.startswith("env:"):
        name = value[4:]
        if name not in environ:
            raise ConfigError(f"{key}: environment variable {name} is not set")
        return environ[name]
    if value.startswith("file:"):
        try:
            return Path(value[5:]).read_text().removesuffix("\n")
        except OSError as exc:
            raise ConfigError(f"{key}: cannot read {value[5:]}: {exc.strerror}") from None
    return value


def resolve_secrets(settings: dict[str, Any], environ: dict[str, str] | None = None
                    ) -> dict[str, Any]:
    """`settings` with each secret (SECRET_KEYS) resolved by `resolve_secret`."""
    environ = dict(os.environ) if environ is None else environ
    return {k: resolve_secret(k, v, environ) if k in SECRET_KEYS and isinstance(v, str) else v
            for k, v in settings.items()}


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must be a mapping of keys to values")
    return {str(k).replace("-", "_"): v for k, v in data.items()}

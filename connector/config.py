"""`pgcdc run` configuration: defaults < environment < YAML file < command-line flags.

Each setting is declared once, as a field of `Config` with its `option(...)`
(connector/options.py): its YAML key, type and default from the field, its flag, help,
choices and environment variable from the option. `pgcdc run`'s parser (tools/run.py), the YAML
keys `load` accepts and docs/reference/options.md (scripts/docs_options.py) are derived from it.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import psycopg
import yaml
from psycopg.conninfo import conninfo_to_dict

from connector.avro.masking import HASH_ENCODINGS, Masking
from connector.avro.oversized import OVERSIZED_POLICIES
from connector.avro.typemap import DEBEZIUM_FORMAT, VALUE_FORMATS
from connector.errors import ConfigError, first_line
from connector.options import declared, option
from connector.outbox import OutboxRoutes, parse_outbox_settings
from connector.replication.admin import managed_patterns
from connector.replication.keyless import KEYLESS_POLICIES
from connector.replication.published import (
    TableSetting,
    parse_table_settings,
    sets_publication,
    sets_publication_lists,
)
from connector.replication.table_trigger import TriggerSettings

SNAPSHOT_MODES = ("initial", "never", "initial_only")
# Where incremental snapshot requests travel (connector/snapshot/incremental/channel.py).
SIGNAL_CHANNELS = ("auto", "kafka", "table")
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


def key_value(text: str) -> tuple[str, str]:
    """`--kafka KEY=VALUE`'s value parser."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key, value


@dataclass
class Config:
    """`pgcdc run`'s settings, each declared once (connector/options.py): its field gives the
    YAML key, type and default, its `option(...)` the flag, help and environment variable.
    Flags come in the order `--help` shows them; a YAML-only key (`flag=False`) sits with the
    flags it belongs with."""

    dsn: str = field(default="", metadata=option(
        "libpq connection string", env="PGCDC_DSN"))
    bootstrap_servers: str = field(default="", metadata=option(
        "Kafka bootstrap servers", env="KAFKA_BOOTSTRAP_SERVERS"))
    schema_registry_url: str = field(default="", metadata=option(
        "Confluent-compatible registry URL", env="SCHEMA_REGISTRY_URL"))
    topic_prefix: str = field(default="pgcdc", metadata=option("topic prefix (default pgcdc)"))
    slot: str = field(default="pgcdc", metadata=option("replication slot name (default pgcdc)"))
    publication: str = field(default="pgcdc", metadata=option(
        "publication name (default pgcdc)"))
    tables: list[str] = field(default_factory=lambda: ["*"], metadata=option(
        "comma-separated schema.table patterns, * allowed (default: all tables)",
        more="snapshots.md#adding-tables-and-re-snapshotting"))
    create_slot: bool = field(default=True, metadata=option(
        "create the slot if missing", flag=False))
    create_publication: bool = field(default=True, metadata=option(
        "create the publication if missing / set its tables", flag=False))
    keyless_tables: str = field(default="refuse", metadata=option(
        "tables without a primary key, when pgcdc creates or extends the publication "
        "(PostgreSQL rejects UPDATE/DELETE on them once published): refuse (default): refuse "
        "the first start naming them (later starts: those named exactly in --tables), leave "
        "the others out until they have a key; skip: leave them out; full: set REPLICA "
        "IDENTITY FULL on them before publishing them",
        choices=KEYLESS_POLICIES, more="configuration.md#settings-in-detail"))
    # False (default) with --tables '*': a table list pgcdc keeps up to date (TableWatcher),
    # which never publishes a table without a key before the policy allows it; FOR ALL TABLES
    # publishes every table from its creation, keyless ones too. Explicit opt-in only.
    all_tables_publication: bool = field(default=False, metadata=option(
        "with --tables '*': a FOR ALL TABLES publication (needs superuser) instead of the "
        "table list pgcdc keeps up to date. HAZARD: it publishes every new table at once, so "
        "PostgreSQL rejects the application's UPDATE/DELETE on a new table without a key "
        "(until it gets one; with --keyless-tables full, until pgcdc sets REPLICA IDENTITY "
        "FULL, ~2 s)", more="configuration.md#settings-in-detail"))
    # An event trigger pgcdc installs (connector/replication/table_trigger.py).
    table_trigger: bool = field(default=False, metadata=option(
        "a new table matching --tables joins the publication in the transaction that creates "
        "it, so every change of it is streamed from its first row (default off: the table "
        "watcher adds it within ~2 s, its earlier rows as an incremental snapshot; changes of "
        "its first seconds, and a table dropped within them, are lost). Installs an event "
        "trigger at start, which needs a superuser once (else: pgcdc grants "
        "--table-trigger-sql prints the SQL for one to run)",
        negatable=True, more="publishing.md#new-tables-what-tables-captures-in-each-mode"))
    table_settings: dict[str, Any] = field(default_factory=dict, metadata=option(
        "per table, what the publication pgcdc creates or extends publishes (PostgreSQL 15+; "
        "docs/publishing.md): `schema.table` pattern -> {columns: [...], where: "
        "\"<filter>\", mask: {column: exclude | null | hash | {truncate: N}}} (masks alone "
        "also with create_publication false); and `outbox:` to route the table's inserts as "
        "outbox events (any server; \"Outbox\" there)", flag=False, more="publishing.md"))
    mask_salt: str = field(default="", repr=False, metadata=option(
        "the HMAC-SHA-256 key of `hash` masks (table_settings' mask; "
        "connector/avro/masking.py): give it as env:NAME or file:/path. Never shown (repr, "
        "logs, status)", flag=False, more="publishing.md#masking-and-excluding-columns"))
    mask_hash_encoding: str = field(default="hex", metadata=option(
        "hash masks' output: hex | base64", flag=False,
        more="publishing.md#masking-and-excluding-columns"))
    publish_generated_columns: bool = field(default=False, metadata=option(
        "PostgreSQL 18: publish the stored generated columns of every table (the "
        "publication's publish_generated_columns = stored); per table: name them in "
        "table_settings' columns", flag=False, more="publishing.md"))
    # None: true for a publication pgcdc creates, an existing one left as it is.
    publish_via_partition_root: bool | None = field(default=None, metadata=option(
        "publish a partitioned table's changes through its root: one topic per partitioned "
        "table, whatever partitions are attached or detached (the default for a publication "
        "pgcdc creates); --no-publish-via-partition-root: one topic per leaf partition. Unset, "
        "an existing publication is left as it is; set, it is changed at start and the tables "
        "re-read", negatable=True, more="publishing.md#partitioned-tables"))
    # Event triggers pgcdc installs (connector/replication/detach_trigger.py).
    detach_deletes: bool = field(default=False, metadata=option(
        "a partition DETACHed from a root published through it: publish a delete for each of "
        "its keys on the root's topic, at the DETACH's position (default off). Installs two "
        "event triggers at start, which needs a superuser once (else: pgcdc grants "
        "--detach-deletes-sql prints the SQL for one to run)", negatable=True,
        more="publishing.md#deleting-a-detached-partitions-rows-detach_deletes"))
    # connector/avro/oversized.py
    oversized_events: str = field(default="fail", metadata=option(
        "an event larger than --max-event-bytes: fail (default) stops the run (every restart "
        "meets it again); omit publishes it with its largest non-key column values null, "
        "named in the record header pgcdc.omitted", choices=OVERSIZED_POLICIES,
        more="configuration.md#settings-in-detail"))
    max_event_bytes: int = field(default=0, metadata=option(
        "the event size --oversized-events omit keeps under (key + value; default: --kafka "
        "message.max.bytes, else 1000000); the topics' max.message.bytes must be at least this",
        more="configuration.md#settings-in-detail"))
    binary: bool = field(default=False, metadata=option("ask pgoutput for binary tuples"))
    # None: on where the server is 17+ and a primary.
    failover_slot: bool | None = field(default=None, metadata=option(
        "PostgreSQL 17+: sync the slot to standbys (default: on where possible)",
        negatable=True, more="high-availability.md"))
    origin: str | None = field(default=None, metadata=option(
        "PostgreSQL 16+ origin filter", choices=("none", "any")))
    topic_partitions: int = field(default=1, metadata=option(
        "partitions of new topics (default 1)"))
    topic_replication_factor: int = field(default=1, metadata=option("default 1"))
    topic_retention_ms: int = field(default=-1, metadata=option(
        "retention.ms of the topics pgcdc creates (default -1, unlimited: topics are the "
        "replayable log)", flag=False))
    tombstones: bool = field(default=False, metadata=option(
        "write a tombstone (null value) after each delete"))
    # connector.sink.producer.truncate_partitions; schemas/README.md "Truncate"
    truncate_records: str = field(default="every-partition", metadata=option(
        "how a TRUNCATE (and a re-snapshot's truncate marker) is written to a table topic: "
        "every-partition (default; the merge job needs it on topics of several partitions), "
        "one (a single record in partition 0, like Debezium), none (not written: consumers "
        "keep the rows; the default under --value-format debezium)",
        choices=TRUNCATE_RECORDS, more="configuration.md#settings-in-detail"))
    value_format: str = field(default="pgcdc", metadata=option(
        "how column values are encoded: pgcdc (default; lossless, typed) or debezium (as "
        "Debezium's PostgreSQL connector with its defaults, a drop-in for Flink SQL's "
        "debezium-avro-confluent and Kafka Connect sinks; truncates not written unless "
        "--truncate-records; what it loses: docs/debezium-compatibility.md)",
        choices=VALUE_FORMATS))
    transaction_topic: bool = field(default=False, metadata=option(
        "publish BEGIN/END markers to <prefix>.transaction"))
    status_interval_s: float = field(default=10.0, metadata=option(
        "how often a standby status update reports progress to PostgreSQL, in seconds "
        "(default 10)", flag=False))
    heartbeat_interval_s: float = field(default=HEARTBEAT_INTERVAL_S, metadata=option(
        "emit a heartbeat this often (default 10; 0: off): idle slots advance, the merge job's "
        "consistent cuts and tombstone expiry use them", more="consistent-reads.md"))
    # docs/standby.md
    heartbeat_dsn: str = field(default="", metadata=option(
        "capturing from a standby (--dsn), which cannot write: the primary's libpq connection "
        "string, where the heartbeats are emitted (they reach the standby's slot by "
        "replication); env:NAME / file:PATH allowed. Without it heartbeats are off while the "
        "server is a standby"))
    spill_bytes: int = field(default=64 * 1024 * 1024, metadata=option(
        "buffered transaction size before spilling to disk", flag=False))
    snapshot: str = field(default="initial", metadata=option(
        "initial (default): snapshot the published tables when the slot is new, then stream; "
        "never: stream only (a missing slot is an error once the topics hold events); "
        "initial_only: snapshot, then exit", choices=SNAPSHOT_MODES,
        more="snapshots.md#initial-snapshot"))
    snapshot_workers: int = field(default=2, metadata=option(
        "parallel snapshot readers, one connection each (default 2)",
        more="snapshots.md#initial-snapshot"))
    snapshot_chunk_rows: int = field(default=250_000, metadata=option(
        "rows per snapshot chunk, about (default 250000)"))
    incremental_chunk_rows: int = field(default=10_000, metadata=option(
        "rows per incremental snapshot chunk (`pgcdc snapshot`; default 10000)",
        more="snapshots.md#adding-tables-and-re-snapshotting"))
    # connector/snapshot/incremental/resync.py
    resync_on_ddl: bool = field(default=True, metadata=option(
        "re-read a table by an incremental snapshot after DDL that changed its existing rows "
        "without row events (ALTER COLUMN TYPE, ADD COLUMN with a default, DROP EXPRESSION, "
        "RENAME COLUMN, enum RENAME VALUE; default on; off: a warning only)", negatable=True,
        more="snapshots.md#re-sync-after-ddl-resync_on_ddl-on-by-default"))
    # connector/snapshot/incremental/channel.py
    signal_channel: str = field(default="auto", metadata=option(
        "where incremental snapshot requests (pgcdc snapshot, re-syncs after DDL) are taken "
        "from: auto (default: the signal table on a primary and the <prefix>.signal topic; "
        "the topic only on a standby), kafka (the same), table (the signal table only; none "
        "on a standby). Requests over Kafka are read without any write to the source "
        "(docs/standby.md)", choices=SIGNAL_CHANNELS))
    # connector/sink/transactional.py
    exactly_once: bool = field(default=False, metadata=option(
        "transactional producer: each change once in Kafka for read_committed consumers, even "
        "after a crash (streaming; see docs/producer.md)", more="producer.md#exactly-once"))
    exactly_once_batch_transactions: int = field(default=1000, metadata=option(
        "PostgreSQL transactions per Kafka transaction, at most (default 1000)"))
    exactly_once_batch_bytes: int = field(default=16 * 1024 * 1024, metadata=option(
        "event bytes per Kafka transaction, about (default 16 MiB)"))
    exactly_once_batch_ms: int = field(default=100, metadata=option(
        "commit a Kafka transaction this old (default 100)"))
    metrics_port: int = field(default=0, metadata=option(
        "serve Prometheus metrics on this port", more="operations.md#metrics"))
    metrics_host: str = field(default="0.0.0.0", metadata=option(
        "address the metrics port binds (default 0.0.0.0: every interface; 127.0.0.1: this "
        "host only)"))
    # connector/sink/sweep_gate.py
    schema_check_interval_s: float = field(default=5.0, metadata=option(
        "check the schema ids in use against the registry this often; WAL is confirmed up to "
        "what the last check vouched for (default 5)",
        more="producer.md#deleted-topics-and-schemas"))
    wal_warn_bytes: int = field(default=1 << 30, metadata=option(
        "log a warning when more WAL than this awaits confirmation (default 1 GiB)"))
    kafka_timeout_s: float = field(default=30.0, metadata=option(
        "how long a Kafka metadata or admin request (listing, creating, describing topics) may "
        "go unanswered before pgcdc stops with an error (default 30)"))
    schema_registry_attempts: int = field(default=5, metadata=option(
        "tries of each schema registry request before pgcdc stops with an error, waiting "
        "0.5 s, 1 s, 2 s ... between them (default 5)"))
    # --kafka adds to the file's `kafka:` rather than replacing it (tools/run.py).
    kafka: dict[str, Any] = field(default_factory=dict, metadata=option(
        "librdkafka setting, repeatable (e.g. security.protocol=SASL_SSL)", repeat=True,
        type=key_value, metavar="KEY=VALUE", more="configuration.md"))
    schema_registry: dict[str, Any] = field(default_factory=dict, metadata=option(
        "registry client settings", flag=False, more="configuration.md"))

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


#: Setting -> the environment variable that gives it (under the YAML file and the flags).
ENV_DEFAULTS = {f.name: opt.env for f, opt in declared(Config) if opt.env}


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

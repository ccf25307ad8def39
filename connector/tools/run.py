"""pgcdc run: stream the slot's changes to Kafka as Avro, one topic per table.

Configuration: flags override the YAML --config file, which overrides the environment
(PGCDC_DSN, KAFKA_BOOTSTRAP_SERVERS, SCHEMA_REGISTRY_URL). librdkafka settings (TLS, SASL, ...)
go under `kafka:` in the file or as repeated --kafka key=value flags.
SIGTERM / SIGINT drain in-flight deliveries, confirm what Kafka acknowledged, and exit 0.

Initial snapshot (--snapshot): with a new slot, every published table's rows are first
published as `r` events read in one consistent snapshot, then streaming starts exactly where
the snapshot ends. An interrupted snapshot is restarted from scratch by the next run (the
slot is created only once the snapshot is complete); see connector/snapshot.
With --snapshot never, a missing slot is created only on a first run: if the topics of
--topic-prefix already hold events, the slot was lost and the changes since then with it, so
pgcdc exits with an error instead (re-snapshot with --snapshot initial, or create the slot
yourself to accept the gap).
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from connector import config as config_mod
from connector import speedups
from connector.avro.typemap import VALUE_FORMATS
from connector.errors import ConfigError
from connector.redact import RedactSecrets
from connector.replication.admin import KEYLESS_POLICIES


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key, value


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("run", help="stream PostgreSQL changes to Kafka",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", metavar="FILE", help="YAML configuration file")
    p.add_argument("--dsn", help="libpq connection string (env PGCDC_DSN)")
    p.add_argument("--bootstrap-servers",
                   help="Kafka bootstrap servers (env KAFKA_BOOTSTRAP_SERVERS)")
    p.add_argument("--schema-registry-url", help="Confluent-compatible registry URL "
                                                  "(env SCHEMA_REGISTRY_URL)")
    p.add_argument("--topic-prefix", help="topic prefix (default pgcdc)")
    p.add_argument("--slot", help="replication slot name (default pgcdc)")
    p.add_argument("--publication", help="publication name (default pgcdc)")
    p.add_argument("--tables", help="comma-separated schema.table patterns, * allowed "
                                    "(default: all tables)")
    p.add_argument("--keyless-tables", choices=list(KEYLESS_POLICIES),
                   help="tables without a primary key, when pgcdc creates or extends the "
                        "publication (PostgreSQL rejects UPDATE/DELETE on them once published): "
                        "refuse (default): refuse the first start naming them (later starts: "
                        "those named exactly in --tables), leave the others out until they have "
                        "a key; skip: leave them out; full: set REPLICA IDENTITY FULL on them "
                        "before publishing them")
    p.add_argument("--all-tables-publication", action="store_true", default=None,
                   help="with --tables '*': a FOR ALL TABLES publication (needs superuser) "
                        "instead of the table list pgcdc keeps up to date. HAZARD: it publishes "
                        "every new table at once, so PostgreSQL rejects the application's "
                        "UPDATE/DELETE on a new table without a key (until it gets one; with "
                        "--keyless-tables full, until pgcdc sets REPLICA IDENTITY FULL, ~2 s)")
    p.add_argument("--table-trigger", action=argparse.BooleanOptionalAction, default=None,
                   help="a new table matching --tables joins the publication in the "
                        "transaction that creates it, so every change of it is streamed from "
                        "its first row (default off: the table watcher adds it within ~2 s, "
                        "its earlier rows as an incremental snapshot; changes of its first "
                        "seconds, and a table dropped within them, are lost). Installs an "
                        "event trigger at start, which needs a superuser once (else: pgcdc "
                        "grants --table-trigger-sql prints the SQL for one to run)")
    p.add_argument("--publish-via-partition-root", action=argparse.BooleanOptionalAction,
                   default=None,
                   help="publish a partitioned table's changes through its root: one topic per "
                        "partitioned table, whatever partitions are attached or detached (the "
                        "default for a publication pgcdc creates); --no-publish-via-partition-"
                        "root: one topic per leaf partition. Unset, an existing publication is "
                        "left as it is; set, it is changed at start and the tables re-read")
    p.add_argument("--detach-deletes", action=argparse.BooleanOptionalAction, default=None,
                   help="a partition DETACHed from a root published through it: publish a "
                        "delete for each of its keys on the root's topic, at the DETACH's "
                        "position (default off). Installs two event triggers at start, which "
                        "needs a superuser once (else: pgcdc grants --detach-deletes-sql prints "
                        "the SQL for one to run)")
    p.add_argument("--oversized-events", choices=list(config_mod.OVERSIZED_POLICIES),
                   help="an event larger than --max-event-bytes: fail (default) stops the run "
                        "(every restart meets it again); omit publishes it with its largest "
                        "non-key column values null, named in the record header pgcdc.omitted")
    p.add_argument("--max-event-bytes", type=int,
                   help="the event size --oversized-events omit keeps under (key + value; "
                        "default: --kafka message.max.bytes, else 1000000); the topics' "
                        "max.message.bytes must be at least this")
    p.add_argument("--binary", action="store_true", default=None,
                   help="ask pgoutput for binary tuples")
    p.add_argument("--failover-slot", action=argparse.BooleanOptionalAction, default=None,
                   help="PostgreSQL 17+: sync the slot to standbys (default: on where possible)")
    p.add_argument("--origin", choices=["none", "any"], help="PostgreSQL 16+ origin filter")
    p.add_argument("--topic-partitions", type=int, help="partitions of new topics (default 1)")
    p.add_argument("--topic-replication-factor", type=int, help="default 1")
    p.add_argument("--tombstones", action="store_true", default=None,
                   help="write a tombstone (null value) after each delete")
    p.add_argument("--truncate-records", choices=list(config_mod.TRUNCATE_RECORDS),
                   help="how a TRUNCATE (and a re-snapshot's truncate marker) is written to a "
                        "table topic: every-partition (default; the merge job needs it on "
                        "topics of several partitions), one (a single record in partition 0, "
                        "like Debezium), none (not written: consumers keep the rows; the "
                        "default under --value-format debezium)")
    p.add_argument("--value-format", choices=list(VALUE_FORMATS),
                   help="how column values are encoded: pgcdc (default; lossless, typed) or "
                        "debezium (as Debezium's PostgreSQL connector with its defaults, a "
                        "drop-in for Flink SQL's debezium-avro-confluent and Kafka Connect "
                        "sinks; truncates not written unless --truncate-records; what it loses: "
                        "docs/debezium-compatibility.md)")
    p.add_argument("--transaction-topic", action="store_true", default=None,
                   help="publish BEGIN/END markers to <prefix>.transaction")
    p.add_argument("--heartbeat-interval-s", type=float,
                   help="emit a heartbeat this often (default 10; 0: off): idle slots "
                        "advance, the merge job's consistent cuts and tombstone expiry use them")
    p.add_argument("--heartbeat-dsn",
                   help="capturing from a standby (--dsn), which cannot write: the primary's "
                        "libpq connection string, where the heartbeats are emitted (they reach "
                        "the standby's slot by replication); env:NAME / file:PATH allowed. "
                        "Without it heartbeats are off while the server is a standby")
    p.add_argument("--snapshot", choices=list(config_mod.SNAPSHOT_MODES),
                   help="initial (default): snapshot the published tables when the slot is new, "
                        "then stream; never: stream only (a missing slot is an error once the "
                        "topics hold events); initial_only: snapshot, then exit")
    p.add_argument("--snapshot-workers", type=int,
                   help="parallel snapshot readers, one connection each (default 2)")
    p.add_argument("--snapshot-chunk-rows", type=int,
                   help="rows per snapshot chunk, about (default 250000)")
    p.add_argument("--incremental-chunk-rows", type=int,
                   help="rows per incremental snapshot chunk (`pgcdc snapshot`; default 10000)")
    p.add_argument("--resync-on-ddl", action=argparse.BooleanOptionalAction, default=None,
                   help="re-read a table by an incremental snapshot after DDL that changed its "
                        "existing rows without row events (ALTER COLUMN TYPE, ADD COLUMN with a "
                        "default, DROP EXPRESSION, RENAME COLUMN, enum RENAME VALUE; default on; "
                        "off: a warning only)")
    p.add_argument("--signal-channel", choices=list(config_mod.SIGNAL_CHANNELS),
                   help="where incremental snapshot requests (pgcdc snapshot, re-syncs after "
                        "DDL) are taken from: auto (default: the signal table on a primary and "
                        "the <prefix>.signal topic; the topic only on a standby), kafka (the "
                        "same), table (the signal table only; none on a standby). Requests over "
                        "Kafka are read without any write to the source (docs/standby.md)")
    p.add_argument("--exactly-once", action="store_true", default=None,
                   help="transactional producer: each change once in Kafka for read_committed "
                        "consumers, even after a crash (streaming; see docs/producer.md)")
    p.add_argument("--exactly-once-batch-transactions", type=int,
                   help="PostgreSQL transactions per Kafka transaction, at most (default 1000)")
    p.add_argument("--exactly-once-batch-bytes", type=int,
                   help="event bytes per Kafka transaction, about (default 16 MiB)")
    p.add_argument("--exactly-once-batch-ms", type=int,
                   help="commit a Kafka transaction this old (default 100)")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port")
    p.add_argument("--metrics-host",
                   help="address the metrics port binds (default 0.0.0.0: every interface; "
                        "127.0.0.1: this host only)")
    p.add_argument("--schema-check-interval-s", type=float,
                   help="check the schema ids in use against the registry this often; WAL "
                        "is confirmed up to what the last check vouched for (default 5)")
    p.add_argument("--wal-warn-bytes", type=int,
                   help="log a warning when more WAL than this awaits confirmation (default 1 GiB)")
    p.add_argument("--kafka-timeout-s", type=float,
                   help="how long a Kafka metadata or admin request (listing, creating, "
                        "describing topics) may go unanswered before pgcdc stops with an error "
                        "(default 30)")
    p.add_argument("--schema-registry-attempts", type=int,
                   help="tries of each schema registry request before pgcdc stops with an error, "
                        "waiting 0.5 s, 1 s, 2 s ... between them (default 5)")
    p.add_argument("--kafka", action="append", type=_key_value, metavar="KEY=VALUE",
                   help="librdkafka setting, repeatable (e.g. security.protocol=SASL_SSL)")
    p.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING (default INFO)")
    p.set_defaults(handler=handle)


def config_from_args(args: argparse.Namespace) -> config_mod.Config:
    names = ["dsn", "bootstrap_servers", "schema_registry_url", "topic_prefix", "slot",
             "publication", "tables", "keyless_tables", "all_tables_publication",
             "table_trigger",
             "publish_via_partition_root", "detach_deletes", "binary",
             "failover_slot", "origin",
             "topic_partitions", "topic_replication_factor", "tombstones", "truncate_records",
             "value_format",
             "transaction_topic",
             "heartbeat_interval_s", "heartbeat_dsn", "metrics_port", "metrics_host",
             "schema_check_interval_s",
             "wal_warn_bytes", "snapshot",
             "snapshot_workers", "snapshot_chunk_rows", "incremental_chunk_rows", "resync_on_ddl",
             "signal_channel",
             "exactly_once",
             "exactly_once_batch_transactions", "exactly_once_batch_bytes",
             "exactly_once_batch_ms", "oversized_events", "max_event_bytes", "kafka_timeout_s",
             "schema_registry_attempts"]
    overrides = {name: getattr(args, name) for name in names}
    cfg = config_mod.load(args.config, overrides)
    if args.kafka:
        cfg.kafka.update(config_mod.resolve_secrets(dict(args.kafka)))
    return cfg


def handle(args: argparse.Namespace) -> int:
    level = getattr(logging, str(args.log_level).upper(), None)
    if not isinstance(level, int):
        raise ConfigError(f"unknown log level {args.log_level!r}")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    for handler in logging.getLogger().handlers:  # libraries log URLs with user:password
        handler.addFilter(RedactSecrets())
    cfg = config_from_args(args)  # a configuration error is the first and only line
    speedups.announce()  # which implementation runs; PGCDC_NATIVE=on without it: stop here
    from connector.pipeline import run_pipeline

    return run_pipeline(cfg)

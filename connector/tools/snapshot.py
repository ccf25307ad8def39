"""pgcdc snapshot: ask the running producer of a slot to re-publish tables (incremental snapshot).

    pgcdc snapshot --dsn ... --slot pgcdc --tables 'public.orders,sales.*'
    pgcdc snapshot --dsn ... --slot pgcdc --cancel

The request goes into the signal table (`connector.snapshot.incremental.signals`, created on
first use, or beforehand by an administrator: docs/operations.md "Least privilege"), or, with no
write on the source, into the ``<prefix>.signal`` Kafka topic (`signal_topic`): on a standby, for
a role that may not write the table, or with ``--signal-channel kafka``
(`channel.choose_channel`). The producer streaming from the slot picks it up within a second and
publishes every row of the tables as ``r`` events in key-ordered chunks while it keeps
streaming. Progress is in the same table (and `pgcdc status`) or topic.

A request over Kafka is sent only under a prefix some producer publishes under (its
``<prefix>.offsets`` ledger or ``<prefix>.heartbeat`` topic exists, `_check_prefix`): under
any other (``--topic-prefix`` forgotten, the default ``pgcdc``), no producer would ever read
it, so it is refused in one line before anything is written.
"""

from __future__ import annotations

import argparse
from typing import Any

import psycopg
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from connector import config as config_mod
from connector.errors import ConfigError, SinkError, SourceError, first_line, is_privilege_error
from connector.names import TableName
from connector.options import add_options, parsed
from connector.replication import ReplicationAdmin
from connector.sink.offsets import offsets_topic
from connector.sink.settings import admin_config
from connector.snapshot.incremental import signals
from connector.snapshot.incremental.channel import choose_channel, signal_topic_name
from connector.snapshot.incremental.signal_topic import SignalTopic, TopicRequests


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("snapshot", help="re-publish tables while the producer streams")
    p.add_argument("--config", metavar="FILE", help="YAML configuration file")
    add_options(p, config_mod.Config, layered=True, names=SETTINGS[:3], helps={
        "slot": "the producer's replication slot (default pgcdc)",
        "publication": "its publication (default pgcdc)"})
    # The request's tables, not the producer's --tables.
    p.add_argument("--tables", metavar="PATTERNS",
                   help="comma-separated schema.table patterns (* allowed) of published tables")
    p.add_argument("--cancel", action="store_true",
                   help="cancel the slot's unfinished snapshot requests")
    add_options(p, config_mod.Config, layered=True, names=SETTINGS[3:], helps={
        "signal_channel": "where the request goes: auto (default: the signal table on a "
                          "primary the role may write it on, else Kafka), kafka (the "
                          "<prefix>.signal topic: no write on the source, e.g. a standby), "
                          "table",
        "bootstrap_servers": "Kafka bootstrap servers, for the kafka channel (env "
                             "KAFKA_BOOTSTRAP_SERVERS)",
        "topic_prefix": "the producer's topic prefix (default pgcdc)"})
    p.set_defaults(handler=handle)


# The settings of `pgcdc run` (connector/config.py) a request needs, and takes as flags.
SETTINGS = ("dsn", "slot", "publication", "signal_channel", "bootstrap_servers", "topic_prefix")


def handle(args: argparse.Namespace) -> int:
    if bool(args.tables) == bool(args.cancel):
        raise ConfigError("give --tables PATTERNS or --cancel")
    cfg = config_mod.load(args.config, parsed(args, config_mod.Config, SETTINGS),
                          validate=False)
    if not cfg.dsn:
        raise ConfigError("missing dsn (--dsn or PGCDC_DSN)")
    config_mod.check_dsn(cfg.dsn)
    admin = ReplicationAdmin.connect(cfg.dsn)
    try:
        standby = admin.in_recovery()
        channel = choose_channel(cfg.signal_channel, standby=standby,
                                 can_write_table=not standby and signals.can_write(admin.conn))
        if channel == "kafka" and cfg.signal_channel == "auto" and not standby \
                and not cfg.bootstrap_servers:
            # No Kafka given to request over: the signal table's error names the grant the
            # role lacks, which is the usual fix on a primary.
            channel = "table"
        if channel == "kafka":
            return _over_kafka(args, cfg, admin)
        if args.cancel:
            if not signals.table_exists(admin.conn):
                print(f"slot {cfg.slot}: no snapshot requests")
                return 0
            try:
                cancelled = signals.cancel(admin.conn, cfg.slot)
            except psycopg.Error as exc:
                raise _signal_write_error(exc, admin.role) from None
            print(f"slot {cfg.slot}: {cancelled} request(s) cancelled")
            return 0
        tables = _published(args, cfg, admin)
        try:
            signals.ensure_table(admin.conn)
            request = signals.request(admin.conn, cfg.slot, tables)
        except psycopg.Error as exc:
            raise _signal_write_error(exc, admin.role) from None
        print(f"snapshot request {request} for slot {cfg.slot}: {', '.join(map(str, tables))}")
    finally:
        admin.close()
    return 0


def _published(args: argparse.Namespace, cfg: config_mod.Config,
               admin: ReplicationAdmin) -> list[TableName]:
    """The published tables `--tables` names (refused in one line when one is not)."""
    published = {TableName(s, t) for s, t, _, _ in admin.published_tables(cfg.publication)}
    # A partition of a table published through its root: its rows alone, into the root's
    # topic (connector/snapshot/tables.py, published_table).
    published |= {TableName(*leaf) for root, leaves in admin.partition_leaves(
        cfg.publication).items() if TableName(*root) in published for leaf in leaves}
    patterns = [p.strip() for p in args.tables.split(",") if p.strip()]
    tables = [TableName(s, t) for s, t in admin.resolve_tables(patterns)]
    missing = [str(t) for t in tables if t not in published]
    if missing:
        raise ConfigError(f"not in publication {cfg.publication}: {', '.join(missing)}")
    return tables


def _over_kafka(args: argparse.Namespace, cfg: config_mod.Config,
                admin: ReplicationAdmin) -> int:
    """The request (or the cancel) as a record of ``<prefix>.signal``: nothing is written to
    PostgreSQL, which is only read (the tables' names)."""
    if not cfg.bootstrap_servers:
        raise ConfigError("the request goes over Kafka (a standby, or a role that may not "
                          "write the signal table): give --bootstrap-servers (or "
                          "KAFKA_BOOTSTRAP_SERVERS) and the producer's --topic-prefix")
    _check_prefix(cfg)
    topic = SignalTopic({"bootstrap.servers": cfg.bootstrap_servers, **cfg.kafka},
                        signal_topic_name(cfg.topic_prefix),
                        replication_factor=cfg.topic_replication_factor,
                        timeout_s=cfg.kafka_timeout_s)
    try:
        store = TopicRequests(topic)
        if args.cancel:
            cancelled = store.cancel(cfg.slot) if topic.catch_up() else 0
            print(f"slot {cfg.slot}: {cancelled} request(s) cancelled ({topic.topic})")
            return 0
        tables = _published(args, cfg, admin)
        request = store.request(cfg.slot, tables)
        print(f"snapshot request {request} for slot {cfg.slot} in {topic.topic}: "
              f"{', '.join(map(str, tables))}")
        return 0
    finally:
        topic.close()


def _check_prefix(cfg: config_mod.Config) -> None:
    """Refuse a prefix no producer publishes under: Kafka holds neither its ``<prefix>.offsets``
    (the ledger a producer writes as it creates its first topic) nor its ``<prefix>.heartbeat``."""
    kafka = {"bootstrap.servers": cfg.bootstrap_servers, **cfg.kafka}
    try:
        names = AdminClient(admin_config(kafka)).list_topics(timeout=cfg.kafka_timeout_s).topics
    except KafkaException as exc:
        raise SinkError(f"cannot list the topics of Kafka at {cfg.bootstrap_servers}: "
                        f"{exc.args[0].str()}", transient=True) from None
    prefix = cfg.topic_prefix
    if offsets_topic(prefix) not in names and f"{prefix}.heartbeat" not in names:
        raise ConfigError(f"no producer publishes under topic prefix {prefix!r} (Kafka has no "
                          f"{offsets_topic(prefix)} nor {prefix}.heartbeat), so none would "
                          f"read {signal_topic_name(prefix)}: give the producer's "
                          "--topic-prefix")


def _signal_write_error(exc: psycopg.Error, role: str) -> Exception:
    """The one line for a failed write of the signal table: the missing grant, or the error."""
    if is_privilege_error(exc):
        return signals.lacking_grant(exc, role)
    return SourceError(f"cannot write the signal table {signals.SIGNAL_TABLE}: "
                       f"{first_line(exc)}")

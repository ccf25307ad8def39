"""pgcdc status: the slot, its confirmed LSN, the WAL it holds back, the slot's incremental
snapshot requests (the signal table's, and the ``<prefix>.signal`` topic's when Kafka is
given), and per-table counts."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import psycopg

from connector import config as config_mod
from connector.avro.masking import rules_summary
from connector.errors import ConfigError, SinkError, SourceError, first_line, is_privilege_error
from connector.options import add_options, parsed
from connector.pgoutput.lsn import lsn_to_str
from connector.replication import ReplicationAdmin, table_trigger
from connector.replication.detach_trigger import installed as detach_triggers_installed
from connector.replication.failover import failover_state
from connector.replication.health import size, slot_warnings
from connector.replication.lock_free import is_lock_timeout, lock_wait_bounded
from connector.replication.published import setting_for
from connector.snapshot.incremental import signals
from connector.snapshot.incremental.channel import signal_topic_name
from connector.snapshot.incremental.signal_topic import SignalTopic, as_request

SIGNAL_READ_TIMEOUT_S = 10.0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("status", help="show the replication slot and published tables")
    p.add_argument("--config", metavar="FILE", help="YAML configuration file")
    add_options(p, config_mod.Config, layered=True, names=SETTINGS, helps={
        "wal_warn_bytes": "warn when the slot retains more WAL than this (default 1 GiB)",
        "bootstrap_servers": "Kafka bootstrap servers (env KAFKA_BOOTSTRAP_SERVERS): also list "
                             "the snapshot requests sent over Kafka (the <prefix>.signal topic)",
        "topic_prefix": "the producer's topic prefix (default pgcdc)"})
    p.set_defaults(handler=handle)


# The settings of `pgcdc run` (connector/config.py) status reads, and takes as flags.
SETTINGS = ("dsn", "slot", "publication", "wal_warn_bytes", "bootstrap_servers", "topic_prefix")


def handle(args: argparse.Namespace) -> int:
    # status needs only the database: Kafka and registry settings may be absent.
    cfg = config_mod.load(args.config, parsed(args, config_mod.Config, SETTINGS),
                          validate=False)
    if not cfg.dsn:
        raise ConfigError("missing dsn (--dsn or PGCDC_DSN)")
    config_mod.check_dsn(cfg.dsn)
    admin = ReplicationAdmin.connect(cfg.dsn)
    try:
        slot = admin.slot(cfg.slot)
        if slot is None:
            print(f"slot {cfg.slot}: does not exist")
        else:
            print(f"slot {slot.name}: plugin {slot.plugin}, "
                  f"{'active (pid ' + str(slot.active_pid) + ')' if slot.active else 'inactive'}, "
                  f"wal_status {slot.wal_status}")
            print(f"  confirmed flush LSN: "
                  f"{lsn_to_str(slot.confirmed_flush_lsn) if slot.confirmed_flush_lsn else '-'}")
            retained = slot.retained_bytes
            print(f"  WAL retained: {'-' if retained is None else size(retained)}")
            print(f"  failover: {failover_state(admin.conn, slot.name)}")
            for warning in slot_warnings(slot, cfg.wal_warn_bytes):
                print(f"  warning: {warning}")
        for line in request_lines(_table_requests(admin, cfg.slot)):
            print(line)
        if cfg.bootstrap_servers:
            for line in _topic_request_lines(cfg):
                print(line)
        if not admin.publication_exists(cfg.publication):
            print(f"publication {cfg.publication}: does not exist")
            return 1 if slot is None else 0
        tables = admin.published_tables(cfg.publication)
        via_root = admin.publishes_via_root(cfg.publication)
        print(f"publication {cfg.publication}: {len(tables)} table(s); {via_root_line(via_root)}")
        if via_root or cfg.detach_deletes:
            print(f"  {detach_line(cfg.detach_deletes, detach_triggers_installed(admin.conn))}")
        if cfg.create_publication:
            comment = table_trigger.installed_comment(admin.conn, cfg.publication)
            print(f"  {table_trigger_line(cfg, comment)}")
        counts = admin.table_counts([(s, t) for s, t, _, _ in tables])
        published = _published_columns(admin, cfg.publication)
        settings = cfg.published_settings()  # the masks are pgcdc's, not the publication's
        for (schema, table, ident, has_pk), (inserts, updates, deletes, live) in zip(
                tables, counts, strict=True):
            print(f"  {schema}.{table}: ~{live} rows; since stats reset {inserts} inserts, "
                  f"{updates} updates, {deletes} deletes; replica identity "
                  f"{ {'d': 'default', 'f': 'full', 'i': 'index', 'n': 'nothing'}[ident] }"
                  f"{'' if has_pk or ident != 'd' else ' (no primary key!)'}")
            if (schema, table) in published:
                setting = setting_for(settings, schema, table)
                masks = rules_summary(dict(setting.mask)) if setting is not None else ""
                print(f"    {published_line(*published[(schema, table)])}"
                      f"{'; ' + masks if masks else ''}")
    finally:
        admin.close()
    return 0 if slot is not None else 1


def _published_columns(admin: ReplicationAdmin, publication: str
                       ) -> dict[tuple[str, str], tuple[list[str], int, str | None]]:
    """`ReplicationAdmin.published_columns`, or none while a table with a row filter is locked
    (PostgreSQL opens the table to print its filter; a migration may hold it for minutes):
    status answers without them, saying so."""
    try:
        with lock_wait_bounded(admin.conn):
            return admin.published_columns(publication)
    except psycopg.Error as exc:
        if not is_lock_timeout(exc):
            raise
        print("  (column lists and row filters not shown: a published table is locked by "
              "another session, a migration's?)")
        return {}


def via_root_line(via_root: bool) -> str:
    """How the publication publishes partitioned tables (docs/publishing.md)."""
    return "partitions published " + ("through their root (publish_via_partition_root = "
                                      "true)" if via_root else "leaf by leaf "
                                      "(publish_via_partition_root = false)")


def detach_line(wanted: bool, present: bool) -> str:
    """Whether a DETACHed partition's rows are deleted from its root's topic
    (``detach_deletes``, connector/replication/detach_trigger.py)."""
    state = "event triggers installed" if present else "event triggers not installed"
    if wanted:
        return f"detach_deletes: on, {state}"
    return f"detach_deletes: off ({state}): a DETACHed partition's rows stay in the root's topic"


def table_trigger_line(cfg: config_mod.Config, comment: str | None) -> str:
    """How new tables join the publication (``table_trigger``, docs/publishing.md "New
    tables"): in their creating transaction, or at the table watcher's next check."""
    if comment is None:
        state = "event trigger not installed"
    elif comment == cfg.table_trigger_settings().comment():
        state = "event trigger installed"
    else:
        state = "event trigger installed with other settings (pgcdc run re-creates it)"
    if cfg.table_trigger:
        return f"table_trigger: on, {state}"
    if comment is not None:
        return (f"table_trigger: off, but its {state}: it still adds new tables; remove it: "
                f"{table_trigger.remove_sql(cfg.publication)}")
    return ("table_trigger: off: a new table joins within ~2 s, the changes of its first "
            "seconds as an incremental snapshot of its rows")


def published_line(columns: list[str], live: int, row_filter: str | None) -> str:
    """What pgoutput sends of a table: its columns (all, or the column list's) and rows."""
    shown = f"all {len(columns)} columns" if len(columns) == live else \
        f"columns {', '.join(columns)} ({len(columns)} of {live})"
    return f"published: {shown}; rows: {f'WHERE {row_filter}' if row_filter else 'all'}"


def _table_requests(admin: ReplicationAdmin, slot: str) -> list[signals.SnapshotRequest]:
    """The slot's requests in the signal table (none when it does not exist)."""
    if not signals.table_exists(admin.conn):
        return []
    try:
        return signals.requests(admin.conn, slot)
    except psycopg.Error as exc:
        if is_privilege_error(exc):
            raise signals.lacking_grant(exc, admin.role) from None
        raise SourceError(f"cannot read the signal table {'.'.join(signals.SIGNAL_TABLE)}: "
                          f"{first_line(exc)}") from None


def _topic_request_lines(cfg: config_mod.Config) -> list[str]:
    """The slot's requests in ``<prefix>.signal``, read to its end; Kafka out of reach is a
    warning line (the rest of the status is the database's)."""
    topic = SignalTopic({"bootstrap.servers": cfg.bootstrap_servers, **cfg.kafka},
                        signal_topic_name(cfg.topic_prefix),
                        timeout_s=min(cfg.kafka_timeout_s, SIGNAL_READ_TIMEOUT_S))
    try:
        if not topic.catch_up():
            return []
        found = [as_request(s) for s in topic.log.of_slot(cfg.slot)]
    except SinkError as exc:
        return [f"warning: snapshot requests over Kafka not listed: {exc}"]
    finally:
        topic.close()
    return request_lines(found, topic.topic)


def request_lines(found: Sequence[signals.SnapshotRequest], topic: str | None = None
                  ) -> list[str]:
    """One line per unfinished request and for the last finished one, oldest first; `topic`:
    they were sent over that topic (said on each line)."""
    unfinished = [r for r in found if r.state in ("pending", "running")]
    finished = [r for r in found if r.state not in ("pending", "running")]
    lines = []
    for request in unfinished + finished[-1:]:
        table = request.tables[min(request.table_index, len(request.tables) - 1)]
        where = f"at {table}, table {min(request.table_index + 1, len(request.tables))} of " \
            f"{len(request.tables)}" if request.state == "running" else ", ".join(request.tables)
        lines.append(f"incremental snapshot {request.id}"
                     f"{f' (over {topic})' if topic else ''}: {request.state}, {where}; "
                     f"{request.chunks} chunk(s), {request.rows} rows"
                     f"{f' ({request.rate:,.0f} rows/s)' if request.rate else ''}"
                     f"{'; ' + request.message if request.message else ''}")
    return lines

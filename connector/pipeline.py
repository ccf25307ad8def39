"""`pgcdc run`: the loop that joins the replication stream, the assembler and the Kafka sink.

    frames → Decoder → Assembler → Publisher → KafkaSink ─delivery reports→ AckTracker
                                                                        └→ flush LSN → PostgreSQL

The flush LSN sent to PostgreSQL is the tracker's delivered LSN: the end LSN of the newest
transaction whose every event Kafka acknowledged. When nothing is buffered or in flight, the
server's keepalive position is confirmed too, so an idle slot does not hold WAL. Either is
confirmed only once a registry sweep that began after it was reached found every schema id
still registered (`SweepGate`, connector/avro/sweep_gate.py): changes published with an id
deleted meanwhile are re-sent by the restart, never lost. A graceful stop runs one last sweep.
A lost replication connection is retried with backoff from the slot (duplicates only of
unconfirmed work); a Kafka delivery failure stops the run without advancing the LSN.

Before the first session, a new slot (or --snapshot initial_only) gets the initial snapshot
(connector/snapshot): the slot is created at the snapshot's consistent point once every row
event is acknowledged, and streaming resumes from there.

While streaming, between reads, `TableWatcher` adds new tables matching --tables to the
publication, `DdlResync` requests a re-sync of tables whose rows a DDL statement changed
(connector/snapshot/incremental/resync.py), and `IncrementalSnapshots` runs the requests of `pgcdc
snapshot` (and of new tables, and re-syncs) in watermarked chunks
(connector/snapshot/incremental/window.py), or read-only ones on a standby and for requests
sent over Kafka (connector/snapshot/incremental/channel.py, readonly.py).
"""

from __future__ import annotations

import gc
import logging
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

import psycopg
from confluent_kafka import KafkaException, Producer

from connector import metrics
from connector.assembler import Assembler, LogicalMessage
from connector.avro import AvroEncoder, CodecFactory, SchemaRegistry, registry_ids
from connector.avro.oversized import OmitOversized, event_limit
from connector.avro.sweep_gate import SweepGate
from connector.config import Config
from connector.control import HEARTBEAT_PREFIX, ROWS_PREFIX
from connector.errors import (
    CatalogChanged,
    CdcError,
    ConfigError,
    SinkError,
    SourceError,
    first_line,
)
from connector.flow import RECONNECT_BACKOFF_S, confirmable, reconnect_delay, status_due
from connector.names import SIGNAL_TABLE, TableName, table_topic
from connector.pgoutput import Decoder, PrimaryKeepalive, Relation, Type, XLogData, lsn_to_str
from connector.pgoutput.messages import Message, PgOutputMessage
from connector.pgtypes import TypeCatalog
from connector.publisher import Publisher
from connector.replication import (
    ReplicationAdmin,
    ReplicationStream,
    StreamOptions,
    table_trigger,
)
from connector.replication.detach_trigger import ensure_detach_trigger, remove_sql
from connector.replication.drops import DropWatch
from connector.replication.failover import check_slot_continuity, ensure_failover
from connector.replication.health import lag_warning
from connector.replication.standby import (
    StandbyFacts,
    primary_refusals,
    read_facts,
    standby_refusals,
    standby_warnings,
)
from connector.sink import (
    AckTracker,
    DeliveryTracker,
    KafkaSink,
    Sink,
    TopicCreator,
    TopicSpec,
    producer_config,
)
from connector.sink.offsets import TopicLedger, offsets_topic
from connector.sink.transactional import BatchLimits, ExactlyOnceSettings, exactly_once_sink
from connector.snapshot import SnapshotSettings, take_snapshot
from connector.snapshot.incremental import DdlResync, IncrementalSnapshots, TableWatcher, signals
from connector.snapshot.incremental.channel import (
    choose_channel,
    consumed_channels,
    signal_topic_name,
)
from connector.snapshot.incremental.signal_topic import SignalTopic, TopicRequests
from connector.snapshot.tables import RootRelations
from connector.source_catalog import PostgresCatalog

log = logging.getLogger(__name__)

# Streaming allocates a few container objects per change (messages, Change, Envelope fields),
# nearly all freed by reference counting at once. With CPython's default gen0 threshold (700)
# the cyclic collector still runs every few hundred changes, and each older-generation pass
# walks every long-lived object (modules, schemas, codecs): ~6% of the loop in py-spy. So
# streaming freezes what start-up allocated (collections skip it from then on) and collects
# gen0 every 50,000 net allocations instead; memory stays bounded because the garbage the
# loop makes is not cyclic (what is, still goes at the next, rarer, collection).
GC_GEN0_THRESHOLD = 50_000
LAG_WARNING_INTERVAL_S = 300.0  # a growing lag is logged at most this often
# Times the publication is set at start when the application drops or renames a table it
# listed meanwhile (each time lists them again).
CATALOG_ATTEMPTS = 5



# librdkafka's words for a record over a size limit: the producer's own (message.max.bytes,
# refused at produce) or the broker's (the topic's max.message.bytes, a failed delivery).
_TOO_LARGE = ("too large", "msg_size_too_large", "larger than")


def oversized_remedy(message: str) -> str | None:
    """What to do when Kafka refused a record for its size (None: not that failure). Every
    restart meets the same record (its position is not confirmed), so the limits must rise."""
    if not any(words in message.lower() for words in _TOO_LARGE):
        return None
    return ("a row is larger than Kafka accepts, and every restart meets it again: raise the "
            "topic's max.message.bytes (broker default: message.max.bytes) and the producer's "
            "message.max.bytes (--kafka message.max.bytes=N) above the record size "
            "(docs/troubleshooting.md)")

@dataclass
class Session:
    """The parts of one replication session (`Pipeline._open_session`)."""

    start: int  # the slot's confirmed position the stream starts from
    sink: Sink
    tracker: DeliveryTracker
    types: TypeCatalog  # learns the Type messages of the stream
    publisher: Publisher
    snapshots: IncrementalSnapshots
    watcher: TableWatcher
    resync: DdlResync
    stream: ReplicationStream
    decoder: Decoder
    assembler: Assembler

    def close(self) -> None:
        self.assembler.close()
        self.stream.close()
        self.snapshots.close()


class Pipeline:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.stopping = False
        self.needs_snapshot = False
        self.snapshot_relations: tuple[Relation, ...] = ()  # the initial snapshot's tables
        # What this start created, undone if it fails before streaming (see `_undo_start`).
        self.created_publication = False
        self.slot_existed = True
        self.streaming = False
        # Highest flush LSN sent to the server: what every reconnect's slot must not be ahead of.
        self.sent_flush: int | None = None
        self.resync: DdlResync | None = None  # re-sync after DDL, made by the first session
        # Published tables' relation ids, kept across reconnects (tables dropped meanwhile).
        self.drops = DropWatch(cfg.slot, cfg.publication, skip=[SIGNAL_TABLE])
        self._heartbeat_failure: str | None = None  # the last heartbeat's error, if it failed
        # A standby at start (None: a primary); the primary's connection of --heartbeat-dsn.
        self.standby: StandbyFacts | None = None
        self.session_on_standby = False  # the current session began on a standby
        self._heartbeat_conn: psycopg.Connection[tuple] | None = None  # type: ignore[type-arg]
        self.admin = self._connect_admin()
        self.db = str(self.admin.conn.info.dbname)
        self.registry = SchemaRegistry({"url": cfg.schema_registry_url, **cfg.schema_registry},
                                       attempts=cfg.schema_registry_attempts)
        # What the registry sweeps vouch for: the flush LSN never passes it (sweep_gate.py).
        self.gate = SweepGate()
        self.kafka_settings = {"bootstrap.servers": cfg.bootstrap_servers, **cfg.kafka}
        # librdkafka logs through Python logging (else it prints to stderr from its threads).
        admin_settings = {**self.kafka_settings,
                          "logger": logging.getLogger("connector.sink.librdkafka")}
        try:  # librdkafka checks every property when a client is built: fail before creating
            Producer(producer_config(admin_settings))
            self.topics = TopicCreator(admin_settings, TopicSpec(
                partitions=cfg.topic_partitions, replication_factor=cfg.topic_replication_factor,
                retention_ms=cfg.topic_retention_ms), timeout_s=cfg.kafka_timeout_s,
                ledger=TopicLedger(admin_settings, offsets_topic(cfg.topic_prefix),
                                   replication_factor=cfg.topic_replication_factor,
                                   timeout_s=cfg.kafka_timeout_s))
        except KafkaException as exc:
            raise ConfigError(f"Kafka settings rejected: {exc.args[0].str()}") from None

    # ------------------------------------------------------------------ setup

    def _connect_admin(self) -> ReplicationAdmin:
        """The admin connection, knowing what the publication publishes of each table."""
        admin = ReplicationAdmin.connect(self.cfg.dsn)
        if self.cfg.create_publication:
            admin.table_settings = self.cfg.published_settings()
            admin.generated_columns = self.cfg.publish_generated_columns
            admin.via_root = self.cfg.publish_via_partition_root
        return admin

    def prepare_source(self) -> int:
        """Check the server, create/check publication and slot; returns the protocol version.

        A missing slot is created here only with ``--snapshot never``, and only when this
        connector never published before (no ``<prefix>.*`` topic holds an event): else the
        changes between the lost slot and now are gone, and a new slot would hide that.
        Otherwise the snapshot creates it (`needs_snapshot` tells whether one is due)."""
        self.admin.check_wal_level()
        self._check_standby()
        features = self.admin.features
        if self.cfg.failover_slot and not features.failover_slots:
            raise ConfigError(f"--failover-slot needs PostgreSQL 17+, the server is "
                              f"{features.major}")
        self._check_topic_names()
        self._refuse_compacted_topics()
        slot = self.admin.slot(self.cfg.slot)
        if self.cfg.create_publication:
            # Streaming resumes from the slot: tables created meanwhile join through the table
            # watcher, with a snapshot of the rows the slot's stream cannot carry.
            for attempt in range(1, CATALOG_ATTEMPTS + 1):
                try:
                    self.created_publication = self.admin.ensure_publication(
                        self.cfg.publication, self.cfg.tables, keyless=self.cfg.keyless_tables,
                        exclude=[signals.SIGNAL_TABLE],
                        all_tables=self.cfg.all_tables_publication,
                        add_later=slot is not None and self.cfg.snapshot != "initial_only")
                    break
                except CatalogChanged as exc:  # a table dropped or renamed meanwhile
                    if attempt == CATALOG_ATTEMPTS:
                        raise
                    log.info("%s: listing the tables again", exc)
            if slot is not None and self.cfg.snapshot != "initial_only":
                if self.admin.resettled:
                    self._resync_resettled(self.admin.resettled)
                if self.admin.via_root_switched:
                    self._resync_partitioned()
        elif not self.admin.publication_exists(self.cfg.publication):
            raise SourceError(f"publication {self.cfg.publication!r} does not exist")
        else:  # the user's: masks hold only on what it sends (exclude: not sent at all)
            refused = self.admin.user_mask_refusals(self.cfg.publication,
                                                    self.cfg.published_settings())
            if refused:
                more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
                raise ConfigError(refused[0] + more)
        self.admin.warn_about_replica_identity(self.cfg.publication)
        if self.cfg.detach_deletes:  # a standby: installed on the primary, only checked here
            done = ensure_detach_trigger(self.admin.conn, read_only=self.standby is not None)
            log.info("detach_deletes: event triggers %s (a partition detached from a root "
                     "published through it: its keys are deleted from the root's topic); "
                     "remove them with: %s", done, remove_sql())
        self._table_trigger()
        self.slot_existed = slot is not None
        if self.cfg.snapshot == "initial_only":
            self.needs_snapshot = True
        elif slot is None:
            if not self.cfg.create_slot:
                raise SourceError(f"replication slot {self.cfg.slot!r} does not exist")
            if self.cfg.snapshot == "initial":
                self.needs_snapshot = True
            else:
                self._refuse_gap()
                slot = self.admin.create_slot(self.cfg.slot)
        if slot is not None:
            self.admin.check_slot(slot)
        return features.protocol_version

    def _table_trigger(self) -> None:
        """table_trigger: install (or check) the event trigger adding new tables to the
        publication in their creating transaction; off, one line says what the table watcher's
        way loses (connector/replication/table_trigger.py)."""
        publication = self.cfg.publication
        if self.cfg.table_trigger:  # a standby: installed on the primary, only checked here
            done = table_trigger.ensure_table_trigger(
                self.admin.conn, self.cfg.table_trigger_settings(),
                read_only=self.standby is not None)
            log.info("table_trigger: event trigger %s: a new table matching --tables joins "
                     "publication %s in the transaction that creates it; remove it with: %s",
                     done, publication, table_trigger.remove_sql(publication))
            return
        if table_trigger.installed_comment(self.admin.conn, publication) is not None:
            log.warning("table_trigger is off but the event trigger of publication %s is "
                        "installed: it still adds new tables (with the settings it was "
                        "installed with); remove it with: %s", publication,
                        table_trigger.remove_sql(publication))
        elif self.cfg.create_publication and not self.cfg.all_tables_publication:
            log.info("new tables matching --tables join publication %s through the table "
                     "watcher, within ~2 s of their creation: their changes before that "
                     "arrive only as an incremental snapshot of their rows, and a table "
                     "dropped within that time is not seen (--table-trigger adds them in the "
                     "transaction that creates them)", publication)

    def _resync_resettled(self, tables: list[tuple[str, str]]) -> None:
        """Tables whose column list or row filter table_settings changed while the slot
        existed: rows that entered the filter (or columns now published) were never streamed,
        so an incremental snapshot re-reads them (keyed tables; docs/publishing.md)."""
        names = [TableName(s, t) for s, t in tables]
        whole_row = {TableName(s, t) for s, t in self.admin.full_identity_tables(tables)}
        keyed = [n for n in names if n not in whole_row]
        if not keyed or not self.cfg.resync_on_ddl:
            log.warning("publication settings of %s changed: rows that now pass the filter are "
                        "not re-read (re-publish them with: pgcdc snapshot --tables %s)",
                        ", ".join(map(str, names)), ",".join(map(str, names)))
            return
        signals.ensure_table(self.admin.conn)
        signals.request(self.admin.conn, self.cfg.slot, keyed,
                        message="re-sync after a change of table_settings")
        log.info("publication settings of %s changed: re-read by an incremental snapshot",
                 ", ".join(map(str, keyed)))

    def _resync_partitioned(self) -> None:
        """publish_via_partition_root changed on the existing publication: the partitioned
        tables' rows go to other topics from now on (the roots', or the leaves'), which hold
        none of the rows written before, so an incremental snapshot reads them there
        (connector/replication/partitions.py)."""
        tables = self.admin.partitioned_published(self.cfg.publication)
        whole_row = {TableName(s, t) for s, t in self.admin.full_identity_tables(tables)}
        keyed = [n for n in (TableName(s, t) for s, t in tables) if n not in whole_row]
        if keyed:
            signals.ensure_table(self.admin.conn)
            signals.request(self.admin.conn, self.cfg.slot, keyed,
                            message="re-read after publish_via_partition_root changed")
            log.info("partitioned tables re-read into their new topics: %s",
                     ", ".join(map(str, keyed)))
        for name in sorted(whole_row):
            log.warning("%s has REPLICA IDENTITY FULL: not re-read into its new topic (an "
                        "incremental snapshot needs a key)", name)

    def _check_standby(self) -> None:
        """On a standby (connector/replication/standby.py): refuse what cannot work, in one line;
        warn about what is risky; check the primary of --heartbeat-dsn."""
        self.standby = facts = read_facts(self.admin.conn)
        if facts is None:
            return
        refusals = standby_refusals(facts)
        if refusals:
            raise SourceError(refusals[0])
        for warning in standby_warnings(facts):
            log.warning("%s", warning)
        log.info("capturing from a standby (PostgreSQL %d): the publication is the primary's; "
                 "tables created later are not added to it by pgcdc; incremental snapshots "
                 "and re-syncs after DDL %s", facts.major,
                 "run here read-only, requested over Kafka (<prefix>.signal)"
                 if self.cfg.signal_channel != "table" else
                 "are off (signal_channel: table; a standby cannot write the signal table)")
        if self.cfg.heartbeat_interval_s <= 0:
            return
        if not self.cfg.heartbeat_dsn:
            log.warning("heartbeats are off while the server is a standby (it cannot write "
                        "their logical message): give the primary's DSN as --heartbeat-dsn for "
                        "the merge job's consistent cuts and tombstone expiry")
            return
        try:
            conn = self._heartbeat_connection()
            wal_level, in_recovery = conn.execute(
                "SELECT current_setting('wal_level'), pg_is_in_recovery()").fetchone() \
                or ("", False)
            system = _system_identifier(conn)
        except psycopg.Error as exc:
            raise SourceError(f"--heartbeat-dsn: cannot query the primary: {first_line(exc)}",
                              transient=isinstance(exc, psycopg.OperationalError)) from None
        if in_recovery:
            raise SourceError("--heartbeat-dsn reaches a standby, not the primary: heartbeats "
                              "are logical messages written on the primary")
        refusals = primary_refusals(str(wal_level), system,
                                    _system_identifier(self.admin.conn))
        if refusals:
            raise SourceError(refusals[0])
        log.info("heartbeats are emitted on the primary (--heartbeat-dsn) and reach the slot "
                 "by replication")

    def _heartbeat_connection(self) -> psycopg.Connection[tuple]:  # type: ignore[type-arg]
        """The primary's connection (--heartbeat-dsn), opened again after a failure; short
        timeouts: it is used from the streaming loop."""
        conn = self._heartbeat_conn
        if conn is None or conn.closed or conn.broken:
            conn = self._heartbeat_conn = psycopg.connect(
                self.cfg.heartbeat_dsn, autocommit=True, connect_timeout=3,
                application_name="pgcdc-heartbeat", options="-c statement_timeout=5000")
        return conn

    def _check_topic_names(self) -> None:
        """Every table to publish gets a topic Kafka accepts (raises before anything exists)."""
        if self.cfg.create_publication:
            # `*` may match nothing yet: the watcher lists (or FOR ALL TABLES publishes) tables
            # created later.
            tables = self.admin.matching_tables(["*.*"]) if list(self.cfg.tables) == ["*"] \
                else self.admin.resolve_tables(self.cfg.tables)
        else:
            tables = [(s, t) for s, t, _, _ in self.admin.published_tables(self.cfg.publication)]
        for schema, table in tables:
            table_topic(self.cfg.topic_prefix, schema, table)

    def _undo_start(self) -> None:
        """A start that failed before streaming leaves nothing behind: the slot it created
        (which would hold WAL forever) and the publication it created are dropped."""
        try:
            if not self.slot_existed and self.admin.slot(self.cfg.slot) is not None:
                self.admin.drop_slot(self.cfg.slot)
                log.info("dropped replication slot %s created by this failed start", self.cfg.slot)
            if self.created_publication:
                self.admin.drop_publication(self.cfg.publication)
                log.info("dropped publication %s created by this failed start",
                         self.cfg.publication)
        except (CdcError, psycopg.Error) as exc:
            log.warning("could not undo this failed start (%s): check for replication slot %s "
                        "and publication %s", first_line(exc), self.cfg.slot,
                        self.cfg.publication)

    def _refuse_compacted_topics(self) -> None:
        """Every table topic gets keyless records (a truncate marker at each snapshot, the
        events of tables without a key), which Kafka refuses on a compacted topic: stop before
        anything is created rather than at the first snapshot."""
        compacted = self.topics.compacted_topics(self.cfg.topic_prefix)
        if not compacted:
            return
        shown = ", ".join(compacted[:3]) + (f" and {len(compacted) - 3} more"
                                            if len(compacted) > 3 else "")
        raise SinkError(
            f"topics of prefix {self.cfg.topic_prefix!r} are compacted ({shown}): Kafka refuses "
            "the keyless records (truncate markers) pgcdc writes there. Recreate them with "
            "cleanup.policy=delete (what pgcdc creates), or let pgcdc create them; "
            "--tombstones still writes a tombstone after each delete for consumers that use them")

    def _refuse_gap(self) -> None:
        """``--snapshot never`` with a missing slot: fine for a first run; after this connector
        published (its topics hold events), a new slot would silently skip every change made
        since the old one was lost, so stop and let the operator choose."""
        held = self.topics.topics_with_events(self.cfg.topic_prefix)
        if not held:
            return
        shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        raise SourceError(
            f"replication slot {self.cfg.slot!r} does not exist, but topics of prefix "
            f"{self.cfg.topic_prefix!r} already hold this connector's events ({shown}): the "
            "changes made since the slot was lost cannot be recovered. Run with --snapshot "
            "initial to publish the tables again from a new snapshot, or create the slot "
            f"deliberately (SELECT pg_create_logical_replication_slot('{self.cfg.slot}', "
            "'pgoutput')) to stream from now on, accepting the gap")

    def snapshot(self) -> bool:
        """The initial snapshot (connector/snapshot); False when stopped before it completed."""
        cfg = self.cfg
        settings = SnapshotSettings(cfg.dsn, cfg.slot, cfg.publication, cfg.topic_prefix,
                                    workers=cfg.snapshot_workers,
                                    chunk_rows=cfg.snapshot_chunk_rows, binary=cfg.binary,
                                    exactly_once=cfg.exactly_once,
                                    oversized_limit=self._oversized_policy()[1],
                                    truncate_records=cfg.truncate_records,
                                    masking=cfg.masking(), value_format=cfg.value_format)
        outboxes = cfg.outbox_routes()
        result = take_snapshot(settings, self.admin, self.registry, self.kafka_settings,
                               self.topics, should_stop=lambda: self.stopping,
                               keep_slot=cfg.snapshot != "initial_only",
                               skip=lambda t: outboxes.is_outbox(*t))
        self.snapshot_relations = result.relations  # what DdlResync compares first
        return result.completed

    # ------------------------------------------------------------------ run

    def run(self) -> None:
        try:
            metrics.serve(self.cfg.metrics_port, self.cfg.metrics_host)
        except OSError as exc:  # socket.gaierror (an unknown host) has a strerror too
            raise ConfigError(f"cannot serve metrics on port {self.cfg.metrics_port} of "
                              f"{self.cfg.metrics_host}: {exc.strerror or exc}") from None
        self.registry.check_reachable()
        try:
            self._start_and_stream()
        except SinkError as exc:
            if not self.streaming:
                self._undo_start()
            remedy = oversized_remedy(str(exc))
            if remedy is None:
                raise
            raise SinkError(f"{exc}; {remedy}", transient=exc.transient) from None
        except BaseException:
            if not self.streaming:
                self._undo_start()
            raise

    def _start_and_stream(self) -> None:
        proto = self.prepare_source()
        if self.needs_snapshot:
            completed = self.snapshot()
            if not completed or self.cfg.snapshot == "initial_only":
                return
        _tune_gc()
        attempt = 0
        while not self.stopping:
            try:
                if attempt:
                    # A fresh admin connection: the lost session's one is dead (using it
                    # would raise OperationalError). Inside the try, so while the server is
                    # still down this fails with a transient SourceError and counts as an
                    # attempt.
                    self.admin.close()
                    self.admin = self._connect_admin()
                self._session(proto)
                return
            except (SourceError, SinkError) as exc:
                delay = reconnect_delay(exc, attempt, stopping=self.stopping)
                if delay is None:
                    raise
                attempt += 1
                log.warning("%s; reconnecting in %ss (attempt %d/%d)", exc, delay, attempt,
                            len(RECONNECT_BACKOFF_S))
                self._sleep(delay)

    def _session(self, proto: int) -> None:
        """One replication connection, from the slot's confirmed position to a stop."""
        self._stream(self._open_session(proto))

    def _open_session(self, proto: int) -> Session:
        """Check the slot and build a session's parts: the Kafka sink and its tracker, the
        codecs and publisher, the snapshot and catalog watchers, the replication stream."""
        slot = self.admin.slot(self.cfg.slot)
        info = self.admin.conn.info  # with a multi-host DSN, the host libpq chose
        check_slot_continuity(self.cfg.slot, slot.confirmed_flush_lsn if slot else None,
                              slot is not None, self.sent_flush, f"{info.host}:{info.port}")
        assert slot is not None
        self.admin.check_slot(slot)
        ensure_failover(self.cfg.dsn, self.admin.conn, self.cfg.slot, self.cfg.failover_slot)
        tracker: DeliveryTracker
        sink: Sink
        oversized, limit = self._oversized_policy()
        if self.cfg.exactly_once:
            sink, tracker = exactly_once_sink(self._exactly_once_settings(), self.kafka_settings,
                                              self.topics, slot.confirmed_flush_lsn,
                                              oversized=oversized, max_event_bytes=limit)
        else:
            acks = AckTracker(slot.confirmed_flush_lsn)  # the sink reads its failures too
            tracker = acks
            sink = KafkaSink(self.kafka_settings, acks, topics=self.topics,
                             tombstones=self.cfg.tombstones, oversized=oversized,
                             truncate_records=self.cfg.truncate_records,
                             max_event_bytes=limit, metadata_timeout_s=self.cfg.kafka_timeout_s)
        sink.add_check(self.registry.check_ids)  # a deleted subject stops us (registry.py)
        gate = self.gate
        gate.start(slot.confirmed_flush_lsn)
        self.registry.watch(gate, self.cfg.schema_check_interval_s)
        types = TypeCatalog()
        codecs = CodecFactory(types, PostgresCatalog(self.admin.conn, types),
                              registry_ids(self.registry), prefix=self.cfg.topic_prefix,
                              db=self.db, masking=self.cfg.masking(),
                              value_format=self.cfg.value_format,
                              truncate_records=self.cfg.truncate_records)
        encoder = AvroEncoder(self.registry, prefix=self.cfg.topic_prefix, db=self.db)
        if self.cfg.heartbeat_interval_s > 0:
            encoder.prepare_heartbeats()
        # The incremental snapshots and the publisher need each other only through the
        # stream: the snapshots write to the sink themselves, and the publisher hands them the
        # watermarks and changed keys it meets. So the snapshots come first (they need the
        # codecs, sink and tracker, not the publisher), and the publisher gets them built.
        # A standby runs no DDL and writes no signal table: the watcher only reports tables;
        # snapshot requests (and re-syncs) come over Kafka and their chunks are read there
        # without writes (channel.py; read again at each session: a promotion makes the
        # server a primary, the signal table's channel then opens too).
        standby = self.admin.in_recovery()
        self.session_on_standby = standby
        table_requests, kafka_requests = consumed_channels(self.cfg.signal_channel,
                                                           standby=standby)
        topic = SignalTopic(self.kafka_settings, signal_topic_name(self.cfg.topic_prefix),
                            replication_factor=self.cfg.topic_replication_factor,
                            timeout_s=self.cfg.kafka_timeout_s) if kafka_requests else None
        snapshots = IncrementalSnapshots(
            self.cfg.dsn, self.cfg.slot, self.cfg.publication,
            self.admin.features, codecs.codec, sink, tracker,
            chunk_rows=self.cfg.incremental_chunk_rows, table_requests=table_requests,
            signal_topic=topic, standby=standby, position=slot.confirmed_flush_lsn or 0)
        outboxes = self.cfg.outbox_routes()
        snapshots.skip = lambda t: outboxes.is_outbox(*t)  # their rows were delivered
        assembler = Assembler(spill_bytes=self.cfg.spill_bytes,
                              expanders={ROWS_PREFIX: self._created_rows(types)})
        roots = RootRelations(self.admin.conn, self.cfg.publication, self.admin.features,
                              assembler.relations) if self.cfg.detach_deletes else None
        publisher = Publisher(codecs, encoder, sink, tracker, snapshots=snapshots,
                              transaction_topic=self.cfg.transaction_topic, outboxes=outboxes,
                              detached_roots=roots, slot=self.cfg.slot,
                              publication=self.cfg.publication)
        watcher = TableWatcher(self.admin, self.cfg.publication, self.cfg.tables, self.cfg.slot,
                               manage_publication=self.cfg.create_publication and not standby,
                               keyless=self.cfg.keyless_tables,
                               all_tables_publication=self.cfg.all_tables_publication,
                               resync_partitions=not standby,
                               detach_deletes=self.cfg.detach_deletes,
                               drops=self.drops, record_drops=not standby)
        # One for the whole run: what it saw before a reconnect stays its baseline, so DDL
        # made while the stream was reconnecting is still noticed.
        if self.resync is None:
            self.resync = DdlResync(self.admin.conn, self.cfg.publication, self.cfg.slot,
                                    self.admin.features, enabled=self.cfg.resync_on_ddl)
            for relation in self.snapshot_relations:  # published as the snapshot read them
                self.resync.published(relation)
        resync = self.resync
        # A re-sync goes where `pgcdc snapshot` would send it (the producer's role may write
        # the signal table on a primary: it writes the publication there).
        resync_store = TopicRequests(topic) if topic is not None and choose_channel(
            self.cfg.signal_channel, standby=standby, can_write_table=True) == "kafka" \
            else None
        resync.enabled = self.cfg.resync_on_ddl and (not standby or resync_store is not None)
        resync.store = resync_store
        resync.off_because = ("the server is a standby and signal_channel is table (a re-sync "
                              "request there is a write)" if self.cfg.resync_on_ddl
                              else "resync_on_ddl is off")
        snapshots.on_read = resync.published  # and as each incremental chunk reads them
        resync.conn = self.admin.conn  # a reconnect replaced the admin connection
        options = StreamOptions(self.cfg.slot, self.cfg.publication, proto,
                                binary=self.cfg.binary, origin=self.cfg.origin)
        stream = ReplicationStream(self.cfg.dsn, options)
        log.info("streaming slot %s from %s (protocol %d) to %s", self.cfg.slot,
                 lsn_to_str(slot.confirmed_flush_lsn or 0), proto, self.cfg.bootstrap_servers)
        return Session(slot.confirmed_flush_lsn or 0, sink, tracker, types, publisher,
                       snapshots, watcher, resync, stream, options.decoder(), assembler)

    def _created_rows(self, types: TypeCatalog) -> Callable[[Message], list[PgOutputMessage]]:
        """The expander of ``pgcdc.rows`` messages (the rows a CREATE TABLE AS wrote before
        the table_trigger added its table: connector/replication/table_trigger.py): their Type
        and Relation messages reach the type catalog and the re-sync check as the stream's do."""
        publication = self.cfg.publication

        def expand(msg: Message) -> list[PgOutputMessage]:
            out = table_trigger.created_rows(msg, publication)
            for m in out:
                if type(m) is Type:
                    types.register_type_message(m.type_oid, m.namespace, m.name)
                elif type(m) is Relation and self.resync is not None:
                    self.resync.relation(m)
            return list(out)

        return expand

    def _stream(self, session: Session) -> None:
        """The session's loop: read, decode, assemble, publish; confirm what `flow` allows;
        the watchers' turns between reads; a graceful stop delivers and confirms first."""
        sink, tracker, types, publisher = (session.sink, session.tracker, session.types,
                                           session.publisher)
        snapshots, watcher, resync, stream = (session.snapshots, session.watcher,
                                              session.resync, session.stream)
        assembler = session.assembler
        gate = self.gate
        confirmed = server_end = session.start
        next_heartbeat = time.monotonic() + self.cfg.heartbeat_interval_s
        next_lag_warning = 0.0
        # The hot loop runs once per change: bound methods in locals, tuple indexing for
        # XLogData (wal_start, wal_end, server_clock, payload), no per-frame allocation.
        decode = session.decoder.decode
        feed = assembler.feed
        read = stream.read
        metrics.CONNECTED.set(1)
        try:
            while not self.stopping:
                reply = False
                for frame in read(0.2):
                    if type(frame) is XLogData:
                        wal_start = frame[0]
                        msg = decode(frame[3], lsn=wal_start)
                        out = feed(wal_start, msg)
                        if out is not None:
                            if isinstance(out, LogicalMessage):
                                last = tracker.delivered_lsn() or 0
                                publisher.publish_message(out, max(out.lsn, last))
                            else:
                                with out:
                                    publisher.publish(out)
                        elif type(msg) is Type:
                            types.register_type_message(msg.type_oid, msg.namespace, msg.name)
                        elif type(msg) is Relation:
                            resync.relation(msg)
                        if frame[1] > server_end:
                            server_end = frame[1]
                    else:
                        assert isinstance(frame, PrimaryKeepalive)
                        server_end = max(server_end, frame.wal_end)
                        reply = reply or frame.reply_requested
                self.streaming = True
                sink.poll(0)
                watcher.tick()
                resync.tick()
                snapshots.tick(server_end)
                flush = self._confirmable(tracker, assembler, server_end)
                gate.offer(flush)
                flush = gate.limit(flush)
                now = time.monotonic()
                if status_due(now, stream.last_status_sent, flush, confirmed,
                              reply_requested=reply, interval_s=self.cfg.status_interval_s):
                    stream.send_status(flush)
                    confirmed = flush
                    self.sent_flush = max(flush, self.sent_flush or 0)
                    metrics.FLUSHED_LSN.set(flush)
                    lag = max(0, server_end - flush)
                    metrics.LAG_BYTES.set(lag)
                    warning = lag_warning(self.cfg.slot, lag, self.cfg.wal_warn_bytes)
                    if warning and now >= next_lag_warning:
                        log.warning("%s", warning)
                        next_lag_warning = now + LAG_WARNING_INTERVAL_S
                if self.cfg.heartbeat_interval_s > 0 and now >= next_heartbeat:
                    self._heartbeat()
                    next_heartbeat = now + self.cfg.heartbeat_interval_s
            # Graceful stop: deliver what is in flight, then confirm it -- once one last
            # sweep found every schema id (else the next start re-sends it).
            sink.close(30.0)
            gate.offer(self._confirmable(tracker, assembler, server_end))
            self.registry.sweep(gate)
            final = max(gate.limit(self._confirmable(tracker, assembler, server_end)),
                        confirmed)
            stream.send_status(final)
            self.sent_flush = max(final, self.sent_flush or 0)
            log.info("stopped; confirmed %s", lsn_to_str(final))
            self.registry.check_ids()  # the last sweep found an id gone: say so
        except SourceError:
            # Deliver what was produced so the reconnect replays as little as possible.
            try:
                sink.flush(30.0)
            except SinkError:
                pass
            raise
        finally:
            metrics.CONNECTED.set(0)
            session.close()

    def _exactly_once_settings(self) -> ExactlyOnceSettings:
        cfg = self.cfg
        return ExactlyOnceSettings(
            self.db, cfg.slot, cfg.topic_prefix, cfg.topic_replication_factor,
            cfg.kafka_timeout_s, BatchLimits(cfg.exactly_once_batch_transactions,
                                             cfg.exactly_once_batch_bytes,
                                             cfg.exactly_once_batch_ms / 1000),
            cfg.tombstones, cfg.truncate_records)

    def _oversized_policy(self) -> tuple[OmitOversized | None, int]:
        """--oversized-events omit: the sink's hook and the event size limit (fail: none)."""
        if self.cfg.oversized_events != "omit":
            return None, 0
        limit = event_limit(self.cfg.max_event_bytes, self.kafka_settings)
        return OmitOversized(self.registry.schema, limit), limit

    @staticmethod
    def _confirmable(tracker: DeliveryTracker, assembler: Assembler,
                     server_end: int) -> int:
        return confirmable(tracker.delivered_lsn(), assembler.oldest_open_lsn,
                           tracker.open_transactions > 0 or assembler.in_transaction,
                           server_end)

    def _heartbeat(self) -> None:
        """Emit a heartbeat message whose content is the slot's restart_lsn as text (empty
        when the slot is not found): the heartbeat record carries it (`restart_lsn`), and no
        transaction committing before it can ever be decoded from this slot again
        (spark_jobs/rules/expiry.py says why and what the merge job uses it for).

        On a standby (it cannot write WAL) the message is emitted on the primary of
        --heartbeat-dsn, carrying the restart_lsn read first from the standby's slot, the one
        streamed; without that DSN there is no heartbeat while the server is a standby. Both
        arguments resting on heartbeats stay true, because neither depends on where the
        message was written:
        - W, the delivered LSN of the record (spark_jobs/rules/cut_policy.py, "Completeness"), is
          read from the delivery tracker when the publisher meets the message in the stream
          the slot decodes, as on a primary; the primary's commit of the message reaches the
          standby by replication and is decoded there in commit order with every other
          transaction.
        - R only moves forward (expiry.py): read on the standby before the message is
          written, it is at most the slot's restart_lsn whenever the record is read, so no
          transaction committing before it can be decoded again from that slot. The slot is
          the standby's own: a promotion keeps it (no synced copy trailing the primary's).
        The primary must be this standby's own primary (same system identifier, checked at
        start: `_check_standby`), or the messages never reach the slot: no heartbeat, never a
        wrong one. Once the standby is promoted, heartbeats are emitted on it again."""
        try:
            row = self.admin.conn.execute(
                "SELECT pg_is_in_recovery(), coalesce((SELECT restart_lsn::text FROM "
                "pg_replication_slots WHERE slot_name = %s), '')", (self.cfg.slot,)).fetchone()
            assert row is not None
            standby, restart_lsn = bool(row[0]), str(row[1])
            if self.session_on_standby and not standby:
                # Promoted: a new session sets up what a primary has (the table watcher's
                # publication changes, re-syncs, snapshots on this server, failover slot).
                raise SourceError("the standby was promoted: starting a new session on it as "
                                  "a primary (from the slot: at most a replay of unconfirmed "
                                  "changes)", transient=True)
            if standby and not self.cfg.heartbeat_dsn:
                return  # off on a standby without a primary's DSN (said at start)
            conn = self._heartbeat_connection() if standby else self.admin.conn
            # Transactional: its commit flushes the WAL, so it reaches the walsender at once
            # (a non-transactional message may wait for the WAL writer).
            conn.execute("SELECT pg_logical_emit_message(true, %s, %s)",
                         (HEARTBEAT_PREFIX, restart_lsn))
        except psycopg.Error as exc:
            if self._heartbeat_conn is not None and isinstance(exc, psycopg.OperationalError):
                self._heartbeat_conn.close()  # the primary is gone: connect again next time
            # Heartbeats are on by default: a missing grant (or a primary down) fails every
            # interval, so each distinct failure is a warning once, then debug.
            failure = first_line(exc)
            if failure != self._heartbeat_failure:
                log.warning("heartbeat failed: %s (heartbeats write a logical message: they "
                            "need a primary (--heartbeat-dsn when capturing from a standby) "
                            "and EXECUTE on pg_logical_emit_message; --heartbeat-interval-s 0 "
                            "turns them off; retrying every %gs, quietly)", failure,
                            self.cfg.heartbeat_interval_s)
            else:
                log.debug("heartbeat failed: %s", failure)
            self._heartbeat_failure = failure
            return
        if self._heartbeat_failure is not None:
            log.info("heartbeats resumed")
            self._heartbeat_failure = None

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.stopping and time.monotonic() < deadline:
            time.sleep(0.2)

    def stop(self, signum: int = 0, frame: FrameType | None = None) -> None:
        if not self.stopping:
            log.info("stopping (signal %d): draining in-flight deliveries", signum)
        self.stopping = True

    def close(self) -> None:
        self.registry.close()
        self.admin.close()
        if self._heartbeat_conn is not None:
            self._heartbeat_conn.close()


def _system_identifier(conn: psycopg.Connection[tuple]) -> int | None:  # type: ignore[type-arg]
    """The cluster's system identifier (None where pg_control_system() is not granted: the
    check that needs it is then skipped)."""
    try:
        row = conn.execute("SELECT system_identifier FROM pg_control_system()").fetchone()
    except psycopg.errors.InsufficientPrivilege:
        return None
    return int(row[0]) if row is not None else None


def _tune_gc() -> None:
    """See GC_GEN0_THRESHOLD: called once, after start-up and the snapshot, before streaming."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)


def run_pipeline(cfg: Config) -> int:
    pipeline = Pipeline(cfg)
    signal.signal(signal.SIGTERM, pipeline.stop)
    signal.signal(signal.SIGINT, pipeline.stop)
    try:
        pipeline.run()
    finally:
        pipeline.close()
    return 0

"""The initial snapshot's coordinator, from start to finish (the guarantees: the package
docstring).

    result = take_snapshot(SnapshotSettings(...), admin, registry, kafka_settings, topics,
                           should_stop=lambda: stopping, keep_slot=True)

The coordinator (this module) plans, registers the schemas, produces the truncates and shows
progress; the rows are read by `workers.reader_main`: in one thread for one reader, in spawned
processes for several (value loading and Avro encoding are Python and hold the GIL, so only
processes read in parallel). Each reader has its own connection importing the snapshot and its
own Kafka producer, and reports `ReaderDone` only once Kafka acknowledged all its events; the
snapshot is complete when every reader did and the coordinator's own events are acknowledged.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.process
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from connector import metrics
from connector.avro import CodecFactory, SchemaRegistry, SourceInfo, TableCodec, registry_ids
from connector.avro.masking import Masking
from connector.errors import CdcError, SinkError, SourceError
from connector.names import TableName
from connector.pgoutput.lsn import lsn_to_str
from connector.pgoutput.messages import Relation
from connector.pgtypes import TypeCatalog
from connector.replication import ReplicationAdmin
from connector.sink import AckTracker, KafkaSink, TopicCreator
from connector.sink.transactional import (
    SNAPSHOT_TRANSACTION_DEFAULTS,
    fence,
    snapshot_transactional_id,
)
from connector.source_catalog import PostgresCatalog

from ..slot import ExportedSnapshot, check_free_slots, snapshot_slot_name
from ..tables import SnapshotTable, published_tables
from .guard import check_unchanged, lock_tables
from .plan import plan_chunks
from .progress import Progress, TableProgress
from .reader import open_in_snapshot
from .reports import (
    FINAL_REPORTS,
    ChunkProduced,
    ReaderFailed,
    ReaderFlushed,
    ReaderStopped,
    Report,
    RowsRead,
)
from .transaction import producer_transaction
from .workers import ReaderSpec, TableIds, reader_main

__all__ = ["SNAPSHOT_PRODUCER_DEFAULTS", "TRUNCATE_INDEX", "SnapshotResult", "SnapshotSettings",
           "take_snapshot"]

log = logging.getLogger(__name__)

#: Bigger batches than the stream's defaults (throughput over latency); user settings win.
SNAPSHOT_PRODUCER_DEFAULTS: Mapping[str, Any] = {"linger.ms": 50}
LOCK_TIMEOUT_S = 60.0
TRUNCATE_INDEX = -1  # txn_index of a table's snapshot truncate: before its row 0
POLL_S = 0.2


@dataclass(frozen=True)
class SnapshotSettings:
    dsn: str
    slot: str  # the permanent slot the stream uses (the temporary one is named after it)
    publication: str
    topic_prefix: str
    workers: int = 2
    chunk_rows: int = 250_000
    binary: bool = False
    exactly_once: bool = False  # transactional producers, committed together at the end
    oversized_limit: int = 0  # --oversized-events omit: the event size limit (0: fail)
    truncate_records: str = "every-partition"  # the truncate markers' partitions (Config's)
    masking: Masking | None = None  # the column masks (Config.masking), as the stream's
    value_format: str = "pgcdc"  # Config's: pgcdc | debezium (connector/avro/typemap.py)


@dataclass(frozen=True)
class SnapshotResult:
    completed: bool  # False: stopped on request before every event was acknowledged
    consistent_point: int
    tables: int
    rows: int
    seconds: float
    relations: tuple[Relation, ...] = ()  # the tables as their rows were published


def take_snapshot(settings: SnapshotSettings, admin: ReplicationAdmin, registry: SchemaRegistry,
                  kafka_settings: Mapping[str, Any], topics: TopicCreator, *,
                  should_stop: Callable[[], bool], keep_slot: bool,
                  progress_stream: Any = None,
                  skip: Callable[[TableName], bool] | None = None) -> SnapshotResult:
    """Create the snapshot slot, publish every published table's rows as `r` events, wait
    until Kafka acknowledged all of them, then (`keep_slot`) create the permanent slot at the
    consistent point. The temporary slot is gone when this returns, whatever happened.
    `skip`: published tables whose rows are not read (outbox tables: connector/outbox.py)."""
    started = time.monotonic()
    features = admin.features
    check_free_slots(admin.conn, 2 if keep_slot else 1)
    exported = ExportedSnapshot.create(settings.dsn, snapshot_slot_name(settings.slot), features)
    lsn = exported.consistent_point
    log.info("snapshot consistent at %s (exported snapshot %s)", lsn_to_str(lsn),
             exported.snapshot_name)
    try:
        guard = open_in_snapshot(settings.dsn, exported.snapshot_name, "pgcdc-snapshot")
        try:
            tables = published_tables(guard, settings.publication, features)
            if skip is not None:
                tables = [t for t in tables if not skip(t.table_name)]
            lock_tables(guard, tables, LOCK_TIMEOUT_S)
            check_unchanged(guard, admin.conn, tables)
            job = _Coordinator(settings, admin, registry, kafka_settings, topics, should_stop, lsn,
                       exported.snapshot_name, tables, tid_range_scans=features.tid_range_scans,
                       stream=progress_stream)
            completed = job.run()
            if completed and keep_slot:
                exported.persist(admin.conn, settings.slot)
        finally:
            guard.close()
    finally:
        exported.close()
    seconds = time.monotonic() - started
    if completed:
        log.info("snapshot done: %d tables, %d rows in %.1fs%s", len(tables), job.progress.rows,
                 seconds, f"; streaming continues from {lsn_to_str(lsn)}" if keep_slot else "")
    else:
        log.warning("snapshot stopped before it completed (%d rows produced): the next run "
                    "takes a new snapshot", job.progress.rows)
    return SnapshotResult(completed, lsn, len(tables), job.progress.rows, seconds,
                          tuple(t.relation for t in tables))


class _Coordinator:
    """Truncates, the chunk queue, readers, their reports, progress, stop."""

    def __init__(self, settings: SnapshotSettings, admin: ReplicationAdmin,
                 registry: SchemaRegistry, kafka_settings: Mapping[str, Any],
                 topics: TopicCreator, should_stop: Callable[[], bool], lsn: int,
                 snapshot_name: str, tables: Sequence[SnapshotTable], *, tid_range_scans: bool,
                 stream: Any) -> None:
        self.settings = settings
        self.should_stop = should_stop
        self.lsn = lsn
        self.tables = list(tables)
        self.ts_ms = time.time_ns() // 1_000_000
        eo_defaults = SNAPSHOT_TRANSACTION_DEFAULTS if settings.exactly_once else {}
        self.kafka_settings = {**SNAPSHOT_PRODUCER_DEFAULTS, **eo_defaults, **kafka_settings}
        self.tracker = AckTracker(None)
        db = str(admin.conn.info.dbname)
        self.sink = KafkaSink(self.kafka_settings, self.tracker, topics=topics,
                              metadata_timeout_s=topics.timeout_s,
                              truncate_records=settings.truncate_records,
                              transactional_id=snapshot_transactional_id(db, settings.slot, None)
                              if settings.exactly_once else None)
        # --exactly-once: the truncates, then every reader's rows, commit together at the end.
        self.txn = producer_transaction(self.sink.producer, self.kafka_settings,
                                        exactly_once=settings.exactly_once)
        self.own_committed = False
        types = TypeCatalog()
        # The stream's own codec factory: same catalog lookups, same schemas, same registry ids.
        codecs = CodecFactory(types, PostgresCatalog(admin.conn, types), registry_ids(registry),
                              prefix=settings.topic_prefix, db=db, masking=settings.masking,
                              value_format=settings.value_format,
                              truncate_records=settings.truncate_records)
        self.codecs: list[TableCodec] = [codecs.codec(t.relation) for t in self.tables]
        created = set(topics.ensure(c.topic for c in self.codecs))
        # A topic that existed may hold an abandoned attempt's rows or an older history.
        self.replaced = [c for c in self.codecs if c.topic not in created]
        self.chunks = plan_chunks(self.tables, settings.chunk_rows,
                                  tid_range_scans=tid_range_scans)
        counts = [0] * len(self.tables)
        for chunk in self.chunks:
            counts[chunk.table] += 1
        self.progress = Progress([TableProgress(t.name, t.estimated_rows, n)
                                  for t, n in zip(self.tables, counts, strict=True)],
                                 stream=stream)
        metrics.SNAPSHOT_TABLES.set(len(self.tables))
        metrics.SNAPSHOT_TABLES_DONE.set(0)
        metrics.SNAPSHOT_ROWS.set(0)
        for index, count in enumerate(counts):
            if count == 0:  # a partitioned table without partitions
                self._chunk_done(index)
        self.spec = ReaderSpec(
            settings.dsn, snapshot_name, lsn, self.ts_ms, settings.binary,
            settings.topic_prefix, db, self.kafka_settings, self.tables,
            [TableIds(c.schemas.key_json, c.schemas.value_json, c.key_id, c.value_id)
             for c in self.codecs], log_level=logging.getLogger().getEffectiveLevel(),
            slot=settings.slot, transactional=settings.exactly_once,
            oversized_limit=settings.oversized_limit, masking=settings.masking,
            value_format=settings.value_format, truncate_records=settings.truncate_records)

    def _chunk_done(self, table: int) -> None:
        state = self.progress.tables[table]
        finished_before = state.finished is not None
        self.progress.chunk_done(table)
        if not finished_before and state.finished is not None:
            metrics.SNAPSHOT_TABLES_DONE.inc()

    def run(self) -> bool:
        """True when every row was produced and acknowledged; False when stopped."""
        try:
            self._truncates()
            workers = max(1, min(self.settings.workers, len(self.chunks)))
            self._fence_unused(workers if self.chunks else 0)
            log.info("snapshot of %d tables in %d chunks, %d reader%s", len(self.tables),
                     len(self.chunks), workers, "" if workers == 1 else " processes")
            if self.chunks:
                completed = self._read(workers)
                if not completed:
                    self._abort_own()
                    return False
            return self._drain()
        except BaseException:
            self._abort_own()
            raise

    def _fence_unused(self, used: int) -> None:
        """--exactly-once: readers this attempt does not start (fewer chunks than workers)
        may have been started by a killed attempt; abort what they left open now, or
        read_committed consumers would wait for it until transaction.timeout.ms."""
        if not self.settings.exactly_once:
            return
        db = str(self.spec.db)
        for index in range(used, self.settings.workers):
            fence(self.kafka_settings, snapshot_transactional_id(db, self.settings.slot, index))

    def _commit_own(self) -> None:
        """--exactly-once: the coordinator's truncates are delivered, then committed (first:
        they precede every row in their partitions). Without it nothing waits here: `_drain`
        waits for the deliveries, within its stop deadline."""
        if not self.settings.exactly_once or self.own_committed:
            return
        while len(self.sink) > 0:
            self.sink.poll(POLL_S)
        self.txn.commit()
        self.own_committed = True

    def _abort_own(self) -> None:
        if not self.own_committed:
            self.txn.abort()

    def _truncates(self) -> None:
        """The snapshot of a table whose topic already existed starts with a truncate just
        before its rows (position (P, -1)): whatever a consumer holds from before -- an
        abandoned snapshot attempt's rows, an older slot's history -- is replaced by the
        snapshot, rows deleted meanwhile included (and a table without a key does not get its
        rows twice). A topic created now has no past to replace."""
        self.txn.begin()
        ticket = self.tracker.begin(self.lsn)
        source = SourceInfo(self.lsn, TRUNCATE_INDEX, self.ts_ms, None, self.lsn, "true")
        for codec in self.replaced:
            self.sink.produce_truncate(codec.topic, codec.truncate(source), ticket)
        ticket.seal()
        metrics.BYTES.inc(self.sink.bytes)

    def _read(self, workers: int) -> bool:
        """Run the readers to the end; True when each delivered all its events."""
        readers: list[Any]
        chunks: Any
        reports: Any
        stop: Any
        commit: Any
        if workers == 1:
            chunks, reports, stop = queue.SimpleQueue(), queue.SimpleQueue(), threading.Event()
            commit = threading.Event()
            readers = [threading.Thread(target=reader_main, args=(self.spec, chunks, reports,
                                                                  stop, None, 0, commit),
                                        name="pgcdc-snapshot", daemon=True)]
        else:
            context = multiprocessing.get_context("spawn")
            chunks, reports, stop = context.Queue(), context.Queue(), context.Event()
            commit = context.Event()
            readers = [context.Process(target=reader_main,
                                       args=(self.spec, chunks, reports, stop, os.getpid(), i,
                                             commit),
                                       name=f"pgcdc-snapshot-{i}", daemon=True)
                       for i in range(workers)]
        for chunk in self.chunks:
            chunks.put(chunk)
        for _ in readers:
            chunks.put(None)
        for reader in readers:
            reader.start()
        pending, stopped, flushed = len(readers), False, 0
        errors: list[CdcError] = []
        rendered = 0.0
        try:
            while pending:
                if self.should_stop() and not stop.is_set():
                    stop.set()
                if time.monotonic() - rendered >= POLL_S:
                    self.sink.poll(0)
                    if not self.own_committed:
                        self.txn.commit_if_old()
                    self.progress.render()
                    rendered = time.monotonic()
                report = self._next_report(reports, readers if workers > 1 else [])
                if report is None:
                    continue
                if isinstance(report, RowsRead):
                    self.progress.add(report.table, report.rows)
                    metrics.EVENTS.labels(self.tables[report.table].name, "r").inc(report.rows)
                    metrics.SNAPSHOT_ROWS.inc(report.rows)
                elif isinstance(report, ChunkProduced):
                    metrics.BYTES.inc(report.bytes)
                    self._chunk_done(report.table)
                elif isinstance(report, ReaderFlushed):  # all in Kafka, waiting for `commit`
                    flushed += 1
                    if flushed == len(readers) and not stop.is_set():
                        self._commit_own()
                        commit.set()
                elif isinstance(report, FINAL_REPORTS):
                    pending -= 1
                    if isinstance(report, ReaderFailed):
                        errors.append(report.error())
                        stop.set()
                    elif isinstance(report, ReaderStopped):
                        stopped = True
        finally:
            stop.set()
            for reader in readers:
                reader.join(30.0)
                if isinstance(reader, multiprocessing.process.BaseProcess) and reader.is_alive():
                    reader.kill()
        if errors:
            raise errors[0]
        return not stopped  # ReaderDone comes only with all the reader's events acknowledged

    @staticmethod
    def _next_report(reports: Any, processes: Sequence[Any]) -> Report | None:
        """The next report, None after POLL_S without one; raises when every reader process
        is gone and the pipe is empty (a reader killed before it could report)."""
        try:
            report: Report = reports.get(timeout=POLL_S)
            return report
        except queue.Empty:
            if not processes or any(p.is_alive() for p in processes):
                return None
        try:  # the last reports may still be on their way through the pipe
            report = reports.get(timeout=2.0)
            return report
        except queue.Empty:
            codes = [p.exitcode for p in processes]
            raise SourceError(f"snapshot readers exited without reporting (exit codes "
                              f"{codes})") from None

    def _drain(self) -> bool:
        """The coordinator's own events (truncates): wait for their delivery reports."""
        if not self.chunks:
            self._commit_own()
        deadline: float | None = None
        while len(self.sink) > 0:
            self.sink.poll(POLL_S)
            if self.should_stop():
                deadline = deadline or time.monotonic() + 30.0
                if time.monotonic() > deadline:
                    return False
        self.sink.close(30.0)
        self.progress.render(final=True)
        if self.tracker.open_transactions:
            raise SinkError("snapshot: not every event was acknowledged by Kafka; "
                            "the snapshot is not complete")
        return True

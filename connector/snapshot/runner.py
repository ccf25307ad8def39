"""The initial snapshot from start to finish (see the package docstring for the guarantees).

    result = take_snapshot(SnapshotSettings(...), admin, registry, kafka_settings, topics,
                           should_stop=lambda: stopping, keep_slot=True)

Readers are threads, each with its own connection importing the snapshot, taking chunks from
one queue. psycopg reads COPY data and librdkafka sends records without holding the GIL, so a
second reader helps as long as the database or the network is the bottleneck; loading values
and Avro encoding are Python and hold it (benchmarks/README.md `## snapshot` has the figures).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from connector import metrics
from connector.avro import AvroEncoder, SchemaRegistry, SourceInfo, TableCodec
from connector.errors import CdcError, SinkError, SourceError
from connector.pgoutput.lsn import lsn_to_str
from connector.pgtypes import TypeCatalog
from connector.publisher import Publisher
from connector.replication import ReplicationAdmin
from connector.sink import AckTracker, KafkaSink, TopicCreator
from connector.source_catalog import PostgresCatalog

from .chunks import Chunk, plan_chunks
from .progress import Progress, TableProgress
from .reader import ChunkReader, Stopped, open_in_snapshot
from .slot import ExportedSnapshot, snapshot_slot_name
from .tables import SnapshotTable, check_unchanged, lock_tables, published_tables

__all__ = ["SNAPSHOT_PRODUCER_DEFAULTS", "TRUNCATE_INDEX", "SnapshotResult", "SnapshotSettings",
           "take_snapshot"]

log = logging.getLogger(__name__)

#: Bigger batches than the stream's defaults (throughput over latency); user settings win.
SNAPSHOT_PRODUCER_DEFAULTS: Mapping[str, Any] = {"linger.ms": 50, "batch.size": 1_000_000}
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
    tombstones: bool = False


@dataclass(frozen=True)
class SnapshotResult:
    completed: bool  # False: stopped on request before every event was acknowledged
    consistent_point: int
    tables: int
    rows: int
    seconds: float


def take_snapshot(settings: SnapshotSettings, admin: ReplicationAdmin, registry: SchemaRegistry,
                  kafka_settings: Mapping[str, Any], topics: TopicCreator, *,
                  should_stop: Callable[[], bool], keep_slot: bool,
                  progress_stream: Any = None) -> SnapshotResult:
    """Create the snapshot slot, publish every published table's rows as `r` events, wait
    until Kafka acknowledged all of them, then (`keep_slot`) create the permanent slot at the
    consistent point. The temporary slot is gone when this returns, whatever happened."""
    started = time.monotonic()
    version = admin.server_version_num
    exported = ExportedSnapshot.create(settings.dsn, snapshot_slot_name(settings.slot), version)
    lsn = exported.consistent_point
    log.info("snapshot consistent at %s (exported snapshot %s)", lsn_to_str(lsn),
             exported.snapshot_name)
    try:
        guard = open_in_snapshot(settings.dsn, exported.snapshot_name, "pgcdc-snapshot")
        try:
            tables = published_tables(guard, settings.publication, version)
            lock_tables(guard, tables, LOCK_TIMEOUT_S)
            check_unchanged(guard, admin.conn, tables)
            job = _Job(settings, admin, registry, kafka_settings, topics, should_stop, lsn,
                       exported.snapshot_name, tables, tid_range_scans=version >= 140000,
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
        log.warning("snapshot stopped before it completed (%d rows published): the next run "
                    "takes a new snapshot", job.progress.rows)
    return SnapshotResult(completed, lsn, len(tables), job.progress.rows, seconds)


class _Job:
    """Readers over the chunk queue, delivery reports, progress, stop and error handling."""

    def __init__(self, settings: SnapshotSettings, admin: ReplicationAdmin,
                 registry: SchemaRegistry, kafka_settings: Mapping[str, Any],
                 topics: TopicCreator, should_stop: Callable[[], bool], lsn: int,
                 snapshot_name: str, tables: Sequence[SnapshotTable], *, tid_range_scans: bool,
                 stream: Any) -> None:
        self.settings = settings
        self.should_stop = should_stop
        self.lsn = lsn
        self.snapshot_name = snapshot_name
        self.tables = list(tables)
        self.tracker = AckTracker(None)
        self.sink = KafkaSink({**SNAPSHOT_PRODUCER_DEFAULTS, **kafka_settings}, self.tracker,
                              topics=topics, tombstones=settings.tombstones)
        types = TypeCatalog()
        encoder = AvroEncoder(registry, types, prefix=settings.topic_prefix,
                              db=str(admin.conn.info.dbname))
        # The stream's own codec path: same catalog lookups, same schemas, same registry ids.
        publisher = Publisher(encoder, self.sink, self.tracker, PostgresCatalog(admin.conn, types))
        self.codecs: list[TableCodec] = [publisher.codec(t.relation) for t in self.tables]
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
        for index, count in enumerate(counts):
            if count == 0:  # a partitioned table without partitions
                self.progress.chunk_done(index)
        self._queue: queue.SimpleQueue[Chunk] = queue.SimpleQueue()
        self._abort = threading.Event()
        self._errors: list[BaseException] = []
        self.ts_ms = time.time_ns() // 1_000_000

    def run(self) -> bool:
        """True when every row was produced and acknowledged; False when stopped."""
        self._truncates()
        for chunk in self.chunks:
            self._queue.put(chunk)
        workers = max(1, min(self.settings.workers, len(self.chunks)))
        log.info("snapshot of %d tables in %d chunks, %d reader%s", len(self.tables),
                 len(self.chunks), workers, "" if workers == 1 else "s")
        threads = [threading.Thread(target=self._reader, name=f"pgcdc-snapshot-{i}",
                                    daemon=True) for i in range(workers if self.chunks else 0)]
        for thread in threads:
            thread.start()
        try:
            while any(t.is_alive() for t in threads):
                if self.should_stop():
                    self._abort.set()
                self.sink.poll(POLL_S)
                self.progress.render()
        finally:
            self._abort.set()
            for thread in threads:
                thread.join()
        if self._errors:
            raise _as_cdc_error(self._errors[0])
        if self.should_stop() and not self._all_read():
            return False
        return self._drain()

    def _truncates(self) -> None:
        """The snapshot of a table whose topic already existed starts with a truncate just
        before its rows (position (P, -1)): whatever a consumer holds from before -- an
        abandoned snapshot attempt's rows, an older slot's history -- is replaced by the
        snapshot, rows deleted meanwhile included (and a table without a key does not get its
        rows twice). A topic created now has no past to replace."""
        ticket = self.tracker.begin(self.lsn)
        source = SourceInfo(self.lsn, TRUNCATE_INDEX, self.ts_ms, None, self.lsn, "true")
        for codec in self.replaced:
            self.sink.produce_to_all_partitions(codec.topic, None, codec.truncate(source), ticket)
        ticket.seal()

    def _all_read(self) -> bool:
        return all(t.finished is not None for t in self.progress.tables)

    def _drain(self) -> bool:
        """Wait for every delivery report; a stop request allows 30 s more, then gives up."""
        deadline: float | None = None
        while len(self.sink) > 0:
            self.sink.poll(POLL_S)
            if self.should_stop():
                deadline = deadline or time.monotonic() + 30.0
                if time.monotonic() > deadline:
                    return False
        self.sink.close(30.0)
        self.progress.render(final=True)
        if self.tracker.open_transactions or (self.chunks and self.tracker.watermark() != self.lsn):
            raise SinkError("snapshot: not every event was acknowledged by Kafka; "
                            "the snapshot is not complete")
        return True

    def _reader(self) -> None:
        try:
            conn = open_in_snapshot(self.settings.dsn, self.snapshot_name, "pgcdc-snapshot")
        except BaseException as exc:
            self._fail(exc)
            return
        try:
            reader = ChunkReader(conn, self.sink, self.tracker, self.lsn, self.ts_ms,
                                 binary=self.settings.binary, on_rows=self._on_rows,
                                 should_stop=self._abort.is_set)
            while not self._abort.is_set():
                try:
                    chunk = self._queue.get_nowait()
                except queue.Empty:
                    return
                reader.read(self.tables[chunk.table], self.codecs[chunk.table], chunk)
                self.progress.chunk_done(chunk.table)
        except Stopped:
            pass
        except BaseException as exc:
            self._fail(exc)
        finally:
            conn.close()

    def _on_rows(self, table: int, rows: int) -> None:
        self.progress.add(table, rows)
        metrics.EVENTS.labels(self.codecs[table].topic, "r").inc(rows)

    def _fail(self, exc: BaseException) -> None:
        self._errors.append(exc)
        self._abort.set()


def _as_cdc_error(exc: BaseException) -> BaseException:
    if isinstance(exc, CdcError):
        return exc
    if isinstance(exc, psycopg.Error):
        return SourceError(f"snapshot failed: {str(exc).strip().splitlines()[0]}")
    return exc

"""One initial snapshot reader (a worker): a connection inside the exported snapshot, its own
Kafka producer, and a loop over the shared queue of block ranges. It runs in a process of its
own when there are several readers (loading values and Avro encoding are Python and hold the
GIL, so threads would take turns), in a thread of the coordinator when there is one.

    reader_main(spec, chunks, reports, stop, parent_pid)

`chunks` yields `BlockRange`s and then None; `reports` receives the reader's `reports` (in
the order that module states): `RowsRead` and `ChunkProduced` as it goes, then exactly one of
`ReaderDone` -- sent only after the reader's producer has delivered every event and Kafka
acknowledged it --, `ReaderFailed` or `ReaderStopped`. With ``--exactly-once``
(`ReaderSpec.transactional`) the reader's events are in one open Kafka transaction
(`SnapshotTransaction`): once all are delivered it reports `ReaderFlushed`, waits for the
coordinator's `commit` event (set when every reader flushed), commits, then reports
`ReaderDone`. Stopped or failed, it aborts.

The coordinator registered every table's schemas; a reader derives the same schemas again (same
catalog lookups, deterministic text), checks the text is identical and uses the coordinator's
ids, so readers make no registry calls. A reader in a process ignores SIGINT/SIGTERM (the
coordinator decides) and dies with the coordinator process (an abandoned snapshot must not go
on producing).
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from connector.avro import CodecFactory, SchemaIds, TableSchemas
from connector.avro.masking import Masking
from connector.avro.oversized import OmitOversized
from connector.errors import CdcError, SchemaError, SinkError, SourceError
from connector.pgtypes import TypeCatalog
from connector.sink import AckTracker, BulkSink
from connector.sink.transactional import snapshot_transactional_id
from connector.source_catalog import PostgresCatalog

from ..tables import SnapshotTable
from .plan import BlockRange
from .reader import ChunkReader, Stopped, open_in_snapshot
from .reports import (
    ChunkProduced,
    ReaderDone,
    ReaderFailed,
    ReaderFlushed,
    ReaderStopped,
    Report,
    RowsRead,
)
from .transaction import NoTransaction, ProducerTransaction, producer_transaction

__all__ = ["ReaderSpec", "TableIds", "reader_main"]

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class TableIds:
    """What the coordinator registered for a table: schema texts and their registry ids."""

    key_json: str | None
    value_json: str
    key_id: int | None
    value_id: int


@dataclass(frozen=True)
class ReaderSpec:
    """Everything a reader needs (picklable: it crosses to a spawned process)."""

    dsn: str
    snapshot_name: str
    consistent_point: int
    ts_ms: int
    binary: bool
    prefix: str
    db: str
    kafka_settings: Mapping[str, Any]
    tables: Sequence[SnapshotTable]
    ids: Sequence[TableIds]
    log_level: int = logging.INFO
    slot: str = ""
    transactional: bool = False  # --exactly-once: see the module docstring
    oversized_limit: int = 0  # --oversized-events omit: the event size limit (0: fail)
    masking: Masking | None = None  # the column masks: the coordinator's
    value_format: str = "pgcdc"  # --value-format: the coordinator's (same schema text)
    truncate_records: str = "every-partition"  # named in a Debezium-format Envelope


class _ChunkQueue(Protocol):
    def get(self) -> BlockRange | None: ...


class _ReportQueue(Protocol):
    def put(self, item: Report) -> None: ...


class _Event(Protocol):
    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


def reader_main(spec: ReaderSpec, chunks: _ChunkQueue, reports: _ReportQueue, stop: _Event,
                parent_pid: int | None = None, index: int = 0,
                commit: _Event | None = None) -> None:
    """The reader loop (see the module docstring). Never raises: everything is a report."""
    if parent_pid is not None:  # a process of its own
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _die_with_parent()
        logging.basicConfig(level=spec.log_level,
                            format="%(asctime)s %(levelname)s %(name)s %(message)s")

    def should_stop() -> bool:
        return stop.is_set() or (parent_pid is not None and os.getppid() != parent_pid)

    try:
        rows = _read(spec, chunks, reports, should_stop, index, commit)
    except Stopped:
        reports.put(ReaderStopped())
    except CdcError as exc:
        reports.put(ReaderFailed.of(exc))
    except Exception as exc:  # a bug: still one report, so the coordinator does not hang
        log.exception("snapshot reader failed")
        reports.put(ReaderFailed.of(SourceError(f"snapshot reader failed: "
                                                f"{type(exc).__name__}: {exc}")))
    else:
        reports.put(ReaderDone(rows))


def _die_with_parent() -> None:
    """Linux: the kernel kills this reader as soon as the coordinator process dies (SIGKILL
    included); elsewhere `should_stop` notices within a few thousand rows."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _read(spec: ReaderSpec, chunks: _ChunkQueue, reports: _ReportQueue, should_stop: Any,
          index: int, commit: _Event | None) -> int:
    conn = open_in_snapshot(spec.dsn, spec.snapshot_name, "pgcdc-snapshot")
    txn: ProducerTransaction = NoTransaction()
    try:
        tracker = AckTracker(None)
        # acknowledgement is all-or-nothing at the end of a reader: failures are reported, each
        # success is not (see BulkSink); ReaderDone is sent only after close() drained the
        # queue
        tid = snapshot_transactional_id(spec.db, spec.slot, index) if spec.transactional \
            else None
        sink = BulkSink(spec.kafka_settings, tracker, transactional_id=tid,
                        oversized=_oversized(spec), max_event_bytes=spec.oversized_limit)
        txn = producer_transaction(sink.producer, spec.kafka_settings,
                                   exactly_once=spec.transactional)
        txn.begin()
        types = TypeCatalog()
        # The coordinator's factory, with its ids: the same catalog lookups and schemas.
        codecs = CodecFactory(types, PostgresCatalog(conn, types), _coordinator_ids(spec),
                              prefix=spec.prefix, db=spec.db, masking=spec.masking,
                              value_format=spec.value_format,
                              truncate_records=spec.truncate_records)
        reader = ChunkReader(conn, sink, tracker, spec.consistent_point, spec.ts_ms,
                             binary=spec.binary,
                             on_rows=lambda table, n: reports.put(RowsRead(table, n)),
                             should_stop=should_stop)
        total = 0
        while True:
            chunk = chunks.get()
            if chunk is None:
                break
            if should_stop():
                raise Stopped
            table = spec.tables[chunk.table]
            bytes_before = sink.bytes
            total += reader.read(table, codecs.codec(table.relation), chunk)
            reports.put(ChunkProduced(chunk.table, sink.bytes - bytes_before))
            txn.commit_if_old()
        while len(sink) > 0:  # every delivery report, however long Kafka takes
            sink.poll(0.2)
            if should_stop():
                raise Stopped
        sink.close(30.0)
        if tracker.open_transactions:
            raise SinkError("snapshot: not every event was acknowledged by Kafka")
        if spec.transactional and commit is not None:
            # Commit only when every reader has its events in Kafka: a crash before that
            # leaves no reader's rows visible to read_committed consumers.
            reports.put(ReaderFlushed())
            while not commit.wait(0.2):
                if should_stop():
                    raise Stopped
            txn.commit()
        return total
    except BaseException:
        txn.abort()
        raise
    finally:
        conn.close()


def _oversized(spec: ReaderSpec) -> OmitOversized | None:
    """--oversized-events omit in a reader: the schemas by id from the coordinator's texts (a
    reader makes no registry calls)."""
    if spec.oversized_limit <= 0:
        return None
    schemas: dict[int, Mapping[str, Any]] = {}
    for ids in spec.ids:
        schemas[ids.value_id] = json.loads(ids.value_json)
        if ids.key_id is not None and ids.key_json is not None:
            schemas[ids.key_id] = json.loads(ids.key_json)
    return OmitOversized(schemas.__getitem__, spec.oversized_limit)


def _coordinator_ids(spec: ReaderSpec) -> SchemaIds:
    """The ids the coordinator registered, once the reader derived the very same schema text:
    a reader makes no registry calls."""
    registered = {table.relation: ids for table, ids in zip(spec.tables, spec.ids, strict=True)}

    def ids(schemas: TableSchemas) -> tuple[int | None, int]:
        table = registered[schemas.relation]
        if (schemas.key_json, schemas.value_json) != (table.key_json, table.value_json):
            raise SchemaError(f"snapshot reader derived another schema for {schemas.topic} "
                              "than the coordinator registered (did the table change?)")
        return table.key_id, table.value_id

    return ids

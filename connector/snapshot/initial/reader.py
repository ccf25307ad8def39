"""Connections inside the exported snapshot, and one block range's COPY turned into `r` events.

COPY format: text by default, binary with ``--binary`` -- the same choice as the stream's
pgoutput tuples, so a snapshot row goes through the same pgtypes loader as a streamed row of
the same table (TableCodec picks the text loader for ``str`` values, the binary one for
``bytes``). Text COPY's escaping (``\\N``, ``\\t``, ``\\\\``...) is undone by psycopg's C row
parser (`Copy.rows` with every column read as ``text``); the session prints values exactly as
the walsender does for the stream (ISO dates, UTC, ISO 8601 intervals, shortest-exact floats,
hex bytea), so the loaders see the forms they expect. Binary COPY fields are the types' send
functions' output, byte for byte what pgoutput's binary mode sends; every field is read as
``bytea`` (raw bytes) and loaded by pgtypes. With the C extension built, text rows skip
psycopg's parser: each line goes to `TableCodec.change_from_copy` as the server sent it.
Text is the default because the text loaders (and the C parsers) are the faster ones for
numeric and date/time types, and every type has a text form.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql

from connector.avro import SourceInfo, TableCodec
from connector.errors import SourceError, first_line, is_privilege_error
from connector.pgtypes.session import OUTPUT_STATEMENTS
from connector.replication.privileges import lacking
from connector.sink import DeliveryTracker, KafkaSink, Ticket

from ..tables import SnapshotTable
from .plan import BlockRange, copy_statement

__all__ = ["SESSION_SETTINGS", "ChunkReader", "Stopped", "open_in_snapshot"]

Conn = psycopg.Connection[tuple]  # type: ignore[type-arg]
Copy = psycopg.Copy

#: Output formats the loaders expect (as the replication stream sets them), and no server-side
#: timeout cutting a long COPY or the idle lock-holding transaction short.
SESSION_SETTINGS = (
    *OUTPUT_STATEMENTS,
    "SET client_encoding = 'UTF8'",
    "SET statement_timeout = 0",
    "SET idle_in_transaction_session_timeout = 0",
)
REPORT_EVERY = 2000  # rows between progress updates and stop checks
_new_tuple = tuple.__new__
if SourceInfo._fields[6:] != ("xmin", "sequence") or SourceInfo._field_defaults != {
        "xid": None, "lsn": None, "snapshot": "false", "xmin": None, "sequence": None}:
    raise RuntimeError("SourceInfo changed: update ChunkReader._produce_lines, which builds "
                       "it from a tuple")


class Stopped(Exception):
    """A reader noticed the stop request (not an error: the snapshot is abandoned)."""


def open_in_snapshot(dsn: str, snapshot_name: str, application_name: str) -> Conn:
    """A connection whose open REPEATABLE READ transaction imported `snapshot_name`."""
    try:
        conn = psycopg.connect(dsn, autocommit=True, application_name=application_name)
    except psycopg.OperationalError as exc:
        raise SourceError(f"cannot connect to PostgreSQL: {first_line(exc)}") from None
    try:
        for setting in SESSION_SETTINGS:
            conn.execute(setting)
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot_name)))
    except psycopg.Error as exc:
        conn.close()
        raise SourceError(f"cannot import the exported snapshot {snapshot_name}: "
                          f"{first_line(exc)}") from None
    return conn


class ChunkReader:
    """Reads chunks on one connection inside the snapshot and produces one `r` event per row,
    all under one delivery ticket per chunk (its end LSN: the consistent point)."""

    def __init__(self, conn: Conn, sink: KafkaSink, tracker: DeliveryTracker,
                 consistent_point: int, ts_ms: int, *, binary: bool,
                 on_rows: Callable[[int, int], None], should_stop: Callable[[], bool]) -> None:
        self.conn = conn
        self.sink = sink
        self.tracker = tracker
        self.lsn = consistent_point
        self.ts_ms = ts_ms
        self.binary = binary
        self.on_rows = on_rows  # (table index, rows) -> None, every REPORT_EVERY rows
        self.should_stop = should_stop

    def read(self, table: SnapshotTable, codec: TableCodec, chunk: BlockRange) -> int:
        """Produce the chunk's rows; returns how many. Raises `Stopped` on a stop request."""
        statement = copy_statement(table, chunk, binary=self.binary)
        ticket = self.tracker.begin(self.lsn)
        try:
            with self.conn.cursor().copy(statement) as copy, _no_gc_pauses():
                if not self.binary and codec.has_native_rows:
                    count = self._produce_lines(copy, codec, chunk, ticket)
                else:
                    types = ["bytea" if self.binary else "text"] * len(table.relation.columns)
                    copy.set_types(types)
                    count = self._produce_rows(copy, codec, chunk, ticket)
        except psycopg.Error as exc:
            if is_privilege_error(exc):
                raise lacking(exc, self.conn.info.user) from None
            raise SourceError(f"snapshot of {table.name} failed: {first_line(exc)}") from None
        self.on_rows(chunk.table, count % REPORT_EVERY)
        ticket.seal()
        return count

    def _produce_rows(self, copy: Copy, codec: TableCodec, chunk: BlockRange,
                      ticket: Ticket) -> int:
        """Rows parsed by psycopg, encoded by `TableCodec.change_from_tuples`."""
        lsn, ts_ms, topic = self.lsn, self.ts_ms, codec.topic
        change = codec.change_from_tuples
        produce = self.sink.produce
        row_number = chunk.first_row_number
        count = 0
        for row in copy.rows():
            key, value = change("r", None, row, SourceInfo(
                lsn, row_number, ts_ms, None, lsn, "true"))
            produce(topic, key, value, ticket)
            row_number += 1
            count += 1
            if count % REPORT_EVERY == 0:
                self._progress(chunk)
        return count

    def _produce_lines(self, copy: Copy, codec: TableCodec, chunk: BlockRange,
                       ticket: Ticket) -> int:
        """Text rows as the server sent them, parsed and encoded in one C call each
        (`TableCodec.copy_encoder`)."""
        lsn, ts_ms, topic = self.lsn, self.ts_ms, codec.topic
        encode = codec.copy_encoder("r")
        produce = self.sink.produce
        row_number = chunk.first_row_number
        count = 0
        read = copy.read
        while line := read():
            # SourceInfo(lsn, row_number, ts_ms, None, lsn, "true"), without NamedTuple's
            # Python-level __new__ (once per row)
            source = _new_tuple(SourceInfo, (lsn, row_number, ts_ms, None, lsn, "true", None,
                                             None))
            event = encode(line, source, None, None)
            produce(topic, event[0], event[1], ticket)
            row_number += 1
            count += 1
            if count % REPORT_EVERY == 0:
                self._progress(chunk)
        return count

    def _progress(self, chunk: BlockRange) -> None:
        self.on_rows(chunk.table, REPORT_EVERY)
        if self.should_stop():
            raise Stopped


@contextmanager
def _no_gc_pauses() -> Iterator[None]:
    """The cyclic collector off while a chunk streams: the loop makes no cycles, but its
    short-lived objects (events, delivery reports) kept triggering collections that scan
    every in-flight event (~7% of a reader's time). It runs again after the chunk."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()

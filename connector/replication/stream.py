"""The walsender replication stream over psycopg 3's libpq layer (COPY BOTH).

psycopg has no replication API, but a `replication=database` connection can issue
START_REPLICATION and then exchange CopyData through `conn.pgconn`. Frames are read without
blocking (get_copy_data(1) + select on the socket), so the caller's loop also serves Kafka
delivery callbacks and status-update timers.
"""

from __future__ import annotations

import select
import time
from dataclasses import dataclass

import psycopg
from psycopg import pq, sql

from connector.errors import SourceError, connection_gone, first_line
from connector.pgoutput.decoder import Decoder
from connector.pgoutput.framing import (
    XLOGDATA_HEADER,
    XLOGDATA_HEADER_SIZE,
    PrimaryKeepalive,
    XLogData,
    build_standby_status_update,
    parse_frame,
)
from connector.pgoutput.lsn import lsn_to_str
from connector.pgoutput.timestamps import unix_to_pg_timestamp
from connector.pgtypes.session import OUTPUT_STATEMENTS

# Builds a NamedTuple from a tuple of its fields without its Python-level __new__.
_new_tuple = tuple.__new__


@dataclass(frozen=True)
class StreamOptions:
    slot: str
    publication: str
    proto_version: int
    start_lsn: int = 0  # 0: resume from the slot's confirmed_flush_lsn
    binary: bool = False
    messages: bool = True
    streaming: bool = True  # in-progress transactions (protocol >= 2)
    origin: str | None = None  # 'none' or 'any' (PostgreSQL 16+)

    def command(self) -> sql.Composable:
        # pgoutput splits publication_names as a list of identifiers: quoted, so a name
        # with a comma, a quote or upper case is the one name it is.
        quoted = '"' + self.publication.replace('"', '""') + '"'
        opts = [("proto_version", str(self.proto_version)), ("publication_names", quoted)]
        if self.messages:
            opts.append(("messages", "true"))
        if self.binary:
            opts.append(("binary", "true"))
        if self.streaming and self.proto_version >= 2:
            opts.append(("streaming", "true"))
        if self.origin is not None:
            opts.append(("origin", self.origin))
        return sql.SQL("START_REPLICATION SLOT {} LOGICAL {} ({})").format(
            sql.Identifier(self.slot), sql.SQL(lsn_to_str(self.start_lsn)),
            sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(k), sql.Literal(v))
                               for k, v in opts))

    def decoder(self) -> Decoder:
        """A decoder for the stream `command` asks for: its protocol, and streaming 'true'
        (never 'parallel', so a Stream Abort carries no abort LSN and time)."""
        return Decoder(self.proto_version, parallel_streaming=False)


class ReplicationStream:
    """One START_REPLICATION session: read frames, send standby status updates."""

    def __init__(self, dsn: str, options: StreamOptions) -> None:
        self.options = options
        try:
            self._conn = psycopg.connect(dsn, autocommit=True, replication="database",
                                         application_name="pgcdc")
        except psycopg.OperationalError as exc:
            raise _connect_error(exc) from None
        self._pg = self._conn.pgconn
        # Text values are formatted by this walsender session: make them unambiguous.
        for setting in OUTPUT_STATEMENTS:  # (bytea_output too: a database may default it)
            self._exec(setting)
        self._start()
        self.last_status_sent = 0.0

    def _exec(self, command: str) -> None:
        result = self._pg.exec_(command.encode())
        if result.status not in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK):
            detail = _message(result)
            raise SourceError(f"{command} failed: {detail}", transient=connection_gone(detail))

    def _start(self) -> None:
        command = self.options.command().as_string(self._conn)
        self._pg.send_query(command.encode())
        result = self._pg.get_result()
        if result is None or result.status != pq.ExecStatus.COPY_BOTH:
            detail = _message(result) if result is not None else "no result"
            raise SourceError(f"START_REPLICATION on slot {self.options.slot!r} failed: {detail}",
                              transient=connection_gone(detail))

    def fileno(self) -> int:
        return self._pg.socket

    def read(self, timeout: float) -> list[XLogData | PrimaryKeepalive]:
        """Frames available now, waiting at most `timeout` seconds for the first one."""
        frames: list[XLogData | PrimaryKeepalive] = []
        append = frames.append
        get_copy_data = self._pg.get_copy_data
        head = XLOGDATA_HEADER.unpack_from
        deadline = time.monotonic() + timeout
        while True:
            nbytes, data = get_copy_data(1)
            if nbytes > 0:
                frame = bytes(data)
                if frame[0] == 0x77 and nbytes >= XLOGDATA_HEADER_SIZE:
                    # parse_xlogdata inlined (the hot path: one per change)
                    start, end, clock = head(frame, 1)
                    append(_new_tuple(XLogData, (start, end, clock,
                                                 frame[XLOGDATA_HEADER_SIZE:])))
                else:
                    append(parse_frame(frame))
                if len(frames) >= 1000:
                    return frames
                continue
            if nbytes == -1:
                # The server ended COPY BOTH: a shutdown or a terminated walsender ends it with
                # no error message of its own (the result is a bare status code).
                result = self._pg.get_result()
                error = (result.error_message or b"").strip() if result is not None else b""
                detail = _message(result) if error and result is not None else (
                    "PostgreSQL shut down or terminated the walsender")
                raise SourceError(f"replication stream ended by the server: {detail}",
                                  transient=True)
            if nbytes < -1:
                raise SourceError(f"replication stream failed: {self._error()}",
                                  transient=True)
            if frames:
                return frames
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return frames
            readable, _, _ = select.select([self._pg.socket], [], [], remaining)
            if readable:
                try:
                    self._pg.consume_input()
                except psycopg.OperationalError as exc:
                    raise SourceError(f"replication connection lost: {first_line(exc)}",
                                      transient=True) from None

    def send_status(self, flush_lsn: int, reply_requested: bool = False) -> None:
        """Tell PostgreSQL it may recycle WAL up to `flush_lsn` (only what Kafka has)."""
        frame = build_standby_status_update(flush_lsn, flush_lsn, flush_lsn,
                                            unix_to_pg_timestamp(time.time()), reply_requested)
        try:
            if self._pg.put_copy_data(frame) != 1 or self._pg.flush() != 0:
                detail = self._error()
                raise SourceError(f"cannot send standby status update: {detail}",
                                  transient=connection_gone(detail))
        except psycopg.OperationalError as exc:
            raise SourceError(f"replication connection lost: {first_line(exc)}",
                              transient=True) from None
        self.last_status_sent = time.monotonic()

    def close(self) -> None:
        self._conn.close()

    def _error(self) -> str:
        return (self._pg.error_message or b"").decode(errors="replace").strip() or "unknown error"


# The server refused this role or database: retrying cannot help (not transient).
_REFUSED = ("must be superuser or replication role", "permission denied",
            "password authentication failed", "no pg_hba.conf entry", "does not exist")


def _connect_error(exc: psycopg.OperationalError) -> SourceError:
    detail = first_line(exc)
    if not any(text in detail for text in _REFUSED):
        return SourceError(f"cannot open a replication connection: {detail}", transient=True)
    hint = ""
    if "walsender" in detail or "WAL sender" in detail:
        hint = ("; the role needs the REPLICATION attribute (ALTER ROLE ... REPLICATION) or "
                "must be a superuser")
    return SourceError(f"PostgreSQL refused the replication connection: {detail}{hint}",
                       transient=connection_gone(detail))


def _message(result: pq.abc.PGresult) -> str:
    text = (result.error_message or b"").decode(errors="replace").strip()
    return text.splitlines()[0] if text else str(result.status)

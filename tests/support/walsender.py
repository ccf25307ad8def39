"""A raw logical replication client for tests: `START_REPLICATION ... LOGICAL` over psycopg's
COPY BOTH, framed and decoded with the connector's own code.

Tests use it where only a live walsender shows a behaviour: PostgreSQL streams a transaction
while it still runs (the SQL interface decodes after the fact and skips what already aborted),
and decodes each PREPARE before the test decides its fate. It answers keepalives with the
position received and confirms nothing: the slot keeps every change for later captures."""

from __future__ import annotations

import select
import time
from collections.abc import Callable

import psycopg
from psycopg import pq

from connector.pgoutput import (
    Decoder,
    PgOutputMessage,
    PrimaryKeepalive,
    XLogData,
    build_standby_status_update,
    parse_frame,
    unix_to_pg_timestamp,
)

#: (the XLogData's start LSN, its decoded message)
Pair = tuple[int, PgOutputMessage]


class WalSender:
    """One streaming replication connection on `slot` with pgoutput `options` (the decoder is
    told what they ask for: protocol version, parallel streaming)."""

    def __init__(self, dsn: str, slot: str, options: dict[str, str]) -> None:
        self.conn = psycopg.connect(dsn + " replication=database", autocommit=True)
        self.pgconn = self.conn.pgconn
        self.decoder = Decoder(int(options["proto_version"]),
                               parallel_streaming=options.get("streaming") == "parallel")
        self.frames: list[XLogData | PrimaryKeepalive] = []  # every frame, keepalives too
        self.received = 0  # the end of the last XLogData
        opts = ", ".join(f'"{k}" \'{v}\'' for k, v in options.items())
        self.pgconn.send_query(f'START_REPLICATION SLOT "{slot}" LOGICAL 0/0 ({opts})'.encode())
        res = self.pgconn.get_result()
        if res is None or res.status != pq.ExecStatus.COPY_BOTH:
            raise AssertionError(f"START_REPLICATION failed: {self.pgconn.get_error_message()!r}")

    def read_until(self, stop: Callable[[PgOutputMessage], bool], timeout: float = 60.0
                   ) -> list[Pair]:
        """(start LSN, message) pairs up to and including the first message `stop` accepts."""
        got: list[Pair] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            nbytes, data = self.pgconn.get_copy_data(1)
            if nbytes == 0:
                select.select([self.pgconn.socket], [], [], 0.2)
                self.pgconn.consume_input()
                continue
            if nbytes < 0:
                raise AssertionError(f"stream ended: {self.pgconn.get_error_message()!r}")
            frame = parse_frame(bytes(data))
            self.frames.append(frame)
            if isinstance(frame, PrimaryKeepalive):
                if frame.reply_requested:
                    self.pgconn.put_copy_data(build_standby_status_update(
                        self.received, 0, 0, unix_to_pg_timestamp(time.time())))
                    self.pgconn.flush()
                continue
            self.received = max(self.received, frame.wal_end)
            msg = self.decoder.decode(frame.payload, lsn=frame.wal_start)
            got.append((frame.wal_start, msg))
            if stop(msg):
                return got
        raise AssertionError(f"nothing matched within {timeout} s; last: {got[-3:]}")

    def close(self) -> None:
        self.conn.close()

"""Real PostgreSQL for the assembler integration tests: a schema, publication and slot per test,
captures through the SQL interface decoded with the real decoder."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from connector.assembler import Assembler, Output, Transaction
from connector.pgoutput import (
    Decoder,
    str_to_lsn,
)
from tests.support.walsender import Pair, WalSender


@dataclass(frozen=True)
class StreamConfig:
    """A server and the pgoutput options a capture asks for."""

    server: str  # fixture name: pg15 / pg18
    proto: int
    streaming: str  # "on" or "parallel" (protocol 4)

    @property
    def id(self) -> str:
        return f"{self.server}-v{self.proto}-{self.streaming}"


# Every protocol version that can stream, on each server (15: up to 3; 18: up to 4).
STREAM_CONFIGS = [
    StreamConfig("pg15", 2, "on"),
    StreamConfig("pg15", 3, "on"),
    StreamConfig("pg18", 2, "on"),
    StreamConfig("pg18", 4, "on"),
    StreamConfig("pg18", 4, "parallel"),
]
# Two-phase messages need protocol 3 or later.
TWO_PHASE_CONFIGS = [c for c in STREAM_CONFIGS if c.proto >= 3]


@dataclass
class Db:
    """One test's corner of a server: its own schema, publication and slots."""

    dsn: str
    schema: str
    config: StreamConfig
    conn: psycopg.Connection[Any]
    slots: list[str] = field(default_factory=list)
    others: list[Any] = field(default_factory=list)  # closed before the cleanup

    @property
    def publication(self) -> str:
        return f"pub_{self.schema}"

    def connect(self) -> psycopg.Connection[Any]:
        """Another session (autocommit off) with the schema on its search path."""
        conn = psycopg.connect(self.dsn, options=f"-c search_path={self.schema}")
        self.others.append(conn)
        return conn

    def stream(self, slot: str) -> WalSender:
        live = WalSender(self.dsn, slot, self.options())
        self.others.append(live)
        return live

    def execute(self, query: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        cur = self.conn.execute(query.encode(), params)  # type: ignore[call-overload]
        return cur.fetchall() if cur.description else []

    def create_slot(self, two_phase: bool = False) -> str:
        slot = f"s{len(self.slots)}_{self.schema}"
        self.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput', false, %s)",
                     (slot, two_phase))
        self.slots.append(slot)
        return slot

    def wait_for_flush(self) -> None:
        """The SQL interface decodes flushed WAL only; abort records are flushed lazily."""
        target = self.execute("SELECT pg_current_wal_insert_lsn()")[0][0]
        deadline = time.monotonic() + 30  # the walwriter is slow on a loaded machine
        while not self.execute("SELECT pg_current_wal_flush_lsn() >= %s", (target,))[0][0]:
            if time.monotonic() > deadline:
                raise AssertionError("WAL was not flushed within 30 s")
            time.sleep(0.02)

    def decoder(self) -> Decoder:
        """A decoder told what `options` ask the server for."""
        return Decoder(self.config.proto, parallel_streaming=self.config.streaming == "parallel")

    def options(self) -> dict[str, str]:
        return {"proto_version": str(self.config.proto), "publication_names": self.publication,
                "streaming": self.config.streaming, "messages": "true"}

    def capture(self, slot: str, *, peek: bool = False) -> list[Pair]:
        """Everything the slot has, as (lsn, message) pairs (consumed unless peek)."""
        self.wait_for_flush()
        fn = "pg_logical_slot_peek_binary_changes" if peek else "pg_logical_slot_get_binary_changes"
        options = [part for item in self.options().items() for part in item]
        placeholders = ", ".join(["%s"] * len(options))
        rows = self.execute(f"SELECT lsn::text, data FROM {fn}(%s, NULL, NULL, {placeholders})",
                            (slot, *options))
        decoder = self.decoder()
        pairs = []
        for lsn_text, data in rows:
            lsn = str_to_lsn(lsn_text)
            pairs.append((lsn, decoder.decode(data, lsn=lsn)))
        return pairs


def assemble(pairs: Sequence[Pair], assembler: Assembler | None = None) -> list[Output]:
    asm = assembler if assembler is not None else Assembler()
    return list(asm.feed_all(pairs))


def transactions(outputs: Sequence[Output]) -> list[Transaction]:
    return [o for o in outputs if isinstance(o, Transaction)]


def of_type(pairs: Sequence[Pair], cls: type) -> list[Any]:
    return [m for _, m in pairs if type(m) is cls]


def drop_everything(conn: psycopg.Connection[Any], db: Db) -> None:
    for gid, in conn.execute("SELECT gid FROM pg_prepared_xacts WHERE gid LIKE %s",
                             (f"%{db.schema}%",)).fetchall():
        conn.execute(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)))
    for slot in db.slots:
        # A closed walsender connection leaves its backend for a moment: wait for the slot to
        # become inactive (then stop the test's own walsender if it lingers) before dropping.
        deadline = time.monotonic() + 30  # the walwriter is slow on a loaded machine
        while True:
            row = conn.execute("SELECT active_pid FROM pg_replication_slots "
                               "WHERE slot_name = %s", (slot,)).fetchone()
            if row is None or row[0] is None:
                break
            if time.monotonic() > deadline + 10:
                raise AssertionError(f"slot {slot} stays active (pid {row[0]})")
            if time.monotonic() > deadline:
                conn.execute("SELECT pg_terminate_backend(%s)", (row[0],))
            time.sleep(0.05)
        conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                     "WHERE slot_name = %s", (slot,))
    conn.execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(db.publication)))
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(db.schema)))

"""Capturing real pgoutput bytes from the session's PostgreSQL servers.

`Sandbox` gives each test its own schema, publications and slots on `postgres` (15 and 18),
dropped afterwards. Captures use the SQL interface (`pg_logical_slot_peek_binary_changes`),
except where only a live walsender shows the behaviour (`tests.support.walsender`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import pq, sql

from connector.pgoutput import (
    Decoder,
    PgOutputMessage,
    str_to_lsn,
)


@dataclass(frozen=True)
class Row:
    """One row of pg_logical_slot_peek_binary_changes."""

    lsn: int
    xid: int
    data: bytes


class Rows(list[Row]):
    """The rows of one peek, with what it asked the server for (the decoder must be told)."""

    def __init__(self, rows: Sequence[Row], proto: int, streaming: str | None) -> None:
        super().__init__(rows)
        self.proto = proto
        self.parallel = streaming == "parallel"


def decode_rows(rows: Rows) -> list[PgOutputMessage]:
    decoder = Decoder(rows.proto, parallel_streaming=rows.parallel)
    return [decoder.decode(r.data, lsn=r.lsn) for r in rows]


def of_type(messages: Sequence[PgOutputMessage], cls: type) -> list[Any]:
    return [m for m in messages if type(m) is cls]


@dataclass
class Sandbox:
    conn: psycopg.Connection[Any]
    dsn: str
    schema: str
    slots: list[str] = field(default_factory=list)
    publications: list[str] = field(default_factory=list)

    @property
    def version(self) -> int:
        return self.conn.info.server_version

    @property
    def max_proto(self) -> int:
        """The highest pgoutput protocol the server accepts (15: 3, 16+: 4)."""
        return 4 if self.version >= 160000 else 3

    def sql(self, query: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        cur = self.conn.execute(query.encode(), params)  # type: ignore[call-overload]
        return cur.fetchall() if cur.description else []

    def one(self, query: str, params: Sequence[Any] | None = None) -> Any:
        return self.sql(query, params)[0][0]

    def name(self, stem: str) -> str:
        return f"{stem}_{self.schema}"

    def create_slot(self, two_phase: bool = False) -> str:
        slot = self.name(f"slot{len(self.slots)}")
        self.sql("SELECT pg_create_logical_replication_slot(%s, 'pgoutput', false, %s)",
                 (slot, two_phase))
        self.slots.append(slot)
        return slot

    def publication(self, *tables: str, publish: str | None = None) -> str:
        pub = self.name(f"pub{len(self.publications)}")
        query = sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(
            sql.Identifier(pub), sql.SQL(", ").join(sql.Identifier(self.schema, t) for t in tables))
        if publish is not None:
            query += sql.SQL(" WITH (publish = {})").format(sql.Literal(publish))
        self.conn.execute(query)
        self.publications.append(pub)
        return pub

    def wait_for_flush(self) -> None:
        """Peek reads only flushed WAL; aborts (and this server's async commits) flush lazily."""
        target = self.one("SELECT pg_current_wal_insert_lsn()")
        deadline = time.monotonic() + 30  # the walwriter is slow on a loaded machine
        while not self.one("SELECT pg_current_wal_flush_lsn() >= %s", (target,)):
            if time.monotonic() > deadline:
                raise AssertionError("WAL was not flushed within 30 s")
            time.sleep(0.02)

    def peek(self, slot: str, pub: str, proto: int, *, streaming: str | None = None,
             binary: bool = False, messages: bool = False, two_phase: bool = False) -> Rows:
        self.wait_for_flush()
        options = ["proto_version", str(proto), "publication_names", pub]
        if streaming is not None:
            options += ["streaming", streaming]
        if binary:
            options += ["binary", "true"]
        if messages:
            options += ["messages", "true"]
        if two_phase:
            options += ["two_phase", "on"]
        placeholders = ", ".join(["%s"] * len(options))
        rows = self.sql(f"SELECT lsn::text, xid::text::bigint, data FROM "
                        f"pg_logical_slot_peek_binary_changes(%s, NULL, NULL, {placeholders})",
                        (slot, *options))
        return Rows([Row(str_to_lsn(lsn), xid, bytes(data)) for lsn, xid, data in rows], proto,
                    streaming)

    def relid(self, table: str) -> int:
        return int(self.one("SELECT %s::regclass::oid", (f"{self.schema}.{table}",)))

    def attributes(self, table: str) -> list[tuple[str, int, int]]:
        """(name, type OID, typmod) of the table's live columns, in order."""
        return [(n, int(t), m) for n, t, m in self.sql(
            "SELECT attname::text, atttypid::oid::bigint, atttypmod FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            (f"{self.schema}.{table}",))]

    def text_rows(self, query: str) -> list[tuple[str | None, ...]]:
        """Rows in the text format (each type's output function), as pgoutput 't' sends them."""
        return [tuple(None if v is None else v.decode() for v in row)
                for row in self._raw_rows(query, 0)]

    def binary_rows(self, query: str) -> list[tuple[bytes | None, ...]]:
        """Rows in the binary format (each type's send function), as pgoutput 'b' sends them."""
        return self._raw_rows(query, 1)

    def _raw_rows(self, query: str, fmt: int) -> list[tuple[bytes | None, ...]]:
        res = self.conn.pgconn.exec_params(query.encode(), [], result_format=fmt)
        if res.status != pq.ExecStatus.TUPLES_OK:
            raise AssertionError((res.error_message or b"").decode())
        return [tuple(res.get_value(r, c) for c in range(res.nfields))
                for r in range(res.ntuples)]

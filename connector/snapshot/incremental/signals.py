"""The signal table: how `pgcdc snapshot` asks a running producer for an incremental snapshot,
and where the producer keeps its progress (so a killed producer resumes at its last chunk).

    CREATE TABLE public.pgcdc_signal (...)   -- created by the first `pgcdc snapshot`
                                             -- (or an administrator: `pgcdc grants`)

One row per request: the slot it is for, the tables (each `TableName` stored as its display
text ``schema.table``; the driver resolves a text against the catalog, `TableName.readings`),
its state (pending, running, done, cancelled, failed), the table being read and the last key
read of it (text, as COPY prints it), counts. The producer polls it. It is never published as a
user table (`connector.names.SIGNAL_TABLE`): pgcdc leaves it out of the table list it manages
for ``--tables`` (``*`` included); a FOR ALL TABLES publication (``--all-tables-publication``,
or one made by hand) does send its changes, and the producer drops them before Kafka and the
initial snapshot skips it, so no ``<prefix>.public.pgcdc_signal`` topic is made. A row is a
request of one slot's producer; the producer works on one at a time, oldest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import psycopg
from psycopg import sql

from connector.errors import PrivilegeError, is_privilege_error
from connector.names import SIGNAL_TABLE, TableName
from connector.replication.privileges import lacking, signal_grant_sql

__all__ = ["SIGNAL_TABLE", "SnapshotRequest", "can_write", "cancel", "create_table", "ddl",
           "ensure_table",
           "lacking_grant", "mark_running", "next_request", "pending_includes", "record_progress",
           "request", "requests", "set_state", "state_of", "table_exists"]

_TABLE = sql.Identifier(*SIGNAL_TABLE)

_DDL = sql.SQL("""CREATE TABLE IF NOT EXISTS {} (
    id bigserial PRIMARY KEY,
    slot text NOT NULL,
    tables text[] NOT NULL,
    state text NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'running', 'done', 'cancelled', 'failed')),
    table_index int NOT NULL DEFAULT 0,
    last_key text[],
    chunks bigint NOT NULL DEFAULT 0,
    rows bigint NOT NULL DEFAULT 0,
    message text,
    requested_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now())""").format(_TABLE)

Conn = psycopg.Connection[tuple]  # type: ignore[type-arg]


@dataclass(frozen=True)
class SnapshotRequest:
    id: int
    slot: str
    tables: tuple[str, ...]  # as stored: ``schema.table`` texts
    state: str
    table_index: int
    last_key: tuple[str, ...] | None
    chunks: int
    rows: int
    message: str | None
    rate: float | None  # rows per second since it started (restarts included)
    channel: str = "table"  # where it came from: the signal table or Kafka (`channel`)


def create_table(conn: Conn) -> None:
    conn.execute(_DDL)


def ddl() -> str:
    """The signal table's CREATE TABLE, for an administrator to run (`pgcdc grants`)."""
    return _DDL.as_string(None)


def ensure_table(conn: Conn) -> None:
    """Create the signal table unless it exists: CREATE TABLE IF NOT EXISTS needs CREATE on
    the schema even when the table is there, which a least-privilege role lacks (an
    administrator created the table and granted it, docs/operations.md "Least privilege")."""
    if table_exists(conn):
        return
    try:
        create_table(conn)
    except psycopg.Error as exc:
        if not is_privilege_error(exc):
            raise
        role = conn.info.user
        raise PrivilegeError(
            role, f"CREATE on schema {SIGNAL_TABLE.schema} (to create the signal table "
            f"{SIGNAL_TABLE})", "have an administrator create it and grant it "
            f"(`pgcdc grants` prints the SQL): {signal_grant_sql(role, *SIGNAL_TABLE)}") \
            from None


def lacking_grant(exc: BaseException, role: str) -> PrivilegeError:
    """The one line for a privilege error (SQLSTATE 42501) met using the signal table."""
    if SIGNAL_TABLE.table in str(exc):  # the table or its id sequence
        return PrivilegeError(role, f"SELECT, INSERT, UPDATE on table "
                              f"{SIGNAL_TABLE} (and USAGE on its id sequence)",
                              f"run {signal_grant_sql(role, *SIGNAL_TABLE)}")
    return lacking(exc, role)


def table_exists(conn: Conn) -> bool:
    """Whether anyone ever asked for an incremental snapshot here (`pgcdc snapshot` creates
    the table; a producer only looks for requests once it exists)."""
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL",
                       (_TABLE.as_string(conn),)).fetchone()
    return bool(row and row[0])


def request(conn: Conn, slot: str, tables: Sequence[TableName],
            message: str | None = None) -> int:
    """A new request; its id. `message` says why (a re-sync after DDL), for `pgcdc status`."""
    row = conn.execute(sql.SQL("INSERT INTO {} (slot, tables, message) VALUES (%s, %s, %s) "
                               "RETURNING id").format(_TABLE),
                       (slot, [str(t) for t in tables], message)).fetchone()
    assert row is not None
    return int(row[0])


def pending_includes(conn: Conn, slot: str, table: TableName) -> bool:
    """Whether a request of `slot` not started yet includes `table`."""
    row = conn.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {} WHERE slot = %s AND "
                               "state = 'pending' AND %s = ANY (tables))").format(_TABLE),
                       (slot, str(table))).fetchone()
    return bool(row and row[0])


def cancel(conn: Conn, slot: str) -> int:
    """Cancel every unfinished request of `slot`; how many."""
    return conn.execute(sql.SQL(
        "UPDATE {} SET state = 'cancelled', updated_at = now() WHERE slot = %s "
        "AND state IN ('pending', 'running')").format(_TABLE), (slot,)).rowcount


def _requests(conn: Conn, where: sql.Composable, params: Sequence[object]) -> list[SnapshotRequest]:
    rows = conn.execute(sql.SQL(
        "SELECT id, slot, tables, state, table_index, last_key, chunks, rows, message, "
        "rows / greatest(extract(epoch FROM updated_at - started_at), 0.001)::float8 "
        "FROM {} WHERE {} ORDER BY id").format(_TABLE, where), params).fetchall()
    return [SnapshotRequest(r[0], r[1], tuple(r[2]), r[3], r[4],
                            None if r[5] is None else tuple(r[5]), r[6], r[7], r[8], r[9])
            for r in rows]


def requests(conn: Conn, slot: str) -> list[SnapshotRequest]:
    """Every request of `slot`, oldest first (for `pgcdc status`)."""
    return _requests(conn, sql.SQL("slot = %s"), (slot,))


def next_request(conn: Conn, slot: str) -> SnapshotRequest | None:
    """The oldest unfinished request of `slot`: a running one first (resumed after a restart)."""
    found = _requests(conn, sql.SQL("slot = %s AND state IN ('running', 'pending')"), (slot,))
    running = [r for r in found if r.state == "running"]
    return (running or found)[0] if found else None


def state_of(conn: Conn, request_id: int) -> str | None:
    row = conn.execute(sql.SQL("SELECT state FROM {} WHERE id = %s").format(_TABLE),
                       (request_id,)).fetchone()
    return None if row is None else str(row[0])


def record_progress(conn: Conn, request_id: int, table_index: int,
                    last_key: Sequence[str] | None, rows: int) -> None:
    """A chunk of the request is in Kafka: the next one starts after `last_key` of table
    `table_index` (None: at the table's start). Only while the request is still running, so a
    cancel is not undone."""
    conn.execute(sql.SQL(
        "UPDATE {} SET state = 'running', table_index = %s, last_key = %s, "
        "chunks = chunks + 1, rows = rows + %s, updated_at = now(), "
        "started_at = coalesce(started_at, now()) "
        "WHERE id = %s AND state IN ('pending', 'running')").format(_TABLE),
        (table_index, None if last_key is None else list(last_key), rows, request_id))


def mark_running(conn: Conn, request_id: int) -> None:
    conn.execute(sql.SQL(
        "UPDATE {} SET state = 'running', started_at = coalesce(started_at, now()), "
        "updated_at = now() WHERE id = %s AND state = 'pending'").format(_TABLE), (request_id,))


def set_state(conn: Conn, request_id: int, state: str, message: str | None = None) -> None:
    """A new state; `message` replaces the request's message (None keeps it: a re-sync's
    reason stays on the request once it is done)."""
    conn.execute(sql.SQL("UPDATE {} SET state = %s, message = coalesce(%s, message), "
                         "updated_at = now() WHERE id = %s").format(_TABLE),
                 (state, message, request_id))


def can_write(conn: Conn) -> bool:
    """Whether the role may queue a request here: INSERT on the table, or CREATE on its schema
    while it does not exist (`ensure_table`)."""
    row = conn.execute(
        "SELECT CASE WHEN to_regclass(%s) IS NULL THEN has_schema_privilege(%s, 'CREATE') "
        "ELSE has_table_privilege(%s, 'INSERT') END",
        (_TABLE.as_string(conn), SIGNAL_TABLE.schema, _TABLE.as_string(conn))).fetchone()
    return bool(row and row[0])

"""The replication slot, over a regular SQL connection: reading it (`read_slot`), checking that
pgcdc can stream from it (`check_slot`), creating and dropping it.

`ReplicationAdmin` (admin.py) calls these for its callers (`admin.slot(name)`, ...).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import psycopg

from connector.errors import SourceError, connection_gone, first_line, is_privilege_error
from connector.pgoutput.lsn import str_to_lsn

from .privileges import lacking
from .standby import SLOT_WAIT, slot_refusal

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SlotInfo:
    name: str
    plugin: str
    database: str
    active: bool
    active_pid: int | None
    restart_lsn: int | None
    confirmed_flush_lsn: int | None
    wal_status: str | None
    retained_bytes: int | None


def read_slot(conn: psycopg.Connection[tuple], name: str) -> SlotInfo | None:  # type: ignore[type-arg]
    row = conn.execute(
        "SELECT slot_name, coalesce(plugin, ''), coalesce(database, ''), active, active_pid,"
        " restart_lsn::text, confirmed_flush_lsn::text, wal_status,"
        " pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()"
        " ELSE pg_current_wal_lsn() END, restart_lsn)::bigint"  # a standby has no current
        " FROM pg_replication_slots WHERE slot_name = %s",
        (name,),
    ).fetchone()
    if row is None:
        return None
    return SlotInfo(row[0], row[1], row[2], row[3], row[4],
                    str_to_lsn(row[5]) if row[5] else None,
                    str_to_lsn(row[6]) if row[6] else None, row[7], row[8])


def check_slot(conn: psycopg.Connection[tuple], info: SlotInfo) -> None:  # type: ignore[type-arg]
    if info.plugin != "pgoutput":
        raise SourceError(f"replication slot {info.name!r} uses plugin {info.plugin!r}, "
                          "not pgoutput; drop it or choose another --slot")
    if info.wal_status == "lost":
        raise SourceError(
            f"replication slot {info.name!r} has lost required WAL (wal_status = lost); "
            "changes are missing: drop the slot and take a new snapshot"
        )
    row = conn.execute("SELECT current_database()").fetchone()
    assert row is not None
    current_db = row[0]
    if info.database and info.database != current_db:
        raise SourceError(f"replication slot {info.name!r} belongs to database "
                          f"{info.database!r}, not {current_db!r}")


def create_slot(conn: psycopg.Connection[tuple], name: str, *,  # type: ignore[type-arg]
                role: str, standby: bool) -> SlotInfo:
    """Create the pgoutput slot `name` as `role` (named in a privilege error); on a `standby`,
    say first that its creation waits for the primary."""
    if standby:
        log.info(SLOT_WAIT.format(slot=name))
    try:
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))
    except psycopg.Error as exc:
        if is_privilege_error(exc):
            raise lacking(exc, role) from None
        detail = first_line(exc)
        refusal = slot_refusal(detail)
        if refusal is not None:
            raise SourceError(f"cannot create replication slot {name!r}: {refusal}") \
                from None
        raise SourceError(f"cannot create replication slot {name!r}: {detail}",
                          transient=connection_gone(detail)) from None
    info = read_slot(conn, name)
    assert info is not None
    log.info("created replication slot %s", name)
    return info


def drop_slot(conn: psycopg.Connection[tuple], name: str) -> None:  # type: ignore[type-arg]
    conn.execute("SELECT pg_drop_replication_slot(%s)", (name,))

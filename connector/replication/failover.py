"""Slot continuity: prove on every reconnect that the slot continues what this producer sent.

PostgreSQL has no slot identity (no UUID), so continuity is judged by positions. The producer
remembers the highest flush LSN it sent to the server (``sent_flush``): every change below it
was published and acknowledged by Kafka, or lay in a stretch with no changes (keepalives).

- The server only moves ``confirmed_flush_lsn`` forward to what a client confirmed, or sets it
  at creation to the current WAL insert position. A slot found *ahead* of ``sent_flush`` was
  therefore advanced by someone else or dropped and recreated: the changes between our
  position and the slot's were never published. That is a gap: refuse.
- A slot found *behind* ``sent_flush`` is normal: ``confirmed_flush_lsn`` reaches disk only at
  checkpoints (a crashed server comes back with an older one), and a standby's synced copy
  trails the primary's. Streaming resumes from there and re-publishes what Kafka already has
  (at-least-once); the merge job's LSN guard makes the duplicates harmless.
- A missing slot: nothing can resume it. Refuse.

After a failover this reasoning holds only if the standby never lacks WAL the producer has
already published: the primary's ``synchronized_standby_slots`` must list the physical slot of
every standby that can be promoted, so the walsender holds logical changes back until those
standbys have flushed them. Without it a lagging standby can be promoted without the last
changes we published, and a slot recreated there could start below ``sent_flush`` unnoticed.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from connector.errors import SourceError
from connector.pgoutput.lsn import lsn_to_str

from .features import ServerFeatures

__all__ = ["check_slot_continuity", "ensure_failover", "failover_state"]

_RESNAPSHOT = ("take a new snapshot into a new slot (pgcdc run --snapshot initial with a new "
               "--slot, or drop the slot first)")


def check_slot_continuity(slot: str, found_confirmed: int | None, exists: bool,
                          sent_flush: int | None, server: str = "the server") -> None:
    """Raise a non-transient SourceError when streaming from the slot would skip changes.

    `sent_flush` is None before this process confirmed anything (no progress to compare);
    `server` names the server reached (host:port: after a failover, the promoted standby).
    """
    if not exists:
        raise SourceError(f"replication slot {slot!r} does not exist on the primary now reached "
                          f"({server}): it was dropped, or this is a promoted standby that did "
                          "not sync it (a failover slot, and sync_replication_slots = on on the "
                          f"standby); changes after {lsn_to_str(sent_flush or 0)} cannot be "
                          f"recovered: {_RESNAPSHOT}")
    if sent_flush is None or found_confirmed is None:
        return
    if found_confirmed > sent_flush:
        raise SourceError(
            f"replication slot {slot!r} is at {lsn_to_str(found_confirmed)}, ahead of the "
            f"{lsn_to_str(sent_flush)} this producer confirmed: it was recreated or advanced "
            f"by someone else, and the changes in between were never published: {_RESNAPSHOT}")


def failover_state(conn: psycopg.Connection[tuple], slot: str) -> str:  # type: ignore[type-arg]
    """One line for `pgcdc status`: failover flag; on a standby, synced and bytes behind replay."""
    if not ServerFeatures(conn.info.server_version).failover_slots:
        return "not available (PostgreSQL 17+ has failover slots)"
    row = conn.execute(
        "SELECT failover, synced, temporary, pg_is_in_recovery(),"
        " pg_wal_lsn_diff(pg_last_wal_replay_lsn(), confirmed_flush_lsn)::bigint"
        " FROM pg_catalog.pg_replication_slots WHERE slot_name = %s", (slot,)).fetchone()
    if row is None:
        return "-"
    failover, synced, temporary, standby, behind = row
    text = "on" if failover else "off"
    if standby and synced and temporary:
        # The first synced copy stays temporary until the primary's slot has advanced past
        # what this standby can decode from; a promotion drops a temporary slot.
        text += ("; synced copy still temporary (a promotion now would lose it): wait until "
                 "the producer has confirmed progress on the primary")
    elif standby:
        text += (f"; synced from the primary, {behind if behind is not None else '?'} bytes "
                 "behind this standby's replay" if synced else "; NOT synced from the primary")
    return text


def ensure_failover(dsn: str, conn: psycopg.Connection[tuple], slot: str,  # type: ignore[type-arg]
                    wanted: bool | None) -> None:
    """Make `slot` a failover slot: `wanted` None means where the server supports it (17+,
    a primary); True on an older server is refused. ALTER_REPLICATION_SLOT needs a
    replication connection and an inactive slot, so this runs before START_REPLICATION."""
    if wanted is False:
        return
    features = ServerFeatures(conn.info.server_version)
    if not features.failover_slots:
        if wanted:
            raise SourceError(f"--failover-slot needs PostgreSQL 17+, the server is "
                              f"{features.major}")
        return
    row = conn.execute("SELECT failover FROM pg_catalog.pg_replication_slots"
                       " WHERE slot_name = %s AND NOT pg_is_in_recovery()", (slot,)).fetchone()
    if row is None or row[0]:
        return
    try:
        with psycopg.connect(dsn, autocommit=True, replication="database",
                             application_name="pgcdc-admin") as rconn:
            rconn.execute(sql.SQL("ALTER_REPLICATION_SLOT {} (FAILOVER true)").format(
                sql.Identifier(slot)).as_string(rconn))
    except psycopg.Error as exc:
        text = str(exc).strip().splitlines()
        raise SourceError(f"cannot make replication slot {slot!r} a failover slot: "
                          f"{text[0] if text else type(exc).__name__}") from None

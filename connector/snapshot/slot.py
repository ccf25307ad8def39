"""The snapshot's slot: a TEMPORARY logical slot created with an exported snapshot.

    exported = ExportedSnapshot.create(dsn, "pgcdc_snapshot", features)
    exported.consistent_point, exported.snapshot_name     # read the tables in that snapshot
    exported.persist(admin_conn, "pgcdc")                 # all events acknowledged: keep it
    exported.close()                                      # the temporary slot goes away

The slot is created on its own replication connection, which then stays idle: the exported
snapshot lives until that connection runs its next command, and the temporary slot until the
connection ends -- however it ends (a crash, SIGKILL, a network failure noticed by TCP
keepalives), so an abandoned snapshot never leaves a slot holding WAL. `persist` copies it
(``pg_copy_logical_replication_slot``) into the permanent slot the stream then resumes from:
same plugin, same restart LSN and catalog xmin, confirmed flush LSN = the consistent point.
"""

from __future__ import annotations

import logging

import psycopg
from psycopg import sql

from connector.errors import SourceError, first_line
from connector.pgoutput.lsn import lsn_to_str, str_to_lsn
from connector.replication.features import ServerFeatures
from connector.replication.privileges import connect_refusal, dsn_role
from connector.replication.standby import SLOT_WAIT, slot_refusal

__all__ = ["ExportedSnapshot", "check_free_slots", "snapshot_slot_name"]

log = logging.getLogger(__name__)

Conn = psycopg.Connection[tuple]  # type: ignore[type-arg]

_SUFFIX = "_snapshot"
_MAX_NAME = 63  # NAMEDATALEN - 1
# The server drops a vanished client's connection (and so the temporary slot) within ~1 min.
_KEEPALIVES = ("SET tcp_keepalives_idle = 30", "SET tcp_keepalives_interval = 10",
               "SET tcp_keepalives_count = 3")


def check_free_slots(admin_conn: Conn, needed: int) -> None:
    """Fail before reading anything when the server cannot hold the temporary slot and (for a
    snapshot that continues with streaming) its permanent copy at the same time."""
    row = admin_conn.execute(
        "SELECT current_setting('max_replication_slots')::int - count(*)::int"
        " FROM pg_catalog.pg_replication_slots").fetchone()
    free = int(row[0]) if row is not None else 0
    if free < needed:
        raise SourceError(f"the snapshot needs {needed} free replication slots for a moment "
                          f"(its temporary slot{' and the permanent copy' if needed > 1 else ''})"
                          f", the server has {max(free, 0)}: raise max_replication_slots or drop "
                          "unused slots")


def snapshot_slot_name(slot: str) -> str:
    """The temporary slot's name: the permanent slot's with ``_snapshot`` appended."""
    return slot[:_MAX_NAME - len(_SUFFIX)] + _SUFFIX


class ExportedSnapshot:
    def __init__(self, conn: Conn, slot: str, consistent_point: int, snapshot_name: str) -> None:
        self._conn = conn
        self.slot = slot
        self.consistent_point = consistent_point
        self.snapshot_name = snapshot_name

    @classmethod
    def create(cls, dsn: str, slot: str, features: ServerFeatures) -> ExportedSnapshot:
        try:
            conn = psycopg.connect(dsn, autocommit=True, replication="database",
                                   application_name="pgcdc-snapshot")
        except psycopg.OperationalError as exc:
            refused = connect_refusal(str(exc), dsn_role(dsn))
            if refused is not None:
                raise refused from None
            raise SourceError(f"cannot open a replication connection: {first_line(exc)}") \
                from None
        if features.slot_option_list:
            options = sql.SQL("(SNAPSHOT 'export')")
        else:
            options = sql.SQL("EXPORT_SNAPSHOT")
        command = sql.SQL("CREATE_REPLICATION_SLOT {} TEMPORARY LOGICAL pgoutput {}").format(
            sql.Identifier(slot), options)
        try:
            for setting in _KEEPALIVES:
                conn.execute(setting)
            log.info("creating temporary slot %s with an exported snapshot (waits for running "
                     "transactions to end)", slot)
            standby = conn.execute("SELECT pg_is_in_recovery()").fetchone()
            if standby is not None and standby[0]:
                log.info(SLOT_WAIT.format(slot=slot))
            row = conn.execute(command.as_string(conn)).fetchone()
        except psycopg.Error as exc:
            conn.close()
            refusal = slot_refusal(first_line(exc))
            if refusal is not None:
                raise SourceError(f"cannot create the snapshot slot {slot!r}: {refusal}") \
                    from None
            raise SourceError(f"cannot create the snapshot slot {slot!r}: {first_line(exc)}"
                              f"{_busy_hint(dsn, slot)}") from None
        assert row is not None
        return cls(conn, slot, str_to_lsn(row[1]), str(row[2]))

    def persist(self, admin_conn: Conn, slot: str) -> None:
        """Copy the temporary slot into the permanent `slot` (created now)."""
        try:
            admin_conn.execute("SELECT pg_catalog.pg_copy_logical_replication_slot(%s, %s, false)",
                               (self.slot, slot))
        except psycopg.Error as exc:
            raise SourceError(f"cannot create replication slot {slot!r} from the snapshot slot: "
                              f"{first_line(exc)}") from None
        log.info("created replication slot %s at the snapshot's consistent point %s", slot,
                 lsn_to_str(self.consistent_point))

    def close(self) -> None:
        """End the replication connection: the exported snapshot and the temporary slot go."""
        self._conn.close()


def _busy_hint(dsn: str, slot: str) -> str:
    """Who holds a temporary slot of that name (another pgcdc taking the same snapshot?)."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute("SELECT active_pid FROM pg_catalog.pg_replication_slots"
                               " WHERE slot_name = %s", (slot,)).fetchone()
    except psycopg.Error:
        return ""
    if row is None or row[0] is None:
        return ""
    return (f" (backend {row[0]} holds it: another pgcdc is taking this snapshot; if that one "
            f"is gone, SELECT pg_terminate_backend({row[0]}) ends it and drops the slot)")

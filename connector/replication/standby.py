"""Capture from a hot standby (PostgreSQL 16+ decodes logically in recovery): what it needs,
said in one line each, and what pgcdc does differently there.

A standby is recognised by ``pg_is_in_recovery()``. On it:

- The slot lives on the standby, with its WAL retention and its snapshot reads: the primary
  serving the application carries neither. Its catalog rows (the catalog xmin) must survive
  the primary's VACUUM, or PostgreSQL invalidates the slot ("rows_removed"): the standby needs
  ``hot_standby_feedback = on`` (refused without: the slot would die at the first conflicting
  vacuum, and a re-snapshot with it), and should stream through a physical slot
  (``primary_slot_name``), which keeps that feedback while the standby is disconnected (a
  warning without).
- The primary must run with ``wal_level = logical``: a standby only decodes WAL written with
  it. The standby cannot see the primary's setting; slot creation fails with PostgreSQL's
  "requires wal_level >= logical on the primary", said here as the fix (`slot_refusal`), and
  with a heartbeat DSN (below) the primary is asked directly (`primary_refusals`).
- Creating a slot needs a consistent starting point, which a standby finds only in a
  running-transactions record from the primary: the primary logs one every 15 s while it
  writes WAL, none while it is idle. So creation can wait for minutes on a quiet primary;
  `SLOT_WAIT` says so and names ``SELECT pg_log_standby_snapshot()`` (run on the primary: it
  logs one at once).
- No DDL: the publication is the primary's (it reaches the standby by replication). pgcdc
  does not create or alter it there: with ``--tables`` it checks it and names the statement
  to run on the primary when it is missing or lists other tables (`publication_refusal`). New
  tables are not added to it (the table watcher only reports them), and ``--keyless-tables
  full`` cannot set a replica identity there.
- No writes: ``pg_logical_emit_message`` cannot run, so heartbeats come from the primary
  (``--heartbeat-dsn``, see `connector.pipeline.Pipeline._heartbeat` for why the cut and
  expiry arguments stay true) or, without it, are off. Incremental snapshots write nothing
  there: requests (and re-syncs after DDL) come over the ``<prefix>.signal`` topic and each
  chunk is bracketed by the read's snapshot and a WAL horizon instead of written watermarks
  (`connector.snapshot.incremental.channel`, `connector.snapshot.incremental.readonly`).
- A promotion makes the server a primary: ``pg_is_in_recovery()`` turns false and the same
  slot goes on (it is the server's own slot, not a synced copy). The producer notices it at
  its next heartbeat and starts a new session, set up as on a primary.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

__all__ = ["SLOT_WAIT", "StandbyFacts", "primary_refusals", "publication_refusal",
           "read_facts", "slot_refusal", "standby_refusals", "standby_warnings"]

Conn = psycopg.Connection[tuple]  # type: ignore[type-arg]

SLOT_WAIT = ("creating replication slot {slot} on a standby: PostgreSQL waits for the "
             "primary's next running-transactions record (logged every 15 s while the primary "
             "writes, never while it is idle): on a quiet primary run SELECT "
             "pg_log_standby_snapshot() there to go on at once")


@dataclass(frozen=True)
class StandbyFacts:
    """What a standby's settings say (`read_facts`)."""

    major: int
    hot_standby_feedback: bool
    primary_slot_name: str  # '' when none


def read_facts(conn: Conn) -> StandbyFacts | None:
    """The standby's facts, or None when the server is not in recovery (a primary)."""
    row = conn.execute("SELECT pg_is_in_recovery(), current_setting('hot_standby_feedback'),"
                       " current_setting('primary_slot_name')").fetchone()
    if row is None or not row[0]:
        return None
    return StandbyFacts(conn.info.server_version // 10000, row[1] == "on", row[2] or "")


def standby_refusals(facts: StandbyFacts) -> list[str]:
    """Why capture cannot run on this standby (one line each; empty: it can)."""
    out = []
    if facts.major < 16:
        out.append(f"this server is a standby running PostgreSQL {facts.major}: logical "
                   "decoding on a standby needs PostgreSQL 16+; point --dsn at the primary")
    if not facts.hot_standby_feedback:
        out.append("this server is a standby with hot_standby_feedback = off: the primary's "
                   "VACUUM would remove catalog rows the slot needs and PostgreSQL would "
                   "invalidate it; set hot_standby_feedback = on on the standby (SIGHUP: "
                   "SELECT pg_reload_conf())")
    return out


def standby_warnings(facts: StandbyFacts) -> list[str]:
    """What a standby lacks that capture survives without, with the risk (one line each)."""
    if facts.primary_slot_name:
        return []
    return ["this standby streams without a physical replication slot (primary_slot_name is "
            "empty): while it is disconnected the primary forgets its hot_standby_feedback and "
            "may vacuum catalog rows the logical slot needs (PostgreSQL then invalidates it); "
            "create one on the primary (SELECT pg_create_physical_replication_slot('<name>')) "
            "and set primary_slot_name = '<name>' on the standby"]


def primary_refusals(wal_level: str, primary_system: int | None,
                     standby_system: int | None) -> list[str]:
    """What is wrong with the primary the heartbeat DSN reaches (one line each): its wal_level,
    or it is not this standby's primary (another cluster: its messages never reach the slot)."""
    out = []
    if wal_level != "logical":
        out.append(f"the primary's wal_level is {wal_level!r}: a standby decodes only WAL "
                   "written with wal_level = logical; set it in the primary's postgresql.conf "
                   "and restart the primary")
    if primary_system is not None and standby_system is not None \
            and primary_system != standby_system:
        out.append(f"--heartbeat-dsn reaches a server of another cluster (system identifier "
                   f"{primary_system}, this standby's is {standby_system}): its heartbeats "
                   "would never reach the slot; point it at this standby's primary")
    return out


def slot_refusal(detail: str) -> str | None:
    """PostgreSQL's refusal to create a slot on a standby, as the fix (None: another error)."""
    if "wal_level" in detail and "on the primary" in detail:
        return ("the primary does not run with wal_level = logical, which logical decoding on "
                "a standby needs: set it in the primary's postgresql.conf and restart the "
                "primary (the standby follows)")
    return None


def publication_refusal(name: str, doing: str, statements: list[str]) -> str:
    """The line for a publication that a standby cannot create or change: what to run on the
    primary (`doing`: "does not exist", "lists other tables", ...)."""
    return (f"publication {name!r} {doing}, and this server is a standby (no DDL): run on the "
            f"primary: {'; '.join(statements)}; then start pgcdc again")

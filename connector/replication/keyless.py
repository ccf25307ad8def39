"""Tables without a key (`--keyless-tables`): the policy, and the catalog queries it rests on.

Once a table without a key is published, PostgreSQL rejects the application's UPDATE and DELETE
on it ("does not have a replica identity"). The policy (`KEYLESS_POLICIES`) says what pgcdc
does when it creates or extends the publication over such tables: refuse the first start
naming them (later starts: only those named exactly, `keyless_refused`), leave them out, or set
REPLICA IDENTITY FULL on them (`apply_keyless_policy`). `keyless_tables` finds them,
`full_identity_tables` the ones keyed by the whole row.

`ReplicationAdmin` (admin.py) calls these for its callers (`admin.keyless_tables(...)`, ...).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

import psycopg
from psycopg import sql

from connector.errors import (
    ConfigError,
    SourceError,
    connection_gone,
    first_line,
    is_privilege_error,
    is_vanished,
)

from .lock_free import is_lock_timeout
from .privileges import lacking

log = logging.getLogger(__name__)

# --keyless-tables: tables without a key, when pgcdc creates or extends the publication
# (`apply_keyless_policy`): refuse the first start (later: tables named exactly;
# `keyless_refused`) | leave them out | set REPLICA IDENTITY FULL.
KEYLESS_POLICIES = ("refuse", "skip", "full")


class Source(Protocol):
    """What the policy needs of the source (`ReplicationAdmin` is one)."""

    @property
    def conn(self) -> psycopg.Connection[tuple]: ...  # type: ignore[type-arg]

    @property
    def role(self) -> str: ...

    def in_recovery(self) -> bool: ...


def exact_tables(patterns: Sequence[str]) -> set[tuple[str, str]]:
    """The tables `patterns` name exactly: a pattern without ``*``, ``?`` or ``[`` (no schema
    means ``public``, as `ReplicationAdmin.matching_tables` reads it)."""
    exact = set()
    for pattern in patterns:
        if not any(c in pattern for c in "*?["):
            schema, _, table = pattern.rpartition(".")
            exact.add((schema or "public", table))
    return exact


def keyless_refused(keyless: Sequence[tuple[str, str]], patterns: Sequence[str], *,
                    first_start: bool) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(refused, left out) of the `keyless` tables `patterns` match, under ``--keyless-tables
    refuse``. The same command always starts again: what a running producer tolerates (a
    keyless table created later, left out of the list) its next start tolerates too, so only
    the `first_start` (the publication does not exist yet) refuses every one; later starts
    refuse only tables named exactly in `patterns` (`exact_tables`) and leave out the ones a
    pattern matched (docs/publishing.md, "Tables without a primary key")."""
    exact = exact_tables(patterns)
    refused = [t for t in keyless if first_start or t in exact]
    return refused, [t for t in keyless if t not in refused]


def keyless_left_out(table: str, publication: str) -> str:
    """The warning naming a keyless table left out of the list (at start, and by the table
    watcher, which says "new table ...")."""
    return (f"{table} matches --tables but has no primary key: left out of publication "
            f"{publication} (PostgreSQL would reject UPDATE and DELETE on it); it joins once it "
            "has one (or REPLICA IDENTITY FULL), or run with --keyless-tables full")


# The relation ids of the qualified names in a text[] parameter (`_names`) that resolve now:
# to_regclass gives NULL for a name that no longer does (a table dropped or renamed since it
# was listed), where a ::regclass cast would fail the whole statement.
_RELIDS = sql.SQL("SELECT r FROM unnest(%s::text[]) AS x, to_regclass(x) AS r"
                  " WHERE r IS NOT NULL")


def _names(conn: psycopg.Connection[tuple], tables: Sequence[tuple[str, str]]  # type: ignore[type-arg]
           ) -> list[str]:
    """`tables` as quoted qualified names, for `_RELIDS`."""
    return [sql.Identifier(*t).as_string(conn) for t in tables]


def keyless_tables(conn: psycopg.Connection[tuple],  # type: ignore[type-arg]
                   tables: Sequence[tuple[str, str]] | None) -> list[tuple[str, str]]:
    """The tables among `tables` (None: every table FOR ALL TABLES publishes; a partitioned
    table stands for its partitions too) that PostgreSQL would refuse UPDATE and DELETE on
    once published: REPLICA IDENTITY DEFAULT without a primary key, or USING INDEX whose
    index is gone. REPLICA IDENTITY NOTHING is an explicit choice (insert-only tables) and
    is left to the warning of `warn_about_replica_identity`."""
    scope: sql.Composable = sql.SQL(
        "n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%%'")
    params: list[object] = []
    if tables is not None:
        if not tables:
            return []
        # pg_partition_tree: nothing for a table that is not partitioned. to_regclass: a
        # table dropped or renamed since it was listed is no longer among them.
        scope = sql.SQL("c.oid IN (SELECT t.r FROM ({0}) AS t(r) UNION ALL"
                        " SELECT p.relid FROM ({0}) AS t(r),"
                        " LATERAL pg_partition_tree(t.r) AS p)").format(_RELIDS)
        names = _names(conn, tables)
        params += [names, names]
    rows = conn.execute(sql.SQL(
        "SELECT n.nspname::text, c.relname::text FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE c.relkind IN ('r', 'p') AND c.relpersistence = 'p' AND {}"
        " AND ((c.relreplident = 'd' AND NOT EXISTS (SELECT 1 FROM pg_index i"
        "       WHERE i.indrelid = c.oid AND i.indisprimary))"
        "   OR (c.relreplident = 'i' AND NOT EXISTS (SELECT 1 FROM pg_index i"
        "       WHERE i.indrelid = c.oid AND i.indisreplident)))"
        " ORDER BY 1, 2").format(scope), params).fetchall()
    return [(r[0], r[1]) for r in rows]


def full_identity_tables(conn: psycopg.Connection[tuple],  # type: ignore[type-arg]
                         tables: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The tables among `tables` with REPLICA IDENTITY FULL (their events are keyed by the
    whole row, so an incremental snapshot cannot read them); one dropped or renamed since
    it was listed is not among them."""
    if not tables:
        return []
    rows = conn.execute(sql.SQL(
        "SELECT n.nspname::text, c.relname::text FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE c.oid IN ({}) AND c.relreplident = 'f'"
        " ORDER BY 1, 2").format(_RELIDS), (_names(conn, tables),)).fetchall()
    return [(r[0], r[1]) for r in rows]


def apply_keyless_policy(source: Source, policy: str,
                         tables: Sequence[tuple[str, str]] | None, *,
                         publication: str = "", patterns: Sequence[str] | None = None
                         ) -> list[tuple[str, str]]:
    """--keyless-tables, before a publication is created or extended over `tables` (None:
    FOR ALL TABLES). Once a table without a key is published, PostgreSQL rejects the
    application's UPDATE and DELETE on it ("does not have a replica identity"), so:
    ``refuse`` raises naming them and the fix; ``full`` sets REPLICA IDENTITY FULL on them
    (events keyed by the whole row); ``skip`` returns them, to be left out. `patterns`
    (--tables) at a later start of `publication` (None: its first): ``refuse`` raises only
    for the tables they name exactly and leaves the others out, each with the warning the
    table watcher gives (`keyless_refused`); FOR ALL TABLES has published them already:
    a warning each."""
    keyless = keyless_tables(source.conn, tables)
    if not keyless:
        return []
    if policy == "refuse" and patterns is not None:
        keyless, left_out = keyless_refused(keyless, patterns, first_start=False)
        for schema, table in left_out:
            if tables is None:
                log.warning("table %s.%s has no primary key and is published FOR ALL "
                            "TABLES: PostgreSQL rejects UPDATE and DELETE on it until it "
                            "has one (or ALTER TABLE ... REPLICA IDENTITY FULL; "
                            "--keyless-tables full does it)", schema, table)
            else:
                log.warning("table %s", keyless_left_out(f"{schema}.{table}", publication))
        if not keyless:
            return [] if tables is None else left_out
    names = ", ".join(f"{s}.{t}" for s, t in keyless)
    if policy == "refuse":
        raise ConfigError(
            f"table(s) without a primary key would be published: {names}; PostgreSQL would "
            "then reject UPDATE and DELETE on them. Add a primary key (or ALTER TABLE ... "
            "REPLICA IDENTITY FULL), or run with --keyless-tables full (pgcdc sets it) or "
            "--keyless-tables skip (leaves them out)")
    if policy == "full":
        if source.in_recovery():
            raise ConfigError(
                f"table(s) without a primary key would be published: {names}; "
                "--keyless-tables full cannot set their replica identity on a standby: run "
                "on the primary: " + "; ".join(
                    f"ALTER TABLE {sql.Identifier(s, t).as_string(source.conn)} REPLICA "
                    "IDENTITY FULL" for s, t in keyless))
        for schema, table in keyless:
            try:
                with source.conn.transaction():
                    source.conn.execute(sql.SQL("ALTER TABLE {} REPLICA IDENTITY FULL")
                                      .format(sql.Identifier(schema, table)))
            except psycopg.Error as exc:
                if is_lock_timeout(exc):  # the table watcher's check: again next time
                    raise
                if is_vanished(exc):  # dropped or renamed since listed: nothing to publish
                    log.info("table %s.%s dropped or renamed since listed (%s)", schema,
                             table, first_line(exc))
                    continue
                if is_privilege_error(exc):
                    raise lacking(exc, source.role, owner_sql=sql.SQL(
                        "ALTER TABLE {} REPLICA IDENTITY FULL").format(sql.Identifier(
                            schema, table)).as_string(source.conn)) from None
                detail = first_line(exc)
                raise SourceError(f"cannot set REPLICA IDENTITY FULL on {schema}.{table} "
                                  f"(--keyless-tables full): {detail}",
                                  transient=connection_gone(detail)) from None
            log.warning("table %s.%s has no primary key: set REPLICA IDENTITY FULL "
                        "(--keyless-tables full); its events are keyed by the whole row",
                        schema, table)
        return []
    log.warning("table(s) without a primary key left out of the publication "
                "(--keyless-tables skip): %s", names)
    return list(keyless)

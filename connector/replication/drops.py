"""Tables dropped upstream, recorded in the WAL so the lake learns them (``pgcdc.drop``).

pgoutput sends no DDL: a DROP TABLE leaves nothing in the stream, and the table's topic (and
the lake table the merge job keeps from it) would keep its rows for good. The table watcher
(connector/snapshot/incremental/watcher.py) remembers the relation id (``pg_class`` oid) of
each published table from its previous check; an id that no longer exists is a table dropped
since (a rename keeps its id: the watcher handles it as leaving or joining the patterns). It
writes one transactional logical message per dropped table through the admin connection
(`emit`): prefix `DROP_PREFIX`, content the JSON of `DroppedTable`. The producer
(connector/publisher.py) turns it into a drop event on that table's topic at the message's
position (docs/events.md "Dropped tables"), which the merge job applies
(spark_jobs/rules/incarnation.py `Drop`).

Positions: the message is written up to one watcher interval after the DROP, so events of a
table created again under the name may precede it in the stream. `seen_lsn` (the WAL insert
position read just before the catalog query that last saw the table) bounds the DROP from
below: the DROP committed after that query's snapshot, so every event of a later incarnation
is after `seen_lsn`, and every event of an earlier one (dropped before this one was created)
before it. The merge job applies the drop only to a lake table holding the dropped
incarnation or an older one. So a drop written twice (a connection lost after the message
committed: `DropWatch` writes what it found again until it is `recorded`) empties nothing
more.

A message names the slot of the producer it is for (`slot`): every slot of the database
decodes it, and another pgcdc's publication may not publish the table (or publish it under
another topic prefix). Written into the WAL: keep the prefix and the fields.

With ``table_trigger``, an ``sql_drop`` event trigger (connector/replication/table_trigger.py)
writes the message in the DROP's own transaction, for every table the publication lists: its
position is the DROP's, `seen_lsn` the WAL insert position inside that transaction, and it
names the `publication` (the trigger knows no slot) instead. The watcher still writes its own
for a table it saw published; the producer publishes one drop event per dropped relation id
(connector/publisher.py), so the trigger's, the first in the stream, is the one applied.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import psycopg

from connector.control import DROP_PREFIX

from .features import ServerFeatures
from .lock_free import published_tables_sql

__all__ = ["DropWatch", "DroppedTable", "emit", "existing", "parse_dropped", "published_ids",
           "standby_hint", "wal_lsn"]


@dataclass(frozen=True)
class DroppedTable:
    """A published table found dropped: its names, its relation id, the slot of the producer
    that published it, and the WAL position before the last check that saw it (module
    docstring)."""

    schema: str
    table: str
    relation_id: int
    slot: str
    seen_lsn: int
    #: Written by the table_trigger's sql_drop trigger (connector/replication/table_trigger.py):
    #: for the producers of this publication, `slot` empty.
    publication: str = ""

    def content(self) -> str:
        doc: dict[str, object] = {"schema": self.schema, "table": self.table,
                                  "relation_id": self.relation_id, "slot": self.slot,
                                  "seen_lsn": self.seen_lsn}
        if self.publication:
            doc["publication"] = self.publication
        return json.dumps(doc, separators=(",", ":"))


def parse_dropped(content: bytes) -> DroppedTable:
    """A ``pgcdc.drop`` message's content; ValueError, naming what is wrong, for anything
    else."""
    try:
        doc = json.loads(content)
        parsed = DroppedTable(doc["schema"], doc["table"], int(doc["relation_id"]),
                              doc["slot"], int(doc["seen_lsn"]), doc.get("publication", ""))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not a {DROP_PREFIX} message ({exc})") from None
    if not all(isinstance(v, str) for v in (parsed.schema, parsed.table, parsed.slot,
                                            parsed.publication)):
        raise ValueError(f"not a {DROP_PREFIX} message (schema, table, slot, publication)")
    return parsed


def wal_lsn(conn: psycopg.Connection[Any]) -> int:
    """The WAL insert position now (read before a catalog query: `seen_lsn`); on a standby
    the position replayed."""
    row = conn.execute("SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()"
                       " ELSE pg_current_wal_insert_lsn() END - '0/0')::bigint").fetchone()
    assert row is not None
    return int(row[0])


def published_ids(conn: psycopg.Connection[Any], publication: str
                  ) -> dict[tuple[str, str], int]:
    """(schema, table) -> relation id of each table the publication publishes, in one
    statement (one catalog snapshot)."""
    published = published_tables_sql(ServerFeatures(conn.info.server_version))
    rows = conn.execute(
        "SELECT p.schemaname::text, p.tablename::text, p.relid::bigint"
        f" FROM {published} p WHERE p.pubname = %s",  # (no lock waited for: lock_free.py)
        (publication,)).fetchall()
    return {(r[0], r[1]): int(r[2]) for r in rows}


def existing(conn: psycopg.Connection[Any], relation_ids: Iterable[int]) -> set[int]:
    """Those of `relation_ids` that still name a relation."""
    ids = list(relation_ids)
    if not ids:
        return set()
    rows = conn.execute("SELECT oid::bigint FROM pg_class WHERE oid = ANY(%s::oid[])",
                        (ids,)).fetchall()
    return {int(r[0]) for r in rows}


def emit(conn: psycopg.Connection[Any], dropped: Iterable[DroppedTable]) -> None:
    """Record `dropped` in the WAL, one transactional message each, in one transaction."""
    with conn.transaction():
        for drop in dropped:
            conn.execute("SELECT pg_logical_emit_message(true, %s, %s)",
                         (DROP_PREFIX, drop.content()))


class DropWatch:
    """The relation ids the publication published at the previous check, and the WAL position
    read before it: one per `pgcdc run` (kept across reconnects, so a table dropped while the
    stream reconnected is found when the next session opens). A table dropped while
    pgcdc was stopped is not found (docs/events.md "Dropped tables")."""

    def __init__(self, slot: str, publication: str, *, skip: Iterable[tuple[str, str]] = ()
                 ) -> None:
        self.slot = slot
        self.publication = publication
        self.skip = set(skip)  # pgcdc's own signal table: never a topic
        self.ids: dict[tuple[str, str], int] | None = None
        self.seen_lsn = 0
        self.pending: list[DroppedTable] = []  # found, not yet `recorded`

    def check(self, conn: psycopg.Connection[Any]) -> list[DroppedTable]:
        """The tables published at the previous check whose relation id exists no more, and
        those found before that are not `recorded` yet (writing them failed: a lost connection
        must not lose a drop; one written twice is applied once, module docstring)."""
        lsn = wal_lsn(conn)  # before the catalog query (module docstring)
        ids = {n: i for n, i in published_ids(conn, self.publication).items()
               if n not in self.skip}
        before, seen_lsn = self.ids, self.seen_lsn
        self.ids, self.seen_lsn = ids, lsn
        if before is None:
            return list(self.pending)
        left = {i for i in before.values()} - set(ids.values())
        gone = left - existing(conn, left)
        self.pending += [DroppedTable(s, t, i, self.slot, seen_lsn)
                         for (s, t), i in sorted(before.items()) if i in gone]
        return list(self.pending)

    def recorded(self) -> None:
        """The drops `check` returned are in the WAL (or a warning named them): not again."""
        self.pending = []


def standby_hint(drop: DroppedTable) -> str:
    """The statement that records `drop` when run on the primary (a standby cannot)."""
    content = drop.content().replace("'", "''")
    return f"SELECT pg_logical_emit_message(true, '{DROP_PREFIX}', '{content}')"

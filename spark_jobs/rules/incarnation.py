"""Table incarnations: a table dropped and created again under the same name.

The topic (and so the lake table) is named after the table, but the dropped table and the new
one are different tables: the new one starts empty, may have other columns and types, and
none of the old rows belong to it. The producer writes the table's relation id (its
`pg_class` oid, new for every CREATE TABLE) into each value schema (`RELATION_ID`), so every
event says which incarnation wrote it.

Rules (`decide`), for one table's part of a batch:

* Every change of an incarnation comes after every change of the incarnations before it (a
  table is dropped before one of its name can be created; in one transaction, the DROP's
  changes come first). So the incarnation whose first change in the batch is the latest is the
  newest one in the batch, and an incarnation is newer than the table's own when its first
  change is after the first change the table saw of its own (`Incarnation.since`): late or
  duplicate events of an older incarnation are before it, events of a newer one after all of
  the table's.
* The lake table follows the newest incarnation: when a newer one arrives the table is
  replaced (emptied, with the new incarnation's columns and types: every row in it is the old
  table's), and from then on only that incarnation's events are applied; events of older
  incarnations are superseded and dropped (not dead letters: they were right, for a table
  that is gone).
* Events whose schema has no relation id (written before the producer recorded it) are
  applied to whatever the table is, as before; an existing table first seen with one relation
  id adopts it without being replaced (nothing tells whether its rows are the same table's),
  with several it takes the newest and is replaced.
* A new relation id can also come from a restore into another cluster (new oids): the table
  is replaced by the new incarnation's events, which a new slot's initial snapshot provides.

Drops (`Drop`, `drop_applies`): a table dropped upstream gets a drop event (a truncate written
with a schema of its own, which names the dropped relation id and `seen_lsn`, the WAL position
before the producer last saw the table: connector/replication/drops.py). The producer writes
it up to one catalog check (~2 s) after the DROP, so it may come after events of a table
created again under the name: it is the one event of an incarnation that is not before the
next incarnation's, so it never counts as an incarnation's first change. It empties the table
(a truncate at its position) only when the table, after the batch's decision, holds the
dropped incarnation, or an older one (its first change before `seen_lsn`: it was dropped
before the dropped table was created, its drop unrecorded), or an unknown one (written before
relation ids were recorded). A table holding a newer incarnation (first change after
`seen_lsn`: after the DROP) is left alone: the drop event is superseded like any event of a
dropped table. A table not created yet is not created for a drop alone.

Pure: the job supplies each incarnation's first position in the batch and applies the
decision (`spark_writer.SparkDeltaSink.take`, `delta_rs_writer.DeltaRsSink.adopt`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from connector.avro.schema import DROPPED, RELATION_ID

from .changes import Position

# Table properties: the incarnation the table holds, and its `since` position.
PROPERTY, SINCE_LSN, SINCE_IDX = ("pgcdc.relationId", "pgcdc.relationId.sinceLsn",
                                  "pgcdc.relationId.sinceTxnIndex")


@dataclass(frozen=True)
class Incarnation:
    relation_id: int
    since: Position  # the earliest of its changes the table saw when it took this incarnation

    def properties(self) -> dict[str, str]:
        return {PROPERTY: str(self.relation_id), SINCE_LSN: str(self.since.commit_lsn),
                SINCE_IDX: str(self.since.txn_index)}

    @staticmethod
    def of_properties(properties: Mapping[str, str]) -> Incarnation | None:
        if PROPERTY not in properties:
            return None
        return Incarnation(int(properties[PROPERTY]), Position(
            int(properties.get(SINCE_LSN, 0)), int(properties.get(SINCE_IDX, 0))))


@dataclass(frozen=True)
class Decision:
    keep: frozenset[int | None]  # the incarnations whose events are applied (None: no id)
    table: Incarnation | None  # the incarnation the table holds after this batch
    replace: bool  # the table must be emptied and take the new incarnation's columns first

    def changes(self, current: Incarnation | None) -> bool:
        """Whether the table's recorded incarnation must be written."""
        return self.replace or self.table != current


def of_schema(schema: Mapping[str, Any]) -> int | None:
    """The relation id a value schema was written for (None: a schema without one)."""
    value = schema.get(RELATION_ID)
    return value if isinstance(value, int) else None


@dataclass(frozen=True)
class Drop:
    """A drop event's schema: the dropped incarnation, and the WAL position before which
    the producer last saw it existing."""

    relation_id: int
    seen_lsn: int


def drop_of(schema: Mapping[str, Any]) -> Drop | None:
    """The drop a value schema was written for (None: a schema of changes)."""
    seen, relation_id = schema.get(DROPPED), schema.get(RELATION_ID)
    if not isinstance(seen, int) or not isinstance(relation_id, int):
        return None
    return Drop(relation_id, seen)


def drop_applies(table: Incarnation | None, drop: Drop, exists: bool) -> bool:
    """Whether a drop event empties the table: `table` is the incarnation it holds after the
    batch's decision (`Decision.table`), `exists` whether there is a table (or the batch
    creates one)."""
    if not exists:
        return False
    return (table is None or table.relation_id == drop.relation_id
            or table.since.commit_lsn < drop.seen_lsn)


def decide(current: Incarnation | None, firsts: Mapping[int | None, Position]) -> Decision:
    """What to do with a table's part of a batch. `current`: the incarnation the table holds
    (None: not known, or no table yet); `firsts`: each incarnation in the batch → the
    earliest position of its events in the batch."""
    every = frozenset(firsts)
    known = {i: p for i, p in firsts.items() if i is not None}
    if not known:
        return Decision(every, current, False)
    if current is None:
        newest = max(known, key=lambda i: known[i])
        if len(known) == 1:
            return Decision(frozenset({None, newest}), Incarnation(newest, known[newest]),
                            False)
        # Several: what the table holds is older than the newest one's first event.
        return Decision(frozenset({newest}), Incarnation(newest, known[newest]), True)
    if set(known) == {current.relation_id}:
        return Decision(every, current, False)
    newer = {i: p for i, p in known.items() if i != current.relation_id and p > current.since}
    if not newer:
        return Decision(frozenset({None, current.relation_id}), current, False)
    newest = max(newer, key=lambda i: newer[i])
    return Decision(frozenset({newest}), Incarnation(newest, newer[newest]), True)

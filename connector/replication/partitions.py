"""Partitioned tables in a publication: published through their root or leaf by leaf, and what
pgcdc does when partitions come and go. Pure: no IO.

``publish_via_partition_root`` (a publication option, PostgreSQL 13+) decides under which table
pgoutput sends a partition's changes: the partitioned root (one topic, one lake table per
partitioned table) or the leaf partition holding the row (one topic per leaf). The snapshots
follow the same choice: they read ``pg_publication_tables``, which lists the roots in the first
case and the leaves in the second (connector/snapshot/tables.py).

**The setting** (`via_root_change`). Unset, a publication pgcdc creates publishes through the
roots (what a user of a partitioned table expects: one table, whatever its partitions); an
existing publication is never changed silently, since its topics would change under its
consumers: it keeps what it has. Set (true or false), an existing publication that differs is
altered at start, and the partitioned tables are re-read by an incremental snapshot into the
topics they are now published to (the old topics stay, and receive nothing more).

**Partitions attached and detached** (`leaf_changes`, compared by the table watcher each check):

* A leaf new under a root the publication publishes was attached (``ATTACH PARTITION``) or
  created (``CREATE TABLE ... PARTITION OF``). PostgreSQL streams no change for rows that were in
  a table before it was attached (they were never inserted through the root), so a leaf that has
  rows when it is seen is re-read by an incremental snapshot of that leaf alone, published under
  the table the publication publishes it as (the root, or the leaf itself). A leaf created empty
  and filled through the root before the check is re-read too: needless, not wrong (the rows go
  out again as reads with the values they have).
* A leaf gone from a root was detached (``DETACH PARTITION``) or dropped. PostgreSQL streams no
  delete for its rows either: they stay in the root's topic (docs/publishing.md), and the
  watcher warns naming the partition -- unless ``detach_deletes`` is on: then the event
  trigger (connector/replication/detach_trigger.py) wrote the leaf's keys into the DETACH's
  transaction as ``pgcdc.detach`` messages, and `detach_deletes` turns each message into the
  key tuples of deletes under the root (a DROP TABLE of a partition stays uncovered).
* A root new to the publication is the table watcher's new table (its snapshot reads every
  leaf); a root gone from it is a table gone. Neither is a partition change.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import NamedTuple, TypeVar

from connector.pgoutput.messages import Relation, TupleData

__all__ = ["DetachedKeys", "detach_deletes", "leaf_changes", "parse_detached_keys",
           "via_root_change"]

T = TypeVar("T")

#: publish_via_partition_root of a publication pgcdc creates when the option is unset.
VIA_ROOT_DEFAULT = True


def via_root_change(configured: bool | None, current: bool | None) -> bool | None:
    """The publish_via_partition_root to set on the publication, or None: leave it.
    `configured`: the option (None: unset); `current`: the existing publication's value (None:
    there is none, pgcdc creates it)."""
    if current is None:
        return VIA_ROOT_DEFAULT if configured is None else configured
    if configured is None or configured == current:
        return None
    return configured


def leaf_changes(before: Mapping[T, frozenset[T]], after: Mapping[T, frozenset[T]]
                 ) -> tuple[list[tuple[T, T]], list[tuple[T, T]]]:
    """(attached, detached): the (root, leaf) pairs of the roots present both `before` and
    `after` (root -> its leaf partitions) whose leaf is new, and whose leaf is gone, sorted."""
    attached: list[tuple[T, T]] = []
    detached: list[tuple[T, T]] = []
    for root, leaves in after.items():
        if root not in before:
            continue
        attached += [(root, leaf) for leaf in leaves - before[root]]
        detached += [(root, leaf) for leaf in before[root] - leaves]
    return sorted(attached), sorted(detached)


class DetachedKeys(NamedTuple):
    """One ``pgcdc.detach`` message: a chunk of the keys a detached partition held, as text
    (each type's output; None for a NULL, possible only under REPLICA IDENTITY FULL)."""

    root_oid: int
    schema: str
    table: str
    partition: str  # schema.table, as PostgreSQL quotes it (for messages)
    columns: tuple[str, ...]  # the root's replica-identity columns when the trigger ran
    keys: list[tuple[str | None, ...]]


def parse_detached_keys(content: bytes) -> DetachedKeys:
    """A ``pgcdc.detach`` message's content (JSON, connector/replication/detach_trigger.py);
    ValueError, naming what is wrong, for anything else."""
    try:
        doc = json.loads(content)
        columns = tuple(doc["columns"])
        keys = [tuple(k) for k in doc["keys"]]
        parsed = DetachedKeys(int(doc["root"]), doc["schema"], doc["table"], doc["partition"],
                              columns, keys)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not a pgcdc.detach message ({exc})") from None
    texts = [c for c in columns if isinstance(c, str)]
    if len(texts) != len(columns) or not columns or not isinstance(parsed.schema, str) \
            or not isinstance(parsed.table, str):
        raise ValueError("not a pgcdc.detach message (columns, schema, table)")
    for key in keys:
        if len(key) != len(columns) or any(v is not None and not isinstance(v, str)
                                           for v in key):
            raise ValueError(f"a key of {len(key)} text values where {len(columns)} "
                             f"({', '.join(columns)}) are expected")
    return parsed


def detach_deletes(relation: Relation, detached: DetachedKeys) -> list[TupleData]:
    """The 'K' tuples of the deletes that remove `detached`'s keys from `relation` (the root as
    pgoutput describes it): each of its replica-identity columns from the message's text, the
    other columns None -- the tuple a streamed DELETE of that row carries, so its event (and the
    merge job's handling of it) is the same. ValueError when a key column of the relation is
    not in the message (the root's key changed in between)."""
    where = {name: i for i, name in enumerate(detached.columns)}
    picks: list[int | None] = []
    for column in relation.columns:
        if not column.key:
            picks.append(None)
        elif column.name in where:
            picks.append(where[column.name])
        else:
            raise ValueError(f"the keys of partition {detached.partition} detached from "
                             f"{detached.schema}.{detached.table} name columns "
                             f"{', '.join(detached.columns)}, not its key column {column.name}")
    return [tuple(None if i is None else key[i] for i in picks) for key in detached.keys]

"""Which DDL changes a table's existing rows without a row event: the re-sync decision (pure).

pgoutput sends no DDL and no events for the rows a DDL statement rewrites, so after

* ``ALTER TABLE t ALTER COLUMN c TYPE ...`` (PostgreSQL converts every value),
* ``ALTER TABLE t ADD COLUMN c ... DEFAULT <x>`` (existing rows read as x: a non-volatile
  default is stored once as the column's "missing value", ``pg_attribute.atthasmissing``; a
  volatile one such as ``random()``, an identity column or a domain with a default rewrites
  the table),
* ``ALTER TABLE t ALTER COLUMN g DROP EXPRESSION`` (a generated column, not published, becomes
  a plain one that is: its stored values were never sent),
* ``ALTER TABLE t RENAME COLUMN a TO b`` (the values are now under a name the consumer has no
  values for),
* ``ALTER TYPE e RENAME VALUE 'x' TO 'y'`` (every row holding x now reads y),

a consumer of the topic keeps the old values for good. The producer compares successive
descriptions of each published table (`Column`, from the catalog: `reasons`, matched by
attnum) and what was published (a Relation's or a snapshot's columns, no attnums) with the
catalog or a later Relation (`published_reasons`, matched by name and order), and re-reads a
table through an incremental snapshot when either finds one of the above.

Not detected (no trace in either; docs/snapshots.md "Re-sync after DDL"): a USING conversion to the
same type (``ALTER COLUMN n TYPE int USING n * 10`` on an int column), DROP EXPRESSION on the last
column seen only by `published_reasons` (like ADD COLUMN without a default), and DDL made while the
producer was not running on a table none of whose earlier rows the stream replays.

`Settle` coalesces a burst: a table is re-synced once its description stayed the same for one
more check, so a migration running ten ALTERs on a table queues one re-sync, not ten.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["Column", "Settle", "published_reasons", "reasons", "signature"]


class Column(NamedTuple):
    """One live column as the catalog describes it (`attnum` 0 when unknown: a Relation)."""

    attnum: int
    name: str
    type_oid: int
    typmod: int
    generated: bool = False  # attgenerated <> '': not published (before PostgreSQL 18)
    fills_existing: bool = False  # atthasmissing, a volatile default, identity, domain default
    enum_labels: tuple[tuple[int, str], ...] = ()  # (pg_enum oid, label) of an enum type
    type_text: str = ""  # format_type(), for messages ("" : shown as the OID and typmod)

    def kind(self) -> str:
        if self.type_text:
            return self.type_text
        return f"type {self.type_oid}" + (f" typmod {self.typmod}" if self.typmod >= 0 else "")


def signature(columns: Iterable[Column]) -> tuple[tuple[str, int, int], ...]:
    """The published columns' (name, type, typmod): what a Relation message shows."""
    return tuple((c.name, c.type_oid, c.typmod) for c in columns if not c.generated)


def reasons(old: Sequence[Column], new: Sequence[Column]) -> list[str]:
    """Why the change from `old` to `new` changed existing rows' published values (empty: it
    did not). Columns are matched by attnum when both sides know it, else by name."""
    by_num = all(c.attnum for c in old) and all(c.attnum for c in new)
    before = {(c.attnum if by_num else c.name): c for c in old}
    found: list[str] = []
    for col in new:
        prev = before.get(col.attnum if by_num else col.name)
        if prev is None:
            if col.fills_existing and not col.generated:
                found.append(f"column {col.name} added with a value for existing rows")
            continue
        if col.generated:
            continue
        if prev.generated:
            found.append(f"column {col.name} is no longer generated (DROP EXPRESSION) or is newly "
                         "published (a column list naming it)")
            continue
        if prev.name != col.name:
            found.append(f"column {prev.name} renamed to {col.name}")
        if (prev.type_oid, prev.typmod) != (col.type_oid, col.typmod):
            found.append(f"column {col.name} changed type from {prev.kind()} to {col.kind()}")
        elif prev.enum_labels and col.enum_labels:
            renamed = dict(prev.enum_labels)
            changed = [f"{renamed[oid]!r} to {label!r}" for oid, label in col.enum_labels
                       if oid in renamed and renamed[oid] != label]
            if changed:
                found.append(f"column {col.name}: enum value renamed {', '.join(changed)}")
    return found


def published_reasons(published: Sequence[Column], current: Sequence[Column]) -> list[str]:
    """Why rows published with the columns `published` (a Relation's, or a snapshot's: the
    published columns in attnum order, no attnums) no longer show the values of a table whose
    columns are now `current` (the catalog's, in attnum order; or a later Relation's). Empty:
    nothing to re-sync.

    Without attnums on the published side, columns are aligned by name and order: the columns
    with the same name (in the same order) are anchors; between two anchors (or after the last
    one) the published columns that vanished and the current ones that appeared are paired in
    order as renames. A current column left over is, after the last anchor, added (it matters
    if it gives existing rows a value), and before it, a column that existed but was not
    published (DROP EXPRESSION, a column list widened): its values never were. Dropping the
    last column and adding one reads as a rename (a wasted re-sync at worst)."""
    now = [c for c in current if not c.generated]
    index = {c.name: j for j, c in enumerate(now)}
    anchors: list[tuple[int, int]] = []
    for i, col in enumerate(published):
        j = index.get(col.name)
        if j is not None and (not anchors or j > anchors[-1][1]):
            anchors.append((i, j))
    found: list[str] = []
    pairs = list(anchors)
    bounds = [(-1, -1), *anchors, (len(published), len(now))]
    for (i0, j0), (i1, j1) in zip(bounds, bounds[1:], strict=False):
        gone = list(range(i0 + 1, i1))
        came = list(range(j0 + 1, j1))
        for i, j in zip(gone, came, strict=False):
            found.append(f"column {published[i].name} renamed to {now[j].name}")
            pairs.append((i, j))
        for j in came[len(gone):]:
            col = now[j]
            if j1 < len(now):
                found.append(f"column {col.name} is published now, its values never were "
                             "(DROP EXPRESSION, or a column list widened)")
            elif col.fills_existing:
                found.append(f"column {col.name} added with a value for existing rows")
    for i, j in sorted(pairs):
        old, new = published[i], now[j]
        if (old.type_oid, old.typmod) != (new.type_oid, new.typmod):
            found.append(f"column {new.name} changed type from {old.kind()} to {new.kind()}")
    return found


@dataclass
class Settle:
    """Per table: the description last seen, and the reasons gathered while it still changes.

    `observe` returns the reasons to re-sync once a changed table's description held still for
    one check (None otherwise). A table seen for the first time is only remembered."""

    seen: dict[int, tuple[Column, ...]] = field(default_factory=dict)
    waiting: dict[int, list[str]] = field(default_factory=dict)

    def observe(self, table: int, columns: Sequence[Column]) -> list[str] | None:
        now = tuple(columns)
        before = self.seen.get(table)
        self.seen[table] = now
        if before is None:
            return None
        if before != now:
            found = reasons(before, now)
            if found or table in self.waiting:
                gathered = self.waiting.setdefault(table, [])
                gathered.extend(r for r in found if r not in gathered)
            return None
        return self.waiting.pop(table, None)

    def forget(self, keep: Iterable[int]) -> None:
        """Drop the tables no longer published."""
        kept = set(keep)
        for table in [t for t in self.seen if t not in kept]:
            del self.seen[table]
            self.waiting.pop(table, None)

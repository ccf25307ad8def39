"""The MERGE of one micro-batch into a table, as plain data (conditions and assignments).

Deletes are hard deletes in the table, so it stays a mirror a reader can use as is; the
positions of deletes are kept as tombstones in a sibling table (see `not_deleted_later`), which
is what stops a replayed or duplicated older change from bringing a deleted row back."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .changes import META, OP, TOAST, newer_expr, q

SOURCE, TARGET = "s", "t"


@dataclass(frozen=True)
class MergePlan:
    on: str
    delete_when: str
    update_when: str
    update_set: dict[str, str] = field(default_factory=dict)
    insert_when: str = ""
    insert_values: dict[str, str] = field(default_factory=dict)


def key_condition(key: Sequence[str], left: str = SOURCE, right: str = TARGET) -> str:
    # <=>: replica identity FULL keys may hold NULLs, which must still match.
    return " AND ".join(f"{left}.{q(k)} <=> {right}.{q(k)}" for k in key)


def merge_plan(key: Sequence[str], source_columns: Iterable[str], target_columns: Iterable[str],
               toast: Iterable[str] = ()) -> MergePlan:
    """Upsert newer inserts/updates/snapshot reads, delete on a newer delete, never let an older
    change win (so replays and duplicates change nothing).

    `target_columns` are the table's row columns after schema evolution; a table column the
    source lacks was dropped upstream and is set NULL by every later update. A column in
    `toast` keeps the stored value when the change named it unchanged (`_cdc_toast`)."""
    source = set(source_columns)
    toast = set(toast)
    newer = newer_expr(SOURCE, TARGET)
    update: dict[str, str] = {}
    for c in target_columns:
        if c in key:
            continue
        if c not in source:
            update[q(c)] = "NULL"
        elif c in toast:
            update[q(c)] = (f"CASE WHEN array_contains({SOURCE}.{TOAST}, '{sql_string(c)}') "
                            f"THEN {TARGET}.{q(c)} ELSE {SOURCE}.{q(c)} END")
        else:
            update[q(c)] = f"{SOURCE}.{q(c)}"
    for m in META:
        update[m] = f"{SOURCE}.{m}"
    insert = {q(c): f"{SOURCE}.{q(c)}" for c in target_columns if c in source}
    insert.update({m: f"{SOURCE}.{m}" for m in META})
    return MergePlan(
        on=key_condition(key),
        delete_when=f"{SOURCE}.{OP} = 'd' AND {newer}",
        update_when=f"{SOURCE}.{OP} <> 'd' AND {newer}",
        update_set=update,
        insert_when=f"{SOURCE}.{OP} <> 'd'",
        insert_values=insert,
    )


def not_deleted_later(key: Sequence[str], other_keys: Sequence[str] = ()) -> str:
    """Join condition for a left anti join of changes (s) with tombstones (t): drops a change
    when a delete of its key is recorded at or after it. `other_keys`: the tombstones' columns
    of other keys the table had (a primary key changed): a tombstone written under such a key
    matches only a change with the same values there; one written before the column joined
    the tombstones (NULL) does not look at it."""
    others = "".join(f" AND ({TARGET}.{q(c)} IS NULL OR {SOURCE}.{q(c)} <=> {TARGET}.{q(c)})"
                     for c in other_keys)
    return f"{key_condition(key)}{others} AND NOT {newer_expr(SOURCE, TARGET)}"


def sql_string(text: str) -> str:
    """`text` for the inside of a single-quoted Spark SQL string literal."""
    return text.replace("\\", "\\\\").replace("'", "\\'")

"""The MERGE of one micro-batch into a table, as plain data (conditions and assignments).

Deletes are hard deletes in the table, so it stays a mirror a reader can use as is; the
positions of deletes are kept as tombstones in a sibling table (see `not_deleted_later`), which
is what stops a replayed or duplicated older change from bringing a deleted row back."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .changes import IDX, LSN, META, OP, TOAST, q

SOURCE, TARGET = "s", "t"


@dataclass(frozen=True)
class Dialect:
    """How the plan is spelled for an engine: Spark SQL (Delta's MERGE in Spark) or DataFusion
    SQL (delta-rs's MERGE, `delta/delta_rs_writer`). The conditions are the same; only quoting,
    null-safe equality and the array test differ."""

    quote: Callable[[str], str]
    null_safe_eq: str  # "{l} ... {r}": equal, or both NULL
    array_has: str  # function (array, element) -> bool

    def string(self, text: str) -> str:
        """A single-quoted string literal."""
        if self is SPARK:
            return f"'{sql_string(text)}'"
        return "'" + text.replace("'", "''") + "'"


SPARK = Dialect(quote=q, null_safe_eq="{l} <=> {r}", array_has="array_contains")
# Parenthesized: DataFusion binds AND tighter than IS NOT DISTINCT FROM's right operand.
DATAFUSION = Dialect(quote=lambda name: '"' + name.replace('"', '""') + '"',
                     null_safe_eq="({l} IS NOT DISTINCT FROM {r})", array_has="array_has")


def newer_expr(left: str, right: str, dialect: Dialect = SPARK) -> str:
    """SQL: the change aliased `left` comes strictly after the one aliased `right`."""
    lsn, idx = dialect.quote(LSN), dialect.quote(IDX)
    return (f"({left}.{lsn} > {right}.{lsn} OR "
            f"({left}.{lsn} = {right}.{lsn} AND {left}.{idx} > {right}.{idx}))")


@dataclass(frozen=True)
class MergePlan:
    on: str
    delete_when: str
    update_when: str
    update_set: dict[str, str] = field(default_factory=dict)
    insert_when: str = ""
    insert_values: dict[str, str] = field(default_factory=dict)


def key_condition(key: Sequence[str], left: str = SOURCE, right: str = TARGET,
                  dialect: Dialect = SPARK) -> str:
    # Null-safe: replica identity FULL keys may hold NULLs, which must still match.
    return " AND ".join(dialect.null_safe_eq.format(l=f"{left}.{dialect.quote(k)}",
                                                    r=f"{right}.{dialect.quote(k)}")
                        for k in key)


def merge_plan(key: Sequence[str], source_columns: Iterable[str], target_columns: Iterable[str],
               toast: Iterable[str] = (), dialect: Dialect = SPARK) -> MergePlan:
    """Upsert newer inserts/updates/snapshot reads, delete on a newer delete, never let an older
    change win (so replays and duplicates change nothing).

    `target_columns` are the table's row columns after schema evolution; a table column the
    source lacks was dropped upstream and is set NULL by every later update. A column in
    `toast` keeps the stored value when the change named it unchanged (`_cdc_toast`)."""
    source = set(source_columns)
    toast = set(toast)
    newer = newer_expr(SOURCE, TARGET, dialect)
    qt, op = dialect.quote, f"{SOURCE}.{dialect.quote(OP)}"
    update: dict[str, str] = {}
    for c in target_columns:
        if c in key:
            continue
        if c not in source:
            update[qt(c)] = "NULL"
        elif c in toast:
            update[qt(c)] = (f"CASE WHEN {dialect.array_has}({SOURCE}.{qt(TOAST)}, "
                             f"{dialect.string(c)}) THEN {TARGET}.{qt(c)} "
                             f"ELSE {SOURCE}.{qt(c)} END")
        else:
            update[qt(c)] = f"{SOURCE}.{qt(c)}"
    for m in META:
        update[qt(m)] = f"{SOURCE}.{qt(m)}"
    insert = {qt(c): f"{SOURCE}.{qt(c)}" for c in target_columns if c in source}
    insert.update({qt(m): f"{SOURCE}.{qt(m)}" for m in META})
    return MergePlan(
        on=key_condition(key, dialect=dialect),
        delete_when=f"{op} = 'd' AND {newer}",
        update_when=f"{op} <> 'd' AND {newer}",
        update_set=update,
        insert_when=f"{op} <> 'd'",
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

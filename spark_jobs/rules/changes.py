"""Pure DataFrame functions over flattened change events: ordering, truncate placement, latest
change per key with unchanged-TOAST values carried forward.

A flattened change has the table's row columns (from `after`, or `before` for a delete) plus
the metadata columns below."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

# Re-exported: the SQL quoting and the metadata column names the job's modules use. TOAST:
# unchanged-TOAST column names (the stored value is kept for them).
from .names import IDX as IDX
from .names import LSN as LSN
from .names import METADATA_COLUMNS
from .names import OP as OP
from .names import TOAST as TOAST
from .names import TS as TS
from .names import q as q

META = (OP, LSN, IDX, TS)  # stored in the Delta table next to the row columns
UPSERT_OPS = ("c", "u", "r")


class Position(NamedTuple):
    """(commit_lsn, txn_index): the order of changes (schemas/README.md). Unique per change
    but for a primary-key change, whose two events share it (`EventId`)."""

    commit_lsn: int
    txn_index: int


class EventId(NamedTuple):
    """What names one change event, and the total order of a table's events: its position,
    then its `half`. A primary-key change is published as two events at one position, the
    delete of the old key and the create of the new one (schemas/README.md "Primary-key
    changes"); every other position holds one event (a truncate's copies, one per Kafka
    partition, are one event). So at a position the delete is half 0 and any other event
    half 1: the two halves of a key change are two events, the delete first, and copies of
    one event (duplicates, replays) share its id."""

    commit_lsn: int
    txn_index: int
    half: int


def row_columns(df: DataFrame) -> list[str]:
    """The table's own columns of a flattened change DataFrame: all but the job's metadata
    columns, whose names no row column takes (`names.column_names`)."""
    return [c for c in df.columns if c not in METADATA_COLUMNS]


def fresh_name(base: str, taken: Iterable[str]) -> str:
    """A column name for a temporary column that no column in `taken` has (ignoring case)."""
    lower = {t.lower() for t in taken}
    name, n = base, 0
    while name.lower() in lower:
        n += 1
        name = f"{base}{n}"
    return name


def after_position(df: DataFrame, position: Position | None) -> DataFrame:
    """Changes strictly after `position` (a truncate): older ones were removed by it."""
    if position is None:
        return df
    lsn, idx = position
    return df.where((F.col(LSN) > lsn) | ((F.col(LSN) == lsn) & (F.col(IDX) > idx)))


def before_position(position: Position) -> str:
    """The rows (and tombstones) a truncate at `position` removes, as SQL (Spark and
    DataFusion): those written by a change strictly before it."""
    lsn, idx = position
    return f"{LSN} < {int(lsn)} OR ({LSN} = {int(lsn)} AND {IDX} < {int(idx)})"


def truncate_position(positions: Iterable[Position | None]) -> Position | None:
    """Where truncates leave a table: only the last one matters, since it removes every row
    older than itself, including rows that earlier truncates kept."""
    known = [p for p in positions if p is not None]
    return max(known) if known else None


def row_changes(df: DataFrame) -> DataFrame:
    """Inserts, updates, snapshot reads and deletes (truncates are placed separately)."""
    return df.where(F.col(OP) != "t")


def latest_per_key(df: DataFrame, key: Sequence[str], toast: Iterable[str] = ()) -> DataFrame:
    """The last change per key by (commit_lsn, txn_index).

    For a column in `toast` (named in some change's unchanged-TOAST list) the value comes from
    the last earlier change of the key that carried it; only when no change in `df` did, its
    name stays in `_cdc_toast` of the result so the MERGE keeps the stored value. A delete
    carries every column (as NULL), so nothing is carried across a delete."""
    toast = [c for c in dict.fromkeys(toast) if c in df.columns and c not in key]
    if not toast:
        order = F.struct(F.col(LSN), F.col(IDX))
        last = fresh_name("_last", df.columns)
        # The key values too come from the winning change, not from the grouping: Spark
        # normalizes floating-point grouping keys (-0.0 → 0.0, NaN), values it must keep.
        picked = df.groupBy(*[F.col(q(k)) for k in key]).agg(
            F.max_by(F.struct(*[F.col(q(c)) for c in df.columns]), order).alias(last))
        return picked.select(*[F.col(q(last))[c].alias(c) for c in df.columns])
    by_key = Window.partitionBy(*[F.col(q(k)) for k in key]).orderBy(F.col(LSN), F.col(IDX))
    running = by_key.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    out = df
    for c in toast:
        carried = F.when(~F.array_contains(F.coalesce(F.col(TOAST), F.array()), c),
                         F.struct(F.col(q(c)).alias("v")))
        out = out.withColumn(c, F.last(carried, ignorenulls=True).over(running))
    following = fresh_name("_next", df.columns)
    out = (out.withColumn(following, F.lead(F.col(LSN)).over(by_key))
           .where(F.col(q(following)).isNull()))
    still_unchanged = F.filter(F.array(*[F.when(F.col(q(c)).isNull(), F.lit(c)) for c in toast]),
                               lambda x: x.isNotNull())
    return (out.withColumn(TOAST, still_unchanged)
            .select(*[F.col(q(c))["v"].alias(c) if c in toast else F.col(q(c))
                      for c in df.columns]))


def order_column() -> Column:
    """A single orderable column for (commit_lsn, txn_index)."""
    return F.struct(F.col(LSN), F.col(IDX))

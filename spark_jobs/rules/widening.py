"""Type changes upstream: the column type a Delta table must take when its source column's
type changed (`ALTER TABLE ... ALTER COLUMN ... TYPE`), decided per column by `column_change`:

- **same**: the table's type holds every source value (equal, or the source is narrower:
  bigint → int, an older writer schema of a widened column); the MERGE casts as before.
- **widen**: a change Delta's type widening feature allows (int → bigint, numeric(p,s) → a
  larger precision or scale, real → double): every stored value converts exactly.
- **retype**: anything else (text → bigint, bigint → text, numeric → int...): the table's new
  schema wins and the column takes the source type; stored values convert where Spark can
  cast them exactly, the others become NULL (`exact_cast`).

The sink applies widen and retype alike by rewriting the table (delta-rs cannot read Delta's
typeWidening feature). `varchar(n)` length changes need nothing: every text type is a string
in the lake."""

from __future__ import annotations

from typing import Literal

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
)

Change = Literal["same", "widen", "retype"]

MAX_DECIMAL_PRECISION = 38
_INTEGRAL_RANK: dict[DataType, int] = {
    ByteType(): 0, ShortType(): 1, IntegerType(): 2, LongType(): 3}


def widened(table: DataType, source: DataType) -> DataType | None:
    """The wider type `table` must become to hold every `source` value, or None if it holds
    them already or Delta cannot widen it in place."""
    if table == source:
        return None
    if table in _INTEGRAL_RANK and source in _INTEGRAL_RANK:
        return source if _INTEGRAL_RANK[source] > _INTEGRAL_RANK[table] else None
    if isinstance(table, FloatType) and isinstance(source, DoubleType):
        return source
    if isinstance(table, DecimalType) and isinstance(source, DecimalType):
        scale = max(table.scale, source.scale)
        digits = max(table.precision - table.scale, source.precision - source.scale)
        if digits + scale > MAX_DECIMAL_PRECISION:
            return None
        wider = DecimalType(digits + scale, scale)
        return None if wider == table else wider
    return None


def holds(table: DataType, source: DataType) -> bool:
    """Whether a column of type `table` holds every value of type `source` exactly."""
    return table == source or widened(source, table) == table


def column_change(table: DataType, source: DataType) -> tuple[Change, DataType]:
    """What a table column of type `table` does when a batch brings type `source`:
    ("same", table), ("widen", the wider type) or ("retype", source)."""
    if holds(table, source):
        return "same", table
    wider = widened(table, source)
    if wider is not None:
        return "widen", wider
    return "retype", source


def batch_type(newest: DataType, older: DataType) -> DataType:
    """The type one batch's column takes when its writer schemas disagree: the newest writer
    schema's, unless an older one is wider (a widened column's older events keep the wider
    type, so they never overflow); `exact_cast` converts the other schemas' values."""
    wider = widened(newest, older)
    return newest if wider is None else wider


def exact_cast(col: Column, source: DataType, target: DataType) -> Column:
    """`col` (of type `source`) as `target` where Spark converts it exactly, else NULL: a
    string parses (`try_cast`), anything becomes its string, and between other types a value
    converts only if it casts back to itself (1.5 does not become the int 1)."""
    if source == target:
        return col
    cast = col.try_cast(target)
    if isinstance(source, StringType) or isinstance(target, StringType) or holds(target, source):
        return cast
    return F.when(cast.try_cast(source).eqNullSafe(col), cast)

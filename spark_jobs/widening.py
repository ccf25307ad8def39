"""Type widening: the column type a Delta table must take when its source column widened
upstream (int → bigint, numeric(p,s) → a larger precision or scale, real → double).

Only the changes Delta's type widening feature allows are returned (the sink applies them by
rewriting the table, as delta-rs cannot read the feature); anything else (a narrower or
unrelated source type) leaves the table's type, and the MERGE casts to it as before.
`varchar(n)` length changes need nothing: every text type is a string in the lake."""

from __future__ import annotations

from pyspark.sql.types import (
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
)

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

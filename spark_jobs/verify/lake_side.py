"""`pgcdc verify`'s lake side (Spark): a table at one cut's Delta version, its keys changed
after the snapshot position L, and the same range summaries and rows as verify/source_side.py.

Keys changed after L are those of lake rows at the cut with `_cdc_commit_lsn` ≥ L, and of
tombstones (`<target>/_pgcdc/tombstones/<table path>`) with a position in [L, cut], read at
the version the cut recorded for them (`manifest.Cut.tombstones`). Not at their latest
version: tombstone expiry (spark_jobs/rules/expiry.py) deletes tombstones below its bound, which can
pass L while verify reads, and a key deleted in [L, cut] would then look missing. At the
cut's version every tombstone in [L, cut] is still there: that version was taken in the batch
that recorded the cut (before its expiry) or an earlier one, and the expiry bounds applied
before it are at most the bound B of the batch before, the previous cut being B - 1, which
lies below L (the cut read is the first at or after L; the one exception is the first cut of
an application that started above a floor, rules/cut_policy.py, with L at or below that floor). Cuts
recorded before tombstone versions were (and tables without tombstones then) read the latest
version, which holds every tombstone in [L, cut] as long as no expiry passed L meanwhile.
Compaction keeps each key's newest tombstone, so it removes none of these. The
table's truncate cut (table property `pgcdc.truncate.commitLsn` at the cut's version) tells
whether a truncate after L removed rows PostgreSQL still has at L.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..cuts.manifest import tombstone_key
from ..lake.storage import options_for
from ..rules.names import LSN, METADATA_COLUMNS
from .canon import (
    TableCanon,
    spark_bucket,
    spark_hash,
    spark_joined,
    spark_quote,
    spark_text,
)
from .report import RangeSummary, Row

TRUNCATE_LSN = "pgcdc.truncate.commitLsn"


def tombstone_path(target: str, rel_path: str) -> str:
    return f"{target.rstrip('/')}/{tombstone_key(rel_path)}"


def table_at(spark: SparkSession, path: str, version: int) -> DataFrame:
    return spark.read.format("delta").option("versionAsOf", version).load(path)


def row_types(frame: DataFrame) -> dict[str, str]:
    """Lake column → Spark type, without the job's metadata columns."""
    return {f.name: f.dataType.simpleString() for f in frame.schema.fields
            if f.name not in METADATA_COLUMNS}


def truncated_at(path: str, version: int) -> int | None:
    """The table's truncate cut position at `version` (None: never truncated)."""
    from deltalake import DeltaTable

    config = DeltaTable(path, version=version, storage_options=options_for(path)
                        ).metadata().configuration
    value = config.get(TRUNCATE_LSN)
    return int(value) if value not in (None, "") else None


def changed_after(spark: SparkSession, frame: DataFrame, target: str, rel_path: str,
                  canon: TableCanon, lsn: int, cut_lsn: int,
                  tombstones_version: int | None) -> set[str]:
    """Key texts of keys the lake changed at or after `lsn` (up to the cut); the tombstones
    are read at `tombstones_version`, the cut's (None: the cut has none, read the latest)."""
    key = spark_joined(canon, canon.key)
    keys = {r[0] for r in frame.where(F.col(LSN) >= lsn).select(F.expr(key)).collect()}
    tomb = tombstone_path(target, rel_path)
    from delta.tables import DeltaTable

    if DeltaTable.isDeltaTable(spark, tomb):
        stones = (spark.read.format("delta").load(tomb) if tombstones_version is None
                  else table_at(spark, tomb, tombstones_version))
        have = set(stones.columns)
        if all(canon.lake[k] in have for k in canon.key):
            found = stones.where((F.col(LSN) >= lsn) & (F.col(LSN) <= cut_lsn))
            keys |= {r[0] for r in found.select(F.expr(key)).collect()}
    return keys


def _compared(frame: DataFrame, canon: TableCanon, lsn: int, excluded: set[str]) -> DataFrame:
    """Rows at or before L whose keys did not change after it, with their key text `_k`."""
    out = frame.where(F.col(LSN) < lsn).withColumn("_k", F.expr(spark_joined(canon, canon.key)))
    if excluded:
        out = out.where(~F.col("_k").isin(sorted(excluded)))
    return out


def summaries(frame: DataFrame, canon: TableCanon, ranges: int, lsn: int,
              excluded: set[str]) -> dict[int, RangeSummary]:
    rows = (_compared(frame, canon, lsn, excluded)
            .select(F.expr(spark_bucket("_k", ranges)).alias("b"),
                    F.expr(spark_hash(spark_joined(canon, canon.hashed))).alias("h"))
            .groupBy("b").agg(F.count(F.lit(1)), F.expr("bit_xor(h)"),
                              F.expr("sum(cast(h as decimal(20,0)))"))
            .collect())
    return {int(r[0]): RangeSummary(int(r[1]), int(r[2]), int(r[3])) for r in rows}


def rows(frame: DataFrame, canon: TableCanon, ranges: int, buckets: Sequence[int], lsn: int,
         excluded: set[str]) -> dict[str, Row]:
    picked = _compared(frame, canon, lsn, excluded).where(
        F.expr(spark_bucket("_k", ranges)).isin(list(buckets)))
    return _collect(picked, canon, canon.hashed, canon.direct)


def direct_rows(frame: DataFrame, canon: TableCanon, lsn: int,
                excluded: set[str]) -> dict[str, Row]:
    return _collect(_compared(frame, canon, lsn, excluded), canon, canon.key, canon.direct)


def _collect(frame: DataFrame, canon: TableCanon, texts: Sequence[str],
             values: Sequence[str]) -> dict[str, Row]:
    columns = [F.col("_k")] + [F.expr(spark_text(canon, c)) for c in texts] + \
        [F.col(spark_quote(canon.lake[c])) for c in values]
    names = list(texts) + list(values)
    out: dict[str, Row] = {}
    for record in frame.select(*columns).toLocalIterator():
        items = list(record)
        out[items[0]] = dict(zip(names, _plain(items[1:]), strict=True))
    return out


def _plain(values: list[Any]) -> list[Any]:
    """Spark Row values (nested Rows in structs) as plain Python values."""
    return [v.asDict(recursive=True) if hasattr(v, "asDict") else v for v in values]


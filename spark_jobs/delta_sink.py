"""Apply one micro-batch of a table's changes to its Delta table (and its tombstones)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from .changes import (
    IDX,
    LSN,
    META,
    OP,
    TOAST,
    TS,
    Position,
    after_position,
    latest_per_key,
    q,
    row_changes,
    row_columns,
    truncate_position,
)
from .plan import MergePlan, merge_plan, not_deleted_later, tombstone_plan

log = logging.getLogger(__name__)

TRUNCATE_LSN, TRUNCATE_IDX = "pgcdc.truncate.commitLsn", "pgcdc.truncate.txnIndex"
META_FIELDS = [StructField(OP, StringType()), StructField(LSN, LongType()),
               StructField(IDX, LongType()), StructField(TS, LongType())]


class ConfigurationError(ValueError):
    pass


@dataclass
class BatchFacts:
    """What the job learned about a table's part of a batch in one small aggregation."""

    events: int  # row changes (not truncates)
    deletes: int
    truncate: Position | None
    toast: list[str]


@contextmanager
def idempotent(spark: SparkSession, app_id: str, version: int) -> Iterator[None]:
    """Delta skips a commit whose (txnAppId, txnVersion) it has already recorded: a batch that
    Spark re-runs after a crash does not apply its MERGE twice (the LSN guard would make the
    second one a no-op anyway; this skips the work)."""
    spark.conf.set("spark.databricks.delta.write.txnAppId", app_id)
    spark.conf.set("spark.databricks.delta.write.txnVersion", str(version))
    try:
        yield
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")


def _run(builder_target: DeltaTable, source: DataFrame, plan: MergePlan) -> None:
    (builder_target.alias("t").merge(source.alias("s"), plan.on)
     .whenMatchedDelete(condition=plan.delete_when)
     .whenMatchedUpdate(condition=plan.update_when, set=plan.update_set)
     .whenNotMatchedInsert(condition=plan.insert_when, values=plan.insert_values)
     .execute())


class DeltaTableSink:
    """One table: `<root>/<schema>/<table>`, tombstones at
    `<root>/_pgcdc/tombstones/<schema>/<table>`. Keeps what it learns (existence, columns,
    truncate watermark) between batches of one run."""

    def __init__(self, spark: SparkSession, root: str, rel_path: str, app_id: str,
                 partition_by: Sequence[str] = ()) -> None:
        self.spark = spark
        self.path = f"{root.rstrip('/')}/{rel_path}"
        self.tomb_path = f"{root.rstrip('/')}/_pgcdc/tombstones/{rel_path}"
        self.app_id = app_id
        self.partition_by = list(partition_by)
        self._table: DeltaTable | None = None
        self._tombstones: DeltaTable | None = None
        self._watermark: Position | None = None

    # -- table state -------------------------------------------------------------------
    def _load(self) -> DeltaTable | None:
        if self._table is None and DeltaTable.isDeltaTable(self.spark, self.path):
            self._table = DeltaTable.forPath(self.spark, self.path)
            props = self._table.detail().select("properties").first()[0] or {}
            if TRUNCATE_LSN in props:
                self._watermark = Position(int(props[TRUNCATE_LSN]), int(props[TRUNCATE_IDX]))
        return self._table

    def _create(self, changes: DataFrame) -> DeltaTable:
        fields = [changes.schema[c] for c in row_columns(changes)]
        missing = [c for c in self.partition_by if c not in {f.name for f in fields}]
        if missing:
            raise ConfigurationError(f"{self.path}: no column(s) {missing} to partition by")
        (DeltaTable.createIfNotExists(self.spark).location(self.path)
         .addColumns(StructType([StructField(f.name, f.dataType) for f in fields] + META_FIELDS))
         .partitionedBy(*self.partition_by).execute())
        self._table = DeltaTable.forPath(self.spark, self.path)
        return self._table

    def _evolve(self, table: DeltaTable, changes: DataFrame) -> list[str]:
        """Add the columns the source has and the table lacks; return the table's row columns."""
        current = table.toDF().schema
        have = {f.name.lower() for f in current.fields}
        new = [changes.schema[c] for c in row_columns(changes) if c.lower() not in have]
        if new:
            # AFTER the last row column: metadata columns stay last, and the table has the same
            # layout whether it saw the columns in one batch or over several.
            previous = [f.name for f in current.fields if f.name not in META][-1]
            added = []
            for f in new:
                added.append(f"{q(f.name)} {f.dataType.simpleString()} AFTER {q(previous)}")
                previous = f.name
            cols = ", ".join(added)
            self.spark.sql(f"ALTER TABLE delta.{q(self.path)} ADD COLUMNS ({cols})")
            self._table = DeltaTable.forPath(self.spark, self.path)  # sees the new schema
            log.info("%s: added columns %s", self.path, [f.name for f in new])
        return [f.name for f in current.fields if f.name not in META] + [f.name for f in new]

    def _truncate(self, table: DeltaTable, position: Position) -> None:
        """Remove rows (and tombstones) older than the truncate and remember its position, so
        a duplicate older change arriving later is dropped too."""
        lsn, idx = position
        older = f"{LSN} < {lsn} OR ({LSN} = {lsn} AND {IDX} < {idx})"
        table.delete(older)
        if DeltaTable.isDeltaTable(self.spark, self.tomb_path):
            DeltaTable.forPath(self.spark, self.tomb_path).delete(older)
        self.spark.sql(f"ALTER TABLE delta.{q(self.path)} SET TBLPROPERTIES "
                       f"('{TRUNCATE_LSN}' = '{lsn}', '{TRUNCATE_IDX}' = '{idx}')")
        self._watermark = position
        log.info("%s: truncated before %s", self.path, position)

    def _tombstone_table(self, key: Sequence[str], latest: DataFrame,
                         create: bool) -> DeltaTable | None:
        if self._tombstones is None and (
                create or DeltaTable.isDeltaTable(self.spark, self.tomb_path)):
            fields = [latest.schema[k] for k in key]
            (DeltaTable.createIfNotExists(self.spark).location(self.tomb_path)
             .addColumns(StructType([StructField(f.name, f.dataType) for f in fields]
                                    + [StructField(LSN, LongType()), StructField(IDX, LongType())]))
             .execute())
            self._tombstones = DeltaTable.forPath(self.spark, self.tomb_path)
        return self._tombstones

    # -- one batch -----------------------------------------------------------------------
    def apply(self, changes: DataFrame, facts: BatchFacts, key: Sequence[str] | None,
              batch_id: int) -> None:
        table = self._load() or self._create(changes)
        target_columns = self._evolve(table, changes)
        table = self._table or table
        cut = truncate_position([self._watermark, facts.truncate])
        if cut is not None and cut != self._watermark:
            self._truncate(table, cut)
        rows = after_position(row_changes(changes), cut)
        if facts.events == 0:
            return
        # A table without replica identity has no key: each change is its own row, and
        # its position makes a replayed insert match itself instead of duplicating.
        merge_key = list(key) if key else [LSN, IDX]
        latest = latest_per_key(rows.select(*row_columns(rows), *META, TOAST),
                                merge_key, facts.toast)
        tombstones = self._tombstone_table(merge_key, latest, create=facts.deletes > 0)
        if tombstones is not None:
            latest = latest.alias("s").join(tombstones.toDF().alias("t"),
                                            F.expr(not_deleted_later(merge_key)), "left_anti")
        latest = latest.persist() if tombstones is not None else latest
        try:
            with idempotent(self.spark, f"{self.app_id}:{self.path}", batch_id):
                _run(table, latest, merge_plan(merge_key, row_columns(rows), target_columns,
                                               facts.toast))
            if tombstones is not None and facts.deletes > 0:
                with idempotent(self.spark, f"{self.app_id}:{self.tomb_path}", batch_id):
                    _run(tombstones, latest, tombstone_plan(merge_key))
        finally:
            if tombstones is not None:
                latest.unpersist()

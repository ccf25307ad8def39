"""Apply one micro-batch of a table's changes to its Delta table (and its tombstones) through
Spark: the `delta` format's `TableSink` (registry: `spark_jobs/sinks/__init__.py`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from delta.tables import DeltaTable
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, LongType, StructField, StructType

from ...rules.changes import (
    IDX,
    LSN,
    META,
    OP,
    TOAST,
    Position,
    after_position,
    before_position,
    latest_per_key,
    q,
    row_changes,
    row_columns,
    truncate_position,
)
from ...rules.expiry import expired_predicate
from ...rules.incarnation import Incarnation
from ...rules.plan import MergePlan, merge_plan, not_deleted_later
from ...rules.widening import column_change, exact_cast
from ..inputs import BatchFacts
from .state import MAPPING_PROPERTIES as MAPPING_PROPERTIES  # re-exported
from .state import (
    META_FIELDS,
    TRUNCATE_IDX,
    TRUNCATE_LSN,
    ConfigurationError,
    DeltaTableState,
)

log = logging.getLogger(__name__)

# Delta's MERGE repartitions by the partition columns' unquoted names before writing, so a
# partition column with a dot (`a.b`) is taken for a nested field (UNRESOLVED_COLUMN).
REPARTITION_BEFORE_WRITE = "spark.databricks.delta.merge.repartitionBeforeWrite.enabled"


@contextmanager
def idempotent(spark: SparkSession, app_id: str, version: int,
               extra: Mapping[str, str] | None = None) -> Iterator[None]:
    """Delta skips a commit whose (txnAppId, txnVersion) it has already recorded: a batch that
    Spark re-runs after a crash does not apply its MERGE twice (the LSN guard would make the
    second one a no-op anyway; this skips the work). `extra`: more session settings for the
    same span."""
    settings = {"spark.databricks.delta.write.txnAppId": app_id,
                "spark.databricks.delta.write.txnVersion": str(version), **(extra or {})}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key in settings:
            spark.conf.unset(key)


def _run(target: DeltaTable, source: DataFrame, plan: MergePlan) -> None:
    # delta-spark types the expressions as dict[str, str | Column] (invariant): copies.
    update: dict[str, str | Column] = {**plan.update_set}
    insert: dict[str, str | Column] = {**plan.insert_values}
    (target.alias("t").merge(source.alias("s"), plan.on)
     .whenMatchedDelete(condition=plan.delete_when)
     .whenMatchedUpdate(condition=plan.update_when, set=update)
     .whenNotMatchedInsert(condition=plan.insert_when, values=insert)
     .execute())


class SparkDeltaSink:
    """A table's Delta mirror written through Spark (`DeltaTableState` says where and what it
    is): the Spark engine of `mirror.DeltaMirror`, whose delta-rs engine over the same state
    is `delta_rs_writer.DeltaRsSink`; a table may go either way from batch to batch. Each call
    runs in the session it is given (the job gives each worker thread its own, for the
    per-session idempotent-write settings)."""

    def __init__(self, state: DeltaTableState) -> None:
        self.state = state

    @property
    def path(self) -> str:
        return self.state.path

    @property
    def tomb_path(self) -> str:
        return self.state.tomb_path

    # -- table state -------------------------------------------------------------------
    def _load(self, spark: SparkSession) -> bool:
        """Read the table's columns and truncate cut once; False if there is no table."""
        if self.state.columns is None and DeltaTable.isDeltaTable(spark, self.path):
            detail = DeltaTable.forPath(spark, self.path).detail().first()
            assert detail is not None
            self.state.learn(detail["properties"] or {}, detail["partitionColumns"] or [],
                             spark.read.format("delta").load(self.path).schema,
                             DeltaTable.isDeltaTable(spark, self.tomb_path))
        return self.state.columns is not None

    def _spark_writes(self) -> None:
        """Spark is about to commit to the table or its tombstones: the fast path's delta-rs
        handles read the log at their next use (`lake/delta_handles.py`)."""
        self.state.handles.changed(self.path)
        self.state.handles.changed(self.tomb_path)

    def exists(self, spark: SparkSession) -> bool:
        return self._load(spark)

    def take(self, spark: SparkSession, incarnation: Incarnation, replace: bool,
             template: DataFrame) -> None:
        """Hold `incarnation` of the upstream table from now on (`spark_jobs/rules/incarnation.py`).
        `replace`: the table held another one, whose rows go; the table takes the columns
        and types of `template` (the new incarnation's decoded changes). A table still to be
        created records it when created."""
        self._spark_writes()
        if self._load(spark):
            if replace:
                self._replace(spark, template, incarnation)
            properties = ", ".join(f"'{k}' = '{v}'" for k, v in incarnation.properties().items())
            spark.sql(f"ALTER TABLE delta.{q(self.path)} SET TBLPROPERTIES ({properties})")
        self.state.incarnation = incarnation

    def _replace(self, spark: SparkSession, template: DataFrame,
                 incarnation: Incarnation) -> None:
        """Empty the table and its tombstones and give it `template`'s columns, in one commit
        each: a new version of the same table (time travel still shows the old rows)."""
        fields = [StructField(f.name, f.dataType) for f in template.schema.fields
                  if f.name in row_columns(template)]
        missing = [c for c in self.state.partitions if c not in {f.name for f in fields}]
        if missing:
            raise ConfigurationError(f"{self.path}: no column(s) {missing} to partition by")
        _overwrite_empty(spark, self.path, StructType(fields + META_FIELDS),
                         self.state.partitions)
        if self.state.has_tombstones:  # key columns join again with the first delete
            _overwrite_empty(spark, self.tomb_path, StructType(META_FIELDS[1:3]), [])
        log.warning("%s: the table was dropped and created again upstream (relation id %s -> "
                    "%d): the lake table starts again, with its columns", self.path,
                    self.state.incarnation.relation_id if self.state.incarnation else "unknown",
                    incarnation.relation_id)
        self.state.columns = [f.name for f in fields]
        self.state.types = {f.name.lower(): f.dataType for f in fields}

    def _new_fields(self, changes: DataFrame) -> list[StructField]:
        """The row columns of a table created from `changes` (partitioning checked)."""
        fields = [StructField(f.name, f.dataType)
                  for f in (changes.schema[c] for c in row_columns(changes))]
        missing = [c for c in self.state.partition_by if c not in {f.name for f in fields}]
        if missing:
            raise ConfigurationError(f"{self.path}: no column(s) {missing} to partition by")
        return fields

    def _create(self, spark: SparkSession, changes: DataFrame) -> None:
        fields = self._new_fields(changes)
        builder = (DeltaTable.createIfNotExists(spark).location(self.path)
                   .addColumns(StructType(fields + META_FIELDS))
                   .partitionedBy(*self.state.partition_by))
        for key, value in self.state.create_properties().items():
            builder = builder.property(key, value)
        builder.execute()
        self.state.created(fields)

    def _create_with(self, spark: SparkSession, rows: DataFrame, batch_id: int,
                     part: str) -> None:
        """Create the table holding `rows` (its row columns, then the metadata columns) in
        one commit: what `_create` and `_append` do in two (a new table's fixed cost on the
        Spark path). The same table: `_create`'s columns, partitioning and properties."""
        fields = self._new_fields(rows)
        _create_holding(spark, self.path, rows, fields + META_FIELDS, self.state.partition_by,
                        self.state.create_properties(),
                        f"{self.state.app_id}:{self.path}{part}", batch_id)
        self.state.created(fields)

    def original_names(self, spark: SparkSession) -> bool:
        """Whether the table's columns carry the PostgreSQL names (`names.column_names`),
        the table read first (`DeltaTableState.original_names`)."""
        self._load(spark)
        return self.state.original_names()

    def version(self, spark: SparkSession, tombstones: bool = False) -> int | None:
        """The current Delta version of the table (or of its tombstones), from the newest
        entry of its history (`DeltaRsSink.version` reads it through delta-rs, without a job)."""
        path = self.tomb_path if tombstones else self.path
        row = DeltaTable.forPath(spark, path).history(1).select("version").first()
        return None if row is None else int(row[0])

    def _evolve(self, spark: SparkSession, changes: DataFrame) -> None:
        """Add the columns the source has and the table lacks (a column dropped upstream stays:
        the MERGE sets it NULL in every row changed from then on)."""
        assert self.state.columns is not None
        have = {c.lower() for c in self.state.columns}
        new = [changes.schema[c] for c in row_columns(changes) if c.lower() not in have]
        if not new:
            return
        # AFTER the last row column: metadata columns stay last, and the table has the same
        # layout whether it saw the columns in one batch or over several.
        previous, added = self.state.columns[-1], []
        for f in new:
            added.append(f"{q(f.name)} {f.dataType.simpleString()} AFTER {q(previous)}")
            previous = f.name
        spark.sql(f"ALTER TABLE delta.{q(self.path)} ADD COLUMNS ({', '.join(added)})")
        self.state.columns += [f.name for f in new]
        self.state.types.update({f.name.lower(): f.dataType for f in new})
        log.info("%s: added columns %s", self.path, [f.name for f in new])

    def _widen(self, spark: SparkSession, changes: DataFrame) -> None:
        """Give the table the types of the batch's columns whose source type changed upstream
        (`widening.column_change`), before the MERGE would fail casting to the old type
        (DELTA_CAST_OVERFLOW_IN_TABLE_WRITE for int → bigint, CAST_INVALID_INPUT for text →
        bigint). A widening converts every stored value; any other change (a retype: the
        table's new schema wins) converts the values Spark can cast exactly and sets the
        others NULL: existing rows keep converted values until the producer re-syncs the table
        (an incremental snapshot). A narrower source type (bigint → int) keeps the table's.
        A rewrite of the table (rare: once per type change) rather than Delta's typeWidening
        feature, which delta-rs cannot read. The tombstone table's copy of a key column
        follows."""
        new_types: dict[str, DataType] = {}
        retyped: list[str] = []
        for c in row_columns(changes):
            have = self.state.types.get(c.lower())
            if have is None:
                continue
            change, new = column_change(have, changes.schema[c].dataType)
            if change != "same":
                new_types[c.lower()] = new
            if change == "retype":
                retyped.append(c)
        if not new_types:
            return
        lost = _not_convertible(spark, self.path, {c.lower(): new_types[c.lower()]
                                                   for c in retyped})
        _rewrite_with_types(spark, self.path, new_types)
        if self.state.has_tombstones:
            _rewrite_with_types(spark, self.tomb_path, new_types)
        for c in retyped:
            log.warning("%s: column %s retyped %s -> %s (%d values not convertible set NULL)",
                        self.path, c, self.state.types[c.lower()].simpleString(),
                        new_types[c.lower()].simpleString(), lost.get(c.lower(), 0))
        widened_ = {c: t.simpleString() for c, t in new_types.items()
                    if c not in {r.lower() for r in retyped}}
        if widened_:
            log.info("%s: widened %s", self.path, widened_)
        self.state.types.update(new_types)

    def _truncate(self, spark: SparkSession, position: Position) -> None:
        """Remove rows (and tombstones) older than the truncate and remember its position, so
        a duplicate older change arriving later is dropped too."""
        lsn, idx = position
        older = before_position(position)
        DeltaTable.forPath(spark, self.path).delete(older)
        if self.state.has_tombstones:
            DeltaTable.forPath(spark, self.tomb_path).delete(older)
        spark.sql(f"ALTER TABLE delta.{q(self.path)} SET TBLPROPERTIES "
                  f"('{TRUNCATE_LSN}' = '{lsn}', '{TRUNCATE_IDX}' = '{idx}')")
        self.state.truncate_cut = position
        log.info("%s: truncated before %s", self.path, position)

    def expire_tombstones(self, spark: SparkSession, bound: int) -> int:
        """Delete the tombstones `expiry.expired_predicate(bound)` selects, through Spark; how
        many went (no commit when none)."""
        self._spark_writes()
        if not (self._load(spark) and self.state.has_tombstones):
            return 0
        predicate = expired_predicate(bound)
        expired = spark.read.format("delta").load(self.tomb_path).where(predicate).count()
        if expired:
            DeltaTable.forPath(spark, self.tomb_path).delete(predicate)
        return expired

    def _create_tombstones(self, spark: SparkSession, key: Sequence[str], deletes: DataFrame,
                           batch_id: int, part: str) -> bool:
        """Create the tombstone table holding its first `deletes`, in one commit; False, with
        nothing written, when one is there already (when it may be: the state's
        `has_tombstones`). The create's own existence check finds it: no separate request."""
        fields = [StructField(deletes.schema[k].name, deletes.schema[k].dataType) for k in key]
        # the key columns have the table's names
        properties = MAPPING_PROPERTIES if self.state.mapped else {}
        try:
            _create_holding(spark, self.tomb_path, deletes,
                            [*fields, StructField(LSN, LongType()), StructField(IDX, LongType())],
                            [], properties, f"{self.state.app_id}:{self.tomb_path}{part}",
                            batch_id)
        except AnalysisException as exc:
            if exc.getCondition() != "TABLE_OR_VIEW_ALREADY_EXISTS":
                raise
            self.state.has_tombstones = True
            log.info("%s: tombstones found at %s", self.path, self.tomb_path)
            return False
        self.state.has_tombstones = True
        log.info("%s: tombstones at %s", self.path, self.tomb_path)
        return True

    # -- one batch -----------------------------------------------------------------------
    def apply(self, spark: SparkSession, changes: DataFrame, facts: BatchFacts,
              key: Sequence[str] | None, batch_id: int, part: str = "") -> None:
        """Merge `changes` by `key`. `part` tells apart the commits of one batch applied in
        several parts (one per key schema, `job.key_groups`) for Delta's idempotent writes."""
        self._spark_writes()
        fresh = not self._load(spark)
        # A new table whose first rows come with it: created with them, in one commit; one
        # that a truncate of the batch cuts, or that gets no rows, is created first.
        with_rows = fresh and facts.events > 0 and facts.truncate is None
        if fresh and not with_rows:
            self._create(spark, changes)
        if not with_rows:
            self._evolve(spark, changes)
            self._widen(spark, changes)
            assert self.state.columns is not None
        cut = truncate_position([self.state.truncate_cut, facts.truncate])
        if cut is not None and cut != self.state.truncate_cut:
            self._truncate(spark, cut)
            fresh = False
        if facts.events == 0:
            return
        rows = after_position(row_changes(changes), cut)
        # A table without replica identity has no key: each change is its own row, and
        # its position makes a replayed insert match itself instead of duplicating.
        merge_key = list(key) if key else [LSN, IDX]
        latest = latest_per_key(rows.select(*[F.col(q(c)) for c in row_columns(rows)],
                                            *META, TOAST),
                                merge_key, facts.toast)
        if self.state.has_tombstones:
            tombstones = spark.read.format("delta").load(self.tomb_path)
            have = {c.lower() for c in tombstones.columns}
            missing = [k for k in merge_key if k.lower() not in have]
            if missing:  # a key of another key schema: its columns join the tombstones
                spark.sql(f"ALTER TABLE delta.{q(self.tomb_path)} ADD COLUMNS ("
                          + ", ".join(f"{q(k)} {latest.schema[k].dataType.simpleString()}"
                                      for k in missing) + ")")
                tombstones = spark.read.format("delta").load(self.tomb_path)
            keyed = {k.lower() for k in [*merge_key, LSN, IDX]}
            others = [c for c in tombstones.columns
                      if c.lower() not in keyed and c in latest.columns]
            latest = latest.alias("s").join(tombstones.alias("t"),
                                            F.expr(not_deleted_later(merge_key, others)),
                                            "left_anti")
        # Cached: read by the table's MERGE (or append) and the tombstone append.
        latest = latest.persist()
        try:
            if with_rows:
                self._create_with(spark, latest.where(F.col(OP) != "d").select(
                    *[F.col(q(c)) for c in row_columns(rows)], *META), batch_id, part)
            elif fresh:
                assert self.state.columns is not None  # created above
                live = latest.where(F.col(OP) != "d").select(
                    *[F.col(q(c)) for c in self.state.columns], *META)
                _append(live, self.path, f"{self.state.app_id}:{self.path}{part}", batch_id)
            else:
                assert self.state.columns is not None
                dotted = any("." in c or "`" in c for c in self.state.partitions)
                with idempotent(spark, f"{self.state.app_id}:{self.path}{part}", batch_id,
                                {REPARTITION_BEFORE_WRITE: "false"} if dotted else None):
                    _run(DeltaTable.forPath(spark, self.path), latest, merge_plan(
                        merge_key, row_columns(rows), self.state.columns, facts.toast))
            if facts.deletes > 0:
                self._add_tombstones(spark, latest, merge_key, batch_id, part)
        finally:
            latest.unpersist()

    def _add_tombstones(self, spark: SparkSession, latest: DataFrame, key: Sequence[str],
                        batch_id: int, part: str = "") -> None:
        """Append the positions of the batch's winning deletes. An append, not a MERGE (it is
        a third of the cost): the filter drops a change when *any* tombstone of its key is at or
        after it, so older tombstones of a key may stay and change nothing. The state says
        whether the tombstones exist; when it does not know them, creating them finds out."""
        deletes = latest.where(F.col(OP) == "d").select(*[F.col(q(k)) for k in key], LSN, IDX)
        if not self.state.has_tombstones and self._create_tombstones(spark, key, deletes,
                                                                     batch_id, part):
            return
        _append(deletes, self.tomb_path, f"{self.state.app_id}:{self.tomb_path}{part}",
                batch_id)


def _not_convertible(spark: SparkSession, path: str, types: dict[str, DataType]
                     ) -> dict[str, int]:
    """Per (lower-cased) column: how many stored values `exact_cast` cannot convert to its new
    type (one aggregation over the table; only for retyped columns)."""
    if not types:
        return {}
    table = spark.read.format("delta").load(path)
    fields = [f for f in table.schema.fields if f.name.lower() in types]
    row = table.agg(*[F.count_if(F.col(q(f.name)).isNotNull() & exact_cast(
        F.col(q(f.name)), f.dataType, types[f.name.lower()]).isNull()).alias(str(i))
        for i, f in enumerate(fields)]).first()
    assert row is not None
    return {f.name.lower(): int(row[str(i)]) for i, f in enumerate(fields)}


def _rewrite_with_types(spark: SparkSession, path: str, types: dict[str, DataType]) -> None:
    """Rewrite a Delta table with the given (lower-cased) columns converted to new types
    (`widening.exact_cast`: NULL where a value cannot convert), in one commit that keeps its
    partitioning, table properties and column mapping."""
    table = spark.read.format("delta").load(path)
    if not any(f.name.lower() in types for f in table.schema.fields):
        return
    detail = DeltaTable.forPath(spark, path).detail().first()
    assert detail is not None
    columns = [exact_cast(F.col(q(f.name)), f.dataType, types[f.name.lower()]).alias(f.name)
               if f.name.lower() in types else F.col(q(f.name)) for f in table.schema.fields]
    (table.select(*columns).write.format("delta").mode("overwrite")
     .option("overwriteSchema", "true").partitionBy(*detail["partitionColumns"]).save(path))


def _overwrite_empty(spark: SparkSession, path: str, schema: StructType,
                     partitions: Sequence[str]) -> None:
    """Replace a Delta table's rows and schema with none and `schema` (properties stay)."""
    (spark.createDataFrame([], schema).write.format("delta").mode("overwrite")
     .option("overwriteSchema", "true").partitionBy(*partitions).save(path))


def _create_holding(spark: SparkSession, path: str, rows: DataFrame,
                    fields: Sequence[StructField], partitions: Sequence[str],
                    properties: Mapping[str, str], app_id: str, batch_id: int) -> None:
    """Create the Delta table at `path` with `rows` in it, in one commit (a CREATE TABLE AS
    SELECT): its columns are `fields`, by name from `rows` and cast to their types, all
    nullable as a created table's are; idempotent per (`app_id`, `batch_id`) as `_append`
    is (a re-run finds the table there and goes on as for an existing one)."""
    columns = [F.col(q(f.name)).cast(f.dataType).alias(f.name) for f in fields]
    writer = rows.select(*columns).writeTo(f"delta.{q(path)}").using("delta")
    if partitions:
        writer = writer.partitionedBy(*[F.col(q(c)) for c in partitions])
    for key, value in properties.items():
        writer = writer.tableProperty(key, value)
    with idempotent(spark, app_id, batch_id):
        writer.create()


def _append(df: DataFrame, path: str, app_id: str, batch_id: int) -> None:
    """Append with Delta's writer-option idempotence (skipped if this batch was committed)."""
    (df.write.format("delta").mode("append")
     .option("txnAppId", app_id).option("txnVersion", batch_id).save(path))

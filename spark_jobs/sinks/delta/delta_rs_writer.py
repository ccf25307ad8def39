"""The fast path: one table's part of a small micro-batch applied through delta-rs.

Why: a Delta MERGE through Spark costs seconds per table whatever its size (jobs, a
materialized source, log reads), so a batch over many tables cost minutes. delta-rs merges
a small in-memory source in tens of milliseconds. For a small batch the job decodes the
events in Python (`rows`), folds them with the same rules as the Spark path (`fold`), and
MERGEs with the same plan (`plan.merge_plan`, rendered for DataFusion), idempotent per batch
with the same Delta application transaction ids (`txn` actions) the Spark path writes.

What stays with Spark (`Declined`, decided before anything is written): backlogs (big
batches), new columns and type changes, several key schemas in one batch, new tables with
column mapping, undecodable events (dead letters) and any table delta-rs cannot write. A
truncate stays here: a cut in the table's events (`fold.truncate_cut`), applied as the Spark
path applies it (`SparkDeltaSink._truncate`: rows and tombstones before it deleted, its position
recorded in the table's properties, last), then the changes after it.
A table may go either way from batch to batch: both paths read and write the same
tables and tombstones, and a batch one path committed part of is finished by the other
without applying anything twice (txn ids, position guards)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from deltalake import (
    CommitProperties,
    DeltaTable,
    PostCommitHookProperties,
    Transaction,
    write_deltalake,
)
from deltalake import Schema as DeltaSchema
from pyspark.sql import SparkSession
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from ...events.lake_types import lake_schema
from ...events.rows import TopicRows
from ...lake.phases import CLOCK
from ...lake.storage import options_for
from ...rules import fold
from ...rules.changes import IDX, LSN, META, OP, TOAST, Position, before_position
from ...rules.expiry import expired_predicate
from ...rules.incarnation import Incarnation
from ...rules.plan import DATAFUSION, merge_plan
from ...rules.widening import column_change
from .state import (
    META_FIELDS,
    TRUNCATE_IDX,
    TRUNCATE_LSN,
    ConfigurationError,
    DeltaTableState,
)

log = logging.getLogger(__name__)
TOAST_TYPE = pa.list_(pa.string())


class Declined(Exception):
    """This table's part of the batch goes the Spark way (the reason is logged)."""


# After each commit: a log checkpoint when due, but no expired-log cleanup, which lists the
# whole log on every commit (one request of ~7 per commit on an object store); `maintain`
# cleans up instead.
HOOKS = PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=False)


def _txn(app_id: str, batch_id: int) -> CommitProperties:
    return CommitProperties(app_transactions=[Transaction(app_id=app_id, version=batch_id)])


def row_types(spark: SparkSession, schema: dict[str, Any], columns: Mapping[str, str]
              ) -> dict[str, DataType]:
    """Column → the Spark type `from_avro` decodes its field to (Spark's own Avro mapping,
    asked from the JVM: no job), for the row columns `columns` (Avro name → column)."""
    jvm = spark._jvm
    assert jvm is not None
    avro = jvm.org.apache.avro.Schema.Parser().parse(json.dumps(lake_schema(schema)))
    sql = jvm.org.apache.spark.sql.avro.SchemaConverters.toSqlType(avro)
    envelope = StructType.fromJson(json.loads(sql.dataType().json()))
    after = envelope["after"].dataType
    assert isinstance(after, StructType)
    return {columns[f.name]: nullable(f.dataType) for f in after.fields}


def nullable(type_: DataType) -> DataType:
    """The type with every element, value and field nullable: what `from_avro` in PERMISSIVE
    mode (the Spark path) makes of it."""
    if isinstance(type_, ArrayType):
        return ArrayType(nullable(type_.elementType), True)
    if isinstance(type_, MapType):
        return MapType(type_.keyType, nullable(type_.valueType), True)
    if isinstance(type_, StructType):
        return StructType([StructField(f.name, nullable(f.dataType), True)
                           for f in type_.fields])
    return type_


def _arrow(rows: Sequence[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=schema)


class DeltaRsSink:
    """A table's Delta mirror written through delta-rs: the same table, tombstones and
    `DeltaTableState` as its Spark engine (`spark_writer.SparkDeltaSink`); `mirror.DeltaMirror`
    holds both (this one as its `fast`).
    Its delta-rs handles are kept up to date between batches (`lake/delta_handles.py`), so
    each batch reads only the log entries added since (by either engine)."""

    def __init__(self, state: DeltaTableState) -> None:
        self.state = state

    def _open(self, tombstones: bool = False) -> DeltaTable | None:
        return self.state.handles.open(self.state.tomb_path if tombstones else self.state.path)

    def version(self, tombstones: bool = False) -> int | None:
        """The current Delta version of the table (or of its tombstones) through its cached
        delta-rs handle (None: absent)."""
        table = self._open(tombstones)
        return None if table is None else table.version()

    def _done(self, path: str, table: DeltaTable, app_id: str, batch_id: int) -> bool:
        """Whether this batch was committed to the table already (a re-run batch)."""
        version = self.state.handles.transaction_version(path, table, app_id)
        return version is not None and version >= batch_id

    def load(self) -> None:
        """Learn an existing table's state through delta-rs (no Spark job), once; nothing if
        absent."""
        if self.state.loaded:
            return
        table = self._open()
        if table is not None:
            self._learn(table)

    def original_names(self) -> bool:
        """`DeltaTableState.original_names`, the table read first (through delta-rs)."""
        self.load()
        return self.state.original_names()

    def adopt(self, incarnation: Incarnation) -> None:
        """A table still to be created takes its only incarnation (`rules/incarnation.py`):
        recorded in its properties when created. Anything else (a table re-created upstream,
        an existing table learning its relation id) is its Spark engine's
        (`SparkDeltaSink.take`)."""
        if self.state.loaded:
            raise Declined("a table (re-)created upstream")
        self.state.incarnation = incarnation

    def _learn(self, table: DeltaTable, created: bool = False) -> None:
        """Learn the table; its tombstones are looked for unless it was `created` just now
        (`DeltaTableState.has_tombstones`: the first deletes find any there)."""
        state = self.state
        metadata = table.metadata()
        schema = StructType.fromJson(json.loads(table.schema().to_json()))
        state.learn(metadata.configuration, metadata.partition_columns, schema,
                    not created and DeltaTable.is_deltatable(
                        state.tomb_path, storage_options=options_for(state.tomb_path)))

    def apply(self, batch: TopicRows, types: dict[str, DataType], key: Sequence[str] | None,
              batch_id: int, maintain_every: int = 0) -> None:
        """Merge one table's decoded changes of a batch (`types`: the Spark type of each row
        column, as the Spark path would decode it). Raises Declined before writing anything
        when the Spark path must do it."""
        state = self.state
        with CLOCK.timing("open"):
            table = self._open()
            if table is not None and not state.loaded:
                self._learn(table)
        if table is None and (state.column_mapping or any("." in c for c in state.partition_by)):
            raise Declined("a new table with column mapping or a dotted partition column")
        if table is not None:
            self._check_columns(batch.columns, types)
        merge_key = list(key) if key else [LSN, IDX]
        cut = (fold.truncate_cut(batch.rows, state.truncate_cut) if batch.truncates
               else state.truncate_cut)
        rows = (fold.row_changes(batch.rows, cut) if batch.truncates or cut is not None
                else batch.rows)
        latest = fold.latest_per_key(rows, merge_key, sorted(batch.toast))
        with CLOCK.timing("tombstones"):
            latest, tombstones = self._not_deleted_later(latest, merge_key, types)
        deletes = fold.deletes(latest)
        if deletes and tombstones is None and (
                state.mapped or table is None and state.column_mapping):
            raise Declined("the first tombstones of a table with column mapping")

        app = f"{state.app_id}:{state.path}"
        if table is None:  # created cut: its properties hold the batch's truncate
            table = self._create(batch.columns, types, app, cut)
            live = [r for r in latest if r[OP] != "d"]
            if live and not self._done(state.path, table, app, batch_id):
                write_deltalake(table, _arrow(live, pa.schema(table.schema().to_arrow())),
                                mode="append", commit_properties=_txn(app, batch_id),
                                post_commithook_properties=HOOKS)
                state.handles.committed(state.path, table, app, batch_id)
        else:
            if cut != state.truncate_cut:
                assert cut is not None
                self._truncate(table, tombstones, cut)
            if latest and not self._done(state.path, table, app, batch_id):
                self._merge(table, batch, latest, merge_key, app, batch_id)
        if deletes:
            with CLOCK.timing("tombstones"):
                self._add_tombstones(table, tombstones, deletes, merge_key, batch_id)
        state.fast_batches += 1
        if maintain_every and state.fast_batches % maintain_every == 0:
            self.maintain()

    def _merge(self, table: DeltaTable, batch: TopicRows, latest: list[dict[str, Any]],
               merge_key: list[str], app: str, batch_id: int) -> None:
        """The batch's winning changes MERGEd into the existing table (`plan.merge_plan`)."""
        state = self.state
        assert state.columns is not None
        target = pa.schema(table.schema().to_arrow())
        source = pa.schema([target.field(c) for c in batch.columns]
                           + [target.field(m) for m in META]
                           + [pa.field(TOAST, TOAST_TYPE)])
        plan = merge_plan(merge_key, batch.columns, state.columns, sorted(batch.toast),
                          DATAFUSION)
        before = table.version()
        (table.merge(_arrow(latest, source), plan.on, source_alias="s", target_alias="t",
                     streamed_exec=False, commit_properties=_txn(app, batch_id),
                     post_commithook_properties=HOOKS)
         .when_matched_delete(plan.delete_when)
         .when_matched_update(plan.update_set, plan.update_when)
         .when_not_matched_insert(plan.insert_values, plan.insert_when)
         .execute())
        if table.version() != before:  # (a MERGE that changes nothing commits nothing)
            state.handles.committed(state.path, table, app, batch_id)

    def _truncate(self, table: DeltaTable, tomb: DeltaTable | None, cut: Position) -> None:
        """`SparkDeltaSink._truncate` through delta-rs: the rows and tombstones before the
        cut deleted, then the cut recorded in the table's properties (last: a batch re-run
        after a crash in between finds the old cut and deletes again, which is a no-op)."""
        state = self.state
        older = before_position(cut)
        # These commits carry no batch: the txn versions known stay (no log read to find them).
        app, tomb_app = f"{state.app_id}:{state.path}", f"{state.app_id}:{state.tomb_path}"
        txn = state.handles.transaction_version(state.path, table, app)
        table.delete(older, post_commithook_properties=HOOKS)
        if tomb is not None:
            tomb_txn = state.handles.transaction_version(state.tomb_path, tomb, tomb_app)
            tomb.delete(older, post_commithook_properties=HOOKS)
            state.handles.committed(state.tomb_path, tomb, tomb_app, tomb_txn)
        table.alter.set_table_properties(_cut_properties(cut), raise_if_not_exists=False)
        state.handles.committed(state.path, table, app, txn)
        state.truncate_cut = cut
        log.info("%s: truncated before %s", self.state.path, cut)

    def _not_deleted_later(self, latest: list[dict[str, Any]], merge_key: list[str],
                           types: dict[str, DataType]
                           ) -> tuple[list[dict[str, Any]], DeltaTable | None]:
        """`latest` without the changes a stored tombstone of their key is at or after
        (`fold.not_deleted_later`), and the tombstones' handle (None: the table has none)."""
        tombstones = self._open(tombstones=True) if self.state.has_tombstones else None
        if tombstones is not None:
            have = {f.name for f in StructType.fromJson(
                json.loads(tombstones.schema().to_json())).fields}
            if not set(merge_key) <= have:
                raise Declined("a key the tombstones do not have yet")
            others = [c for c in have if c not in {*merge_key, LSN, IDX} and c in types]
            values = [r[merge_key[0]] for r in latest]
            found = tombstones.to_pyarrow_table(
                filters=[(merge_key[0], "in", values)]
                if all(isinstance(v, (int, str)) for v in values) and values else None)
            latest = fold.not_deleted_later(latest, found.to_pylist(), merge_key, others)
        return latest, tombstones

    @CLOCK.timed("maintenance")
    def maintain(self) -> None:
        """Keep a table's cost flat over time: every batch adds small files to the table and
        its tombstones. Compacts both (`OPTIMIZE`: same rows, fewer files), and rewrites the
        tombstones to one per key, the newest, dropping those at or before the truncate cut:
        the filter drops a change when *any* tombstone of its key is at or after it, so the
        newest one alone decides, and a truncate already removed everything at or before its
        cut. Delta log checkpoints are written by the commits themselves
        (`delta.checkpointInterval`), log entries past the retention
        (`delta.logRetentionDuration`) are removed here (`HOOKS`); old files stay for time
        travel until you VACUUM (docs/merge-internals.md, "Table maintenance")."""
        table = self._open()
        if table is not None:
            table.optimize.compact()
            table.cleanup_metadata()
        tomb = self._open(tombstones=True)
        if tomb is None:
            return
        tomb.cleanup_metadata()
        rows = tomb.to_pyarrow_table().to_pylist()
        key = [c for c in (rows[0] if rows else {}) if c not in (LSN, IDX)]
        kept = fold.newest_tombstones(fold.after_position(rows, self.state.truncate_cut), key)
        if len(kept) < len(rows):
            write_deltalake(tomb, _arrow(kept, pa.schema(tomb.schema().to_arrow())),
                            mode="overwrite")
            log.info("%s: tombstones compacted, %d -> %d", self.state.path, len(rows),
                     len(kept))
        else:
            tomb.optimize.compact()

    def expire_tombstones(self, bound: int) -> int:
        """Delete the table's tombstones `expiry.expired_predicate(bound)` selects, through
        delta-rs; how many went (no commit when none)."""
        tomb = self._open(tombstones=True)
        if tomb is None:
            return 0
        return int(tomb.delete(expired_predicate(bound))["num_deleted_rows"])

    def _check_columns(self, columns: Sequence[str], types: dict[str, DataType]) -> None:
        """The table holds every column of the batch as it is: no column to add, none to
        widen or retype (the Spark path does those)."""
        assert self.state.columns is not None
        names = set(self.state.columns)
        for c in columns:
            have = self.state.types.get(c.lower())
            if have is None or c not in names:
                raise Declined(f"column {c} is new")
            if column_change(have, types[c])[0] != "same":
                raise Declined(f"column {c} changed type")

    def _create(self, columns: Sequence[str], types: dict[str, DataType], app: str,
                cut: Position | None = None) -> DeltaTable:
        """The table, as the Spark path creates it: the batch's columns, then the metadata;
        with every property in its first commit, the truncate `cut` of its first batch too
        (an empty table has nothing before it to delete)."""
        state = self.state
        missing = [c for c in state.partition_by if c not in columns]
        if missing:
            raise ConfigurationError(f"{state.path}: no column(s) {missing} to partition by")
        # The Spark types as Delta's schema JSON (the same format): the table is what Spark
        # would create, nullability of array elements and map values included.
        schema = StructType([StructField(c, types[c]) for c in columns] + META_FIELDS)
        table = state.handles.keep(state.path, DeltaTable.create(
            state.path, DeltaSchema.from_json(schema.json()), mode="ignore",
            partition_by=state.partition_by or None,
            configuration={**state.create_properties(),
                           **(_cut_properties(cut) if cut else {})} or None,
            storage_options=options_for(state.path), post_commithook_properties=HOOKS,
            raise_if_key_not_exists=False))  # pgcdc's own properties beside Delta's
        created = table.version() == 0  # (not an existing table: "ignore")
        if created:  # the creating commit carries no batch
            state.handles.committed(state.path, table, app, None)
        self._learn(table, created)
        return table

    def _add_tombstones(self, table: DeltaTable, tomb: DeltaTable | None,
                        deletes: list[dict[str, Any]], key: Sequence[str],
                        batch_id: int) -> None:
        """`SparkDeltaSink._add_tombstones`: append the winning deletes' keys and
        positions; the first ones create the tombstones, in the same commit."""
        state = self.state
        app = f"{state.app_id}:{state.tomb_path}"
        if tomb is None:
            target = pa.schema(table.schema().to_arrow())
            schema = pa.schema([target.field(k) for k in key if k not in (LSN, IDX)]
                               + [pa.field(LSN, pa.int64()), pa.field(IDX, pa.int64())])
            # Created with their first rows in one commit ("append" to a path with no table).
            write_deltalake(state.tomb_path, _tombstones(deletes, schema), mode="append",
                            commit_properties=_txn(app, batch_id),
                            post_commithook_properties=HOOKS,
                            storage_options=options_for(state.tomb_path))
            state.has_tombstones = True  # a re-run of this batch finds them, and its txn
            log.info("%s: tombstones at %s", state.path, state.tomb_path)
            return
        if self._done(state.tomb_path, tomb, app, batch_id):
            return
        write_deltalake(tomb, _tombstones(deletes, pa.schema(tomb.schema().to_arrow())),
                        mode="append", commit_properties=_txn(app, batch_id),
                        post_commithook_properties=HOOKS)
        state.handles.committed(state.tomb_path, tomb, app, batch_id)


def _cut_properties(cut: Position) -> dict[str, str]:
    """The table properties recording a truncate cut (`DeltaTableState.learn` reads them)."""
    return {TRUNCATE_LSN: str(cut.commit_lsn), TRUNCATE_IDX: str(cut.txn_index)}


def _tombstones(deletes: Sequence[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    return _arrow([{c: r.get(c) for c in schema.names} for r in deletes], schema)

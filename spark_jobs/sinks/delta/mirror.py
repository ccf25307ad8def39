"""The `delta` format's table (`TableSink`, `Mirror`): one `DeltaTableState` written by two
engines, Spark (`spark_writer.SparkDeltaSink`: any batch) and delta-rs
(`delta_rs_writer.DeltaRsSink`: the fast path's batches). The job decides which engine writes
a table's part of a batch (a batch-wide choice: the fast path's records are collected to the
driver in rounds, `runtime/rounds.py`); for everything else the mirror chooses itself:
versions, the newest position, tombstone expiry and the tables in the lake are read through
delta-rs where it reaches the lake (no Spark job; `TableSettings.delta_rs`), else through
Spark, and a new incarnation is taken by the engine that holds the batch."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ...lake import storage
from ...lake.files import HadoopFs
from ...rules.changes import LSN
from ...rules.incarnation import Incarnation
from ...rules.plan import sql_string
from ..inputs import BatchFacts, TableSettings
from .delta_rs_writer import DeltaRsSink
from .spark_writer import SparkDeltaSink
from .state import DeltaTableState

log = logging.getLogger(__name__)


def open_sink(settings: TableSettings) -> DeltaMirror:
    """The format registry's factory (`spark_jobs/sinks/__init__.py`)."""
    return DeltaMirror(DeltaTableState(settings), settings.delta_rs)


def list_tables(spark: SparkSession, root: str) -> list[str]:
    """The Delta tables under `root` (`<schema>/<table>`; not the job's own under `_pgcdc`)."""
    target = root.rstrip("/")
    found = []
    for log_dir in HadoopFs(spark, target).glob(f"{target}/*/*/_delta_log"):
        schema, table = log_dir.rstrip("/").split("/")[-3:-1]
        if schema != "_pgcdc":
            found.append(f"{schema}/{table}")
    return found


class DeltaMirror:
    """A table's Delta mirror: `spark_writer` and `fast` (its delta-rs writer) over one
    `state`, so a table may go either way from batch to batch. `delta_rs`: reads go through
    delta-rs (it reaches the lake, and the job may write through it)."""

    def __init__(self, state: DeltaTableState, delta_rs: bool = False) -> None:
        self.state = state
        self.spark_writer = SparkDeltaSink(state)
        self.fast = DeltaRsSink(state)
        self.delta_rs = delta_rs
        self._registered = False

    @classmethod
    def at(cls, root: str, rel_path: str, app_id: str, partition_by: Sequence[str] = (),
           properties: Mapping[str, str] | None = None, column_mapping: bool = False,
           catalog_name: str | None = None, delta_rs: bool = False) -> DeltaMirror:
        """The mirror of `<root>/<rel_path>` with a state of its own (`TableSettings`'
        fields)."""
        return cls(DeltaTableState(TableSettings(root, rel_path, app_id, tuple(partition_by),
                                                 dict(properties or {}), column_mapping,
                                                 catalog_name)), delta_rs)

    # -- TableSink ---------------------------------------------------------------------
    @property
    def path(self) -> str:
        return self.state.path

    @property
    def tomb_path(self) -> str:
        return self.state.tomb_path

    @property
    def mirror(self) -> DeltaMirror:
        return self

    def original_names(self, spark: SparkSession) -> bool:
        return self.spark_writer.original_names(spark)

    def apply(self, spark: SparkSession, changes: DataFrame, facts: BatchFacts,
              key: Sequence[str] | None, batch_id: int, part: str = "") -> None:
        """A batch's decoded changes through Spark (`SparkDeltaSink.apply`); the fast path
        writes through `fast` (`DeltaRsSink.apply`)."""
        self.spark_writer.apply(spark, changes, facts, key, batch_id, part)

    # -- Mirror ------------------------------------------------------------------------
    @property
    def incarnation(self) -> Incarnation | None:
        return self.state.incarnation

    def exists(self, spark: SparkSession) -> bool:
        return self.spark_writer.exists(spark)

    def take(self, spark: SparkSession, incarnation: Incarnation, replace: bool,
             template: DataFrame | None) -> None:
        """`Mirror.take`: through Spark with a `template` (`SparkDeltaSink.take`: it may
        rewrite the table); without one (the fast path's batch) only a table still to be
        created takes it (`DeltaRsSink.adopt`: no Spark job)."""
        if template is None:
            self.fast.adopt(incarnation)
        else:
            self.spark_writer.take(spark, incarnation, replace, template)

    def register(self, spark: SparkSession) -> None:
        """Register the table in the session catalog (once per run; IF NOT EXISTS, so a name
        already registered is left as it is)."""
        if self.state.catalog_name is None or self._registered:
            return
        location = HadoopFs(spark, self.path).qualified(self.path)
        spark.sql(f"CREATE TABLE IF NOT EXISTS {self.state.catalog_name} USING DELTA "
                  f"LOCATION '{sql_string(location)}'")
        self._registered = True
        log.info("%s: registered as %s", self.path, self.state.catalog_name)

    def version(self, spark: SparkSession, tombstones: bool = False) -> int | None:
        """The table's (or its tombstones') current Delta version: through delta-rs where it
        reaches the lake (no Spark job), else the newest entry of its history."""
        if self.delta_rs:
            return self.fast.version(tombstones)
        return self.spark_writer.version(spark, tombstones)

    def tombstones_version(self, spark: SparkSession) -> int | None:
        if not self.state.has_tombstones:
            return None
        return self.version(spark, tombstones=True)

    def newest_position(self, spark: SparkSession) -> int | None:
        """The newest commit LSN the table holds: its rows', its tombstones', its truncate's
        (one column of each table read; the table loaded: its tombstones known)."""
        newest: list[int] = []
        for path in (self.path, self.tomb_path):
            if not HadoopFs(spark, path).exists(f"{path}/_delta_log"):
                continue
            found = _newest_delta_rs(path) if self.delta_rs else _newest_spark(spark, path)
            if found is not None:
                newest.append(found)
        truncate_cut = self.state.truncate_cut if self.exists(spark) else None
        if truncate_cut is not None:
            newest.append(truncate_cut.commit_lsn)
        return max(newest, default=None)

    def expire_tombstones(self, spark: SparkSession, bound: int) -> int:
        if not self.state.has_tombstones:
            return 0
        if self.delta_rs:
            return self.fast.expire_tombstones(bound)
        return self.spark_writer.expire_tombstones(spark, bound)

    def delta_rs_failed(self) -> None:
        """delta-rs failed to write the table (a conflict, ...): its handles are opened
        again next time (`lake/delta_handles.py`)."""
        self.state.handles.forget(self.state.path)
        self.state.handles.forget(self.state.tomb_path)


def _newest_delta_rs(path: str) -> int | None:
    """max(_cdc_commit_lsn) of a Delta table through delta-rs (no Spark job): local disk or
    an object store."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable as RsTable

    dataset = RsTable(path, storage_options=storage.options_for(path)).to_pyarrow_dataset()
    if LSN not in dataset.schema.names:
        return None
    value = pc.max(dataset.to_table(columns=[LSN]).column(LSN)).as_py()
    return None if value is None else int(value)


def _newest_spark(session: SparkSession, path: str) -> int | None:
    df = session.read.format("delta").load(path)
    if LSN not in df.columns:
        return None
    row = df.agg(F.max(LSN)).first()
    return None if row is None or row[0] is None else int(row[0])

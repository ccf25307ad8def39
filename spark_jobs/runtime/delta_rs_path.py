"""A table's part of a batch through delta-rs: the fast path (`sinks/delta/delta_rs_writer.py`
says why and what it declines). The job collects a round's records to the driver
(`job.BatchProcessor._fast_records`); here a table's records are decoded in Python
(`events/rows.py`), folded and merged by the same rules as the Spark path, and what was applied
goes back to the batch as a `TableApplied` (`engine.py`); the batch does the rest once per
table. A part delta-rs declines, or fails to write, goes to the Spark path (`spark_path.py`),
which finishes what delta-rs began without applying anything twice."""

from __future__ import annotations

import logging
import threading
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import DataType

from ..cuts.batch import BatchCut
from ..events.decode import TopicPlan
from ..events.rows import NotForRows, WriterSchema, decode_rows, split_held
from ..lake.phases import CLOCK
from ..rules.changes import IDX, LSN, OP, TS, Position
from ..rules.incarnation import Incarnation, drop_of, of_schema
from ..rules.names import TableId
from ..sinks.delta import DeltaMirror
from ..sinks.delta.delta_rs_writer import Declined, row_types
from ..sinks.table_sink import TableSink
from . import metrics
from .engine import BatchTables, Record, TableApplied, error_class_line, table_failure

log = logging.getLogger(__name__)


def delta_mirror(sink: TableSink) -> DeltaMirror:
    """The table's Delta mirror: only Delta has a fast path (the registry's `FAST_MERGE`)."""
    mirror = sink.mirror
    assert isinstance(mirror, DeltaMirror), f"{sink.path}: no fast path for its format"
    return mirror


class DeltaRsPath:
    """The fast path of one run (thread-safe: a batch's tables run on several threads)."""

    def __init__(self, spark: SparkSession, tables: BatchTables) -> None:
        self.spark = spark
        self.tables = tables
        self._lock = threading.Lock()
        # (schema id, original names) → decoder and the Spark types of its row columns
        self._writers: dict[tuple[int, bool], tuple[WriterSchema, dict[str, DataType]]] = {}
        self._declined: dict[str, str] = {}  # this batch's tables left to Spark, and why

    def declined(self) -> dict[str, str]:
        """The tables delta-rs left to Spark since the last call, and why."""
        with self._lock:
            declined, self._declined = self._declined, {}
        return declined

    def apply(self, table: TableId, plan: TopicPlan, records: list[Record], batch_id: int,
              topic: str, cut: BatchCut | None) -> TableApplied | None:
        """The table's part of the batch through delta-rs (`DeltaRsSink`); None when Spark must
        do it (declined before anything was written, or delta-rs failed: Spark finishes what
        delta-rs began, without applying anything twice)."""
        try:
            return self._apply(table, plan, records, batch_id, topic, cut)
        except (Declined, NotForRows) as exc:
            log.info("batch %d: %s: through Spark (%s)", batch_id, table.path, exc)
            metrics.SPARK_PATH.labels(table.path, metrics.reason_label(str(exc))).inc()
            with self._lock:
                self._declined[table.path] = str(exc)
        except Exception as exc:  # noqa: BLE001 - Spark finishes what delta-rs began
            if not table_failure(exc):
                raise
            # its handles opened again next time (a conflict, ...)
            delta_mirror(self.tables.sink(table)).delta_rs_failed()
            log.warning("batch %d: %s: delta-rs failed, through Spark instead: %s",
                        batch_id, table.path, error_class_line(exc))
            metrics.SPARK_PATH.labels(table.path, "delta-rs failed").inc()
            with self._lock:
                self._declined[table.path] = "delta-rs failed"
        return None

    def _apply(self, table: TableId, plan: TopicPlan, records: list[Record], batch_id: int,
               topic: str, cut: BatchCut | None) -> TableApplied:
        """The table's part of the batch through delta-rs. Raises Declined (or NotForRows)
        before writing anything when Spark must do it."""
        sink = delta_mirror(self.tables.sink(table))
        original = sink.fast.original_names()
        writers: dict[int, WriterSchema] = {}
        types: dict[str, DataType] = {}
        for sid, schema in plan.schemas.items():
            writers[sid], sid_types = self._writer(sid, schema, original)
            for column, type_ in sid_types.items():
                if types.setdefault(column, type_) != type_:
                    raise Declined(f"column {column} has several types in the batch")
        with CLOCK.timing("decode"):
            batch = decode_rows(((r[0], r[1]) for r in records), writers)
        if any(r[4] is None and row[OP] != "t" for r, row in zip(records, batch.rows,
                                                                  strict=True)) and any(
                r[4] is not None for r in records):
            # (events without a key beside keyed ones that are no truncate: `job._split`)
            raise Declined("several key schemas in one batch")
        labels = {label for schema in plan.schemas.values()
                  if (label := of_schema(schema)) is not None}
        current = sink.incarnation
        if any(drop_of(schema) for schema in plan.schemas.values()) and not (
                current is not None and labels == {current.relation_id}):
            # A drop of the incarnation the table holds is a truncate like any; the others
            # (`rules/incarnation.py` drop_applies) are Spark's.
            raise Declined("a table dropped upstream")
        if labels and not (current is not None and labels == {current.relation_id}):
            # A new table takes its only incarnation when created (`adopt`); anything else
            # (a table re-created upstream, an existing table learning its relation id) is
            # Spark's (`spark_path.SparkPath`), which may rewrite the table.
            if len(labels) > 1 or not batch.rows or sink.state.loaded:
                raise Declined("a table (re-)created upstream")
            first = min((r[LSN], r[IDX]) for r in batch.rows)
            self.tables.take(table, sink, Incarnation(labels.pop(), Position(*first)), False,
                             None)
        waiting: list[int] = []
        if cut is not None:  # --consistent-cuts: a filter in front of the merge
            batch, waiting = split_held(batch, cut.bound)
        key = plan.key_columns(original)
        history = self.tables.history
        sink.fast.apply(batch, types, key, batch_id, self.tables.config.maintenance_every)
        if cut is not None:
            cut.hold_keys(topic, [(records[i][2], records[i][3]) for i in waiting])
        return TableApplied(
            "delta-rs", len(batch.rows) - batch.truncates,
            max((r[TS] for r in batch.rows if r[TS] is not None), default=None),
            max((r[LSN] for r in batch.rows), default=None),
            history.of_rows(table, batch.rows, types, key) if history else None)

    def _writer(self, sid: int, schema: dict[str, Any], original: bool
                ) -> tuple[WriterSchema, dict[str, DataType]]:
        with self._lock:
            found = self._writers.get((sid, original))
        if found is None:
            writer = WriterSchema.of(schema, original)
            found = writer, row_types(self.spark, schema, writer.columns)
            with self._lock:
                self._writers[(sid, original)] = found
        return found

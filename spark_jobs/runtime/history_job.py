"""The merge job's history step (`--history`): after a table's mirror is applied for a batch,
its events of the batch go to the table's history (`history/sink.py`), from either path: the
fast path hands its decoded Python rows (`of_rows`), the Spark path its decoded DataFrames
(`of_frames`, collected with `toArrow()`), and the job writes them in one place (`write`).
The history is computed in Python by `history.versions` either way (one implementation of
the rules). Each event goes with the key it was written with (the Spark path's frames are
one per key schema). A table none of whose events has had a key (no replica identity) has
no history (a WARNING, once); one that had a key keeps its history when the key is dropped
(events without a key are rows of their own, as in the mirror)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DataType

from ..history.sink import HistorySink
from ..history.versions import EVENT_KEY, Tracking, key_label
from ..lake.files import HadoopFs
from ..rules.changes import q, row_columns
from ..rules.names import TableId
from ..rules.plan import sql_string
from .config import MergeConfig

log = logging.getLogger(__name__)
CATALOG_SUFFIX = "__history"


def catalog_name(database: str, table: TableId) -> str:
    """`<database>.<schema>__<table>__history`: no table's own catalog name ends so
    (`names.catalog_table_name` never puts `__` inside a part)."""
    return f"{q(database)}.{q(table.catalog_name + CATALOG_SUFFIX)}"


@dataclass(frozen=True)
class HistoryEvents:
    """A table's events of a batch as its history takes them, from either engine: Python rows
    (delta-rs) or an Arrow table (Spark), with the Spark type of each row column."""

    events: pa.Table | Sequence[Mapping[str, Any]]
    types: Mapping[str, DataType]
    key: Sequence[str] | None  # the newest key the table's events were written with
    keyed: bool  # some event of the batch has a key


class HistoryWriter:
    """The history tables of one run (thread-safe: tables of a batch run concurrently)."""

    def __init__(self, config: MergeConfig, app_id: str) -> None:
        self.config = config
        self.app_id = app_id
        self.tracking = Tracking.of(config.history_columns, config.history_except_columns)
        self._sinks: dict[str, HistorySink] = {}
        self._lock = threading.Lock()
        self._registered: set[str] = set()
        self._keyless: set[str] = set()

    def wants(self, table: TableId) -> bool:
        return self.config.keeps_history(table)

    def of_rows(self, table: TableId, rows: Sequence[Mapping[str, Any]],
                types: Mapping[str, DataType], key: Sequence[str] | None
                ) -> HistoryEvents | None:
        """The fast path's decoded rows of the table (`rows.decode_rows`); None: the table
        keeps no history."""
        if not self.wants(table):
            return None
        return HistoryEvents(rows, types, key, bool(key))

    def of_frames(self, table: TableId,
                  changes: Sequence[tuple[DataFrame, Sequence[str] | None]],
                  key: Sequence[str] | None) -> HistoryEvents | None:
        """The Spark path's decoded changes of the table: one DataFrame per key group, each
        with the key columns its events were written with (None: no key); `key`: the
        newest. Collected here (`toArrow()`), while the engine still has them cached; None:
        the table keeps no history (or had no changes)."""
        if not self.wants(table) or not changes:
            return None
        types: dict[str, DataType] = {}
        for part, _ in changes:
            for c in row_columns(part):
                types[c] = part.schema[c].dataType
        parts = []
        for part, part_key in changes:
            arrow = part.toArrow()
            parts.append(arrow.append_column(EVENT_KEY, pa.array(
                [key_label(part_key)] * arrow.num_rows, pa.string())))
        events = pa.concat_tables(parts, promote_options="permissive")
        keyed = any(part_key for _, part_key in changes)
        return HistoryEvents(events, types, key, keyed)

    def replaced(self, table: TableId) -> None:
        """The upstream table was dropped and created again (`rules/incarnation.py`): its history
        starts again with the new table, as its mirror does (time travel keeps the old)."""
        if self.wants(table):
            sink = self._sink(table)
            sink.set_aside()
            log.warning("%s: the table was created again upstream: its history starts again "
                        "(the old one is kept at %s.replaced-<ms>)", table.path, sink.path)

    def _sink(self, table: TableId) -> HistorySink:
        with self._lock:
            sink = self._sinks.get(table.path)
            if sink is None:
                sink = self._sinks[table.path] = HistorySink(
                    self.config.target, table.path, self.app_id, self.tracking,
                    self.config.maintenance_every)
            return sink

    def write(self, spark: SparkSession, table: TableId, events: HistoryEvents,
              batch_id: int) -> None:
        """Bring the table's history up to date with its events of the batch."""
        sink = self._sink(table)
        if not events.keyed and not sink.exists():
            with self._lock:
                if table.path not in self._keyless:
                    self._keyless.add(table.path)
                    log.warning("%s: no key (replica identity): no history table",
                                table.path)
            return
        started = time.monotonic()
        written, recomputed, extended = sink.apply(events.events, events.types,
                                                   events.key or (), batch_id)
        log.info("batch %d: %s: history, %d version row(s) written in %.2f s (%s recomputed, "
                 "%d extended)", batch_id, table.path, written, time.monotonic() - started,
                 "the whole table" if recomputed is None else f"{recomputed} key(s)", extended)
        self._register(spark, table, sink)

    def _register(self, spark: SparkSession, table: TableId, sink: HistorySink) -> None:
        database = self.config.database
        if database is None or table.path in self._registered:
            return
        fs = HadoopFs(spark, sink.path)
        if not fs.exists(f"{sink.path}/_delta_log"):
            return
        name = catalog_name(database, table)
        spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING DELTA "
                  f"LOCATION '{sql_string(fs.qualified(sink.path))}'")
        with self._lock:
            self._registered.add(table.path)
        log.info("%s: history registered as %s", table.path, name)

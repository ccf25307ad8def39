"""What a table's part of a batch comes back with from either engine path (`TableApplied`),
and what an engine path asks of the batch (`BatchTables`): the delta-rs path
(`delta_rs_path.py`) and the Spark path (`spark_path.py`) write the table and nothing else;
the batch (`job.py`, `BatchProcessor._finish`) gives what they applied to the batch's features
once per table, and a new upstream incarnation is taken in one place (`BatchTables.take`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from py4j.protocol import Py4JNetworkError  # type: ignore[import-untyped]
from pyspark.sql import DataFrame, SparkSession

from connector.errors import first_line

from ..events.decode import TopicPlan
from ..rules.incarnation import Incarnation
from ..rules.names import TableId
from ..sinks.mirror import Mirror
from ..sinks.table_sink import TableSink
from .config import MergeConfig
from .history_job import HistoryEvents, HistoryWriter


@dataclass
class TableApplied:
    """What one engine applied of a table's part of a batch: what the batch's features
    (freshness, catalog registration, history, the cut, counts and metrics) take from it, in
    one place (`BatchProcessor._finish`). An engine path writes the table and nothing else;
    a new upstream incarnation is taken in one place too (`BatchProcessor._take`)."""

    engine: str  # "delta-rs", "spark" (a mirror through Spark), or a change log's format
    events: int  # row changes applied
    newest_ts: int | None  # newest commit time (source.ts_ms) among them
    newest_lsn: int | None  # newest commit LSN among them (truncates too): the freshness
    history: HistoryEvents | None = None  # its events as the history takes them
    dead: list[DataFrame] = field(default_factory=list)  # its corrupt events
    decoded_at: float | None = None  # monotonic time the Spark path had decoded them


class BatchTables(Protocol):
    """What an engine path asks of the batch (`job.BatchProcessor`)."""

    config: MergeConfig
    history: HistoryWriter | None  # --history

    def sink(self, table: TableId) -> TableSink:
        """The table's sink (opened once per run)."""
        ...

    def session(self) -> SparkSession:
        """This worker thread's Spark session."""
        ...

    def take(self, table: TableId, mirror: Mirror, incarnation: Incarnation, replace: bool,
             template: DataFrame | None) -> None:
        """The table takes a new upstream incarnation (`BatchProcessor.take`)."""
        ...


# A record the fast path decodes: (schema id, Avro body, partition, offset, key schema id).
Record = tuple[int, bytes, int, int, int | None]


def key_groups(plan: TopicPlan) -> list[int | None]:
    """The key schema ids of a topic's events in a batch, one group each when there are
    several (None: events without a key); one group for all when every event has the same
    key schema. Events with a key schema the registry does not know go with the newest."""
    known = [sid for sid, record in plan.keys.items() if sid is None or record is not None]
    return sorted(known, key=lambda sid: -1 if sid is None else sid) if len(known) > 1 \
        else [None]


# A stopping query or Spark (its jobs cancelled, its gateway gone) is no fault of a table: the
# batch must fail, and re-run from the checkpoint, rather than dead-letter good events.
_STOPPING = ("SPARK_JOB_CANCELLED", "was cancelled", "InterruptedException",
             "SparkContext was shut down", "SparkContext has been shutdown")


def table_failure(exc: Exception) -> bool:
    """Whether a table's error is its own (dead-letter it) rather than the job stopping."""
    if isinstance(exc, Py4JNetworkError):
        return False
    text = str(exc)
    return not any(marker in text for marker in _STOPPING)


def error_class_line(exc: Exception) -> str:
    """The error's own message, not its trace: the line naming Spark's error class
    (``[DELTA_...]``) when there is one, else the first line."""
    lines = (line.strip() for line in str(exc).strip().splitlines())
    text = next((line for line in lines if "[" in line and "]" in line), first_line(exc))
    return text[:300]

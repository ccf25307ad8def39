"""`--consistent-cuts` batch by batch (`rules/cut_policy.py` has the rules): one batch's side
(`BatchCut`: the bound its tables apply, the changes they hold back, what they report back),
and the run's (`BatchCuts`: the state each batch starts from, the held-back records stored,
the cut recorded). The job (`runtime/job.py`) calls them in the batch's flow."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from connector.pgoutput.lsn import lsn_to_str

from ..lake.phases import CLOCK
from ..rules.changes import IDX, LSN, OP
from ..rules.cut_policy import (
    TRUNCATE_INDEX,
    CutState,
    after,
    cut_lsn,
    initial,
    records_cut,
)
from ..rules.names import OFFSET, PARTITION
from .manifest import Cut, append_cut, read_cuts
from .pending import RAW_COLUMNS, PendingStore

log = logging.getLogger(__name__)


@dataclass
class BatchCut:
    """One batch's side of `--consistent-cuts` (`cut_policy`): the bound it applies, and what
    its tables report back: the keys (topic, partition, offset) of the records they held
    back, their Delta versions and the newest commit time they applied."""

    bound: int | None
    heartbeat: int | None = None  # highest heartbeat LSN of this batch (for the next one)
    restart: int | None = None  # highest heartbeat restart_lsn of this batch
    held_frames: list[DataFrame] = field(default_factory=list)  # persisted keys (Spark path)
    held_keys: list[tuple[str, int, int]] = field(default_factory=list)  # (fast path)
    held: int = 0
    newest_ts: int | None = None
    versions: dict[str, int] = field(default_factory=dict)
    tombstones: dict[str, int] = field(default_factory=dict)  # Delta versions of tombstones
    pending: str | None = None  # where the held-back records were stored
    lock: threading.Lock = field(default_factory=threading.Lock)

    # The changes held back are split off before the merge, by each engine in the form it
    # holds them in (`hold`: a filter of the Spark path's DataFrame; `hold_keys`: the keys of
    # the Python rows `rows.split_held` set aside): the two cannot share that step. What was
    # applied is reported once per table, whichever engine applied it (`applied`, from
    # `runtime/job.py`, `BatchProcessor._finish`).
    def hold(self, decoded: DataFrame, topic: str) -> DataFrame:
        """The changes of `decoded` (one topic's `decode_topic`, cached) this batch applies;
        the keys of the others are kept (cached) for the pending store. Same rule as
        `cut_policy.held`; undecodable rows pass on (to the dead letters)."""
        lsn, op = F.col(LSN), F.col(OP)
        snapshot = (op == "r") | ((op == "t") & (F.col(IDX) == TRUNCATE_INDEX))
        waits = (lsn.isNotNull() if self.bound is None else
                 (lsn > F.lit(self.bound)) | ((lsn == F.lit(self.bound)) & ~snapshot))
        keys = decoded.where(waits).select(
            F.lit(topic).alias("topic"), F.col(PARTITION).alias("partition"),
            F.col(OFFSET).alias("offset")).persist()
        count = keys.count()
        with self.lock:
            self.held += count
            (self.held_frames.append(keys) if count else keys.unpersist())
        return decoded.where(~waits | lsn.isNull())

    def hold_keys(self, topic: str, keys: list[tuple[int, int]]) -> None:
        with self.lock:
            self.held_keys.extend((topic, p, o) for p, o in keys)
            self.held += len(keys)

    def applied(self, path: str, version_: int | None, newest_ts: int | None,
                tombstones: int | None) -> None:
        with self.lock:
            if version_ is not None:
                self.versions[path] = version_
            if tombstones is not None:
                self.tombstones[path] = tombstones
            if newest_ts is not None:
                self.newest_ts = max(newest_ts, self.newest_ts or newest_ts)


class TableVersions(Protocol):
    """What a new application's first state reads of each table already in the lake (a
    mirror's, `sinks/mirror.py`)."""

    def version(self, spark: SparkSession) -> int | None: ...

    def newest_position(self, spark: SparkSession) -> int | None: ...

    def tombstones_version(self, spark: SparkSession) -> int | None: ...


class BatchCuts:
    """`--consistent-cuts` across a run's batches: the state each batch starts from (the
    previous batch's, kept in the pending store, `pending.py`), the records a batch holds
    back stored for the next one, and its state and cut written once every table is."""

    def __init__(self, spark: SparkSession, target: str, app_id: str) -> None:
        self.spark = spark
        self.target = target
        self.app_id = app_id
        self.store = PendingStore(spark, target, app_id)

    def done(self, batch_id: int) -> bool:
        """Whether the batch was applied with its cut already (a re-run)."""
        return self.store.done(batch_id)

    def previous(self, batch_id: int,
                 tables: Callable[[], Iterable[tuple[str, TableVersions]]]) -> CutState:
        """The state the batch starts from: the previous batch's, or a new application's
        (`fresh_state`, over the lake's `tables`: `<schema>/<table>` and its mirror)."""
        return self.store.latest(batch_id) or self.fresh_state(tables())

    def source(self, batch: DataFrame, previous: CutState) -> DataFrame:
        """The batch's Kafka records, the ones the previous batch held back in front."""
        source = batch.select(*RAW_COLUMNS)
        if previous.pending:
            source = source.unionByName(self.store.read_rows(previous.pending))
        return source

    def fresh_state(self, tables: Iterable[tuple[str, TableVersions]]) -> CutState:
        """A new application's start (a new checkpoint, or --consistent-cuts turned on): the
        tables already in the lake are in every cut from the first one on, and no cut is
        recorded below what they already hold: the manifest's last cut, or the newest position
        any table holds (a row, a tombstone, a truncate), which a target filled without
        --consistent-cuts (or by a --replay) may have reached."""
        cuts = read_cuts(self.target)
        floor = max((c.lsn for c in cuts), default=None)
        versions: dict[str, int] = {}
        tombstones: dict[str, int] = {}
        for rel, table in tables:
            found_version = table.version(self.spark)
            if found_version is None:
                continue
            versions[rel] = found_version
            held_up_to = table.newest_position(self.spark)  # loads it: its tombstones known
            tomb_version = table.tombstones_version(self.spark)
            if tomb_version is not None:
                tombstones[rel] = tomb_version
            if held_up_to is not None:  # a cut at held_up_to or later
                floor = max(floor if floor is not None else -1, held_up_to - 1)
        log.info("--consistent-cuts: %d table(s) in the lake; cuts start above %s",
                 len(versions), lsn_text(floor))
        return initial(floor, versions, time.time_ns() // 1_000_000, tombstones)

    @CLOCK.timed("commit")
    def hold(self, frames: DataFrame, cut: BatchCut, batch_id: int) -> None:
        """Store the Kafka records of the changes this batch held back (`BatchCut.hold`)."""
        parts = list(cut.held_frames)
        if cut.held_keys:
            parts.append(self.spark.createDataFrame(
                cut.held_keys, "topic string, partition int, offset long"))
        if not parts:
            return
        keys = parts[0]
        for part in parts[1:]:
            keys = keys.unionByName(part)
        cut.pending = self.store.write_rows(
            frames.join(keys, ["topic", "partition", "offset"], "left_semi"), batch_id)

    def record(self, previous: CutState, cut: BatchCut, batch_id: int, now: int
               ) -> tuple[CutState, Cut | None]:
        """The batch's state stored, and its cut recorded (returned) when every table is
        written, in that order after the cut (a re-run batch finds its state: done)."""
        recorded = records_cut(previous, cut.bound)
        state = after(previous, batch_id, cut.bound, cut.heartbeat, cut.newest_ts, cut.pending,
                      cut.versions, recorded, now, cut.restart, cut.tombstones)
        new: Cut | None = None
        if recorded:
            assert cut.bound is not None
            new = Cut(cut_lsn(cut.bound), batch_id, state.versions, state.source_ts_ms,
                      tombstones=state.tombstones)
            append_cut(self.target, new, self.app_id)
        self.store.write_state(state)
        self.store.prune(batch_id)
        return state, new


def lsn_text(value: int | None) -> str:
    return "none" if value is None else lsn_to_str(value)

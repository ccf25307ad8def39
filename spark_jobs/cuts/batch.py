"""One batch's side of `--consistent-cuts` (`rules/cut_policy.py`): the bound its tables
apply, the changes they hold back, and what they report back for the batch's cut."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..rules.changes import IDX, LSN, OP
from ..rules.cut_policy import TRUNCATE_INDEX
from ..rules.names import OFFSET, PARTITION


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

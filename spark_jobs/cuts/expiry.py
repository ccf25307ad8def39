"""Tombstone expiry across a run's batches (`rules/expiry.py` has the rule and its argument):
every --maintenance-every batches, the tombstones of the tables the run has met that are below
the bound the heartbeats of two batches earlier vouch for, deleted by each table's mirror with
the engine it chooses (`sinks/mirror.py`). The job (`runtime/job.py`) gives the bound: the
previous batch's persisted `CutState.expiry`, under --consistent-cuts or not."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from pyspark.sql import SparkSession

from ..lake.phases import CLOCK
from .batch import lsn_text

log = logging.getLogger(__name__)


class Expiring(Protocol):
    """A table whose tombstones expire (a mirror's, `sinks/mirror.py`)."""

    @property
    def path(self) -> str: ...

    def expire_tombstones(self, spark: SparkSession, bound: int) -> int: ...


class TombstoneExpiry:
    """When expiry runs, and running it (`every`: --maintenance-every, 0: never)."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.waits = False  # a due expiry waits for a batch that read all there was

    @CLOCK.timed("maintenance")
    def run(self, spark: SparkSession, bound: int | None, batch_id: int,
            tables: Callable[[], Iterable[Expiring]],
            read_all: Callable[[], bool] = lambda: True) -> None:
        """Expire the tombstones of `tables` below `bound` when due (a re-run batch deletes
        with the same bound: a no-op). With --consistent-cuts it runs after the batch's
        tombstone versions were taken for its cut (`pgcdc verify` reads them). `read_all`:
        whether the previous batch read all there was (`rules/expiry.read_to_listed`); if
        not, the expiry waits for the next batch after one that did."""
        if bound is None or not self.every or (batch_id % self.every and not self.waits):
            return
        self.waits = not read_all()
        if self.waits:
            log.info("batch %d: tombstone expiry waits for a batch after one that read all "
                     "there was (--max-offsets-per-trigger)", batch_id)
            return
        for table in tables():
            removed = table.expire_tombstones(spark, bound)
            if removed:
                log.info("batch %d: %s: %d tombstone(s) below %s expired", batch_id,
                         table.path, removed, lsn_text(bound))

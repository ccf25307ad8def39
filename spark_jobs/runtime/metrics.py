"""Prometheus metrics of the merge job (served by the driver on --metrics-port when set).

`table` labels hold the lake table as ``<schema>/<table>``. Freshness without depending on
when triggers fire: each batch reads the producer's heartbeats (`<prefix>.heartbeat`, every
`--topic-prefix` job subscribes to it), and a table is *current up to* the newest heartbeat of
the last batch that applied its part (or in which its topic had nothing: nothing was waiting).
`pgcdc_merge_table_lag_seconds` is the newest heartbeat's time minus the table's: 0 for every
table the job keeps up with, growing for a table the job cannot apply (failing, its changes
dead-lettered) while the others advance. `pgcdc_merge_heartbeat_age_seconds` (now minus the
newest heartbeat's time, computed at each scrape) is how far the whole job is behind the
producer. Times are the Kafka timestamps the producer gave the records.

`observe_batch` is pure bookkeeping over `BatchMetrics`, tested alone; the job calls it once
per batch with what the batch did.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client import Counter, Gauge, Histogram, start_http_server

BATCHES = Counter("pgcdc_merge_batches_total", "Micro-batches the merge job committed")
BATCH_SECONDS = Histogram("pgcdc_merge_batch_seconds", "Time to apply one micro-batch",
                          buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600))
EVENTS = Counter("pgcdc_merge_events_total", "Change events applied to the lake", ["table"])
TABLE_BATCHES = Counter("pgcdc_merge_table_batches_total",
                        "A table's part of a batch, by the engine that merged it "
                        "(delta-rs, spark, parquet)", ["table", "path"])
SPARK_PATH = Counter("pgcdc_merge_spark_path_total",
                     "A table's part of a batch that delta-rs left to Spark, and why",
                     ["table", "reason"])
TABLE_FAILURES = Counter("pgcdc_merge_table_failures_total",
                         "A table's part of a batch that could not be written (its events went "
                         "to the dead letters)", ["table"])
DEAD_LETTERS = Counter("pgcdc_merge_dead_letters_total",
                       "Events written to the dead letters (undecodable or not written)")
HEARTBEAT = Gauge("pgcdc_merge_heartbeat_timestamp_seconds",
                  "Kafka time of the newest producer heartbeat the job has read")
HEARTBEAT_AGE = Gauge("pgcdc_merge_heartbeat_age_seconds",
                      "Now minus the newest heartbeat's time: how far the job is behind the "
                      "producer")
TABLE_CURRENT = Gauge("pgcdc_merge_table_current_timestamp_seconds",
                      "The heartbeat time a table is applied up to", ["table"])
TABLE_LAG = Gauge("pgcdc_merge_table_lag_seconds",
                  "Newest heartbeat time minus the time a table is applied up to", ["table"])

_IDENTIFIER = re.compile(r"\b(column|columns?)\s+\S+")


def reason_label(message: str) -> str:
    """A bounded label of why delta-rs declined (column names taken out)."""
    return _IDENTIFIER.sub(r"\1", message.strip())[:60]


@dataclass
class BatchMetrics:
    """What the job knows between batches: each table's current-up-to time (ms)."""

    heartbeat_ms: int | None = None
    current_ms: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def observe_batch(self, heartbeat_ms: int | None, tables: Iterable[str],
                      failed: Iterable[str]) -> dict[str, float]:
        """After a batch that read up to a heartbeat of `heartbeat_ms` (None: none in it):
        every table known (`tables`: this batch's and earlier ones) but those that `failed`
        is current up to it. Returns each table's lag (s)."""
        with self.lock:
            if heartbeat_ms is not None and (self.heartbeat_ms is None
                                             or heartbeat_ms > self.heartbeat_ms):
                self.heartbeat_ms = heartbeat_ms
            bad = set(failed)
            for table in tables:
                if table not in bad and self.heartbeat_ms is not None:
                    self.current_ms[table] = self.heartbeat_ms
                elif table not in self.current_ms and self.heartbeat_ms is not None:
                    self.current_ms[table] = 0  # never applied: behind since the start
            if self.heartbeat_ms is None:
                return {}
            return {t: max(0.0, (self.heartbeat_ms - c) / 1000) if c else float("inf")
                    for t, c in self.current_ms.items()}


def publish(state: BatchMetrics, lags: Mapping[str, float]) -> None:
    """Set the gauges from `state` and `lags` (`observe_batch`'s result)."""
    if state.heartbeat_ms is not None:
        HEARTBEAT.set(state.heartbeat_ms / 1000)
    for table, current in state.current_ms.items():
        TABLE_CURRENT.labels(table).set(current / 1000)
    for table, lag in lags.items():
        TABLE_LAG.labels(table).set(lag)


def serve(state: BatchMetrics, port: int, host: str = "0.0.0.0") -> None:
    """Serve /metrics on `host`:`port` (nothing when `port` is 0)."""
    HEARTBEAT_AGE.set_function(
        lambda: 0.0 if state.heartbeat_ms is None else max(0.0, time.time()
                                                           - state.heartbeat_ms / 1000))
    if port > 0:
        start_http_server(port, addr=host)

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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import (
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    start_http_server,
)

BATCHES = Counter("pgcdc_merge_batches_total", "Micro-batches the merge job committed")
BATCH_SECONDS = Histogram("pgcdc_merge_batch_seconds", "Time to apply one micro-batch",
                          buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600))
EVENTS = Counter("pgcdc_merge_events_total", "Change events applied to the lake", ["table"])
TABLE_BATCHES = Counter("pgcdc_merge_table_batches_total",
                        "A table's part of a batch, by the engine that merged it "
                        "(delta-rs, spark, parquet)", ["table", "path"])
SPARK_PATH = Counter("pgcdc_merge_spark_path_total",
                     "A table's part of a batch that Spark merged into a Delta table, and why "
                     "not delta-rs", ["table", "reason"])
TABLE_FAILURES = Counter("pgcdc_merge_table_failures_total",
                         "A table's part of a batch that could not be written (its events went "
                         "to the dead letters)", ["table"])
DEAD_LETTERS = Counter("pgcdc_merge_dead_letters_total",
                       "Events written to the dead letters (undecodable or not written), by "
                       "the topic they came from", ["topic"])
CUT_LSN = Gauge("pgcdc_merge_cut_lsn", "Position of the newest transaction-consistent cut "
                "(--consistent-cuts)")
CUT_SOURCE_TIME = Gauge("pgcdc_merge_cut_source_timestamp_seconds",
                        "Commit time of the newest source transaction the newest cut holds; "
                        "now minus it is the age of what a consistent reader sees")
HEARTBEAT = Gauge("pgcdc_merge_heartbeat_timestamp_seconds",
                  "Kafka time of the newest producer heartbeat the job has read")
HEARTBEAT_AGE = Gauge("pgcdc_merge_heartbeat_age_seconds",
                      "Now minus the newest heartbeat's time: how far the job is behind the "
                      "producer")
TABLE_CURRENT = Gauge("pgcdc_merge_table_current_timestamp_seconds",
                      "The heartbeat time a table is applied up to", ["table"])
PHASE_SECONDS = Histogram("pgcdc_merge_batch_phase_seconds",
                          "Seconds a micro-batch spent in each phase (read, decode, open, "
                          "merge, tombstones, commit, maintenance), summed over the tables "
                          "merged at once",
                          ["phase"], buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300))
READ_BYTES = Counter("pgcdc_merge_read_bytes_total",
                     "Bytes of Kafka records (key and value) the job read, by topic", ["topic"])
TABLES_AT_ONCE = Histogram("pgcdc_merge_batch_tables_at_once",
                           "The most tables a micro-batch wrote at once (threads waiting on "
                           "their store's requests, or computing)",
                           buckets=(1, 2, 4, 8, 16, 32, 64, 128))
KAFKA_BEHIND = Gauge("pgcdc_merge_kafka_offsets_behind",
                     "Records the streaming query is behind Kafka's latest offsets, as Spark "
                     "reports in the last progress of its Kafka source (min, avg, max over "
                     "the topic partitions)", ["stat"])
TABLE_APPLIED_LSN = Gauge("pgcdc_merge_table_applied_lsn",
                          "Commit LSN of the newest change applied to a table", ["table"])
TABLE_APPLIED_SOURCE_TIME = Gauge("pgcdc_merge_table_applied_source_timestamp_seconds",
                                  "Source commit time of the newest change applied to a table",
                                  ["table"])
TABLE_LAG = Gauge("pgcdc_merge_table_lag_seconds",
                  "Newest heartbeat time minus the time a table is applied up to", ["table"])

_IDENTIFIER = re.compile(r"\b(column|columns?)\s+\S+")


def reason_label(message: str) -> str:
    """A bounded label of why delta-rs declined (column names taken out)."""
    return _IDENTIFIER.sub(r"\1", message.strip())[:60]


def count_spark_parts(reasons: Mapping[str, str]) -> None:
    """`SPARK_PATH` once for each table part (table path → reason) the batch's split sends to
    Spark (runtime/rounds.py `spark_reasons`); a part the fast path declines is counted where
    it declines (runtime/job.py), so each part Spark writes is counted once."""
    for table, reason in reasons.items():
        SPARK_PATH.labels(table, reason_label(reason)).inc()


@dataclass
class BatchMetrics:
    """What the job knows between batches: each table's current-up-to time (ms)."""

    heartbeat_ms: int | None = None
    current_ms: dict[str, int] = field(default_factory=dict)
    applied_lsn: dict[str, int] = field(default_factory=dict)
    applied_ts_ms: dict[str, int] = field(default_factory=dict)
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

    def applied(self, table: str, lsn: int | None, source_ts_ms: int | None) -> None:
        """A table's part of a batch was applied up to change `lsn` committed at `source_ts_ms`
        (None: no change with one): the newest of each stays (a late duplicate is older)."""
        with self.lock:
            if lsn is not None and lsn > self.applied_lsn.get(table, -1):
                self.applied_lsn[table] = lsn
            if source_ts_ms is not None and source_ts_ms > self.applied_ts_ms.get(table, -1):
                self.applied_ts_ms[table] = source_ts_ms


def publish(state: BatchMetrics, lags: Mapping[str, float]) -> None:
    """Set the gauges from `state` and `lags` (`observe_batch`'s result)."""
    if state.heartbeat_ms is not None:
        HEARTBEAT.set(state.heartbeat_ms / 1000)
    for table, current in state.current_ms.items():
        TABLE_CURRENT.labels(table).set(current / 1000)
    for table, lag in lags.items():
        TABLE_LAG.labels(table).set(lag)
    with state.lock:
        applied = list(state.applied_lsn.items()), list(state.applied_ts_ms.items())
    for table, lsn in applied[0]:
        TABLE_APPLIED_LSN.labels(table).set(lsn)
    for table, ts_ms in applied[1]:
        TABLE_APPLIED_SOURCE_TIME.labels(table).set(ts_ms / 1000)


def observe_phases(seconds: Mapping[str, float]) -> None:
    """One batch's seconds per phase (`lake/phases.PhaseClock.take`)."""
    for phase, spent in seconds.items():
        PHASE_SECONDS.labels(phase).observe(spent)


def offsets_behind(progress: Mapping[str, Any] | None) -> dict[str, float]:
    """min/avg/max records behind latest from a StreamingQueryProgress (its Kafka sources'
    `metrics`, Spark 3.2+); {} when Spark reported none yet."""
    found: dict[str, list[float]] = {}
    for source in (progress or {}).get("sources") or []:
        reported = source.get("metrics") or {}
        for stat in ("min", "avg", "max"):
            value = reported.get(f"{stat}OffsetsBehindLatest")
            if value is not None:
                found.setdefault(stat, []).append(float(value))
    pick: dict[str, Callable[[list[float]], float]] = {
        "min": min, "max": max, "avg": lambda v: sum(v) / len(v)}
    return {stat: pick[stat](values) for stat, values in found.items()}


def watch_query(query: Any) -> None:
    """Serve the query's Kafka lag as Spark reports it, read at each scrape (the newest report
    that had one: an idle trigger's progress may carry no source metrics)."""
    known: dict[str, float] = {}

    def stat(name: str) -> Callable[[], float]:
        def read() -> float:
            known.update(offsets_behind(query.lastProgress))
            return known.get(name, float("nan"))
        return read
    for name in ("min", "avg", "max"):
        KAFKA_BEHIND.labels(name).set_function(stat(name))


def serve(state: BatchMetrics, port: int, host: str = "0.0.0.0") -> None:
    """Serve /metrics on `host`:`port` (nothing when `port` is 0)."""
    HEARTBEAT_AGE.set_function(
        lambda: 0.0 if state.heartbeat_ms is None else max(0.0, time.time()
                                                           - state.heartbeat_ms / 1000))
    if port > 0:
        # No `_created` sample per counter: it doubles what a scrape of many tables renders
        # (benchmarks/merge_metrics.py) and dashboards do not use it.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        start_http_server(port, addr=host)


WARN_AFTER = 3  # batches in a row before a warning


@dataclass
class Watch:
    """What deserves a line in the log before a user notices (pure; one per job): a table
    failing (not advancing while its topic has records), a table delta-rs keeps leaving to
    Spark (slow), batches longer than the trigger (the job falls behind). Each warns once when
    it reaches `after` batches in a row, and again only after it stopped."""

    trigger_s: float | None  # None: available-now (no trigger to keep up with)
    after: int = WARN_AFTER
    slow: int = 0
    failing: dict[str, int] = field(default_factory=dict)
    declined: dict[str, int] = field(default_factory=dict)
    dead: set[tuple[str, str]] = field(default_factory=set)

    def batch(self, took_s: float, failed: Iterable[str], to_spark: Mapping[str, str],
              tables: Iterable[str]) -> list[str]:
        """The warnings after a batch of `took_s` seconds in which `failed` tables could not
        be written and `to_spark` (table → reason) went through Spark; `tables`: the batch's."""
        out = []
        if self.trigger_s is not None and took_s > self.trigger_s:
            self.slow += 1
            if self.slow == self.after:
                out.append(f"{self.after} batches in a row took longer than the trigger "
                           f"({took_s:.1f} s > {self.trigger_s:g} s): the job falls behind; "
                           "give it more cores or a longer --trigger")
        else:
            self.slow = 0
        bad = set(failed)
        for table in sorted(set(tables) | bad):
            self.failing[table] = self.failing.get(table, 0) + 1 if table in bad else 0
            if self.failing[table] == self.after:
                out.append(f"{table} has not advanced for {self.after} batches while its "
                           "topic has records (its events go to the dead letters): see the "
                           "errors above")
            self.declined[table] = (self.declined.get(table, 0) + 1 if table in to_spark
                                    else 0)
            if self.declined[table] == self.after:
                out.append(f"{table} went through Spark for {self.after} batches in a row "
                           f"({to_spark[table]}), each ~seconds instead of a fraction of one")
        return out


    def dead_letters(self, counts: Mapping[tuple[str, str], int], where: str) -> list[str]:
        """A warning for each (topic, reason) of this batch's dead letters not seen before in
        this run: once per table and schema (a reason names the schema id where the schema is
        the problem), not every batch; the counts are in pgcdc_merge_dead_letters_total."""
        out = []
        for topic, reason in sorted(counts):
            if (topic, reason) not in self.dead:
                self.dead.add((topic, reason))
                out.append(f"{counts[(topic, reason)]} event(s) of {topic} went to the dead "
                           f"letters at {where}: {reason} (said once per topic and reason; "
                           "pgcdc_merge_dead_letters_total counts every one)")
        return out


def trigger_seconds(interval: str) -> float:
    """Spark's processingTime text ("10 seconds", "500 milliseconds", "1 minutes") → s."""
    number, unit = interval.split()
    scale = {"milliseconds": 0.001, "seconds": 1.0, "minutes": 60.0, "hours": 3600.0}
    return float(number) * scale.get(unit, 1.0)

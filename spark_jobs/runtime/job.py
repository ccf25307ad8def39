"""One micro-batch, start to end: `BatchProcessor`, the streaming query's foreachBatch function
(`query.py` starts the query).

1. The batch's Kafka records are cached, summarized per topic and schema id, and planned
   (`events/decode.plan_batch`); heartbeats read (`cuts/pending.heartbeat_positions`).
   Under --consistent-cuts the records the previous batch held back go in front
   (`cuts/batch.BatchCuts`).
2. Each topic goes to one engine path (`rounds.split_batch`): the fast path
   (`delta_rs_path.DeltaRsPath`: a round's records collected to the driver, decoded in Python,
   merged through delta-rs) or the Spark path (`spark_path.SparkPath`); a table the fast path
   declines goes to Spark. Tables are written concurrently (`_table`).
3. Each path writes the table and returns a `TableApplied` (`engine.py`). Then, once per
   table whichever engine wrote it (`_finish`): its freshness, its catalog registration, its
   history, its versions for the cut, counts and metrics; a new upstream incarnation is taken
   in one place too (`take`).
4. Dead letters are written (`sinks/dead_letter.py`), held-back records stored, tombstones
   expired when due (`cuts/expiry.py`), the cut or the heartbeat state recorded.

Tables are reached through the format registry (`sinks/__init__.py`): `TableSink` for any
format, `Mirror` for the features a mirror has (`sinks/mirror.py`): job.py imports no format."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from ..cuts.batch import BatchCut, BatchCuts, lsn_text
from ..cuts.expiry import TombstoneExpiry
from ..cuts.pending import HEARTBEATS, PendingStore, heartbeat_positions
from ..events.decode import (
    DEAD_COLUMNS,
    TopicPlan,
    plan_batch,
    undecodable,
)
from ..events.registry import SchemaCache
from ..events.summary import summarize
from ..events.wire import BODY, KEY_SCHEMA_ID, PROBLEM, SCHEMA_ID, with_frame
from ..lake.lease import Lease
from ..lake.phases import CLOCK, InFlight
from ..rules.changes import q
from ..rules.cut_policy import (
    CutState,
    after,
    bound,
    initial,
    stale_warning,
)
from ..rules.expiry import read_to_listed
from ..rules.incarnation import Incarnation
from ..rules.names import TableId, table_of
from ..sinks import FAST_MERGE
from ..sinks.dead_letter import write_dead_letters
from ..sinks.mirror import Mirror
from ..sinks.table_sink import TableSettings, TableSink
from . import metrics
from .config import MergeConfig
from .delta_rs_path import DeltaRsPath
from .engine import Record, TableApplied, error_class_line, key_groups, table_failure
from .history_job import HistoryWriter
from .rounds import BatchSplit, run_rounds, spark_reasons, split_batch
from .spark_path import SparkPath

log = logging.getLogger(__name__)


# Per worker session. (materializeSource=none would spare Delta's copy of the cached MERGE
# source, but Delta then fails a MERGE when another thread caches a DataFrame meanwhile.)
WORKER_CONF: dict[str, str] = {}


@dataclass
class BatchReport:
    batch_id: int
    events: int
    dead_letters: int
    oldest_kafka_ms: int | None  # oldest and newest Kafka record timestamps in the batch
    newest_kafka_ms: int | None
    seconds: float
    finished: float  # time.time() when every table of the batch was committed


@dataclass
class MergeStats:
    """What a run did (this process only; a restart starts counting again)."""

    batches: int = 0
    events: int = 0
    dead_letters: int = 0
    tables: dict[str, int] = field(default_factory=dict)  # "<schema>/<table>" → events
    fast_tables: int = 0  # tables' parts of batches merged by delta-rs (the fast path)
    # "<schema>/<table>" → why its last failed batch was not written (its events: dead letters)
    failed_tables: dict[str, str] = field(default_factory=dict)
    reports: list[BatchReport] = field(default_factory=list)
    cuts: int = 0  # cuts recorded (--consistent-cuts)
    held: int = 0  # changes held back by the last batch (--consistent-cuts)


def open_table_sink(config: MergeConfig, app_id: str, table: TableId) -> TableSink:
    """The table's sink, from the `--format`'s entry in the format registry
    (`spark_jobs/sinks/__init__.py`)."""
    database = config.database
    return config.lake_format.open_sink(TableSettings(
        config.target, table.path, app_id, config.partition_by, config.table_properties,
        config.column_mapping, f"{q(database)}.{q(table.catalog_name)}" if database else None,
        config.fast_merge_on))


class BatchProcessor:
    """The foreachBatch function. Everything it writes is keyed by the batch id, so a batch
    Spark re-runs after a crash (same offsets, same id) leaves the same result."""

    def __init__(self, spark: SparkSession, config: MergeConfig, app_id: str,
                 schemas: SchemaCache | None = None) -> None:
        self.spark = spark
        self.config = config
        self.app_id = app_id
        self.schemas = schemas or SchemaCache(config.schema_registry_url)
        self.stats = MergeStats()
        self.metrics = metrics.BatchMetrics()  # each table's freshness (runtime/metrics.py)
        self.watch = metrics.Watch(None if config.available_now
                                   else metrics.trigger_seconds(config.interval))
        self._sinks: dict[str, TableSink] = {}
        self.lease: Lease | None = None  # the writer lease of the target (`lake/lease.py`)
        self.lease_lost: str | None = None  # why the job stopped: another job took the lake
        self.query: StreamingQuery | None = None  # its progress reports (`_read_to_listed`)
        self.expiry = TombstoneExpiry(config.maintenance_every)  # (cuts/expiry.py)
        # Tables of a batch are written concurrently: their Delta commits, log reads and small
        # jobs leave cores idle when run one after another. The fast path's tables on a pool
        # of their own where the store makes them wait on requests rather than cores
        # (`io_tables_at_once`); the Spark path's stay bounded by the cores (`_spark_slots`).
        cores = spark.sparkContext.defaultParallelism
        spark_tables = config.tables_at_once(cores)
        io_tables = config.io_tables_at_once(cores) if config.fast_merge_on else spark_tables
        self._pool = ThreadPoolExecutor(spark_tables, thread_name_prefix="pgcdc-table")
        self._io_pool = (self._pool if io_tables == spark_tables else
                         ThreadPoolExecutor(io_tables, thread_name_prefix="pgcdc-io-table"))
        self._spark_slots = threading.BoundedSemaphore(spark_tables)
        self.in_flight = InFlight()
        if io_tables != spark_tables:
            log.info("tables at once: %d through delta-rs (the store: --io-tables), %d through "
                     "Spark (--parallel-tables)", io_tables, spark_tables)
        self._local = threading.local()
        self._lock = threading.Lock()
        # --consistent-cuts (cuts/batch.py); `store`: where it keeps its state
        self.cuts = BatchCuts(spark, config.target, app_id) if config.consistent_cuts else None
        self.store = self.cuts.store if self.cuts is not None else None
        # plain streaming: the heartbeat state tombstone expiry needs (`expiry`)
        self.beats = (PendingStore(spark, config.target, app_id, HEARTBEATS)
                      if not config.consistent_cuts and config.expiry_off is None else None)
        if config.expiry_off is None:
            log.info("tombstone expiry: every %d batch(es), below what heartbeats on %s read "
                     "two batches earlier vouch for", config.maintenance_every,
                     config.heartbeat_topic)
        else:
            log.info("tombstone expiry off: %s", config.expiry_off)
        # --history: each table's history follows its mirror, per batch (runtime/history_job.py)
        self.history = HistoryWriter(config, app_id) if config.history else None
        # the two engine paths of a table's part of a batch (each returns a `TableApplied`)
        self.delta_rs = DeltaRsPath(spark, self)
        self.by_spark = SparkPath(self)

    def session(self) -> SparkSession:
        """This worker thread's session: Delta reads the idempotent-write settings from the
        session conf, so concurrent tables must not share one."""
        session: SparkSession | None = getattr(self._local, "spark", None)
        if session is None:
            session = self.spark.newSession()
            for key, value in WORKER_CONF.items():
                session.conf.set(key, value)
            self._local.spark = session
        return session

    def sink(self, table: TableId) -> TableSink:
        with self._lock:
            if table.path not in self._sinks:
                self._sinks[table.path] = open_table_sink(self.config, self.app_id, table)
            return self._sinks[table.path]

    def _mirror(self, table: TableId) -> Mirror:
        """The table's mirror, for the features only a mirror format has (config.py refuses
        them for other formats)."""
        mirror = self.sink(table).mirror
        assert mirror is not None, f"--format {self.config.format} keeps no mirror"
        return mirror

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._io_pool.shutdown(wait=True)
        if self.lease is not None:
            self.lease.release()

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        CLOCK.take()  # what a failed attempt of this batch left
        if self.cuts is not None:
            self._with_cut(batch, batch_id)
        elif self.beats is not None:
            self._with_expiry(batch, batch_id)
        else:
            self._process(batch, batch_id, None)
        phases = CLOCK.take()
        metrics.observe_phases(phases)
        tables, at_once = self.in_flight.take()
        metrics.TABLES_AT_ONCE.observe(at_once)
        if tables:  # where a batch's time went, per table, and how many were in flight at once
            log.info("batch %d: %d table(s), at most %d at once; per table: %s", batch_id,
                     tables, at_once, ", ".join(f"{phase} {spent / tables:.3f} s"
                                                for phase, spent in phases.items() if spent))

    def _with_expiry(self, batch: DataFrame, batch_id: int) -> None:
        """A batch of plain streaming with tombstone expiry: applied as any, then expiry with
        the bound of the state after the previous batch, and the state after this one (the
        heartbeats it read) stored: the same rule (`cut_policy.after`) as under
        --consistent-cuts, without a cut bound or held-back changes. A re-run batch reads the
        same previous state (the one before the last is kept), so it expires with the same
        bound."""
        assert self.beats is not None
        now = time.time_ns() // 1_000_000
        previous = self.beats.latest(batch_id) or initial(None, {}, now)
        heartbeat, restart = self._process(batch, batch_id, None)
        self.expiry.run(self.spark, previous.expiry, batch_id, self._mirrors,
                        lambda: self._read_to_listed(batch_id - 1))
        with CLOCK.timing("commit"):
            self.beats.write_state(after(previous, batch_id, None, heartbeat, None, None, {},
                                         False, now, restart))
            self.beats.prune(batch_id - 1)

    def _with_cut(self, batch: DataFrame, batch_id: int) -> None:
        """A batch under `--consistent-cuts` (`cut_policy`, `held`): the records held back by
        the previous batch go in front of this one's, changes the heartbeats of earlier batches
        do not vouch for wait, and once every table is written the cut is recorded."""
        assert self.cuts is not None
        if self.cuts.done(batch_id):
            log.info("batch %d: applied with its cut already (a re-run): skipped", batch_id)
            return
        previous = self.cuts.previous(batch_id, self._lake_tables)
        cut = BatchCut(bound(previous))
        cut.heartbeat, cut.restart = self._process(self.cuts.source(batch, previous), batch_id,
                                                   cut)
        self.expiry.run(self.spark, previous.expiry, batch_id, self._mirrors)
        with CLOCK.timing("commit"):
            self._record_cut(previous, cut, batch_id)

    def _record_cut(self, previous: CutState, cut: BatchCut, batch_id: int) -> None:
        """The batch's cut state stored, and its cut recorded when every table is written."""
        assert self.cuts is not None
        now = time.time_ns() // 1_000_000
        state, recorded = self.cuts.record(previous, cut, batch_id, now)
        if recorded is not None:
            self.stats.cuts += 1
            metrics.CUT_LSN.set(recorded.lsn)
            if state.source_ts_ms is not None:
                metrics.CUT_SOURCE_TIME.set(state.source_ts_ms / 1000)
            log.info("batch %d: cut recorded at %s (%d table(s)), %d change(s) held back",
                     batch_id, recorded.lsn_text, len(state.versions), cut.held)
        log.info("batch %d: --consistent-cuts: bound %s, %d change(s) held back, newest "
                 "heartbeat %s", batch_id, lsn_text(cut.bound), cut.held,
                 lsn_text(cut.heartbeat))
        self.stats.held = cut.held
        warning = stale_warning(state, cut.held > 0, self.config.heartbeat_topic, now)
        if warning:
            log.warning("batch %d: %s", batch_id, warning)

    def _read_to_listed(self, batch_id: int) -> bool:
        """Whether batch `batch_id` read every partition to the offsets Spark listed, as the
        expiry argument needs of the batch before the one expiring: always without a batch
        limit; with one, when Spark's report of that batch says so (`expiry.read_to_listed`)."""
        if self.config.batch_limit is None:
            return True
        query = self.query
        return read_to_listed(query.lastProgress if query is not None else None, batch_id)

    def _mirrors(self) -> list[Mirror]:
        """The mirrors of the tables this run has met."""
        with self._lock:
            return [m for s in self._sinks.values() if (m := s.mirror) is not None]

    def _lake_tables(self) -> list[tuple[str, Mirror]]:
        """The tables in the lake (`<schema>/<table>`) and their mirrors."""
        return [(rel, self._mirror(TableId(*rel.split("/"))))
                for rel in self.config.lake_format.list_tables(self.spark, self.config.target)]

    def _process(self, batch: DataFrame, batch_id: int, cut: BatchCut | None
                 ) -> tuple[int | None, int | None]:
        """Apply one batch; the highest heartbeat LSN and restart_lsn it read (None, None
        when the job does not read heartbeats)."""
        started = time.monotonic()
        heartbeat: tuple[int | None, int | None] = (None, None)
        # Cached once in at most one partition per core: every table's Spark jobs filter this
        # cache, and a batch over many topics (a partition each) would otherwise cost each
        # of those jobs a task per topic partition (~600 for 600 tables).
        frames = with_frame(batch).coalesce(self.spark.sparkContext.defaultParallelism).persist()
        try:
            with CLOCK.timing("read"):
                beat_topic = (self.config.heartbeat_topic if self.config.subscribes_heartbeats
                              else None)
                summary, beats = summarize(
                    frames, beat_topic if self.config.reads_heartbeats else None)
                plans = plan_batch(summary, self.schemas, (beat_topic,) if beat_topic else ())
                if beats:
                    heartbeat = heartbeat_positions(beats, self.schemas)
                dead = [d for d in [undecodable(frames, plans)] if d is not None]
                events = sum(p.events for p in plans.values())
            split = self._split(plans)
            # Spark's tables start at once (the longest first) beside the fast path's rounds.
            by_spark = [self._submit(frames, topic, plans[topic], batch_id, None, cut)
                        for topic in split.spark]
            failed: list[str] = []

            def fast_round(topics: list[str]) -> None:
                with CLOCK.timing("read"):
                    records = self._fast_records(frames, plans, topics)
                # popped: a table's records are released once its thread is done with them
                dead.extend(self._results(
                    [self._submit(frames, t, plans[t], batch_id, records.pop(t), cut)
                     for t in topics], frames, batch_id, failed))

            # a round that fails fails the batch, once Spark's tables are done writing
            run_rounds(split.rounds, fast_round, (job for _, _, job in by_spark))
            dead += self._results(by_spark, frames, batch_id, failed)
            dead_counts: dict[tuple[str, str], int] = {}
            for part in dead[1:]:
                dead[0] = dead[0].unionByName(part)
            if dead:
                with CLOCK.timing("commit"):
                    dead_counts = write_dead_letters(dead[0], self.config.dead_letter_dir,
                                                     batch_id)
            dead_count = sum(dead_counts.values())
            if cut is not None:
                assert self.cuts is not None
                self.cuts.hold(frames, cut, batch_id)
        finally:
            frames.unpersist()
            for keys in cut.held_frames if cut is not None else []:
                keys.unpersist()
        took = time.monotonic() - started
        self.stats.batches += 1
        self.stats.events += events
        self.stats.dead_letters += dead_count
        oldest = min((r["oldest"] for r in summary if r["oldest"] is not None), default=None)
        newest = max((r["newest"] for r in summary if r["newest"] is not None), default=None)
        self.stats.reports.append(BatchReport(batch_id, events, dead_count, oldest, newest, took,
                                              time.time()))
        self._observe(summary, beat_topic, failed, took, dead_counts)
        log.info("batch %d: %d events from %d topic(s), %d dead letter(s), %.1f s",
                 batch_id, events, len(plans), dead_count, took)
        return heartbeat

    def _observe(self, summary: list[Any], beat_topic: str | None, failed: list[str],
                 took: float, dead_counts: dict[tuple[str, str], int]) -> None:
        """The batch's metrics: its time, bytes, dead letters, and each table's freshness up
        to the newest heartbeat it read (runtime/metrics.py)."""
        metrics.BATCHES.inc()
        metrics.BATCH_SECONDS.observe(took)
        for row in summary:
            metrics.READ_BYTES.labels(row["topic"]).inc(row["bytes"] or 0)
        for (topic, _), count in dead_counts.items():
            metrics.DEAD_LETTERS.labels(topic).inc(count)
        for warning in self.watch.dead_letters(dead_counts, self.config.dead_letter_dir):
            log.warning("%s", warning)
        beats = [r["newest"] for r in summary if r["topic"] == beat_topic and r["newest"]]
        with self._lock:
            tables = {*self.stats.tables, *failed}
        lags = self.metrics.observe_batch(max(beats, default=None), tables, failed)
        metrics.publish(self.metrics, lags)
        to_spark = self.delta_rs.declined()
        batch_tables = [table_of(r["topic"]).path for r in summary if r["topic"] != beat_topic
                        and _is_table_topic(r["topic"])]
        for warning in self.watch.batch(took, failed, to_spark, batch_tables):
            log.warning("%s", warning)

    def _not_written(self, frames: DataFrame, topic: str, plan: TopicPlan, exc: Exception,
                     batch_id: int) -> DataFrame:
        """A table the job could not write: its events of this batch become dead letters
        (the batch's other tables are written, and the checkpoint moves on), so nothing is
        lost and nothing else waits. Events already dead for their own reason stay so."""
        table = table_of(topic)
        reason = f"table {table.path} not written: {error_class_line(exc)}"
        log.error("batch %d: %s; its events go to the dead letters at %s", batch_id, reason,
                  self.config.dead_letter_dir)
        with self._lock:
            self.stats.failed_tables[table.path] = reason
        writable = (F.col("topic") == topic) & F.col(PROBLEM).isNull()
        if plan.rejected:
            writable &= ~F.col(SCHEMA_ID).isin(list(plan.rejected))
        return frames.where(writable).select(*DEAD_COLUMNS[:-1], F.lit(reason).alias("reason"))

    def _split(self, plans: dict[str, TopicPlan]) -> BatchSplit:
        """The batch's topics with events to write between the fast path's rounds and Spark
        (`rounds.split_batch`): the fast path can take a topic whose events have one key
        schema, when fast merge is on; or one key schema beside events without a key, which
        may be the table's truncates (a truncate has no key): `_fast` declines the topic when
        they are not."""
        fast = ({t for t, p in plans.items() if len(groups := key_groups(p)) == 1
                 or (len(groups) == 2 and groups[0] is None)}
                if self.config.fast_merge_on else set())
        split = split_batch({t: p.events for t, p in plans.items() if p.schemas}, fast,
                            self.config.fast_merge_max_events)
        if self.config.supports(FAST_MERGE):  # a Delta lake: each part Spark takes, and why
            metrics.count_spark_parts({table_of(t).path: why for t, why in spark_reasons(
                split, fast, self.config.fast_merge_on).items()})
        return split

    def _submit(self, frames: DataFrame, topic: str, plan: TopicPlan, batch_id: int,
                records: list[Record] | None, cut: BatchCut | None
                ) -> tuple[str, TopicPlan, Future[list[DataFrame]]]:
        pool = self._pool if records is None else self._io_pool
        return topic, plan, pool.submit(self._table, frames, topic, plan, batch_id, records,
                                        cut)

    def _results(self, jobs: list[tuple[str, TopicPlan, Future[list[DataFrame]]]],
                 frames: DataFrame, batch_id: int, failed: list[str]) -> list[DataFrame]:
        """The corrupt events of the tables `jobs` wrote, and the events of those that could
        not be written (`_not_written`, their paths added to `failed`): dead letters."""
        dead: list[DataFrame] = []
        for topic, plan, job in jobs:
            try:
                dead += job.result()
            except Exception as exc:  # noqa: BLE001 - one table must not stop the others
                if not table_failure(exc):
                    raise
                dead.append(self._not_written(frames, topic, plan, exc, batch_id))
                failed.append(table_of(topic).path)
                metrics.TABLE_FAILURES.labels(failed[-1]).inc()
        return dead

    def _fast_records(self, frames: DataFrame, plans: dict[str, TopicPlan], topics: list[str]
                      ) -> dict[str, list[Record]]:
        """Topic → its decodable records (`Record`), for one round of the fast path
        (`_split`): one Spark job for the round's topics."""
        wanted = F.col("topic").isin(topics) & F.col(PROBLEM).isNull()
        out: dict[str, list[Record]] = {t: [] for t in topics}
        table = frames.where(wanted).select("topic", SCHEMA_ID, BODY, "partition", "offset",
                                            KEY_SCHEMA_ID).toArrow()
        for topic, sid, body, partition, offset, key_sid in zip(
                *(table.column(i).to_pylist() for i in range(6)), strict=True):
            if sid in plans[topic].schemas:
                out[topic].append((sid, body, partition, offset, key_sid))
        return out

    def take(self, table: TableId, mirror: Mirror, incarnation: Incarnation,
              replace: bool, template: DataFrame | None) -> None:
        """The one place a table takes a new upstream incarnation (`rules/incarnation.py`),
        whichever engine writes its batch: its history set aside first when the table is
        replaced (a re-run redoes both: the mirror still holds the old one), then the mirror
        takes it (`template`: the new incarnation's decoded changes, or None from the fast
        path, which only takes the one of a table still to be created)."""
        if replace and self.history is not None:
            self.history.replaced(table)
        mirror.take(self.session(), incarnation, replace, template)

    @CLOCK.timed("merge")
    def _table(self, frames: DataFrame, topic: str, plan: TopicPlan, batch_id: int,
               records: list[Record] | None = None,
               cut: BatchCut | None = None) -> list[DataFrame]:
        """One table's part of the batch: through delta-rs when the fast path takes it
        (`records`: its decodable records), else through Spark; then what was applied goes
        to the batch's features (`_finish`), whichever engine applied it. Its corrupt
        events (for the dead letters)."""
        table = table_of(topic)
        started = time.monotonic()
        with ExitStack() as cached:  # the Spark path's decoded frames, kept until _finish
            cached.enter_context(self.in_flight.table())
            applied = (self.delta_rs.apply(table, plan, records, batch_id, topic, cut)
                       if records is not None else None)
            if applied is None:
                with self._spark_slots:  # as many Spark tables at once as cores, either pool
                    applied = self.by_spark.apply(frames, topic, plan, batch_id, cut, cached)
            if applied is None:
                return []
            self._finish(table, applied, batch_id, cut, started)
        return applied.dead

    def _finish(self, table: TableId, applied: TableApplied, batch_id: int,
                cut: BatchCut | None, started: float) -> None:
        """The batch's features, once per table, whichever engine applied it: the table's
        freshness, its catalog registration, the history, the cut's report (the table's
        versions, the newest commit time applied), counts, metrics and the table's log line."""
        mirror = self.sink(table).mirror
        session = self.session()
        self.metrics.applied(table.path, applied.newest_lsn, applied.newest_ts)
        if mirror is not None:
            mirror.register(session)
        if applied.history is not None:
            assert self.history is not None
            self.history.write(session, table, applied.history, batch_id)
        if cut is not None and mirror is not None:
            cut.applied(table.path, mirror.version(session), applied.newest_ts,
                        mirror.tombstones_version(session))
        with self._lock:
            self.stats.tables[table.path] = self.stats.tables.get(table.path, 0) + applied.events
            if applied.engine == "delta-rs":
                self.stats.fast_tables += 1
        metrics.TABLE_BATCHES.labels(table.path, applied.engine).inc()
        metrics.EVENTS.labels(table.path).inc(applied.events)
        if applied.decoded_at is None:
            log.info("batch %d: %s: %d change(s), merged by %s in %.2f s", batch_id,
                     table.path, applied.events, applied.engine, time.monotonic() - started)
        else:
            log.info("batch %d: %s: %d change(s), decoded in %.1f s, written in %.1f s",
                     batch_id, table.path, applied.events, applied.decoded_at - started,
                     time.monotonic() - applied.decoded_at)


def _is_table_topic(topic: str) -> bool:
    try:
        table_of(topic)
    except ValueError:
        return False
    return True

"""The streaming query: Kafka source → foreachBatch(BatchProcessor) → Delta / Parquet."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from .changes import IDX, LSN, OP, TOAST, Position
from .config import MergeConfig
from .dead_letter import write_dead_letters
from .decode import TopicPlan, decode_topic, plan_batch, split_corrupt, undecodable
from .delta_sink import BatchFacts, DeltaTableSink
from .files import HadoopFs
from .names import table_of
from .parquet_sink import append_change_log
from .registry import SchemaCache
from .wire import KEY_SCHEMA_ID, PROBLEM, SCHEMA_ID, with_frame

log = logging.getLogger(__name__)
APP_ID_FILE = "pgcdc-app-id"


class ReplayTargetNotEmpty(RuntimeError):
    pass


@dataclass
class MergeStats:
    """What a run did (this process only; a restart starts counting again)."""

    batches: int = 0
    events: int = 0
    dead_letters: int = 0
    tables: dict[str, int] = field(default_factory=dict)  # "<schema>/<table>" → events


def table_facts(decoded: DataFrame) -> tuple[int, BatchFacts]:
    """(corrupt events, facts) of one topic's decoded batch, in one aggregation."""
    row = decoded.agg(
        F.count_if(F.col(OP).isNull()).alias("corrupt"),
        F.count_if(F.col(OP).isin("c", "u", "r", "d")).alias("events"),
        F.count_if(F.col(OP) == "d").alias("deletes"),
        F.max(F.when(F.col(OP) == "t", F.struct(F.col(LSN), F.col(IDX)))).alias("truncate"),
        F.array_distinct(F.flatten(F.collect_set(
            F.when(F.size(F.col(TOAST)) > 0, F.col(TOAST))))).alias("toast"),
    ).first()
    assert row is not None
    truncate = Position(*row["truncate"]) if row["truncate"] is not None else None
    return row["corrupt"], BatchFacts(row["events"], row["deletes"], truncate,
                                      sorted(row["toast"] or []))


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
        self._sinks: dict[str, DeltaTableSink] = {}

    def _sink(self, rel_path: str) -> DeltaTableSink:
        if rel_path not in self._sinks:
            self._sinks[rel_path] = DeltaTableSink(self.spark, self.config.target, rel_path,
                                                   self.app_id, self.config.partition_by)
        return self._sinks[rel_path]

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        frames = with_frame(batch).persist()
        try:
            summary = (frames.groupBy("topic", PROBLEM, SCHEMA_ID, KEY_SCHEMA_ID)
                       .agg(F.count(F.lit(1)).alias("n")).collect())
            plans = plan_batch(summary, self.schemas)
            dead = [d for d in [undecodable(frames, plans)] if d is not None]
            events = 0
            for topic in sorted(plans):
                plan = plans[topic]
                events += plan.events
                if plan.schemas:
                    dead += self._table(frames, topic, plan, batch_id)
            dead_count = 0
            for part in dead[1:]:
                dead[0] = dead[0].unionByName(part)
            if dead:
                dead_count = write_dead_letters(dead[0], self.config.dead_letter_dir, batch_id)
        finally:
            frames.unpersist()
        self.stats.batches += 1
        self.stats.events += events
        self.stats.dead_letters += dead_count
        log.info("batch %d: %d events from %d topic(s), %d dead letter(s), %.1f s",
                 batch_id, events, len(plans), dead_count, time.monotonic() - started)

    def _table(self, frames: DataFrame, topic: str, plan: TopicPlan, batch_id: int
               ) -> list[DataFrame]:
        table = table_of(topic)
        decoded = decode_topic(frames, topic, plan).persist()
        try:
            corrupt, facts = table_facts(decoded)
            changes, dead = split_corrupt(decoded)
            if self.config.format == "parquet":
                append_change_log(changes, f"{self.config.target.rstrip('/')}/{table.path}",
                                  batch_id, self.config.partition_by)
            else:
                self._sink(table.path).apply(changes, facts, plan.key, batch_id)
            self.stats.tables[table.path] = (self.stats.tables.get(table.path, 0)
                                             + facts.events)
            # Recomputed from the cached frames when the dead letters are written.
            return [dead] if corrupt else []
        finally:
            decoded.unpersist()


def app_id(spark: SparkSession, checkpoint: str) -> str:
    """A stable id per checkpoint for Delta's idempotent writes: a new checkpoint (a rebuild)
    gets a new id, so its batch ids (from 0 again) are not taken for already-applied ones."""
    fs = HadoopFs(spark, checkpoint)
    path = f"{checkpoint.rstrip('/')}/{APP_ID_FILE}"
    if fs.exists(path):
        return fs.read_text(path).strip()
    new = f"pgcdc-merge-{uuid.uuid4()}"
    fs.write_text(path, new)
    return new


def _check_replay(spark: SparkSession, config: MergeConfig) -> None:
    fs = HadoopFs(spark, config.target)
    target = config.target.rstrip("/")
    tables = [p for p in fs.glob(f"{target}/*") if not p.rstrip("/").endswith("/_pgcdc")]
    if tables or fs.has_entries(config.checkpoint_dir):
        raise ReplayTargetNotEmpty(
            f"--replay rebuilds into an empty target: {target} or its checkpoint "
            f"{config.checkpoint_dir} is not empty (remove them, or run without --replay)")


def kafka_stream(spark: SparkSession, config: MergeConfig) -> DataFrame:
    option, value = config.subscription()
    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", config.bootstrap_servers)
              .option(option, value)
              .option("startingOffsets", "earliest")
              # Only committed records of a transactional producer (exactly-once mode).
              .option("kafka.isolation.level", "read_committed")
              .option("failOnDataLoss", "true")
              # New table topics are found on the consumer's metadata refresh.
              .option("kafka.metadata.max.age.ms", "10000"))
    if config.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
    for key, val in config.kafka_options.items():
        reader = reader.option(key, val)
    return reader.load()


def start_merge(spark: SparkSession, config: MergeConfig,
                schemas: SchemaCache | None = None) -> tuple[StreamingQuery, BatchProcessor]:
    """Start the streaming query; the caller waits on or stops it."""
    if config.replay:
        _check_replay(spark, config)
    processor = BatchProcessor(spark, config, app_id(spark, config.checkpoint_dir), schemas)
    writer = (kafka_stream(spark, config).writeStream.foreachBatch(processor)
              .option("checkpointLocation", config.checkpoint_dir)
              .queryName(f"pgcdc-merge-{uuid.uuid4().hex[:8]}"))
    writer = (writer.trigger(availableNow=True) if config.available_now
              else writer.trigger(processingTime=config.interval))
    return writer.start(), processor


def run_merge(spark: SparkSession, config: MergeConfig,
              schemas: SchemaCache | None = None) -> MergeStats:
    """Run the job in this process: until caught up with available-now / --replay, otherwise
    until the query stops or fails."""
    query, processor = start_merge(spark, config, schemas)
    query.awaitTermination()
    log.info("merge done: %d batch(es), %d event(s), %d dead letter(s)",
             processor.stats.batches, processor.stats.events, processor.stats.dead_letters)
    return processor.stats

"""The streaming query: the Kafka source, `foreachBatch` with the job's `BatchProcessor`
(`job.py`: one micro-batch's flow), the writer lease, and running it to the end."""

from __future__ import annotations

import logging
import uuid

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from ..events.registry import SchemaCache
from ..history.sink import HISTORY_DIR, LOG_DIR
from ..lake import storage
from ..lake.files import HadoopFs
from ..lake.lease import LakeBusy, Lease
from ..rules.changes import q
from . import metrics
from .config import MergeConfig
from .job import BatchProcessor, MergeStats

log = logging.getLogger(__name__)
APP_ID_FILE = "pgcdc-app-id"


class ReplayTargetNotEmpty(RuntimeError):
    pass


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
    # history tables and their event logs (history/sink.py) would carry old events over
    tables += [p for p in (f"{target}/{HISTORY_DIR}", f"{target}/{LOG_DIR}")
               if fs.has_entries(p)]
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
              # The consumer's last fetch of a partition finds no data and would wait the
              # default 500 ms: per partition and batch, most of the read time of a backlog.
              .option("kafka.fetch.max.wait.ms", "10")
              # New table topics are found on the consumer's metadata refresh.
              .option("kafka.metadata.max.age.ms", "10000"))
    if config.batch_limit:
        reader = reader.option("maxOffsetsPerTrigger", str(config.batch_limit))
    for key, val in config.kafka_options.items():
        reader = reader.option(key, val)
    return reader.load()


def _tune_object_store(spark: SparkSession, target: str, settings: dict[str, str]) -> None:
    """Spark's path on S3A with fewer requests (storage.object_store_defaults), set before
    the session's first S3A filesystem for the lake is made."""
    chosen = {k: v for k in storage.OBJECT_STORE_SPARK  # set on the running session too
              if (v := spark.conf.get(k, None)) is not None}
    hadoop, session = storage.object_store_defaults(target, {**settings, **chosen})
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # noqa: SLF001 - no public handle
    for key, value in hadoop.items():
        conf.set(key, value)
    for key, value in session.items():
        spark.conf.set(key, value)
    if hadoop or session:
        log.info("object store tuning for Spark's writes (set to override): %s",
                 ", ".join(f"{k}={v}" for k, v in {**hadoop, **session}.items()))


def start_merge(spark: SparkSession, config: MergeConfig,
                schemas: SchemaCache | None = None) -> tuple[StreamingQuery, BatchProcessor]:
    """Start the streaming query; the caller waits on or stops it."""
    settings = storage.session_settings(spark)
    storage.configure(settings)  # delta-rs reaches the store as Spark does
    _tune_object_store(spark, config.target, settings)
    if config.replay:
        _check_replay(spark, config)
    if config.database:
        # Here, not per table: concurrent CREATE DATABASE calls may race in a Hive metastore.
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {q(config.database)}")
        log.info("registering Delta tables in database %s (catalog: %s)", config.database,
                 spark.conf.get("spark.sql.catalogImplementation", "in-memory"))
    processor = BatchProcessor(spark, config, app_id(spark, config.checkpoint_dir), schemas)
    metrics.serve(processor.metrics, config.metrics_port, config.metrics_host)
    query: list[StreamingQuery] = []

    def lost(message: str) -> None:
        log.error("%s", message)
        processor.lease_lost = message
        for started in query:
            started.stop()
    if Lease.applies(config.target):
        processor.lease = Lease(config.target)
        processor.lease.acquire(  # LakeBusy: another job writes this target
            lost, active=lambda: not query or query[0].isActive)
    try:
        query.append(_start_query(spark, config, processor))
    except BaseException:
        processor.close()
        raise
    processor.query = query[0]
    metrics.watch_query(query[0])
    return query[0], processor


def _start_query(spark: SparkSession, config: MergeConfig, processor: BatchProcessor
                 ) -> StreamingQuery:
    writer = (kafka_stream(spark, config).writeStream.foreachBatch(processor)
              .option("checkpointLocation", config.checkpoint_dir)
              .queryName(f"pgcdc-merge-{uuid.uuid4().hex[:8]}"))
    writer = (writer.trigger(availableNow=True) if config.available_now
              else writer.trigger(processingTime=config.interval))
    return writer.start()


def run_merge(spark: SparkSession, config: MergeConfig,
              schemas: SchemaCache | None = None) -> MergeStats:
    """Run the job in this process: until caught up with available-now / --replay, otherwise
    until the query stops or fails."""
    query, processor = start_merge(spark, config, schemas)
    try:
        query.awaitTermination()
    finally:
        processor.close()
    if processor.lease_lost:
        raise LakeBusy(processor.lease_lost)
    log.info("merge done: %d batch(es), %d event(s), %d dead letter(s)",
             processor.stats.batches, processor.stats.events, processor.stats.dead_letters)
    return processor.stats

"""Merge job benchmark: N change events over 10 tables already in Kafka → Delta, available-now.

Baseline in the same run: the same events decoded and appended to Delta without any merge
(the ceiling of read + decode + write). Also the job's Parquet change-log mode. Optionally the
steady-state freshness (Kafka append → visible in Delta) at a fixed producer rate.

    .venv/bin/python benchmarks/merge.py [--events 1000000] [--freshness-rate 5000]

Starts a throwaway Kafka and Schema Registry (as the tests do) unless --bootstrap-servers and
--schema-registry-url are given.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "scripts")]

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from spark_jobs.config import MergeConfig  # noqa: E402
from spark_jobs.decode import decode_topic, plan_batch  # noqa: E402
from spark_jobs.events import TableTopic, register_table  # noqa: E402
from spark_jobs.job import run_merge, start_merge  # noqa: E402
from spark_jobs.registry import SchemaCache  # noqa: E402
from spark_jobs.session import LOCAL_CONF, local_session  # noqa: E402
from spark_jobs.wire import KEY_SCHEMA_ID, PROBLEM, SCHEMA_ID, with_frame  # noqa: E402

TABLES = 10
PARTITIONS = 2
COLUMNS = [("id", "long"), ("name", "string"), ("qty", "int"),
           ("price", {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}),
           ("updated", {"type": "long", "logicalType": "timestamp-micros"}),
           ("note", "string")]
SPARK_EXTRA = {"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "4"}


@contextmanager
def servers(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    if args.bootstrap_servers and args.schema_registry_url:
        yield args.bootstrap_servers, args.schema_registry_url
        return
    from devstack.kafka import Kafka
    from devstack.maven import resolve_archive, resolve_pom
    from devstack.ports import free_port
    from devstack.registry import Registry
    from devstack.stack import APICURIO, cache_dir

    base = Path(tempfile.mkdtemp(prefix="pgcdc-bench-"))
    kafka = Kafka(resolve_pom(cache_dir(), "kafka.pom.xml"), base / "kafka", free_port(),
                  free_port(), heap="1g")
    registry = Registry(resolve_archive(cache_dir(), APICURIO, "apicurio"), base / "registry",
                        free_port())
    kafka.start()
    registry.start()
    try:
        yield kafka.bootstrap, registry.url
    finally:
        registry.stop()
        kafka.stop()
        shutil.rmtree(base, ignore_errors=True)


def make_tables(bootstrap: str, registry_url: str, prefix: str) -> list[TableTopic]:
    client = SchemaRegistryClient({"url": registry_url})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [f"{prefix}.public.t{i}" for i in range(TABLES)]
    for f in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics]).values():
        f.result()
    return [register_table(client, prefix, "public", f"t{i}", COLUMNS, ["id"])
            for i in range(TABLES)]


def row(key: int, version: int, now: dt.datetime) -> dict[str, object]:
    return {"id": key, "name": f"name-{key}-{version}", "qty": version,
            "price": Decimal(f"{key % 1000}.{version % 100:02d}"), "updated": now,
            "note": "x" * 40}


def produce(bootstrap: str, tables: list[TableTopic], events: int, lsn_start: int = 1000,
            rate: float | None = None, stop: threading.Event | None = None) -> int:
    """Transactions of 10 changes on random tables: 30% inserts of new keys, 60% updates,
    10% deletes. Returns the next LSN. `rate` (events/s) paces it for the freshness run."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.num.messages": 10000, "queue.buffering.max.messages": 500000,
                         "compression.type": "lz4", "enable.idempotence": True})
    rnd = random.Random(7)
    keys: list[list[int]] = [[] for _ in tables]
    next_key = [0] * len(tables)
    now = dt.datetime(2024, 6, 1, tzinfo=dt.UTC)
    lsn, started = lsn_start, time.monotonic()
    for n in range(events):
        if stop is not None and stop.is_set():
            break
        if n % 10 == 0:
            lsn += 100
            if rate:
                ahead = n / rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
        t = rnd.randrange(len(tables))
        table, live = tables[t], keys[t]
        pick = rnd.random()
        if pick < 0.3 or len(live) < 10:
            key = next_key[t]
            next_key[t] += 1
            live.append(key)
            kv = table.change("c", lsn, n % 10, after=row(key, 0, now))
        elif pick < 0.9:
            key = live[rnd.randrange(len(live))]
            kv = table.change("u", lsn, n % 10, after=row(key, n, now))
        else:
            key = live.pop(rnd.randrange(len(live)))
            kv = table.change("d", lsn, n % 10, before={"id": key, "name": None, "qty": None,
                                                        "price": None, "updated": None,
                                                        "note": None})
        while True:
            try:
                producer.produce(table.topic, key=kv[0], value=kv[1])
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0
    return lsn


def baseline_append(spark: SparkSession, bootstrap: str, registry_url: str, prefix: str,
                    target: str) -> None:
    """Read all topics (batch), decode exactly as the job does, append to Delta: no merge."""
    frames = with_frame(spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                        .option("subscribePattern", f"^{prefix}\\..*")
                        .option("kafka.isolation.level", "read_committed")
                        .option("kafka.fetch.max.wait.ms", "10").load()).persist()
    summary = (frames.groupBy("topic", PROBLEM, SCHEMA_ID, KEY_SCHEMA_ID)
               .agg(F.count(F.lit(1)).alias("n")).collect())
    plans = plan_batch(summary, SchemaCache(registry_url))
    for topic, plan in sorted(plans.items()):
        (decode_topic(frames, topic, plan).drop("topic", "timestamp", "key", "value")
         .write.format("delta").mode("append").save(f"{target}/{topic}"))
    frames.unpersist()


def timed(label: str, fn: object) -> float:
    started = time.monotonic()
    fn()  # type: ignore[operator]
    took = time.monotonic() - started
    print(f"  {label}: {took:.1f} s", flush=True)
    return took


def freshness(spark: SparkSession, bootstrap: str, registry_url: str, tables: list[TableTopic],
              prefix: str, work: Path, rate: int, seconds: int) -> list[tuple[float, float, int]]:
    """Produce at `rate` events/s while the job streams (trigger 1s) into the tables the
    backlog runs built. Per batch: (Kafka append of its newest event → committed in Delta,
    of its oldest event → committed, events)."""
    target = work / "fresh"
    shutil.copytree(work / "delta5", target)  # existing tables: every batch is a MERGE
    config = MergeConfig(bootstrap, registry_url, str(target), topic_prefix=prefix,
                         checkpoint=str(work / "fresh-checkpoint"), trigger="1s")
    query, processor = start_merge(spark, config)
    # first catch up with the backlog (already applied: position guards make it a no-op)
    while not processor.stats.reports:
        if query.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {query.exception()}")
        time.sleep(0.5)
    skip = len(processor.stats.reports) + 1
    produce(bootstrap, tables, rate * seconds, lsn_start=10**9, rate=rate)
    time.sleep(20)
    query.stop()
    processor.close()
    return [(r.finished - r.newest_kafka_ms / 1000, r.finished - r.oldest_kafka_ms / 1000,
             r.events) for r in processor.stats.reports[skip:]
            if r.events > 0 and r.newest_kafka_ms is not None and r.oldest_kafka_ms is not None]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--max-offsets-per-trigger", type=int, default=None)
    p.add_argument("--freshness-rate", type=int, default=0, help="events/s, 0 = skip")
    p.add_argument("--freshness-seconds", type=int, default=60)
    p.add_argument("--bootstrap-servers")
    p.add_argument("--schema-registry-url")
    args = p.parse_args()

    from devstack.spark import spark_jars
    from devstack.stack import cache_dir

    work = Path(tempfile.mkdtemp(prefix="pgcdc-bench-work-"))
    with servers(args) as (bootstrap, registry_url):
        prefix = f"bench{int(time.time())}"
        tables = make_tables(bootstrap, registry_url, prefix)
        print(f"producing {args.events} events over {TABLES} tables ...", flush=True)
        started = time.monotonic()
        produce(bootstrap, tables, args.events)
        print(f"  produced in {time.monotonic() - started:.1f} s", flush=True)

        spark = local_session(spark_jars(cache_dir()), extra=SPARK_EXTRA)
        spark.sparkContext.setLogLevel("ERROR")
        # warm-up (JVM, codegen) on a tiny separate prefix so no run pays it alone
        warm = f"{prefix}warm"
        produce(bootstrap, make_tables(bootstrap, registry_url, warm), 2000)
        run_merge(spark, MergeConfig(bootstrap, registry_url, str(work / "warm"),
                                     topic_prefix=warm, replay=True))
        print("runs:", flush=True)
        runs = {
            "append to Delta, no merge (baseline)": lambda: baseline_append(
                spark, bootstrap, registry_url, prefix, str(work / "append")),
            "merge job, Delta, one batch (new tables)": lambda: run_merge(spark, MergeConfig(
                bootstrap, registry_url, str(work / "delta"), topic_prefix=prefix,
                trigger="available-now", max_offsets_per_trigger=args.max_offsets_per_trigger)),
            # the same backlog in 5 batches: batches 2-5 MERGE into existing tables
            "merge job, Delta, 5 batches (MERGE)": lambda: run_merge(spark, MergeConfig(
                bootstrap, registry_url, str(work / "delta5"), topic_prefix=prefix,
                trigger="available-now", max_offsets_per_trigger=args.events // 5 + 1)),
            "merge job, Parquet change log": lambda: run_merge(spark, MergeConfig(
                bootstrap, registry_url, str(work / "parquet"), topic_prefix=prefix,
                format="parquet", trigger="available-now",
                max_offsets_per_trigger=args.max_offsets_per_trigger)),
        }
        took = {label: timed(label, fn) for label, fn in runs.items()}
        rows = spark.read.format("delta").load(str(work / "delta" / "public" / "t0")).count()
        same = all(
            spark.read.format("delta").load(str(work / "delta" / "public" / f"t{i}"))
            .exceptAll(spark.read.format("delta").load(str(work / "delta5" / "public" / f"t{i}")))
            .isEmpty() for i in range(TABLES))

        fresh: list[tuple[float, float, int]] = []
        if args.freshness_rate:
            fresh = freshness(spark, bootstrap, registry_url, tables, prefix, work,
                              args.freshness_rate, args.freshness_seconds)
    conf = {k: spark.conf.get(k) for k in sorted({**LOCAL_CONF, **SPARK_EXTRA})
            if k != "spark.driver.memory"}
    conf["spark.driver.memory"] = SPARK_EXTRA["spark.driver.memory"]
    conf["master"] = spark.sparkContext.master
    conf["maxOffsetsPerTrigger"] = str(args.max_offsets_per_trigger or "unbounded")
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)

    base = took["append to Delta, no merge (baseline)"]
    print(f"\n{args.events} events, {TABLES} tables x {PARTITIONS} partitions "
          f"(30% insert / 60% update / 10% delete); t0 holds {rows} rows after the merge; "
          f"one-batch and 5-batch tables {'equal' if same else 'DIFFER'}")
    print(f"Spark: {json.dumps(conf)}\n")
    print("| run | seconds | events/s | time vs baseline |\n|---|---:|---:|---:|")
    for label, secs in took.items():
        print(f"| {label} | {secs:.1f} | {args.events / secs:,.0f} | {secs / base:.2f}x |")
    if fresh:
        best = sorted(f[0] for f in fresh)
        worst = sorted(f[1] for f in fresh)
        sizes = sorted(f[2] for f in fresh)
        print(f"\nfreshness at {args.freshness_rate} events/s for {args.freshness_seconds} s "
              f"(trigger 1s, MERGE into existing tables, {len(fresh)} batches of median "
              f"{sizes[len(sizes) // 2]} events): Kafka append -> committed in Delta: "
              f"newest event of a batch median {best[len(best) // 2]:.1f} s; oldest event of a "
              f"batch median {worst[len(worst) // 2]:.1f} s, max {worst[-1]:.1f} s")


if __name__ == "__main__":
    main()

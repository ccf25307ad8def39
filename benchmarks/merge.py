"""Merge job benchmark: N change events over 10 tables already in Kafka → Delta, available-now.

Baseline in the same run: the same events decoded and appended to Delta without any merge
(the ceiling of read + decode + write). Also the job's Parquet change-log mode. Optionally:

- `--many-tables N`: N tables with a few changes each, merged in one available-now batch
  (then a second batch of a few changes each, MERGEd into the existing tables), with the fast
  path (delta-rs) and, on `--many-tables-baseline` tables, with `--fast-merge off`.
- `--spark-backlog N`: N new tables (1 partition each) holding `--spark-backlog-events`
  events in all, through the all-Spark path (`--fast-merge off`) in one available-now batch,
  each run in a child process on the code of each `--spark-backlog-trees` tree (this one by
  default; give main's worktree and this one for a before/after in one session, alternated),
  with the seconds per phase and per table, and `--spark-backlog-limit` to stop a slow run
  early (its tables done so far and the rate they went at); `--spark-backlog-fast-merge auto`
  runs it with the job's default config instead (delta-rs for what it takes).
- `--freshness-rate R`: the job streams while a separate process produces R events/s over 10
  tables; another process polls the Delta tables with delta-rs (an independent reader) and
  each event's freshness is (first seen by the reader - sent by the producer). Fast path and
  `--fast-merge off`, one after the other, each on its own topics; with `--freshness-history`
  also the fast path with history tables of all 10 tables (`--history '*'`).

    .venv/bin/python benchmarks/merge.py [--events 1000000] [--freshness-rate 5000]
    .venv/bin/python benchmarks/merge.py --events 0 --many-tables 500 --freshness-rate 5000
    .venv/bin/python benchmarks/merge.py --events 0 --many-tables 500 --many-tables-baseline 0 \
        --freshness-rate 5000 --freshness-baseline-seconds 0 --store both   # S3 vs local disk
    .venv/bin/python benchmarks/merge.py --events 0 --many-tables 0 --spark-backlog 600 \
        --spark-backlog-events 150000 --store both --spark-backlog-trees BASE,.  # before/after

Starts a throwaway Kafka and Schema Registry (as the tests do) unless --bootstrap-servers and
--schema-registry-url are given.
"""

from __future__ import annotations

import argparse
import bisect
import datetime as dt
import json
import logging
import multiprocessing as mp
import os
import pickle
import random
import shutil
import sys
import tempfile
import threading
import time
from array import array
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deltalake import DeltaTable

# PGCDC_BENCH_TREE: the code tree (a git worktree) whose product code a `--spark-backlog`
# child runs: a before/after comparison runs this script's own harness (and dev stack) on
# both trees.
HARNESS = Path(__file__).resolve().parent.parent
REPO = Path(os.environ.get("PGCDC_BENCH_TREE") or HARNESS)
sys.path[:0] = [str(REPO), str(HARNESS / "scripts")]

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from devstack.stack import S3_SERVERS  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from s3_requests import RequestLog, per_table  # noqa: E402  (benchmarks/, on sys.path)

from connector.avro import SchemaRegistry  # noqa: E402
from spark_jobs.events.decode import decode_topic, plan_batch  # noqa: E402
from spark_jobs.events.registry import SchemaCache  # noqa: E402
from spark_jobs.events.wire import KEY_SCHEMA_ID, PROBLEM, SCHEMA_ID, with_frame  # noqa: E402
from spark_jobs.lake.storage import options_for  # noqa: E402
from spark_jobs.runtime.config import MergeConfig  # noqa: E402
from spark_jobs.runtime.job import BatchReport  # noqa: E402
from spark_jobs.runtime.session import LOCAL_CONF, local_session  # noqa: E402
from tests.support.events import TableEvents, table_events  # noqa: E402

try:  # a tree from before runtime/query.py (a before/after over PGCDC_BENCH_TREE) has them in job
    from spark_jobs.runtime.query import run_merge, start_merge
except ImportError:
    from spark_jobs.runtime.job import run_merge, start_merge  # type: ignore[attr-defined,no-redef]

TABLES = 10
PARTITIONS = 2
COLUMNS = [("id", "int8"), ("name", "text"), ("qty", "int4"), ("price", "numeric(12,2)"),
           ("updated", "timestamptz"), ("note", "text")]
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


S3_LOG: Path | None = None  # the S3 server's request log, while `object_store` runs one


def add_s3_server_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--s3-server", choices=S3_SERVERS, default="moto",
                   help="the S3 server of --store s3/both: moto (the tests' server; one Python "
                        "process, which bounds a big run on 2 cores) or s3proxy (s3proxy 4 on "
                        "its in-memory transient-nio2 store, a JVM; its jars are resolved from "
                        "Maven Central into the cache on first use)")
    p.add_argument("--s3-latency-ms", type=int, default=0, metavar="N",
                   help="with --s3-server s3proxy: add N ms to every store operation "
                        "(s3proxy's latency middleware), so requests wait as on a real "
                        "object store (10: ~15-30 ms per request end to end here); default 0")


@contextmanager
def object_store(work: Path, wanted: bool, server_name: str = "moto", latency_ms: int = 0
                 ) -> Iterator[dict[str, str]]:
    """A throwaway S3 server (`server_name`: moto or s3proxy, each store operation delayed by
    `latency_ms` on s3proxy) with a bucket `bench` when
    `wanted`: its AWS variables set in this process (delta-rs here and in the reader child
    derive their settings from them) and the Spark settings of S3A it needs, returned; else
    nothing."""
    if not wanted:
        yield {}
        return
    from devstack.ports import free_port
    from devstack.s3 import create_bucket
    from devstack.stack import s3_server

    global S3_LOG
    server = s3_server(server_name, work / "s3", free_port(), latency_ms=latency_ms)
    server.start()
    S3_LOG = server.log_file
    create_bucket(server.endpoint, "bench")
    env = server.env()
    os.environ.update(env)
    try:
        yield {"spark.hadoop.fs.s3a.endpoint": server.endpoint,
               "spark.hadoop.fs.s3a.endpoint.region": env["AWS_REGION"],
               "spark.hadoop.fs.s3a.path.style.access": "true",
               "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
               "spark.hadoop.fs.s3a.access.key": env["AWS_ACCESS_KEY_ID"],
               "spark.hadoop.fs.s3a.secret.key": env["AWS_SECRET_ACCESS_KEY"]}
    finally:
        server.stop()


def make_tables(bootstrap: str, registry_url: str, prefix: str, tables: int = TABLES,
                partitions: int = PARTITIONS) -> list[TableEvents]:
    """Create the topics (one AdminClient call) and register the tables' schemas."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [f"{prefix}.public.t{i}" for i in range(tables)]
    for f in admin.create_topics([NewTopic(t, partitions, 1) for t in topics],
                                 operation_timeout=120, request_timeout=180).values():
        f.result()
    return register_tables(registry_url, prefix, tables)


def register_tables(registry_url: str, prefix: str, tables: int = TABLES) -> list[TableEvents]:
    """The tables' events, written by the producer's codec (registering the same schema
    again returns the same id)."""
    registry = SchemaRegistry(registry_url)
    return [table_events(registry, prefix, "public", f"t{i}", COLUMNS, ["id"])
            for i in range(tables)]


def row(key: int, version: int, now: dt.datetime) -> dict[str, object]:
    return {"id": key, "name": f"name-{key}-{version}", "qty": version,
            "price": Decimal(f"{key % 1000}.{version % 100:02d}"), "updated": now,
            "note": "x" * 40}


def produce(bootstrap: str, tables: list[TableEvents], events: int, lsn_start: int = 1000,
            rate: float | None = None, stop: threading.Event | None = None,
            sent: tuple[array, array, array] | None = None) -> int:
    """Transactions of 10 changes on random tables: 30% inserts of new keys, 60% updates,
    10% deletes. Returns the next LSN. `rate` (events/s) paces it for the freshness run;
    `sent` collects (table, LSN, time.time() when handed to the producer) of every event."""
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
        if sent is not None:
            sent[0].append(t)
            sent[1].append(lsn)
            sent[2].append(time.time())
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


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


# --- many tables --------------------------------------------------------------------------

def produce_rounds(bootstrap: str, tables: list[TableEvents], round_: int) -> int:
    """A few changes per table. Round 1: 3 inserts (keys 0-2). Round 2: update key 0, delete
    key 1, insert key 3, update key 3 (4 events, one transaction per table). Returns events."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "enable.idempotence": True})
    now = dt.datetime(2024, 6, 1, tzinfo=dt.UTC)
    events = 0
    for n, table in enumerate(tables):
        lsn = 1000 * round_ + n * 10**6
        if round_ == 1:
            changes = [table.change("c", lsn, i, after=row(i, 0, now)) for i in range(3)]
        else:
            gone = {"id": 1, "name": None, "qty": None, "price": None, "updated": None,
                    "note": None}
            changes = [table.change("u", lsn, 0, after=row(0, 1, now)),
                       table.change("d", lsn, 1, before=gone),
                       table.change("c", lsn, 2, after=row(3, 0, now)),
                       table.change("u", lsn, 3, after=row(3, 1, now))]
        for key, value in changes:
            while True:
                try:
                    producer.produce(table.topic, key=key, value=value)
                    break
                except BufferError:
                    producer.poll(0.05)
        events += len(changes)
        producer.poll(0)
    assert producer.flush(120) == 0
    return events


def many_tables(spark: SparkSession, bootstrap: str, registry_url: str, root: str, n: int,
                fast: bool, store: str = "local", parallel_tables: int = 0,
                io_tables: int = 0) -> dict[str, object]:
    """N new tables (1 partition each): batch 1 creates them (3 inserts each), batch 2 MERGEs
    4 changes into each (update, delete, insert, update). Each batch one available-now run;
    the lake under `root` (a local directory or an `s3a://` URL: `store`)."""
    mode = "fast" if fast else "off"
    prefix = f"many{n}{mode}{store}p{parallel_tables}i{io_tables}t{int(time.time())}"
    started = time.monotonic()
    tables = make_tables(bootstrap, registry_url, prefix, n, 1)
    print(f"  {n} topics created and registered in {time.monotonic() - started:.1f} s",
          flush=True)
    config = MergeConfig(bootstrap, registry_url, f"{root}/{prefix}", topic_prefix=prefix,
                         trigger="available-now", fast_merge="auto" if fast else "off",
                         parallel_tables=parallel_tables,
                         **({"io_tables": io_tables} if io_tables else {}))
    cores = spark.sparkContext.defaultParallelism
    io_tables = getattr(config, "io_tables_at_once", None)  # (a tree before --io-tables)
    out: dict[str, object] = {"tables": n, "mode": mode, "store": store, "prefix": prefix,
                              "path": f"{root}/{prefix}",
                              "parallel": config.tables_at_once(cores) if io_tables is None
                              else f"{config.tables_at_once(cores)}/{io_tables(cores)}"}
    lines = _JobLines()
    for round_ in (1, 2):
        events = produce_rounds(bootstrap, tables, round_)
        load = load_average()
        requests = RequestLog(S3_LOG) if store == "s3" and S3_LOG else None
        started = time.monotonic()
        with lines:
            stats = run_merge(spark, config)
        took = time.monotonic() - started
        for line in lines.taken():
            print(f"  job: {line}", flush=True)
        if requests is not None:
            counted = requests.since_last()
            out[f"r{round_}_requests"] = dict(counted)
            out[f"r{round_}_phases"] = dict(requests.phases)
            print(f"  {mode} {store} N={n} batch {round_}: {per_table(counted, n)}", flush=True)
            print(f"  {mode} {store} N={n} batch {round_} by phase: "
                  f"{per_table(requests.phases, n)}; {sum(counted.values()) / took:.0f} "
                  f"requests/s", flush=True)
        out[f"r{round_}"] = {"events": events, "seconds": took, "load": load,
                             "batches": stats.batches, "fast_tables": stats.fast_tables,
                             "merged_tables": len(stats.tables),
                             "batch_seconds": [r.seconds for r in stats.reports]}
        print(f"  {mode} {store} N={n} (parallel {parallel_tables or 'default'}) batch "
              f"{round_}: {events} events, {took:.1f} s "
              f"({n / took:.1f} tables/s, {took / n:.2f} s/table), {stats.batches} batch(es), "
              f"fast_tables={stats.fast_tables}, tables with changes={len(stats.tables)}, "
              f"inside foreachBatch {sum(r.seconds for r in stats.reports):.1f} s, "
              f"load {load}", flush=True)
    return out


class _JobLines(logging.Handler):
    """The job's per-batch lines on tables at once and seconds per table per phase, while
    entered (the job logs them at INFO, which the benchmark does not print)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self._lines: list[str] = []
        self._logger = logging.getLogger("spark_jobs.runtime.job")

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "at once" in message:
            self._lines.append(message)

    def __enter__(self) -> None:
        self._level = self._logger.level
        self._logger.setLevel(logging.INFO)
        self._logger.addHandler(self)

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)

    def taken(self) -> list[str]:
        lines, self._lines = self._lines, []
        return lines


def same_tables(a: str, b: str, n: int) -> list[str]:
    """Tables t0..t{n-1} that differ between two targets (read with delta-rs, by id)."""
    from deltalake import DeltaTable

    def rows(path: str) -> list[dict[str, object]]:
        return sorted(DeltaTable(path, storage_options=options_for(path)).to_pyarrow_table()
                      .to_pylist(), key=lambda r: r["id"])

    return [f"t{i}" for i in range(n)
            if rows(f"{a}/public/t{i}") != rows(f"{b}/public/t{i}")]


# --- a backlog through the Spark path (one child process per code tree) ------------------

# What the child times per table, wrapped around the tree's own functions (thread-seconds,
# summed over the --parallel-tables threads): (module, owner or None, attribute, label).
# A module or attribute a tree lacks is left out: each step is named where main had it
# (`runtime/job.py`, `sinks/delta_sink.py`) and where it is now (`runtime/spark_path.py`,
# `sinks/delta/spark_writer.py`), so a before/after across the move times the same steps.
SPARK_STEPS = [
    ("spark_jobs.runtime.job", "BatchProcessor", "_incarnation", "incarnation"),
    ("spark_jobs.runtime.job", None, "table_facts", "decode+facts"),
    ("spark_jobs.runtime.spark_path", "SparkPath", "_incarnation", "incarnation"),
    ("spark_jobs.runtime.spark_path", None, "table_facts", "decode+facts"),
    *((module, owner, attr, label) for module in ("spark_jobs.sinks.delta_sink",
                                                  "spark_jobs.sinks.delta.spark_writer")
      for owner, attr, label in [
          ("SparkDeltaSink", "_load", "open table"),
          ("SparkDeltaSink", "_create", "create table"),
          (None, "_append", "append (write + commit)"),
          (None, "_create_holding", "create with rows (write+commit)"),
          (None, "_run", "MERGE"),
          ("SparkDeltaSink", "_create_tombstones", "create tombstones"),
          ("SparkDeltaSink", "apply", "apply (all of the sink)")]),
]


def _time_steps() -> dict[str, list[float]]:
    """Wrap SPARK_STEPS in this process; label -> [seconds, calls]."""
    import functools
    import importlib

    spent: dict[str, list[float]] = {}
    lock = threading.Lock()
    for module_name, owner_name, attr, label in SPARK_STEPS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError:
            continue
        owner = getattr(module, owner_name) if owner_name else module
        original = getattr(owner, attr, None)
        if original is None:
            continue
        spent.setdefault(label, [0.0, 0])

        def timed_call(*a: object, _f: object = original, _label: str = label,
                       **k: object) -> object:
            began = time.monotonic()
            try:
                return _f(*a, **k)  # type: ignore[operator]
            finally:
                with lock:
                    spent[_label][0] += time.monotonic() - began
                    spent[_label][1] += 1
        setattr(owner, attr, functools.wraps(original)(timed_call))
    return spent


def spark_backlog_child(spec_path: str) -> None:
    """Child process: a warm-up replay, then the measured available-now run through the Spark
    path; one JSON line `RESULT {...}` on stdout. Stops at `limit` seconds if not done."""
    import logging

    from devstack.spark import spark_jars
    from devstack.stack import cache_dir

    from spark_jobs.lake.phases import CLOCK
    from spark_jobs.runtime import job as job_module

    spec = json.loads(Path(spec_path).read_text())
    per_table: list[tuple[float, float]] = []  # (decoded in, written in) of each table

    class Lines(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "decoded in" in str(record.msg) and isinstance(record.args, tuple):
                per_table.append((float(record.args[-2]), float(record.args[-1])))  # type: ignore[arg-type]
    spark = local_session(spark_jars(cache_dir()), extra={**SPARK_EXTRA, **spec["spark"]})
    spark.sparkContext.setLogLevel("ERROR")
    fast_merge = spec.get("fast_merge", "off")
    for mode in dict.fromkeys(("off", fast_merge)):  # warm both paths the run may take
        run_merge(spark, MergeConfig(spec["bootstrap"], spec["registry"],
                                     f"{spec['target']}-warm-{mode}", topic_prefix=spec["warm"],
                                     replay=True, fast_merge=mode))
    logging.getLogger("spark_jobs.runtime.job").addHandler(Lines())  # the measured run's
    logging.getLogger("spark_jobs.runtime.job").setLevel(logging.INFO)
    spent = _time_steps()
    phases: dict[str, float] = {}
    observe = job_module.metrics.observe_phases
    job_module.metrics.observe_phases = lambda taken: (phases.update(taken), observe(taken))
    CLOCK.take()
    config = MergeConfig(spec["bootstrap"], spec["registry"], spec["target"],
                         topic_prefix=spec["prefix"], trigger="available-now",
                         fast_merge=fast_merge, parallel_tables=spec["parallel_tables"])
    load = load_average()
    requests = RequestLog(Path(spec["s3_log"])) if spec.get("s3_log") else None
    started = time.monotonic()
    query, processor = start_merge(spark, config)
    done_at: list[float] = []  # seconds from the start when each table was done
    while query.isActive:
        done = len(processor.stats.tables)
        done_at += [time.monotonic() - started] * (done - len(done_at))
        if time.monotonic() - started > spec["limit"]:
            break
        time.sleep(0.5)
    took = time.monotonic() - started
    finished = not query.isActive
    if finished and query.exception() is not None:
        raise RuntimeError(f"the streaming query failed: {query.exception()}")
    done = len(processor.stats.tables)
    done_at += [took] * (done - len(done_at))
    out = {"tree": spec["tree"], "store": spec["store"], "tables": spec["tables"],
           "fast_merge": fast_merge, "fast_tables": processor.stats.fast_tables,
           "events": spec["events"], "finished": finished, "seconds": took,
           "tables_done": done, "events_done": sum(processor.stats.tables.values()),
           "first_table_at": done_at[0] if done_at else None,
           "parallel_tables": config.tables_at_once(spark.sparkContext.defaultParallelism),
           "load_start": load, "load_end": load_average(),
           "phases": phases or CLOCK.take(), "steps": spent,
           "decode_s_mean": sum(d for d, _ in per_table) / max(1, len(per_table)),
           "write_s_mean": sum(w for _, w in per_table) / max(1, len(per_table)),
           "batch_seconds": [r.seconds for r in processor.stats.reports]}
    if requests is not None:
        out["requests"] = dict(requests.since_last())
    print("RESULT " + json.dumps(out), flush=True)
    # a run stopped at its limit still has tables queued on the job's threads: leave at once
    os._exit(0)


def spark_backlog(bootstrap: str, registry_url: str, work: Path, args: argparse.Namespace,
                  stores: list[str], s3_conf: dict[str, str]) -> None:
    """N new tables holding E events in all, each tree's job in a child process on the same
    topics (its own target), trees alternated per store and repeat."""
    n, events = args.spark_backlog, args.spark_backlog_events
    prefix = f"sbl{n}x{events}t{int(time.time())}"
    began = time.monotonic()
    tables = make_tables(bootstrap, registry_url, prefix, n, 1)
    produce(bootstrap, tables, events)
    warm = f"sblwarm{int(time.time())}"
    produce(bootstrap, make_tables(bootstrap, registry_url, warm, 5, 1), 500)
    print(f"  {n} topics, {events} events produced in {time.monotonic() - began:.1f} s "
          f"[load {load_average()}]", flush=True)
    trees = [str(Path(t).resolve()) for t in (args.spark_backlog_trees or [str(REPO)])]
    with ExitStack() as stack:
        if args.spark_backlog_cluster:  # every child's job on one standalone cluster
            from devstack.spark import standalone_cluster

            url = stack.enter_context(standalone_cluster(work / "cluster",
                                                         args.spark_backlog_cluster))
            print(f"  Spark standalone cluster {url}, {args.spark_backlog_cluster} worker(s) "
                  "of 1 core and 1g", flush=True)
            s3_conf = {**s3_conf, "spark.master": url}
        results = _spark_backlog_runs(bootstrap, registry_url, work, args, stores, s3_conf,
                                      prefix, warm, trees)
    _spark_backlog_table(results, n, events)


def _spark_backlog_runs(bootstrap: str, registry_url: str, work: Path, args: argparse.Namespace,
                        stores: list[str], s3_conf: dict[str, str], prefix: str, warm: str,
                        trees: list[str]) -> list[dict[str, object]]:
    import subprocess

    n, events = args.spark_backlog, args.spark_backlog_events
    results: list[dict[str, object]] = []
    for rep in range(args.spark_backlog_repeat):
        for store in stores:
            for tree in trees if rep % 2 == 0 else trees[::-1]:
                label = f"{Path(tree).name}-{store}-{rep}"
                root = "s3a://bench/sbl" if store == "s3" else str(work / "sbl")
                spec = {"tree": tree, "store": store, "tables": n, "events": events,
                        "bootstrap": bootstrap, "registry": registry_url, "prefix": prefix,
                        "warm": warm, "target": f"{root}/{label}",
                        "limit": args.spark_backlog_limit,
                        "parallel_tables": args.parallel_tables[0],
                        "fast_merge": args.spark_backlog_fast_merge,
                        "spark": s3_conf if store == "s3" else
                        {k: v for k, v in s3_conf.items() if k == "spark.master"},
                        "s3_log": str(S3_LOG) if store == "s3" and S3_LOG else None}
                spec_path = work / f"{label}.json"
                spec_path.write_text(json.dumps(spec))
                env = {**os.environ, "PGCDC_BENCH_TREE": tree}
                print(f"  run {label} [load {load_average()}] ...", flush=True)
                child = subprocess.run(
                    [sys.executable, __file__, "--spark-backlog-child", str(spec_path)],
                    env=env, cwd=tree, capture_output=True, text=True, check=False)
                found = [line for line in child.stdout.splitlines()
                         if line.startswith("RESULT ")]
                if not found:
                    print(f"  {label} failed (exit {child.returncode}):\n"
                          f"{child.stderr[-3000:]}", flush=True)
                    continue
                result = json.loads(found[-1][len("RESULT "):])
                results.append(result)
                print("  " + json.dumps(result), flush=True)
    return results


def _spark_backlog_table(results: list[dict[str, object]], n: int, events: int) -> None:
    print("| tree | store | fast merge | tables | events | finished | seconds | tables done "
          "| by delta-rs | s/table | projected s for all | parallel | load (start) |\n"
          "|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        done, secs = int(r["tables_done"]), float(r["seconds"])  # type: ignore[arg-type]
        first = float(r["first_table_at"] or 0.0)  # type: ignore[arg-type]
        # the batch's read before its first table, then the tables at the rate they went
        rate = (secs - first) / max(1, done - 1)
        projected = secs if r["finished"] else first + rate * (n - 1)
        print(f"| {Path(str(r['tree'])).name} | {r['store']} | {r['fast_merge']} | {n} | "
              f"{events} | {'yes' if r['finished'] else 'no (limit)'} | {secs:.1f} | {done} | "
              f"{r['fast_tables']} | "
              f"{secs / max(1, done):.2f} | {projected:.0f} | {r['parallel_tables']} | "
              f"{r['load_start']} |")


# --- freshness by an independent reader -----------------------------------------------------

def paced_producer(bootstrap: str, registry_url: str, prefix: str, rate: int, seconds: int,
                   out: str) -> None:
    """Child process: produce at `rate` events/s; pickle (table, LSN, sent) arrays to `out`."""
    tables = register_tables(registry_url, prefix)
    sent = (array("H"), array("q"), array("d"))
    started = time.time()
    produce(bootstrap, tables, rate * seconds, lsn_start=10**9, rate=rate, sent=sent)
    with open(out, "wb") as f:
        pickle.dump((sent, started, time.time()), f)


def frontier_reader(paths: list[str], stop: object, out: str, interval: float) -> None:
    """Child process, the independent reader: poll each Delta table with delta-rs and record
    (time.time(), max _cdc_commit_lsn) whenever it grows. The max comes from the files' stats
    in the Delta log (no data read)."""
    from deltalake import DeltaTable

    opened: list[DeltaTable | None] = [None] * len(paths)
    frontier = [0] * len(paths)
    seen: list[list[tuple[float, int]]] = [[] for _ in paths]
    polls, poll_seconds = 0, 0.0
    while not stop.is_set():  # type: ignore[attr-defined]
        began = time.time()
        for i, path in enumerate(paths):
            try:
                table = opened[i]
                if table is None:
                    options = options_for(path)  # the AWS variables, for a bucket
                    if not DeltaTable.is_deltatable(path, storage_options=options):
                        continue
                    table = opened[i] = DeltaTable(path, storage_options=options)
                else:
                    table.update_incremental()
                top = max_commit_lsn(table)
            except Exception as exc:  # noqa: BLE001 - a table being written: poll again
                print(f"reader: {path}: {exc}", file=sys.stderr)
                continue
            if top > frontier[i]:
                frontier[i] = top
                seen[i].append((time.time(), top))
        polls += 1
        poll_seconds += time.time() - began
        time.sleep(max(0.0, interval - (time.time() - began)))
    with open(out, "wb") as f:
        pickle.dump((seen, polls, poll_seconds), f)


def max_commit_lsn(table: DeltaTable) -> int:
    """The highest `_cdc_commit_lsn` of a delta-rs `DeltaTable`'s rows (0 if it has none),
    from the file statistics of its add actions in the Delta log: no data is read."""
    actions = table.get_add_actions(flatten=True)
    column = actions.column("max._cdc_commit_lsn").to_pylist()
    return max((v for v in column if v is not None), default=0)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def median(values: object) -> float:
    assert isinstance(values, list)
    return pct(values, 0.5) if values else 0.0


def freshness(spark: SparkSession, bootstrap: str, registry_url: str, work: Path, rate: int,
              seconds: int, trigger: str, fast: bool, drain: int, history: bool = False,
              root: str | None = None, store: str = "local") -> dict[str, object]:
    """The job streams (`trigger`) into 10 tables holding a 20k-event backlog while a child
    process produces `rate` events/s for `seconds` and another polls the tables (delta-rs).
    An event is visible once the reader sees its table's max LSN at or past the event's."""
    mode = ("fast" if fast else "off") + ("+history" if history else "") + f" {store}"
    prefix = f"fresh{mode.replace('+', '').replace(' ', '')}{int(time.time())}"
    make_tables(bootstrap, registry_url, prefix)
    produce(bootstrap, register_tables(registry_url, prefix), 20_000)
    target = f"{root or work}/{prefix}"
    config = MergeConfig(bootstrap, registry_url, str(target), topic_prefix=prefix,
                         trigger=trigger, fast_merge="auto" if fast else "off",
                         history=("*",) if history else ())
    query, processor = start_merge(spark, config)
    while not processor.stats.reports:  # the backlog: tables exist before the clock starts
        if query.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {query.exception()}")
        time.sleep(0.5)
    skip = len(processor.stats.reports)
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    paths = [f"{target}/public/t{i}" for i in range(TABLES)]
    reader_out, producer_out = str(work / f"{prefix}.reader"), str(work / f"{prefix}.sent")
    reader = ctx.Process(target=frontier_reader, args=(paths, stop, reader_out, 0.1))
    reader.start()
    load = load_average()
    producer = ctx.Process(target=paced_producer,
                           args=(bootstrap, registry_url, prefix, rate, seconds, producer_out))
    producer.start()
    producer.join()
    with open(producer_out, "rb") as f:
        sent, sent_from, sent_to = pickle.load(f)
    last = {t: lsn for t, lsn in zip(sent[0], sent[1], strict=True)}
    # drain: wait until the job has applied every event (or `drain` seconds)
    deadline = time.monotonic() + drain
    applied = 0
    while time.monotonic() < deadline and query.exception() is None:
        applied = sum(r.events for r in processor.stats.reports[skip:])
        if applied >= len(sent[0]):
            time.sleep(2)  # the reader's next polls
            break
        time.sleep(1)
    stop.set()
    reader.join()
    failed = query.exception()
    query.stop()
    processor.close()
    if failed is not None:
        raise RuntimeError(f"the streaming query failed: {failed}")
    with open(reader_out, "rb") as f:
        seen, polls, poll_seconds = pickle.load(f)
    ended = time.time()
    times = [[t for t, _ in s] for s in seen]
    tops = [[v for _, v in s] for s in seen]
    lags: list[float] = []
    unseen_lags: list[float] = []  # not seen by the end: lag so far (a lower bound)
    for t, lsn, at in zip(sent[0], sent[1], sent[2], strict=True):
        k = bisect.bisect_left(tops[t], lsn)
        if k < len(tops[t]):
            lags.append(times[t][k] - at)
        else:
            unseen_lags.append(ended - at)
    reports: list[BatchReport] = processor.stats.reports[skip:]
    busy = [r for r in reports if r.events]
    third = max(1, len(busy) // 3)
    out = {"mode": mode, "trigger": trigger, "rate": rate, "seconds": seconds, "load": load,
           "load_end": load_average(), "events": len(sent[0]),
           "achieved_rate": len(sent[0]) / (sent_to - sent_from),
           "seen": len(lags), "unseen": len(unseen_lags),
           "unseen_min_lag": min(unseen_lags, default=0.0),
           "p50": pct(lags, 0.5) if lags else None, "p90": pct(lags, 0.9) if lags else None,
           "p99": pct(lags, 0.99) if lags else None, "max": max(lags, default=None),
           "batches": len(busy), "fast_tables": processor.stats.fast_tables,
           "batch_events_median": pct([r.events for r in busy], 0.5) if busy else 0,
           "batch_s_first_third": [round(r.seconds, 2) for r in busy[:third]],
           "batch_s_last_third": [round(r.seconds, 2) for r in busy[-third:]],
           "reader_polls": polls, "reader_poll_s": poll_seconds / max(1, polls),
           "applied": applied, "last_lsn_per_table": len(last)}
    if lags:
        # freshness over time: p50/p99 of the events sent in each third of the run
        thirds = split_thirds(lags_by_time(sent, tops, times), sent[2], sent_from, sent_to)
        for part, chunk in enumerate(thirds):
            if chunk:
                out[f"freshness_third{part + 1}_p50_p99"] = (round(pct(chunk, 0.5), 2),
                                                             round(pct(chunk, 0.99), 2))
    print(f"  freshness {mode} (trigger {trigger}) at {rate}/s for {seconds} s [load {load}]: "
          f"{len(lags)} of {len(sent[0])} events seen, p50 {out['p50']}, p90 {out['p90']}, "
          f"p99 {out['p99']}; {len(busy)} batches of median {out['batch_events_median']} "
          f"events, batch s first third median {median(out['batch_s_first_third']):.2f}, "
          f"last third {median(out['batch_s_last_third']):.2f}", flush=True)
    print("  " + json.dumps(out, default=str), flush=True)
    return out


def lags_by_time(sent: tuple[array, array, array], tops: list[list[int]],
                 times: list[list[float]]) -> Iterator[float | None]:
    for t, lsn, at in zip(sent[0], sent[1], sent[2], strict=True):
        k = bisect.bisect_left(tops[t], lsn)
        yield times[t][k] - at if k < len(tops[t]) else None


def split_thirds(lags: Iterable[float | None], at: Iterable[float], started: float,
                 ended: float) -> list[list[float]]:
    """The lags (None: never seen, left out) in three lists by the third of [started, ended]
    their `at` time falls in."""
    span = (ended - started) / 3
    thirds: list[list[float]] = [[], [], []]
    for lag, when in zip(lags, at, strict=True):
        if lag is not None:
            thirds[min(2, int((when - started) / span))].append(lag)
    return thirds


def backlog(spark: SparkSession, bootstrap: str, registry_url: str, work: Path,
            args: argparse.Namespace) -> None:
    """The original runs: one backlog of `--events` over 10 tables, four ways."""
    prefix = f"bench{int(time.time())}"
    tables = make_tables(bootstrap, registry_url, prefix)
    print(f"producing {args.events} events over {TABLES} tables ...", flush=True)
    started = time.monotonic()
    produce(bootstrap, tables, args.events)
    print(f"  produced in {time.monotonic() - started:.1f} s [load {load_average()}]",
          flush=True)
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
    base = took["append to Delta, no merge (baseline)"]
    print(f"\n{args.events} events, {TABLES} tables x {PARTITIONS} partitions "
          f"(30% insert / 60% update / 10% delete); t0 holds {rows} rows after the merge; "
          f"one-batch and 5-batch tables {'equal' if same else 'DIFFER'}")
    print("| run | seconds | events/s | time vs baseline |\n|---|---:|---:|---:|")
    for label, secs in took.items():
        print(f"| {label} | {secs:.1f} | {args.events / secs:,.0f} | {secs / base:.2f}x |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=1_000_000, help="backlog events, 0 = skip")
    p.add_argument("--max-offsets-per-trigger", type=int, default=0,
                   help="bound the backlog's batches (default 0: one batch)")
    p.add_argument("--many-tables", type=int, default=0, metavar="N",
                   help="N tables, a few changes each, one batch (fast path); 0 = skip")
    p.add_argument("--many-tables-baseline", type=int, default=40, metavar="N",
                   help="tables for the --fast-merge off run (~3-5 s per table); 0 = skip")
    p.add_argument("--freshness-rate", type=int, default=0, help="events/s, 0 = skip")
    p.add_argument("--freshness-seconds", type=int, default=60)
    p.add_argument("--freshness-baseline-seconds", type=int, default=None,
                   help="production time of the --fast-merge off freshness run (default: "
                   "--freshness-seconds); 0 = skip it")
    p.add_argument("--freshness-drain", type=int, default=120,
                   help="seconds to wait after producing for the job to apply everything")
    p.add_argument("--trigger", default="1s", help="the freshness runs' trigger")
    p.add_argument("--freshness-history", action="store_true",
                   help="also a fast-path freshness run with --history '*' (all 10 tables)")
    p.add_argument("--store", choices=("local", "s3", "both"), default="local",
                   help="where the --many-tables and --freshness lakes live: local disk, a "
                        "bucket of a throwaway S3 server (--s3-server), or both in the same run")
    add_s3_server_option(p)
    p.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting for every run (repeatable), e.g. an S3A option")
    p.add_argument("--off-store", choices=("local", "s3"), default="local",
                   help="where the --fast-merge off baseline of --many-tables writes "
                        "(s3 needs --store s3 or both)")
    p.add_argument("--parallel-tables", type=lambda v: [int(x) for x in v.split(",")],
                   default=[0], metavar="N[,N...]",
                   help="the runs' --parallel-tables (default: the job's own); several, "
                        "comma-separated: --many-tables runs once with each, in that order "
                        "(e.g. 2,4,8,8,4,2 for an A B B A comparison in one run)")
    p.add_argument("--io-tables", type=lambda v: [int(x) for x in v.split(",")],
                   default=[0], metavar="N[,N...]",
                   help="the --many-tables runs' --io-tables (default: the job's own, by the "
                        "store); several: once with each, in that order (2,32,32,2: A B B A)")
    p.add_argument("--spark-backlog", type=int, default=0, metavar="N",
                   help="N new tables, one available-now batch through the Spark path; 0 = skip")
    p.add_argument("--spark-backlog-events", type=int, default=150_000,
                   help="events of the --spark-backlog tables in all")
    p.add_argument("--spark-backlog-trees", type=lambda v: v.split(","), default=None,
                   help="comma-separated code trees (git worktrees) to run it on, alternated "
                        "(default: this one)")
    p.add_argument("--spark-backlog-limit", type=float, default=1800,
                   help="stop a --spark-backlog run after this many seconds")
    p.add_argument("--spark-backlog-repeat", type=int, default=1,
                   help="runs per tree and store (the trees' order alternates)")
    p.add_argument("--spark-backlog-cluster", type=int, default=0, metavar="WORKERS",
                   help="run the Spark-path backlog on a standalone cluster of this many "
                        "workers (1 core, 1g each) instead of local[2]")
    p.add_argument("--spark-backlog-fast-merge", choices=("off", "auto"), default="off",
                   help="the --spark-backlog runs' --fast-merge: off (default: every table "
                        "through Spark, as a cluster without delta-rs) or auto (the job's "
                        "default config: delta-rs for what it takes)")
    p.add_argument("--spark-backlog-child", metavar="SPEC", help=argparse.SUPPRESS)
    p.add_argument("--bootstrap-servers")
    p.add_argument("--schema-registry-url")
    args = p.parse_args()
    if args.spark_backlog_child:
        spark_backlog_child(args.spark_backlog_child)
        return

    from devstack.spark import spark_jars
    from devstack.stack import cache_dir

    work = Path(tempfile.mkdtemp(prefix="pgcdc-bench-work-"))
    print(f"start [load {load_average()}]", flush=True)
    stores = ["local", "s3"] if args.store == "both" else [args.store]
    with servers(args) as (bootstrap, registry_url), object_store(work, "s3" in stores,
                                                                       args.s3_server,
                                                                       args.s3_latency_ms) as s3:
        roots = {"local": str(work), "s3": "s3a://bench/work"}
        chosen = dict(kv.split("=", 1) for kv in args.spark_conf)
        if args.spark_backlog:  # its runs are child processes: before this one's Spark
            print(f"\nSpark-path backlog [load {load_average()}]:", flush=True)
            spark_backlog(bootstrap, registry_url, work, args, stores, {**s3, **chosen})
            if not (args.events or args.many_tables or args.freshness_rate):
                shutil.rmtree(work, ignore_errors=True)
                return
        spark = local_session(spark_jars(cache_dir()), extra={**SPARK_EXTRA, **s3, **chosen})
        spark.sparkContext.setLogLevel("ERROR")
        # warm-up (JVM, codegen) on a tiny separate prefix so no run pays it alone
        warm = f"warm{int(time.time())}"
        produce(bootstrap, make_tables(bootstrap, registry_url, warm), 2000)
        run_merge(spark, MergeConfig(bootstrap, registry_url, str(work / "warm"),
                                     topic_prefix=warm, replay=True))
        conf = {k: spark.conf.get(k) for k in sorted({**LOCAL_CONF, **SPARK_EXTRA, **chosen})
                if k != "spark.driver.memory"}
        conf["spark.driver.memory"] = SPARK_EXTRA["spark.driver.memory"]
        conf["master"] = spark.sparkContext.master
        conf["maxOffsetsPerTrigger"] = str(args.max_offsets_per_trigger or "unbounded")
        print(f"Spark: {json.dumps(conf)}", flush=True)
        if args.events:
            backlog(spark, bootstrap, registry_url, work, args)
        if args.many_tables:
            print(f"\nmany tables [load {load_average()}]:", flush=True)
            runs = [many_tables(spark, bootstrap, registry_url, roots[store], args.many_tables,
                                True, store, parallel, io)
                    for store in stores for parallel in args.parallel_tables
                    for io in args.io_tables]
            if args.many_tables_baseline:
                small = args.many_tables_baseline
                if small != args.many_tables:
                    runs.append(many_tables(spark, bootstrap, registry_url, str(work), small,
                                            True))
                off_root = roots[args.off_store]
                runs.append(many_tables(spark, bootstrap, registry_url, off_root, small, False,
                                        args.off_store))
                differ = same_tables(str(runs[-2]["path"]), str(runs[-1]["path"]), small)
                print(f"  fast vs off, {small} tables after 2 batches: "
                      f"{'equal' if not differ else f'DIFFER: {differ}'}", flush=True)
            print("| path | store | parallel | tables | batch | events | seconds | tables/s | "
                  "s/table | fast_tables | load |\n"
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
            for r in runs:
                for round_ in (1, 2):
                    d = r[f"r{round_}"]
                    assert isinstance(d, dict)
                    n = int(r["tables"])  # type: ignore[call-overload]
                    print(f"| {r['mode']} | {r['store']} | {r['parallel']} | {n} | {round_} | "
                          f"{d['events']} | "
                          f"{d['seconds']:.1f} | {n / d['seconds']:.1f} | "
                          f"{d['seconds'] / n:.3f} | {d['fast_tables']} | {d['load']} |")
        if args.freshness_rate:
            print(f"\nfreshness [load {load_average()}]:", flush=True)
            fresh = [freshness(spark, bootstrap, registry_url, work, args.freshness_rate,
                               args.freshness_seconds, args.trigger, True,
                               args.freshness_drain, root=roots[store], store=store)
                     for store in stores]
            off_seconds = (args.freshness_seconds if args.freshness_baseline_seconds is None
                           else args.freshness_baseline_seconds)
            if args.freshness_history:  # the same with a history table of all 10 tables
                fresh.append(freshness(spark, bootstrap, registry_url, work,
                                       args.freshness_rate, args.freshness_seconds,
                                       args.trigger, True, args.freshness_drain, history=True))
            if off_seconds:
                fresh.append(freshness(spark, bootstrap, registry_url, work,
                                       args.freshness_rate, off_seconds, args.trigger, False,
                                       args.freshness_drain))
            print("| path | trigger | produced s | load | events seen / sent | p50 s | p90 s | "
                  "p99 s | batches | median batch events | batch s (first third) | "
                  "batch s (last third) |\n|---|---|---:|---|---:|---:|---:|---:|---:|---:|"
                  "---:|---:|")
            for f in fresh:
                first, last = f["batch_s_first_third"], f["batch_s_last_third"]
                assert isinstance(first, list) and isinstance(last, list)

                def fmt(x: object) -> str:
                    return "-" if x is None else f"{x:.1f}"

                print(f"| {f['mode']} | {f['trigger']} | {f['seconds']} | {f['load']} | "
                      f"{f['seen']} / {f['events']} | {fmt(f['p50'])} | {fmt(f['p90'])} | "
                      f"{fmt(f['p99'])} | {f['batches']} | {f['batch_events_median']} | "
                      f"{pct(first, 0.5) if first else 0:.2f} | "
                      f"{pct(last, 0.5) if last else 0:.2f} |")
        spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

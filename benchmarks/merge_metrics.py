"""What the merge job's metrics cost per batch (issue 38: at most 2% of batch time).

Measured for a batch of T tables (default 500, the many-tables benchmark's size):

* **bookkeeping**: everything the job does per batch for its metrics (`BatchProcessor._observe`
  and `observe_phases`: counters and the batch histogram, bytes and dead letters per topic,
  each table's freshness, the log warnings) plus the phase clock around each table's decode
  and merge, on the driver in Python;
* **a scrape**: rendering /metrics with every series those T tables create (Prometheus scrapes
  every 15-60 s, on the server's own thread);
* **bytes read**: the one aggregate the batch summary gained (`sum(octet_length(key) +
  octet_length(value))`), as Spark job time: the summary with it against the summary without
  it (the baseline, same run, alternated), over R Kafka-like records in T topics, the batch
  cached and the summary its first action, as in the job.

Each is printed against the 500-table MERGE batch (`--batch-seconds`, default 30.7 s: the
current figure of `benchmarks/merge.py --many-tables 500` in benchmarks/README.md).

    .venv/bin/python benchmarks/merge_metrics.py [--tables 500] [--records 200000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "scripts")]

from prometheus_client import REGISTRY, disable_created_metrics, generate_latest  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from spark_jobs.lake.phases import PhaseClock  # noqa: E402
from spark_jobs.runtime import metrics  # noqa: E402


def bookkeeping(tables: int, batches: int) -> float:
    """Median seconds of one batch's metrics work for `tables` tables."""
    state, watch, clock = metrics.BatchMetrics(), metrics.Watch(10.0), PhaseClock()
    names = [f"public/t{i}" for i in range(tables)]
    summary = [{"topic": f"pgcdc.public.t{i}", "bytes": 4096, "newest": 1} for i in
               range(tables)]
    dead = {(f"pgcdc.public.t{i}", "schema id 7 not in the registry"): 1 for i in range(5)}
    took: list[float] = []
    for batch in range(batches):
        started = time.perf_counter()
        for name in names:  # what each table's part adds: decode and merge timed
            with clock.timing("merge"):
                with clock.timing("decode"):
                    pass
            metrics.TABLE_BATCHES.labels(name, "delta-rs").inc()
            metrics.EVENTS.labels(name).inc(3)
        metrics.BATCHES.inc()
        metrics.BATCH_SECONDS.observe(1.0)
        for row in summary:
            metrics.READ_BYTES.labels(row["topic"]).inc(row["bytes"])
        for (topic, _), count in dead.items():
            metrics.DEAD_LETTERS.labels(topic).inc(count)
        watch.dead_letters(dead, "/lake/_pgcdc/dead_letter")
        lags = state.observe_batch(1_000 * (batch + 1), names, [])
        metrics.publish(state, lags)
        watch.batch(1.0, [], {}, names)
        metrics.observe_phases(clock.take())
        took.append(time.perf_counter() - started)
    return statistics.median(took)


def scrape(times: int) -> tuple[float, int]:
    """Median seconds to render /metrics, and its size in bytes."""
    took, size = [], 0
    for _ in range(times):
        started = time.perf_counter()
        size = len(generate_latest(REGISTRY))
        took.append(time.perf_counter() - started)
    return statistics.median(took), size


def bytes_aggregate(tables: int, records: int, reps: int) -> tuple[float, float]:
    """Median seconds of the batch summary without and with the bytes sum (alternated)."""
    spark = (SparkSession.builder.master("local[2]").appName("pgcdc-merge-metrics-bench")
             .config("spark.ui.enabled", "false").getOrCreate())

    def summary(with_bytes: bool) -> float:
        """As the job does: the batch cached, the summary its first action (so it reads the
        records: here, computes them)."""
        frames = spark.range(records).select(
            F.concat(F.lit("pgcdc.public.t"), (F.col("id") % tables).cast("string")
                     ).alias("topic"),
            F.lit(None).cast("string").alias("problem"),
            (F.col("id") % 3).alias("sid"), F.lit(1).alias("kid"),
            F.current_timestamp().alias("timestamp"),
            F.unhex(F.md5(F.col("id").cast("string"))).alias("key"),
            F.unhex(F.sha2(F.col("id").cast("string"), 512)).alias("value"),
        ).persist()
        columns = [F.count(F.lit(1)).alias("n"),
                   F.unix_millis(F.min("timestamp")).alias("oldest"),
                   F.unix_millis(F.max("timestamp")).alias("newest")]
        if with_bytes:
            columns.append(F.sum(F.coalesce(F.octet_length("key"), F.lit(0))
                                 + F.coalesce(F.octet_length("value"), F.lit(0))
                                 ).alias("bytes"))
        started = time.perf_counter()
        frames.groupBy("topic", "problem", "sid", "kid").agg(*columns).collect()
        took = time.perf_counter() - started
        frames.unpersist()
        return took

    summary(False), summary(True)  # warm-up: code generation
    without, with_ = [], []
    for _ in range(reps):
        without.append(summary(False))
        with_.append(summary(True))
    spark.stop()
    return statistics.median(without), statistics.median(with_)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=500)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--batch-seconds", type=float, default=30.7,
                        help="the batch time to compare with (500-table MERGE batch)")
    args = parser.parse_args()
    book = bookkeeping(args.tables, args.batches)
    disable_created_metrics()  # as metrics.serve does
    render, size = scrape(20)
    plain, counted = bytes_aggregate(args.tables, args.records, args.reps)
    extra = max(0.0, counted - plain)
    print(f"{args.tables} tables, {args.records} records, batch of {args.batch_seconds} s")
    print("| what | per batch | share of the batch |")
    print("|---|---|---|")
    print(f"| metrics bookkeeping (driver) | {book * 1000:.1f} ms | "
          f"{book / args.batch_seconds:.3%} |")
    print(f"| one scrape ({size / 1024:.0f} KB; not per batch: once per scrape interval) | "
          f"{render * 1000:.1f} ms | {render / args.batch_seconds:.3%} |")
    print(f"| bytes read: summary {plain:.3f} s -> {counted:.3f} s (baseline: without) | "
          f"{extra * 1000:.0f} ms | {extra / args.batch_seconds:.3%} |")
    total = book + render + extra
    print(f"| all | {total * 1000:.0f} ms | **{total / args.batch_seconds:.2%}** |")


if __name__ == "__main__":
    main()

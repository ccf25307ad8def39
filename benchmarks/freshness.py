"""End-to-end freshness: PostgreSQL commit -> row readable in Delta by an independent reader.

The whole product on one machine (issue 19's goal): PostgreSQL, Kafka and the registry started
as benchmarks/producer.py starts them, `pgcdc run` as a subprocess with the settings a user
gets by default (one partition per topic, initial snapshot) but heartbeats, off unless
`--heartbeat-interval-s` (the producer's default is 10 s; off keeps the runs comparable with
those before it), and the merge job streaming in this process (`start_merge`, fast
path, `--trigger 1s`, local[2]). A writer process commits at `--rate` changes/s; a reader
process polls the Delta tables with delta-rs (merge.py's `frontier_reader`). Then the same with
`MergeConfig(fast_merge="off")` for `--baseline-seconds`, on its own schema, slot, topics and
target, in the same invocation.

    PGCDC_STACK_CACHE=... .venv/bin/python benchmarks/freshness.py [--rate 5000]
        [--seconds 600] [--baseline-seconds 90] [--pg 18] [--store local|s3|both]

`--store s3` puts the fast path's lake (and the job's checkpoint) in a bucket of a throwaway
S3 server (moto, as the tests, or s3proxy with `--s3-server s3proxy`); `both` runs it on local
disk and on S3 in one invocation.

**Workload.** Ten tables `<schema>.t0..t9` with merge.py's columns (bigint key, text, int,
numeric(12,2), timestamptz, text), `--seed-rows` rows each before pgcdc starts: they reach
Kafka through pgcdc's initial snapshot, and the clock starts once the job has applied them (so
every Delta table exists and the JVM is warm). The writer (one psycopg connection, serial)
commits transactions of 50 changes, each to one random table: 15 inserts of new keys, 30
updates of distinct random live keys, 5 deletes of other live keys (merge.py's 30/60/10 mix),
paced to `--rate`; with `--steady`, 10 inserts, 30 updates and 10 deletes, so every table keeps
its `--seed-rows` size and batch time over a long run shows drift rather than data growth.
One table per transaction, not 50 changes spread over the 10 tables: then a
transaction's freshness is that of one table (no max over tables to define), and every
transaction writes rows of its table (a table's part of a spread transaction could be deletes
only, which leave no row carrying its LSN). For each transaction the writer records the table,
the wall time just after COMMIT returned, and `pg_current_wal_lsn()` read right after it in the
same session.

**Why a table's max `_cdc_commit_lsn` tells when a transaction is applied.** Let p(i) be the
LSN read after transaction i committed (p(-1): read before the first) and c(i) the LSN of its
commit record, which pgcdc writes as `_cdc_commit_lsn` on each of its rows.
- c(j) <= p(j): COMMIT returns only once its commit record is written, and pg_current_wal_lsn()
  is the WAL write position. The writer is the only writer and serial, so every transaction
  j < i has c(j) <= p(j) <= p(i-1).
- c(i) > p(i-1): transaction i's changes are WAL-logged after p(i-1) was read (same session),
  at or past the insert position of that moment, which is at or past the write position
  p(i-1); its commit record follows them.
So a row of table T with `_cdc_commit_lsn` > p(i-1) was written by a transaction j >= i.
pgcdc publishes in commit order, the topic has one partition, and the job applies a topic's
records in offset order, a batch's changes to a table in one table commit; so once such a row
is readable, all of transaction i's changes to T are too. And transaction i's own inserts and
updates carry c(i) > p(i-1), so the condition holds as soon as i is applied. Hence
freshness(i) = (first reader poll where T's max `_cdc_commit_lsn` > p(i-1)) - commit time of
i. The reader keeps the running max over its polls (a later delete may lower the files' max;
what it saw stays true). Error: the reader's poll interval (0.1 s plus the poll, ~50 ms), and
the commit time is taken after COMMIT's round trip (sub-millisecond here).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import pickle
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "scripts"), str(REPO / "benchmarks")]

import psycopg  # noqa: E402
from deltalake import DeltaTable  # noqa: E402
from merge import (  # noqa: E402
    COLUMNS,
    SPARK_EXTRA,
    TABLES,
    add_s3_server_option,
    frontier_reader,
    lags_by_time,
    load_average,
    max_commit_lsn,
    object_store,
    pct,
    split_thirds,
)
from producer import PGCDC, Stack, _proc_stats, drop_slot, servers, sql  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from spark_jobs.lake.storage import options_for  # noqa: E402
from spark_jobs.runtime.config import MergeConfig  # noqa: E402
from spark_jobs.runtime.job import BatchReport  # noqa: E402
from spark_jobs.runtime.query import start_merge  # noqa: E402
from spark_jobs.runtime.session import local_session  # noqa: E402

GROWING = (15, 30, 5)  # one transaction's inserts, updates, deletes: merge.py's 30/60/10 mix
STEADY = (10, 30, 10)  # as many inserts as deletes: every table keeps its size (--steady)
CHANGES = 50  # changes per transaction, in either mix
READER_INTERVAL = 0.1
POST_COMMIT_LSN = "SELECT pg_current_wal_lsn() - '0/0'"


def table_paths(target: str, schema: str) -> list[str]:
    """The merge job's Delta table of each source table: <target>/<schema>/<table>."""
    return [f"{target}/{schema}/t{i}" for i in range(TABLES)]


def _delta(path: str) -> DeltaTable:
    return DeltaTable(path, storage_options=options_for(path))  # a bucket: the AWS variables


def create_tables(dsn: str, schema: str, seed_rows: int) -> None:
    """`schema`.t0..t9 with merge.py's columns, keys 0..seed_rows-1 in each."""
    columns = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)
    statements = [f"CREATE SCHEMA {schema}"]
    for i in range(TABLES):
        statements += [f"CREATE TABLE {schema}.t{i} ({columns}, PRIMARY KEY (id))",
                       f"INSERT INTO {schema}.t{i} SELECT k, 'name-' || k || '-0', 0, k % 1000, "
                       f"now(), repeat('x', 40) FROM generate_series(0, {seed_rows - 1}) k"]
    sql(dsn, *statements)


# --- the writer ------------------------------------------------------------------------------

def write_transactions(dsn: str, schema: str, seed_rows: int, rate: int, seconds: float,
                       mix: tuple[int, int, int], out: str) -> None:
    """Child process: commit `CHANGES`-change transactions of `mix` (inserts, updates,
    deletes) on random tables at `rate` changes/s for `seconds`; pickle to `out` (tables,
    thresholds, commit times, post-commit LSNs) as arrays, one entry per transaction, plus
    (started, ended, seconds behind schedule at worst). A transaction's threshold is
    p(i-1) + 1: its table's max `_cdc_commit_lsn` reaches it exactly when
    the transaction is applied (module docstring)."""
    rnd = random.Random(7)
    live = [list(range(seed_rows)) for _ in range(TABLES)]
    next_key = [seed_rows] * TABLES
    tables, thresholds, committed, lsns = array("H"), array("q"), array("d"), array("q")
    behind = 0.0
    with psycopg.connect(dsn, autocommit=True) as conn:
        previous = post_commit_lsn(conn)
        started, clock = time.time(), time.monotonic()
        txns = int(seconds * rate / CHANGES)
        for n in range(txns):
            delay = clock + n * CHANGES / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                behind = max(behind, -delay)
            t = rnd.randrange(TABLES)
            with conn.transaction():
                write_changes(conn, f"{schema}.t{t}", live[t], next_key[t], n, rnd, mix)
            committed.append(time.time())
            next_key[t] += mix[0]
            lsn = post_commit_lsn(conn)
            tables.append(t)
            thresholds.append(previous + 1)
            lsns.append(lsn)
            previous = lsn
    with open(out, "wb") as f:
        pickle.dump(((tables, thresholds, committed, lsns), started, time.time(), behind), f)


def write_changes(conn: psycopg.Connection, table: str, live: list[int], next_key: int,
                  version: int, rnd: random.Random, mix: tuple[int, int, int]) -> None:
    """One transaction's changes to `table`: `mix` = (inserts of new keys from `next_key`,
    updates and deletes of distinct keys drawn from `live`, which this keeps up to date).
    Values as merge.py's `row(key, version)`."""
    inserts, updates, deletes = mix
    picked = rnd.sample(range(len(live)), updates + deletes)
    updated = [live[i] for i in picked[:updates]]
    deleted = [live[i] for i in picked[updates:]]
    for i in sorted(picked[updates:], reverse=True):  # swap-remove, highest index first
        live[i] = live[-1]
        live.pop()
    inserted = list(range(next_key, next_key + inserts))
    live.extend(inserted)
    conn.execute(f"INSERT INTO {table} SELECT k, 'name-' || k || '-0', 0, k %% 1000, now(), "  # type: ignore[arg-type]
                 "repeat('x', 40) FROM unnest(%s::bigint[]) k", (inserted,))
    conn.execute(f"UPDATE {table} SET name = 'name-' || id || '-' || %s::int, qty = %s::int, "  # type: ignore[arg-type]
                 "price = id %% 1000 + (%s::int %% 100) / 100.0, updated = now() "
                 "WHERE id = ANY(%s::bigint[])", (version, version, version, updated))
    conn.execute(f"DELETE FROM {table} WHERE id = ANY(%s::bigint[])", (deleted,))  # type: ignore[arg-type]


def post_commit_lsn(conn: psycopg.Connection) -> int:
    row = conn.execute(POST_COMMIT_LSN).fetchone()
    assert row is not None
    return int(row[0])


# --- one path ---------------------------------------------------------------------------------

@dataclass
class PathResult:
    """What one path's run measured (per transaction of CHANGES changes)."""

    mode: str
    seconds: float
    rate: int
    load_start: str
    load_end: str
    achieved_rate: float
    writer_behind_s: float
    txns: int
    seen: int  # transactions the reader saw applied
    unseen_min_lag_s: float | None  # of the others, the least time waited (a lower bound)
    job_events: int  # events in the job's batches since the clock started
    lags: list[float]  # freshness of every seen transaction, in commit order
    thirds: list[list[float]]  # the same by third of the run
    batch_seconds: list[float]  # batches with events, in order
    batch_events: list[int]
    reader_polls: int
    reader_poll_s: float
    pgcdc_cpu_share: float  # pgcdc's CPU seconds / wall seconds while the writer ran
    slot_lag_mb_max: float  # pg_current_wal_lsn() - confirmed_flush_lsn, sampled every 5 s
    tombstones: int  # tombstone rows left in the 10 tables' tombstone tables at the end

    def batch_sixths(self) -> list[tuple[float, float, float]]:
        """(median, min, max) seconds of each sixth of the batches (with events), in order."""
        n = len(self.batch_seconds)
        parts = [self.batch_seconds[n * k // 6:n * (k + 1) // 6] for k in range(6)]
        return [(pct(b, 0.5), min(b), max(b)) for b in parts if b]

    def batch_medians(self) -> tuple[float, float]:
        """Median seconds of the first and of the last third of the batches (with events)."""
        third = max(1, len(self.batch_seconds) // 3)
        first, last = self.batch_seconds[:third], self.batch_seconds[-third:]
        return pct(first, 0.5) if first else 0.0, pct(last, 0.5) if last else 0.0


def run_path(spark: SparkSession, stack: Stack, work: Path, args: argparse.Namespace,
             fast: bool, seconds: int, root: str | None = None, store: str = "local"
             ) -> PathResult:
    """One path end to end on its own schema, slot, publication, topic prefix and target
    (all named `e2e_<mode>[_s3]`, the target under `root`); stops everything it started."""
    mode = ("fast" if fast else "off") + ("" if store == "local" else f" {store}")
    name = f"e2e_{mode.replace(' ', '_')}"
    create_tables(stack.dsn, name, args.seed_rows)
    target = f"{root or work}/{name}"
    paths = table_paths(target, name)
    with open(work / f"{name}.pgcdc.log", "w") as log:
        pgcdc = subprocess.Popen(
            [PGCDC, "run", "--dsn", stack.dsn, "--bootstrap-servers", stack.bootstrap,
             "--schema-registry-url", stack.registry, "--topic-prefix", name, "--slot", name,
             "--publication", name, "--tables", f"{name}.*",
             "--heartbeat-interval-s", str(args.heartbeat_interval_s)],
            stdout=log, stderr=subprocess.STDOUT)
    config = MergeConfig(stack.bootstrap, stack.registry, target, topic_prefix=name,
                         trigger=args.trigger, fast_merge="auto" if fast else "off")
    query, processor = start_merge(spark, config)
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    reader_out, writer_out = str(work / f"{name}.reader"), str(work / f"{name}.writer")
    reader = ctx.Process(target=frontier_reader, args=(paths, stop, reader_out, READER_INTERVAL),
                         daemon=True)
    writer = ctx.Process(target=write_transactions, daemon=True,
                         args=(stack.dsn, name, args.seed_rows, args.rate, seconds,
                               STEADY if args.steady else GROWING, writer_out))

    def alive() -> None:
        if pgcdc.poll() is not None:
            raise RuntimeError(f"pgcdc exited {pgcdc.returncode}; see {log.name}")
        if query.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {query.exception()}")

    try:
        wait_for_snapshot(processor.stats.reports, args.seed_rows * TABLES, alive)
        skip = len(processor.stats.reports)
        reader.start()
        load_start = load_average()
        cpu_before = _proc_stats(pgcdc.pid)[0]
        writer.start()
        slot_lag = 0.0
        while writer.is_alive():
            alive()
            slot_lag = max(slot_lag, slot_lag_mb(stack.dsn, name))
            writer.join(5)
        if writer.exitcode != 0:
            raise RuntimeError(f"the writer exited {writer.exitcode}")
        with open(writer_out, "rb") as f:
            (tables, thresholds, committed, _), started, ended, behind = pickle.load(f)
        cpu_share = (_proc_stats(pgcdc.pid)[0] - cpu_before) / (ended - started)
        drain(paths, tables, thresholds, args.drain, alive)
        time.sleep(2 * READER_INTERVAL + 1)  # the reader's next polls
        stop.set()
        stopped = time.time()
        reader.join()
        alive()
    finally:
        if writer.is_alive():  # only after a failure elsewhere
            writer.terminate()
        stop.set()
        pgcdc.send_signal(signal.SIGTERM)
        pgcdc.wait(120)
        query.stop()
        processor.close()
    drop_slot(stack.dsn, name)
    with open(reader_out, "rb") as f:
        seen, polls, poll_seconds = pickle.load(f)
    times = [[t for t, _ in s] for s in seen]
    tops = [[v for _, v in s] for s in seen]
    lags = list(lags_by_time((tables, thresholds, committed), tops, times))
    reports: list[BatchReport] = processor.stats.reports[skip:]
    busy = [r for r in reports if r.events]
    return PathResult(
        mode=mode, seconds=seconds, rate=args.rate, load_start=load_start,
        load_end=load_average(), achieved_rate=len(tables) * CHANGES / (ended - started),
        writer_behind_s=behind, txns=len(tables), seen=sum(x is not None for x in lags),
        unseen_min_lag_s=min((stopped - at for lag, at in zip(lags, committed, strict=True)
                              if lag is None), default=None),
        job_events=sum(r.events for r in reports),
        lags=[x for x in lags if x is not None],
        thirds=split_thirds(lags, committed, started, ended),
        batch_seconds=[r.seconds for r in busy], batch_events=[r.events for r in busy],
        reader_polls=polls, reader_poll_s=poll_seconds / max(1, polls),
        pgcdc_cpu_share=cpu_share, slot_lag_mb_max=slot_lag,
        tombstones=tombstones_left(target, name))


def tombstones_left(target: str, schema: str) -> int:
    """Tombstone rows in the tables' tombstone tables (`<target>/_pgcdc/tombstones/...`): with
    heartbeats they are expired as the job goes (spark_jobs/rules/expiry.py), without they grow by
    every delete."""
    paths = [f"{target}/_pgcdc/tombstones/{schema}/t{i}" for i in range(TABLES)]
    return sum(_delta(p).to_pyarrow_dataset().count_rows() for p in paths
               if DeltaTable.is_deltatable(p, storage_options=options_for(p)))


def wait_for_snapshot(reports: list[BatchReport], events: int, alive: Callable[[], None],
                      timeout: float = 600) -> None:
    """Until the job has applied `events` events (the initial snapshot of the seed rows)."""
    deadline = time.monotonic() + timeout
    while sum(r.events for r in reports) < events:
        alive()
        if time.monotonic() > deadline:
            raise RuntimeError(f"the job applied {sum(r.events for r in reports)} of the "
                               f"snapshot's {events} events in {timeout} s")
        time.sleep(0.5)


def drain(paths: list[str], tables: array, thresholds: array, timeout: float,
          alive: Callable[[], None]) -> None:
    """Until each table's last transaction is applied (its max `_cdc_commit_lsn` reached the
    transaction's threshold), or `timeout` seconds."""
    last = {t: threshold for t, threshold in zip(tables, thresholds, strict=True)}
    deadline = time.monotonic() + timeout
    while last and time.monotonic() < deadline:
        alive()
        last = {t: threshold for t, threshold in last.items()
                if max_commit_lsn(_delta(paths[t])) < threshold}
        time.sleep(1)


def slot_lag_mb(dsn: str, slot: str) -> float:
    rows = sql(dsn, "SELECT pg_current_wal_lsn() - confirmed_flush_lsn FROM "
               f"pg_replication_slots WHERE slot_name = '{slot}'")
    return float(rows[0][0] or 0) / 2**20 if rows else 0.0


# --- report ------------------------------------------------------------------------------------

def quantiles(lags: list[float]) -> str:
    """p50 / p90 / p99 / max, in seconds."""
    if not lags:
        return "- / - / - / -"
    return " / ".join(f"{x:.1f}" for x in (pct(lags, 0.5), pct(lags, 0.9), pct(lags, 0.99),
                                            max(lags)))


def print_path(r: PathResult) -> None:
    print(f"\n{r.mode}: {r.seconds} s at {r.rate}/s (achieved {r.achieved_rate:,.0f}/s, writer "
          f"at most {r.writer_behind_s:.2f} s behind schedule) [load {r.load_start} -> "
          f"{r.load_end}]", flush=True)
    print(f"  transactions seen / committed: {r.seen} / {r.txns} ({r.seen * CHANGES:,} / "
          f"{r.txns * CHANGES:,} changes); events in the job's batches {r.job_events:,}"
          + (f"; the unseen waited at least {r.unseen_min_lag_s:.0f} s"
             if r.unseen_min_lag_s is not None else ""))
    print(f"  freshness p50 / p90 / p99 / max s: {quantiles(r.lags)}; by third: "
          + "; ".join(quantiles(chunk) for chunk in r.thirds))
    events = pct(r.batch_events, 0.5) if r.batch_events else 0
    first, last = r.batch_medians()
    print(f"  {len(r.batch_seconds)} batches of median {events} events; median batch s "
          f"first third {first:.2f}, last third {last:.2f}")
    print("  median (min-max) batch s by sixth: "
          + ", ".join(f"{m:.2f} ({lo:.2f}-{hi:.2f})" for m, lo, hi in r.batch_sixths()))
    print("  batch s: " + " ".join(f"{s:.1f}" for s in r.batch_seconds))
    print(f"  pgcdc {r.pgcdc_cpu_share:.0%} of a core; slot confirmed lag at most "
          f"{r.slot_lag_mb_max:.1f} MB; reader {r.reader_polls} polls of "
          f"{r.reader_poll_s * 1000:.0f} ms; tombstones left {r.tombstones:,}", flush=True)
    print("  " + json.dumps({k: v for k, v in vars(r).items() if k not in ("lags", "thirds")}
                            | {"p50": pct(r.lags, 0.5) if r.lags else None,
                               "p99": pct(r.lags, 0.99) if r.lags else None}), flush=True)


def print_table(results: list[PathResult]) -> None:
    print("\n| path | seconds | rate (achieved) | load start -> end | txns seen / committed | "
          "p50 / p90 / p99 / max s | thirds p50 / p99 s | batches | median batch s, first "
          "third -> last third |\n|---|---:|---:|---|---:|---:|---|---:|---:|")
    for r in results:
        first, last = r.batch_medians()
        thirds = ", ".join(f"{pct(c, 0.5):.1f} / {pct(c, 0.99):.1f}" if c else "-"
                           for c in r.thirds)
        print(f"| {r.mode} | {r.seconds} | {r.rate} ({r.achieved_rate:,.0f}) | {r.load_start} "
              f"-> {r.load_end} | {r.seen} / {r.txns} | {quantiles(r.lags)} | {thirds} | "
              f"{len(r.batch_seconds)} | {first:.2f} -> {last:.2f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rate", type=int, default=5000, help="changes/s over the 10 tables")
    p.add_argument("--seconds", type=int, default=600, help="writing time of the fast path")
    p.add_argument("--baseline-seconds", type=int, default=90,
                   help="writing time of the fast_merge=off path; 0 = skip it")
    p.add_argument("--trigger", default="1s", help="the merge job's trigger")
    p.add_argument("--seed-rows", type=int, default=1000,
                   help="rows per table before pgcdc starts (its initial snapshot)")
    p.add_argument("--drain", type=int, default=120,
                   help="seconds to wait after writing for the job to apply everything")
    p.add_argument("--heartbeat-interval-s", type=float, default=0.0,
                   help="pgcdc's (default 0: none, pgcdc's default); with heartbeats the job "
                        "expires tombstones")
    p.add_argument("--steady", action="store_true",
                   help="as many inserts as deletes (10/30/10 per transaction), so the tables "
                        "keep their --seed-rows size: batch time then shows drift, not growth")
    p.add_argument("--pg", type=int, choices=(18, 15), default=18, help="PostgreSQL version")
    p.add_argument("--store", choices=("local", "s3", "both"), default="local",
                   help="the fast path's lake: local disk, a bucket of a throwaway S3 server "
                        "(--s3-server), or both in the same run (the baseline runs on local disk)")
    add_s3_server_option(p)
    args = p.parse_args()

    from devstack.spark import spark_jars
    from devstack.stack import cache_dir

    work = Path(tempfile.mkdtemp(prefix="pgcdc-bench-e2e-"))
    print(f"start [load {load_average()}]; work in {work}", flush=True)
    results: list[PathResult] = []
    stores = ["local", "s3"] if args.store == "both" else [args.store]
    with servers(argparse.Namespace(pg18=args.pg == 18)) as stack, \
            object_store(work, "s3" in stores, args.s3_server, args.s3_latency_ms) as s3:
        roots = {"local": str(work), "s3": "s3a://bench/e2e"}
        spark = local_session(spark_jars(cache_dir()), extra={**SPARK_EXTRA, **s3})
        spark.sparkContext.setLogLevel("ERROR")
        runs = [(True, args.seconds, store) for store in stores] + (
            [(False, args.baseline_seconds, "local")] if args.baseline_seconds else [])
        for fast, seconds, store in runs:
            results.append(run_path(spark, stack, work, args, fast, seconds, roots[store],
                                    store))
            print_path(results[-1])
        spark.stop()
    print_table(results)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Incremental snapshot benchmark: `pgcdc snapshot` of one table while `pgcdc run` streams a
concurrent write load, against the initial snapshot of the same table in the same run.

    .venv/bin/python benchmarks/incremental.py [--rows 1000000] [--rate 1000] [--chunk-rows 10000]

Starts its own throwaway PostgreSQL 15, Kafka and Schema Registry (scripts/devstack).

- **Initial snapshot (baseline)**: `pgcdc run --snapshot initial_only` of the table (2 readers,
  the default), timed from process start to exit (every event acknowledged).
- **Incremental snapshot**: `pgcdc run --snapshot never` streams the table and a small probe
  table; a writer changes the table at `--rate` changes/s (updates, inserts, deletes of random
  ids) and inserts a probe row every 20 ms; then `pgcdc snapshot` asks for the table, timed
  from the request to its `done` state in the signal table. Both rates are the table's rows
  over that time.
- **Streaming latency meanwhile**: a read_committed consumer of the probe topic records when
  each probe row arrives, minus its commit time (source.ts_ms): what the snapshot costs the
  stream.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg  # noqa: E402
from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from producer import PGCDC, Stack, servers, sql  # noqa: E402
from snapshot import LOAD, TABLE  # noqa: E402

from connector.avro import SchemaRegistry, decode  # noqa: E402


def load(dsn: str, rows: int) -> None:
    sql(dsn, TABLE, "CREATE TABLE probe (id bigint PRIMARY KEY, at timestamptz)")
    step = 500_000
    for start in range(1, rows + 1, step):
        sql(dsn, LOAD.format(start=start, stop=min(rows, start + step - 1)))
    sql(dsn, "VACUUM ANALYZE bench")


def pgcdc_args(stack: Stack, name: str, *extra: str) -> list[str]:
    return [PGCDC, "run", "--dsn", stack.dsn, "--bootstrap-servers", stack.bootstrap,
            "--schema-registry-url", stack.registry, "--topic-prefix", name, "--slot", name,
            "--publication", name, "--tables", "public.bench,public.probe",
            "--log-level", "WARNING", *extra]


def initial(stack: Stack) -> float:
    started = time.perf_counter()
    subprocess.run(pgcdc_args(stack, "initial", "--snapshot", "initial_only"), check=True,
                   timeout=3600)
    return time.perf_counter() - started


def writer(dsn: str, rows: int, rate: int, stop: threading.Event) -> None:
    rng = random.Random(5)
    next_id = rows + 1
    probe = 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        start = time.perf_counter()
        done = 0
        while not stop.is_set():
            with conn.transaction():
                for _ in range(10):
                    pick = rng.randrange(1, rows)
                    action = rng.random()
                    if action < 0.6:
                        conn.execute("UPDATE bench SET qty = qty + 1 WHERE id = %s", (pick,))
                    elif action < 0.8:
                        conn.execute("DELETE FROM bench WHERE id = %s", (pick,))
                    else:
                        conn.execute(LOAD.format(start=next_id, stop=next_id))  # type: ignore[arg-type]
                        next_id += 1
            done += 10
            if done % 20 == 0:
                probe += 1
                conn.execute("INSERT INTO probe VALUES (%s, now())", (probe,))
            delay = start + done / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)


def probe_latencies(stack: Stack, stop: threading.Event, out: list[float]) -> None:
    registry = SchemaRegistry(stack.registry)
    consumer = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": "probe",
                         "isolation.level": "read_committed", "fetch.wait.max.ms": 10,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("incremental.public.probe", 0, 0)])
    seen: list[tuple[float, bytes]] = []
    while not stop.is_set():
        msg = consumer.poll(0.05)
        if msg is not None and msg.error() is None:
            seen.append((time.time() * 1000, msg.value()))
    consumer.close()
    for arrived, value in seen:
        event = decode(value, registry.schema, logical_types=False).value
        if event["after"]["id"] != 0:  # row 0 only made the topic, before this consumer
            out.append(arrived - event["source"]["ts_ms"])
    out.sort()


def incremental(stack: Stack, args: argparse.Namespace) -> tuple[float, list[float], int]:
    run = subprocess.Popen(pgcdc_args(stack, "incremental", "--snapshot", "never",
                                      "--incremental-chunk-rows", str(args.chunk_rows)))
    try:
        while not sql(stack.dsn, "SELECT 1 FROM pg_replication_slots WHERE "
                      "slot_name = 'incremental' AND active"):
            time.sleep(0.1)
        sql(stack.dsn, "INSERT INTO probe VALUES (0, now())")  # creates the probe topic
        time.sleep(2)
        stop = threading.Event()
        latencies: list[float] = []
        threads = [threading.Thread(target=writer, args=(stack.dsn, args.rows, args.rate, stop)),
                   threading.Thread(target=probe_latencies, args=(stack, stop, latencies))]
        for thread in threads:
            thread.start()
        time.sleep(3)  # the stream at its steady state first
        started = time.perf_counter()
        subprocess.run([PGCDC, "snapshot", "--dsn", stack.dsn, "--slot", "incremental",
                        "--publication", "incremental", "--tables", "public.bench"], check=True)
        while sql(stack.dsn, "SELECT state FROM pgcdc_signal")[0][0] in ("pending", "running"):
            assert run.poll() is None, "pgcdc run exited"
            time.sleep(0.05)
        seconds = time.perf_counter() - started
        stop.set()
        for thread in threads:
            thread.join()
        state, published = sql(stack.dsn, "SELECT state, rows FROM pgcdc_signal")[0]
        assert state == "done", state
        return seconds, latencies, int(published)
    finally:
        run.terminate()
        run.wait(60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rate", type=int, default=1000, help="changes/s meanwhile")
    parser.add_argument("--chunk-rows", type=int, default=10_000)
    args = parser.parse_args(argv)
    args.pg18 = False
    with servers(args) as stack:
        load(stack.dsn, args.rows)
        base = initial(stack)
        seconds, latencies, published = incremental(stack, args)

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(len(latencies) * p / 100))]

    print(f"\n{args.rows:,} rows, chunks of {args.chunk_rows:,}, {args.rate:,} changes/s meanwhile")
    print(f"initial snapshot      {base:7.1f} s  {args.rows / base:>9,.0f} rows/s")
    print(f"incremental snapshot  {seconds:7.1f} s  {args.rows / seconds:>9,.0f} rows/s  "
          f"= {base / seconds:.2f} x initial; {published:,} r events "
          f"({published / args.rows:.2f} x rows)")
    print(f"streaming latency meanwhile, ms: p50 {pct(50):.0f} / p99 {pct(99):.0f} / "
          f"max {latencies[-1]:.0f} ({len(latencies)} probe rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

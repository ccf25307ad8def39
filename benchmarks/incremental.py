"""Incremental snapshot benchmark: `pgcdc snapshot` of one table while `pgcdc run` streams a
concurrent write load, against the same stream with no snapshot, and against the initial
snapshot of the same table, in the same run.

    .venv/bin/python benchmarks/incremental.py [--rows 1000000] [--rate 1000] [--chunk-rows 10000]
        [--rounds 1] [--variant NAME=CHECKOUT ...] [--idle-s 20]

Starts its own throwaway PostgreSQL 15, Kafka and Schema Registry (scripts/devstack).

- **Initial snapshot (baseline)**: `pgcdc run --snapshot initial_only` of the table (2 readers,
  the default), timed from process start to exit (every event acknowledged).
- **No snapshot (baseline)**: `pgcdc run --snapshot never` streams the table and a small probe
  table for `--idle-s` seconds while a writer changes the table at `--rate` changes/s
  (updates, inserts, deletes of random ids, 10 per transaction) and inserts a probe row every
  20 changes.
- **Incremental snapshot**: the same stream and load, and `pgcdc snapshot` asks for the table,
  timed from the request to its `done` state in the signal table; rows/s is the table's rows
  over that time. With `--variant NAME=CHECKOUT` (repeatable) each variant's `pgcdc` runs
  with that checkout first on PYTHONPATH (e.g. main's head in a second worktree); default:
  this checkout.
- **Streaming latency**: a read_committed consumer of the probe topic records when each probe
  row arrives, minus its commit time (source.ts_ms): what the snapshot costs the stream.

Each round runs the no-snapshot phase, then each variant's snapshot, in turn (alternating, so
a machine whose load changes affects them alike); each phase has its own slot, topics and
publication, and prints the load average at its start and end.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
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


ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Phase:
    name: str
    variant: str  # "-" for the no-snapshot phase
    seconds: float
    latencies: list[float]
    published: int
    load: tuple[float, float]  # 1-minute load average at the start and at the end


def pgcdc_args(stack: Stack, name: str, *extra: str) -> list[str]:
    return [PGCDC, "run", "--dsn", stack.dsn, "--bootstrap-servers", stack.bootstrap,
            "--schema-registry-url", stack.registry, "--topic-prefix", name, "--slot", name,
            "--publication", name, "--tables", "public.bench,public.probe",
            "--log-level", "WARNING", *extra]


def env_for(checkout: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{checkout}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def initial(stack: Stack) -> float:
    started = time.perf_counter()
    subprocess.run(pgcdc_args(stack, "initial", "--snapshot", "initial_only"), check=True,
                   timeout=3600, env=env_for(ROOT))
    return time.perf_counter() - started


def writer(dsn: str, rows: int, rate: int, stop: threading.Event, ids: itertools.count,
           probes: itertools.count) -> None:
    rng = random.Random(5)
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
                        new = next(ids)
                        conn.execute(LOAD.format(start=new, stop=new))  # type: ignore[arg-type]
            done += 10
            if done % 20 == 0:
                conn.execute("INSERT INTO probe VALUES (%s, now())", (next(probes),))
            delay = start + done / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)


def probe_latencies(stack: Stack, topic: str, stop: threading.Event, out: list[float]) -> None:
    registry = SchemaRegistry(stack.registry)
    consumer = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": "probe",
                         "isolation.level": "read_committed", "fetch.wait.max.ms": 10,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: list[tuple[float, bytes]] = []
    while not stop.is_set():
        msg = consumer.poll(0.05)
        if msg is not None and msg.error() is None:
            seen.append((time.time() * 1000, msg.value()))
    consumer.close()
    for arrived, value in seen:
        event = decode(value, registry.schema, logical_types=False).value
        if event["after"]["id"] > 0:  # not the row that made the topic, before this consumer
            out.append(arrived - event["source"]["ts_ms"])
    out.sort()


def phase(stack: Stack, args: argparse.Namespace, name: str, variant: str, checkout: Path,
          ids: itertools.count, probes: itertools.count) -> Phase:
    """One stream under the write load: with a snapshot of the table (`variant`), or for
    `--idle-s` seconds without (variant "-")."""
    load_before = os.getloadavg()[0]
    run = subprocess.Popen(pgcdc_args(stack, name, "--snapshot", "never",
                                      "--incremental-chunk-rows", str(args.chunk_rows)),
                           env=env_for(checkout))
    try:
        while not sql(stack.dsn, "SELECT 1 FROM pg_replication_slots WHERE "
                      f"slot_name = '{name}' AND active"):
            assert run.poll() is None, "pgcdc run exited"
            time.sleep(0.1)
        sql(stack.dsn, f"INSERT INTO probe VALUES (-{next(probes)}, now())")  # the topic
        time.sleep(2)
        stop = threading.Event()
        latencies: list[float] = []
        threads = [threading.Thread(target=writer, args=(stack.dsn, args.rows, args.rate, stop,
                                                         ids, probes)),
                   threading.Thread(target=probe_latencies,
                                    args=(stack, f"{name}.public.probe", stop, latencies))]
        for thread in threads:
            thread.start()
        time.sleep(3)  # the stream at its steady state first
        started = time.perf_counter()
        published = 0
        if variant == "-":
            time.sleep(args.idle_s)
        else:
            subprocess.run([PGCDC, "snapshot", "--dsn", stack.dsn, "--slot", name,
                            "--publication", name, "--tables", "public.bench"], check=True,
                           env=env_for(checkout))
            query = f"SELECT state, rows FROM pgcdc_signal WHERE slot = '{name}'"
            while sql(stack.dsn, query)[0][0] in ("pending", "running"):
                assert run.poll() is None, "pgcdc run exited"
                time.sleep(0.05)
            state, published = sql(stack.dsn, query)[0]
            assert state == "done", state
        seconds = time.perf_counter() - started
        time.sleep(1)  # the last probe rows
        stop.set()
        for thread in threads:
            thread.join()
        return Phase(name, variant, seconds, latencies, int(published),
                     (load_before, os.getloadavg()[0]))
    finally:
        run.terminate()
        run.wait(60)
        sql(stack.dsn, f"SELECT pg_drop_replication_slot('{name}')")


def pct(values: list[float], p: float) -> float:
    return values[min(len(values) - 1, int(len(values) * p / 100))] if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rate", type=int, default=1000, help="changes/s meanwhile")
    parser.add_argument("--chunk-rows", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--idle-s", type=float, default=20.0,
                        help="length of the no-snapshot phase")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=CHECKOUT",
                        help="a checkout whose pgcdc takes the snapshot (repeatable)")
    parser.add_argument("--skip-initial", action="store_true")
    args = parser.parse_args(argv)
    args.pg18 = False
    variants = [(n, Path(c).resolve()) for n, c in (v.split("=", 1) for v in args.variant)] \
        or [("this", ROOT)]
    phases: list[Phase] = []
    ids, probes = itertools.count(args.rows + 1), itertools.count(1)
    with servers(args) as stack:
        load(stack.dsn, args.rows)
        base = None if args.skip_initial else initial(stack)
        for round_ in range(args.rounds):
            phases.append(phase(stack, args, f"idle{round_}", "-", variants[0][1], ids, probes))
            for i, (name, checkout) in enumerate(variants):
                phases.append(phase(stack, args, f"inc{round_}v{i}", name, checkout, ids,
                                    probes))

    print(f"\n{args.rows:,} rows, chunks of {args.chunk_rows:,}, {args.rate:,} changes/s "
          f"meanwhile")
    if base is not None:
        print(f"initial snapshot  {base:7.1f} s  {args.rows / base:>9,.0f} rows/s")
    print("| phase | snapshot s | rows/s | vs initial | r events / rows | latency p50 / p99 / "
          "max ms (probes) | load 1-min start / end |")
    print("| --- | ---: | ---: | ---: | ---: | --- | --- |")
    for p in phases:
        lat = p.latencies
        latency = f"{pct(lat, 50):.0f} / {pct(lat, 99):.0f} / {lat[-1] if lat else 0:.0f} " \
            f"({len(lat)})"
        if p.variant == "-":
            print(f"| {p.name}: no snapshot | - | - | - | - | {latency} | {p.load[0]:.1f} / "
                  f"{p.load[1]:.1f} |")
            continue
        rate = args.rows / p.seconds
        vs = f"{base / p.seconds:.2f}" if base is not None else "-"
        print(f"| {p.name}: {p.variant} | {p.seconds:.1f} | {rate:,.0f} | {vs} | "
              f"{p.published / args.rows:.2f} | {latency} | {p.load[0]:.1f} / "
              f"{p.load[1]:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Initial snapshot benchmark: one table of 11 mixed-type columns into Kafka as Avro `r` events,
with 1 and with 2 parallel readers, against the speed of just reading the same table with COPY
(the ceiling) in the same run.

    .venv/bin/python benchmarks/snapshot.py [--rows 5000000] [--workers 1,2] [--formats text]

Starts a throwaway PostgreSQL 15, Kafka and Schema Registry (scripts/devstack, as the tests do)
unless --dsn, --bootstrap-servers and --schema-registry-url are given.

- **ceiling**: ``COPY (SELECT <columns> FROM ONLY bench) TO STDOUT`` read by psycopg and thrown
  away row by row (what a reader gets before doing anything with a row), best of 3.
- **snapshot**: `connector.snapshot.take_snapshot` as `pgcdc run --snapshot initial_only` runs
  it: temporary slot with an exported snapshot, chunked COPY, pgtypes loaders, Avro (Confluent
  framing, registry ids), the idempotent Kafka producer with acks=all, and the wait until Kafka
  acknowledged every event. Timed from the slot's creation to the last acknowledgement.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "scripts")]

import psycopg  # noqa: E402

from connector.avro import SchemaRegistry  # noqa: E402
from connector.replication import ReplicationAdmin  # noqa: E402
from connector.sink import AckTracker, KafkaSink, TopicCreator, TopicSpec  # noqa: E402
from connector.snapshot import SnapshotSettings, take_snapshot  # noqa: E402
from connector.snapshot.initial import SESSION_SETTINGS  # noqa: E402

TABLE = """CREATE TABLE bench (
    id bigint PRIMARY KEY, account int NOT NULL, amount numeric(12,2), price float8,
    qty smallint, name text, email varchar(100), active boolean, created timestamptz,
    day date, uid uuid)"""
LOAD = """INSERT INTO bench SELECT g, g % 1000, (g * 1.37)::numeric(12,2), g / 7.0,
    (g % 300)::int2, 'customer ' || g, 'user' || g || '@example.com', g % 2 = 0,
    '2024-01-01 00:00:00+00'::timestamptz + g * interval '1 minute',
    '2024-01-01'::date + (g % 365), md5(g::text)::uuid
  FROM generate_series({start}, {stop}) g"""
COLUMNS = "id, account, amount, price, qty, name, email, active, created, day, uid"


@dataclass
class Servers:
    dsn: str
    bootstrap: str
    registry: str


@contextmanager
def servers(args: argparse.Namespace) -> Iterator[Servers]:
    if args.dsn and args.bootstrap_servers and args.schema_registry_url:
        yield Servers(args.dsn, args.bootstrap_servers, args.schema_registry_url)
        return
    from devstack.kafka import Kafka
    from devstack.maven import resolve_archive, resolve_pom
    from devstack.ports import free_port
    from devstack.postgres import Postgres, default_bin
    from devstack.registry import Registry
    from devstack.stack import APICURIO, cache_dir

    base = Path(tempfile.mkdtemp(prefix="pgcdc-bench-snapshot-"))
    os.chmod(base, 0o755)  # the PostgreSQL service user must reach its data directory
    postgres = Postgres(default_bin(), base / "pg", free_port(),
                        {"fsync": "off", "full_page_writes": "off",
                         "shared_buffers": "'512MB'", "max_wal_size": "'4GB'"})
    kafka = Kafka(resolve_pom(cache_dir(), "kafka.pom.xml"), base / "kafka", free_port(),
                  free_port())
    registry = Registry(resolve_archive(cache_dir(), APICURIO, "apicurio"), base / "registry",
                        free_port())
    started: list[Postgres | Kafka | Registry] = []
    try:
        for service in (postgres, kafka, registry):
            service.start()
            started.append(service)
        yield Servers(postgres.dsn, kafka.bootstrap, registry.url)
    finally:
        for service in reversed(started):
            service.stop()
        shutil.rmtree(base, ignore_errors=True)


def load(dsn: str, rows: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS bench")
        conn.execute(TABLE)
        step = 500_000
        for start in range(1, rows + 1, step):
            conn.execute(LOAD.format(start=start, stop=min(start + step - 1, rows)))
        conn.execute("VACUUM ANALYZE bench")
        conn.execute("DROP PUBLICATION IF EXISTS bench_pub")
        conn.execute("CREATE PUBLICATION bench_pub FOR TABLE bench")


def ceiling(dsn: str, binary: bool) -> float:
    """Rows/s of reading the table with COPY and discarding each row (best of 3)."""
    fmt = " (FORMAT binary)" if binary else ""
    best = 0.0
    with psycopg.connect(dsn, autocommit=True) as conn:
        for setting in SESSION_SETTINGS:
            conn.execute(setting)
        for _ in range(3):
            count = 0
            start = time.perf_counter()
            with conn.cursor().copy(f"COPY (SELECT {COLUMNS} FROM ONLY bench) TO STDOUT{fmt}") \
                    as copy:
                for _row in copy:
                    count += 1
            best = max(best, (count - binary) / (time.perf_counter() - start))
    return best


def produce_floor(s: Servers, rows: int) -> float:
    """Events/s of the Kafka path alone: `KafkaSink` (a snapshot reader's producer settings and
    delivery tracking: failures reported, successes counted at the end) sending `rows`
    ready-made events of a snapshot event's size (180-byte value, 9-byte key) and waiting for
    every acknowledgement. What a snapshot reader could do if loading and encoding cost
    nothing."""
    tag = uuid.uuid4().hex[:8]
    kafka = {"bootstrap.servers": s.bootstrap}
    topic = f"floor_{tag}"
    topics = TopicCreator(kafka, TopicSpec(partitions=1))
    topics.ensure([topic])
    tracker = AckTracker(None)
    sink = KafkaSink(kafka, tracker, report_successes=False)  # as a snapshot reader's
    value = bytes(180)
    try:
        start = time.perf_counter()
        ticket = tracker.begin(1)
        for i in range(rows):
            sink.produce(topic, b"\x00" + i.to_bytes(8, "big"), value, ticket)
        ticket.seal()
        while len(sink) > 0:
            sink.poll(0.2)
        sink.close(30.0)
        seconds = time.perf_counter() - start
        assert tracker.open_transactions == 0
    finally:
        del topics, sink
        gc.collect()
    return rows / seconds


def snapshot(s: Servers, workers: int, binary: bool, chunk_rows: int) -> tuple[float, int]:
    """(seconds, rows) of one snapshot of the table into fresh topics."""
    tag = uuid.uuid4().hex[:8]
    kafka = {"bootstrap.servers": s.bootstrap}
    topics = TopicCreator(kafka, TopicSpec(partitions=1))
    settings = SnapshotSettings(s.dsn, f"bench_{tag}", "bench_pub", f"bench{tag}",
                                workers=workers, chunk_rows=chunk_rows, binary=binary)
    admin = ReplicationAdmin.connect(s.dsn)
    try:
        start = time.perf_counter()
        result = take_snapshot(settings, admin, SchemaRegistry(s.registry), kafka, topics,
                               should_stop=lambda: False, keep_slot=False,
                               progress_stream=open(os.devnull, "w"))  # noqa: SIM115
        seconds = time.perf_counter() - start
    finally:
        admin.close()
        del topics
        gc.collect()  # librdkafka clients in reference cycles: gone before Kafka stops
    assert result.completed
    return seconds, result.rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--workers", default="1,2", help="reader counts to run (default 1,2)")
    parser.add_argument("--formats", default="text", help="text, binary or text,binary")
    parser.add_argument("--chunk-rows", type=int, default=250_000)
    parser.add_argument("--dsn")
    parser.add_argument("--bootstrap-servers")
    parser.add_argument("--schema-registry-url")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    workers = [int(w) for w in args.workers.split(",")]
    formats = args.formats.split(",")
    with servers(args) as s:
        print(f"loading {args.rows:,} rows ...", flush=True)
        load(s.dsn, args.rows)
        rows = [("case", "rows/s", "vs ceiling")]
        for fmt in formats:
            binary = fmt == "binary"
            top = ceiling(s.dsn, binary)
            rows.append((f"COPY {fmt} read + discard (ceiling)", f"{top:,.0f}", "1.00"))
            print(f"ceiling ({fmt}): {top:,.0f} rows/s", flush=True)
            if fmt == formats[0]:
                produce_floor(s, min(args.rows, 500_000))  # warm-up: a fresh broker's JIT
                floor = produce_floor(s, args.rows)
                rows.append(("Kafka produce only, ready-made events (the client's bound)",
                             f"{floor:,.0f}", f"{floor / top:.3f}"))
                print(f"produce only: {floor:,.0f} events/s", flush=True)
            for n in workers:
                seconds, count = snapshot(s, n, binary, args.chunk_rows)
                assert count == args.rows, (count, args.rows)
                rate = count / seconds
                rows.append((f"snapshot, {fmt} COPY, {n} reader{'s' if n > 1 else ''}",
                             f"{rate:,.0f}", f"{rate / top:.3f}"))
                print(f"snapshot ({fmt}, {n} readers): {count:,} rows in {seconds:.1f}s = "
                      f"{rate:,.0f} rows/s", flush=True)
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    print()
    for i, row in enumerate(rows):
        print(f"| {row[0]:<{width[0]}} | {row[1]:>{width[1]}} | {row[2]:>{width[2]}} |")
        if i == 0:
            print(f"| {'-' * width[0]} | {'-' * (width[1] - 1)}: | {'-' * (width[2] - 1)}: |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

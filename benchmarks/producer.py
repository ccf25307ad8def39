"""Producer benchmark: `pgcdc run` (PostgreSQL → Avro → Kafka, acks=all) against PostgreSQL's own
`pg_recvlogical` (pgoutput to /dev/null) reading the same WAL, in one run; then the
commit-to-Kafka latency at a steady rate, and the peak RSS while streaming one large transaction.

    .venv/bin/python benchmarks/producer.py [--rows 200000] [--rounds 2] [--rate 5000]
        [--latency-seconds 10] [--big-rows 1000000] [--profile] [--pg18]

Starts its own throwaway PostgreSQL 15 (or 18), Kafka and Schema Registry (scripts/devstack).

- **Throughput**: an 11-column mixed-type table; `--rows` row changes in transactions of 50
  inserts, 30 updates and 20 deletes, written while one pgoutput slot per reader and round
  exists, so every reader decodes the same WAL. pg_recvlogical gets the options pgcdc uses
  (proto_version, publication_names, messages, streaming) and runs until `--endpos`. pgcdc runs
  until Kafka's high watermark holds every event (acks=all: every event replicated and
  acknowledged). Both times include process start-up; "steady" is pgcdc's rate between its
  first and last record (the producer's CreateTime timestamps), start-up excluded.
- **Latency**: a writer commits 50-row transactions at `--rate` changes/s for
  `--latency-seconds` while pgcdc streams; the topic uses LogAppendTime, so latency = broker
  append time - commit time (source.ts_ms), per event, same clock. Then the same rate end to end,
  for at-least-once and `--exactly-once`: a `read_committed` consumer running throughout records
  when each event reaches it (a transactional event is visible only once its Kafka transaction
  commits), latency = that wall-clock time - commit time.
- **Memory**: one transaction of `--big-rows` inserts is committed, then pgcdc streams it
  (PostgreSQL streams it in progress: logical_decoding_work_mem is 64MB); the peak RSS is the
  kernel's high-water mark (VmHWM) of the pgcdc process.
- `--profile`: one more pgcdc throughput run under cProfile; prints where the time goes.
"""

from __future__ import annotations

import argparse
import io
import os
import pstats
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "scripts")]

import psycopg  # noqa: E402
from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from connector.avro import SchemaRegistry, decode  # noqa: E402
from connector.replication import ServerFeatures  # noqa: E402

PGCDC = str(Path(sys.executable).parent / "pgcdc")
COLUMNS = ("id bigint PRIMARY KEY, qty int, price numeric(12,2), score float8, flag smallint, "
           "name text, code varchar(40), active boolean, updated timestamptz, day date, "
           "ref uuid")
ROW = ("i, i % 1000, (i % 100000) / 100.0, i * 1.5, (i % 100)::smallint, 'name-' || i, "
       "'code-' || (i % 977), i % 2 = 0, now(), current_date - (i % 365), gen_random_uuid()")


def generate_procedure(table: str) -> str:
    """One transaction per loop: 50 inserts (ids 50t..50t+49), 30 updates and 20 deletes of
    the previous transaction's rows (the 50 seed rows for t = 0): exactly 100 changes."""
    return f"""
CREATE PROCEDURE generate(txns int) LANGUAGE plpgsql AS $$
BEGIN
  FOR t IN 0 .. txns - 1 LOOP
    INSERT INTO {table} SELECT {ROW} FROM generate_series(50 * t, 50 * t + 49) i;
    UPDATE {table} SET qty = qty + 1, name = name || '+' WHERE id BETWEEN 50 * t - 50
      AND 50 * t - 21;
    DELETE FROM {table} WHERE id BETWEEN 50 * t - 20 AND 50 * t - 1;
    COMMIT;
  END LOOP;
END $$"""


SERVER_SETTINGS = {"fsync": "off", "full_page_writes": "off", "max_wal_size": "'4GB'"}


@dataclass
class Stack:
    dsn: str
    bootstrap: str
    registry: str
    bin_dir: Path
    proto: int


@contextmanager
def servers(args: argparse.Namespace) -> Iterator[Stack]:
    from devstack.kafka import Kafka
    from devstack.maven import resolve_archive, resolve_pom
    from devstack.ports import free_port
    from devstack.postgres import Postgres, default_bin, embedded_pg18_bin
    from devstack.registry import Registry
    from devstack.stack import APICURIO, cache_dir

    base = Path(tempfile.mkdtemp(prefix="pgcdc-bench-producer-"))
    os.chmod(base, 0o755)  # the PostgreSQL service user must reach its data directory
    bin_dir = embedded_pg18_bin() if args.pg18 else default_bin()
    assert bin_dir is not None, "PostgreSQL 18 binaries missing (dev extra)"
    pg = Postgres(bin_dir, base / "pg", free_port(), dict(SERVER_SETTINGS))
    kafka = Kafka(resolve_pom(cache_dir(), "kafka.pom.xml"), base / "kafka", free_port(),
                  free_port(), heap="1g")
    registry = Registry(resolve_archive(cache_dir(), APICURIO, "apicurio"), base / "registry",
                        free_port())
    try:
        pg.start()
        kafka.start()
        registry.start()
        with psycopg.connect(pg.dsn) as conn:
            version = int(conn.execute("SHOW server_version_num").fetchone()[0])  # type: ignore[index]
        yield Stack(pg.dsn, kafka.bootstrap, registry.url, bin_dir,
                    ServerFeatures(version).protocol_version)
    finally:
        registry.stop()
        kafka.stop()
        pg.stop()
        shutil.rmtree(base, ignore_errors=True)


def sql(dsn: str, *statements: str) -> list[tuple]:  # type: ignore[type-arg]
    with psycopg.connect(dsn, autocommit=True) as conn:
        result: list[tuple] = []  # type: ignore[type-arg]
        for statement in statements:
            cur = conn.execute(statement)  # type: ignore[arg-type]
            result = cur.fetchall() if cur.description else []
        return result


def current_lsn(dsn: str) -> int:
    return int(sql(dsn, "SELECT pg_current_wal_lsn() - '0/0'")[0][0])


def lsn_text(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def create_table(dsn: str, table: str) -> None:
    sql(dsn, f"CREATE TABLE {table} ({COLUMNS})", f"CREATE PUBLICATION {table} FOR TABLE {table}")


def create_slots(dsn: str, names: list[str]) -> None:
    sql(dsn, *(f"SELECT pg_create_logical_replication_slot('{n}', 'pgoutput')" for n in names))


def drop_slot(dsn: str, name: str) -> None:
    sql(dsn, f"SELECT pg_drop_replication_slot('{name}')")


# ----------------------------------------------------------------------------- readers

def recvlogical(stack: Stack, slot: str, publication: str, end: int) -> float:
    """Seconds for pg_recvlogical to read `slot` up to `end` (start-up included)."""
    command = [str(stack.bin_dir / "pg_recvlogical"), "-d", stack.dsn, "--slot", slot, "--start",
               "--no-loop", "-f", "/dev/null", "--endpos", lsn_text(end),
               "-o", f"proto_version={stack.proto}", "-o", f"publication_names={publication}",
               "-o", "messages=true", "-o", "streaming=on"]
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


@dataclass
class PgcdcResult:
    seconds: float  # process start → every event in Kafka
    steady_eps: float  # first → last record's CreateTime
    cpu_seconds: float  # user + system of the pgcdc process
    streaming_cpu_seconds: float  # the same from its first event in Kafka to the last
    peak_rss_mb: float  # VmHWM
    events: int


def _proc_stats(pid: int) -> tuple[float, float]:
    """(CPU seconds, peak RSS MB) of a running process."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    with open(f"/proc/{pid}/status") as fh:
        hwm = next(line for line in fh if line.startswith("VmHWM:"))
    return cpu, int(hwm.split()[1]) / 1024


def pgcdc(stack: Stack, slot: str, table: str, prefix: str, events: int,
          profile: Path | None = None, timeout: float = 1800.0) -> PgcdcResult:
    """Run `pgcdc run` on `slot` until Kafka holds `events` records of `table`."""
    command = [PGCDC, "run", "--dsn", stack.dsn, "--bootstrap-servers", stack.bootstrap,
               "--schema-registry-url", stack.registry, "--topic-prefix", prefix, "--slot", slot,
               "--publication", table, "--tables", f"public.{table}", "--snapshot", "never",
               "--log-level", "WARNING"]
    if profile is not None:
        command = [sys.executable, "-m", "cProfile", "-o", str(profile), *command]
    topic = f"{prefix}.public.{table}"
    consumer = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": "bench"})
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    cpu, rss, cpu_at_first = 0.0, 0.0, None
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"pgcdc exited {proc.returncode}: {proc.stdout.read()}")  # type: ignore[union-attr]
            cpu, rss = _proc_stats(proc.pid)
            try:
                high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1]
            except Exception:  # the topic does not exist yet
                high = 0
            if high > 0 and cpu_at_first is None:
                cpu_at_first = cpu
            if high >= events:
                break
            if time.perf_counter() - started > timeout:
                raise RuntimeError(f"pgcdc: {high} of {events} events after {timeout} s")
            time.sleep(0.02)
        seconds = time.perf_counter() - started
        cpu, rss = _proc_stats(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    first, last = (_record_time(consumer, topic, offset) for offset in (0, events - 1))
    consumer.close()
    return PgcdcResult(seconds, (events - 1) / max((last - first) / 1000, 1e-3), cpu,
                       cpu - (cpu_at_first or 0.0), rss, events)


def pgcdc_until_confirmed(stack: Stack, slot: str, table: str, prefix: str, end: int,
                          *extra: str, timeout: float = 1800.0) -> float:
    """Seconds until `pgcdc run` (with `extra` flags) has confirmed `end` to the slot: the
    finish line both delivery modes share (Kafka offsets count transaction markers too)."""
    command = [PGCDC, "run", "--dsn", stack.dsn, "--bootstrap-servers", stack.bootstrap,
               "--schema-registry-url", stack.registry, "--topic-prefix", prefix, "--slot", slot,
               "--publication", table, "--tables", f"public.{table}", "--snapshot", "never",
               "--log-level", "WARNING", *extra]
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"pgcdc exited {proc.returncode}: {proc.stdout.read()}")  # type: ignore[union-attr]
            row = sql(stack.dsn, "SELECT confirmed_flush_lsn - '0/0' FROM pg_replication_slots "
                      f"WHERE slot_name = '{slot}'")
            if row and row[0][0] is not None and int(row[0][0]) >= end:
                return time.perf_counter() - started
            if time.perf_counter() - started > timeout:
                raise RuntimeError(f"pgcdc {' '.join(extra)}: {slot} not confirmed in {timeout} s")
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)


def _record_time(consumer: Consumer, topic: str, offset: int) -> int:
    consumer.assign([TopicPartition(topic, 0, offset)])
    while True:
        msg = consumer.poll(10)
        if msg is not None and msg.error() is None:
            return int(msg.timestamp()[1])


# ----------------------------------------------------------------------------- phases

def throughput(stack: Stack, args: argparse.Namespace) -> None:
    txns = args.rows // 100
    events = txns * 100
    table = "bench"
    create_table(stack.dsn, table)
    sql(stack.dsn, f"INSERT INTO {table} SELECT {ROW} FROM generate_series(-50, -1) i",
        generate_procedure(table))
    rounds = range(args.rounds)
    slots = [f"recv_{r}" for r in rounds] + [f"pgcdc_{r}" for r in rounds]
    slots += [f"{mode}_{r}" for r in rounds for mode in ("alo", "eo")]
    if args.profile:
        slots.append("pgcdc_profile")
    create_slots(stack.dsn, slots)
    started = time.perf_counter()
    sql(stack.dsn, f"CALL generate({txns})")
    end = current_lsn(stack.dsn)
    print(f"workload: {events:,} row changes in {txns:,} transactions, generated in "
          f"{time.perf_counter() - started:.1f} s; protocol {stack.proto}")

    recv, ours, alo, eo = [], [], [], []
    for r in rounds:  # interleaved, so load changes on the machine hit both
        recv.append(recvlogical(stack, f"recv_{r}", table, end))
        ours.append(pgcdc(stack, f"pgcdc_{r}", table, f"b{r}", events))
        alo.append(pgcdc_until_confirmed(stack, f"alo_{r}", table, f"alo{r}", end))
        eo.append(pgcdc_until_confirmed(stack, f"eo_{r}", table, f"eo{r}", end,
                                        "--exactly-once"))
        for slot in (f"recv_{r}", f"pgcdc_{r}", f"alo_{r}", f"eo_{r}"):
            drop_slot(stack.dsn, slot)
    best_recv = min(recv)
    best = min(ours, key=lambda o: o.seconds)
    steady = max(o.steady_eps for o in ours)
    recv_eps = events / best_recv
    print()
    print(f"{'reader':<44} {'seconds':>8} {'events/s':>10} {'ratio':>7}")
    print(f"{'pg_recvlogical (baseline)':<44} {best_recv:>8.2f} {recv_eps:>10,.0f} {1:>7.2f}")
    print(f"{'pgcdc run -> Kafka acks=all (start-up incl.)':<44} {best.seconds:>8.2f} "
          f"{events / best.seconds:>10,.0f} {events / best.seconds / recv_eps:>7.2f}")
    print(f"{'pgcdc run, steady (first -> last record)':<44} {events / steady:>8.2f} "
          f"{steady:>10,.0f} {steady / recv_eps:>7.2f}")
    for label, runs in (("at-least-once, until the slot confirms end", alo),
                        ("--exactly-once, until the slot confirms end", eo)):
        print(f"{label:<44} {min(runs):>8.2f} {events / min(runs):>10,.0f} "
              f"{events / min(runs) / recv_eps:>7.2f}")
    print(f"exactly-once / at-least-once throughput (same finish line): "
          f"{min(alo) / min(eo):.2f}")
    print(f"pgcdc CPU: {best.cpu_seconds:.1f} s for {best.seconds:.1f} s wall "
          f"({best.cpu_seconds / best.seconds:.0%} of one core); "
          f"peak RSS {best.peak_rss_mb:.0f} MB")
    per_cpu = max(events / max(o.streaming_cpu_seconds, 1e-3) for o in ours)
    print(f"pgcdc events per CPU-second while streaming (its bound with a core of its own): "
          f"{per_cpu:,.0f} = {per_cpu / recv_eps:.2f} x pg_recvlogical's rate")
    print("all rounds (s): pg_recvlogical " + ", ".join(f"{s:.2f}" for s in recv)
          + "; pgcdc " + ", ".join(f"{o.seconds:.2f}" for o in ours))

    if args.profile:
        path = Path(tempfile.gettempdir()) / f"pgcdc-{uuid.uuid4().hex[:8]}.prof"
        result = pgcdc(stack, "pgcdc_profile", table, "bprof", events, profile=path)
        drop_slot(stack.dsn, "pgcdc_profile")
        print(f"\nprofile ({path}; {result.seconds:.1f} s under cProfile):")
        for sort in ("tottime", "cumulative"):
            out = io.StringIO()
            pstats.Stats(str(path), stream=out).sort_stats(sort).print_stats(22)
            print("\n".join(line for line in out.getvalue().splitlines()
                            if line.strip() and not line.startswith(("   Ordered", "   List"))))


def latency(stack: Stack, args: argparse.Namespace) -> None:
    """Two runs at the same rate: a LogAppendTime topic (commit -> appended in Kafka) and a
    CreateTime one (commit -> handed to librdkafka by pgcdc), to split where latency goes."""
    print(f"\nlatency at {args.rate:,} changes/s, {args.latency_seconds:g} s per run, ms "
          "(p50 / p90 / p99 / max):")
    for kind in ("LogAppendTime", "CreateTime"):
        latencies, result, late = _latency_run(stack, args, kind)
        what = "commit -> Kafka append" if kind == "LogAppendTime" else \
            "commit -> pgcdc produce()"
        _print_latencies(what, latencies, f"pgcdc CPU {result.cpu_seconds / result.seconds:.0%} "
                         f"of a core; writer at most {late * 1000:.0f} ms behind schedule")
    for name, mode, extra in (
            ("alo", "at-least-once", ()),
            ("eo", "exactly-once", ("--exactly-once",)),
            ("eo20", "exactly-once, 20 ms", ("--exactly-once", "--exactly-once-batch-ms", "20"))):
        latencies, late = _consumed_latency_run(stack, args, name, extra)
        _print_latencies(f"commit -> consumer, {mode}", latencies,
                         f"read_committed; writer at most {late * 1000:.0f} ms behind schedule")


def _print_latencies(what: str, latencies: list[float], notes: str) -> None:
    print(f"{what:<40} {_pct(latencies, 50):>5.0f} / {_pct(latencies, 90):>5.0f} / "
          f"{_pct(latencies, 99):>5.0f} / {latencies[-1]:>5.0f}   ({len(latencies):,} events; "
          f"{notes})")


def _latency_run(stack: Stack, args: argparse.Namespace,
                 timestamps: str) -> tuple[list[float], PgcdcResult, float]:
    table = prefix = f"lat_{timestamps.lower()}"
    create_table(stack.dsn, table)
    topic = f"{prefix}.public.{table}"
    admin = AdminClient({"bootstrap.servers": stack.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1, config={
            "message.timestamp.type": timestamps, "retention.ms": "-1"})]).values():
        future.result(30)
    create_slots(stack.dsn, [table])
    batch = 50
    txns = int(args.rate * args.latency_seconds) // batch
    events = txns * batch
    errors: list[BaseException] = []
    behind: list[float] = []
    thread = threading.Thread(target=_write_at_rate, args=(stack, args, table, txns, batch,
                                                           behind, errors))
    thread.start()
    result = pgcdc(stack, table, table, prefix, events)
    thread.join()
    if errors:
        raise errors[0]
    drop_slot(stack.dsn, table)
    return sorted(_latencies(stack, topic, events)), result, max(behind, default=0.0)


def _consumed_latency_run(stack: Stack, args: argparse.Namespace, name: str,
                          extra: tuple[str, ...]) -> tuple[list[float], float]:
    """Commit -> seen by a read_committed consumer, `pgcdc run ... *extra` streaming at `--rate`
    (table, slot and topic prefix `lat_<name>`).
    The consumer polls throughout with a 10 ms fetch wait, so it adds little of its own."""
    table = prefix = f"lat_{name}"
    create_table(stack.dsn, table)
    create_slots(stack.dsn, [table])
    batch = 50
    txns = int(args.rate * args.latency_seconds) // batch
    events = txns * batch
    topic = f"{prefix}.public.{table}"
    admin = AdminClient({"bootstrap.servers": stack.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)  # created up front and assigned, so no metadata or group delay counts
    registry = SchemaRegistry(stack.registry)
    consumer = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": "lat",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "fetch.wait.max.ms": 10})
    consumer.assign([TopicPartition(topic, 0, 0)])
    command = [PGCDC, "run", "--dsn", stack.dsn, "--bootstrap-servers", stack.bootstrap,
               "--schema-registry-url", stack.registry, "--topic-prefix", prefix, "--slot", table,
               "--publication", table, "--tables", f"public.{table}", "--snapshot", "never",
               "--log-level", "WARNING", *extra]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    behind: list[float] = []
    errors: list[BaseException] = []
    thread = threading.Thread(target=_write_at_rate, args=(stack, args, table, txns, batch,
                                                           behind, errors))
    thread.start()
    seen: list[tuple[float, bytes]] = []  # (arrival ms, value): decoded after the run
    deadline = time.time() + args.latency_seconds + 300
    try:
        while len(seen) < events:
            if proc.poll() is not None:
                raise RuntimeError(f"pgcdc exited {proc.returncode}: {proc.stdout.read()}")  # type: ignore[union-attr]
            if time.time() > deadline:
                raise RuntimeError(f"{' '.join(extra)}: {len(seen)} of {events} events seen")
            msg = consumer.poll(0.05)  # returns at the first record: consume(n) would wait for n
            if msg is not None and msg.error() is None:
                seen.append((time.time() * 1000, msg.value()))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
        consumer.close()
        thread.join()
    if errors:
        raise errors[0]
    drop_slot(stack.dsn, table)
    latencies = [arrived - decode(value, registry.schema, logical_types=False)
                 .value["source"]["ts_ms"] for arrived, value in seen]
    return sorted(latencies), max(behind, default=0.0)


def _wait_streaming(stack: Stack, slot: str) -> None:
    """Until a pgcdc streams from `slot`, so its start-up (longer with --exactly-once) is not
    counted as latency."""
    deadline = time.time() + 120
    while not sql(stack.dsn, f"SELECT 1 FROM pg_replication_slots WHERE slot_name = '{slot}' "
                  "AND active"):
        if time.time() > deadline:
            raise RuntimeError(f"nothing streams from slot {slot} after 120 s")
        time.sleep(0.1)


def _write_at_rate(stack: Stack, args: argparse.Namespace, table: str, txns: int, batch: int,
                   behind: list[float], errors: list[BaseException]) -> None:
    """Commit `txns` transactions of `batch` inserts at `--rate` changes/s into `table`, from
    0.5 s after pgcdc streams from the slot of the same name; how late each one was goes to
    `behind`."""
    try:
        _wait_streaming(stack, table)
        with psycopg.connect(stack.dsn, autocommit=True) as conn:
            start = time.perf_counter() + 0.5
            for t in range(txns):
                due = start + t * batch / args.rate
                delay = due - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                else:
                    behind.append(-delay)
                conn.execute(f"INSERT INTO {table} SELECT {ROW} FROM "  # type: ignore[arg-type]
                             f"generate_series({t * batch}, {t * batch + batch - 1}) i")
    except BaseException as exc:  # reported by the main thread
        errors.append(exc)


def _latencies(stack: Stack, topic: str, events: int) -> list[float]:
    registry = SchemaRegistry(stack.registry)
    consumer = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": "lat",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[float] = []
    try:
        while len(out) < events:
            for msg in consumer.consume(1000, 5):
                if msg.error() is None:
                    value = decode(msg.value(), registry.schema, logical_types=False).value
                    out.append(msg.timestamp()[1] - value["source"]["ts_ms"])
    finally:
        consumer.close()
    return out


def _pct(values: list[float], pct: float) -> float:
    return values[min(len(values) - 1, int(len(values) * pct / 100))]


def memory(stack: Stack, args: argparse.Namespace) -> None:
    table = "big"
    create_table(stack.dsn, table)
    create_slots(stack.dsn, ["big"])
    started = time.perf_counter()
    sql(stack.dsn, f"INSERT INTO {table} SELECT {ROW} FROM generate_series(1, {args.big_rows}) i")
    print(f"\none transaction of {args.big_rows:,} inserts committed in "
          f"{time.perf_counter() - started:.1f} s")
    result = pgcdc(stack, "big", table, "big", args.big_rows)
    drop_slot(stack.dsn, "big")
    print(f"pgcdc streamed it in {result.seconds:.1f} s ({args.big_rows / result.seconds:,.0f} "
          f"events/s); peak RSS {result.peak_rss_mb:.0f} MB (target < 300 MB)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000, help="row changes (throughput)")
    parser.add_argument("--rounds", type=int, default=2, help="throughput rounds (best of)")
    parser.add_argument("--rate", type=int, default=5000, help="changes/s (latency)")
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--big-rows", type=int, default=1_000_000,
                        help="rows of the one large transaction (memory)")
    parser.add_argument("--profile", action="store_true", help="cProfile one pgcdc run")
    parser.add_argument("--pg18", action="store_true", help="PostgreSQL 18 instead of 15")
    parser.add_argument("--skip", action="append", default=[],
                        choices=["throughput", "latency", "memory"])
    args = parser.parse_args(argv)
    print("load average at start: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    with servers(args) as stack:
        for name, phase in (("throughput", throughput), ("latency", latency),
                            ("memory", memory)):
            if name not in args.skip:
                phase(stack, args)
    print("load average at end: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

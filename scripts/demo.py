"""`make demo`: the product end to end on the local stack (started by scripts/demo).

A sample schema with data → `pgcdc run` (initial snapshot, then streaming) → a live workload
(inserts, updates, deletes, a key change, a schema change, a large streamed transaction, a
rolled-back one, a truncate) → the merge job → Delta tables compared with PostgreSQL.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from confluent_kafka.admin import AdminClient

os.environ["TZ"] = "UTC"  # Spark hands timestamps to Python in the process's zone
time.tzset()

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / ".stack" / "demo"
PGCDC = str(Path(sys.executable).parent / "pgcdc")
PREFIX = "demo"
TABLES = ["customers", "orders", "events"]


def say(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        sys.exit(f"demo: {name} is not set; run it through `make demo`")
    return value


def reset(dsn: str, bootstrap: str) -> None:
    """Start from nothing: drop what an earlier demo run left (slot, topics, lake)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                     " WHERE slot_name = %s AND NOT active", (PREFIX,))
        conn.execute(f"DROP PUBLICATION IF EXISTS {PREFIX}")
        conn.execute("DROP SCHEMA IF EXISTS demo CASCADE")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [t for t in admin.list_topics(timeout=30).topics if t.startswith(f"{PREFIX}.")]
    if topics:
        for future in admin.delete_topics(topics).values():
            future.result(60)
        time.sleep(2)
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)


def create_sample(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("""
            CREATE SCHEMA demo;
            CREATE TYPE demo.tier AS ENUM ('basic', 'silver', 'gold');
            CREATE TABLE demo.customers (
                id int PRIMARY KEY, name text NOT NULL, email text, tier demo.tier,
                balance numeric(12,2), tags text[], signed_up timestamptz);
            CREATE TABLE demo.orders (
                id bigint PRIMARY KEY, customer_id int, amount numeric(10,2), placed date,
                note text, payload jsonb);
            CREATE TABLE demo.events (
                id uuid PRIMARY KEY DEFAULT gen_random_uuid(), kind text, at timestamp,
                details jsonb);
            INSERT INTO demo.customers
              SELECT i, 'customer ' || i, 'c' || i || '@example.com',
                     (ARRAY['basic','silver','gold'])[1 + i % 3]::demo.tier,
                     (i * 13.37)::numeric(12,2), ARRAY['t' || i % 4, 'vip'],
                     timestamptz '2024-01-01 00:00+00' + i * interval '1 hour'
              FROM generate_series(1, 200) i;
            INSERT INTO demo.orders
              SELECT i, 1 + i % 200, (i % 97) + 0.99, date '2024-03-01' + i % 30,
                     repeat('note ', i % 5), jsonb_build_object('items', i % 7, 'gift', i % 2 = 0)
              FROM generate_series(1, 600) i;
            INSERT INTO demo.events (kind, at, details)
              SELECT 'signup', timestamp '2024-01-01' + i * interval '1 minute',
                     jsonb_build_object('n', i) FROM generate_series(1, 100) i;
        """)


def workload(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO demo.customers VALUES (201, 'new customer', NULL, 'gold',"
                     " 0, '{}', now())")
        conn.execute("UPDATE demo.customers SET balance = balance + 100 WHERE id % 10 = 0")
        conn.execute("UPDATE demo.customers SET id = 1000 WHERE id = 7")  # primary key change
        conn.execute("DELETE FROM demo.orders WHERE id % 50 = 0")
        conn.execute("ALTER TABLE demo.customers ADD COLUMN loyalty_points int")
        conn.execute("UPDATE demo.customers SET loyalty_points = id * 2 WHERE id <= 50")
        with conn.transaction():  # large enough to be streamed before its commit
            conn.execute("INSERT INTO demo.orders SELECT i, 1 + i % 200, i % 13, current_date,"
                         " repeat('bulk ', 20), '{\"bulk\": true}'"
                         " FROM generate_series(1001, 4000) i")
            conn.execute("UPDATE demo.orders SET note = 'bulk, revised'"
                         " WHERE id BETWEEN 1001 AND 1500")
        try:
            with conn.transaction():  # rolled back: none of it may reach the lake
                conn.execute("DELETE FROM demo.customers")
                raise RuntimeError("rollback")
        except RuntimeError:
            pass
        conn.execute("TRUNCATE demo.events")
        conn.execute("INSERT INTO demo.events (kind, at, details) VALUES"
                     " ('restart', now()::timestamp, '{\"after\": \"truncate\"}')")
        conn.execute("ALTER TABLE demo.orders DROP COLUMN note")
        conn.execute("UPDATE demo.orders SET amount = amount * 2 WHERE id <= 20")


def wait_caught_up(dsn: str, proc: subprocess.Popen[bytes], timeout: float = 180) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        target = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]  # type: ignore[index]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                sys.exit(f"demo: pgcdc run exited ({proc.returncode}); see {WORK}/pgcdc.log")
            row = conn.execute("SELECT confirmed_flush_lsn >= %s FROM pg_replication_slots"
                               " WHERE slot_name = %s", (target, PREFIX)).fetchone()
            if row and row[0]:
                return
            time.sleep(0.5)
    sys.exit(f"demo: pgcdc run did not catch up within {timeout}s; see {WORK}/pgcdc.log")


def main() -> int:
    dsn, bootstrap = env("PGCDC_DSN"), env("KAFKA_BOOTSTRAP_SERVERS")
    registry = env("SCHEMA_REGISTRY_URL")
    say("resetting the demo schema, slot, topics and lake")
    reset(dsn, bootstrap)
    say("creating schema `demo` with 200 customers, 600 orders, 100 events")
    create_sample(dsn)

    say(f"starting the producer: pgcdc run --topic-prefix {PREFIX} (log: {WORK}/pgcdc.log)")
    log = open(WORK / "pgcdc.log", "wb")  # noqa: SIM115 - lives as long as the producer
    producer = subprocess.Popen([PGCDC, "run", "--topic-prefix", PREFIX, "--slot", PREFIX,
                                 "--publication", PREFIX, "--tables", "demo.*"],
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_caught_up(dsn, producer)
        say("snapshot published; running a live workload (inserts, updates, deletes, a key "
            "change, ADD/DROP COLUMN, a 3000-row streamed transaction, a rollback, a truncate)")
        workload(dsn)
        wait_caught_up(dsn, producer)
        say("everything committed is in Kafka (the slot confirmed it); stopping the producer")
    finally:
        producer.send_signal(signal.SIGTERM)
        producer.wait(60)

    in_bucket = os.environ.get("PGCDC_DEMO_LAKE", "local") == "s3"
    if in_bucket:  # `make demo LAKE=s3`: the stack's S3 server, a fresh path per run
        lake = f"{env('PGCDC_LAKE').rstrip('/')}/demo-{int(time.time())}"
        checkpoint = f"{lake}/_pgcdc/checkpoint"
    else:
        lake, checkpoint = str(WORK / "lake"), str(WORK / "checkpoint")
    s3a = s3a_settings() if in_bucket else {}
    say(f"running the merge job (spark-submit, available-now) into {lake}")
    code = subprocess.call([PGCDC, "merge", *(f"--conf={k}={v}" for k, v in s3a.items()),
                            "--bootstrap-servers", bootstrap,
                            "--schema-registry-url", registry, "--topic-prefix", PREFIX,
                            "--target", lake, "--checkpoint", checkpoint,
                            "--trigger", "available-now"])
    if code != 0:
        print(f"demo: the merge job failed (exit {code})", file=sys.stderr)
        return 1
    return compare(dsn, lake, s3a)


def s3a_settings() -> dict[str, str]:
    """Spark's S3A settings for the stack's S3 server, as docs/object-storage.md gives them:
    the endpoint and path-style requests; the credentials and region are the AWS variables
    `scripts/stack env` exports (S3A's default credential chain and delta-rs both read them)."""
    return {"spark.hadoop.fs.s3a.endpoint": env("AWS_ENDPOINT_URL"),
            "spark.hadoop.fs.s3a.path.style.access": "true"}


def compare(dsn: str, lake: str, spark_settings: dict[str, str]) -> int:
    from spark_jobs.runtime.session import local_session
    from spark_jobs.runtime.submit import resolve_jars
    from spark_jobs.verify.compare import compare as compare_rows
    from spark_jobs.verify.compare import lake_rows, pg_rows, primary_key, side_by_side

    say("comparing the Delta tables with PostgreSQL")
    spark = local_session(resolve_jars(), extra=spark_settings, app_name="pgcdc-demo-verify")
    spark.sparkContext.setLogLevel("ERROR")
    all_equal = True
    try:
        with psycopg.connect(dsn) as conn:
            keys = {t: primary_key(conn, "demo", t) for t in TABLES}
        for table in TABLES:
            pg = pg_rows(dsn, "demo", table)
            mirror = lake_rows(spark, f"{lake}/demo/{table}", keys[table])
            result = compare_rows(f"demo.{table}", pg, mirror)
            print(f"\ndemo.{table}: PostgreSQL {result.pg_count} rows, Delta {result.lake_count}"
                  f" rows -> {'EQUAL' if result.equal else 'DIFFERS'}")
            for line in side_by_side(pg, mirror, limit=3):
                print(line)
            for line in result.differences:
                print(f"  ! {line}")
            all_equal = all_equal and result.equal
    finally:
        spark.stop()
    verdict = "equal - every Delta table matches PostgreSQL" if all_equal else "DIFFERS"
    print(f"\nverdict: {verdict}")
    print(f"""
Look further:
  eval "$(scripts/stack env)"
  .venv/bin/pgcdc status --slot {PREFIX} --publication {PREFIX}
  .venv/bin/pyspark  # then: spark.read.format("delta").load("{lake}/demo/customers").show()
  lake: {lake}    producer log: {WORK}/pgcdc.log
Stop everything: scripts/stack down     (make clean also deletes the stack's data)""")
    return 0 if all_equal else 1


if __name__ == "__main__":
    sys.exit(main())

"""`pgcdc verify` benchmark: rows/s on each side for a table of N rows (default 1M), against a
plain `COUNT(*)` + full read of the same table on the same side (the baseline, same run).

The PostgreSQL table (bigint key, numeric, text, timestamp, timestamptz, date, bool, uuid,
bytea, float8) is filled with generate_series; its lake mirror is written by Spark with the
same values and the merge job's layout (metadata columns, `_cdc_commit_lsn` before the
snapshot), and a cut recorded once verify holds its snapshot (nothing is written meanwhile, so
the cut is true). Measured:

* PostgreSQL: `SELECT count(*)` + every row fetched by psycopg (server-side cursor) vs verify's
  range summaries (one scan computing the canonical text and md5 per row);
* lake: Spark `count()` + every row collected to Python (`toLocalIterator`) vs verify's range
  summaries at the cut's version;
* the whole `run_verify` (snapshot, cut, both sides, the float column compared directly).

    .venv/bin/python benchmarks/verify.py [--rows 1000000]

Starts a throwaway PostgreSQL 15 (scripts/devstack, as the tests do).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "scripts")]
os.environ["TZ"] = "UTC"
time.tzset()

import psycopg  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from spark_jobs.cuts.manifest import Cut, append_cut  # noqa: E402
from spark_jobs.runtime.session import local_session  # noqa: E402
from spark_jobs.verify.online import VerifyConfig, run_verify  # noqa: E402
from spark_jobs.verify.report import render_text  # noqa: E402

DDL = """
CREATE TABLE bench (id bigint PRIMARY KEY, amount numeric(12,2), note text, ts timestamp,
    tstz timestamptz, d date, flag bool, u uuid, b bytea, f float8);
INSERT INTO bench SELECT i, (i % 100000) / 100.0, 'row ' || i,
    timestamp '2024-01-01' + i * interval '1 second',
    timestamptz '2024-01-01 00:00+00' + i * interval '1 millisecond',
    date '2024-01-01' + (i % 1000), i % 2 = 0, md5(i::text)::uuid, decode(md5(i::text), 'hex'),
    i::float8 / 7
FROM generate_series(1, {rows}) i;
ANALYZE bench;
"""


def lake_frame(spark, rows: int):  # type: ignore[no-untyped-def]
    h = F.md5(F.col("id").cast("string"))
    return spark.range(1, rows + 1).select(
        F.col("id"),
        ((F.col("id") % 100000).cast("decimal(20,0)") / 100).cast("decimal(12,2)")
        .alias("amount"),
        F.concat(F.lit("row "), F.col("id").cast("string")).alias("note"),
        F.expr("timestamp_ntz'2024-01-01 00:00:00' + make_dt_interval(0, 0, 0, id)")
        .alias("ts"),
        F.expr("timestamp'2024-01-01 00:00:00' + make_dt_interval(0, 0, 0, id / 1000.0)")
        .alias("tstz"),
        F.expr("date_add(date'2024-01-01', cast(id % 1000 as int))").alias("d"),
        (F.col("id") % 2 == 0).alias("flag"),
        F.concat_ws("-", h.substr(1, 8), h.substr(9, 4), h.substr(13, 4), h.substr(17, 4),
                    h.substr(21, 12)).alias("u"),
        F.unhex(h).alias("b"),
        (F.col("id").cast("double") / 7.0).alias("f"),
        F.lit("r").alias("_cdc_op"), F.lit(1).cast("long").alias("_cdc_commit_lsn"),
        F.col("id").alias("_cdc_txn_index"), F.lit(0).cast("long").alias("_cdc_ts_ms"))


def timed(fn):  # type: ignore[no-untyped-def]
    started = time.monotonic()
    value = fn()
    return value, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    from devstack.ports import free_port
    from devstack.postgres import Postgres, default_bin
    from devstack.spark import spark_jars
    from devstack.stack import cache_dir

    base = Path(tempfile.mkdtemp(prefix="pgcdc-bench-verify-"))
    os.chmod(base, 0o755)
    pg = Postgres(default_bin(), base / "pg", free_port(), {"fsync": "off",
                                                             "max_wal_senders": "4"})
    pg.start()
    spark = local_session(spark_jars(cache_dir()), app_name="pgcdc-bench-verify",
                          extra={"spark.driver.memory": "3g"})
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            _, fill = timed(lambda: conn.execute(DDL.format(rows=int(args.rows))))
        target = str(base / "lake")
        lake_frame(spark, args.rows).repartition(8).write.format("delta").save(
            f"{target}/public/bench")
        print(f"{args.rows:,} rows: PostgreSQL filled in {fill:.1f}s, lake written")

        def pg_baseline() -> int:
            with psycopg.connect(pg.dsn) as conn:
                conn.execute("SELECT count(*) FROM bench").fetchone()
                n = 0
                with conn.cursor(name="all") as cur:
                    cur.itersize = 10_000
                    cur.execute("SELECT * FROM bench")
                    for _ in cur:
                        n += 1
            return n

        def lake_baseline() -> int:
            frame = spark.read.format("delta").load(f"{target}/public/bench")
            frame.count()
            return sum(1 for _ in frame.toLocalIterator())

        _, pg_base = timed(pg_baseline)
        _, lake_base = timed(lake_baseline)
        lines: list[str] = []

        def progress(line: str) -> None:
            lines.append(line)
            print(f"  verify: {line}")
            if line.startswith("PostgreSQL snapshot at"):
                with psycopg.connect(pg.dsn, autocommit=True) as conn:
                    row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'").fetchone()
                assert row is not None
                append_cut(target, Cut(int(row[0]), 0, {"public/bench": 0}), "bench")

        report, total = timed(lambda: run_verify(spark, VerifyConfig(
            pg.dsn, target, progress=progress, rows_per_range=50_000)))
        print("\n".join(render_text(report)))
        pg_hash = _seconds(lines, "PostgreSQL")
        lake_hash = _seconds(lines, "lake")
        rows = args.rows
        print(f"\n| {rows:,} rows | seconds | rows/s | vs baseline |")
        print("| --- | ---: | ---: | ---: |")
        for name, seconds, base_s in [
                ("PostgreSQL: COUNT(*) + full read (psycopg)", pg_base, pg_base),
                ("PostgreSQL: verify's range summaries", pg_hash, pg_base),
                ("lake: count() + full read (Spark → Python)", lake_base, lake_base),
                ("lake: verify's range summaries", lake_hash, lake_base),
                ("whole verify (both sides, float column directly)", total,
                 pg_base + lake_base)]:
            print(f"| {name} | {seconds:.1f} | {rows / seconds:,.0f} |"
                  f" {base_s / seconds:.2f} x |")
        return 0 if report.clean else 3
    finally:
        spark.stop()
        pg.stop()


def _seconds(lines: list[str], side: str) -> float:
    for line in lines:
        if f": {side} " in line and " hashed in " in line:
            return float(line.split(" hashed in ")[1].split("s")[0])
    return float("nan")


if __name__ == "__main__":
    sys.exit(main())

"""pgcdc verify --target PATH: compare PostgreSQL, read as of a snapshot position L, with the
Delta lake at its first consistent cut at or after L (spark_jobs/verify/online.py), while
writes continue. Runs a local Spark in this process (the Delta jars from --jars,
PGCDC_SPARK_JARS, or Spark's --packages resolution).

Exit codes: 0 every table equal; 3 a table differs (rows missing, extra or differing); 1 an
error (unreachable server, no cut in time, a table that cannot be verified)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from connector import config as config_mod
from connector.errors import ConfigError
from connector.options import add_options, parsed


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("verify", help="prove that the Delta lake equals PostgreSQL",
                              description=__doc__)
    p.add_argument("--config", metavar="FILE", help="YAML configuration file")
    add_options(p, config_mod.Config, layered=True, names=("dsn",))
    p.add_argument("--target", required=True, help="the lake root the merge job writes")
    p.add_argument("--tables", help="comma-separated schema.table patterns (default: every "
                   "table of the lake cut)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--max-examples", type=int, default=10, metavar="N",
                   help="example keys per table (default 10)")
    p.add_argument("--timeout-s", type=float, default=300.0, metavar="S",
                   help="how long to wait for a lake cut at or after the snapshot (default 300)")
    p.add_argument("--rows-per-range", type=int, default=50_000, metavar="N",
                   help="rows per hash range (default 50000)")
    p.add_argument("--jars", help="comma-separated Delta jars (default PGCDC_SPARK_JARS)")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    cfg = config_mod.load(args.config, parsed(args, config_mod.Config, ("dsn",)),
                          validate=False)
    if not cfg.dsn:
        raise ConfigError("missing dsn (--dsn or PGCDC_DSN)")
    config_mod.check_dsn(cfg.dsn)
    try:
        from spark_jobs.verify.online import VerifyConfig, run_verify
        from spark_jobs.verify.report import exit_code, render_json, render_text
    except ImportError as exc:
        raise ConfigError(f"verify needs the spark extra (pip install 'pgcdc[spark]'): "
                          f"{exc}") from None
    config = VerifyConfig(
        dsn=cfg.dsn, target=args.target,
        tables=[t.strip() for t in (args.tables or "").split(",") if t.strip()],
        max_examples=args.max_examples, timeout_s=args.timeout_s,
        rows_per_range=args.rows_per_range,
        progress=lambda line: print(f"pgcdc verify: {line}", file=sys.stderr, flush=True))
    spark = _session(args.jars)
    try:
        report = run_verify(spark, config)
    finally:
        spark.stop()
    if args.json:
        print(render_json(report))
    else:
        print("\n".join(render_text(report)))
    return exit_code(report)


def _session(jars: str | None) -> Any:
    """A local Spark session in UTC (PySpark hands timestamps over in local time)."""
    import time

    os.environ["TZ"] = "UTC"
    time.tzset()
    from spark_jobs.runtime.session import local_session
    from spark_jobs.runtime.submit import SPARK_PACKAGES, resolve_jars

    paths = [j for j in (jars or "").split(",") if j] or resolve_jars()
    extra = {} if paths else {"spark.jars.packages": ",".join(SPARK_PACKAGES)}
    spark = local_session(paths, extra=extra, app_name="pgcdc-verify")
    spark.sparkContext.setLogLevel("ERROR")
    return spark

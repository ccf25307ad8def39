"""pgcdc lake: read the lake the merge job writes, with delta-rs and Kafka: no Spark.

* `lake cuts --target PATH [--json]`: the transaction-consistent cuts the merge job recorded
  (`pgcdc merge --consistent-cuts`), oldest first: position, source commit time, batch and each
  table's Delta version (`<target>/_pgcdc/cuts`).
* `lake status --target PATH [--bootstrap-servers B] [--json] [--max-lag-s S]`: per table, the
  records the job has not applied and how old the oldest is, the Delta version, files, size,
  tombstones waiting and dead letters (spark_jobs/lake/status.py); exit status 3 when a table
  lags more than `--max-lag-s` (1 when the lake or Kafka cannot be read), for a cron job or a
  health check."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from typing import Any

LAGGING = 3  # `lake status --max-lag-s`: a table lags (1: an error, 2: a usage error)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("lake", help="inspect the lake the merge job writes")
    sub = p.add_subparsers(dest="lake_command", metavar="COMMAND", required=True)
    cuts = sub.add_parser("cuts", help="list the transaction-consistent cuts (--consistent-cuts)",
                          description=__doc__)
    cuts.add_argument("--target", required=True, help="the merge job's --target")
    cuts.add_argument("--json", action="store_true", help="one JSON object per line")
    cuts.set_defaults(handler=handle_cuts)
    status = sub.add_parser(
        "status", help="where each table stands: records behind, lag, size, dead letters",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    status.add_argument("--target", required=True, help="the merge job's --target")
    status.add_argument("--checkpoint", help="the merge job's --checkpoint, if it set one "
                        "(default TARGET/_pgcdc/checkpoint)")
    status.add_argument("--dead-letter", help="the merge job's --dead-letter, if it set one "
                        "(default TARGET/_pgcdc/dead_letter)")
    status.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
                        help="Kafka, for the records behind and the lag (default "
                        "$KAFKA_BOOTSTRAP_SERVERS; without it: the lake only)")
    status.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                        help="a librdkafka setting for reaching Kafka (TLS, SASL), repeatable")
    status.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting naming the store as the job was given it "
                        "(spark.hadoop.fs.s3a.*), repeatable; the AWS variables work too")
    status.add_argument("--max-lag-s", type=float, default=None,
                        help="exit with status 3 when a table's oldest unapplied record is "
                        "older than this many seconds")
    status.add_argument("--json", action="store_true", help="one JSON object")
    status.set_defaults(handler=handle_status)


def _time(ms: int | None) -> str | None:
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds")


def handle_cuts(args: argparse.Namespace) -> int:
    from connector.errors import ConfigError

    try:
        from spark_jobs.cuts.manifest import read_cuts
    except ImportError as exc:
        raise ConfigError(f"reading the lake needs the spark extra (pip install "
                          f"'pgcdc[spark]'): {exc}") from None
    cuts = read_cuts(args.target)
    if args.json:
        for c in cuts:
            print(json.dumps({"lsn": c.lsn, "lsn_text": c.lsn_text,
                              "source_ts": _time(c.source_ts_ms), "batch_id": c.batch_id,
                              "recorded_at": _time(c.recorded_at_ms),
                              "versions": dict(sorted(c.versions.items()))}))
        return 0
    if not cuts:
        print(f"no cuts recorded under {args.target.rstrip('/')}/_pgcdc/cuts (run the merge "
              "job with --consistent-cuts)", file=sys.stderr)
        return 0
    print(f"{'LSN':<18} {'SOURCE COMMIT TIME':<30} {'BATCH':>7} {'TABLES':>6}  VERSIONS")
    for c in cuts:
        versions = " ".join(f"{p}@{v}" for p, v in sorted(c.versions.items()))
        print(f"{c.lsn_text:<18} {_time(c.source_ts_ms) or '-':<30} {c.batch_id:>7} "
              f"{len(c.versions):>6}  {versions}")
    return 0


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    from connector.errors import ConfigError

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{flag} wants KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def handle_status(args: argparse.Namespace) -> int:
    from connector.errors import ConfigError

    try:
        import pyarrow  # noqa: F401  (read_status imports it late: say it here, in one line)

        from spark_jobs.lake import storage
        from spark_jobs.lake.status import read_status, render_json, render_text, too_late
    except ImportError as exc:
        raise ConfigError(f"reading the lake needs the spark extra (pip install "
                          f"'pgcdc[spark]'): {exc}") from None
    storage.configure(_pairs(args.conf, "--conf"))
    try:
        status = read_status(args.target, args.checkpoint, args.dead_letter,
                             args.bootstrap_servers, _pairs(args.kafka_option, "--kafka-option"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the lake at {args.target}: {exc}") from None
    print(render_json(status) if args.json else render_text(status))
    if status.batch is None:
        print(f"no batch committed in {status.checkpoint} yet (is the merge job's --target or "
              "--checkpoint right?)", file=sys.stderr)
    if args.max_lag_s is not None:
        late = too_late(status, args.max_lag_s)
        for table in late:
            print(f"pgcdc lake status: {table.table} is {table.lag_s:.1f} s behind "
                  f"({table.behind} record(s) of {table.topic} not applied; "
                  f"--max-lag-s {args.max_lag_s:g})", file=sys.stderr)
        if late:
            return LAGGING
    return 0

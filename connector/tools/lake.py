"""pgcdc lake cuts --target PATH [--json]: the transaction-consistent cuts the merge job
recorded (`pgcdc merge --consistent-cuts`), oldest first: position, source commit time, batch
and each table's Delta version. Reads `<target>/_pgcdc/cuts` with delta-rs: no Spark."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("lake", help="inspect the lake the merge job writes")
    sub = p.add_subparsers(dest="lake_command", metavar="COMMAND", required=True)
    cuts = sub.add_parser("cuts", help="list the transaction-consistent cuts (--consistent-cuts)",
                          description=__doc__)
    cuts.add_argument("--target", required=True, help="the merge job's --target")
    cuts.add_argument("--json", action="store_true", help="one JSON object per line")
    cuts.set_defaults(handler=handle_cuts)


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

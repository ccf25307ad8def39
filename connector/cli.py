"""`pgcdc` command line: a thin dispatcher. Each subcommand lives in its own module and provides
`register(subparsers)`, which adds its parser and sets `handler(args) -> exit code`.

Exit codes: 0 success; 1 an expected failure (bad input, unreachable server, ...) reported as
one line on stderr; 2 a usage error (argparse); 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import psycopg

from connector import __version__
from connector.errors import CdcError
from connector.redact import redact
from connector.replication.privileges import dsn_role, lacking
from connector.tools import decode, grants, lake, merge, run, snapshot, status, verify


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pgcdc", description="PostgreSQL logical replication (pgoutput) to Kafka.")
    parser.add_argument("--version", action="version", version=f"pgcdc {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    run.register(subparsers)
    status.register(subparsers)
    snapshot.register(subparsers)
    grants.register(subparsers)
    merge.register(subparsers)
    decode.register(subparsers)
    lake.register(subparsers)
    verify.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if getattr(args, "passthrough", False):
        args.job_args = extra  # `pgcdc merge`: every argument belongs to the Spark job
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        code: int = handler(args)
    except CdcError as exc:
        print(redact(f"pgcdc {args.command}: {exc}"), file=sys.stderr)
        return 1
    except psycopg.errors.InsufficientPrivilege as exc:
        # A refusal no admin step mapped itself: still one line naming the grant.
        role = dsn_role(getattr(args, "dsn", None) or os.environ.get("PGCDC_DSN", ""))
        print(redact(f"pgcdc {args.command}: {lacking(exc, role)}"), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())

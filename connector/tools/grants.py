"""pgcdc grants: print the SQL that sets up a least-privilege role for pgcdc.

    pgcdc grants --role pgcdc --database app --tables 'public.orders,public.items' --owner app

The SQL is printed, not run: an administrator reads it and runs it (docs/operations.md "Least
privilege"). With `--dsn`, table patterns are resolved against the database (and its name
read from it); without, `--tables` must name tables (schema.table).
"""

from __future__ import annotations

import argparse
from typing import Any

from connector.errors import ConfigError
from connector.replication import ReplicationAdmin
from connector.replication.privileges import grants_sql
from connector.snapshot.incremental import signals


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("grants", help="print the SQL of a least-privilege role for pgcdc")
    p.add_argument("--role", required=True, help="the role pgcdc connects as")
    p.add_argument("--tables", required=True, metavar="PATTERNS",
                   help="comma-separated schema.table names (patterns with --dsn)")
    p.add_argument("--database", help="the database (default: the --dsn one)")
    p.add_argument("--dsn", help="resolve --tables patterns and the database name here")
    p.add_argument("--publication", default="pgcdc", help="publication name (default pgcdc)")
    p.add_argument("--owner", help="the tables' owner role: pgcdc becomes a member of it and "
                   "creates the publication (and adds tables created later); without it, the "
                   "owner pre-creates the publication")
    p.add_argument("--existing-role", action="store_true",
                   help="ALTER the role instead of CREATE ROLE")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    patterns = [p.strip() for p in args.tables.split(",") if p.strip()]
    database = args.database
    if args.dsn:
        admin = ReplicationAdmin.connect(args.dsn)
        try:
            tables = admin.resolve_tables(patterns)
            database = database or str(admin.conn.info.dbname)
        finally:
            admin.close()
    else:
        if any("*" in p or "?" in p for p in patterns):
            raise ConfigError("--tables patterns need --dsn (to resolve them); or name tables")
        tables = [(s or "public", t) for s, _, t in (p.rpartition(".") for p in patterns)]
    if not database:
        raise ConfigError("give --database (or --dsn)")
    print(grants_sql(args.role, database, tables, publication=args.publication,
                     signal_table=signals.SIGNAL_TABLE, signal_ddl=signals.ddl(),
                     owner=args.owner, create_role=not args.existing_role))
    return 0

"""pgcdc grants: print the SQL that sets up a least-privilege role for pgcdc.

    pgcdc grants --role pgcdc --database app --tables 'public.orders,public.items' --owner app

The SQL is printed, not run: an administrator reads it and runs it (docs/operations.md "Least
privilege"). With `--dsn`, table patterns are resolved against the database (and its name
read from it); without, `--tables` must name tables (schema.table).

    pgcdc grants --detach-deletes-sql

prints only the SQL of ``detach_deletes``' event triggers, for a superuser to run in the
database once (connector/replication/detach_trigger.py), and how to remove them.
"""

from __future__ import annotations

import argparse
from typing import Any

from connector.errors import ConfigError
from connector.replication import ReplicationAdmin
from connector.replication.detach_trigger import install_sql, remove_sql
from connector.replication.privileges import grants_sql
from connector.snapshot.incremental import signals


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("grants", help="print the SQL of a least-privilege role for pgcdc")
    p.add_argument("--role", help="the role pgcdc connects as (required)")
    p.add_argument("--tables", metavar="PATTERNS",
                   help="comma-separated schema.table names (patterns with --dsn; required)")
    p.add_argument("--database", help="the database (default: the --dsn one)")
    p.add_argument("--dsn", help="resolve --tables patterns and the database name here")
    p.add_argument("--publication", default="pgcdc", help="publication name (default pgcdc)")
    p.add_argument("--owner", help="the tables' owner role: pgcdc becomes a member of it and "
                   "creates the publication (and adds tables created later); without it, the "
                   "owner pre-creates the publication")
    p.add_argument("--existing-role", action="store_true",
                   help="ALTER the role instead of CREATE ROLE")
    p.add_argument("--detach-deletes-sql", action="store_true",
                   help="print only the SQL of detach_deletes' event triggers, for a superuser "
                        "to run in the database once (and, as a comment, how to remove them)")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    if args.detach_deletes_sql:
        print(f"-- detach_deletes (docs/publishing.md); to remove: {remove_sql()}")
        print(install_sql())
        return 0
    if not args.role or not args.tables:
        raise ConfigError("pgcdc grants needs --role and --tables (or --detach-deletes-sql)")
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

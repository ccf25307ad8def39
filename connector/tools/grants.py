"""pgcdc grants: print the SQL that sets up a least-privilege role for pgcdc.

    pgcdc grants --role pgcdc --database app --tables 'public.orders,public.items' --owner app

The SQL is printed, not run: an administrator reads it and runs it (docs/operations.md "Least
privilege"). With `--dsn`, table patterns are resolved against the database (and its name
read from it); without, `--tables` must name tables (schema.table).

    pgcdc grants --detach-deletes-sql

prints only the SQL of ``detach_deletes``' event triggers, for a superuser to run in the
database once (connector/replication/detach_trigger.py), and how to remove them.

    pgcdc grants --table-trigger-sql --config pgcdc.yaml

prints only the SQL of ``table_trigger``'s event trigger for the producer's publication, patterns
and keyless policy (from ``--config`` and/or ``--publication``, ``--tables``,
``--keyless-tables``; connector/replication/table_trigger.py), which pgcdc checks at start.
"""

from __future__ import annotations

import argparse
from typing import Any

from connector import config as config_mod
from connector.errors import ConfigError
from connector.replication import ReplicationAdmin, table_trigger
from connector.replication.detach_trigger import install_sql, remove_sql
from connector.replication.keyless import KEYLESS_POLICIES
from connector.replication.privileges import grants_sql
from connector.snapshot.incremental import signals


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("grants", help="print the SQL of a least-privilege role for pgcdc")
    p.add_argument("--role", help="the role pgcdc connects as (required)")
    p.add_argument("--tables", metavar="PATTERNS",
                   help="comma-separated schema.table names (patterns with --dsn; required)")
    p.add_argument("--database", help="the database (default: the --dsn one)")
    p.add_argument("--dsn", help="resolve --tables patterns and the database name here")
    p.add_argument("--publication", help="publication name (default pgcdc)")
    p.add_argument("--owner", help="the tables' owner role: pgcdc becomes a member of it and "
                   "creates the publication (and adds tables created later); without it, the "
                   "owner pre-creates the publication")
    p.add_argument("--existing-role", action="store_true",
                   help="ALTER the role instead of CREATE ROLE")
    p.add_argument("--detach-deletes-sql", action="store_true",
                   help="print only the SQL of detach_deletes' event triggers, for a superuser "
                        "to run in the database once (and, as a comment, how to remove them)")
    p.add_argument("--table-trigger-sql", action="store_true",
                   help="print only the SQL of table_trigger's event trigger for a superuser to "
                        "run in the database (and, as a comment, how to remove it): for the "
                        "publication, --tables and --keyless-tables of --config (or of these "
                        "options; --tables defaults to *), as pgcdc run checks at start")
    p.add_argument("--keyless-tables", choices=list(KEYLESS_POLICIES),
                   help="with --table-trigger-sql: the producer's --keyless-tables")
    p.add_argument("--config", metavar="FILE",
                   help="with --table-trigger-sql: the producer's YAML configuration")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    if args.detach_deletes_sql:
        print(f"-- detach_deletes (docs/publishing.md); to remove: {remove_sql()}")
        print(install_sql())
        return 0
    if args.table_trigger_sql:
        cfg = config_mod.load(args.config, {"publication": args.publication,
                                            "tables": args.tables,
                                            "keyless_tables": args.keyless_tables},
                              validate=False)
        print(f"-- table_trigger of publication {cfg.publication} (docs/publishing.md); to "
              f"remove: {table_trigger.remove_sql(cfg.publication)}")
        print(table_trigger.install_sql(cfg.table_trigger_settings()))
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
    print(grants_sql(args.role, database, tables, publication=args.publication or "pgcdc",
                     signal_table=signals.SIGNAL_TABLE, signal_ddl=signals.ddl(),
                     owner=args.owner, create_role=not args.existing_role))
    return 0

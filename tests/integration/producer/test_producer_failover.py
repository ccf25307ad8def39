"""Failover support: the failover slot flag, `pgcdc status` on it, two-host DSNs."""

from __future__ import annotations

import subprocess
import sys

import psycopg
import pytest
from devstack.ports import free_port
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.support.cdc_checks import assert_one_clear_line, execute, start_and_exit, stream_run
from tests.support.producer import current_lsn

pytestmark = pytest.mark.integration


def _status(dsn: str, slot: str) -> str:
    out = subprocess.run([sys.executable, "-m", "connector.cli", "status", "--dsn", dsn,
                          "--slot", slot], capture_output=True, text=True, timeout=60)
    return out.stdout + out.stderr


def test_status_shows_failover_flag(postgres) -> None:
    slot = "failover_status"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
        version = conn.info.server_version
    try:
        if version < 170000:
            assert "failover: not available" in _status(postgres.dsn, slot)
            return
        assert "failover: off" in _status(postgres.dsn, slot)
        with psycopg.connect(postgres.dsn, autocommit=True, replication="database") as rconn:
            rconn.execute(f'ALTER_REPLICATION_SLOT "{slot}" (FAILOVER true)')
        assert "failover: on" in _status(postgres.dsn, slot)
    finally:
        with psycopg.connect(postgres.dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))


def test_run_makes_the_slot_a_failover_slot(postgres, producer_run, log_dir) -> None:
    """Default: on where the server is 17+; asked for explicitly on an older one: one line."""
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        version = conn.info.server_version
    run = stream_run(producer_run, *(["--failover-slot"] if version < 170000 else []))
    execute(postgres.dsn, f"CREATE TABLE failover_{run.tag} (id int PRIMARY KEY)")
    if version < 170000:
        code, out = start_and_exit(run, log_dir)
        assert_one_clear_line(code, out, "--failover-slot needs PostgreSQL 17+")
        return
    run.start(log_dir)
    execute(postgres.dsn, f"INSERT INTO failover_{run.tag} VALUES (1)")
    run.wait_confirmed(current_lsn(postgres.dsn))
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        row = conn.execute("SELECT failover FROM pg_replication_slots WHERE slot_name = %s",
                           (run.slot,)).fetchone()
    assert row == (True,)
    assert run.stop() == 0


def test_two_host_dsn_reaches_the_writable_server(postgres, producer_run, log_dir) -> None:
    """libpq skips a host that is down: the SQL and the replication connection both work."""
    parts = conninfo_to_dict(postgres.dsn)
    parts["host"] = f"127.0.0.1,{parts.get('host', '127.0.0.1')}"
    parts["port"] = f"{free_port()},{parts['port']}"
    parts["target_session_attrs"] = "read-write"
    run = stream_run(producer_run)
    run.dsn = make_conninfo(**parts)
    table = f"twohost_{run.tag}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY)")
    run.start(log_dir)
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (1)")
    run.wait_confirmed(current_lsn(postgres.dsn))
    assert run.stop() == 0

"""`pgcdc status` tells whether the slot is a failover slot (PostgreSQL 17+)."""

from __future__ import annotations

import subprocess
import sys

import psycopg
import pytest

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

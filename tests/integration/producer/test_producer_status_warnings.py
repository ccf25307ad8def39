"""`pgcdc status` warns about a slot that holds WAL for nobody, or more than the threshold."""

from __future__ import annotations

import subprocess
import sys
import uuid

import psycopg
import pytest

from connector.replication.health import lag_warning

pytestmark = pytest.mark.integration


def _status(dsn: str, slot: str, *extra: str) -> str:
    out = subprocess.run([sys.executable, "-m", "connector.cli", "status", "--dsn", dsn,
                          "--slot", slot, *extra], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_an_inactive_slot_retaining_wal_is_a_warning(postgres) -> None:
    slot = f"abandoned_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
        conn.execute(f"CREATE TABLE {slot} AS SELECT g AS id, repeat('x', 200) AS v"
                     " FROM generate_series(1, 20000) g")  # a few MiB of WAL behind the slot
    try:
        out = _status(postgres.dsn, slot, "--wal-warn-bytes", "1048576")
        assert f"warning: slot {slot} is inactive" in out, out
        assert f"pg_drop_replication_slot('{slot}')" in out
        assert "more than 1.0 MiB (--wal-warn-bytes)" in out, out
        quiet = _status(postgres.dsn, slot, "--wal-warn-bytes", str(1 << 40))
        assert "more than" not in quiet and "is inactive" in quiet  # inactive still warns
    finally:
        with psycopg.connect(postgres.dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
            conn.execute(f"DROP TABLE {slot}")


def test_run_warns_only_past_the_threshold() -> None:
    assert lag_warning("s", 1 << 20, 1 << 30) is None
    warning = lag_warning("s", 3 << 30, 1 << 30)
    assert warning is not None and "3.0 GiB of WAL not yet confirmed" in warning

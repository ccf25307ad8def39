"""Fixtures of the snapshot tests: `pgcdc run` as the producer tests run it (tests.support)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support.producer import ProducerRun


@pytest.fixture
def producer_run(postgres: Any, kafka: Any, registry: Any) -> Iterator[Any]:
    runs: list[ProducerRun] = []

    def make(tables: str, *extra: str) -> ProducerRun:
        run = ProducerRun(postgres.dsn, kafka.bootstrap, registry.url, tables, list(extra))
        runs.append(run)
        return run

    yield make
    for run in runs:
        _drop(run)
        print(f"--- pgcdc run {run.tag} output ---\n{run.output()[-5000:]}")


def _drop(run: ProducerRun) -> None:
    """Like `ProducerRun.drop`, without waiting for a slot a snapshot-only run never made."""
    if run.proc is not None and run.proc.poll() is None:
        run.proc.kill()
        run.proc.wait()
    with psycopg.connect(run.dsn, autocommit=True) as conn:
        for _ in range(50):
            row = conn.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s",
                               (run.slot,)).fetchone()
            if row is None:
                break
            if not row[0]:
                conn.execute("SELECT pg_drop_replication_slot(%s)", (run.slot,))
                break
            time.sleep(0.1)
        conn.execute(f"DROP PUBLICATION IF EXISTS pub_{run.tag}")


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path

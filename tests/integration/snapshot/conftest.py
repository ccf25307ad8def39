"""Fixtures of the snapshot tests: `pgcdc run` as the producer tests run it (tests.support)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.pg_versions import one_pg_version
from tests.support.producer import ProducerRun

# `pgcdc run`'s snapshots (tests/support/pg_versions.py): the same code on PostgreSQL 15 and 18
# (slot with exported snapshot, TID range chunks, column lists: all 15+), each test starting
# producer subprocesses, so these run on PostgreSQL 18 only. Both versions still run for the
# Relation the snapshot describes (generated columns are published from 18) and the chunk
# queries. Add a file here or mark a test `@pytest.mark.all_pg_versions` when the version
# matters; PGCDC_TEST_ALL_PG=1 runs all on both.
BOTH_PG_VERSIONS = {
    "test_snapshot_tables.py",  # generated columns published from 18, column lists, filters
    "test_snapshot_chunk_query.py",  # no producer: cheap, and the queries meet each planner
    "test_snapshot_rewrites_catalog.py",  # no producer: generated columns published from 18
}


@pytest.hookimpl(tryfirst=True)  # before pytest applies the fixture's own params
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    one_pg_version(metafunc, keep_both=BOTH_PG_VERSIONS)


@pytest.fixture
def producer_run(postgres: Any, kafka: Any, registry: Any) -> Iterator[Any]:
    runs: list[ProducerRun] = []

    def make(tables: str, *extra: str) -> ProducerRun:
        run = ProducerRun(postgres.dsn, kafka.bootstrap, registry.url, tables, list(extra))
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.drop()
        print(f"--- pgcdc run {run.tag} output ---\n{run.output()[-5000:]}")


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path

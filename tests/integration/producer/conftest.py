"""Fixtures of the producer tests (helpers in tests/support/producer.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.pg_versions import one_pg_version
from tests.support.producer import ProducerRun

# These tests check `pgcdc run` itself (failures, validation, restarts, metrics), each starting
# a producer subprocess; the server version changes none of that, so they run on PostgreSQL 18
# only (tests/support/pg_versions.py). Both versions still run where it matters: pgoutput protocol
# 3 vs 4 in streaming, type output, failover slots (17+). Add a file here, or mark a test
# `@pytest.mark.all_pg_versions`, when the version matters; PGCDC_TEST_ALL_PG=1 runs all on both.
BOTH_PG_VERSIONS = {
    "test_producer_failover.py",  # failover slots exist from 17
    "test_producer_streaming.py",  # streamed and prepared transactions: protocol 3 vs 4
    "test_producer_types.py",  # type output of each server, text and binary tuples
    "test_producer_native_parity.py",  # the C decoders over each server's tuples
    "test_producer_publication_settings.py",  # column lists 15+, generated columns 18
}


@pytest.hookimpl(tryfirst=True)  # before pytest applies the fixture's own params
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    one_pg_version(metafunc, keep_both=BOTH_PG_VERSIONS)


@pytest.fixture
def producer_run(postgres, kafka, registry, tmp_path) -> Iterator[Any]:
    runs: list[ProducerRun] = []

    def make(tables: str, *extra: str) -> ProducerRun:
        run = ProducerRun(postgres.dsn, kafka.bootstrap, registry.url, tables, list(extra))
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.drop()
        # Shown by pytest only when the test failed.
        print(f"--- pgcdc run {run.tag} output ---\n{run.output()[-5000:]}")


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path


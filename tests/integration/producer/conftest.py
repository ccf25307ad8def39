"""Fixtures of the producer tests (helpers in tests/support/producer.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.producer import ProducerRun


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


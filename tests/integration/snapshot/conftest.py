"""Fixtures of the snapshot tests: the producer tests' `pgcdc run` helpers, reused."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "producer"))

from producer_support import ProducerRun  # noqa: E402


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

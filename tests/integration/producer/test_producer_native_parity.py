"""The C paths (connector/native) change nothing a consumer sees: two `pgcdc run` over the same
table of every contract type, one with the C extension and one with ``PGCDC_NO_NATIVE=1``,
publish equal events -- snapshot reads (COPY lines) and streamed changes (pgoutput tuples)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from connector.speedups import NO_NATIVE_ENV, native
from tests.support.cdc_checks import execute, read_records
from tests.support.contract_table import ROWS, columns, create_table, has_xml, insert_rows

pytestmark = pytest.mark.integration


def _events(run: Any, table: str, count: int) -> list[tuple[Any, ...]]:
    records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                           min_count=count, logical_types=False)
    return [(r.key, r.value["op"], r.value["before"], r.value["after"],
             r.value["source"]["snapshot"], r.value["unchanged_toast"]) for r in records]


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_c_paths_and_python_paths_publish_equal_events(postgres, producer_run, log_dir,
                                                       binary: bool) -> None:
    assert native is not None, "connector._native is not built"
    fast = producer_run("-", *(["--binary"] if binary else []))
    table = f"parity_{fast.tag}"
    fast.tables = f"public.{table}"
    slow = producer_run(fast.tables, *(["--binary"] if binary else []))
    cols = columns(fast.tag, has_xml(postgres.dsn))
    create_table(postgres.dsn, fast.tag, table, cols)
    insert_rows(postgres.dsn, table, cols)  # read by the snapshots
    fast.start(log_dir)
    os.environ[NO_NATIVE_ENV] = "1"  # inherited by the second process only
    try:
        slow.start(log_dir)
    finally:
        del os.environ[NO_NATIVE_ENV]
    # streamed: every row's key changes (a delete and a create with every column), then an
    # update of every row in place
    execute(postgres.dsn, f"UPDATE {table} SET id = id + 100",
            f"UPDATE {table} SET i4 = i4")
    count = len(ROWS) * 4
    fast_events = _events(fast, table, count)
    assert len(fast_events) >= count
    slow_events = _events(slow, table, count)
    assert list(map(repr, slow_events)) == list(map(repr, fast_events))  # repr: NaN == NaN
    assert {event[4] for event in fast_events} >= {"true", "false"}  # snapshot and stream

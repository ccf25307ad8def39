"""Helpers of the snapshot tests (on top of `tests.support.producer`)."""

from __future__ import annotations

import os
import re
import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import Consumer, TopicPartition

from connector.pgoutput.lsn import str_to_lsn
from tests.support.cdc_checks import Record, read_records
from tests.support.producer import ProducerRun
from tests.support.table_state import final_state as final_state  # the snapshot tests' name

_CONSISTENT = re.compile(r"snapshot consistent at ([0-9A-F]+/[0-9A-F]+)")


def launch(run: ProducerRun, log_dir: Path) -> None:
    """Start `pgcdc run` without waiting for anything."""
    run.start(log_dir, wait=False)


def wait_exit(run: ProducerRun, timeout: float = 120.0) -> int:
    assert run.proc is not None
    return run.proc.wait(timeout)


def consistent_point(run: ProducerRun) -> int:
    """The snapshot's consistent point as the last run logged it."""
    found = _CONSISTENT.findall(run.output())
    assert found, run.output()
    return str_to_lsn(found[-1])


def wait_for_output(run: ProducerRun, text: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in run.output():
            return
        assert run.proc is not None
        if run.proc.poll() is not None:
            raise AssertionError(f"pgcdc exited {run.proc.returncode} before {text!r}: "
                                 f"{run.output()}")
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not logged within {timeout}s: {run.output()}")


def slots(dsn: str, prefix: str) -> list[tuple[str, bool]]:
    """(name, temporary) of the slots whose name starts with `prefix`."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT slot_name::text, temporary FROM pg_replication_slots"
                            " WHERE slot_name LIKE %s ORDER BY 1", (prefix + "%",)).fetchall()
    return [(r[0], r[1]) for r in rows]


def wait_no_slots(dsn: str, prefix: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not slots(dsn, prefix):
            return
        time.sleep(0.2)
    raise AssertionError(f"slots left: {slots(dsn, prefix)}")


def table_rows(dsn: str, query: str) -> dict[Any, dict[str, Any]]:
    """Rows of `query` keyed by their first column, as dicts (psycopg's Python values)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(query)
        names = [d.name for d in cur.description or []]
        return {row[0]: dict(zip(names, row, strict=True)) for row in cur.fetchall()}


def read_events(bootstrap: str, registry_url: str, topic: str, *, min_count: int = 0,
                timeout: float = 90.0) -> list[Record]:
    """The records of `topic` that carry a change event (`read_records` without tombstones)."""
    return read_records(bootstrap, registry_url, topic, min_count=min_count, timeout=timeout,
                        idle_s=2.0, tombstones=False)


def wait_records(bootstrap: str, topic: str, count: int, timeout: float = 60.0) -> None:
    """Until `topic` (partition 0) holds at least `count` records, committed or not
    (read_uncommitted: the high watermark, not the last stable offset)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "isolation.level": "read_uncommitted"})
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
            except Exception:  # the topic is not there yet
                low, high = 0, 0
            if high - low >= count:
                return
            time.sleep(0.1)
    finally:
        consumer.close()
    raise AssertionError(f"{topic}: fewer than {count} records after {timeout}s")


@contextmanager
def frozen(kafka: Any) -> Iterator[None]:
    """The test broker stopped (SIGSTOP) inside the block: connections stay open, nothing is
    acknowledged. It resumes (SIGCONT) on the way out, whatever happened."""
    pid = int(kafka.pid_file.read_text().strip())
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)

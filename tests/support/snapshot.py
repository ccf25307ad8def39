"""Helpers of the snapshot tests (on top of `tests.support.producer`)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import psycopg
from confluent_kafka import Consumer, TopicPartition

from connector.avro import SchemaRegistry, decode
from connector.pgoutput.lsn import str_to_lsn
from tests.support.kafka import caught_up
from tests.support.producer import ProducerRun

_CONSISTENT = re.compile(r"snapshot consistent at ([0-9A-F]+/[0-9A-F]+)")


def launch(run: ProducerRun, log_dir: Path) -> None:
    """Start `pgcdc run` without waiting for anything."""
    run.log = log_dir / f"pgcdc-{run.tag}-{time.monotonic_ns()}.log"
    run.proc = subprocess.Popen(run.command(), stdout=open(run.log, "w"),  # noqa: SIM115
                                stderr=subprocess.STDOUT, text=True)


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


def final_state(values: list[dict[str, Any]], key: str = "id") -> dict[Any, dict[str, Any]]:
    """Apply change events in contract order (commit_lsn, txn_index): the table they describe."""
    ordered = sorted(values, key=lambda v: (v["source"]["commit_lsn"], v["source"]["txn_index"]))
    state: dict[Any, dict[str, Any]] = {}
    for value in ordered:
        op = value["op"]
        if op in ("r", "c", "u"):
            if value["before"] is not None and value["before"][key] != value["after"][key]:
                state.pop(value["before"][key], None)
            state[value["after"][key]] = value["after"]
        elif op == "d":
            state.pop(value["before"][key], None)
        elif op == "t":
            state.clear()
    return state


class Event(NamedTuple):
    key: Any
    value: Any
    schema_id: int
    partition: int


def read_events(bootstrap: str, registry_url: str, topic: str, *, min_count: int = 0,
                timeout: float = 90.0, idle_s: float = 2.0) -> list[Event]:
    """Every record of `topic` with a value, decoded with its writer schema; waits for
    `min_count`, then until every record already in the topic is read (with `min_count` > 0)
    or `idle_s` pass with nothing new."""
    registry = SchemaRegistry(registry_url)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    events: list[Event] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
            if metadata is not None and metadata.error is None and metadata.partitions:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"topic {topic} never appeared")
            time.sleep(0.3)
        consumer.assign([TopicPartition(topic, p, 0) for p in metadata.partitions])
        idle_since = time.monotonic()
        while time.monotonic() < deadline:
            batch = [m for m in consumer.consume(1000, 0.3) if m.error() is None]
            if not batch:
                if len(events) >= min_count and (
                        time.monotonic() - idle_since > idle_s
                        or (min_count and caught_up(consumer))):
                    break
                continue
            idle_since = time.monotonic()
            for msg in batch:
                if not msg.value():
                    continue
                value = decode(msg.value(), registry.schema)
                key = decode(msg.key(), registry.schema).value if msg.key() else None
                events.append(Event(key, value.value, value.schema_id, msg.partition()))
    finally:
        consumer.close()
    assert len(events) >= min_count, f"{topic}: {len(events)} < {min_count} events"
    return events


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

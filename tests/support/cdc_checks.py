"""More helpers of the producer tests: records with their schema ids and timestamps, events in
contract order, SQL in one call, the producer's exit and last line."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

import httpx
import psycopg
from confluent_kafka import Consumer, TopicPartition

from connector.avro import SchemaRegistry, decode
from tests.support.kafka import caught_up
from tests.support.producer import ProducerRun

#: `pgcdc run` flags of tests about streaming: no initial snapshot of the (empty) tables.
STREAM_ONLY = ("--snapshot", "never")


def stream_run(producer_run: Callable[..., ProducerRun], *extra: str) -> ProducerRun:
    """A `pgcdc run` without initial snapshot, publishing the tables whose name holds its tag
    (not those of other tests on the same server)."""
    run = producer_run("-", *STREAM_ONLY, *extra)
    run.tables = f"public.*{run.tag}*"
    return run


class Record(NamedTuple):
    key: Any
    value: Any
    partition: int
    offset: int
    value_schema_id: int | None
    timestamp_ms: int
    headers: dict[str, bytes] | None = None  # the record's headers (None: it has none)


def read_records(bootstrap: str, registry_url: str, topic: str, *, min_count: int = 0,
                 timeout: float = 60.0, logical_types: bool = True,
                 idle_s: float = 1.5, isolation: str = "read_committed",
                 tombstones: bool = True) -> list[Record]:
    """Every record of `topic`, decoded with its writer schema (raw Avro data when
    `logical_types` is False); waits for `min_count`, then until every record already in the
    topic is read (with `min_count` > 0) or `idle_s` pass with nothing new.
    `isolation="read_uncommitted"` also returns records of aborted Kafka transactions;
    `tombstones=False` leaves out records without a value (nor are they counted)."""
    registry = SchemaRegistry(registry_url)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": isolation})
    records: list[Record] = []
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
            batch = consumer.consume(1000, 0.3)
            good = [m for m in batch if m.error() is None]
            if not good:
                if len(records) >= min_count and (
                        time.monotonic() - idle_since > idle_s
                        or (min_count and caught_up(consumer))):
                    break
                continue
            idle_since = time.monotonic()
            for msg in good:
                if not (tombstones or msg.value()):
                    continue
                key = (decode(msg.key(), registry.schema, logical_types=logical_types).value
                       if msg.key() else None)
                value, schema_id = None, None
                if msg.value():
                    decoded = decode(msg.value(), registry.schema, logical_types=logical_types)
                    value, schema_id = decoded.value, decoded.schema_id
                headers = msg.headers()
                records.append(Record(key, value, msg.partition(), msg.offset(), schema_id,
                                      msg.timestamp()[1],
                                      dict(headers) if headers else None))
    finally:
        consumer.close()
    assert len(records) >= min_count, f"{topic}: {len(records)} < {min_count} records"
    return records


def in_order(records: list[Record]) -> list[Record]:
    """Records with a value, in the contract's order: (source.commit_lsn, source.txn_index)."""
    return sorted((r for r in records if r.value is not None),
                  key=lambda r: (r.value["source"]["commit_lsn"], r.value["source"]["txn_index"],
                                 r.partition))


def execute(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


def rows(dsn: str, query: str, *settings: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for setting in settings:
            conn.execute(setting)  # type: ignore[arg-type]
        return conn.execute(query).fetchall()  # type: ignore[arg-type]


def exit_of(run: ProducerRun, timeout: float = 120.0) -> tuple[int, str]:
    """Wait for the producer to exit by itself: (exit code, its output)."""
    assert run.proc is not None
    code = run.proc.wait(timeout)
    return code, run.output()


def start_and_exit(run: ProducerRun, log_dir: Any, timeout: float = 120.0) -> tuple[int, str]:
    """Start a producer expected to fail before streaming: (exit code, output)."""
    run.start(log_dir, wait=False)
    return exit_of(run, timeout)


def last_line(output: str) -> str:
    lines = output.strip().splitlines()
    return lines[-1] if lines else ""


def assert_one_clear_line(code: int, output: str, *needles: str) -> str:
    """Exit 1, no traceback, the last line is `pgcdc run: ...` and contains every needle."""
    line = last_line(output)
    assert code == 1, output
    assert "Traceback" not in output, output
    assert line.startswith("pgcdc run: "), output
    for needle in needles:
        assert needle.lower() in line.lower(), f"{needle!r} not in {line!r}"
    return line


def subject_versions(registry_url: str, subject: str) -> list[int]:
    response = httpx.get(f"{registry_url}/subjects/{subject}/versions", timeout=10)
    response.raise_for_status()
    return [int(v) for v in response.json()]


def set_compatibility(registry_url: str, subject: str, level: str) -> None:
    response = httpx.put(f"{registry_url}/config/{subject}", json={"compatibility": level},
                         timeout=10)
    response.raise_for_status()

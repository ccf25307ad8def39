"""Helpers of the producer tests: run `pgcdc run` for real (a subprocess, as users run it)
and read back what it published."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from confluent_kafka import Consumer, TopicPartition

from connector.avro import SchemaRegistry, decode
from tests.support.kafka import caught_up

PGCDC = str(Path(sys.executable).parent / "pgcdc")


@dataclass
class ProducerRun:
    """One `pgcdc run` configuration (unique slot/publication/prefix) and its process."""

    dsn: str
    bootstrap: str
    registry_url: str
    tables: str
    extra: list[str] = field(default_factory=list)
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    proc: subprocess.Popen[str] | None = None
    log: Path | None = None

    @property
    def prefix(self) -> str:
        return f"t{self.tag}"

    @property
    def slot(self) -> str:
        return f"slot_{self.tag}"

    def command(self) -> list[str]:
        return [PGCDC, "run", "--dsn", self.dsn, "--bootstrap-servers", self.bootstrap,
                "--schema-registry-url", self.registry_url, "--topic-prefix", self.prefix,
                "--slot", self.slot, "--publication", f"pub_{self.tag}", "--tables",
                self.tables, "--schema-check-interval-s", "0.5", *self.extra]

    def start(self, log_dir: Path, *, wait: bool = True) -> None:
        self.log = log_dir / f"pgcdc-{self.tag}-{time.monotonic_ns()}.log"
        self.proc = subprocess.Popen(self.command(), stdout=open(self.log, "w"),  # noqa: SIM115
                                     stderr=subprocess.STDOUT, text=True)
        if wait:
            self.wait_streaming()

    def wait_streaming(self, timeout: float = 60.0) -> None:
        """Until the slot exists and a walsender is attached to it."""
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while time.monotonic() < deadline:
                row = conn.execute("SELECT active FROM pg_replication_slots WHERE slot_name=%s",
                                   (self.slot,)).fetchone()
                if row and row[0]:
                    return
                assert self.proc is not None
                if self.proc.poll() is not None:
                    raise AssertionError(f"pgcdc exited {self.proc.returncode}: {self.output()}")
                time.sleep(0.2)
        raise AssertionError(f"pgcdc not streaming after {timeout}s: {self.output()}")

    def output(self) -> str:
        return self.log.read_text() if self.log and self.log.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def confirmed_lsn(self) -> int:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT confirmed_flush_lsn - '0/0' FROM pg_replication_slots"
                               " WHERE slot_name = %s", (self.slot,)).fetchone()
        assert row is not None
        return int(row[0])

    def wait_confirmed(self, lsn: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.confirmed_lsn() >= lsn:
                return
            time.sleep(0.2)
        raise AssertionError(f"slot not confirmed to {lsn} within {timeout}s: {self.output()}")

    def drop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            # The process is gone: wait only for its walsender to release the slot. A run that
            # failed before creating one has none to wait for (that wait cost 5 s a test).
            for _ in range(50):
                row = conn.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s",
                                   (self.slot,)).fetchone()
                if row is None:
                    break
                if not row[0]:
                    conn.execute("SELECT pg_drop_replication_slot(%s)", (self.slot,))
                    break
                time.sleep(0.1)
            conn.execute(f"DROP PUBLICATION IF EXISTS pub_{self.tag}")


def current_lsn(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'").fetchone()
    assert row is not None
    return int(row[0])


def read_topic(bootstrap: str, registry_url: str, topic: str, *, min_count: int = 0,
               timeout: float = 60.0) -> list[tuple[Any, Any, int]]:
    """Every record of `topic` as (key, value, partition), decoded with its writer schemas;
    waits until at least `min_count` are there, then until every record already in the topic is
    read (with `min_count` > 0) or 2 s pass with nothing new."""
    registry = SchemaRegistry(registry_url)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    records: list[tuple[Any, Any, int]] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
            if metadata is not None and metadata.error is None and metadata.partitions:
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"topic {topic} never appeared")
        consumer.assign([TopicPartition(topic, p, 0) for p in metadata.partitions])
        idle_since = time.monotonic()
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                if len(records) >= min_count and (
                        time.monotonic() - idle_since > 2 or (min_count and caught_up(consumer))):
                    break
                continue
            idle_since = time.monotonic()
            key = decode(msg.key(), registry.schema).value if msg.key() else None
            value = decode(msg.value(), registry.schema).value if msg.value() else None
            records.append((key, value, msg.partition()))
    finally:
        consumer.close()
    assert len(records) >= min_count, f"{topic}: {len(records)} < {min_count} records"
    return records


def scrape_metrics(port: int, host: str = "127.0.0.1") -> dict[str, float]:
    """The pgcdc_* samples of `pgcdc run --metrics-port` by name."""
    text = httpx.get(f"http://{host}:{port}/metrics", timeout=10).text
    samples = {}
    for line in text.splitlines():
        if line.startswith("pgcdc_"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples

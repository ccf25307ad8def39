"""Publishing change events straight to Kafka, as `pgcdc run` would (the producer's codec,
tests/support/events.py), and reading tables back, for the merge job's end-to-end tests."""

from __future__ import annotations

import urllib.request
from collections.abc import Sequence
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

from connector.avro import SchemaRegistry
from connector.names import table_topic
from tests.support.events import Column, TableEvents, table_events


class CdcPublisher:
    """One topic prefix's tables: create topics, register schemas, produce events."""

    def __init__(self, bootstrap: str, registry_url: str, prefix: str) -> None:
        self.bootstrap = bootstrap
        self.registry = SchemaRegistry(registry_url)
        self.prefix = prefix
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                  "enable.idempotence": True})
        self.partitions: dict[str, int] = {}
        self.sent = 0

    def table(self, schema: str, table: str, columns: Sequence[Column], key: Sequence[str],
              partitions: int = 1) -> TableEvents:
        """The table's topic (created on first use) and its events; `columns`: (name,
        PostgreSQL type). Again with other columns or key: a schema change."""
        topic = table_topic(self.prefix, schema, table)
        if topic not in self.partitions:
            admin = AdminClient({"bootstrap.servers": self.bootstrap})
            admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()
            self.partitions[topic] = partitions
        return table_events(self.registry, self.prefix, schema, table, columns, key)

    def send(self, topic: TableEvents | str, kv: tuple[bytes | None, bytes | None],
             partition: int | None = None) -> None:
        name = topic if isinstance(topic, str) else topic.topic
        key, value = kv
        extra: dict[str, Any] = {} if partition is None else {"partition": partition}
        self.producer.produce(name, key=key, value=value, **extra)
        self.sent += 1

    def change(self, t: TableEvents, op: str, lsn: int, idx: int, **kw: Any) -> None:
        """One change (`TableEvents.change`'s arguments), to the partition of its key."""
        self.send(t, t.change(op, lsn, idx, **kw))

    def truncate(self, t: TableEvents, lsn: int, idx: int) -> None:
        """On every partition of the topic, as the contract says."""
        value = t.truncate(lsn, idx)
        for partition in range(self.partitions[t.topic]):
            self.send(t, (None, value), partition)

    def flush(self) -> None:
        assert self.producer.flush(30) == 0


def table_rows(spark: SparkSession, path: str, key: str) -> dict[Any, dict[str, Any]]:
    """key → row (without the job's metadata columns)."""
    out = {}
    for row in spark.read.format("delta").load(path).collect():
        d = {k: v for k, v in row.asDict().items() if not k.startswith("_cdc_")}
        out[d[key]] = d
    return out


def all_tables(spark: SparkSession, target: str, tables: Sequence[str]
               ) -> dict[str, tuple[list[str], list[Any]]]:
    """Every table's columns and rows (metadata included, sorted): to compare targets exactly."""
    out = {}
    for t in tables:
        df = spark.read.format("delta").load(f"{target}/{t}")
        out[t] = (df.columns, sorted(map(tuple, df.collect()), key=repr))
    return out


def scrape_metrics(port: int) -> dict[str, float]:
    """The merge job's /metrics on this host: sample (with its labels) → value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}

"""Issue 24: a deleted topic or schema is never written over silently. A table topic deleted
while `pgcdc run` streams stops it with one clear line (default and exactly-once), nothing
after it is confirmed to PostgreSQL, a restart still refuses, and recreating the topic with its
partitions resumes from the slot. A registry subject deleted while streaming stops it too, and
what was published with its dead id meanwhile is never confirmed (both modes): the restart
re-sends it (default mode; --exactly-once skips what its offsets topic says is committed)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from devstack.maven import resolve_archive
from devstack.ports import free_port
from devstack.registry import Registry
from devstack.stack import APICURIO, cache_dir

from connector.avro import SchemaRegistry, decode, unframe
from tests.support.cdc_checks import (
    assert_one_clear_line,
    execute,
    exit_of,
    read_records,
    stream_run,
)
from tests.support.producer import ProducerRun, current_lsn

pytestmark = pytest.mark.integration


def _wait_topic(admin: AdminClient, topic: str, present: bool, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (topic in admin.list_topics(timeout=10).topics) == present:
            return
        time.sleep(0.2)
    raise AssertionError(f"topic {topic} {'never appeared' if present else 'still there'}")


def _ids(rows: list) -> list[int]:
    return sorted(r.value["after"]["id"] for r in rows if r.value and r.value.get("after"))


@pytest.mark.parametrize("mode", ["default", "exactly-once"])
def test_deleted_topic_stops_and_a_restart_still_refuses(postgres, kafka, registry, producer_run,
                                                         log_dir, mode: str) -> None:
    extra = ["--topic-partitions", "3"] + (["--exactly-once"] if mode == "exactly-once" else [])
    run: ProducerRun = stream_run(producer_run, *extra)
    table = f"gone_{run.tag}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
    run.start(log_dir)
    topic = f"{run.prefix}.public.{table}"
    execute(postgres.dsn, f"INSERT INTO {table} SELECT g, 'a' FROM generate_series(1, 10) g")
    assert _ids(read_records(kafka.bootstrap, registry.url, topic, min_count=10)) == list(
        range(1, 11))

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    _wait_topic(admin, topic, present=False)
    execute(postgres.dsn, f"INSERT INTO {table} SELECT g, 'b' FROM generate_series(11, 20) g")

    code, out = exit_of(run)
    assert_one_clear_line(code, out, f"topic {topic} was deleted", "3 partitions",
                          "re-snapshot")
    # The broker (auto.create.topics.enable on) did not get to recreate it behind our back.
    assert topic not in admin.list_topics(timeout=10).topics

    # A restart replays the undelivered changes and refuses the same way.
    run.start(log_dir, wait=False)
    code, out = exit_of(run)
    assert_one_clear_line(code, out, f"topic {topic} was deleted", "3 partitions")
    assert topic not in admin.list_topics(timeout=10).topics

    # The operator recreates it as pgcdc made it: the changes made after the deletion were never
    # confirmed to PostgreSQL, so they arrive now.
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    _wait_topic(admin, topic, present=True)
    run.start(log_dir)
    assert _ids(read_records(kafka.bootstrap, registry.url, topic, min_count=10)) == list(
        range(11, 21))
    assert run.stop() == 0


def test_recreated_topic_with_other_partitions_is_refused(postgres, kafka, registry,
                                                          producer_run, log_dir) -> None:
    run: ProducerRun = stream_run(producer_run, "--topic-partitions", "3")
    table = f"regrown_{run.tag}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY)")
    run.start(log_dir)
    topic = f"{run.prefix}.public.{table}"
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (1)")
    read_records(kafka.bootstrap, registry.url, topic, min_count=1)
    assert run.stop() == 0

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    _wait_topic(admin, topic, present=False)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    _wait_topic(admin, topic, present=True)
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (2)")
    run.start(log_dir, wait=False)
    code, out = exit_of(run)
    assert_one_clear_line(code, out, f"topic {topic} has 1 partitions but pgcdc created it "
                          "with 3")


def test_deleted_subject_stops_the_producer(postgres, kafka, registry, producer_run,
                                            log_dir) -> None:
    run: ProducerRun = stream_run(producer_run)
    table = f"unreg_{run.tag}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY)")
    run.start(log_dir)
    topic = f"{run.prefix}.public.{table}"
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (1)")
    records = read_records(kafka.bootstrap, registry.url, topic, min_count=1)
    schema_id = records[0].value_schema_id
    subject = f"{topic}-value"

    httpx.delete(f"{registry.url}/subjects/{subject}", timeout=10).raise_for_status()
    httpx.delete(f"{registry.url}/subjects/{subject}", params={"permanent": "true"},
                 timeout=10)  # a soft delete keeps the ids (Confluent, Apicurio 3.0.9)
    assert httpx.get(f"{registry.url}/schemas/ids/{schema_id}", timeout=10).status_code == 404
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (2)")

    code, out = exit_of(run)
    assert_one_clear_line(code, out, f"no longer knows schema id {schema_id}", subject,
                          "re-snapshot")


Raw = list[tuple[bytes, bytes]]


def _raw(bootstrap: str, topic: str, until: Callable[[Raw], bool], timeout: float = 60.0
         ) -> Raw:
    """(key, value) of every record of `topic` (one partition), undecoded: some carry a
    schema id the registry no longer knows. Reads until `until(records)` holds."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    records: Raw = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            records += [(m.key(), m.value()) for m in consumer.consume(100, 0.5)
                        if m.error() is None and m.value()]
            if until(records):
                return records
        raise AssertionError(f"{topic}: {len(records)} records, not what was expected")
    finally:
        consumer.close()


@pytest.mark.parametrize("mode", ["default", "exactly-once"])
def test_what_a_deleted_id_carried_is_never_confirmed_and_a_restart_resends_it(
        postgres, kafka, registry, producer_run, log_dir, mode: str) -> None:
    # The default check interval (the test runners' 0.5 s would leave no window between
    # the sweep that confirms row 1 and the next one for the delete and row 2).
    run: ProducerRun = stream_run(producer_run, "--schema-check-interval-s", "5",
                                  *(["--exactly-once"] if mode == "exactly-once" else []))
    table = f"unconf_{run.tag}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY)")
    run.start(log_dir)
    topic = f"{run.prefix}.public.{table}"
    subject = f"{topic}-value"
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (1)")
    dead_id = read_records(kafka.bootstrap, registry.url, topic, min_count=1)[0].value_schema_id
    # Confirmed right after a sweep passed: the next one is about 5 s away.
    run.wait_confirmed(current_lsn(postgres.dsn))

    httpx.delete(f"{registry.url}/subjects/{subject}", timeout=10).raise_for_status()
    httpx.delete(f"{registry.url}/subjects/{subject}", params={"permanent": "true"},
                 timeout=10).raise_for_status()
    assert httpx.get(f"{registry.url}/schemas/ids/{dead_id}", timeout=10).status_code == 404
    deleted_at = current_lsn(postgres.dsn)
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (2)")
    # Published (and acknowledged by Kafka) with the dead id before the sweep saw it.
    raw = _raw(kafka.bootstrap, topic, lambda records: len(records) >= 2)
    assert [unframe(value)[0] for _, value in raw] == [dead_id, dead_id]

    code, out = exit_of(run)
    assert_one_clear_line(code, out, f"no longer knows schema id {dead_id}", subject)
    # Its WAL was never confirmed: PostgreSQL still has the change.
    assert run.confirmed_lsn() <= deleted_at, out
    if mode == "exactly-once":
        return  # but the restart skips what <prefix>.offsets says is committed (docs/producer.md)

    # The restart registers the schema again and re-sends the change, now decodable.
    run.start(log_dir)
    schemas = SchemaRegistry(registry.url)
    raw = _raw(kafka.bootstrap, topic, lambda records: len(records) >= 3)
    resent = [decode(value, schemas.schema) for _, value in raw[2:]]
    assert resent[0].schema_id != dead_id
    assert [r.value["after"]["id"] for r in resent] == [2]
    assert run.stop() == 0
    assert run.confirmed_lsn() > deleted_at  # confirmed by the stop's last sweep
    assert "/schemas/ids/" not in run.output()  # sweeps log no request line per id


def test_a_silent_registry_pauses_confirmation_not_the_stream(postgres, kafka, producer_run,
                                                               log_dir, tmp_path) -> None:
    own = Registry(resolve_archive(cache_dir(), APICURIO, "apicurio"), tmp_path / "registry",
                   free_port())  # its own: the session's registry serves the other tests
    own.start()
    try:
        run: ProducerRun = stream_run(producer_run)
        run.registry_url = own.url
        table = f"silent_{run.tag}"
        execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY)")
        run.start(log_dir)
        topic = f"{run.prefix}.public.{table}"
        execute(postgres.dsn, f"INSERT INTO {table} VALUES (1)")
        _raw(kafka.bootstrap, topic, lambda records: len(records) >= 1)
        run.wait_confirmed(current_lsn(postgres.dsn))

        own.stop()
        silent_from = current_lsn(postgres.dsn)
        for i in range(2, 12):
            execute(postgres.dsn, f"INSERT INTO {table} VALUES ({i})")
        # The stream goes on (the ids are cached) ...
        _raw(kafka.bootstrap, topic, lambda records: len(records) >= 11)
        time.sleep(12)  # a sweep or two fail meanwhile (every 5 s, then 10 s): one warning
        assert run.proc is not None and run.proc.poll() is None, run.output()
        # ... but nothing published since is confirmed: no sweep vouched for it.
        assert run.confirmed_lsn() <= silent_from
        assert run.output().count("cannot check the schema ids in use") == 1, run.output()

        own.start()  # the same storage: the ids in use resolve again
        run.wait_confirmed(current_lsn(postgres.dsn), timeout=90)
        assert "answers again: confirming resumes" in run.output()
        assert run.stop() == 0
    finally:
        own.stop()

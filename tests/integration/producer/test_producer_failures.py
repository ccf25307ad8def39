"""Bad input and failures of `pgcdc run`: one clear line and exit 1, nothing confirmed past
what Kafka holds, and no secret in any output."""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from devstack.ports import free_port
from devstack.postgres import Postgres, default_bin

from tests.support.cdc_checks import (
    assert_one_clear_line,
    execute,
    exit_of,
    read_records,
    set_compatibility,
    start_and_exit,
    stream_run,
)
from tests.support.producer import ProducerRun, current_lsn

pytestmark = pytest.mark.integration


class _ReplicaPostgres(Postgres):
    def check(self) -> None:  # devstack's check insists on wal_level = logical
        pass


@pytest.fixture(scope="module")
def replica_server(work_dir: Path) -> Iterator[Postgres]:
    server = _ReplicaPostgres(default_bin(), work_dir / "pg15_replica", free_port(),
                              {"wal_level": "replica"})
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_wal_level_not_logical(replica_server, kafka, registry, log_dir) -> None:
    run = ProducerRun(replica_server.dsn, kafka.bootstrap, registry.url, "*",
                      ["--snapshot", "never"])
    code, out = start_and_exit(run, log_dir)
    assert_one_clear_line(code, out, "wal_level is 'replica'", "wal_level = logical")


def _role(dsn: str, name: str, *grants: str) -> str:
    execute(dsn, f"CREATE ROLE {name} LOGIN", *grants)
    return dsn.replace("user=postgres", f"user={name}")


def test_role_without_privileges(postgres, producer_run, log_dir) -> None:
    run = stream_run(producer_run)
    execute(postgres.dsn, f"CREATE TABLE priv_{run.tag} (id int PRIMARY KEY)")
    run.dsn = _role(postgres.dsn, f"nobody_{run.tag}")
    code, out = start_and_exit(run, log_dir)
    assert_one_clear_line(code, out, f'role "nobody_{run.tag}" lacks CREATE on database postgres',
                          f"GRANT CREATE ON DATABASE postgres TO nobody_{run.tag}")


@pytest.mark.parametrize("snapshot", ["never", "initial"])
def test_role_without_replication_creating_the_slot(postgres, producer_run, log_dir,
                                                    snapshot: str) -> None:
    """The role may create the publication (it owns the table) but not a replication slot."""
    run = producer_run("-", "--snapshot", snapshot)
    run.tables = f"public.norepl_{run.tag}"
    table = f"norepl_{run.tag}"
    user = f"norepl_{run.tag}"
    run.dsn = _role(postgres.dsn, user, f"GRANT CREATE ON DATABASE postgres TO {user}",
                    f"CREATE TABLE {table} (id int PRIMARY KEY)",
                    f"ALTER TABLE {table} OWNER TO {user}")
    code, out = start_and_exit(run, log_dir)
    assert_one_clear_line(code, out, "replication")
    run.dsn = postgres.dsn  # for the fixture's cleanup


def test_role_without_replication_streaming(postgres, producer_run, log_dir) -> None:
    """Slot and publication made by an administrator; the role cannot open the stream. Not a
    transient failure: no reconnect attempts, exit at once."""
    run = stream_run(producer_run)
    table = f"nostream_{run.tag}"
    user = f"nostream_{run.tag}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY)",
            f"CREATE PUBLICATION pub_{run.tag} FOR TABLE {table}",
            f"SELECT pg_create_logical_replication_slot('{run.slot}', 'pgoutput')")
    run.dsn = _role(postgres.dsn, user, f"GRANT SELECT ON {table} TO {user}")
    config = log_dir / "pgcdc.yaml"
    config.write_text("create_publication: false\n")
    run.extra += ["--config", str(config)]
    code, out = start_and_exit(run, log_dir, timeout=60)
    assert_one_clear_line(code, out, "replication")
    assert "reconnecting" not in out
    run.dsn = postgres.dsn


def test_slot_replaced_by_another_plugin(postgres, producer_run, log_dir) -> None:
    run = stream_run(producer_run)
    execute(postgres.dsn, f"CREATE TABLE plugin_{run.tag} (id int PRIMARY KEY)")
    run.start(log_dir)
    assert run.stop() == 0
    execute(postgres.dsn, f"SELECT pg_drop_replication_slot('{run.slot}')",
            f"SELECT pg_create_logical_replication_slot('{run.slot}', 'test_decoding')")
    code, out = start_and_exit(run, log_dir)
    assert_one_clear_line(code, out, run.slot, "test_decoding", "not pgoutput")


def test_snapshot_never_refuses_a_new_slot_after_publishing(postgres, producer_run,
                                                            log_dir) -> None:
    """--snapshot never and a missing slot: created on a first run (nothing published, even
    after a run that published nothing), refused once the topics hold this connector's events
    (the changes since the slot was lost are gone), with nothing created."""
    run = stream_run(producer_run)
    table = f"lost_{run.tag}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY)")
    run.start(log_dir)  # no slot yet: created
    assert run.stop() == 0
    execute(postgres.dsn, f"SELECT pg_drop_replication_slot('{run.slot}')")
    run.start(log_dir)  # nothing was published: created again
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (1)")
    read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                 min_count=1, idle_s=0)
    assert run.stop() == 0
    execute(postgres.dsn, f"SELECT pg_drop_replication_slot('{run.slot}')",
            f"INSERT INTO {table} VALUES (2)")  # lost with the slot
    code, out = start_and_exit(run, log_dir)
    assert_one_clear_line(code, out, run.slot, "does not exist", run.prefix,
                          "--snapshot initial", "pg_create_logical_replication_slot")
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        assert conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s",
                            (run.slot,)).fetchone() is None


def test_snapshot_never_new_slot_needs_kafka(postgres, producer_run, log_dir) -> None:
    """Without Kafka a missing slot cannot be told from a lost one: one line, no slot made."""
    run = stream_run(producer_run, "--kafka", "socket.timeout.ms=2000", "--kafka-timeout-s", "3")
    run.bootstrap = f"127.0.0.1:{free_port()}"
    execute(postgres.dsn, f"CREATE TABLE nokafka_slot_{run.tag} (id int PRIMARY KEY)")
    code, out = start_and_exit(run, log_dir)
    assert_one_clear_line(code, out, "kafka")
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        assert conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s",
                            (run.slot,)).fetchone() is None


def test_slot_dropped_while_running(postgres, producer_run, log_dir) -> None:
    run = stream_run(producer_run)
    execute(postgres.dsn, f"CREATE TABLE dropped_{run.tag} (id int PRIMARY KEY)")
    run.start(log_dir)
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # terminate its walsender, drop the slot at once
            conn.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
                         "WHERE slot_name = %s AND active", (run.slot,))
            try:
                conn.execute("SELECT pg_drop_replication_slot(%s)", (run.slot,))
                break
            except psycopg.errors.ObjectInUse:
                time.sleep(0.05)
    code, out = exit_of(run, 60)
    assert_one_clear_line(code, out, run.slot, "dropped")


def test_slot_recreated_while_running(postgres, producer_run, log_dir) -> None:
    """A slot dropped and created again between two sessions starts past changes the producer
    never saw: the reconnect refuses instead of streaming on over the gap."""
    run = stream_run(producer_run)
    table = f"recreated_{run.tag}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY)")
    run.start(log_dir)
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (1)")
    run.wait_confirmed(current_lsn(postgres.dsn))
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            conn.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
                         "WHERE slot_name = %s AND active", (run.slot,))
            try:
                conn.execute("SELECT pg_drop_replication_slot(%s)", (run.slot,))
                break
            except psycopg.errors.ObjectInUse:
                time.sleep(0.05)
        conn.execute(f"INSERT INTO {table} VALUES (2)")  # lost with the old slot
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (run.slot,))
    created_at = run.confirmed_lsn()
    code, out = exit_of(run, 60)
    assert_one_clear_line(code, out, run.slot, "ahead of", "--snapshot initial")
    assert run.confirmed_lsn() == created_at  # nothing streamed or confirmed from the new slot


def test_schema_rejected_by_the_registry(postgres, producer_run, log_dir) -> None:
    """An incompatible ALTER COLUMN TYPE under BACKWARD: stop without acknowledging the change;
    a restart fails the same way; once the subject allows it, the row arrives."""
    # Without the re-sync the type change would bring (`r` events of rows 1 and 2): this test
    # is about the streamed change.
    run = stream_run(producer_run, "--no-resync-on-ddl")
    table = f"compat_{run.tag}"
    topic = f"{run.prefix}.public.{table}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, n int)")
    run.start(log_dir)
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (1, 1)")
    read_records(run.bootstrap, run.registry_url, topic, min_count=1, idle_s=0)
    set_compatibility(run.registry_url, f"{topic}-value", "BACKWARD")
    execute(postgres.dsn, f"ALTER TABLE {table} ALTER COLUMN n TYPE text")
    before_change = current_lsn(postgres.dsn)
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (2, 'two')")
    code, out = exit_of(run)
    assert_one_clear_line(code, out, f"{topic}-value", "refused")
    assert run.confirmed_lsn() <= before_change

    code, out = start_and_exit(run, log_dir)  # nothing was skipped: the same change again
    assert_one_clear_line(code, out, f"{topic}-value", "refused")
    assert run.confirmed_lsn() <= before_change

    set_compatibility(run.registry_url, f"{topic}-value", "NONE")
    run.start(log_dir)
    records = read_records(run.bootstrap, run.registry_url, topic, min_count=2)
    # At least once: row 1 comes again if the failed run had not confirmed it yet.
    events = {(r.value["source"]["commit_lsn"], r.value["source"]["txn_index"]):
              r.value["after"] for r in records}
    assert [events[p] for p in sorted(events)] == [{"id": 1, "n": 1}, {"id": 2, "n": "two"}]
    assert run.stop() == 0


def _noise(size: int) -> str:
    """Text that does not compress (so the record stays larger than the limit)."""
    rng = random.Random(size)
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(size))


def _check_oversized(run: ProducerRun, dsn: str, table: str, before: int, code: int,
                     out: str) -> None:
    topic = f"{run.prefix}.public.{table}"
    line = assert_one_clear_line(code, out, topic, "LSN")
    # The way out is named: the restart would meet the same record (issue 24).
    assert "raise the topic's max.message.bytes" in line and \
        "--kafka message.max.bytes=N" in line, line
    assert run.confirmed_lsn() <= before, line
    records = read_records(run.bootstrap, run.registry_url, topic, min_count=1)
    assert [r.value["after"]["id"] for r in records] == [1]  # the small row before it only


def test_record_larger_than_the_producer_limit(postgres, producer_run, log_dir) -> None:
    run = stream_run(producer_run, "--kafka", "message.max.bytes=200000")
    table = f"huge_{run.tag}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
    run.start(log_dir)
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (1, 'small')")
    read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}", min_count=1,
                 idle_s=0)
    before = current_lsn(postgres.dsn)
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (2, '{_noise(300_000)}')")
    code, out = exit_of(run)
    _check_oversized(run, postgres.dsn, table, before, code, out)


def test_oversized_events_omit_keeps_the_stream_moving(postgres, producer_run, log_dir) -> None:
    """--oversized-events omit (issue 24): the ~2 MB row is published with its large column
    null and named in the pgcdc.omitted header, the rows after it stream, the producer runs."""
    run = stream_run(producer_run, "--oversized-events", "omit")
    table = f"omit_{run.tag}"
    topic = f"{run.prefix}.public.{table}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, note text, v text)")
    run.start(log_dir)
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (1, 'small', 'small')")
    read_records(run.bootstrap, run.registry_url, topic, min_count=1, idle_s=0)
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (2, 'kept', '{_noise(2_000_000)}')",
            f"INSERT INTO {table} VALUES (3, 'after', 'after')")
    run.wait_confirmed(current_lsn(postgres.dsn))
    records = read_records(run.bootstrap, run.registry_url, topic, min_count=3)
    assert [r.value["after"]["id"] for r in records] == [1, 2, 3]
    assert records[1].value["after"] == {"id": 2, "note": "kept", "v": None}
    assert records[1].headers == {"pgcdc.omitted": b"v"}
    assert records[0].headers is None and records[2].headers is None
    assert records[2].value["after"]["v"] == "after"
    assert run.proc is not None and run.proc.poll() is None  # still running
    assert run.stop() == 0
    out = run.output()
    assert f"public.{table}: an event of" in out and "column(s) v null" in out, out


def test_record_larger_than_the_topic_limit(postgres, producer_run, log_dir) -> None:
    """The broker refuses it (the topic's max.message.bytes): a failed delivery report."""
    run = stream_run(producer_run)
    table = f"bigmsg_{run.tag}"
    topic = f"{run.prefix}.public.{table}"
    admin = AdminClient({"bootstrap.servers": run.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1, config={
            "max.message.bytes": "20000"})]).values():
        future.result(30)
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
    run.start(log_dir)
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (1, 'small')")
    read_records(run.bootstrap, run.registry_url, topic, min_count=1, idle_s=0)
    before = current_lsn(postgres.dsn)
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (2, '{_noise(50_000)}')")
    code, out = exit_of(run)
    _check_oversized(run, postgres.dsn, table, before, code, out)


def test_record_larger_than_the_limit_in_the_initial_snapshot(postgres, producer_run,
                                                             log_dir) -> None:
    """The snapshot readers' refusal reaches the same line, with the limits to raise."""
    run = producer_run("-", "--kafka", "message.max.bytes=200000")
    run.tables = f"public.*{run.tag}*"
    table = f"snaphuge_{run.tag}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, v text)",
            f"INSERT INTO {table} VALUES (1, '{_noise(300_000)}')")
    code, out = start_and_exit(run, log_dir)
    line = assert_one_clear_line(code, out, "too large")
    assert "raise the topic's max.message.bytes" in line, line
    assert "--kafka message.max.bytes=N" in line, line


def test_oversized_events_omit_in_the_initial_snapshot(postgres, producer_run, log_dir) -> None:
    """The snapshot readers apply --oversized-events omit too (the same sink seam), here with
    --max-event-bytes under the producer's limit; then the stream starts as usual."""
    run = producer_run("-", "--oversized-events", "omit", "--max-event-bytes", "200000")
    run.tables = f"public.*{run.tag}*"
    table = f"snapomit_{run.tag}"
    topic = f"{run.prefix}.public.{table}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, v text)",
            f"INSERT INTO {table} VALUES (1, 'small'), (2, '{_noise(300_000)}')")
    run.start(log_dir)
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (3, 'streamed')")
    run.wait_confirmed(current_lsn(postgres.dsn))
    records = [r for r in read_records(run.bootstrap, run.registry_url, topic, min_count=3)
               if r.value["op"] != "t"]  # the snapshot's truncate marker
    assert [(r.value["op"], r.value["after"]["id"]) for r in records] == [
        ("r", 1), ("r", 2), ("c", 3)]
    assert records[1].value["after"]["v"] is None
    assert records[1].headers == {"pgcdc.omitted": b"v"}
    assert records[0].value["after"]["v"] == "small" and records[0].headers is None
    assert run.stop() == 0


def test_compacted_topic_refused_before_anything_is_created(postgres, producer_run,
                                                            log_dir) -> None:
    """--tombstones is for compacted topics, but Kafka refuses the keyless truncate marker of
    the first snapshot there: one line naming the topic, and no publication or slot made."""
    run = producer_run("-", "--tombstones")
    run.tables = f"public.*{run.tag}*"
    table = f"compacted_{run.tag}"
    topic = f"{run.prefix}.public.{table}"
    admin = AdminClient({"bootstrap.servers": run.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1, config={
            "cleanup.policy": "compact"})]).values():
        future.result(30)
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY)",
            f"INSERT INTO {table} VALUES (1)")
    code, out = start_and_exit(run, log_dir)
    assert_one_clear_line(code, out, "compacted", topic, "cleanup.policy=delete")
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        assert conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s",
                            (run.slot,)).fetchone() is None
        assert conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s",
                            (f"pub_{run.tag}",)).fetchone() is None


SECRETS = ("pgSecret-7f3a", "regSecret-91c2", "saslSecret-4d5e")


def test_secrets_never_in_the_output(postgres, producer_run, log_dir) -> None:
    run = stream_run(producer_run, "--log-level", "DEBUG",
                       "--kafka", "sasl.username=user", "--kafka", f"sasl.password={SECRETS[2]}")
    table = f"secret_{run.tag}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY)")
    run.dsn = f"{postgres.dsn} password={SECRETS[0]}"  # trust authentication ignores it
    run.registry_url = run.registry_url.replace("http://", f"http://reg:{SECRETS[1]}@")
    run.start(log_dir)
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (1)")
    run.wait_confirmed(current_lsn(postgres.dsn))
    assert run.stop() == 0
    outputs = [run.output()]

    # Failures print what they are about (the registry, PostgreSQL), never its credentials.
    run.registry_url = f"http://reg:{SECRETS[1]}@127.0.0.1:{free_port()}/apis/ccompat/v7"
    run.extra += ["--schema-registry-attempts", "2"]
    code, out = start_and_exit(run, log_dir, timeout=180)
    assert_one_clear_line(code, out, "registry")
    outputs.append(out)
    run.dsn = f"host=127.0.0.1 port={free_port()} user=postgres password={SECRETS[0]}"
    code, out = start_and_exit(run, log_dir)
    assert_one_clear_line(code, out, "PostgreSQL")
    outputs.append(out)
    run.dsn = postgres.dsn
    for output in outputs:
        for secret in SECRETS:
            assert secret not in output, f"{secret} leaked:\n{output}"


def test_sigint_is_a_graceful_stop(postgres, producer_run, log_dir) -> None:
    run = stream_run(producer_run)
    table = f"sigint_{run.tag}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY)")
    run.start(log_dir)
    execute(postgres.dsn, f"INSERT INTO {table} SELECT generate_series(1, 500)")
    end = current_lsn(postgres.dsn)
    time.sleep(0.5)
    assert run.stop(signal.SIGINT) == 0
    # Either everything was delivered and confirmed, or the rest is re-sent on restart.
    if run.confirmed_lsn() < end:
        run.start(log_dir)
        run.wait_confirmed(end)
        assert run.stop() == 0
    records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                           min_count=500)
    assert {r.value["after"]["id"] for r in records} == set(range(1, 501))
    assert os.path.exists(run.log or "")

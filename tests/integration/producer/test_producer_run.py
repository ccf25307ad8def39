"""`pgcdc run` end to end against real PostgreSQL 15/18, Kafka and the registry."""

from __future__ import annotations

import random
import signal
import threading
from decimal import Decimal

import psycopg
import pytest
from devstack.ports import free_port

from tests.support.cdc_checks import assert_one_clear_line, in_order, read_records, start_and_exit
from tests.support.producer import current_lsn

pytestmark = pytest.mark.integration

BIG = "".join(random.Random(7).choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(9000))


def _create(dsn: str, table: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, name text, amount numeric(10,2),"
                     " created timestamptz, tags text[], doc jsonb, big text)")
        conn.execute(f"ALTER TABLE {table} ALTER COLUMN big SET STORAGE EXTERNAL")


def test_changes_reach_kafka_as_the_contract_says(postgres, producer_run, log_dir) -> None:
    run = producer_run("public.orders_*")
    table = f"orders_{run.tag}"
    _create(postgres.dsn, table)
    run.start(log_dir)
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        with conn.transaction():
            conn.execute(f"INSERT INTO {table} VALUES (1, 'a', 1.50, '2024-01-02 03:04:05+00',"
                         " '{x,y}', '{\"k\": 1}', %s)", (BIG,))
            conn.execute(f"INSERT INTO {table} (id, name) VALUES (2, 'b'), (3, 'c')")
        conn.execute(f"UPDATE {table} SET amount = 2.25 WHERE id = 1")  # big: unchanged TOAST
        conn.execute(f"UPDATE {table} SET id = 20 WHERE id = 2")  # key change
        conn.execute(f"DELETE FROM {table} WHERE id = 3")
        conn.execute(f"TRUNCATE {table}")
        conn.execute(f"INSERT INTO {table} (id, name) VALUES (4, 'd')")
    end = current_lsn(postgres.dsn)
    topic = f"{run.prefix}.public.{table}"
    records = read_records(run.bootstrap, run.registry_url, topic, min_count=9)
    values = [r.value for r in in_order(records)]
    ops = [(v["op"], (v["after"] or v["before"] or {}).get("id")) for v in values]
    assert ops == [("c", 1), ("c", 2), ("c", 3), ("u", 1), ("d", 2), ("c", 20), ("d", 3),
                   ("t", None), ("c", 4)]
    first = values[0]["after"]
    assert first["name"] == "a" and first["amount"] == Decimal("1.50")
    assert first["tags"] == ["x", "y"] and first["big"] == BIG
    assert first["created"].isoformat() == "2024-01-02T03:04:05+00:00"
    toast_update = values[3]
    assert toast_update["after"]["amount"] == Decimal("2.25")
    assert toast_update["after"]["big"] is None and toast_update["unchanged_toast"] == ["big"]
    assert values[0]["source"]["commit_lsn"] == values[2]["source"]["commit_lsn"]
    assert [v["source"]["txn_index"] for v in values[:3]] == [0, 1, 2]
    keys = {r.key["id"] for r in records if r.key is not None}
    assert keys == {1, 2, 3, 4, 20}

    run.wait_confirmed(end)
    assert run.stop(signal.SIGTERM) == 0
    assert run.confirmed_lsn() >= end


def test_sigkill_and_restart_lose_nothing(postgres, producer_run, log_dir) -> None:
    run = producer_run("public.kill_*")
    table = f"kill_{run.tag}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
    run.start(log_dir)
    done = threading.Event()

    def workload() -> None:
        with psycopg.connect(postgres.dsn, autocommit=True) as conn:
            for batch in range(40):
                with conn.transaction():
                    for i in range(25):
                        conn.execute(f"INSERT INTO {table} VALUES (%s, %s)",
                                     (batch * 25 + i, "x" * 50))
        done.set()

    writer = threading.Thread(target=workload)
    writer.start()
    for _ in range(3):  # kill it three times while the workload runs, restart each time
        done.wait(0.7)
        run.stop(signal.SIGKILL)
        run.start(log_dir)
    writer.join()
    end = current_lsn(postgres.dsn)
    run.wait_confirmed(end)
    records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                           min_count=1000)
    ids = [r.value["after"]["id"] for r in records]
    assert set(ids) == set(range(1000))  # nothing lost (duplicates allowed: at-least-once)
    assert run.stop(signal.SIGTERM) == 0


def test_unreachable_kafka_fails_loudly_and_confirms_nothing(postgres, producer_run,
                                                              log_dir) -> None:
    """Kafka is checked before anything is streamed: one line, the slot left where it was.
    (An outage while streaming: test_producer_exactly_once.py and test_producer_failures.py
    restart the broker and reject records mid-stream.)"""
    run = producer_run("public.nokafka_*", "--kafka", "message.timeout.ms=3000",
                       "--kafka", "socket.timeout.ms=2000", "--kafka-timeout-s", "3",
                       "--snapshot", "never")
    run.bootstrap = f"127.0.0.1:{free_port()}"
    table = f"nokafka_{run.tag}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY)")
        # An existing slot: a missing one would need Kafka to tell a first run from a lost
        # slot (test_producer_failures.py: test_snapshot_never_new_slot_needs_kafka).
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (run.slot,))
        conn.execute(f"INSERT INTO {table} VALUES (1)")
    before = run.confirmed_lsn()
    code, out = start_and_exit(run, log_dir)
    assert_one_clear_line(code, out, "Kafka")
    assert run.confirmed_lsn() == before


def test_unreachable_registry_is_one_clear_line(postgres, producer_run, log_dir) -> None:
    run = producer_run("public.noreg_*", "--snapshot", "never", "--schema-registry-attempts", "2")
    run.registry_url = f"http://127.0.0.1:{free_port()}/apis/ccompat/v7"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE noreg_{run.tag} (id int PRIMARY KEY)")
    code, out = start_and_exit(run, log_dir, timeout=180)
    assert_one_clear_line(code, out, "registry", "unreachable")
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:  # nothing was created
        assert conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s",
                            (run.slot,)).fetchone() is None


def test_idle_slot_advances_while_other_tables_are_busy(postgres, producer_run,
                                                         log_dir) -> None:
    run = producer_run("public.idle_*")
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE idle_{run.tag} (id int PRIMARY KEY)")
        conn.execute(f"CREATE TABLE busy_{run.tag} (id int PRIMARY KEY)")
    run.start(log_dir)
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        for i in range(50):
            conn.execute(f"INSERT INTO busy_{run.tag} VALUES ({i})")
    end = current_lsn(postgres.dsn)
    run.wait_confirmed(end)
    assert run.stop() == 0

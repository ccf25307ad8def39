"""Day-one edges of the publication pgcdc manages (issue 24): `--tables '*'` on a database with
no table yet, and tables without a key (`--keyless-tables refuse|skip|full`), at start and
when they appear while streaming. Each test has a database of its own: FOR ALL TABLES sees
every table of the database."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from tests.support.cdc_checks import read_records
from tests.support.snapshot import wait_for_output

pytestmark = pytest.mark.integration


@pytest.fixture
def database(postgres: Any) -> Iterator[str]:
    """The DSN of a new, empty database (dropped afterwards)."""
    name = f"pgcdc_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield make_conninfo(postgres.dsn, dbname=name)
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def _sql(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


def _replica_identity(dsn: str, table: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT relreplident FROM pg_class WHERE oid = %s::regclass",
                           (table,)).fetchone()
    assert row is not None
    return str(row[0])


def _exit_line(run: Any) -> tuple[int, str]:
    assert run.proc is not None
    code = run.proc.wait(60)
    return code, run.output().strip().splitlines()[-1]


def test_star_on_an_empty_database_publishes_tables_created_later(database, producer_run,
                                                                  log_dir) -> None:
    run = producer_run("*")
    run.dsn = database
    run.start(log_dir)  # the initial snapshot of no table, then streaming
    _sql(database, "CREATE TABLE later (id int PRIMARY KEY, v text)",
         "INSERT INTO later VALUES (1, 'a'), (2, 'b')", "UPDATE later SET v = 'c' WHERE id = 1")
    records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.later",
                           min_count=3)
    assert [(r.value["op"], r.value["after"]) for r in records] == [
        ("c", {"id": 1, "v": "a"}), ("c", {"id": 2, "v": "b"}), ("u", {"id": 1, "v": "c"})]
    # FOR ALL TABLES publishes a keyless table at once: the operator is told how to fix it.
    _sql(database, "CREATE TABLE nokey (v text)")
    wait_for_output(run, "new table public.nokey has no primary key and is published FOR ALL "
                         "TABLES")
    assert run.stop() == 0


def test_keyless_tables_are_refused_with_the_fix(database, producer_run, log_dir) -> None:
    _sql(database, "CREATE TABLE keyed (id int PRIMARY KEY)", "CREATE TABLE log_a (v text)",
         "CREATE TABLE log_b (v text)", "CREATE TABLE chosen (v text)",
         "ALTER TABLE chosen REPLICA IDENTITY NOTHING")  # explicit: the operator's choice
    for tables in ("*", "public.log_*,public.keyed"):
        run = producer_run(tables)
        run.dsn = database
        run.start(log_dir, wait=False)
        code, line = _exit_line(run)
        assert code == 1
        assert line.startswith("pgcdc run: table(s) without a primary key would be published: "
                               "public.log_a, public.log_b; "), line
        assert "--keyless-tables full" in line and "--keyless-tables skip" in line
        assert "chosen" not in line
    with psycopg.connect(database, autocommit=True) as conn:  # nothing was created
        assert conn.execute("SELECT count(*) FROM pg_publication").fetchone() == (0,)
        conn.execute("UPDATE log_a SET v = 'x'")  # the application is not broken


def test_keyless_full_sets_replica_identity_full(database, producer_run, log_dir) -> None:
    _sql(database, "CREATE TABLE events (v text)", "INSERT INTO events VALUES ('a')")
    run = producer_run("*", "--keyless-tables", "full", "--snapshot", "never")
    run.dsn = database
    run.start(log_dir)
    assert _replica_identity(database, "events") == "f"
    _sql(database, "UPDATE events SET v = 'b'", "DELETE FROM events")  # accepted
    records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.events",
                           min_count=3)
    assert [r.value["op"] for r in records] == ["d", "c", "d"]  # a whole-row key changed
    assert records[0].key == {"v": "a"}

    _sql(database, "CREATE TABLE later (v text)")  # FOR ALL TABLES publishes it at once
    deadline = time.monotonic() + 60
    while _replica_identity(database, "later") != "f":  # the table watcher's next round
        assert time.monotonic() < deadline, run.output()
        time.sleep(0.2)
    _sql(database, "INSERT INTO later VALUES ('x')", "UPDATE later SET v = 'y'")
    assert "later has no primary key: set REPLICA IDENTITY FULL" in run.output()
    assert run.stop() == 0


def test_keyless_skip_leaves_them_out_of_a_table_list(database, producer_run,
                                                       log_dir) -> None:
    _sql(database, "CREATE TABLE keyed (id int PRIMARY KEY, v text)",
         "CREATE TABLE events (v text)")
    run = producer_run("*", "--keyless-tables", "skip", "--snapshot", "never")
    run.dsn = database
    run.start(log_dir)
    _sql(database, "INSERT INTO events VALUES ('a')", "UPDATE events SET v = 'b'",
         "INSERT INTO keyed VALUES (1, 'a')")
    records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.keyed",
                           min_count=1)
    assert [r.value["op"] for r in records] == ["c"]

    # Created while streaming: the keyed one joins the list with its rows, the other not.
    _sql(database, "CREATE TABLE keyed_later (id int PRIMARY KEY)",
         "INSERT INTO keyed_later SELECT generate_series(1, 10)",
         "CREATE TABLE events_later (v text)", "INSERT INTO events_later VALUES ('a')")
    wait_for_output(run, "new table public.events_later matches --tables but has no primary "
                         "key: left out")
    _sql(database, "UPDATE events_later SET v = 'b'")  # accepted: not published
    later = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.keyed_later",
                         min_count=10)
    assert sorted(r.key["id"] for r in later) == list(range(1, 11))
    with psycopg.connect(database, autocommit=True) as conn:
        published = conn.execute("SELECT tablename::text FROM pg_publication_tables "
                                 "ORDER BY 1").fetchall()
        assert conn.execute("SELECT puballtables FROM pg_publication").fetchone() == (False,)
    assert [p[0] for p in published] == ["keyed", "keyed_later"]
    assert run.stop() == 0

"""Day-one edges of the publication pgcdc manages (issue 24): `--tables '*'` on a database with
no table yet, and tables without a key (`--keyless-tables refuse|skip|full`), at start and
when they appear while streaming. Issue 33: `*` is a table list pgcdc keeps, so an
application creating and writing keyless tables while pgcdc streams never has a statement
refused under any policy; FOR ALL TABLES only with `--all-tables-publication` (its hazard
shown here too), a FOR ALL TABLES publication of an earlier pgcdc becomes the list on restart
without losing a change, and pgcdc's own signal table never gets a topic. Each test has a
database of its own: `*` sees every table of the database."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from confluent_kafka.admin import AdminClient
from devstack.ports import free_port

from tests.support.cdc_checks import Record, read_records
from tests.support.databases import empty_database
from tests.support.producer import PGCDC, scrape_metrics
from tests.support.snapshot import wait_for_output

pytestmark = pytest.mark.integration


@pytest.fixture
def database(postgres: Any) -> Iterator[str]:
    """The DSN of a new, empty database (dropped afterwards)."""
    with empty_database(postgres.dsn) as dsn:
        yield dsn


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


def _live_rows(records: list[Record]) -> list[tuple[Any, ...]]:
    """The rows a consumer keeping the latest event per key holds (one partition: the records
    in topic order), as sorted value tuples."""
    live: dict[Any, Any] = {}
    for r in records:
        key = tuple(sorted(r.key.items()))
        if r.value["op"] == "d":
            live.pop(key, None)
        else:
            live[key] = tuple(r.value["after"].values())
    return sorted(live.values())


def _topics(bootstrap: str, prefix: str) -> set[str]:
    """The table topics `<prefix>.<schema>.<table>` in Kafka."""
    names = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    return {t for t in names
            if t.startswith(prefix + ".") and t[len(prefix) + 1:].count(".") == 1}


def _application(dsn: str, seconds: float) -> list[str]:
    """An application creating a keyed and a keyless table and writing both (INSERT, UPDATE,
    DELETE) for `seconds`, across the table watcher's checks (2 s apart); the statements that
    failed, each with its error."""
    failed: list[str] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE keyed (id int PRIMARY KEY, v text)")
        conn.execute("CREATE TABLE nokey (id int, v text)")
        deadline = time.monotonic() + seconds
        i = 0
        while i < 3 or time.monotonic() < deadline:
            i += 1
            for table in ("keyed", "nokey"):
                for statement in (f"INSERT INTO {table} VALUES ({i}, 'new'), ({i + 1000}, 'x')",
                                  f"UPDATE {table} SET v = 'v{i}' WHERE id = {i}",
                                  f"DELETE FROM {table} WHERE id = {i + 1000}"):
                    try:
                        conn.execute(statement)  # type: ignore[arg-type]
                    except psycopg.Error as exc:
                        failed.append(f"{statement}: {exc}".splitlines()[0])
            time.sleep(0.1)
    return failed


def _table_rows(dsn: str, table: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return sorted(conn.execute(f"SELECT id, v FROM {table}").fetchall())  # type: ignore


def _topic_holds(run: Any, table: str, dsn: str, timeout: float = 60) -> list[Record]:
    """The records of `table`'s topic once a consumer's latest-per-key rows equal the table."""
    topic = f"{run.prefix}.public.{table}"
    deadline = time.monotonic() + timeout
    while True:
        records = read_records(run.bootstrap, run.registry_url, topic, min_count=1,
                               timeout=timeout)
        expected = _table_rows(dsn, table)
        if _live_rows(records) == expected:
            return records
        assert time.monotonic() < deadline, (_live_rows(records), expected, run.output())
        time.sleep(0.5)


def _publication(dsn: str, run: Any) -> tuple[bool, list[str]]:
    """(FOR ALL TABLES?, the tables it publishes) of the run's publication."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT puballtables FROM pg_publication WHERE pubname = %s",
                           (f"pub_{run.tag}",)).fetchone()
        tables = conn.execute("SELECT tablename::text FROM pg_publication_tables"
                              " WHERE pubname = %s ORDER BY 1", (f"pub_{run.tag}",)).fetchall()
    assert row is not None
    return bool(row[0]), [t[0] for t in tables]


@pytest.mark.parametrize("policy", ["refuse", "skip", "full"])
def test_an_application_creating_tables_while_star_streams_is_never_refused(
        database, producer_run, log_dir, policy) -> None:
    """Issue 33: `--tables '*'` under each --keyless-tables policy is a table list pgcdc keeps;
    the application's statements on tables it creates meanwhile all succeed, and the topics
    hold what the policy promises."""
    port = free_port()
    extra = [] if policy == "refuse" else ["--keyless-tables", policy]  # refuse: the default
    run = producer_run("*", *extra, "--metrics-port", str(port))
    run.dsn = database
    run.start(log_dir)
    assert _application(database, 5.0) == []
    # The keyed table joined at a check, its earlier rows by incremental snapshot.
    keyed = _topic_holds(run, "keyed", database)
    assert {r.value["op"] for r in keyed} >= {"r", "c", "u", "d"}
    if policy == "full":  # set before it joined the list: no moment where writes failed
        assert _replica_identity(database, "nokey") == "f"
        wait_for_output(run, "new table public.nokey has REPLICA IDENTITY FULL (no key): added")
        # Keyed by the whole row: an update is a delete and a create.
        _sql(database, "INSERT INTO nokey VALUES (5000, 'after')",
             "UPDATE nokey SET v = 'changed' WHERE id = 5000", "DELETE FROM nokey WHERE id = 5000")
        records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.nokey",
                               min_count=4)
        ours = [r for r in records if r.key["id"] == 5000]
        assert [(r.value["op"], r.key["v"]) for r in ours] == [
            ("c", "after"), ("d", "after"), ("c", "changed"), ("d", "changed")]
        assert scrape_metrics(port)["pgcdc_keyless_tables_left_out"] == 0
        assert _publication(database, run) == (False, ["keyed", "nokey"])
        assert run.stop() == 0
        return
    # refuse, skip: left out (one warning, the gauge), no topic, until it has a key.
    assert run.output().count("new table public.nokey matches --tables but has no primary "
                              "key: left out") == 1
    assert scrape_metrics(port)["pgcdc_keyless_tables_left_out"] == 1
    assert f"{run.prefix}.public.nokey" not in _topics(run.bootstrap, run.prefix)
    assert _publication(database, run) == (False, ["keyed"])  # not the signal table either
    _sql(database, "ALTER TABLE nokey ADD PRIMARY KEY (id)")
    wait_for_output(run, "new table(s) public.nokey added to publication")
    _wait_snapshot_done(database, run, "public.nokey")  # the update below comes after it
    _sql(database, "UPDATE nokey SET v = 'keyed now' WHERE id = 1")
    records = _topic_holds(run, "nokey", database)
    assert records[-1].value["op"] == "u" and records[-1].value["after"]["v"] == "keyed now"
    assert {r.value["op"] for r in records[:-1]} == {"r"}  # its rows before it joined
    assert scrape_metrics(port)["pgcdc_keyless_tables_left_out"] == 0
    assert f"{run.prefix}.public.pgcdc_signal" not in _topics(run.bootstrap, run.prefix)
    assert run.stop() == 0


def test_all_tables_publication_is_explicit_and_its_hazard_real(database, producer_run,
                                                                 log_dir) -> None:
    """--all-tables-publication: FOR ALL TABLES streams a new table from its creation (every
    change, no snapshot), and PostgreSQL refuses the application's UPDATE/DELETE on a new
    keyless table: the hazard the option states. pgcdc's signal table, published by it, gets
    no topic."""
    run = producer_run("*", "--all-tables-publication")
    run.dsn = database
    run.start(log_dir)
    assert _publication(database, run)[0] is True
    failed = _application(database, 0.5)
    assert all("nokey" in f and "does not have a replica identity" in f for f in failed), failed
    rounds = sum(f.startswith("UPDATE") for f in failed)  # each UPDATE and DELETE of nokey
    assert rounds >= 3 and sum(f.startswith("DELETE") for f in failed) == rounds, failed
    wait_for_output(run, "new table public.nokey has no primary key and is published FOR ALL "
                         "TABLES")
    keyed = _topic_holds(run, "keyed", database)
    assert [r.value["op"] for r in keyed] == ["c", "c", "u", "d"] * rounds  # every change
    # A snapshot request: the signal table is created, written by `pgcdc snapshot` and by
    # the producer's progress, all published FOR ALL TABLES, none of it sent to Kafka.
    out = subprocess.run([PGCDC, "snapshot", "--dsn", database, "--slot", run.slot,
                          "--publication", f"pub_{run.tag}", "--tables", "public.keyed"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    deadline = time.monotonic() + 60
    while _sql_one(database, "SELECT state FROM pgcdc_signal") != "done":
        assert time.monotonic() < deadline, run.output()
        time.sleep(0.2)
    assert "pgcdc_signal" in _publication(database, run)[1]
    keyed = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.keyed",
                         min_count=5 * rounds)
    assert [r.value["op"] for r in keyed[4 * rounds:]] == ["r"] * rounds
    assert _topics(run.bootstrap, run.prefix) == {f"{run.prefix}.public.keyed",
                                                  f"{run.prefix}.public.nokey"}
    assert run.stop() == 0


@pytest.mark.all_pg_versions  # pgoutput's reading of a re-created publication, on 15 and 18
def test_a_for_all_tables_publication_becomes_the_list_on_restart(database, producer_run,
                                                                   log_dir) -> None:
    """A publication an earlier pgcdc made FOR ALL TABLES for `*` is re-created as the list
    (one transaction, one line) when pgcdc owns it; the changes committed while pgcdc was
    stopped, before that, and after it are all streamed."""
    _sql(database, "CREATE TABLE keyed (id int PRIMARY KEY, v text)")
    run = producer_run("*", "--all-tables-publication", "--snapshot", "never")
    run.dsn = database
    run.start(log_dir)
    _sql(database, "INSERT INTO keyed VALUES (1, 'a')")
    read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.keyed", min_count=1)
    assert run.stop() == 0
    _sql(database, "INSERT INTO keyed VALUES (2, 'while stopped')")
    run.extra = ["--snapshot", "never"]  # the default: a list
    run.start(log_dir)
    wait_for_output(run, f"publication pub_{run.tag} was FOR ALL TABLES: re-created as the "
                         "table list pgcdc keeps for --tables")
    assert _publication(database, run) == (False, ["keyed"])
    _sql(database, "UPDATE keyed SET v = 'after' WHERE id = 1")
    records = _topic_holds(run, "keyed", database)
    assert [(r.value["op"], r.key["id"]) for r in records] == [("c", 1), ("c", 2), ("u", 1)]
    assert run.stop() == 0


def test_tables_created_while_pgcdc_was_stopped_arrive_with_their_rows(database, producer_run,
                                                                       log_dir) -> None:
    """`*` is a list: a table created while pgcdc was stopped was in no publication when its
    rows were written, so the slot's stream cannot carry them. On restart it joins through the
    table watcher, with an incremental snapshot of those rows (a keyless one stays out)."""
    _sql(database, "CREATE TABLE first (id int PRIMARY KEY)")
    run = producer_run("*", "--snapshot", "never")
    run.dsn = database
    run.start(log_dir)
    assert run.stop() == 0
    _sql(database, "CREATE TABLE made_while_stopped (id int PRIMARY KEY, v text)",
         "INSERT INTO made_while_stopped VALUES (1, 'a'), (2, 'b'), (3, 'c')",
         "DELETE FROM made_while_stopped WHERE id = 3", "DROP TABLE first")
    run.start(log_dir)
    wait_for_output(run, "new table(s) public.made_while_stopped added to publication")
    records = _topic_holds(run, "made_while_stopped", database)
    assert [(r.value["op"], r.key["id"]) for r in records] == [("r", 1), ("r", 2)]
    assert _publication(database, run) == (False, ["made_while_stopped"])
    assert run.stop() == 0


def _wait_snapshot_done(dsn: str, run: Any, table: str) -> None:
    """Until the incremental snapshot of `table` (the one its joining asked for) is done."""
    deadline = time.monotonic() + 60
    while _sql_one(dsn, f"SELECT state FROM pgcdc_signal WHERE '{table}' = ANY(tables)"
                   ) != "done":
        assert time.monotonic() < deadline, run.output()
        time.sleep(0.2)


def _sql_one(dsn: str, query: str) -> Any:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query).fetchone()  # type: ignore[arg-type]
    return None if row is None else row[0]


def _exit_line(run: Any) -> tuple[int, str]:
    assert run.proc is not None
    code = run.proc.wait(60)
    return code, run.output().strip().splitlines()[-1]


def test_star_on_an_empty_database_publishes_tables_created_later(database, producer_run,
                                                                  log_dir) -> None:
    port = free_port()
    run = producer_run("*", "--metrics-port", str(port))
    run.dsn = database
    run.start(log_dir)  # the initial snapshot of no table, then streaming
    _sql(database, "CREATE TABLE later (id int PRIMARY KEY, v text)",
         "INSERT INTO later VALUES (1, 'a'), (2, 'b')", "UPDATE later SET v = 'c' WHERE id = 1")
    # The list pgcdc keeps: the table joins at the watcher's next check, its rows written
    # before that follow as an incremental snapshot, later changes are streamed.
    wait_for_output(run, "new table(s) public.later added to publication")
    _wait_snapshot_done(database, run, "public.later")  # the update below comes after it
    _sql(database, "UPDATE later SET v = 'd' WHERE id = 2")
    records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.later",
                           min_count=3)
    assert sorted((r.value["op"], r.value["after"]["id"], r.value["after"]["v"])
                  for r in records) == [("r", 1, "c"), ("r", 2, "b"), ("u", 2, "d")]
    assert _live_rows(records) == [(1, "c"), (2, "d")]
    # A keyless table is left out of the list (the default policy): the application's
    # UPDATE and DELETE keep working.
    _sql(database, "CREATE TABLE nokey (v text)")
    wait_for_output(run, "new table public.nokey matches --tables but has no primary key: left "
                         "out")
    _sql(database, "INSERT INTO nokey VALUES ('a')", "UPDATE nokey SET v = 'b'",
         "DELETE FROM nokey")
    # An unlogged table has no changes to decode (PostgreSQL refuses it in a publication, FOR
    # ALL TABLES skips it): never listed, and the list goes on with the next table.
    _sql(database, "CREATE UNLOGGED TABLE scratch (id int PRIMARY KEY)",
         "CREATE TABLE last (id int PRIMARY KEY)")
    wait_for_output(run, "new table(s) public.last added to publication")
    assert "scratch" not in run.output()
    assert run.stop() == 0
    # Issue 46: the same command starts again. The keyless table the running producer left
    # out is left out again, with the same warning and gauge; the keyed tables stream on.
    run.start(log_dir)
    assert f"table public.nokey matches --tables but has no primary key: left out of " \
           f"publication pub_{run.tag}" in run.output()
    assert scrape_metrics(port)["pgcdc_keyless_tables_left_out"] == 1
    _sql(database, "UPDATE later SET v = 'e' WHERE id = 1", "UPDATE nokey SET v = 'c'")
    records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.later",
                           min_count=4)
    assert (records[-1].value["op"], records[-1].value["after"]) == ("u", {"id": 1, "v": "e"})
    assert _publication(database, run) == (False, ["last", "later"])
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
    run = producer_run("public.keyed,public.log_a")  # named exactly: refused too
    run.dsn = database
    run.start(log_dir, wait=False)
    code, line = _exit_line(run)
    assert code == 1 and "would be published: public.log_a; " in line, line
    with psycopg.connect(database, autocommit=True) as conn:  # nothing was created
        assert conn.execute("SELECT count(*) FROM pg_publication").fetchone() == (0,)
        conn.execute("UPDATE log_a SET v = 'x'")  # the application is not broken
    # Issue 46: at a later start (the publication exists) only a table named exactly in
    # --tables is refused; those a pattern matches are left out, each with one warning.
    run = producer_run("public.keyed", "--snapshot", "never")
    run.dsn = database
    run.start(log_dir)
    assert run.stop() == 0
    run.tables = "public.keyed,public.log_a"
    run.start(log_dir, wait=False)
    code, line = _exit_line(run)
    assert code == 1 and "would be published: public.log_a; " in line, line
    run.tables = "public.keyed,public.log_*"
    run.start(log_dir)
    for table in ("log_a", "log_b"):
        assert run.output().count(f"table public.{table} matches --tables but has no primary "
                                  "key: left out") == 1
    assert _publication(database, run) == (False, ["keyed"])
    assert run.stop() == 0


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

    # Created while streaming: the list takes it after REPLICA IDENTITY FULL is set, so the
    # application's UPDATE right after CREATE is accepted too (not published yet).
    _sql(database, "CREATE TABLE later (v text)", "INSERT INTO later VALUES ('w')",
         "UPDATE later SET v = 'x'")
    deadline = time.monotonic() + 60
    while _replica_identity(database, "later") != "f":  # the table watcher's next round
        assert time.monotonic() < deadline, run.output()
        time.sleep(0.2)
    # Keyed by the whole row: no incremental snapshot (it needs a key); changes from joining on.
    wait_for_output(run, "new table public.later has REPLICA IDENTITY FULL (no key): added to "
                         "publication")
    _sql(database, "UPDATE later SET v = 'y'")
    later = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.later",
                         min_count=2)
    assert [(r.value["op"], (r.value["after"] or r.value["before"])["v"]) for r in later] == [
        ("d", "x"), ("c", "y")]
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

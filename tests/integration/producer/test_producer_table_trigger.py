"""`--table-trigger` (issue 46): a new table matching `--tables` joins the publication in the
transaction that creates it (connector/replication/table_trigger.py), so every change of it is
streamed from its first row, and the application's statements never fail under any
`--keyless-tables` policy. Two producers with their own publications run at once on one
database (their triggers must not clash): one with `full`, installing its trigger as a
superuser; one with `refuse`, as a role that is not, whose trigger a superuser installs from
`pgcdc grants --table-trigger-sql`. The rows a CREATE TABLE AS or SELECT INTO writes itself
are the new table's first events (the trigger's ``pgcdc.rows`` messages)."""

from __future__ import annotations

import fnmatch
import subprocess
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from connector.replication.privileges import signal_grant_sql
from connector.replication.table_trigger import glob_regex
from connector.snapshot.incremental import signals
from tests.support.cdc_checks import in_order, read_records
from tests.support.databases import empty_database
from tests.support.producer import PGCDC
from tests.support.snapshot import wait_for_output
from tests.unit.replication.test_table_trigger import GLOBS, NAMES

pytestmark = pytest.mark.integration


@pytest.fixture
def database(postgres: Any) -> Iterator[str]:
    with empty_database(postgres.dsn) as dsn:
        yield dsn


def _one(dsn: str, query: str, *params: Any) -> Any:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query, params).fetchone()  # type: ignore[arg-type]
    return None if row is None else row[0]


def _published(dsn: str, run: Any) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return _published_in(conn, run)


def _ops(run: Any, table: str, count: int, schema: str = "public") -> list[tuple[str, Any]]:
    records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.{schema}.{table}",
                           min_count=count)
    return [(r.value["op"], r.key) for r in records]


def test_tables_created_and_written_in_one_transaction_are_streamed_from_their_first_row(
        database, producer_run, log_dir) -> None:
    role = f"trig_{uuid.uuid4().hex[:8]}"  # the refuse producer's: no superuser
    with psycopg.connect(database, autocommit=True) as conn:  # patterns must match at start
        conn.execute(f"CREATE ROLE {role} LOGIN REPLICATION")  # type: ignore[arg-type]
        conn.execute(f"GRANT CREATE ON DATABASE {conn.info.dbname} TO {role}")  # type: ignore
        conn.execute("CREATE TABLE f_seed (id int PRIMARY KEY)")
        conn.execute("CREATE TABLE r_seed (id int PRIMARY KEY)")
        conn.execute(f"ALTER TABLE r_seed OWNER TO {role}")  # type: ignore[arg-type]
        # the signal table an administrator made for it (docs/operations.md, Least privilege)
        conn.execute(signals.ddl())  # type: ignore[arg-type]
        conn.execute(signal_grant_sql(role, *signals.SIGNAL_TABLE))  # type: ignore[arg-type]
    full = producer_run("*.f_*", "--table-trigger", "--keyless-tables", "full")
    refuse = producer_run("public.r_*", "--table-trigger")  # refuse: the default
    full.dsn = database
    refuse.dsn = database.replace("user=postgres", f"user={role}")
    try:
        # Not a superuser: one line naming the SQL; once a superuser ran it, the same command
        # starts (the trigger is checked, not installed).
        refuse.start(log_dir, wait=False)
        assert refuse.proc is not None and refuse.proc.wait(60) == 1
        assert "pgcdc grants --table-trigger-sql" in refuse.output().strip().splitlines()[-1]
        sql = subprocess.run([PGCDC, "grants", "--table-trigger-sql", "--tables", "public.r_*",
                              "--publication", f"pub_{refuse.tag}"], capture_output=True,
                             text=True, check=True).stdout
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]
        for run in (full, refuse):
            run.start(log_dir, wait=False)
        for run, done in ((full, "installed"), (refuse, "present")):
            run.wait_streaming()
            assert f"table_trigger: event trigger {done}" in run.output()
        _application_and_checks(database, full, refuse)
        for run in (full, refuse):
            assert run.stop() == 0
    finally:
        refuse.drop()  # its slot, before its role goes
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")  # type: ignore[arg-type]
            conn.execute(f"DROP ROLE {role}")  # type: ignore[arg-type]


def _application_and_checks(database: str, full: Any, refuse: Any) -> None:
    # The application: each producer's keyed and keyless table created and written in ONE
    # transaction; not one statement refused.
    with psycopg.connect(database) as conn:
        for p in ("f", "r"):
            conn.execute(f"CREATE TABLE {p}_keyed (id int PRIMARY KEY, v text)")  # type: ignore
            conn.execute(f"CREATE TABLE {p}_nokey (id int, v text)")  # type: ignore
            for table in (f"{p}_keyed", f"{p}_nokey"):
                conn.execute(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b')")  # type: ignore
                conn.execute(f"UPDATE {table} SET v = 'c' WHERE id = 1")  # type: ignore
                conn.execute(f"DELETE FROM {table} WHERE id = 2")  # type: ignore
        # a schema with its tables in one statement (the command is CREATE SCHEMA)
        conn.execute("CREATE SCHEMA f_sch CREATE TABLE f_inschema (id int PRIMARY KEY)")
        conn.execute("INSERT INTO f_sch.f_inschema VALUES (3)")
        conn.commit()
    # Every change is a streamed one, no snapshot row ('r').
    for run, p in ((full, "f"), (refuse, "r")):
        assert _ops(run, f"{p}_keyed", 4) == [
            ("c", {"id": 1}), ("c", {"id": 2}), ("u", {"id": 1}), ("d", {"id": 2})]
    # full: REPLICA IDENTITY FULL set before it joined (keyed by the whole row: an update is
    # a delete and a create).
    assert _one(database, "SELECT relreplident FROM pg_class WHERE oid = 'f_nokey'::regclass") \
        == "f"
    assert [op for op, _ in _ops(full, "f_nokey", 5)] == ["c", "c", "d", "c", "d"]
    assert _ops(full, "f_inschema", 1, "f_sch") == [("c", {"id": 3})]
    assert _published(database, full) == ["f_inschema", "f_keyed", "f_nokey", "f_seed"]
    # refuse: left out (the watcher warns, as without the trigger), its writes accepted.
    wait_for_output(refuse, "new table public.r_nokey matches --tables but has no primary key: "
                            "left out")
    assert _published(database, refuse) == ["r_keyed", "r_seed"]
    # The watcher found them published: no incremental snapshot asked for.
    for run, p in ((full, "f"), (refuse, "r")):
        wait_for_output(run, f"table public.{p}_keyed is now published")
        assert "added to publication" not in run.output()
    assert _one(database, "SELECT count(*) FROM pgcdc_signal") == 0
    # Renamed into the patterns: an empty table joins at once, one holding rows is left to the
    # watcher (which adds it with an incremental snapshot of them).
    with psycopg.connect(database) as conn:
        conn.execute("CREATE TABLE other (id int PRIMARY KEY)")
        conn.execute("CREATE TABLE other_full (id int PRIMARY KEY)")
        conn.execute("INSERT INTO other_full VALUES (1)")
        conn.execute("ALTER TABLE other RENAME TO f_renamed")
        conn.execute("ALTER TABLE other_full RENAME TO f_renamed_full")
        assert _published_in(conn, full) == ["f_inschema", "f_keyed", "f_nokey", "f_renamed",
                                             "f_seed"]
        conn.execute("INSERT INTO f_renamed VALUES (7)")
        conn.commit()
    assert _ops(full, "f_renamed", 1) == [("c", {"id": 7})]
    _created_with_rows(database, full)
    _dropped_at_the_drop(database, full)
    # The patterns as the trigger matches them: PostgreSQL's regular expressions agree with the
    # Python matcher on the unit test's cases.
    with psycopg.connect(database, autocommit=True) as conn:
        for glob in GLOBS:
            got = [r[0] for r in conn.execute(
                "SELECT n ~ %s FROM unnest(%s::text[]) WITH ORDINALITY AS u(n, i) ORDER BY i",
                (glob_regex(glob), NAMES)).fetchall()]
            assert got == [fnmatch.fnmatchcase(n, glob) for n in NAMES], glob


def _created_with_rows(database: str, full: Any) -> None:
    """CREATE TABLE AS and SELECT INTO: the rows the statement wrote are the table's first
    events (the trigger's pgcdc.rows messages), before its later changes in the same
    transaction, with the values the stream itself would carry, whatever the session's
    settings, under one schema."""
    with psycopg.connect(database) as conn:
        # text output that depends on the session: the trigger pins pgcdc's settings
        conn.execute("SET TimeZone = 'Asia/Kolkata'")
        conn.execute("SET DateStyle = 'SQL, DMY'")
        conn.execute("SET IntervalStyle = 'sql_standard'")
        conn.execute("SET extra_float_digits = 0")
        conn.execute("CREATE TYPE f_mood AS ENUM ('happy', 'sad')")
        conn.execute("CREATE TABLE f_ctas AS SELECT * FROM (VALUES "
                     "(1, 1.5::numeric(10, 2), 0.1::float8, "
                     "'2026-01-02 03:04:05.123456+00'::timestamptz, "
                     "'1 day 02:03:04'::interval, ARRAY['a', 'b c', NULL], ''::text, "
                     "'happy'::f_mood), "
                     "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL)) "
                     "v(id, n, f, ts, iv, tags, note, mood)")
        # the same values streamed (the stream's own Relation and tuple), then changes
        conn.execute("INSERT INTO f_ctas SELECT 3, n, f, ts, iv, tags, note, mood FROM f_ctas "
                     "WHERE id = 1")
        conn.execute("UPDATE f_ctas SET note = 'later' WHERE id = 2")
        conn.execute("SELECT 10 AS id, 'z'::text AS v INTO f_selinto")
        conn.execute("INSERT INTO f_selinto VALUES (11, 'y')")
        conn.execute("CREATE TABLE f_nodata AS SELECT 1 AS id WITH NO DATA")
        # more rows than one message holds (ROWS_PER_MESSAGE): three messages, in order
        conn.execute("CREATE TABLE f_many AS SELECT g AS id FROM generate_series(1, 2500) g")
        conn.execute("INSERT INTO f_nodata VALUES (5)")
        conn.commit()
    topic = f"{full.prefix}.public.f_ctas"
    records = in_order(read_records(full.bootstrap, full.registry_url, topic, min_count=5))
    # FULL: keyed by the whole row, an update is a delete and a create
    assert [(r.value["op"], (r.value["after"] or r.value["before"])["id"]) for r in records] \
        == [("c", 1), ("c", 2), ("c", 3), ("d", 2), ("c", 2)]
    assert len({r.value["source"]["commit_lsn"] for r in records}) == 1
    assert [r.value["source"]["txn_index"] for r in records] == sorted(
        r.value["source"]["txn_index"] for r in records)
    first, second, streamed = (r.value["after"] for r in records[:3])
    assert {**first, "id": 3} == streamed  # the message's text reads as the stream's value
    assert first["ts"] == datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    assert (first["n"], first["f"], first["tags"], first["note"], first["mood"]) == (
        "1.50", 0.1, ["a", "b c", None], "", "happy")  # numeric without a scale: text
    assert second == {"id": 2, "n": None, "f": None, "ts": None, "iv": None, "tags": None,
                      "note": None, "mood": None}
    assert len({r.value_schema_id for r in records}) == 1  # the stream's Relation agrees
    assert [(op, key["id"]) for op, key in _ops(full, "f_selinto", 2)] == [("c", 10), ("c", 11)]
    assert [(op, key["id"]) for op, key in _ops(full, "f_nodata", 1)] == [("c", 5)]
    many = in_order(read_records(full.bootstrap, full.registry_url,
                                 f"{full.prefix}.public.f_many", min_count=2500))
    assert [r.value["after"]["id"] for r in many] == list(range(1, 2501))


def _dropped_at_the_drop(database: str, full: Any) -> None:
    """DROP TABLE: the sql_drop trigger's drop event, in the DROP's transaction, also for a
    table dropped before the watcher ever saw it; one drop event when the watcher saw it too."""
    with psycopg.connect(database) as conn:
        conn.execute("CREATE TABLE f_brief (id int PRIMARY KEY)")
        conn.execute("INSERT INTO f_brief VALUES (1)")
        conn.commit()
        xid = conn.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()[0]
        conn.execute("DROP TABLE f_brief")
        conn.commit()
        keyed = conn.execute("SELECT 'f_keyed'::regclass::oid::bigint").fetchone()[0]
        conn.execute("DROP TABLE f_keyed")  # published at the watcher's checks since
        conn.commit()
    records = read_records(full.bootstrap, full.registry_url, f"{full.prefix}.public.f_brief",
                           min_count=2)
    assert [r.value["op"] for r in records] == ["c", "t"]
    assert records[1].value["source"]["txId"] == xid  # the DROP's own transaction
    # the watcher's message too, then a change after it: once that is in Kafka, the
    # watcher's message has been decoded (the stream is in order)
    wait_for_output(full, f"table public.f_keyed (relation id {keyed}) was dropped: recorded")
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("INSERT INTO f_renamed VALUES (8)")
    assert _ops(full, "f_renamed", 2)[-1] == ("c", {"id": 8})
    assert [op for op, _ in _ops(full, "f_keyed", 5)] == ["c", "c", "u", "d", "t"]


def _published_in(conn: psycopg.Connection[Any], run: Any) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT tablename::text FROM pg_publication_tables WHERE pubname = %s ORDER BY 1",
        (f"pub_{run.tag}",)).fetchall()]

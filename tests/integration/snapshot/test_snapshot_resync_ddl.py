"""Re-sync after DDL (`resync_on_ddl`): DDL that changes existing rows without row events
(ADD COLUMN ... DEFAULT, ALTER COLUMN ... TYPE ... USING) makes the producer re-publish the
table through an incremental snapshot, so the topic ends with every row's new values (a table
without a key too: re-published whole at one cut, while it is written); with the setting off,
only a warning."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support.databases import empty_database
from tests.support.producer import current_lsn
from tests.support.snapshot import final_state, read_events, table_rows, wait_for_output

PGCDC = str(Path(sys.executable).parent / "pgcdc")
ROWS = 120


DDL = ["ALTER TABLE {t} ADD COLUMN c text DEFAULT 'x'",
       "ALTER TABLE {t} ALTER COLUMN n TYPE bigint USING n * 10"]


def _setup(postgres: Any, producer_run: Any, log_dir: Path, *extra: str,
           ddl: list[str] = DDL) -> tuple[Any, str]:
    run = producer_run("public.resync_*", "--snapshot", "never",
                       "--incremental-chunk-rows", "50", *extra)
    table = f"resync_{run.tag}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, n int NOT NULL)")
        conn.execute(f"CREATE TABLE {_probe(table)} (id int PRIMARY KEY, n int)")
        # Written before the producer starts (--snapshot never): not in the topic.
        conn.execute(f"INSERT INTO {table} SELECT i, i FROM generate_series(1, {ROWS}) i")
    run.start(log_dir)
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"INSERT INTO {table} VALUES ({ROWS + 1}, {ROWS + 1})")  # streamed
    run.wait_confirmed(current_lsn(postgres.dsn))
    time.sleep(2.5)  # one catalog check saw the table before the DDL
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        for statement in ddl:
            conn.execute(statement.format(t=table))
    return run, table


def _probe(table: str) -> str:
    """A published table of the test's own whose DDL shows that catalog checks ran."""
    return f"{table}_probe"


def _two_catalog_checks(run: Any, table: str, *, resync_on: bool = True) -> None:
    """Until at least two catalog checks ran after this call: it changes the probe table's
    column type and waits for what the check does with it once the table held still for one
    check -- its re-sync request, or with resync_on_ddl off its warning (the documented
    behaviour). Checks see every table at once, so DDL made before this call was seen too."""
    probe = _probe(table)
    with psycopg.connect(run.dsn, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE {probe} ALTER COLUMN n TYPE bigint")
        if not resync_on:
            wait_for_output(run, f"table public.{probe}: ", timeout=60)
            return
        deadline = time.monotonic() + 60
        while conn.execute("SELECT count(*) FROM public.pgcdc_signal WHERE slot = %s"
                           " AND %s = ANY(tables)",
                           (run.slot, f"public.{probe}")).fetchone() == (0,):
            assert time.monotonic() < deadline, run.output()
            time.sleep(0.2)


def _status(run: Any) -> str:
    out = subprocess.run([PGCDC, "status", "--dsn", run.dsn, "--slot", run.slot,
                          "--publication", f"pub_{run.tag}"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _requests_when_done(run: Any, table: str) -> list[tuple[str, str]]:
    """(state, message) of the slot's requests for `table`, once the first is done."""
    with psycopg.connect(run.dsn, autocommit=True) as conn:
        deadline = time.monotonic() + 120
        while True:
            rows = conn.execute("SELECT state, message FROM public.pgcdc_signal WHERE slot = %s "
                                "AND %s = ANY(tables) ORDER BY id",
                                (run.slot, f"public.{table}")).fetchall()
            if rows and rows[0][0] == "done":
                return rows
            assert time.monotonic() < deadline, (rows, run.output())
            time.sleep(0.2)


def test_ddl_rewriting_rows_resyncs_the_table(postgres, producer_run, log_dir) -> None:
    run, table = _setup(postgres, producer_run, log_dir)
    wait_for_output(run, f"re-sync of public.{table} queued", timeout=60)
    rows = _requests_when_done(run, table)
    # One request for the burst of two statements, its message naming both.
    assert len(rows) == 1, rows
    message = rows[0][1]
    assert message.startswith("re-sync after DDL: "), message
    assert "column c added" in message and "column n changed type" in message, message
    assert "re-sync after DDL" in _status(run)
    run.wait_confirmed(current_lsn(postgres.dsn), timeout=120)

    events = read_events(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                         min_count=ROWS + 2)
    reads = [e.value for e in events if e.value["op"] == "r"]
    assert all(v["source"]["snapshot"] == "incremental" for v in reads)
    # Every existing row, with the values the DDL gave it.
    assert {v["after"]["id"] for v in reads} == set(range(1, ROWS + 2))
    assert all(v["after"]["c"] == "x" and v["after"]["n"] == v["after"]["id"] * 10
               for v in reads), reads[:3]
    expected = table_rows(postgres.dsn, f"SELECT id, n, c FROM {table}")
    assert final_state([e.value for e in events]) == expected


def test_resync_off_only_warns(postgres, producer_run, log_dir) -> None:
    run, table = _setup(postgres, producer_run, log_dir, "--no-resync-on-ddl")
    wait_for_output(run, "resync_on_ddl is off", timeout=60)
    assert f"table public.{table}: " in run.output()
    _two_catalog_checks(run, table, resync_on=False)  # nothing else follows
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('public.pgcdc_signal') IS NOT NULL").fetchone()
        if exists == (True,):
            assert conn.execute("SELECT count(*) FROM public.pgcdc_signal WHERE slot = %s",
                                (run.slot,)).fetchone() == (0,)
    run.wait_confirmed(current_lsn(postgres.dsn), timeout=60)
    events = read_events(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                         min_count=1)
    assert [e.value["op"] for e in events] == ["c"]


def test_ddl_then_a_write_queues_one_resync(postgres, producer_run, log_dir) -> None:
    """The write sends the changed Relation at once, the catalog check sees the DDL a few
    seconds later: one re-sync between them."""
    run, table = _setup(postgres, producer_run, log_dir, ddl=[
        "ALTER TABLE {t} ALTER COLUMN n TYPE bigint USING n * 10",
        "UPDATE {t} SET n = n + 1 WHERE id = 1"])
    wait_for_output(run, f"re-sync of public.{table} queued", timeout=60)
    _requests_when_done(run, table)
    _two_catalog_checks(run, table)  # each saw the DDL: the one that would queue it ran
    rows = _requests_when_done(run, table)
    assert len(rows) == 1, (rows, run.output())
    assert "column n changed type from integer to bigint" in rows[0][1]
    run.wait_confirmed(current_lsn(postgres.dsn), timeout=120)
    events = read_events(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                         min_count=ROWS + 3)
    reads = [e.value for e in events if e.value["op"] == "r"]
    assert {v["after"]["id"] for v in reads} == set(range(1, ROWS + 2))
    expected = table_rows(postgres.dsn, f"SELECT id, n FROM {table}")
    assert expected[2]["n"] == 20
    assert final_state([e.value for e in events]) == expected


def test_enum_rename_and_drop_expression_resync(postgres, producer_run, log_dir) -> None:
    """DDL that changes no column type: an enum value renamed, a generated column made plain
    (its stored values were never published)."""
    run = producer_run("public.resync_*", "--snapshot", "never")
    table, mood = f"resync_{run.tag}", f"resync_mood_{run.tag}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TYPE {mood} AS ENUM ('sad', 'ok')")
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, e {mood}, "
                     "g int GENERATED ALWAYS AS (id * 2) STORED)")
        conn.execute(f"INSERT INTO {table} SELECT i, 'sad' FROM generate_series(1, 10) i")
    run.start(log_dir)
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"INSERT INTO {table} VALUES (11, 'ok')")
    run.wait_confirmed(current_lsn(postgres.dsn))
    time.sleep(2.5)
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"ALTER TYPE {mood} RENAME VALUE 'sad' TO 'blue'")
        conn.execute(f"ALTER TABLE {table} ALTER COLUMN g DROP EXPRESSION")
    wait_for_output(run, f"re-sync of public.{table} queued", timeout=60)
    rows = _requests_when_done(run, table)
    assert len(rows) == 1, rows
    assert "enum value renamed 'sad' to 'blue'" in rows[0][1], rows
    assert "column g is no longer generated" in rows[0][1], rows
    run.wait_confirmed(current_lsn(postgres.dsn), timeout=120)
    events = read_events(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                         min_count=12)
    reads = {e.value["after"]["id"]: e.value["after"] for e in events if e.value["op"] == "r"}
    assert set(reads) == set(range(1, 12))
    assert all(v["e"] == ("ok" if k == 11 else "blue") and v["g"] == 2 * k
               for k, v in reads.items()), reads


# ---------------------------------------------------------------- DDL right after creation

# A migration: each table created, filled and altered at once, with no write after the DDL.
# The catalog check first sees it after the DDL; what was published (its Relation) shows the
# difference. `steady` and `fresh` had no DDL: they are not re-synced.
MIGRATION = {
    "added": "ALTER TABLE added ADD COLUMN c text DEFAULT 'x'",
    "retyped": "ALTER TABLE retyped ALTER COLUMN n TYPE bigint USING n * 10",
    "renamed": "ALTER TABLE renamed RENAME COLUMN n TO m",
}
MIGRATION_ROWS = 60
# A table without a key (FOR ALL TABLES publishes it as it is: inserts only), filled, then
# altered while a writer keeps inserting: re-published whole (connector/snapshot/incremental/
# whole.py), its writes waiting while it is read.
KEYLESS_ROWS = 200


def _keep_inserting(dsn: str, stop: threading.Event, errors: list[BaseException]) -> None:
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            n = KEYLESS_ROWS
            while not stop.is_set():
                n += 1
                conn.execute("INSERT INTO keyless VALUES (%s, 'w')", (n,))
                time.sleep(0.01)
    except BaseException as exc:  # noqa: BLE001 -- reported by the test
        errors.append(exc)


def _keyless_rows(values: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    """The multiset of rows a consumer of a keyless table's topic holds: events applied in
    the contract's order, inserts and snapshot reads add a row, a truncate empties it."""
    rows: Counter[tuple[Any, ...]] = Counter()
    for value in sorted(values, key=lambda v: (v["source"]["commit_lsn"],
                                               v["source"]["txn_index"])):
        if value["op"] == "t":
            rows.clear()
        elif value["op"] in ("c", "r"):
            rows[tuple(sorted(value["after"].items()))] += 1
        else:
            raise AssertionError(f"a {value['op']} event on an insert-only table")
    return rows


@pytest.fixture
def database(postgres: Any) -> Iterator[str]:
    """The DSN of a new, empty database (dropped afterwards): FOR ALL TABLES sees only the
    test's tables."""
    with empty_database(postgres.dsn) as dsn:
        yield dsn


def _resyncs(dsn: str, slot: str) -> dict[str, list[tuple[str, str]]]:
    """table -> (state, message) of the slot's re-sync-after-DDL requests."""
    out: dict[str, list[tuple[str, str]]] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('public.pgcdc_signal')").fetchone() == (None,):
            return out  # no request was ever made
        for tables, state, message in conn.execute(
                "SELECT tables, state, message FROM public.pgcdc_signal WHERE slot = %s "
                "AND message LIKE 're-sync after DDL: %%' ORDER BY id", (slot,)):
            for table in tables:
                out.setdefault(table, []).append((state, message))
    return out


def test_ddl_right_after_creation_resyncs(database, producer_run, log_dir) -> None:
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE steady (id int PRIMARY KEY, n int)")
        conn.execute("CREATE TABLE probe (id int PRIMARY KEY, n int)")
        conn.execute("INSERT INTO steady VALUES (1, 1)")
    # A publication that has each table from its creation (FOR ALL TABLES; a schema-wide one
    # would do the same): its rows stream before the DDL. (pgcdc's own `--tables '*'` list
    # adds a new table later, with a snapshot read after the DDL.)
    run = producer_run("*", "--all-tables-publication", "--snapshot", "never",
                       "--incremental-chunk-rows", "50")
    run.dsn = database
    run.start(log_dir)
    with psycopg.connect(database, autocommit=True) as conn:  # at full speed
        conn.execute("INSERT INTO steady VALUES (2, 2)")
        for table, ddl in MIGRATION.items():
            conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, n int NOT NULL)")
            conn.execute(f"INSERT INTO {table} SELECT i, i FROM generate_series(1, "
                         f"{MIGRATION_ROWS}) i")
            conn.execute(ddl)
        conn.execute("CREATE TABLE fresh (id int PRIMARY KEY, n int)")
        conn.execute("INSERT INTO fresh VALUES (1, 1)")
        conn.execute("CREATE TABLE keyless (n int, s text)")
        conn.execute(f"INSERT INTO keyless SELECT i, 'a' FROM generate_series(1, "
                     f"{KEYLESS_ROWS}) i")
    stop, errors = threading.Event(), []
    writer = threading.Thread(target=_keep_inserting, args=(database, stop, errors))
    writer.start()
    try:
        time.sleep(0.3)
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute("ALTER TABLE keyless ADD COLUMN c int DEFAULT 7")
        deadline = time.monotonic() + 120
        while True:  # the writer goes on until every re-sync is done
            found = _resyncs(database, run.slot)
            if all(found.get(f"public.{t}", [("", "")])[0][0] == "done"
                   for t in (*MIGRATION, "keyless")):
                break
            assert time.monotonic() < deadline, (found, run.output())
            time.sleep(0.2)
    finally:
        stop.set()
        writer.join()
    assert not errors, errors
    run.wait_confirmed(current_lsn(database), timeout=120)  # every Relation was received
    # Two more catalog checks (the probe's DDL queued once it held still for one): they
    # compared every table's Relation with its catalog, and re-synced nothing else.
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("INSERT INTO probe VALUES (1, 1)")
    run.wait_confirmed(current_lsn(database), timeout=60)
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("ALTER TABLE probe ALTER COLUMN n TYPE bigint")
    while "public.probe" not in (found := _resyncs(database, run.slot)):
        assert time.monotonic() < deadline + 60, (found, run.output())
        time.sleep(0.2)
    assert sorted(found) == sorted([f"public.{t}" for t in (*MIGRATION, "keyless", "probe")]), \
        found
    assert all(len(requests) == 1 for requests in found.values()), found
    assert "column c added" in found["public.added"][0][1]
    assert "column n changed type" in found["public.retyped"][0][1]
    assert "column n renamed to m" in found["public.renamed"][0][1]

    run.wait_confirmed(current_lsn(database), timeout=120)
    for table in MIGRATION:
        events = read_events(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                             min_count=2 * MIGRATION_ROWS)
        assert final_state([e.value for e in events]) == table_rows(
            database, f"SELECT * FROM {table}"), table
    events = read_events(run.bootstrap, run.registry_url, f"{run.prefix}.public.keyless",
                         min_count=2 * KEYLESS_ROWS)
    values = [e.value for e in events]
    assert "column c added" in found["public.keyless"][0][1]
    with psycopg.connect(database, autocommit=True) as conn:
        table = Counter(tuple(sorted(zip(("n", "s", "c"), row, strict=True)))
                        for row in conn.execute("SELECT n, s, c FROM keyless"))
    written = sum(table.values()) - KEYLESS_ROWS
    assert written > 0 and all(dict(row)["c"] == 7 for row in table)
    assert _keyless_rows(values) == table, (written, run.output()[-3000:])
    # Published whole: one truncate per partition at the cut, then every row at the cut.
    cut = [v for v in values if v["op"] == "t"]
    assert cut and len({v["source"]["commit_lsn"] for v in cut}) == 1, cut
    reads = [v for v in values if v["op"] == "r"]
    assert {v["source"]["commit_lsn"] for v in reads} == {cut[0]["source"]["commit_lsn"]}

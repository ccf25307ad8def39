"""Issue 46: a live schema never crashes or stalls the producer. An application creates,
fills, alters, renames, drops and re-creates keyed and keyless tables (and partitions) in
several threads while `pgcdc run --tables '*'` streams with its defaults and is restarted
again and again, and `pgcdc status` is asked meanwhile: every catalog query of a session's
start, the table watcher, the re-sync check and the status meets tables vanishing between two
of its statements. No traceback, no exit but the one asked for, no reconnect; and the same
command always starts again (a keyless table the running producer left out does not refuse
the next start: docs/publishing.md, "Tables without a primary key"). An incremental snapshot
naming a table dropped before it was read reads the others."""

from __future__ import annotations

import random
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from connector.snapshot.incremental.watcher import WATCH_INTERVAL_S
from tests.support.cdc_checks import read_records
from tests.support.databases import empty_database
from tests.support.producer import PGCDC

pytestmark = pytest.mark.integration

# How long the application changes its schema. The issue asks for a minute; the suite's budget
# is tight, so a shorter run here (the races showed within ~15 s on main); raise it locally
# to fuzz longer.
DDL_SECONDS = 30.0
DDL_THREADS = 3


@pytest.fixture
def database(postgres: Any) -> Iterator[str]:
    with empty_database(postgres.dsn) as dsn:
        yield dsn


def _statements(rnd: random.Random, worker: int) -> list[str]:
    """One step of an application changing its schema: statements on a few names of its own
    (so the names come and go: created, renamed away and back, dropped, re-created)."""
    n = rnd.randrange(3)
    keyed, keyless, part = f"w{worker}_k{n}", f"w{worker}_nk{n}", f"w{worker}_p{n}"
    table = rnd.choice((keyed, keyless))
    return rnd.choice((
        [f"CREATE TABLE IF NOT EXISTS {keyed} (id int PRIMARY KEY, v text)"],
        [f"CREATE TABLE IF NOT EXISTS {keyless} (id int, v text)"],
        [f"INSERT INTO {table} (id, v) SELECT g, 'x' FROM generate_series(1, 20) g"],
        [f"UPDATE {table} SET v = 'u' WHERE id < 5"],
        [f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS c int DEFAULT 1"],
        [f"ALTER TABLE {table} ALTER COLUMN v TYPE varchar(40)"],
        [f"ALTER TABLE {keyless} ADD PRIMARY KEY (id)"],
        [f"ALTER TABLE {keyless} REPLICA IDENTITY FULL"],
        [f"ALTER TABLE {table} RENAME TO {table}_r"],
        [f"ALTER TABLE {table}_r RENAME TO {table}"],
        [f"DROP TABLE IF EXISTS {table}", f"DROP TABLE IF EXISTS {table}_r"],
        # created, filled and dropped within one check (the watcher may list it, never see it)
        [f"CREATE TABLE {table}_t (id int PRIMARY KEY)", f"INSERT INTO {table}_t VALUES (1)",
         f"DROP TABLE {table}_t"],
        [f"CREATE TABLE IF NOT EXISTS {part} (id int PRIMARY KEY) PARTITION BY RANGE (id)",
         f"CREATE TABLE IF NOT EXISTS {part}_a PARTITION OF {part} FOR VALUES FROM (0) TO (100)",
         f"INSERT INTO {part} SELECT g FROM generate_series(1, 10) g"],
        [f"ALTER TABLE {part} DETACH PARTITION {part}_a"],
        [f"DROP TABLE IF EXISTS {part}_a", f"DROP TABLE IF EXISTS {part}"],
        # a migration holding its lock a while (the checks must not wait for it)
        ["BEGIN", f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS m int",
         f"INSERT INTO {table} (id) VALUES (-1)", "SELECT pg_sleep(0.8)", "COMMIT"],
    ))


def _application(dsn: str, worker: int, stop: threading.Event) -> None:
    """Change the schema until `stop`; the application's own failures (a name that exists,
    or not, a duplicate key) are its business, ignored."""
    rnd = random.Random(worker)
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not stop.is_set():
            for statement in _statements(rnd, worker):
                try:
                    conn.execute(statement)  # type: ignore[arg-type]
                except psycopg.Error:
                    pass
            time.sleep(rnd.uniform(0.0, 0.03))


def _status(run: Any, dsn: str, stop: threading.Event, failures: list[str]) -> None:
    """`pgcdc status` again and again: each answers (exit 0: the slot exists), no traceback."""
    while not stop.is_set():
        out = subprocess.run([PGCDC, "status", "--dsn", dsn, "--slot", run.slot,
                              "--publication", f"pub_{run.tag}"], capture_output=True,
                             text=True, timeout=120)
        if out.returncode != 0 or "Traceback" in out.stderr:
            failures.append(f"pgcdc status exited {out.returncode}: {out.stderr[-3000:]}")
        time.sleep(0.2)


def _wait_started(run: Any, timeout: float = 60.0) -> None:
    """Until this start streams (or exited: the caller's assertion says how)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and run.alive():
        if f"streaming slot {run.slot} from " in run.output():
            return
        time.sleep(0.05)


def test_concurrent_ddl_never_crashes_or_stalls_the_producer(database, producer_run,
                                                              log_dir) -> None:
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE stable (id int PRIMARY KEY, v text)")
        conn.execute("CREATE TABLE other (id int PRIMARY KEY)")
    run = producer_run("*")  # the defaults: a table list pgcdc keeps, keyless ones refused
    run.dsn = database
    run.start(log_dir)  # the first start: the publication is made before the application runs
    stop = threading.Event()
    failures: list[str] = []
    threads = [threading.Thread(target=_application, args=(database, w, stop), daemon=True)
               for w in range(DDL_THREADS)]
    threads.append(threading.Thread(target=_status, args=(run, database, stop, failures),
                                    daemon=True))
    for thread in threads:
        thread.start()
    rnd = random.Random(46)
    starts = 1
    try:
        deadline = time.monotonic() + DDL_SECONDS
        while time.monotonic() < deadline:
            # Half the restarts stop a streaming producer (the watcher and the re-sync check
            # had their turns), half one still starting (setting the publication, opening
            # its session).
            if rnd.random() < 0.5:
                _wait_started(run)
            time.sleep(rnd.uniform(0.5, 3.0))
            assert run.alive(), f"pgcdc exited {run.stop()} on its own:\n{run.output()[-5000:]}"
            code = run.stop(signal.SIGTERM)
            output = run.output()
            # -SIGTERM: stopped before it installed its handler (while importing)
            assert code in (0, -signal.SIGTERM) and "Traceback" not in output, \
                f"pgcdc exited {code} (start {starts}):\n{output[-5000:]}"
            assert "reconnecting" not in output, output[-5000:]
            run.start(log_dir, wait=False)  # at once
            starts += 1
    finally:
        stop.set()
        for thread in threads:
            thread.join(120)
    _wait_started(run)
    time.sleep(WATCH_INTERVAL_S + 0.5)  # a check of the schema the application left
    assert run.alive(), f"pgcdc exited {run.stop()}:\n{run.output()[-5000:]}"
    assert run.stop() == 0 and "Traceback" not in run.output(), run.output()[-5000:]
    assert failures == []
    assert starts >= 4, starts
    # A snapshot request naming a table dropped before it is read still reads the others.
    out = subprocess.run([PGCDC, "snapshot", "--dsn", database, "--slot", run.slot,
                          "--publication", f"pub_{run.tag}", "--tables",
                          "public.stable,public.other"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("INSERT INTO other VALUES (1)")
        conn.execute("DROP TABLE stable")
    run.start(log_dir)
    deadline = time.monotonic() + 120
    with psycopg.connect(database, autocommit=True) as conn:
        while (state := conn.execute("SELECT state FROM pgcdc_signal WHERE tables = "
                                     "'{public.stable,public.other}'").fetchone()) != ("done",):
            assert state != ("failed",) and time.monotonic() < deadline, run.output()[-5000:]
            time.sleep(0.5)
    records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.other",
                           min_count=2)
    assert [(r.value["op"], r.key["id"]) for r in records] == [("c", 1), ("r", 1)]
    assert "public.stable was dropped or renamed since it was requested: skipped" in \
        run.output()
    assert run.stop() == 0


def _waiting_on_locks(dsn: str, longer_than_s: float = 0.0) -> list[str]:
    """The statements waiting on a lock now, for longer than `longer_than_s` (what a stalled
    producer waits in; pgcdc's own bounded waits last 100 ms)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [f"{r[0]}: {r[1]}" for r in conn.execute(
            "SELECT application_name, query FROM pg_stat_activity"
            " WHERE wait_event_type = 'Lock' AND datname = current_database()"
            " AND now() - query_start > make_interval(secs => %s)",
            (longer_than_s,)).fetchall()]


def test_a_migration_holding_a_lock_stalls_no_other_table(database, producer_run,
                                                          log_dir) -> None:
    """A migration holding ACCESS EXCLUSIVE on a published table (ALTER TABLE in an open
    transaction), and a table created in a transaction still open: the other tables' changes
    reach Kafka and are confirmed to PostgreSQL while the locks are held (the table watcher,
    the drop watch and the re-sync check had their turns meanwhile), an incremental snapshot of
    the locked table waits without holding the stream up, `pgcdc status` answers, a restart
    starts; the locked table's changes follow its commit, then its snapshot (docs/
    publishing.md "Migrations that hold locks"). (The new table joining after its commit is the
    table watcher's tests' business.)"""
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE big (id int PRIMARY KEY, v text DEFAULT 'x')")
        conn.execute("CREATE TABLE busy (id int PRIMARY KEY)")
    run = producer_run("*")
    run.dsn = database
    run.start(log_dir)
    with psycopg.connect(database, autocommit=True) as app, \
            psycopg.connect(database) as migration, psycopg.connect(database) as creator:
        app.execute("INSERT INTO big (id) VALUES (1)")
        read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.big", min_count=1)
        migration.execute("ALTER TABLE big ADD COLUMN c int DEFAULT 7")
        migration.execute("INSERT INTO big (id) VALUES (2)")
        creator.execute("CREATE TABLE fresh (id int PRIMARY KEY)")
        creator.execute("INSERT INTO fresh VALUES (1)")
        # an incremental snapshot of the locked table: its chunk waits, the stream does not
        requested = subprocess.run([PGCDC, "snapshot", "--dsn", database, "--slot", run.slot,
                                    "--publication", f"pub_{run.tag}", "--tables", "public.big"],
                                   capture_output=True, text=True, timeout=60)
        assert requested.returncode == 0, requested.stderr
        time.sleep(WATCH_INTERVAL_S + 0.5)  # every catalog check had a turn (each 2 s)
        app.execute("INSERT INTO busy VALUES (1)")
        lsn = app.execute("SELECT (pg_current_wal_lsn() - '0/0')::bigint").fetchone()
        assert lsn is not None
        try:
            records = read_records(run.bootstrap, run.registry_url,
                                   f"{run.prefix}.public.busy", min_count=1, timeout=45)
        except AssertionError as exc:  # stalled: say on what
            raise AssertionError(f"{exc}; waiting on a lock: {_waiting_on_locks(database)}") \
                from None
        assert [r.key["id"] for r in records] == [1]
        run.wait_confirmed(int(lsn[0]), timeout=30)  # acknowledged too: WAL is released
        status = subprocess.run([PGCDC, "status", "--dsn", database, "--slot", run.slot,
                                 "--publication", f"pub_{run.tag}"], capture_output=True,
                                text=True, timeout=60)
        assert status.returncode == 0 and "public.busy" in status.stdout, status.stderr
        assert _waiting_on_locks(database, 1.0) == []  # (pgcdc does not queue behind them)
        # A restart meanwhile (a deploy during a long migration) starts and streams too.
        assert run.stop() == 0
        run.start(log_dir)
        app.execute("INSERT INTO busy VALUES (2)")
        records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.busy",
                               min_count=2, timeout=45)
        assert [r.key["id"] for r in records] == [1, 2]
        assert migration.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        migration.commit()
        creator.commit()
    records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.big",
                           min_count=4, timeout=60)
    after = [(r.value["op"], r.key["id"], r.value["after"].get("c")) for r in records]
    assert after[1:] == [("c", 2, 7), ("r", 1, 7), ("r", 2, 7)], after  # then the snapshot
    assert run.alive() and "reconnecting" not in run.output(), run.output()[-5000:]
    assert run.stop() == 0 and "Traceback" not in run.output(), run.output()[-5000:]

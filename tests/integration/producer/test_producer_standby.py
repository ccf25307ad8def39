"""Capture from a hot standby (issue 36), in one run on real servers: a PostgreSQL 18
primary and a physical streaming standby (scripts/devstack/standby.py), `pgcdc run` pointed at
the standby as a role with only LOGIN REPLICATION and SELECT (no signal table anywhere).

- Without the publication on the primary it stops with one line naming the statement to run
  there (a standby cannot run DDL).
- With it: the slot is created on the standby, the initial snapshot is read there, changes
  written on the primary under load stream; heartbeats go through the primary (--heartbeat-dsn)
  and carry the standby slot's restart_lsn.
- `pgcdc snapshot` against the standby, as that role, sends its request over Kafka
  (``<prefix>.signal``; the signal table is refused there in one line); the producer runs it
  with read-only chunks on the standby under the write load; SIGKILLed mid-snapshot and
  restarted, it resumes the request at its last acknowledged chunk.
- A second snapshot is under way when the standby is promoted (the primary crashed): the
  producer goes on from its slot on the promoted server, finishes the snapshot there (still
  read-only: the request came over Kafka), heartbeats now emitted there.
- Nothing was written for the snapshots: no signal table exists on either server.
Each topic folded per key in offset order equals the table on the (new) primary."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from devstack.postgres import embedded_pg18_bin
from devstack.standby import StandbyPair

from connector.names import table_topic
from connector.snapshot.incremental.channel import RequestLog, RequestState, signal_topic_name
from connector.snapshot.incremental.resync import RESYNC_MESSAGE
from connector.snapshot.incremental.signal_topic import SignalTopic
from tests.support.cdc_checks import assert_one_clear_line, read_records, start_and_exit
from tests.support.producer import PGCDC, ProducerRun
from tests.support.table_state import fold

pytestmark = pytest.mark.integration

SCHEMA = "sb"
TABLES = {"items": ("id",), "pairs": ("a", "b")}
ROLE = "cdc_reader"
SETUP = (f"CREATE SCHEMA {SCHEMA}",
         f"CREATE TABLE {SCHEMA}.items (id int PRIMARY KEY, n int NOT NULL, note text)",
         f"CREATE TABLE {SCHEMA}.pairs (a int, b int, v text, PRIMARY KEY (a, b))",
         f"INSERT INTO {SCHEMA}.items SELECT i, 0, 'seed' FROM generate_series(1, 200) i",
         f"INSERT INTO {SCHEMA}.pairs SELECT i, 1, 'seed' FROM generate_series(1, 50) i",
         f"CREATE ROLE {ROLE} LOGIN REPLICATION",
         f"GRANT USAGE ON SCHEMA {SCHEMA} TO {ROLE}",
         f"GRANT SELECT ON ALL TABLES IN SCHEMA {SCHEMA} TO {ROLE}",
         # PostgreSQL 15+ grants CREATE on public to no one but its owner: the role cannot
         # make a signal table, SELECT is all it has.
         f"REVOKE ALL ON SCHEMA public FROM {ROLE}")


@pytest.fixture
def pair(work_dir: Path) -> Iterator[StandbyPair]:
    bin_dir = embedded_pg18_bin()
    assert bin_dir is not None, "PostgreSQL 18 binaries missing (dev extra)"
    base = Path(tempfile.mkdtemp(prefix="standby-", dir=work_dir))
    os.chmod(base, 0o755)
    servers = StandbyPair(bin_dir, base, {"fsync": "off", "full_page_writes": "off"},
                          sync_slots=False)
    try:
        servers.start()
        yield servers
    finally:
        servers.stop()


def as_role(dsn: str) -> str:
    return dsn.replace("user=postgres", f"user={ROLE}")


def execute(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


def replay_lsn(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()"
                           " ELSE pg_current_wal_lsn() END - '0/0'").fetchone()
    assert row is not None
    return int(row[0])


class Workload(threading.Thread):
    """Small transactions on both tables through the pair's read-write DSN until stopped: it
    follows the promotion (libpq then finds the promoted standby)."""

    def __init__(self, dsn: str, seed: int) -> None:
        super().__init__(daemon=True)
        self.dsn, self.rng = dsn, random.Random(seed)
        self.done = threading.Event()
        self.commits: dict[int, int] = {}
        self.error: BaseException | None = None

    def run(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        rng = self.rng
        while not self.done.is_set():
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.dsn, connect_timeout=5)
                with conn.transaction():
                    for _ in range(rng.randint(1, 3)):
                        a, b = rng.randrange(1, 300), rng.randrange(1, 4)
                        op = rng.random()
                        if op < 0.4:
                            conn.execute(f"INSERT INTO {SCHEMA}.items VALUES (%s, 0, %s) ON "
                                         "CONFLICT (id) DO UPDATE SET n = items.n + 1",
                                         (a, f"i{rng.random()}"))
                        elif op < 0.6:
                            conn.execute(f"DELETE FROM {SCHEMA}.items WHERE id = %s", (a,))
                        elif op < 0.85:
                            conn.execute(f"INSERT INTO {SCHEMA}.pairs VALUES (%s, %s, %s) ON "
                                         "CONFLICT (a, b) DO UPDATE SET v = excluded.v",
                                         (a, b, f"p{rng.random()}"))
                        else:
                            conn.execute(f"DELETE FROM {SCHEMA}.pairs WHERE a = %s", (a,))
                port = int(conn.info.port)
                self.commits[port] = self.commits.get(port, 0) + 1
                time.sleep(0.005)
            except psycopg.OperationalError:
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.2)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                self.error = exc
                return
        if conn is not None:
            conn.close()

    def wait_commits(self, port: int, more: int, timeout: float = 60.0) -> None:
        target = self.commits.get(port, 0) + more
        deadline = time.monotonic() + timeout
        while self.commits.get(port, 0) < target:
            assert self.error is None and time.monotonic() < deadline, self.error
            time.sleep(0.1)


def requests(bootstrap: str, prefix: str) -> RequestLog:
    """The requests as last recorded in ``<prefix>.signal``."""
    topic = SignalTopic({"bootstrap.servers": bootstrap}, signal_topic_name(prefix))
    try:
        topic.catch_up(10)
        return topic.log
    finally:
        topic.close()


def request_id(stdout: str) -> int:
    """The id `pgcdc snapshot` prints: "snapshot request <id> for slot ..."."""
    return int(stdout.split("snapshot request ", 1)[1].split()[0])


def table_state(dsn: str, table: str, key: tuple[str, ...]) -> dict[tuple[Any, ...], Any]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(f"SELECT * FROM {SCHEMA}.{table}")  # type: ignore[arg-type]
        names = [d.name for d in cur.description or []]
        rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    return {tuple(r[c] for c in key): r for r in rows}


def test_capture_from_a_standby_through_promotion(pair: StandbyPair, kafka, registry,
                                                  tmp_path: Path) -> None:
    began = time.monotonic()
    phases: dict[str, float] = {}
    primary, standby = pair.primary, pair.standby
    execute(primary.dsn, *SETUP)
    tables = ",".join(f"{SCHEMA}.{t}" for t in TABLES)
    run = ProducerRun(as_role(standby.dsn), kafka.bootstrap, registry.url, tables,
                      ["--heartbeat-dsn", as_role(primary.dsn), "--heartbeat-interval-s", "1",
                       "--no-failover-slot", "--incremental-chunk-rows", "25"])
    publication = f"pub_{run.tag}"

    # No publication on the primary: one line saying what to run there.
    code, out = start_and_exit(run, tmp_path)
    assert_one_clear_line(code, out, "this server is a standby", "run on the primary: "
                          f'CREATE PUBLICATION "{publication}" FOR TABLE "{SCHEMA}"."items", '
                          f'"{SCHEMA}"."pairs"')
    phases["refused"] = time.monotonic() - began

    execute(primary.dsn, f"CREATE PUBLICATION {publication} FOR TABLE {tables}")
    workload = Workload(pair.dsn, seed=36)

    def snapshot_command(*more: str) -> list[str]:
        return [PGCDC, "snapshot", "--dsn", as_role(standby.dsn), "--slot", run.slot,
                "--publication", publication, "--tables", tables, "--bootstrap-servers",
                kafka.bootstrap, "--topic-prefix", run.prefix, *more]

    def requested() -> int:
        """A snapshot of both tables, sent to the standby's producer over Kafka."""
        done = subprocess.run(snapshot_command(), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and f"in {run.prefix}.signal" in done.stdout, done
        return request_id(done.stdout)

    def wait_request(request: int | None, states: tuple[str, ...], chunks: int = 0,
                     timeout: float = 120) -> RequestState:
        """Until the request (None: the re-sync after DDL) is in one of `states`."""
        deadline = time.monotonic() + timeout
        while True:
            log = requests(kafka.bootstrap, run.prefix)
            if request is None:
                found = next((r for r in log.of_slot(run.slot)
                              if (r.message or "").startswith(RESYNC_MESSAGE)), None)
            else:
                found = log.get(request)
            if found is not None and found.state in states and found.chunks >= chunks:
                return found
            assert found is None or found.state not in ("failed", "cancelled"), found
            assert run.alive() and time.monotonic() < deadline, (found,
                                                                 run.output()[-4000:])
            time.sleep(0.1)

    try:
        run.start(tmp_path, wait=False)
        # Slot creation on the standby waits for a running-xacts record from the primary (its
        # bgwriter logs one every 15 s while it writes).
        workload.start()
        # It says so, naming what makes the primary log one at once: done here, for speed.
        deadline = time.monotonic() + 120
        while "snapshot consistent at" not in run.output():
            assert run.alive() and time.monotonic() < deadline, run.output()[-4000:]
            if "pg_log_standby_snapshot()" in run.output():
                execute(primary.dsn, "SELECT pg_log_standby_snapshot()")
            time.sleep(0.5)
        run.wait_streaming(120, on=standby.dsn)
        phases["streaming"] = time.monotonic() - began
        workload.wait_commits(primary.port, 200)
        run.wait_confirmed(replay_lsn(standby.dsn), 120, on=standby.dsn)
        phases["caught up"] = time.monotonic() - began
        heartbeats = read_records(kafka.bootstrap, registry.url, f"{run.prefix}.heartbeat",
                                  min_count=2)
        assert all(h.value["restart_lsn"] for h in heartbeats), heartbeats[:3]
        # An incremental snapshot requested on the standby: the signal table is refused in
        # one line, the request goes over Kafka and runs there, read-only, while the workload
        # writes on the primary. SIGKILLed mid-snapshot, the producer resumes it.
        refused = subprocess.run(snapshot_command("--signal-channel", "table"),
                                 capture_output=True, text=True, timeout=60)
        assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused
        assert "this server is a standby" in refused.stderr.strip().splitlines()[-1] and \
            "--signal-channel kafka" in refused.stderr, refused
        first = requested()
        killed_at = wait_request(first, ("running",), chunks=3)
        run.stop(signal.SIGKILL)
        run.start(tmp_path, wait=False)
        run.wait_streaming(120, on=standby.dsn)
        finished = wait_request(first, ("done",))
        assert f"incremental snapshot {first} of" in run.output() and "resuming" in \
            run.output(), run.output()[-4000:]
        assert finished.chunks > killed_at.chunks and finished.table_index == 2, finished
        phases["incremental snapshot, killed, resumed"] = time.monotonic() - began
        # DDL on the primary that rewrites every row without a row event: the producer on
        # the standby re-syncs the table, queued over Kafka and read there read-only.
        execute(primary.dsn, f"ALTER TABLE {SCHEMA}.items ADD COLUMN flag int NOT NULL "
                "DEFAULT 7")
        resynced = wait_request(None, ("done",))
        assert resynced.tables == (f"{SCHEMA}.items",), resynced
        phases["re-synced after DDL"] = time.monotonic() - began

        # Another one, under way when the primary crashes and the standby is promoted.
        second = requested()
        wait_request(second, ("running",), chunks=1)
        promoted_at = replay_lsn(standby.dsn)
        pair.crash_primary()
        pair.promote()
        wait_request(second, ("done",))
        workload.wait_commits(standby.port, 200, timeout=120)
        workload.done.set()
        workload.join(30)
        assert workload.error is None, workload.error
        run.wait_caught_up(120, on=standby.dsn)
        phases["promoted, caught up"] = time.monotonic() - began
        # Heartbeats go on, emitted on the promoted server now (its WAL, past the promotion).
        deadline = time.monotonic() + 30
        while True:
            heartbeats = read_records(kafka.bootstrap, registry.url, f"{run.prefix}.heartbeat",
                                      min_count=1)
            if any(h.value["lsn"] > promoted_at for h in heartbeats):
                break
            assert time.monotonic() < deadline, "no heartbeat after the promotion"
            time.sleep(1)
        assert run.stop(signal.SIGTERM) == 0, run.output()[-4000:]
    finally:
        workload.done.set()
        if run.alive():
            run.stop(signal.SIGKILL)
    out = run.output()
    assert "Traceback" not in out, out[-4000:]
    # The promotion began a new session, the only reconnect of this start.
    assert out.count("reconnecting in") == 1, out[-4000:]
    assert "the standby was promoted: starting a new session" in out, out[-4000:]
    assert workload.commits.get(primary.port, 0) > 0

    for table, key in TABLES.items():
        topic = table_topic(run.prefix, SCHEMA, table)
        records = read_records(kafka.bootstrap, registry.url, topic, min_count=1,
                               tombstones=False)
        reads = [r.value["source"]["snapshot"] for r in records if r.value["op"] == "r"]
        assert reads, f"{topic}: no initial snapshot rows"
        assert "incremental" in reads, f"{topic}: no incremental snapshot rows"
        folded = fold((r.value for r in sorted(records, key=lambda r: (r.partition, r.offset))),
                      key)
        expected = table_state(standby.dsn, table, key)
        assert folded == expected, (
            f"{topic}: only in the topic {sorted(folded.keys() - expected.keys())[:10]}, only "
            f"in PostgreSQL {sorted(expected.keys() - folded.keys())[:10]}, different "
            f"{[k for k in folded.keys() & expected.keys() if folded[k] != expected[k]][:10]}")
    # No write for the snapshots: no signal table was made (the role could not have).
    with psycopg.connect(standby.dsn, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('public.pgcdc_signal')").fetchone() == (None,)
    phases["folded"] = time.monotonic() - began
    print("phases (s since start):", {k: round(v, 1) for k, v in phases.items()})

"""A primary failover end to end (issue 12): PostgreSQL 18 primary + physical streaming standby
(scripts/devstack/standby.py), `pgcdc run --failover-slot` on a two-host DSN, a workload writing
throughout; the primary is stopped with `-m immediate` mid-workload and the standby promoted.

- With slot sync on, the producer reconnects to the new primary by itself and continues from
  the synced slot: the topics folded per key in offset order, and the Delta tables of the merge
  job, equal the new primary's tables.
- Without slot sync the slot does not survive: the producer exits with one clear line and
  creates no new slot (streaming on from one would hide a gap)."""

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
from devstack.postgres import Postgres, embedded_pg18_bin
from devstack.standby import StandbyPair

from connector.names import table_topic
from spark_jobs.runtime.config import MergeConfig
from spark_jobs.runtime.query import run_merge
from spark_jobs.verify.compare import compare, lake_rows, pg_rows
from tests.support.cdc_checks import read_records
from tests.support.producer import PGCDC, ProducerRun
from tests.support.table_state import fold

pytestmark = pytest.mark.e2e

SCHEMA = "fo"
TABLES = {"items": ("id",), "pairs": ("a", "b")}
DDL = (f"CREATE SCHEMA {SCHEMA}",
       f"CREATE TABLE {SCHEMA}.items (id int PRIMARY KEY, n int NOT NULL, note text)",
       f"CREATE TABLE {SCHEMA}.pairs (a int, b int, v text, PRIMARY KEY (a, b))",
       f"INSERT INTO {SCHEMA}.items SELECT i, 0, 'seed' FROM generate_series(1, 50) i")
PG_SETTINGS = {"fsync": "off", "full_page_writes": "off"}


@pytest.fixture
def pair_factory(work_dir: Path) -> Iterator[Any]:
    bin_dir = embedded_pg18_bin()
    assert bin_dir is not None, "PostgreSQL 18 binaries missing (dev extra)"
    pairs: list[StandbyPair] = []

    def make(sync_slots: bool) -> StandbyPair:
        base = Path(tempfile.mkdtemp(prefix="failover-", dir=work_dir))
        os.chmod(base, 0o755)
        pair = StandbyPair(bin_dir, base, dict(PG_SETTINGS), sync_slots=sync_slots)
        pairs.append(pair)
        pair.start()
        return pair

    yield make
    for pair in pairs:
        pair.stop()


def _one(dsn: str, query: str, *params: Any) -> Any:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        row = conn.execute(query, params).fetchone()  # type: ignore[arg-type]
    return None if row is None else row[0]


class Workload(threading.Thread):
    """Small transactions of inserts, updates and deletes on both tables until stopped, through
    the pair's multi-host DSN: it rides out the failover by reconnecting (libpq then finds the
    promoted standby). A transaction in flight at the crash is just lost (or not)."""

    def __init__(self, dsn: str, seed: int) -> None:
        super().__init__(daemon=True)
        self.dsn, self.rng = dsn, random.Random(seed)
        self.done = threading.Event()
        self.commits: dict[int, int] = {}  # by server port
        self.failures = 0
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
                        self._statement(conn, rng)
                port = int(conn.info.port)
                self.commits[port] = self.commits.get(port, 0) + 1
                time.sleep(0.005)
            except psycopg.OperationalError:
                self.failures += 1
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.2)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                self.error = exc
                return
        if conn is not None:
            conn.close()

    @staticmethod
    def _statement(conn: psycopg.Connection[Any], rng: random.Random) -> None:
        op, a, b = rng.random(), rng.randrange(1, 300), rng.randrange(1, 4)
        if op < 0.35:
            conn.execute(f"INSERT INTO {SCHEMA}.items VALUES (%s, 0, %s) ON CONFLICT (id) DO "
                         "UPDATE SET n = items.n + 1", (a, f"i{rng.random()}"))
        elif op < 0.55:
            conn.execute(f"UPDATE {SCHEMA}.items SET n = n + 1, note = %s WHERE id = %s",
                         (f"u{rng.random()}", a))
        elif op < 0.65:
            conn.execute(f"DELETE FROM {SCHEMA}.items WHERE id = %s", (a,))
        elif op < 0.85:
            conn.execute(f"INSERT INTO {SCHEMA}.pairs VALUES (%s, %s, %s) ON CONFLICT (a, b) "
                         "DO UPDATE SET v = excluded.v", (a, b, f"p{rng.random()}"))
        else:
            conn.execute(f"DELETE FROM {SCHEMA}.pairs WHERE a = %s", (a,))


def fold_topic(bootstrap: str, registry_url: str, topic: str, key: tuple[str, ...]
               ) -> tuple[dict[tuple[Any, ...], dict[str, Any]], int]:
    """The table a consumer rebuilds: every record up to the end of each partition, per key in
    offset order (replayed duplicates re-apply older values, then the newer ones follow); and
    how many events were published more than once."""
    records = read_records(bootstrap, registry_url, topic, min_count=1, tombstones=False)
    positions = [(r.value["source"]["commit_lsn"], r.value["source"]["txn_index"])
                 for r in records]
    in_offset_order = sorted(records, key=lambda r: (r.partition, r.offset))
    return fold((r.value for r in in_offset_order), key), len(positions) - len(set(positions))


def table_state(dsn: str, table: str, key: tuple[str, ...]) -> dict[tuple[Any, ...],
                                                                      dict[str, Any]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(f"SELECT * FROM {SCHEMA}.{table}")  # type: ignore[arg-type]
        names = [d.name for d in cur.description or []]
        rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    return {tuple(r[c] for c in key): r for r in rows}


def wait_synced(standby: Postgres, slot: str, producer: ProducerRun, timeout: float = 120.0) -> int:
    """Until the standby holds a persistent synced copy of the slot that has moved past the
    workload's start; returns its confirmed position. (A first synced copy stays temporary
    until the primary's slot has advanced past the standby's catalog xmin: the producer's
    confirmations do that.)"""
    floor = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert producer.alive(), producer.output()[-4000:]
        with psycopg.connect(standby.dsn, autocommit=True) as conn:
            if floor is None:
                floor = conn.execute("SELECT pg_last_wal_replay_lsn() - '0/0'").fetchone()[0]  # type: ignore[index]
            row = conn.execute(
                "SELECT synced, temporary, failover, confirmed_flush_lsn - '0/0'"
                " FROM pg_replication_slots WHERE slot_name = %s", (slot,)).fetchone()
        if row is not None and row[0] and not row[1] and row[3] is not None and row[3] > floor:
            assert row[2], "the synced slot is not a failover slot"
            return int(row[3])
        time.sleep(0.5)
    raise AssertionError(f"slot {slot} not synced to the standby within {timeout}s: {row}; "
                         f"see {standby.log_file}")


def test_failover_continues_from_the_synced_slot(pair_factory, kafka, registry, spark,
                                                 tmp_path: Path) -> None:
    began = time.monotonic()
    phases: dict[str, float] = {}
    pair: StandbyPair = pair_factory(sync_slots=True)
    phases["pair"] = time.monotonic() - began
    with psycopg.connect(pair.dsn, autocommit=True) as conn:
        for statement in DDL:
            conn.execute(statement)  # type: ignore[arg-type]
    producer = ProducerRun(pair.dsn, kafka.bootstrap, registry.url, f"{SCHEMA}.*",
                           ["--failover-slot"])
    workload = Workload(pair.dsn, seed=12)
    try:
        producer.start(tmp_path, wait=False)  # initial snapshot of the seed rows, streaming
        producer.wait_streaming(120, on=pair.primary.dsn)
        assert _one(pair.primary.dsn, "SELECT failover FROM pg_replication_slots"
                    " WHERE slot_name = %s", producer.slot) is True
        workload.start()
        phases["streaming"] = time.monotonic() - began
        synced = wait_synced(pair.standby, producer.slot, producer)
        phases["synced"] = time.monotonic() - began
        status = subprocess.run([PGCDC, "status", "--dsn", pair.standby.dsn, "--slot",
                                 producer.slot], capture_output=True, text=True, timeout=60)
        assert "failover: on; synced from the primary" in status.stdout, status
        time.sleep(1.0)  # more changes in flight at the crash
        pair.crash_primary()
        pair.promote()
        before = workload.commits.get(pair.standby.port, 0)
        # reconnected by itself to the new primary
        producer.wait_streaming(120, on=pair.standby.dsn)
        phases["reconnected"] = time.monotonic() - began
        deadline = time.monotonic() + 60
        while workload.commits.get(pair.standby.port, 0) < before + 100:
            assert workload.error is None and time.monotonic() < deadline, workload.error
            time.sleep(0.2)
        workload.done.set()
        workload.join(30)
        assert workload.error is None, workload.error
        producer.wait_caught_up(120, on=pair.standby.dsn)
        assert producer.stop(signal.SIGTERM) == 0, producer.output()[-4000:]
    finally:
        workload.done.set()
        if producer.alive():
            producer.stop(signal.SIGKILL)
    phases["stopped"] = time.monotonic() - began
    out = producer.output()
    assert "Traceback" not in out, out[-4000:]
    assert workload.commits.get(pair.primary.port, 0) > 0

    new_primary = pair.standby.dsn
    for table, key in TABLES.items():
        topic = table_topic(producer.prefix, SCHEMA, table)
        folded, replayed = fold_topic(kafka.bootstrap, registry.url, topic, key)
        # The synced copy may trail what the producer had published: those events come
        # again (at-least-once), never fewer.
        print(f"{topic}: {replayed} event(s) published twice; workload commits by port "
              f"{workload.commits}, {workload.failures} failed; synced copy seen at {synced:X}")
        expected = table_state(new_primary, table, key)
        assert folded == expected, (
            f"{topic}: only in the topic {sorted(folded.keys() - expected.keys())[:10]}, only "
            f"in PostgreSQL {sorted(expected.keys() - folded.keys())[:10]}, different "
            f"{[k for k in folded.keys() & expected.keys() if folded[k] != expected[k]][:10]}")

    phases["folded"] = time.monotonic() - began
    target = tmp_path / "lake"
    stats = run_merge(spark, MergeConfig(bootstrap_servers=kafka.bootstrap,
                                         schema_registry_url=registry.url, target=str(target),
                                         topic_prefix=producer.prefix, trigger="available-now"))
    phases["merged"] = time.monotonic() - began
    print("phases (s since start):", {k: round(v, 1) for k, v in phases.items()})
    assert stats.dead_letters == 0
    for table, key in TABLES.items():
        result = compare(f"{SCHEMA}.{table}", pg_rows(new_primary, SCHEMA, table),
                         lake_rows(spark, str(target / SCHEMA / table), key))
        assert result.equal, result.differences


def test_slot_not_synced_is_refused_after_failover(pair_factory, kafka, registry,
                                                   tmp_path: Path) -> None:
    pair: StandbyPair = pair_factory(sync_slots=False)
    with psycopg.connect(pair.dsn, autocommit=True) as conn:
        for statement in DDL:
            conn.execute(statement)  # type: ignore[arg-type]
    producer = ProducerRun(pair.dsn, kafka.bootstrap, registry.url, f"{SCHEMA}.*",
                           ["--failover-slot"])
    workload = Workload(pair.dsn, seed=13)
    try:
        producer.start(tmp_path, wait=False)
        producer.wait_streaming(120, on=pair.primary.dsn)
        workload.start()
        time.sleep(2.0)
        pair.crash_primary()
        pair.promote()
        assert producer.proc is not None
        code = producer.proc.wait(120)
    finally:
        workload.done.set()
        if producer.alive():
            producer.stop(signal.SIGKILL)
    workload.join(30)
    out = producer.output()
    lines = out.strip().splitlines()
    assert code == 1, out[-4000:]
    assert "Traceback" not in out, out[-4000:]
    assert lines[-1].startswith("pgcdc run: "), out[-4000:]
    for needle in (producer.slot, "does not exist on the primary", str(pair.standby.port),
                   "--snapshot initial"):
        assert needle in lines[-1], f"{needle!r} not in {lines[-1]!r}"
    # No new slot on the new primary: streaming on from one would skip what the old one held.
    assert _one(pair.standby.dsn, "SELECT count(*) FROM pg_replication_slots"
                " WHERE slot_type = 'logical'") == 0

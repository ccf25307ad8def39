"""Transaction-consistent cuts (`--consistent-cuts`) end to end: PostgreSQL → `pgcdc run`
(heartbeats, 3 partitions per topic) → Kafka → the streaming merge job → Delta.

A transfer workload keeps the sum of `amount` over two tables constant in every committed
PostgreSQL transaction (moves between rows of both tables, inserts and deletes that take
their amount from the other table). At every cut the job records, both tables read at the
cut's versions give that sum; the last cut equals PostgreSQL; and mixing the tables'
versions of two different cuts breaks the sum (so the check above could fail). Tombstones of
the deletes expire once heartbeats carry a restart_lsn past them (spark_jobs/rules/expiry.py), and
`pgcdc verify` then proves the lake at the job's newest cut equal to PostgreSQL, also when a
key deleted after verify's position L has its tombstone expired before verify reads the cut
(verify reads the tombstones at the cut's version); the job's metrics move as changes arrive.

The lake is in a bucket (S3 on moto), the store that adds most (Spark's S3A and delta-rs's
object store both read and write the cuts, tombstones and tables). The same on local disk:
cuts and expiry through the batch processor in
tests/unit/spark_jobs/test_spark_jobs_cut_batches.py and test_spark_jobs_cut_readers.py,
`pgcdc verify` over local cuts in tests/e2e/test_verify_e2e.py (the job's metrics do not
depend on the store). Without --consistent-cuts, tombstones expire by the same rule:
tests/unit/spark_jobs/test_spark_jobs_cut_batches.py runs the batch
processor both ways, and test_spark_jobs_expiry.py holds which jobs read heartbeats."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from deltalake import DeltaTable
from devstack.ports import free_port

from spark_jobs.cuts.manifest import Cut, read_cuts, tombstone_key
from spark_jobs.lake.storage import options_for
from spark_jobs.runtime.config import MergeConfig
from spark_jobs.runtime.query import start_merge
from spark_jobs.verify.online import VerifyConfig, run_verify
from spark_jobs.verify.report import exit_code, render_text
from tests.support.merge import scrape_metrics
from tests.support.producer import ProducerRun

pytestmark = pytest.mark.e2e

SCHEMA = "cuts"
ROWS, START = 30, 1000
TOTAL = 2 * ROWS * START
# Transactions of the workload, in rounds (a cut falls between rounds): three rounds give
# consecutive cuts that differ (the mixed-cuts check) at a bucket's slower batches.
TRANSACTIONS, ROUNDS = 150, 3
# The Spark path instead of delta-rs for every batch (slower; run by hand: =off).
FAST_MERGE = os.environ.get("PGCDC_CUTS_FAST_MERGE", "auto")


def _create(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        conn.execute(f"CREATE SCHEMA {SCHEMA}")
        for table in ("a", "b"):
            conn.execute(f"CREATE TABLE {SCHEMA}.{table} (id int PRIMARY KEY, amount bigint)")
            conn.execute(f"INSERT INTO {SCHEMA}.{table} SELECT g, {START} "
                         f"FROM generate_series(1, {ROWS}) g")


def _transfers(dsn: str, rng: random.Random, stop: threading.Event, done: list[int],
               cuts: Callable[[], int], transactions: int, rounds: int) -> None:
    """`transactions` transactions that each keep sum(a.amount) + sum(b.amount) unchanged, in
    `rounds` rounds; after each round, until the job recorded another cut (so the cuts fall
    between rounds however fast or slow the job is, and consecutive ones differ)."""
    next_id = ROWS + 1
    with psycopg.connect(dsn) as conn:
        while not stop.is_set() and done[0] < transactions:
            if done[0] and done[0] % (transactions // rounds) == 0:
                seen = cuts()
                while cuts() == seen and not stop.is_set():
                    time.sleep(0.2)
            src, dst = rng.sample(["a", "b"], 2)
            x = rng.randint(1, 50)
            with conn.transaction():
                (one,) = conn.execute(f"SELECT id FROM {SCHEMA}.{dst} ORDER BY random() LIMIT 1"
                                      ).fetchone() or (None,)
                kind = rng.random()
                if kind < 0.15:  # a new row in src, its amount taken from a row of dst
                    conn.execute(f"INSERT INTO {SCHEMA}.{src} VALUES (%s, %s)", (next_id, x))
                    conn.execute(f"UPDATE {SCHEMA}.{dst} SET amount = amount - %s WHERE id = %s",
                                 (x, one))
                    next_id += 1
                elif kind < 0.25:  # a row of src deleted, its amount given to a row of dst
                    row = conn.execute(f"DELETE FROM {SCHEMA}.{src} WHERE id = (SELECT id FROM "
                                       f"{SCHEMA}.{src} ORDER BY random() LIMIT 1) "
                                       "RETURNING amount").fetchone()
                    if row is not None:
                        conn.execute(f"UPDATE {SCHEMA}.{dst} SET amount = amount + %s "
                                     "WHERE id = %s", (row[0], one))
                else:  # a transfer between a row of each table
                    conn.execute(f"UPDATE {SCHEMA}.{src} SET amount = amount - %s WHERE id = "
                                 f"(SELECT id FROM {SCHEMA}.{src} ORDER BY random() LIMIT 1)",
                                 (x,))
                    conn.execute(f"UPDATE {SCHEMA}.{dst} SET amount = amount + %s WHERE id = %s",
                                 (x, one))
            done[0] += 1
            time.sleep(0.01)


def _table(path: str, version: int | None = None) -> DeltaTable:
    """delta-rs on local disk or in the bucket (settings as the job derives them)."""
    return DeltaTable(path, version=version, storage_options=options_for(path))


def _exists(path: str) -> bool:
    return DeltaTable.is_deltatable(path, storage_options=options_for(path))


def _rows(target: str, table: str, version: int | None) -> dict[int, int]:
    if version is None:
        return {}
    data = _table(f"{target}/{SCHEMA}/{table}", version).to_pyarrow_table(
        columns=["id", "amount"]).to_pylist()
    return {r["id"]: r["amount"] for r in data}


def _expired(target: str) -> list[str]:
    """The tables whose tombstones had some expired (spark_jobs/rules/expiry.py): a DELETE in the
    tombstone table's history (the workload truncates nothing)."""
    found = []
    for table in "ab":
        path = f"{target}/_pgcdc/tombstones/{SCHEMA}/{table}"
        if _exists(path) and any(h["operation"] == "DELETE" for h in _table(path).history()):
            found.append(table)
    return found


def _tombstoned(target: str, table: str, key: int) -> bool:
    """Whether the latest tombstones of `table` hold one for `key`."""
    path = f"{target}/{tombstone_key(f'{SCHEMA}/{table}')}"
    return _exists(path) and key in _table(path).to_pyarrow_table(
        columns=["id"]).column("id").to_pylist()


def _until(done: Callable[[], bool], what: str, seconds: float = 90,
           each: Callable[[], object] = lambda: None) -> None:
    deadline = time.monotonic() + seconds  # a bound on a hang, not a timing assertion
    while not done():
        assert time.monotonic() < deadline, what
        each()
        time.sleep(0.5)


class DeleteExpiredBeforeTheRead:
    """`pgcdc verify`'s progress callback: once verify has its PostgreSQL position L, a row of
    a is deleted (its amount moved to a row of b: every cut still sums to TOTAL), and verify
    goes on only when that delete is in the lake and its tombstone has expired (CHECKPOINTs
    move restart_lsn past it). Verify then reads a cut that holds the delete, while the
    tombstones' latest version no longer shows it: read there, the key looks missing."""

    def __init__(self, dsn: str, target: str, source: dict[str, dict[int, int]]) -> None:
        self.dsn, self.target, self.source = dsn, target, source
        self.key: int | None = None

    def __call__(self, line: str) -> None:
        if not line.startswith("PostgreSQL snapshot at"):
            return
        self.key, one = min(self.source["a"]), min(self.source["b"])
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            with conn.transaction():
                conn.execute(f"DELETE FROM {SCHEMA}.a WHERE id = %s", (self.key,))
                conn.execute(f"UPDATE {SCHEMA}.b SET amount = amount + %s WHERE id = %s",
                             (self.source["a"][self.key], one))
            self.source["b"][one] += self.source["a"].pop(self.key)
            key = self.key
            _until(lambda: key not in _rows(self.target, "a", _table(
                f"{self.target}/{SCHEMA}/a").version()), "the delete was not merged")
            _until(lambda: not _tombstoned(self.target, "a", key),
                   "the delete's tombstone did not expire",
                   each=lambda: conn.execute("CHECKPOINT"))


def _total(target: str, versions: dict[str, int | None]) -> int:
    return sum(sum(_rows(target, t, versions.get(f"{SCHEMA}/{t}")).values()) for t in "ab")


@pytest.fixture
def producer(pg18: Any, kafka: Any, registry: Any, tmp_path: Path) -> Iterator[ProducerRun]:
    run = ProducerRun(pg18.dsn, kafka.bootstrap, registry.url, f"{SCHEMA}.*",
                      extra=["--heartbeat-interval-s", "0.3", "--topic-partitions", "3"])
    yield run
    run.drop()


def test_every_cut_shows_whole_transactions(pg18: Any, kafka: Any, registry: Any,
                                             tmp_path: Path, producer: ProducerRun,
                                             s3a_spark: Any, s3_bucket: str) -> None:
    """With the lake in a bucket (S3 on moto; Spark's S3A settings on the session, delta-rs's
    derived from them): cuts, tombstone expiry, verify and the job's metrics."""
    spark = s3a_spark
    target = f"s3a://{s3_bucket}/lake"
    seed = int(os.environ.get("PGCDC_CUTS_SEED") or random.randrange(2**31))
    print(f"\ncuts seed: {seed} (replay with PGCDC_CUTS_SEED={seed})")
    _create(pg18.dsn)
    # initial snapshot of both tables, then streaming with heartbeats
    producer.start(tmp_path, wait=False)
    port = free_port()
    config = MergeConfig(bootstrap_servers=kafka.bootstrap, schema_registry_url=registry.url,
                         target=target, topic_prefix=producer.prefix, trigger="1s",
                         consistent_cuts=True, fast_merge=FAST_MERGE, maintenance_every=5,
                         metrics_port=port, metrics_host="127.0.0.1")
    query, processor = start_merge(spark, config)
    stop, done = threading.Event(), [0]
    transactions, rounds = TRANSACTIONS, ROUNDS
    worker = threading.Thread(target=_transfers, args=(pg18.dsn, random.Random(seed), stop,
                                                       done, lambda: processor.stats.cuts,
                                                       transactions, rounds))
    try:
        worker.start()
        deadline = time.monotonic() + 360  # a bound on a hang (a loaded machine), not a timing
        # assertion
        early: dict[str, float] = {}
        while processor.stats.cuts < rounds - 1 or worker.is_alive():
            if not early and processor.stats.cuts:
                early = scrape_metrics(port)
            assert query.exception() is None, f"seed {seed}: {query.exception()}"
            assert time.monotonic() < deadline, f"seed {seed}: {processor.stats.cuts} cut(s)"
            time.sleep(0.5)
        stop.set()
        worker.join()
        assert done[0] == transactions, f"seed {seed}: the workload failed"
        with psycopg.connect(pg18.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'").fetchone()
            assert row is not None
            end = int(row[0])
            source = {t: dict(conn.execute(f"SELECT id, amount FROM {SCHEMA}.{t}").fetchall())
                      for t in "ab"}
        # Until a cut covers every workload transaction (heartbeats keep coming).
        while not any(c.lsn + 1 >= end for c in read_cuts(target)):
            assert query.exception() is None, f"seed {seed}: {query.exception()}"
            assert time.monotonic() < deadline + 60, f"seed {seed}: no cut reached {end}"
            time.sleep(0.5)
        # the job's metrics moved as the changes arrived (all of them merged now)
        late = scrape_metrics(port)
        assert late["pgcdc_merge_batches_total"] > early["pgcdc_merge_batches_total"]
        for t in ("a", "b"):
            events = f'pgcdc_merge_events_total{{table="{SCHEMA}/{t}"}}'
            assert late[events] > early.get(events, 0), (t, early, late)
            assert late[f'pgcdc_merge_table_lag_seconds{{table="{SCHEMA}/{t}"}}'] == 0
            applied = f'pgcdc_merge_table_applied_lsn{{table="{SCHEMA}/{t}"}}'
            assert late[applied] > early.get(applied, 0), (t, early, late)
            stamp = ('pgcdc_merge_table_applied_source_timestamp_seconds'
                     f'{{table="{SCHEMA}/{t}"}}')
            assert 0 < time.time() - late[stamp] < 300
        assert 0 <= late["pgcdc_merge_heartbeat_age_seconds"] < 120
        assert late["pgcdc_merge_cut_lsn"] > early.get("pgcdc_merge_cut_lsn", 0)
        assert 0 < time.time() - late["pgcdc_merge_cut_source_timestamp_seconds"] < 300
        assert late["pgcdc_merge_batch_seconds_count"] == late["pgcdc_merge_batches_total"]
        for phase in ("read", "decode", "merge", "commit"):  # observed once per batch
            sample = f'pgcdc_merge_batch_phase_seconds_count{{phase="{phase}"}}'
            # (a scrape may fall between a batch's count and the end of its phases)
            assert late[sample] > early[sample], phase
        for phase in ("read", "merge", "commit"):  # each batch reads, merges, stores its cut
            sample = f'pgcdc_merge_batch_phase_seconds_sum{{phase="{phase}"}}'
            assert late[sample] > early[sample], phase
        assert sum(v for k, v in late.items()
                   if k.startswith("pgcdc_merge_table_batches_total")) > 0
        # Tombstone expiry: a checkpoint logs the running transactions, so the slot's
        # restart_lsn moves past the workload's deletes, and the heartbeats carry it; the
        # checks below then hold with tombstones gone.
        with psycopg.connect(pg18.dsn, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
        expiring = time.monotonic()
        while not _expired(target):
            assert query.exception() is None, f"seed {seed}: {query.exception()}"
            assert time.monotonic() < deadline + 90, f"seed {seed}: no tombstone expired"
            time.sleep(0.5)
        print(f"tombstones of {_expired(target)} expired after {time.monotonic() - expiring:.1f} s")
        # `pgcdc verify` against the job's own cuts: a snapshot of PostgreSQL, the first cut
        # the running job records at or after it, every row compared; a delete after the
        # snapshot, expired before verify reads the cut. The cut usually holds the delete; in
        # the rare case it was recorded between the snapshot and the delete, again.
        for _attempt in range(3):
            at_l = len(source["a"]) + len(source["b"])
            deleting = DeleteExpiredBeforeTheRead(pg18.dsn, target, source)
            report = run_verify(spark, VerifyConfig(
                pg18.dsn, target, tables=[f"{SCHEMA}.*"], poll_s=0.5, timeout_s=120,
                progress=deleting))
            read = next(c for c in read_cuts(target) if c.lsn_text == report.cut_lsn)
            if deleting.key not in _rows(target, "a", read.versions[f"{SCHEMA}/a"]):
                break
        else:
            pytest.fail(f"seed {seed}: no verify read a cut holding its delete")
    finally:
        stop.set()
        query.stop()
        processor.close()
        if worker.is_alive():
            worker.join()

    cuts: list[Cut] = read_cuts(target)
    assert sum(source["a"].values()) + sum(source["b"].values()) == TOTAL
    broken = [(c.lsn_text, _total(target, dict(c.versions))) for c in cuts
              if _total(target, dict(c.versions)) != TOTAL]
    assert not broken, f"seed {seed}: cuts whose tables do not sum to {TOTAL}: {broken}"
    last = cuts[-1]
    assert {t: _rows(target, t, last.versions.get(f"{SCHEMA}/{t}")) for t in "ab"} == source, \
        f"seed {seed}: the last cut differs from PostgreSQL"
    # Both tables' versions not taken from one cut: table a at a cut, b at the next one.
    mixed = [_total(target, {f"{SCHEMA}/a": x.versions.get(f"{SCHEMA}/a"),
                             f"{SCHEMA}/b": y.versions.get(f"{SCHEMA}/b")})
             for x, y in zip(cuts, cuts[1:], strict=False)]
    assert any(total != TOTAL for total in mixed), f"seed {seed}: {mixed}"
    assert len({c.batch_id for c in cuts}) == len(cuts)
    assert all(c.source_ts_ms is not None for c in cuts)
    assert report.clean and exit_code(report) == 0, "\n".join(render_text(report))
    # the deleted key and the row its amount went to changed after L: skipped
    assert sum(t.skipped for t in report.tables) == 2
    assert sum(t.verified for t in report.tables) == at_l - 2
    print(f"{len(cuts)} cuts, {done[0]} transactions, fast path: {processor.stats.fast_tables}")

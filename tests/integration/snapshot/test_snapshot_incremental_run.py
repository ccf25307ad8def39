"""`pgcdc snapshot`: a table re-published in key-ordered chunks while the producer streams a
busy workload (PostgreSQL 15/18, Kafka, registry, Spark): no stale row wins, in Kafka offset
order or in (commit_lsn, txn_index) order or in the merge job's Delta table; a killed producer
resumes at its last chunk; a table created while streaming arrives with all its rows."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka.admin import AdminClient

from connector.snapshot.incremental.channel import signal_topic_name
from connector.snapshot.incremental.signal_topic import SignalTopic
from spark_jobs.runtime.config import MergeConfig
from spark_jobs.runtime.query import run_merge
from spark_jobs.verify.compare import compare, lake_rows, pg_rows
from tests.support.producer import current_lsn
from tests.support.snapshot import final_state, frozen, read_events, table_rows

PGCDC = str(Path(sys.executable).parent / "pgcdc")
ROWS = 20_000


def _busy_writer(dsn: str, table: str, stop: threading.Event) -> None:
    """Random inserts, updates (some of the key) and deletes until `stop`."""
    rng = random.Random(7)
    next_id = ROWS + 1
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not stop.is_set():
            with conn.transaction():
                for _ in range(5):
                    pick = rng.randrange(1, next_id)
                    action = rng.random()
                    if action < 0.5:
                        conn.execute(f"UPDATE {table} SET v = v + 1, note = %s WHERE id = %s",
                                     (f"u{next_id}", pick))
                    elif action < 0.6:
                        conn.execute(f"UPDATE {table} SET id = %s WHERE id = %s",
                                     (next_id, pick))
                        next_id += 1
                    elif action < 0.8:
                        conn.execute(f"DELETE FROM {table} WHERE id = %s", (pick,))
                    else:
                        conn.execute(f"INSERT INTO {table} VALUES (%s, 0, 'new')", (next_id,))
                        next_id += 1
            time.sleep(0.001)


def _request(run: Any, table: str, *more: str) -> int:
    out = subprocess.run([PGCDC, "snapshot", "--dsn", run.dsn, "--slot", run.slot,
                          "--publication", f"pub_{run.tag}", "--tables", f"public.{table}",
                          *more], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[2])


def _request_state(dsn: str, request: int) -> tuple[str, int, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT state, chunks, rows FROM public.pgcdc_signal WHERE id = %s",
                           (request,)).fetchone()
    assert row is not None
    return row[0], row[1], row[2]


def _resume_key(dsn: str, request: int) -> int:
    """The key after which the request's next chunk starts: every chunk up to it is in Kafka
    (the progress the snapshot recorded; one table, an int key)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT table_index, last_key FROM public.pgcdc_signal "
                           "WHERE id = %s", (request,)).fetchone()
    assert row is not None and row[0] == 0 and row[1] is not None, row
    return int(row[1][0])


def _wait_state(run: Any, request: int, done: Any, timeout: float = 240.0) -> tuple[str, int, int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = _request_state(run.dsn, request)
        if done(state):
            return state
        assert run.proc.poll() is None, run.output()
        time.sleep(0.2)
    raise AssertionError(f"request {request} still {state} after {timeout} s: {run.output()}")


def _fold_in_offset_order(events: list[Any]) -> dict[int, dict[str, Any]]:
    state: dict[int, dict[str, Any]] = {}
    for event in events:  # one partition: read in offset order
        value = event.value
        if value["op"] == "d":
            state.pop(value["before"]["id"], None)
        elif value["op"] == "t":
            state.clear()
        else:
            state[value["after"]["id"]] = value["after"]
    return state


def test_busy_table_resnapshotted_with_a_kill_midway(postgres, producer_run, log_dir, spark,
                                                     tmp_path) -> None:
    run = producer_run("public.incbusy_*", "--snapshot", "never",
                       "--incremental-chunk-rows", "500")
    table = f"incbusy_{run.tag}"
    added = f"incbusy_{run.tag}_added"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v int, note text)")
        conn.execute(f"INSERT INTO {table} SELECT i, 0, 'old' FROM generate_series(1, {ROWS}) i")
    run.start(log_dir)
    stop = threading.Event()
    writer = threading.Thread(target=_busy_writer, args=(postgres.dsn, table, stop))
    writer.start()
    try:
        request = _request(run, table)
        _wait_state(run, request, lambda s: s[1] >= 8)  # some chunks in Kafka
        run.stop(signal.SIGKILL)
        before_kill = _request_state(run.dsn, request)
        assert before_kill[0] == "running"
        finished_up_to = _resume_key(run.dsn, request)
        run.start(log_dir)
        with psycopg.connect(postgres.dsn, autocommit=True) as conn:  # a table comes along
            conn.execute(f"CREATE TABLE {added} (id int PRIMARY KEY, v int, note text)")
            conn.execute(f"INSERT INTO {added} SELECT i, i, 'early' "
                         "FROM generate_series(1, 2000) i")
        state, chunks, _ = _wait_state(run, request, lambda s: s[0] != "running")
        assert state == "done", run.output()
        with psycopg.connect(postgres.dsn, autocommit=True) as conn:
            deadline = time.monotonic() + 120
            while conn.execute("SELECT count(*) FROM public.pgcdc_signal WHERE slot = %s AND "
                               "state = 'done'", (run.slot,)).fetchone() != (2,):
                assert time.monotonic() < deadline, run.output()
                time.sleep(0.2)
            conn.execute(f"UPDATE {added} SET note = 'late' WHERE id % 3 = 0")
    finally:
        stop.set()
        writer.join()
    run.wait_confirmed(current_lsn(postgres.dsn), timeout=120)

    expected = table_rows(postgres.dsn, f"SELECT id, v, note FROM {table}")
    events = read_events(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                         min_count=1)
    reads = [e for e in events if e.value["op"] == "r"]
    assert all(e.value["source"]["snapshot"] == "incremental" for e in reads)
    # The restart resumed after the chunks finished before the kill and read none of them
    # again: each of their keys was read once (new and re-keyed rows get keys above ROWS).
    finished = Counter(e.value["after"]["id"] for e in reads
                       if e.value["after"]["id"] <= finished_up_to)
    assert len(finished) > ROWS // 10 and max(finished.values()) == 1, finished.most_common(3)
    assert _fold_in_offset_order(events) == expected
    assert final_state([e.value for e in events]) == expected
    assert chunks >= before_kill[1]

    # The merge job orders by (commit_lsn, txn_index) too: its Delta table is PostgreSQL's.
    stats = run_merge(spark, MergeConfig(bootstrap_servers=run.bootstrap,
                                         schema_registry_url=run.registry_url,
                                         target=str(tmp_path), topic_prefix=run.prefix,
                                         trigger="available-now"))
    assert stats.dead_letters == 0
    for name in (table, added):
        result = compare(f"public.{name}", pg_rows(postgres.dsn, "public", name),
                         lake_rows(spark, str(tmp_path / "public" / name), ["id"]))
        assert result.equal, result.differences


def test_a_table_created_while_streaming_is_published_with_all_its_rows(
        postgres, producer_run, log_dir) -> None:
    run = producer_run("public.incnew_*", "--snapshot", "never")
    first = f"incnew_{run.tag}_a"
    later = f"incnew_{run.tag}_b"
    renamed = f"incnew_{run.tag}_c"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {first} (id int PRIMARY KEY, v int, note text)")
    run.start(log_dir)
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        # Created and filled in one go, before the producer can notice it: these rows are
        # not in the publication when written, only the incremental snapshot can bring them.
        with conn.transaction():
            conn.execute(f"CREATE TABLE {later} (id int PRIMARY KEY, v int, note text)")
            conn.execute(f"INSERT INTO {later} SELECT i, i, 'before' "
                         "FROM generate_series(1, 3000) i")
        deadline = time.monotonic() + 60
        while "now published" not in run.output() or later not in run.output():
            assert time.monotonic() < deadline, run.output()
            time.sleep(0.2)
        conn.execute(f"UPDATE {later} SET note = 'after' WHERE id % 10 = 0")
        conn.execute(f"DELETE FROM {later} WHERE id % 7 = 0")
        conn.execute(f"INSERT INTO {later} VALUES (5000, 0, 'new')")
        conn.execute(f"DROP TABLE {first}")
        conn.execute(f"CREATE TABLE {renamed} (id int PRIMARY KEY)")
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        deadline = time.monotonic() + 120
        while conn.execute("SELECT 1 FROM public.pgcdc_signal WHERE slot = %s AND "
                           "state = 'done'", (run.slot,)).fetchone() is None:
            assert time.monotonic() < deadline, run.output()
            time.sleep(0.2)
    run.wait_confirmed(current_lsn(postgres.dsn), timeout=120)
    deadline = time.monotonic() + 30
    while "no longer published" not in run.output():
        assert time.monotonic() < deadline, run.output()
        time.sleep(0.2)
    assert first in run.output().split("no longer published")[0].splitlines()[-1]
    # A table renamed out of the patterns leaves the publication: its changes stop.
    deadline = time.monotonic() + 30
    while f"{renamed} is now published" not in run.output():
        assert time.monotonic() < deadline, run.output()
        time.sleep(0.2)
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE {renamed} RENAME TO elsewhere_{run.tag}")
        deadline = time.monotonic() + 30
        while conn.execute("SELECT 1 FROM pg_publication_tables WHERE pubname = %s AND "
                           "tablename = %s", (f"pub_{run.tag}", f"elsewhere_{run.tag}")
                           ).fetchone() is not None:
            assert time.monotonic() < deadline, run.output()
            time.sleep(0.2)

    expected = table_rows(postgres.dsn, f"SELECT id, v, note FROM {later}")
    events = read_events(run.bootstrap, run.registry_url, f"{run.prefix}.public.{later}",
                         min_count=len(expected))
    assert _fold_in_offset_order(events) == expected
    assert final_state([e.value for e in events]) == expected
    assert sum(e.value["op"] == "r" for e in events) <= 3000


def _in_position_order(events: list[Any]) -> list[dict[str, Any]]:
    return sorted((e.value for e in events),
                  key=lambda v: (v["source"]["commit_lsn"], v["source"]["txn_index"]))


def _pgcdc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PGCDC, *args], capture_output=True, text=True, timeout=60)


def test_refusals_are_one_line_and_streaming_goes_on(postgres, producer_run, log_dir) -> None:
    run = producer_run("public.increfuse_*", "--snapshot", "never")
    keyless = f"increfuse_{run.tag}_nokey"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {keyless} (v int)")
        # Insert-only by choice (--keyless-tables refuses DEFAULT without a primary key).
        conn.execute(f"ALTER TABLE {keyless} REPLICA IDENTITY NOTHING")
        conn.execute(f"INSERT INTO {keyless} VALUES (0)")  # before the stream: not in it
        conn.execute(f"CREATE TABLE other_{run.tag} (id int PRIMARY KEY)")
    run.start(log_dir)
    common = ["--dsn", run.dsn, "--slot", run.slot, "--publication", f"pub_{run.tag}"]

    refused = _pgcdc("snapshot", *common, "--tables", f"public.other_{run.tag}")
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.strip().splitlines() == [
        f"pgcdc snapshot: not in publication pub_{run.tag}: public.other_{run.tag}"]
    # Over Kafka under a prefix no producer publishes under (--topic-prefix forgotten, e.g. on
    # a standby): no producer would read the request, so it is refused and nothing is sent.
    stray = f"{run.prefix}x"
    over_kafka = [*common, "--signal-channel", "kafka", "--bootstrap-servers", run.bootstrap,
                  "--topic-prefix", stray]
    for refused in (_pgcdc("snapshot", *over_kafka, "--tables", f"public.{keyless}"),
                    _pgcdc("snapshot", *over_kafka, "--cancel")):
        assert refused.returncode == 1 and refused.stdout == "", refused
        assert refused.stderr.strip().splitlines() == [
            f"pgcdc snapshot: no producer publishes under topic prefix {stray!r} (Kafka has "
            f"no {stray}.offsets nor {stray}.heartbeat), so none would read {stray}.signal: "
            "give the producer's --topic-prefix"], refused.stderr
    assert signal_topic_name(stray) not in AdminClient(
        {"bootstrap.servers": run.bootstrap}).list_topics(timeout=10).topics
    # (the producer's own prefix is accepted: test_an_open_transaction_delays_...)

    # Without a key: read whole (connector/snapshot/incremental/whole.py) over the signal
    # table; over Kafka (no write on the source: neither its lock nor its marker) refused.
    request = _request(run, keyless)
    _wait_state(run, request, lambda s: s[0] == "done", timeout=60)
    over_kafka = _request(run, keyless, "--signal-channel", "kafka", "--bootstrap-servers",
                          run.bootstrap, "--topic-prefix", run.prefix)
    topic = SignalTopic({"bootstrap.servers": run.bootstrap}, signal_topic_name(run.prefix))
    deadline = time.monotonic() + 60
    try:
        while not ((found := topic.log.get(over_kafka)) and found.state == "failed"):
            assert run.proc.poll() is None and time.monotonic() < deadline, run.output()
            time.sleep(0.2)
            topic.catch_up(10)
    finally:
        topic.close()
    assert "has no primary key" in (found.message or ""), found
    assert "signal table" in (found.message or ""), found

    with psycopg.connect(postgres.dsn, autocommit=True) as conn:  # the stream goes on
        conn.execute(f"INSERT INTO {keyless} VALUES (1)")
    events = read_events(run.bootstrap, run.registry_url, f"{run.prefix}.public.{keyless}",
                         min_count=2)
    values = _in_position_order(events)  # (null keys: any partition)
    ops = [v["op"] for v in values]
    assert set(ops[:-2]) == {"t"} and ops[-2:] == ["r", "c"], ops  # a truncate per partition
    assert [v["after"]["v"] for v in values[-2:]] == [0, 1]
    assert run.proc.poll() is None

    # Paused, the producer cannot run the request before the cancel reaches it: the cancel
    # alone decides the state, which must then stay cancelled once the producer resumes.
    run.proc.send_signal(signal.SIGSTOP)
    try:
        second = _request(run, keyless)
        cancelled = _pgcdc("snapshot", *common, "--cancel")
    finally:
        run.proc.send_signal(signal.SIGCONT)
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"slot {run.slot}: 1 request(s) cancelled" in cancelled.stdout
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"INSERT INTO {keyless} VALUES (2)")
    events = read_events(run.bootstrap, run.registry_url, f"{run.prefix}.public.{keyless}",
                         min_count=3)
    assert [v["op"] for v in _in_position_order(events)][-3:] == ["r", "c", "c"]
    assert _request_state(run.dsn, second)[0] == "cancelled"
    assert run.proc.poll() is None, run.output()


def test_partitioned_tables_are_left_alone(postgres, producer_run, log_dir) -> None:
    """The publication names the partitioned table while pg_publication_tables lists its
    partitions (leaf by leaf: publish_via_partition_root off): the watcher must neither re-add
    the one nor drop the others."""
    run = producer_run("public.incpart_*", "--snapshot", "never",
                       "--no-publish-via-partition-root")
    parent = f"incpart_{run.tag}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {parent} (id int PRIMARY KEY, v int) "
                     "PARTITION BY RANGE (id)")
        conn.execute(f"CREATE TABLE {parent}_low PARTITION OF {parent} "
                     "FOR VALUES FROM (0) TO (100)")
    run.start(log_dir)
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {parent}_high PARTITION OF {parent} "
                     "FOR VALUES FROM (100) TO (200)")
        # The watcher's round that sees the new partition logs it (pg_publication_tables lists
        # partitions): proof that it ran after the partition existed, where a fixed sleep
        # passed as well when it never ran.
        deadline = time.monotonic() + 30
        while f"{parent}_high is now published" not in run.output():
            assert time.monotonic() < deadline and run.proc.poll() is None, run.output()
            time.sleep(0.2)
        conn.execute(f"INSERT INTO {parent} VALUES (1, 1), (150, 2)")
    events = read_events(run.bootstrap, run.registry_url, f"{run.prefix}.public.{parent}_low",
                         min_count=1)
    assert [e.value["op"] for e in events] == ["c"]
    assert run.proc.poll() is None, run.output()
    assert "added to publication" not in run.output()


def test_an_open_transaction_delays_the_snapshot_not_the_stream(postgres, producer_run,
                                                                log_dir) -> None:
    run = producer_run("public.incidle_*", "--snapshot", "never")
    table = f"incidle_{run.tag}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v int)")
        conn.execute(f"INSERT INTO {table} SELECT i, 0 FROM generate_series(1, 100) i")
    run.start(log_dir)
    idle = psycopg.connect(postgres.dsn)  # idle in transaction, holding an xid
    try:
        idle.execute(f"UPDATE {table} SET v = -1 WHERE id = 7")
        request = _request(run, table)
        with psycopg.connect(postgres.dsn, autocommit=True) as conn:
            for i in range(101, 111):  # streamed while the snapshot waits
                conn.execute(f"INSERT INTO {table} VALUES ({i}, 1)")
        events = read_events(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                             min_count=10)
        assert [e.value["op"] for e in events] == ["c"] * 10
        time.sleep(2)
        assert _request_state(run.dsn, request)[0] == "running"  # still waiting for `idle`
        idle.commit()
    finally:
        idle.close()
    _wait_state(run, request, lambda s: s[0] == "done", timeout=60)
    # Again, requested over Kafka: nothing written to PostgreSQL, the chunk read-only on this
    # primary (pg_current_snapshot(), the WAL insert position), and closed on an idle server.
    over_kafka = _request(run, table, "--signal-channel", "kafka", "--bootstrap-servers",
                          run.bootstrap, "--topic-prefix", run.prefix)
    assert _request_state(run.dsn, request)[0] == "done"  # the table holds only the first
    topic = SignalTopic({"bootstrap.servers": run.bootstrap}, signal_topic_name(run.prefix))
    deadline = time.monotonic() + 60
    try:
        while not ((found := topic.log.get(over_kafka)) and found.state == "done"):
            assert run.proc.poll() is None and time.monotonic() < deadline, run.output()
            time.sleep(0.2)
            topic.catch_up(10)
    finally:
        topic.close()
    assert "read-only chunks" in run.output()
    # pgcdc status lists it, read from the topic (the signal table's first request too).
    status = _pgcdc("status", "--dsn", run.dsn, "--slot", run.slot, "--publication",
                    f"pub_{run.tag}", "--bootstrap-servers", run.bootstrap, "--topic-prefix",
                    run.prefix)
    assert f"incremental snapshot {over_kafka} (over {run.prefix}.signal): done, " \
        f"public.{table}; 1 chunk(s), 110 rows" in status.stdout, status.stdout + status.stderr
    assert f"incremental snapshot {request}: done" in status.stdout
    run.wait_confirmed(current_lsn(postgres.dsn), timeout=60)
    expected = table_rows(postgres.dsn, f"SELECT id, v FROM {table}")
    events = read_events(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                         min_count=121)
    # No write meanwhile: the second snapshot's rows are the topic's last, every row once.
    tail = [e.value for e in events[-110:]]
    assert [(v["op"], v["source"]["snapshot"]) for v in tail] == [("r", "incremental")] * 110
    assert sorted(v["after"]["id"] for v in tail) == list(range(1, 111))
    assert _fold_in_offset_order(events) == expected
    assert final_state([e.value for e in events]) == expected
    assert expected[7]["v"] == -1


def test_a_request_is_done_only_once_kafka_has_its_last_chunk(postgres, kafka, producer_run,
                                                               log_dir) -> None:
    """Issue 24: a one-chunk request was marked done while the broker had acknowledged nothing;
    a producer killed then lost the chunk for good. With the broker frozen, the request stays
    running; killed and restarted, the producer reads the chunk again and every row arrives."""
    run = producer_run("public.inclast_*", "--snapshot", "never")
    table = f"inclast_{run.tag}"
    topic = f"{run.prefix}.public.{table}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
    run.start(log_dir)
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:  # the topic and schema exist
        conn.execute(f"INSERT INTO {table} SELECT i, 'row' || i FROM generate_series(1, 300) i")
    read_events(run.bootstrap, run.registry_url, topic, min_count=300)

    with frozen(kafka):
        request = _request(run, table)
        # A bound on a hang, not a timing assertion: with the broker frozen, each metadata
        # request the producer makes (the heartbeat topic, the signal topic) times out first.
        deadline = time.monotonic() + 150
        while (state := _request_state(run.dsn, request))[0] != "done" and \
                "last chunk sent" not in run.output():
            assert time.monotonic() < deadline, run.output()
            assert run.proc.poll() is None, run.output()
            time.sleep(0.2)
        assert state[0] == "running", f"marked {state} while Kafka acknowledged nothing"
        run.stop(signal.SIGKILL)
    assert _request_state(run.dsn, request)[0] == "running"

    run.start(log_dir)
    state = _wait_state(run, request, lambda s: s[0] != "running", timeout=120)
    assert state == ("done", 1, 300), run.output()
    status = _pgcdc("status", "--dsn", run.dsn, "--slot", run.slot,
                    "--publication", f"pub_{run.tag}")
    assert f"incremental snapshot {request}: done, public.{table}; 1 chunk(s), 300 rows" \
        in status.stdout, status.stdout + status.stderr
    events = read_events(run.bootstrap, run.registry_url, topic, min_count=600)
    reads = [e for e in events if e.value["op"] == "r"]
    assert {e.value["after"]["id"] for e in reads} == set(range(1, 301))
    assert all(e.value["source"]["snapshot"] == "incremental" for e in reads)

"""Issue 37, parts 1 and 3, on PostgreSQL 15 and 18: what leaves the database.

One producer run per server: `table_settings` gives a table a column list and a row filter in
the publication pgcdc creates; the initial snapshot, the stream (an UPDATE moving a row out of
the filter arrives as a delete, one moving a row in as a create) and an incremental snapshot
all carry exactly the published columns and rows, so a consumer's latest-per-key rows equal
``SELECT cols FROM t WHERE filter``. Restarted with a wider filter, pgcdc changes the
publication and re-syncs the rows that entered it. On 18, `publish_generated_columns` publishes
a stored generated column in both the snapshot and the stream; on 15 it is refused. The
refusals (a column list without the key, a filter outside the replica identity) are made
before anything is created.

Part 2 in the same run: masks on a user's publication (create_publication false) are checked
against what it sends; the statements the refusal names make them hold. Table ``people`` has a
hashed text key, a hashed, a nulled and a truncated column, and an excluded one; its rows in
the initial snapshot, the stream (insert, update, key change, delete) and the incremental
snapshot decode to the masked projection, and a byte scan finds none of the clear values
(distinctive markers), nor the salt, in any topic of the run (table, offsets, heartbeat...
topics), the registry's schemas, the producer's logs or the CLI's output. Table ``typed`` hashes
a column of each type whose text is not ``col::text`` (boolean, char(n), inet) or depends on a
session setting (timestamptz, date, interval, float8, bytea), and numeric and text, in a
database whose defaults print them otherwise (``ALTER DATABASE ... SET`` TimeZone, DateStyle,
IntervalStyle, extra_float_digits, bytea_output): in the initial snapshot, the stream and the
incremental snapshot, each published hash is what the SQL recipe of docs/publishing.md
(Reproducing a hash) computes, with pgcrypto where the server has it (15; the embedded 18 has
no contrib: there the recipe's text, HMAC'd here).

Part 4 in the same run: a range-partitioned table, published through its root (the default of
a publication pgcdc creates), has one topic that folds to ``SELECT * FROM root`` through the
initial snapshot, inserts into several partitions, a partition created and filled later, and a
filled table ATTACHed (its rows arrive by the incremental snapshot the table watcher queues).
With ``detach_deletes`` (refused in one line for a role that is not a superuser until a
superuser ran the SQL `pgcdc grants --detach-deletes-sql` prints), a filled partition DETACHed
is a delete of each of its keys in the root's topic, at the DETACH's position: a key
re-inserted through the DEFAULT partition in the same transaction, after the DETACH, survives.
That DETACH comes first, before any change of the root in the session, so the root's Relation
is read from the catalog. The detached table, matching --tables, becomes a table of its own.
No per-partition topic appears before that. Restarted with ``publish_via_partition_root:
false``, the publication is altered and each partition is re-read into its own topic.

End to end on 18 (the run with every part): the merge job (in-process, available-now, local
disk) builds from the run's topics one Delta table per table, each equal to the projection
computed here from PostgreSQL's clear rows: ``SELECT <published columns> FROM t WHERE
<filter>`` with the masks applied in Python (HMAC-SHA-256 with the salt), the excluded column
absent, the hashed key as the merge key, the generated column's values, and one table for the
partitioned root."""

from __future__ import annotations

import base64
import hashlib
import hmac
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from connector.errors import ConfigError
from connector.replication import ReplicationAdmin
from connector.replication.detach_trigger import ensure_detach_trigger
from connector.replication.published import parse_table_settings
from spark_jobs.rules.names import METADATA_COLUMNS
from spark_jobs.runtime.config import MergeConfig
from spark_jobs.runtime.query import run_merge
from tests.support.cdc_checks import Record, read_records
from tests.support.databases import empty_database
from tests.support.producer import PGCDC

pytestmark = pytest.mark.integration

COLUMNS = ["id", "region", "total"]  # of orders (id, region, total, secret)
SALT = "SALTmk-4e1b9f"
MASKS = {"ref": "hash", "email": "hash", "phone": None, "name": {"truncate": 3},
         "ssn": "exclude"}
# Every clear value of people's masked columns carries a marker no mask output can contain.
MARKERS = (b"MKref", b"MKmail", b"MKphone", b"MKname", b"MKssn", SALT.encode())


def _hash(text: str) -> str:
    return base64.b64encode(hmac.new(SALT.encode(), text.encode(), hashlib.sha256).digest()
                            ).decode()


# typed's hashed columns: one of each type whose text is not col::text, or depends on a setting.
TYPED = ["b", "c", "ip", "ts", "d", "iv", "f", "by", "n", "t"]
# docs/publishing.md, Reproducing a hash: the session the recipe runs in.
RECIPE_SETTINGS = ("SET TimeZone = 'UTC'", "SET DateStyle = 'ISO'",
                   "SET IntervalStyle = 'iso_8601'", "SET extra_float_digits = 3",
                   "SET bytea_output = 'hex'")
# The database's own defaults print those types otherwise: pgcdc must pin its sessions.
DATABASE_DEFAULTS = {"TimeZone": "Asia/Kolkata", "DateStyle": "SQL, DMY",
                     "IntervalStyle": "postgres_verbose", "extra_float_digits": "0",
                     "bytea_output": "escape"}


def _typed(dsn: str, cast: str = "format('%s', {c})") -> list[tuple[Any, ...]]:
    """typed's rows as the recipe hashes them (`cast`: the text hashed), sorted: pgcrypto's
    hmac in SQL where the server has it, else the recipe's text HMAC'd here."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for setting in RECIPE_SETTINGS:
            conn.execute(setting)  # type: ignore[arg-type]
        pgcrypto = bool(conn.execute("SELECT count(*) FROM pg_available_extensions"
                                     " WHERE name = 'pgcrypto'").fetchone()[0])  # type: ignore
        if pgcrypto:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pgcrypto")
            hashed = f"encode(hmac({cast}, '{SALT}', 'sha256'), 'base64')"
        else:
            hashed = cast
        query = "SELECT id, " + ", ".join(
            f"CASE WHEN {c} IS NOT NULL THEN {hashed.format(c=c)} END" for c in TYPED) + \
            " FROM typed"
        rows = conn.execute(query).fetchall()  # type: ignore[arg-type]
    if not pgcrypto:
        rows = [(row[0], *(None if v is None else _hash(v) for v in row[1:])) for row in rows]
    return sorted(rows)


def _people(dsn: str) -> list[tuple[Any, ...]]:
    """people's masked projection, computed here from the clear rows."""
    return sorted((_hash(ref), None if email is None else _hash(email), None,
                   None if name is None else name[:3], note)
                  for ref, email, name, note in _rows(dsn, "SELECT ref, email, name, note"
                                                          " FROM people"))


def _people_converges(run: Any, dsn: str) -> list[Record]:
    deadline = time.monotonic() + 90
    while True:
        records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.people",
                               min_count=1, timeout=90)
        if _live(records) == _people(dsn):
            return records
        assert time.monotonic() < deadline, (_live(records), _people(dsn))
        time.sleep(0.5)


def _raw_topics(bootstrap: str, prefix: str) -> dict[str, bytes]:
    """Every byte (keys, values, headers) of every topic named `prefix`.*, read to its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"scan-{prefix}",
                        "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    out: dict[str, bytes] = {}
    try:
        topics = [t for t in consumer.list_topics(timeout=10).topics if t.startswith(prefix + ".")]
        for topic in topics:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            chunks: list[bytes] = []
            for p in meta.partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                consumer.assign([TopicPartition(topic, p, low)])
                position = low
                while position < high:
                    msg = consumer.poll(5)
                    assert msg is not None, f"{topic}[{p}] stopped at {position} of {high}"
                    if msg.error() is not None:
                        continue
                    chunks += [msg.key() or b"", msg.value() or b"",
                               *(v or b"" for _, v in msg.headers() or [])]
                    position = msg.offset() + 1
            out[topic] = b"".join(chunks)
    finally:
        consumer.close()
    return out


def _registry_text(url: str, prefix: str) -> str:
    """Every version of every subject of the run, as the registry serves them."""
    texts = []
    with httpx.Client(base_url=url, timeout=10) as client:
        for subject in client.get("/subjects").json():
            if subject.startswith(prefix + "."):
                for version in client.get(f"/subjects/{subject}/versions").json():
                    texts.append(client.get(f"/subjects/{subject}/versions/{version}").text)
    assert texts
    return "\n".join(texts)


@pytest.fixture
def database(postgres: Any) -> Iterator[str]:
    with empty_database(postgres.dsn) as dsn:
        yield dsn


def _sql(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


def _rows(dsn: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return sorted(conn.execute(query).fetchall())  # type: ignore[arg-type]


def _rows_bytes(dsn: str) -> bytes:
    return str(_rows(dsn, "SELECT * FROM people")).encode()


def _live(records: list[Record]) -> list[tuple[Any, ...]]:
    live: dict[Any, Any] = {}
    for r in records:
        if r.value is None:
            continue
        key = tuple(sorted(r.key.items()))
        if r.value["op"] == "d":
            live.pop(key, None)
        else:
            live[key] = tuple(r.value["after"].values())
    return sorted(live.values())


def _converges(run: Any, table: str, dsn: str, query: str, timeout: float = 90,
               rows: Callable[[], list[tuple[Any, ...]]] | None = None) -> list[Record]:
    """The records of `table`'s topic once its latest-per-key rows equal `query`'s (or
    `rows()`)."""
    deadline = time.monotonic() + timeout
    while True:
        records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                               min_count=1, timeout=timeout)
        expected = rows() if rows is not None else _rows(dsn, query)
        if _live(records) == expected:
            return records
        assert time.monotonic() < deadline, (_live(records), expected, run.output()[-4000:])
        time.sleep(0.5)


def _topics(run: Any) -> set[str]:
    names = AdminClient({"bootstrap.servers": run.bootstrap}).list_topics(timeout=10).topics
    return {t for t in names if t.startswith(f"{run.prefix}.")}


def _wait_output(run: Any, text: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while text not in run.output():
        assert time.monotonic() < deadline and run.proc.poll() is None, run.output()[-4000:]
        time.sleep(0.2)


READINGS = "SELECT id, v FROM readings"


def _change_partitions(database: str) -> None:
    """Part 4 while streaming: a filled partition detached (first: no change of the root was
    streamed before it in this session) and one of its keys inserted again through the DEFAULT
    partition in the same transaction, writes to several partitions, a partition created and
    filled, a filled table attached."""
    _sql(database,
         "BEGIN; ALTER TABLE readings DETACH PARTITION readings_1;"
         " INSERT INTO readings VALUES (8, 'again'); COMMIT",
         "INSERT INTO readings VALUES (5, 'a'), (105, 'b'), (22, 'later')",
         "UPDATE readings SET v = 'u' WHERE id = 106",
         "DELETE FROM readings WHERE id = 113",
         "CREATE TABLE readings_3 PARTITION OF readings FOR VALUES FROM (200) TO (300)",
         "INSERT INTO readings SELECT i, 'n' || i FROM generate_series(200, 210) i",
         "ALTER TABLE readings ATTACH PARTITION staged FOR VALUES FROM (300) TO (400)")


def _check_partitions(run: Any, database: str) -> None:
    """The root's topic after `_change_partitions`: the ATTACHed rows arrived (as reads of the
    incremental snapshot the watcher queued); the DETACHed ones are deleted (detach_deletes), in
    the DETACH's transaction before the key inserted again there; the detached table, matching
    --tables, is a table of its own now; no other per-partition topic."""
    _wait_output(run, "public.staged attached")
    _wait_output(run, "partition public.readings_1 left public.readings: detached")
    records = _converges(run, "readings", database, READINGS)
    assert {r.value["op"] for r in records} == {"r", "c", "u", "d"}
    # The DETACH's transaction: a delete of each key readings_1 held, then 8 inserted again.
    [again] = [r for r in records if r.key == {"id": 8} and r.value and r.value["op"] == "c"]
    commit = again.value["source"]["commit_lsn"]
    detach = [r for r in records if r.value is not None
              and r.value["source"]["commit_lsn"] == commit]
    held = [row[0] for row in _rows(database, "SELECT id FROM readings_1")]
    assert sorted((r.value["op"], r.key["id"]) for r in detach[:-1]) == \
        [("d", i) for i in sorted(held)], detach
    assert (detach[-1].value["op"], detach[-1].key["id"]) == ("c", 8)
    assert {r.value["source"]["txn_index"] for r in detach[:-1]} == {0}
    assert detach[-1].value["source"]["txn_index"] == 1
    assert 8 in held and 22 in held and all(r.value["before"]["v"] is None for r in detach[:-1])
    attached = {r.key["id"] for r in records if r.value["op"] == "r" and r.key["id"] >= 300}
    assert attached == set(range(300, 321)), attached
    _converges(run, "readings_1", database, "SELECT id, v FROM readings_1")
    prefix = f"{run.prefix}.public."
    assert {t for t in _topics(run) if t.startswith((prefix + "readings", prefix + "staged"))} \
        == {prefix + "readings", prefix + "readings_1"}


def _snapshot_done(dsn: str, run: Any, where: str) -> None:
    deadline = time.monotonic() + 90
    while True:
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(f"SELECT bool_and(state = 'done') FROM pgcdc_signal "  # type: ignore
                               f"WHERE {where}").fetchone()
        if row is not None and row[0]:
            return
        assert time.monotonic() < deadline, run.output()[-4000:]
        time.sleep(0.3)


def _refused(dsn: str, settings: dict[str, Any], says: str, *, generated: bool = False,
             table: str = "public.orders") -> None:
    """ensure_publication refuses `settings` in one line and creates nothing."""
    admin = ReplicationAdmin.connect(dsn)
    try:
        admin.table_settings = parse_table_settings(settings)
        admin.generated_columns = generated
        with pytest.raises(ConfigError, match=says) as caught:
            admin.ensure_publication("pub_refused", [table])
        assert "\n" not in str(caught.value)
        assert not admin.publication_exists("pub_refused")
    finally:
        admin.close()


def _lake_equals_projection(spark: Any, run: Any, dsn: str, target: Path) -> None:
    """The merge job over the run's topics: each Delta table holds exactly the published
    columns and the rows of the filtered, masked projection of its PostgreSQL table."""
    stats = run_merge(spark, MergeConfig(bootstrap_servers=run.bootstrap,
                                         schema_registry_url=run.registry_url,
                                         target=str(target), topic_prefix=run.prefix,
                                         trigger="available-now"))
    assert stats.dead_letters == 0 and not stats.failed_tables, stats.failed_tables
    expected: dict[str, tuple[list[str], list[tuple[Any, ...]]]] = {
        # the filter widened by the restart; -15 and -2 moved out, 30 in, 3..10 re-synced in
        "orders": (COLUMNS, _rows(dsn, "SELECT id, region, total FROM orders WHERE id > 2")),
        "people": (["ref", "email", "phone", "name", "note"], _people(dsn)),  # ssn: excluded
        "typed": (["id", *TYPED], _typed(dsn)),
        "gen": (["id", "a", "g"], _rows(dsn, "SELECT id, a, g FROM gen")),
        # the root's table, as it stood when the restart published leaf by leaf (unchanged
        # since); the detached partition's rows deleted from it (detach_deletes)
        "readings": (["id", "v"], _rows(dsn, READINGS)),
    }
    for leaf in ("readings_1", "readings_2", "readings_3", "readings_d", "staged"):
        expected[leaf] = (["id", "v"], _rows(dsn, f"SELECT id, v FROM {leaf}"))
    for table, (columns, rows) in expected.items():
        frame = spark.read.format("delta").load(f"{target}/public/{table}")
        assert [c for c in frame.columns if c not in METADATA_COLUMNS] == columns, table
        got = sorted(tuple(r) for r in frame.select(*columns).collect())
        assert got == rows, (table, got, rows)
    assert sorted(stats.tables) == sorted(f"public/{t}" for t in expected)


def _detach_deletes_need_a_superuser(dsn: str) -> None:
    """detach_deletes' event triggers: a role that is not a superuser is refused in one line
    naming the SQL to run; once a superuser ran the SQL `pgcdc grants --detach-deletes-sql`
    prints, that role finds them installed."""
    role = "detach_plain"
    _sql(dsn, f"DROP ROLE IF EXISTS {role}", f"CREATE ROLE {role} LOGIN")
    try:
        with psycopg.connect(f"{dsn} user={role}", autocommit=True) as conn:
            with pytest.raises(ConfigError, match="only a superuser may create") as caught:
                ensure_detach_trigger(conn)
            line = str(caught.value)
            assert "pgcdc grants --detach-deletes-sql" in line and "\n" not in line, line
            assert _rows(dsn, "SELECT evtname FROM pg_event_trigger") == []
            out = subprocess.run([PGCDC, "grants", "--detach-deletes-sql"], capture_output=True,
                                 text=True, timeout=60, check=True).stdout
            _sql(dsn, out)  # as a superuser (a DBA)
            assert ensure_detach_trigger(conn) == "present"
    finally:
        _sql(dsn, f"DROP ROLE {role}")
    assert _rows(dsn, "SELECT evtname FROM pg_event_trigger") == [
        ("pgcdc_detach_end",), ("pgcdc_detach_start",)]


def _user_publication_masks(dsn: str) -> None:
    """Masks on a user's publication (create_publication false), checked at start against what
    it sends: ssn published is refused in one line naming the statements, which, run as given,
    make the masks hold."""
    settings = parse_table_settings({"public.people": {"mask": MASKS}})
    _sql(dsn, "CREATE PUBLICATION pub_user FOR TABLE people WHERE (ref <> 'x')")
    admin = ReplicationAdmin.connect(dsn)
    try:
        [line] = admin.user_mask_refusals("pub_user", settings)
        assert "mask excludes column(s) ssn of public.people, which publication pub_user " \
            "publishes" in line and "\n" not in line, line
        statements = line.split("in one transaction: ", 1)[1].split(", or mask", 1)[0]
        _sql(dsn, statements)
        assert admin.user_mask_refusals("pub_user", settings) == []
        assert _rows(dsn, "SELECT attnames::text, rowfilter FROM pg_publication_tables"
                          " WHERE pubname = 'pub_user'") == [
            ("{ref,email,phone,name,note}", "(ref <> 'x'::text)")]
    finally:
        admin.close()
        _sql(dsn, "DROP PUBLICATION pub_user")


def test_column_lists_row_filters_and_generated_columns(database, postgres, producer_run,
                                                        log_dir, tmp_path: Path,
                                                        request: pytest.FixtureRequest) -> None:
    pg18 = int(_rows(database, "SHOW server_version_num")[0][0]) >= 180000
    name = _rows(database, "SELECT current_database()")[0][0]
    _sql(database, *(f"ALTER DATABASE {name} SET {k} = '{v}'" for k, v in
                     DATABASE_DEFAULTS.items()))
    _sql(database,
         "CREATE TABLE typed (id int PRIMARY KEY, b boolean, c char(5), ip inet,"
         " ts timestamptz, d date, iv interval, f float8, by bytea, n numeric, t text)",
         "INSERT INTO typed VALUES (1, true, 'ab', '10.0.0.1', '2026-01-02 03:04:05.678+00',"
         " '2026-03-04', '1 day 02:03:04.5', 0.1::float8 + 0.2::float8, '\\x00ff27',"
         " 12.50, 'Zoë'), (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
         "CREATE TABLE orders (id int PRIMARY KEY, region text, total int, secret text)",
         "INSERT INTO orders SELECT i, CASE WHEN i % 2 = 0 THEN 'eu' ELSE 'us' END, i * 10,"
         " 'secret' || i FROM generate_series(1, 20) i",
         "CREATE TABLE gen (id int PRIMARY KEY, a int,"
         " g int GENERATED ALWAYS AS (a * 2) STORED)",
         "INSERT INTO gen SELECT i, i FROM generate_series(1, 3) i",
         "CREATE TABLE readings (id int PRIMARY KEY, v text) PARTITION BY RANGE (id)",
         "CREATE TABLE readings_1 PARTITION OF readings FOR VALUES FROM (0) TO (100)",
         "CREATE TABLE readings_2 PARTITION OF readings FOR VALUES FROM (100) TO (200)",
         "CREATE TABLE readings_d PARTITION OF readings DEFAULT",
         "INSERT INTO readings SELECT i, 'v' || i FROM generate_series(1, 199, 7) i",
         "CREATE TABLE staged (id int PRIMARY KEY, v text)",  # filled, attached later
         "INSERT INTO staged SELECT i, 's' || i FROM generate_series(300, 320) i",
         # phone's default would be a clear value in the schema's connect.default
         "CREATE TABLE people (ref text PRIMARY KEY, email text,"
         " phone text DEFAULT 'MKphone-default', name text, ssn text, note int)",
         "INSERT INTO people SELECT 'MKref-' || i, 'MKmail-' || i || '@ex.com',"
         " 'MKphone-' || i, 'Zoë MKname-' || i, 'MKssn-' || i, i FROM generate_series(1, 4) i",
         "UPDATE people SET email = NULL WHERE ref = 'MKref-4'")
    salt_file = tmp_path / "salt"
    salt_file.write_text(SALT + "\n")
    _refused(database, {"people": {"mask": {"ref": "exclude"}}},
             r"cannot exclude replica identity \(key\) column\(s\) ref of public.people",
             table="public.people")

    _user_publication_masks(database)

    # Refused before anything is created, where PostgreSQL would refuse later.
    _refused(database, {"orders": {"columns": ["region", "total"]}},
             r"must hold its replica identity \(key\) column\(s\) id")
    _refused(database, {"orders": {"where": "region = 'eu'"}},
             "uses region, outside its replica identity")
    if not pg18:
        _refused(database, {}, "publish_generated_columns needs PostgreSQL 18+", generated=True)

    config = tmp_path / "pgcdc.yaml"
    settings: dict[str, Any] = {"table_settings": {
        "public.orders": {"columns": COLUMNS, "where": "id > 10"},
        "public.people": {"mask": MASKS},
        "public.typed": {"mask": dict.fromkeys(TYPED, "hash")}},
        "mask_salt": f"file:{salt_file}", "mask_hash_encoding": "base64"}
    if pg18:
        settings["publish_generated_columns"] = True
    settings["detach_deletes"] = True
    _detach_deletes_need_a_superuser(database)
    config.write_text(yaml.safe_dump(settings))
    run = producer_run("public.orders,public.gen,public.people,public.typed,public.readings*",
                       "--config", str(config))
    run.dsn = database
    started = time.monotonic()
    run.start(log_dir)

    filtered = "SELECT id, region, total FROM orders WHERE id > 10"
    records = _converges(run, "orders", database, filtered)
    assert {r.value["op"] for r in records} == {"r"}  # the initial snapshot: ids 11-20
    people = _people_converges(run, database)  # the initial snapshot, masked
    assert [list(r.value["after"]) for r in people] == [["ref", "email", "phone", "name",
                                                         "note"]] * 4  # ssn: never sent
    _sql(database,
         "INSERT INTO people VALUES ('MKref-5', 'MKmail-5', 'MKphone-5', 'Al MKname-5',"
         " 'MKssn-5', 5)",
         "UPDATE people SET email = 'MKmail-1b', phone = 'MKphone-1b' WHERE ref = 'MKref-1'",
         "UPDATE people SET ref = 'MKref-2b' WHERE ref = 'MKref-2'",
         "DELETE FROM people WHERE ref = 'MKref-3'")
    people = _people_converges(run, database)
    streamed = [(r.value["op"], r.key["ref"], r.value["before"]) for r in people[4:]]
    hashed_key = [("c", _hash("MKref-5"), None), ("u", _hash("MKref-1"), None),
                  ("d", _hash("MKref-2"), {"ref": _hash("MKref-2"), "email": None,
                                           "phone": None, "name": None, "note": None}),
                  ("c", _hash("MKref-2b"), None),
                  ("d", _hash("MKref-3"), {"ref": _hash("MKref-3"), "email": None,
                                           "phone": None, "name": None, "note": None})]
    assert streamed == hashed_key, streamed  # the key record and before hash alike
    # typed: the initial snapshot's hashes, then the stream's, are the recipe's (not ::text's)
    typed = _converges(run, "typed", database, "", rows=lambda: _typed(database))
    assert _typed(database) != _typed(database, "{c}::text")  # bool, char(n), inet differ
    _sql(database,
         "INSERT INTO typed VALUES (3, false, 'x', '::1', '2026-07-08 09:10:11+05:30',"
         " '2026-12-31', '-1 mon 3 days', 1e-7, '\\x', -0.5, '')",
         "UPDATE typed SET ts = ts + interval '1 hour', f = 2.5e300 WHERE id = 1")
    typed = _converges(run, "typed", database, "", rows=lambda: _typed(database))
    assert [r.value["op"] for r in typed] == ["r", "r", "c", "u"]
    # One topic for the partitioned table: the initial snapshot read every partition into it.
    readings = _converges(run, "readings", database, READINGS)
    assert {r.value["op"] for r in readings} == {"r"}
    _change_partitions(database)  # checked below, once the watcher has seen them
    # The stream: an update in the filter, one moving a row out (a delete), one moving a row
    # in (a create), inserts and deletes on both sides of it.
    _sql(database,
         "UPDATE orders SET total = 999 WHERE id = 12",
         "UPDATE orders SET id = -15 WHERE id = 15",
         "UPDATE orders SET id = 30 WHERE id = 3",
         "INSERT INTO orders VALUES (-2, 'eu', 1, 'x'), (40, 'us', 2, 'y')",
         "DELETE FROM orders WHERE id IN (1, 11)")
    records = _converges(run, "orders", database, filtered)
    streamed = [(r.value["op"], r.key["id"]) for r in records if r.value["op"] != "r"]
    assert streamed == [("u", 12), ("d", 15), ("c", 30), ("c", 40), ("d", 11)], streamed
    for r in records:  # exactly the published columns, in the events and their schemas
        for row in (r.value["after"], r.value["before"]):
            assert row is None or list(row) == COLUMNS, r
    assert b"secret" not in str([r.value for r in records]).encode()

    # An incremental snapshot reads the same columns and rows.
    count = len(records)
    out = subprocess.run([PGCDC, "snapshot", "--dsn", database, "--slot", run.slot,
                          "--publication", f"pub_{run.tag}", "--tables",
                          "public.orders,public.people,public.typed"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    _snapshot_done(database, run, "message IS NULL")
    records = _converges(run, "orders", database, filtered)
    _check_partitions(run, database)
    read = sorted(r.key["id"] for r in records[count:] if r.value["op"] == "r")
    assert read == [row[0] for row in _rows(database, filtered)]
    resnap = [r for r in _people_converges(run, database)[len(people):] if r.value["op"] == "r"]
    assert sorted(tuple(r.value["after"].values()) for r in resnap) == _people(database)
    assert all(r.key == {"ref": r.value["after"]["ref"]} for r in resnap)
    resnap = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.typed",
                          min_count=len(typed) + 3, timeout=60)[len(typed):]
    assert [r.value["op"] for r in resnap] == ["r"] * 3
    assert sorted(tuple(r.value["after"].values()) for r in resnap) == _typed(database)

    if pg18:  # the stored generated column, in the snapshot and the stream
        _sql(database, "INSERT INTO gen VALUES (4, 21)")
        gen = _converges(run, "gen", database, "SELECT id, a, g FROM gen")
        assert [r.value["op"] for r in gen] == ["r", "r", "r", "c"]
        assert gen[-1].value["after"] == {"id": 4, "a": 21, "g": 42}

    status = subprocess.run([PGCDC, "status", "--dsn", database, "--slot", run.slot,
                             "--publication", f"pub_{run.tag}", "--config", str(config)],
                            capture_output=True, text=True, timeout=60)
    assert "published: columns ref, email, phone, name, note (5 of 6); rows: all; masks: " \
        "email hash, name truncate 3, phone null, ref hash; excluded: ssn" in status.stdout, \
        status.stdout  # (yaml.safe_dump sorted the mask's columns)
    assert "published: columns id, region, total (3 of 4); rows: WHERE (id > 10)" in \
        status.stdout, status.stdout
    # gen: its generated column g is published on 18 (asked for), never before.
    assert "partitions published through their root (publish_via_partition_root = true)" in \
        status.stdout, status.stdout
    assert "detach_deletes: on, event triggers installed" in status.stdout, status.stdout
    assert ("published: all 3 columns; rows: all" if pg18 else
            "published: columns id, a (2 of 3); rows: all") in status.stdout, status.stdout
    assert run.stop() == 0

    # Restarted with a wider filter: the publication follows, the rows that entered the filter
    # are re-synced by an incremental snapshot, and the lake converges on the new projection.
    # Partitions leaf by leaf from now on: each re-read into its own topic.
    settings["table_settings"]["public.orders"]["where"] = "id > 2"
    settings["publish_via_partition_root"] = False
    settings["detach_deletes"] = False  # leaf by leaf: a detached partition keeps its topic
    config.write_text(yaml.safe_dump(settings))
    run.start(log_dir)
    assert "the column list or row filter of public.orders changed" in run.output()
    _snapshot_done(database, run, "message LIKE '%table_settings%'")
    _converges(run, "orders", database, "SELECT id, region, total FROM orders WHERE id > 2")
    _snapshot_done(database, run, "message LIKE '%publish_via_partition_root%'")
    _converges(run, "staged", database, "SELECT id, v FROM staged")  # attached, re-read
    prefix = f"{run.prefix}.public."
    assert {prefix + "readings_2", prefix + "readings_3"} <= _topics(run)
    assert run.stop() == 0
    if pg18:  # end to end: the lake equals the filtered, masked projection of PostgreSQL
        spark = request.getfixturevalue("spark")  # the session's; started here if first
        merged = time.monotonic()
        _lake_equals_projection(spark, run, database, tmp_path / "lake")
        print(f"merge job over the run's topics: {time.monotonic() - merged:.1f} s")

    # The byte scan: no clear value of a masked column, nor the salt, anywhere it could leak.
    places = {f"topic {t}": data for t, data in _raw_topics(run.bootstrap, run.prefix).items()}
    assert {f"topic {run.prefix}.public.people", f"topic {run.prefix}.heartbeat"} <= set(places)
    places["registry"] = _registry_text(run.registry_url, run.prefix).encode()
    places.update({f"log {p.name}": p.read_bytes() for p in log_dir.glob("pgcdc-*.log")})
    places["pgcdc status"] = status.stdout.encode() + status.stderr.encode()
    places["pgcdc snapshot"] = (out.stdout + out.stderr).encode()
    # the scan reads what was published: the masked values are there, and the markers in PG
    assert _hash("MKref-1").encode() in places[f"topic {run.prefix}.public.people"]
    assert b"pgcdc.mask" in places["registry"] and b"hash-base64" in places["registry"]
    assert all(data for place, data in places.items() if place.startswith("log "))
    assert b"MKref" in _rows_bytes(database)
    leaks = [(marker, place) for place, data in places.items() for marker in MARKERS
             if marker in data]
    assert leaks == [], leaks
    print(f"publication settings test on PostgreSQL {'18' if pg18 else '15'}: "
          f"{time.monotonic() - started:.1f} s")

"""Which tables, columns and rows the snapshot reads, and the Relation it describes them with
(PostgreSQL 15/18, Kafka, registry)."""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from psycopg import sql

from connector.names import TableName
from connector.pgoutput import Decoder, Insert, Relation
from connector.replication.features import ServerFeatures
from connector.snapshot import published_table, published_tables
from connector.snapshot.initial.plan import ROW_NUMBER_SHIFT
from tests.support.snapshot import launch, read_events, slots, table_rows, wait_exit

pytestmark = pytest.mark.integration

SCHEMA_SQL = """
CREATE DOMAIN {s}.money3 AS numeric(8,3);
CREATE TYPE {s}.mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE {s}.pk (id int PRIMARY KEY, a text, b int GENERATED ALWAYS AS (id * 2) STORED,
                     gone text, z varchar(12));
ALTER TABLE {s}.pk DROP COLUMN gone;
CREATE TABLE {s}.full_ (id int PRIMARY KEY, v text);
ALTER TABLE {s}.full_ REPLICA IDENTITY FULL;
CREATE TABLE {s}.idx (a int NOT NULL, b int NOT NULL, c text);
CREATE UNIQUE INDEX idx_ba ON {s}.idx (b, a);
ALTER TABLE {s}.idx REPLICA IDENTITY USING INDEX idx_ba;
CREATE TABLE {s}.nothing (x int);
ALTER TABLE {s}.nothing REPLICA IDENTITY NOTHING;
CREATE TABLE {s}.nopk (x int, y text);
CREATE TABLE {s}.cols (id int PRIMARY KEY, keep text, skip text, n numeric(5,2));
CREATE TABLE {s}.typed (id bigint PRIMARY KEY, m {s}.money3, feel {s}.mood, grid int[][],
                        t timestamp(3));
CREATE TABLE {s}."Odd Table" ("order date" date PRIMARY KEY, "Größe" int);
CREATE TABLE {s}.parted (id int, k int, PRIMARY KEY (id)) PARTITION BY RANGE (id);
CREATE TABLE {s}.parted_a PARTITION OF {s}.parted FOR VALUES FROM (0) TO (1000);
CREATE TABLE {s}.parted_b PARTITION OF {s}.parted FOR VALUES FROM (1000) TO (2000);
"""
INSERTS = """
INSERT INTO {s}.pk (id, a, z) VALUES (1, 'a', 'z');
INSERT INTO {s}.full_ VALUES (1, 'v');
INSERT INTO {s}.idx VALUES (1, 2, 'c');
INSERT INTO {s}.nothing VALUES (1);
INSERT INTO {s}.nopk VALUES (1, 'y');
INSERT INTO {s}.cols VALUES (2, 'keep', 'skip', 1.5), (3, 'odd', 'skip', 2.5);
INSERT INTO {s}.typed VALUES (1, 1.5, 'ok', '{{{{1,2}},{{3,4}}}}', '2024-01-01 00:00:00.123');
INSERT INTO {s}."Odd Table" VALUES ('2024-01-01', 5);
INSERT INTO {s}.parted VALUES (1, 1), (1001, 2);
"""


@pytest.fixture
def schema(postgres: Any) -> Any:
    name = f"snap{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        conn.execute(SCHEMA_SQL.format(s=name))
    yield name
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


def _stream_relations(conn: psycopg.Connection[Any], slot: str, publication: str
                      ) -> dict[int, Relation]:
    """The Relation of each table the stream's inserts refer to (pgoutput also describes a
    partition published through its root, though no change refers to it)."""
    rows = conn.execute("SELECT data FROM pg_logical_slot_peek_binary_changes(%s, NULL, NULL,"
                        " 'proto_version', '1', 'publication_names', %s)",
                        (slot, publication)).fetchall()
    decoder = Decoder(1)
    messages = [decoder.decode(bytes(r[0])) for r in rows]
    used = {m.relation_id for m in messages if isinstance(m, Insert)}
    return {m.relation_id: m for m in messages if isinstance(m, Relation)
            and m.relation_id in used}


def test_relations_are_the_ones_pgoutput_sends(postgres, schema) -> None:
    leaves, root, slot = f"{schema}_leaves", f"{schema}_root", f"{schema}_slot"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        features = ServerFeatures(int(conn.execute("SHOW server_version_num").fetchone()[0]))
        conn.execute(f"CREATE PUBLICATION {leaves} FOR TABLES IN SCHEMA {schema}")
        conn.execute(f"CREATE PUBLICATION {root} FOR TABLE {schema}.cols (id, keep, n)"
                     f" WHERE (id % 2 = 0), {schema}.parted"
                     " WITH (publish_via_partition_root = true)")
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
        try:
            conn.execute(INSERTS.format(s=schema))
            for publication, count in ((leaves, 10), (root, 2)):
                streamed = _stream_relations(conn, slot, publication)
                synthesized = {t.relation.relation_id: t.relation
                               for t in published_tables(conn, publication, features)}
                assert len(streamed) == count
                assert synthesized == streamed
        finally:
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
            conn.execute(f"DROP PUBLICATION {leaves}, {root}")


def test_one_table_lookup_resolves_a_dotted_text_against_the_catalog(postgres, schema) -> None:
    """A request's ``schema.table`` text is ambiguous once a name holds a dot: the lookup
    finds the published one among its readings, as the full list would (first in schema,
    table order), and only that table."""
    dotted = f"{schema}.x"
    names = [TableName(schema, "x.y"), TableName(dotted, "y")]
    publication = f"{schema}_one"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        features = ServerFeatures(int(conn.execute("SHOW server_version_num").fetchone()[0]))
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(dotted)))
        try:
            for name in names:
                conn.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY)").format(
                    sql.Identifier(*name)))
            conn.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE {}, {}").format(
                sql.Identifier(publication), sql.Identifier(*names[1]),
                sql.Identifier(schema, "pk")))
            readings = TableName.readings(f"{schema}.x.y")
            assert sorted(readings) == sorted(names)
            found = published_table(conn, publication, features, readings)
            assert found is not None and found.table_name == names[1]
            assert found == next(t for t in published_tables(conn, publication, features)
                                 if t.table_name == names[1])
            conn.execute(sql.SQL("ALTER PUBLICATION {} ADD TABLE {}").format(
                sql.Identifier(publication), sql.Identifier(*names[0])))
            found = published_table(conn, publication, features, readings)
            assert found is not None and found.table_name == names[0]  # schema order
            assert published_table(conn, publication, features,
                                   [TableName(schema, "nopk")]) is None  # not published
        finally:
            conn.execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(
                sql.Identifier(publication)))
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(dotted)))


def test_column_lists_row_filters_and_partition_roots(postgres, producer_run, schema,
                                                      log_dir: Path) -> None:
    # Masks on the user's publication: keep hashed by the producer, skip excluded by its list.
    config = log_dir / "pgcdc.yaml"
    config.write_text(yaml.safe_dump({
        "create_publication": False, "mask_salt": "salt-37",
        "table_settings": {f"{schema}.cols": {"mask": {"keep": "hash", "skip": "exclude"}}}}))
    run = producer_run("*", "--snapshot", "initial_only", "--config", str(config))
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(INSERTS.format(s=schema))
        conn.execute(f"INSERT INTO {schema}.cols SELECT g, 'k' || g, 's', 0"
                     " FROM generate_series(10, 1000) g")
        conn.execute(f"CREATE PUBLICATION pub_{run.tag} FOR TABLE {schema}.cols (id, keep, n)"
                     f" WHERE (id % 2 = 0), {schema}.parted"
                     " WITH (publish_via_partition_root = true)")
    launch(run, log_dir)
    assert wait_exit(run) == 0, run.output()
    cols = read_events(run.bootstrap, run.registry_url, f"{run.prefix}.{schema}.cols",
                       min_count=1 + 496)
    afters = [e.value["after"] for e in cols if e.value["op"] == "r"]
    assert all(set(a) == {"id", "keep", "n"} for a in afters)
    assert sorted(a["id"] for a in afters) == [2, *range(10, 1001, 2)]
    clear = {a["id"]: "keep" if a["id"] == 2 else f"k{a['id']}" for a in afters}
    assert all(a["keep"] == hmac.new(b"salt-37", clear[a["id"]].encode(), hashlib.sha256
                                     ).hexdigest() for a in afters)
    parted = read_events(run.bootstrap, run.registry_url, f"{run.prefix}.{schema}.parted",
                         min_count=2)
    assert sorted(e.value["after"]["id"] for e in parted if e.value["op"] == "r") == [1, 1001]


def _snapshot(run: Any, log_dir: Path) -> None:
    launch(run, log_dir)
    assert wait_exit(run) == 0, run.output()
    assert slots(run.dsn, run.slot) == []


def _rows(events: list[Any]) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(sorted(e.value["after"].items())) for e in events
                   if e.value["op"] == "r")


# The same TID-range chunk queries on either server (both have TID Range Scan, 14+); on
# PostgreSQL 15, test_snapshot_killed_midway_is_never_seen (test_producer_exactly_once.py) reads
# a table in parallel chunks and checks every row arrives exactly once.
@pytest.mark.one_pg_version
def test_parallel_chunks_read_the_same_rows_as_one_reader(postgres, producer_run,
                                                          log_dir: Path) -> None:
    token = uuid.uuid4().hex[:6]
    a, b, c, p = (f"mt{token}_a", f"mt{token}_b", f"mt{token}_c", f"mt{token}_p")
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {a} (id int PRIMARY KEY, v text, n numeric)")
        conn.execute(f"INSERT INTO {a} SELECT g, md5(g::text), g / 3.0"
                     " FROM generate_series(1, 12000) g")
        conn.execute(f"DELETE FROM {a} WHERE id % 7 = 0")  # holes in the heap
        conn.execute(f"CREATE TABLE {b} (x int, y text)")  # no key
        # ... by choice: --keyless-tables refuses an accidental one (DEFAULT, no primary key)
        conn.execute(f"ALTER TABLE {b} REPLICA IDENTITY NOTHING")
        conn.execute(f"INSERT INTO {b} SELECT g % 100, 'dup' FROM generate_series(1, 2000) g")
        conn.execute(f"CREATE TABLE {c} (id int PRIMARY KEY)")  # empty
        conn.execute(f"CREATE TABLE {p} (id int PRIMARY KEY, v int) PARTITION BY RANGE (id)")
        conn.execute(f"CREATE TABLE mt{token}part1 PARTITION OF {p} FOR VALUES FROM (0) TO (2000)")
        conn.execute(f"CREATE TABLE mt{token}part2 PARTITION OF {p} FOR VALUES FROM (2000) TO "
                     "(20000)")
        conn.execute(f"INSERT INTO {p} SELECT g, g FROM generate_series(1, 5000) g")
        conn.execute(f"ANALYZE {a}, {b}, {p}")
    # Partitions leaf by leaf (publish_via_partition_root off): each is its own topic.
    one = producer_run(f"public.mt{token}_*", "--snapshot", "initial_only",
                       "--snapshot-workers", "1", "--no-publish-via-partition-root")
    two = producer_run(f"public.mt{token}_*", "--snapshot", "initial_only",
                       "--snapshot-workers", "2", "--snapshot-chunk-rows", "1200",
                       "--no-publish-via-partition-root")
    _snapshot(one, log_dir)
    _snapshot(two, log_dir)

    expected = {a: 12000 - 12000 // 7, b: 2000, c: 0, f"mt{token}part1": 1999,
                f"mt{token}part2": 3001}
    read = {}
    for table, count in expected.items():
        read[table] = events = [read_events(run.bootstrap, run.registry_url,
                                            f"{run.prefix}.public.{table}", min_count=count)
                                for run in (one, two)]
        assert _rows(events[0]) == _rows(events[1])
        assert sum(_rows(events[0]).values()) == count
        for run_events in events:
            positions = [e.value["source"]["txn_index"] for e in run_events]
            assert len(positions) == len(set(positions))
    db = table_rows(postgres.dsn, f"SELECT id, v, n::text FROM {a}")  # unbounded: a string
    events = read[a][1]  # the parallel run's
    assert {e.value["after"]["id"]: e.value["after"] for e in events if e.value["op"] == "r"} \
        == db
    # The big table was split for the two readers: its rows came in several chunks (a row's
    # txn_index is its chunk's ordinal << ROW_NUMBER_SHIFT + its place in the chunk).
    chunks = {e.value["source"]["txn_index"] >> ROW_NUMBER_SHIFT for e in events
              if e.value["op"] == "r"}
    assert len(chunks) > 1, chunks

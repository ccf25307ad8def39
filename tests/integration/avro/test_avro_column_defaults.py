"""Column defaults read from the catalog (`PostgresCatalog.column_defaults`) become the Kafka
Connect defaults of the derived schema: constant defaults only, printed as the stream prints
values, including a column ADDed with a DEFAULT; volatile or stable ones (sequences, now())
are not carried. Against a real PostgreSQL 15 (the catalog's node trees are the server's)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from connector.avro import derive_table_schemas
from connector.pgoutput.messages import Relation, RelationColumn
from connector.pgtypes import TypeCatalog
from connector.source_catalog import PostgresCatalog, constant_defaults, default_functions

pytestmark = pytest.mark.integration

TABLE = """
CREATE TYPE mood_d AS ENUM ('sad', 'happy');
CREATE SEQUENCE seq_d;
CREATE TABLE defaults_t (
  id int PRIMARY KEY,
  t text DEFAULT 'dflt',
  v varchar(10) DEFAULT 'x',
  c char(3) DEFAULT 'a',
  i2 smallint DEFAULT 7,
  f float8 DEFAULT 1.5,
  b bool DEFAULT true,
  d date DEFAULT '2020-01-02',
  ts timestamptz DEFAULT '2020-01-01 00:00:00+00',
  tm time DEFAULT '12:00',
  m mood_d DEFAULT 'happy',
  j jsonb DEFAULT '{"a": 1}',
  iv interval DEFAULT '3 mons',
  n numeric DEFAULT 1.50,
  expr int DEFAULT 2 + 3,
  nul text DEFAULT NULL,
  s bigint DEFAULT nextval('seq_d'),
  now_ts timestamptz DEFAULT now(),
  cur timestamptz DEFAULT CURRENT_TIMESTAMP,
  rnd float8 DEFAULT random(),
  plain text,
  gen int GENERATED ALWAYS AS (id * 2) STORED
);
ALTER TABLE defaults_t ADD COLUMN added text DEFAULT 'later';
CREATE TABLE bad_default (id int PRIMARY KEY, ok text DEFAULT 'fine', x int DEFAULT 1 / 0);
"""

EXPECTED = {"t": "dflt", "v": "x", "c": "a  ", "i2": 7, "f": 1.5, "b": True, "d": 18263,
            "ts": 1_577_836_800_000_000, "tm": 43_200_000_000, "m": "happy", "j": '{"a": 1}',
            "iv": "P3M", "n": "1.50", "expr": 5, "added": "later"}


@pytest.fixture
def conn(pg15: Any) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg15.dsn, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS defaults_tests")
        admin.execute("CREATE DATABASE defaults_tests")
    dsn = pg15.dsn.replace("dbname=postgres", "dbname=defaults_tests")
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(TABLE)
        yield c


def _relation(conn: psycopg.Connection[Any], table: str = "defaults_t") -> Relation:
    rows = conn.execute(
        "SELECT attname::text, atttypid::int, atttypmod, attnum = 1 FROM pg_attribute"
        " WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped"
        " ORDER BY attnum", (table,)).fetchall()
    oid = conn.execute("SELECT %s::regclass::oid::int", (table,)).fetchone()[0]  # type: ignore[index]
    return Relation(None, oid, "public", table, "d",
                    tuple(RelationColumn(1 if k else 0, n, t, m) for n, t, m, k in rows))


def test_constant_defaults_are_carried_and_volatile_ones_are_not(
        conn: psycopg.Connection[Any]) -> None:
    types = TypeCatalog()
    facts = PostgresCatalog(conn, types)
    relation = _relation(conn)
    facts.prepare_types(relation)
    defaults = facts.column_defaults(relation)
    assert set(defaults) == set(EXPECTED), defaults  # not s, now_ts, cur, rnd, nul, gen
    schemas = derive_table_schemas(relation, types, prefix="p", db="d", defaults=defaults)
    fields = {f["name"]: f for f in schemas.value_schema["fields"][0]["type"][1]["fields"]}
    carried = {name: f["type"][1]["connect.default"] for name, f in fields.items()
               if isinstance(f["type"][1], dict) and "connect.default" in f["type"][1]}
    assert carried == EXPECTED
    assert all(f["default"] is None and f["type"][0] == "null" for f in fields.values())
    # the session's own settings are untouched by the lookup
    assert conn.execute("SHOW DateStyle").fetchone() == ("ISO, MDY",)


def test_lookup_inside_a_transaction_leaves_its_settings_and_survives_a_failing_default(
        conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture) -> None:
    """A snapshot reader's connection is inside a transaction: the stream's settings are
    rolled back with a savepoint. A default that fails when evaluated (1 / 0) costs the
    table its Connect defaults, with a warning, not the stream."""
    with psycopg.connect(conn.info.dsn) as inside:  # not autocommit: a transaction is open
        inside.execute("SET TimeZone = 'Europe/Paris'")
        facts = PostgresCatalog(inside, TypeCatalog())
        assert facts.column_defaults(_relation(inside))["ts"] == "2020-01-01 00:00:00+00"
        assert inside.execute("SHOW TimeZone").fetchone() == ("Europe/Paris",)
        assert facts.column_defaults(_relation(inside, "bad_default")) == {}
        assert "column defaults not carried" in caplog.text and "division by zero" in caplog.text
        assert inside.execute("SELECT 1").fetchone() == (1,)  # the transaction goes on


def test_default_functions_reads_node_trees(conn: psycopg.Connection[Any]) -> None:
    rows = dict(conn.execute(
        "SELECT a.attname::text, d.adbin::text FROM pg_attrdef d JOIN pg_attribute a"
        " ON a.attrelid = d.adrelid AND a.attnum = d.adnum"
        " WHERE d.adrelid = 'defaults_t'::regclass").fetchall())
    assert default_functions(rows["t"]) == set()  # a literal
    assert default_functions(rows["cur"]) is None  # CURRENT_TIMESTAMP: not a function call
    assert default_functions(rows["now_ts"])  # now(): a call (stable, so not constant)
    called = default_functions(rows["s"])
    assert called and constant_defaults([("s", rows["s"], "nextval(...)", "bigint")], set()) == {}
    # were it immutable:
    assert constant_defaults([("s", rows["s"], "e", "bigint")], called) == {
        "s": "CAST((e) AS bigint)"}

"""Begin/Relation/Insert/Update/Delete/Commit from real PostgreSQL, every protocol version."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from connector.pgoutput import (
    Begin,
    Commit,
    Delete,
    Insert,
    Relation,
    Update,
    pg_timestamp_to_datetime,
)
from tests.support.pgoutput_pg import Sandbox, decode_rows, of_type

pytestmark = pytest.mark.integration

TABLE = """CREATE TABLE items (
    id int PRIMARY KEY, name text NOT NULL, price numeric(10,2), tags text[],
    seen timestamptz, note varchar(20), flag boolean, data jsonb)"""


def test_transaction_every_protocol(sandbox: Sandbox) -> None:
    sandbox.sql(TABLE)
    pub = sandbox.publication("items")
    slot = sandbox.create_slot()
    before = datetime.now(UTC) - timedelta(seconds=1)
    sandbox.sql("BEGIN")
    xid = sandbox.one("SELECT txid_current()")
    sandbox.sql("INSERT INTO items VALUES (1, 'caf\u00e9 \"quoted\"', 12.50, '{a,\"b c\"}', "
                "'2024-03-01 12:34:56.789+02', NULL, true, '{\"k\": [1, 2]}'), "
                "(2, 'line\nbreak', NULL, NULL, NULL, 'x', false, NULL)")
    sandbox.sql("UPDATE items SET price = 99.99 WHERE id = 2")
    sandbox.sql("DELETE FROM items WHERE id = 1")
    sandbox.sql("COMMIT")
    after = datetime.now(UTC) + timedelta(seconds=1)
    expected_rows = sandbox.text_rows("SELECT * FROM items")  # only id 2 is left
    inserted_1 = ("1", "caf\u00e9 \"quoted\"", "12.50", '{a,"b c"}',
                  "2024-03-01 10:34:56.789+00", None, "t", '{"k": [1, 2]}')

    for proto in range(1, sandbox.max_proto + 1):
        rows = sandbox.peek(slot, pub, proto)
        msgs = decode_rows(rows)
        assert [type(m) for m in msgs] == [Begin, Relation, Insert, Insert, Update, Delete,
                                           Commit], proto
        begin, rel, ins1, ins2, upd, dele, commit = msgs
        assert isinstance(begin, Begin) and isinstance(commit, Commit)
        assert begin.xid == xid
        assert all(r.xid == xid for r in rows)
        # Begin announces the commit record's LSN; the Commit row sits at the end LSN.
        assert begin.final_lsn == commit.commit_lsn
        assert rows[-1].lsn == commit.end_lsn > commit.commit_lsn
        assert rows[0].lsn < commit.commit_lsn
        assert begin.commit_timestamp == commit.commit_timestamp
        assert before <= pg_timestamp_to_datetime(commit.commit_timestamp) <= after
        assert commit.flags == 0

        assert isinstance(rel, Relation)
        assert rel.xid is None
        assert rel.relation_id == sandbox.relid("items")
        assert (rel.namespace, rel.name, rel.replica_identity) == (sandbox.schema, "items", "d")
        assert [(c.name, c.type_oid, c.type_modifier) for c in rel.columns] == (
            sandbox.attributes("items"))
        assert [c.key for c in rel.columns] == [True] + [False] * 7

        assert ins1 == Insert(None, rel.relation_id, inserted_1)
        assert isinstance(upd, Update) and upd.old is None and upd.old_kind is None
        assert upd.new == expected_rows[0]
        assert dele == Delete(None, rel.relation_id, "K", ("1",) + (None,) * 7)
        assert isinstance(ins2, Insert) and ins2.new[1] == "line\nbreak"


def test_alter_table_sends_new_relation(sandbox: Sandbox) -> None:
    sandbox.sql("CREATE TABLE evolving (id int PRIMARY KEY, a text)")
    pub = sandbox.publication("evolving")
    slot = sandbox.create_slot()
    sandbox.sql("INSERT INTO evolving VALUES (1, 'one')")
    sandbox.sql("ALTER TABLE evolving ADD COLUMN b int DEFAULT 7, ALTER COLUMN a TYPE varchar(9)")
    sandbox.sql("INSERT INTO evolving VALUES (2, 'two', 8)")
    sandbox.sql("ALTER TABLE evolving DROP COLUMN a")
    sandbox.sql("INSERT INTO evolving VALUES (3, 9)")
    msgs = decode_rows(sandbox.peek(slot, pub, sandbox.max_proto))
    rels = of_type(msgs, Relation)
    assert [[(c.name, c.type_oid, c.type_modifier) for c in r.columns] for r in rels] == [
        [("id", 23, -1), ("a", 25, -1)],
        [("id", 23, -1), ("a", 1043, 13), ("b", 23, -1)],
        [("id", 23, -1), ("b", 23, -1)],
    ]
    assert [m.new for m in of_type(msgs, Insert)] == [("1", "one"), ("2", "two", "8"),
                                                      ("3", "9")]


def test_generated_columns_are_not_sent(sandbox: Sandbox) -> None:
    sandbox.sql("CREATE TABLE gen (id int PRIMARY KEY, x int, doubled int "
                "GENERATED ALWAYS AS (x * 2) STORED)")
    pub = sandbox.publication("gen")
    slot = sandbox.create_slot()
    sandbox.sql("INSERT INTO gen (id, x) VALUES (1, 21)")
    msgs = decode_rows(sandbox.peek(slot, pub, 1))
    (rel,) = of_type(msgs, Relation)
    assert [c.name for c in rel.columns] == ["id", "x"]
    assert of_type(msgs, Insert)[0].new == ("1", "21")

"""Row-level details from real PostgreSQL: replica identities, unchanged TOAST, Truncate, Type
messages, binary tuples."""

from __future__ import annotations

import pytest

from connector.pgoutput import (
    UNCHANGED_TOAST,
    BinaryValue,
    Delete,
    Insert,
    Relation,
    Truncate,
    Type,
    Update,
)
from tests.support.pgoutput_pg import Sandbox, decode_rows, of_type

pytestmark = pytest.mark.integration


def test_replica_identity_default_key_only_when_key_changes(sandbox: Sandbox) -> None:
    sandbox.sql("CREATE TABLE rid (id int PRIMARY KEY, v text)")
    pub = sandbox.publication("rid")
    slot = sandbox.create_slot()
    sandbox.sql("INSERT INTO rid VALUES (1, 'a')")
    sandbox.sql("UPDATE rid SET v = 'b' WHERE id = 1")
    sandbox.sql("UPDATE rid SET id = 2 WHERE id = 1")
    sandbox.sql("DELETE FROM rid WHERE id = 2")
    msgs = decode_rows(sandbox.peek(slot, pub, 1))
    (rel,) = of_type(msgs, Relation)
    assert rel.replica_identity == "d" and [c.key for c in rel.columns] == [True, False]
    relid = sandbox.relid("rid")
    assert of_type(msgs, Update) == [Update(None, relid, None, None, ("1", "b")),
                                     Update(None, relid, "K", ("1", None), ("2", "b"))]
    assert of_type(msgs, Delete) == [Delete(None, relid, "K", ("2", None))]


def test_replica_identity_full_sends_old_rows(sandbox: Sandbox) -> None:
    sandbox.sql("CREATE TABLE full_t (id int, v text, n int)")
    sandbox.sql("ALTER TABLE full_t REPLICA IDENTITY FULL")
    pub = sandbox.publication("full_t")
    slot = sandbox.create_slot()
    sandbox.sql("INSERT INTO full_t VALUES (1, 'a', NULL)")
    sandbox.sql("UPDATE full_t SET n = 5")
    sandbox.sql("DELETE FROM full_t")
    msgs = decode_rows(sandbox.peek(slot, pub, 2))
    (rel,) = of_type(msgs, Relation)
    assert rel.replica_identity == "f"
    assert [c.key for c in rel.columns] == [True, True, True]  # FULL: every column is the key
    relid = sandbox.relid("full_t")
    assert of_type(msgs, Update) == [Update(None, relid, "O", ("1", "a", None), ("1", "a", "5"))]
    assert of_type(msgs, Delete) == [Delete(None, relid, "O", ("1", "a", "5"))]


def test_replica_identity_using_index(sandbox: Sandbox) -> None:
    sandbox.sql("CREATE TABLE idx_t (id int PRIMARY KEY, code text NOT NULL, v text)")
    sandbox.sql("CREATE UNIQUE INDEX idx_t_code ON idx_t (code)")
    sandbox.sql("ALTER TABLE idx_t REPLICA IDENTITY USING INDEX idx_t_code")
    pub = sandbox.publication("idx_t")
    slot = sandbox.create_slot()
    sandbox.sql("INSERT INTO idx_t VALUES (1, 'c1', 'x')")
    sandbox.sql("UPDATE idx_t SET v = 'y'")
    sandbox.sql("UPDATE idx_t SET code = 'c2'")
    sandbox.sql("DELETE FROM idx_t")
    msgs = decode_rows(sandbox.peek(slot, pub, sandbox.max_proto))
    (rel,) = of_type(msgs, Relation)
    assert rel.replica_identity == "i"
    assert [c.key for c in rel.columns] == [False, True, False]
    relid = sandbox.relid("idx_t")
    assert of_type(msgs, Update) == [
        Update(None, relid, None, None, ("1", "c1", "y")),
        Update(None, relid, "K", (None, "c1", None), ("1", "c2", "y"))]
    assert of_type(msgs, Delete) == [Delete(None, relid, "K", (None, "c2", None))]


def test_replica_identity_nothing(sandbox: Sandbox) -> None:
    sandbox.sql("CREATE TABLE nothing_t (id int PRIMARY KEY, v text)")
    sandbox.sql("ALTER TABLE nothing_t REPLICA IDENTITY NOTHING")
    # With identity NOTHING a publication that publishes updates would block them.
    pub = sandbox.publication("nothing_t", publish="insert")
    slot = sandbox.create_slot()
    sandbox.sql("INSERT INTO nothing_t VALUES (1, 'a')")
    sandbox.sql("UPDATE nothing_t SET v = 'b'")
    sandbox.sql("DELETE FROM nothing_t")
    msgs = decode_rows(sandbox.peek(slot, pub, 1))
    (rel,) = of_type(msgs, Relation)
    assert rel.replica_identity == "n" and not any(c.key for c in rel.columns)
    assert of_type(msgs, Insert) == [Insert(None, sandbox.relid("nothing_t"), ("1", "a"))]
    assert not of_type(msgs, Update) and not of_type(msgs, Delete)


def test_unchanged_toast_value(sandbox: Sandbox) -> None:
    sandbox.sql("CREATE TABLE toasty (id int PRIMARY KEY, note text, big text)")
    pub = sandbox.publication("toasty")
    slot = sandbox.create_slot()
    # md5 hex of random data: pglz cannot shrink it below the TOAST threshold.
    sandbox.sql("INSERT INTO toasty SELECT 1, 'n1', string_agg(md5(random()::text), '') "
                "FROM generate_series(1, 3000)")
    big = sandbox.one("SELECT big FROM toasty")
    assert sandbox.one("SELECT pg_column_size(big) > 8000 FROM toasty")
    sandbox.sql("UPDATE toasty SET note = 'n2'")
    sandbox.sql("UPDATE toasty SET big = 'small', note = 'n3'")
    msgs = decode_rows(sandbox.peek(slot, pub, sandbox.max_proto))
    relid = sandbox.relid("toasty")
    assert of_type(msgs, Insert) == [Insert(None, relid, ("1", "n1", big))]
    assert of_type(msgs, Update) == [
        Update(None, relid, None, None, ("1", "n2", UNCHANGED_TOAST)),
        Update(None, relid, None, None, ("1", "n3", "small"))]
    # binary tuples mark it the same way
    binary = decode_rows(sandbox.peek(slot, pub, sandbox.max_proto, binary=True))
    assert of_type(binary, Update)[0].new[2] is UNCHANGED_TOAST


def test_truncate_options_and_relations(sandbox: Sandbox) -> None:
    sandbox.sql("CREATE TABLE parent (id serial PRIMARY KEY)")
    sandbox.sql("CREATE TABLE child (id int PRIMARY KEY, parent_id int REFERENCES parent)")
    sandbox.sql("CREATE TABLE other (id int)")
    pub = sandbox.publication("parent", "child", "other")
    slot = sandbox.create_slot()
    sandbox.sql("INSERT INTO parent DEFAULT VALUES")
    sandbox.sql("TRUNCATE other")
    sandbox.sql("TRUNCATE parent RESTART IDENTITY CASCADE")
    sandbox.sql("TRUNCATE other, child RESTART IDENTITY")
    sandbox.sql("TRUNCATE child CASCADE")
    parent, child, other = (sandbox.relid(t) for t in ("parent", "child", "other"))
    for proto in range(1, sandbox.max_proto + 1):
        truncs = of_type(decode_rows(sandbox.peek(slot, pub, proto)), Truncate)
        assert [(t.options, set(t.relation_ids)) for t in truncs] == [
            (0, {other}), (3, {parent, child}), (2, {other, child}), (1, {child})]
        assert [(t.cascade, t.restart_identity) for t in truncs] == [
            (False, False), (True, True), (False, True), (True, False)]
        assert all(t.xid is None for t in truncs)


def test_type_messages_for_enum_and_domain(sandbox: Sandbox) -> None:
    sandbox.sql("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
    sandbox.sql("CREATE DOMAIN posint AS int CHECK (VALUE > 0)")
    sandbox.sql("CREATE TABLE moods (id int PRIMARY KEY, m mood, p posint, ms mood[])")
    pub = sandbox.publication("moods")
    slot = sandbox.create_slot()
    sandbox.sql("INSERT INTO moods VALUES (1, 'happy', 7, '{sad,ok}')")
    msgs = decode_rows(sandbox.peek(slot, pub, sandbox.max_proto))
    types = {t.type_oid: t for t in of_type(msgs, Type)}
    oids = {n: int(o) for n, o in sandbox.sql(
        "SELECT typname::text, oid::bigint FROM pg_type WHERE typnamespace = %s::regnamespace",
        (sandbox.schema,))}
    assert types[oids["mood"]] == Type(None, oids["mood"], sandbox.schema, "mood")
    assert types[oids["_mood"]] == Type(None, oids["_mood"], sandbox.schema, "_mood")
    assert len(types) == 3
    # a domain is described by its base type: pg_catalog's "int4" (empty namespace)
    assert types[oids["posint"]] == Type(None, oids["posint"], "", "int4")
    # Type messages precede the Relation that uses them
    kinds = [type(m) for m in msgs]
    assert kinds.index(Relation) > max(i for i, k in enumerate(kinds) if k is Type)
    (rel,) = of_type(msgs, Relation)
    assert [c.type_oid for c in rel.columns] == [23, oids["mood"], oids["posint"], oids["_mood"]]
    assert of_type(msgs, Insert)[0].new == ("1", "happy", "7", "{sad,ok}")


def test_binary_tuples_match_send_functions(sandbox: Sandbox) -> None:
    sandbox.sql("CREATE TABLE bin (id int PRIMARY KEY, i8 bigint, f float8, t text, "
                "n numeric, ts timestamptz, u uuid, b bytea, a int[], j jsonb, nul text)")
    pub = sandbox.publication("bin")
    slot = sandbox.create_slot()
    sandbox.sql("INSERT INTO bin VALUES (1, -9000000000, 1.5, 'h\u00e9', 123.456, "
                "'2024-03-01 00:00:00+00', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', "
                "'\\x00ff10', '{1,NULL,3}', '{\"a\": 1}', NULL)")
    expected = sandbox.binary_rows("SELECT * FROM bin")[0]
    text = tuple(sandbox.text_rows("SELECT * FROM bin")[0])
    for proto in range(1, sandbox.max_proto + 1):
        msgs = decode_rows(sandbox.peek(slot, pub, proto, binary=True))
        (ins,) = of_type(msgs, Insert)
        assert ins.new == expected
        assert all(type(v) is BinaryValue for v in ins.new[:-1]) and ins.new[-1] is None
        assert ins.new[0] == b"\x00\x00\x00\x01"
        # and without the option, the same row in text
        (plain,) = of_type(decode_rows(sandbox.peek(slot, pub, proto)), Insert)
        assert plain.new == text

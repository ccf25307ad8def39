"""Inserts, updates, deletes, truncates and key changes under each REPLICA IDENTITY, and
unchanged TOAST values, as `pgcdc run` publishes them (schemas/README.md, publisher.py)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.support.cdc_checks import execute, in_order, read_records, stream_run
from tests.support.producer import current_lsn

pytestmark = pytest.mark.integration

Row = dict[str, Any]


def row(id: int | None, k: int | None = None, v: str | None = None) -> Row:
    return {"id": id, "k": k, "v": v}


# table suffix: (DDL after the columns, key of a row as the Kafka key record)
IDENTITIES: dict[str, tuple[str, Any]] = {
    "default_pk": ("PRIMARY KEY (id)", lambda r: {"id": r["id"]}),
    "full_pk": ("PRIMARY KEY (id)", lambda r: {"id": r["id"]}),
    "full_nopk": ("", lambda r: dict(r)),  # FULL without a key: the whole row is the key
    "index": ("", lambda r: {"k": r["k"]}),
    "nothing": ("", lambda r: None),
}
SETUP = {
    "default_pk": [],
    "full_pk": ["ALTER TABLE {t} REPLICA IDENTITY FULL"],
    "full_nopk": ["ALTER TABLE {t} REPLICA IDENTITY FULL"],
    "index": ["CREATE UNIQUE INDEX {t}_k ON {t} (k)", "ALTER TABLE {t} REPLICA IDENTITY "
              "USING INDEX {t}_k"],
    "nothing": ["ALTER TABLE {t} REPLICA IDENTITY NOTHING"],
}


def expected(kind: str) -> list[tuple[str, Any, Row | None, Row | None]]:
    """(op, key, before, after) of the workload in `_workload`."""
    key = IDENTITIES[kind][1]
    r1, r2, r1b, r4, r3 = row(1, 10, "a"), row(2, 20, "b"), row(1, 10, "a2"), row(4, 40, "a2"), \
        row(3, 30, "c")
    inserts = [("c", key(r1), None, r1), ("c", key(r2), None, r2)]
    tail = [("t", None, None, None), ("c", key(r3), None, r3)]
    if kind == "nothing":
        return inserts + tail
    full = kind.startswith("full")

    def old(r: Row) -> Row:  # the old row as PostgreSQL sends it: whole (FULL) or key only
        return dict(r) if full else {**row(None), **key(r)}

    if kind == "full_nopk":  # every update changes the whole-row key
        update = [("d", key(r1), r1, None), ("c", key(r1b), None, r1b)]
    else:
        update = [("u", key(r1b), r1 if full else None, r1b)]
    key_change = [("d", key(r1b), old(r1b), None), ("c", key(r4), None, r4)]
    delete = [("d", key(r2), old(r2), None)]
    return inserts + update + key_change + delete + tail


def _workload(conn: psycopg.Connection[Any], table: str, kind: str) -> None:
    conn.execute(f"INSERT INTO {table} VALUES (1, 10, 'a'), (2, 20, 'b')")  # type: ignore[arg-type]
    if kind == "nothing":
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
            conn.execute(f"UPDATE {table} SET v = 'a2' WHERE id = 1")  # type: ignore[arg-type]
    else:
        conn.execute(f"UPDATE {table} SET v = 'a2' WHERE id = 1")  # type: ignore[arg-type]
        conn.execute(f"UPDATE {table} SET id = 4, k = 40 WHERE id = 1")  # type: ignore[arg-type]
        conn.execute(f"DELETE FROM {table} WHERE id = 2")  # type: ignore[arg-type]
    conn.execute(f"TRUNCATE {table}")  # type: ignore[arg-type]
    conn.execute(f"INSERT INTO {table} VALUES (3, 30, 'c')")  # type: ignore[arg-type]


def test_changes_under_each_replica_identity(postgres, producer_run, log_dir) -> None:
    run = stream_run(producer_run)
    tables = {kind: f"ri_{run.tag}_{kind}" for kind in IDENTITIES}
    for kind, table in tables.items():
        execute(postgres.dsn, f"CREATE TABLE {table} (id int NOT NULL, k int NOT NULL, v text"
                              f"{', ' + IDENTITIES[kind][0] if IDENTITIES[kind][0] else ''})",
                *(s.format(t=table) for s in SETUP[kind]))
    run.start(log_dir)
    assert f"table public.{tables['nothing']} has no replica identity key" in run.output()
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        for kind, table in tables.items():
            _workload(conn, table, kind)
    end = current_lsn(postgres.dsn)
    failures = []
    for kind, table in tables.items():
        want = expected(kind)
        records = in_order(read_records(run.bootstrap, run.registry_url,
                                        f"{run.prefix}.public.{table}", min_count=len(want)))
        got = [(r.value["op"], r.key, r.value["before"], r.value["after"]) for r in records]
        if got != want:
            failures.append(f"{kind}:\n  got  {got}\n  want {want}")
        elif kind != "nothing":  # a key change is one change: its d and c share its position
            positions = [(r.value["source"]["commit_lsn"], r.value["source"]["txn_index"])
                         for r in records]
            assert positions[-5] == positions[-4], kind  # the key change's d and c
    assert not failures, "\n".join(failures)
    run.wait_confirmed(end)
    assert run.stop() == 0


BIG = "".join(chr(ord("a") + (i * 7919) % 26) for i in range(20_000))  # TOASTed out of line


def test_unchanged_toast_default_and_full(postgres, producer_run, log_dir) -> None:
    run = stream_run(producer_run)
    default, full = f"toast_{run.tag}_d", f"toast_{run.tag}_f"
    for table in (default, full):
        execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, n int, big text)",
                f"ALTER TABLE {table} ALTER COLUMN big SET STORAGE EXTERNAL")
    execute(postgres.dsn, f"ALTER TABLE {full} REPLICA IDENTITY FULL")
    run.start(log_dir)
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        for table in (default, full):
            conn.execute(f"INSERT INTO {table} VALUES (1, 0, %s)", (BIG,))  # type: ignore[arg-type]
            conn.execute(f"UPDATE {table} SET n = 1 WHERE id = 1")  # type: ignore[arg-type]
            conn.execute(f"UPDATE {table} SET id = 2 WHERE id = 1")  # type: ignore[arg-type]
            conn.execute(f"UPDATE {table} SET big = 'small' WHERE id = 2")  # type: ignore[arg-type]

    def events(table: str) -> list[Any]:
        records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                               min_count=5)
        return [r.value for r in in_order(records)]

    ins, upd, key_d, key_c, small = events(default)
    assert ins["after"]["big"] == BIG and ins["unchanged_toast"] == []
    assert upd["op"] == "u" and upd["after"] == {"id": 1, "n": 1, "big": None}
    assert upd["unchanged_toast"] == ["big"]  # not NULL: marked, the consumer keeps its value
    assert key_d["op"] == "d" and key_d["before"] == {"id": 1, "n": None, "big": None}
    # PostgreSQL sends neither the value nor an old row: the new key's row is marked too.
    assert key_c["op"] == "c" and key_c["after"] == {"id": 2, "n": 1, "big": None}
    assert key_c["unchanged_toast"] == ["big"]
    assert small["after"]["big"] == "small" and small["unchanged_toast"] == []

    ins, upd, key_d, key_c, small = events(full)
    assert ins["after"]["big"] == BIG
    assert upd["op"] == "u" and upd["unchanged_toast"] == []  # filled from the old row
    assert upd["before"] == {"id": 1, "n": 0, "big": BIG}
    assert upd["after"] == {"id": 1, "n": 1, "big": BIG}
    assert key_d["op"] == "d" and key_d["before"] == {"id": 1, "n": 1, "big": BIG}
    assert key_c["after"] == {"id": 2, "n": 1, "big": BIG} and key_c["unchanged_toast"] == []
    assert small["before"]["big"] == BIG and small["after"]["big"] == "small"
    assert run.stop() == 0

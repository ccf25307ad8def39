"""`DdlResync.relation`: which Relation messages lead to a catalog look-up and a request. The
look-ups and the request go to the connection, so a recording fake stands in for it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from connector.errors import SourceError
from connector.names import TableName
from connector.pgoutput.messages import Relation, RelationColumn
from connector.replication.features import ServerFeatures
from connector.snapshot.incremental import resync as resync_mod
from connector.snapshot.incremental.resync import DdlResync
from connector.snapshot.incremental.rewrites import Column

T = TableName("public", "t")
ID = RelationColumn(1, "id", 23, -1)
N = RelationColumn(0, "n", 23, -1)


def _rel(*columns: RelationColumn, xid: int | None = None) -> Relation:
    return Relation(xid, 42, "public", "t", "d", columns)


class _NoConn:
    """Any use fails the test: the Relation needs no catalog."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"connection used ({name})")


def _resync(conn: Any, queued: list[tuple[TableName, list[str]]], *, enabled: bool = True
            ) -> DdlResync:
    r = DdlResync(conn, "pub", "slot", ServerFeatures(180000), enabled=enabled)
    r._resync = lambda name, found: queued.append((name, list(found))) or True  # type: ignore[method-assign]
    return r


def _catalog(monkeypatch: pytest.MonkeyPatch, states: Iterator[list[Column]]) -> None:
    """Each check sees the next state of table 42 (digest, then the columns if it changed)."""
    current: list[list[Column]] = []

    def digests(*args: Any) -> tuple[dict[int, str], str]:
        current[:] = [next(states)]
        return {42: repr(current[0])}, ""

    monkeypatch.setattr(resync_mod, "catalog_digests", digests)
    monkeypatch.setattr(resync_mod, "catalog_columns",
                        lambda *a, **k: {42: (T, current[0])})


def test_unchanged_first_seen_and_streamed_relations_do_nothing() -> None:
    queued: list[tuple[TableName, list[str]]] = []
    r = _resync(_NoConn(), queued)
    r.relation(_rel(ID, N))  # first sight: the baseline
    r.relation(_rel(ID, N))  # re-sent as is (after an invalidation)
    r.relation(_rel(ID, N._replace(flags=1)))  # a key change: no values changed
    # Inside a streamed transaction: maybe uncommitted, maybe aborted; the catalog check
    # sees it once it commits.
    r.relation(_rel(ID, N._replace(type_oid=20), xid=7))
    assert queued == []


def test_a_type_change_queues_one_resync(monkeypatch: pytest.MonkeyPatch) -> None:
    queued: list[tuple[TableName, list[str]]] = []

    class Conn:
        def execute(self, query: str, params: Any) -> Any:
            class Rows:
                def fetchall(self) -> list[tuple[int, int, str]]:
                    names = {23: "integer", 20: "bigint"}
                    return [(o, m, names[o]) for o, m in zip(*params, strict=True)]
            return Rows()

    r = _resync(Conn(), queued)
    r.relation(_rel(ID, N))
    r.relation(_rel(ID, N._replace(type_oid=20)))
    assert queued == [(T, ["column n changed type from integer to bigint"])]
    # The catalog check seeing the same DDL a moment later does not queue it again.
    states = iter([[Column(1, "id", 23, -1), Column(2, "n", 23, -1)],
                   [Column(1, "id", 23, -1), Column(2, "n", 20, -1)],
                   [Column(1, "id", 23, -1), Column(2, "n", 20, -1)]])

    _catalog(monkeypatch, states)
    for _ in range(3):
        r.next_check = 0.0
        r.tick()
    assert len(queued) == 1
    assert 42 not in r.by_relation  # the check did find the change, and matched it


def _fail_first_request(r: DdlResync) -> list[TableName]:
    """Make `r`'s first re-sync request lose the connection; returns the tables asked for."""
    calls: list[TableName] = []

    def flaky(name: TableName, found: Any) -> bool:
        calls.append(name)
        if len(calls) == 1:
            raise SourceError("connection lost", transient=True)
        return True

    r._resync = flaky  # type: ignore[method-assign]
    return calls


def test_a_lost_connection_retries_the_request_at_the_next_check(
        monkeypatch: pytest.MonkeyPatch) -> None:
    r = DdlResync(_NoConn(), "pub", "slot", ServerFeatures(180000), enabled=True)
    calls = _fail_first_request(r)
    states = iter([[Column(1, "id", 23, -1), Column(2, "n", 23, -1)]]
                  + [[Column(1, "id", 23, -1), Column(2, "n", 20, -1)]] * 3)
    _catalog(monkeypatch, states)
    r.next_check = 0.0
    r.tick()
    r.next_check = 0.0
    r.tick()
    r.next_check = 0.0
    with pytest.raises(SourceError):
        r.tick()
    r.next_check = 0.0
    r.tick()  # the session reconnected: the same DdlResync asks again
    assert calls == [T, T]


def test_a_relation_lost_with_the_connection_is_compared_again() -> None:
    r = DdlResync(_NoConn(), "pub", "slot", ServerFeatures(180000), enabled=True)
    r._type_texts = lambda types: {}  # type: ignore[method-assign]
    calls = _fail_first_request(r)
    r.relation(_rel(ID, N))
    with pytest.raises(SourceError):
        r.relation(_rel(ID, N._replace(type_oid=20)))
    r.relation(_rel(ID, N._replace(type_oid=20)))  # replayed after the reconnect
    assert calls == [T, T]


# ------------------------------------------- what was published, against the catalog's first look

S0 = [Column(1, "id", 23, -1), Column(2, "n", 23, -1)]
S1 = [Column(1, "id", 23, -1), Column(2, "n", 20, -1)]  # ALTER COLUMN n TYPE bigint


def _checks(r: DdlResync, count: int) -> None:
    for _ in range(count):
        r.next_check = 0.0
        r.tick()


def _quiet(queued: list[tuple[TableName, list[str]]]) -> DdlResync:
    r = _resync(_NoConn(), queued)
    r._type_texts = lambda types: {}  # type: ignore[method-assign]
    return r


def test_published_before_the_first_look_queues_one_resync(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Created, filled, altered: the rows went out with S0, the first check sees S1."""
    queued: list[tuple[TableName, list[str]]] = []
    r = _quiet(queued)
    r.relation(_rel(ID, N))
    _catalog(monkeypatch, iter([S1] * 4))
    _checks(r, 1)
    assert queued == []  # it waits for the table to hold still for one check
    _checks(r, 1)
    assert queued == [(T, ["column n changed type from type 23 to type 20"])]
    _checks(r, 2)
    r.relation(_rel(ID, N._replace(type_oid=20)))  # the next write: the same DDL
    assert len(queued) == 1


def test_published_after_the_first_look_queues_one_resync(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream lags: the check saw S1 before the Relation of the rows written with S0."""
    queued: list[tuple[TableName, list[str]]] = []
    r = _quiet(queued)
    _catalog(monkeypatch, iter([S1] * 4))
    _checks(r, 2)
    assert queued == []  # never published: nothing to re-sync
    r.relation(_rel(ID, N))
    _checks(r, 1)
    assert queued == [(T, ["column n changed type from type 23 to type 20"])]
    _checks(r, 1)
    assert len(queued) == 1


def test_published_as_the_catalog_queues_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A healthy start: every table's Relation (before or after the first look) or snapshot
    matches its catalog."""
    queued: list[tuple[TableName, list[str]]] = []
    r = _resync(_NoConn(), queued)
    r.relation(_rel(ID, N))
    _catalog(monkeypatch, iter([S0] * 4))
    _checks(r, 2)
    r.relations.clear()  # a Relation arriving after the first look
    r.relation(_rel(ID, N))
    r.published(_rel(ID, N))  # a snapshot's read
    _checks(r, 2)
    assert queued == [] and r.unchecked == {}


def test_a_snapshot_read_before_ddl_queues_one_resync(monkeypatch: pytest.MonkeyPatch) -> None:
    queued: list[tuple[TableName, list[str]]] = []
    r = _quiet(queued)
    r.published(_rel(ID, N))  # the initial (or an incremental) snapshot's columns
    _catalog(monkeypatch, iter([[*S0, Column(3, "c", 25, -1, fills_existing=True)]] * 3))
    _checks(r, 2)
    assert queued == [(T, ["column c added with a value for existing rows"])]


def test_a_dropped_table_is_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    queued: list[tuple[TableName, list[str]]] = []
    r = _quiet(queued)
    r.relation(_rel(ID, N))
    monkeypatch.setattr(resync_mod, "catalog_digests", lambda *a: ({}, ""))
    _checks(r, 2)
    assert queued == [] and r.unchecked == {}


def test_a_rename_between_two_relations_queues_a_resync() -> None:
    queued: list[tuple[TableName, list[str]]] = []

    class Conn:  # the added name's catalog look-up: the table as it is now, no default
        def execute(self, query: str, params: Any) -> Any:
            raise psycopg.errors.UndefinedTable("gone")

    r = _resync(Conn(), queued)
    r._type_texts = lambda types: {}  # type: ignore[method-assign]
    r.relation(_rel(ID, N))
    r.relation(_rel(ID, N._replace(name="m")))
    assert queued == [(T, ["column n renamed to m"])]


def test_a_table_created_in_a_streamed_transaction(monkeypatch: pytest.MonkeyPatch) -> None:
    """CREATE TABLE and a large INSERT in one transaction (streamed before its commit), then
    the DDL: the Relation is remembered until a check sees the table, then compared."""
    queued: list[tuple[TableName, list[str]]] = []
    r = _quiet(queued)
    states: list[list[Column] | None] = [None, None, S1, S1]  # None: not created yet
    current: list[Column] = []

    def digests(*args: Any) -> tuple[dict[int, str], str]:
        state = states.pop(0)
        current[:] = state or []
        return ({42: repr(state)} if state else {}), ""

    monkeypatch.setattr(resync_mod, "catalog_digests", digests)
    monkeypatch.setattr(resync_mod, "catalog_columns", lambda *a, **k: {42: (T, current)})
    r.relation(_rel(ID, N, xid=7))  # before any check: not remembered (the catalog unread)
    assert r.unchecked == {}
    _checks(r, 1)
    r.relation(_rel(ID, N, xid=7))
    _checks(r, 1)  # still running: kept
    assert 42 in r.unchecked
    _checks(r, 2)  # committed, then altered
    assert queued == [(T, ["column n changed type from type 23 to type 20"])]
    # A streamed Relation of a table the catalog shows: left to the checks.
    r.relation(_rel(ID, N, xid=8))
    assert r.unchecked == {}

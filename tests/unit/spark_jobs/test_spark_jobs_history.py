"""History chains (spark_jobs/history.py) against a simple model: the table folded in position
order up to a position. Random workloads (updates, deletes, re-inserts, key changes,
truncates, unchanged TOAST, columns added and dropped), delivered with duplicates, in a
random order, split into batches that are folded into the history one after another as the
job does (existing versions' events + the batch's)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.changes import IDX, LSN, OP, TOAST, TS, Position
from spark_jobs.history import (
    CURRENT,
    FROM_LSN,
    HOP,
    TO_LSN,
    TO_OP,
    Tracking,
    as_of,
    as_of_sql,
    at_lsn,
    clashing,
    versions,
)

KEY = ["k"]
COLUMNS = ["k", "a", "b", "big", "late"]  # `late` is added mid-way, `b` dropped mid-way


def event(k: Any, op: str, lsn: int, idx: int = 0, toast: tuple[str, ...] = (),
          **cols: Any) -> dict[str, Any]:
    return {"k": k, **cols, OP: op, LSN: lsn, IDX: idx, TS: lsn * 1000, TOAST: list(toast)}


def fold(events: list[dict[str, Any]], at: Position) -> dict[Any, dict[str, Any]]:
    """The model: the mirror at `at`, applying the events in position order."""
    table: dict[Any, dict[str, Any]] = {}
    seen = {}
    for e in events:
        seen.setdefault((e[LSN], e[IDX]), e)
    for p in sorted(seen):
        if p > at:
            break
        e = seen[p]
        if e[OP] == "t":
            table.clear()
        elif e[OP] == "d":
            table.pop(e["k"], None)
        else:
            old = table.get(e["k"])
            table[e["k"]] = {c: (old or {}).get(c) if c in e[TOAST] else e.get(c)
                             for c in COLUMNS}
    return table


@st.composite
def workloads(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A source history: one event per position, as PostgreSQL writes it."""
    live: dict[int, dict[str, Any]] = {}
    out = []
    lsn = 100
    added = draw(st.integers(0, 30))
    dropped = draw(st.integers(0, 30))
    for step in range(draw(st.integers(1, 30))):
        lsn += draw(st.integers(1, 3)) * 10
        idx = 0
        for _ in range(draw(st.integers(1, 3))):  # changes of one transaction
            cols = {"a": draw(st.sampled_from([None, 1, 2])),
                    "big": draw(st.sampled_from(["x", "y"]))}
            if step < dropped:
                cols["b"] = draw(st.sampled_from([None, "p", "q"]))
            if step >= added:
                cols["late"] = draw(st.integers(0, 2))
            kind = draw(st.sampled_from(["insert", "update", "toast", "delete", "rekey",
                                         "truncate"]))
            k = draw(st.integers(0, 4))
            if kind == "truncate" and draw(st.booleans()):
                out.append(event(None, "t", lsn, idx))
                live.clear()
            elif k not in live or kind == "insert":
                if k in live:
                    out.append(event(k, "d", lsn, idx))
                    idx += 1
                out.append(event(k, draw(st.sampled_from(["c", "r"])), lsn, idx, **cols))
                live[k] = cols
            elif kind == "delete":
                out.append(event(k, "d", lsn, idx))
                del live[k]
            elif kind == "rekey":
                new = k + 10
                out.append(event(k, "d", lsn, idx))
                idx += 1
                if new in live:
                    out.append(event(new, "d", lsn, idx))
                    idx += 1
                out.append(event(new, "c", lsn, idx, **{**live.pop(k), **cols}))
                live[new] = cols
            else:
                toast = ("big",) if kind == "toast" else ()
                out.append(event(k, "u", lsn, idx, toast,
                                 **{**cols, "big": None} if toast else cols))
                live[k] = cols
            idx += 1
    return out


@settings(max_examples=150, deadline=None)
@given(data=st.data(), source=workloads())
def test_as_of_any_position_is_the_fold_whatever_the_arrival(data: st.DataObject,
                                                             source: list[dict[str, Any]]) -> None:
    # delivery: duplicates (a truncate copy per partition, producer retries), any order,
    # in batches; each batch's versions are recomputed for its keys from all events so far
    dup = data.draw(st.lists(st.sampled_from(source), max_size=8)) if source else []
    arrival = data.draw(st.permutations(source + dup))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(arrival)), max_size=4)))
    seen: list[dict[str, Any]] = []
    table: dict[Any, list[dict[str, Any]]] = {}  # key → its versions, as stored
    for lo, hi in zip([0, *cuts], [*cuts, len(arrival)], strict=True):
        batch = arrival[lo:hi]
        seen += batch
        full = any(e[OP] == "t" for e in batch)
        touched = set(table) | {e["k"] for e in seen} if full else {e["k"] for e in batch}
        relevant = [e for e in seen if e[OP] == "t" or e["k"] in touched]
        for k in touched:
            table.pop(k, None)
        for v in versions(relevant, KEY, COLUMNS):
            table.setdefault(v["k"], []).append(v)
    history = [v for vs in table.values() for v in vs]
    assert sorted(map(repr, history)) == sorted(map(repr, versions(source, KEY, COLUMNS)))

    positions = sorted({(e[LSN], e[IDX]) for e in source}) + [(0, 0), (10**9, 0)]
    for p in [*positions, *[(lsn, 10**6) for lsn, _ in positions]]:
        at = Position(*p)
        view = {v["k"]: {c: v[c] for c in COLUMNS} for v in as_of(history, at)}
        assert len(view) == len(as_of(history, at))  # one version per key at a time
        assert view == fold(source, at), p
    # exactly one current version per live key, and it is the table now
    now = {v["k"]: {c: v[c] for c in COLUMNS} for v in history if v[CURRENT]}
    assert now == fold(source, Position(10**9, 0))


@settings(max_examples=100, deadline=None)
@given(source=workloads())
def test_untracked_changes_update_the_version_in_place(source: list[dict[str, Any]]) -> None:
    tracked = Tracking.of(only=["a"])
    history = versions(source, KEY, COLUMNS, tracked)
    for lsn, idx in sorted({(e[LSN], e[IDX]) for e in source}):
        at = Position(lsn, idx)
        view = {v["k"]: v["a"] for v in as_of(history, at)}
        assert view == {k: r["a"] for k, r in fold(source, at).items()}
    # consecutive versions of a key differ in `a`, unless a delete or truncate ended one
    by_key: dict[Any, list[dict[str, Any]]] = {}
    for v in sorted(history, key=lambda v: (v[FROM_LSN], v["__valid_from_txn_index"])):
        by_key.setdefault(v["k"], []).append(v)
    for vs in by_key.values():
        for older, newer in zip(vs, vs[1:], strict=False):
            if older[TO_OP] not in ("d", "t"):
                assert older["a"] != newer["a"]


def test_one_key_story() -> None:
    events = [
        event(1, "c", 100, a=1, big="B1"),
        event(1, "u", 300, 0, ("big",), a=2, big=None),  # TOAST: carries B1
        event(1, "u", 200, a=1, big="B2"),  # late: between the two, re-carried from here
        event(1, "d", 400),
        event(1, "c", 500, a=9, big="B9"),  # re-insert
        event(None, "t", 600),
        event(1, "u", 550, a=8, big="B8"),  # late, closed by the truncate
        event(1, "c", 100, a=1, big="B1"),  # duplicate
    ]
    got = [(v[HOP], v[FROM_LSN], v[TO_LSN], v[TO_OP], v["a"], v["big"])
           for v in sorted(versions(events, KEY, COLUMNS), key=lambda v: v[FROM_LSN])]
    assert got == [("c", 100, 200, "u", 1, "B1"), ("u", 200, 300, "u", 1, "B2"),
                   ("u", 300, 400, "d", 2, "B2"), ("c", 500, 550, "u", 9, "B9"),
                   ("u", 550, 600, "t", 8, "B8")]
    assert as_of(versions(events, KEY, COLUMNS), at_lsn(450)) == []


def test_a_change_of_no_tracked_column_updates_in_place() -> None:
    events = [event(1, "c", 100, a=1, big="x"), event(1, "u", 200, a=1, big="y"),
              event(1, "u", 300, a=2, big="y")]
    got = [(v[FROM_LSN], v[TO_LSN], v["a"], v["big"])
           for v in versions(events, KEY, COLUMNS, Tracking.of(excluded=["BIG"]))]
    assert got == [(100, 300, 1, "y"), (300, None, 2, "y")]
    # with every column tracked the same events give three versions
    assert len(versions(events, KEY, COLUMNS)) == 3


def test_sql_predicates_and_names() -> None:
    assert as_of_sql(5) == ("__valid_from_lsn <= 5 AND (__valid_to_lsn IS NULL OR "
                            "__valid_to_lsn > 5)")
    assert "__valid_to_txn_index > 2" in as_of_sql(5, 2)
    assert clashing(["id", "__IS_CURRENT"]) == ["__IS_CURRENT"]

"""History chains (spark_jobs/history/versions.py) against a simple model: the table folded in
position order up to a position, each event applied by its own key. Random workloads (updates,
deletes, re-inserts, key changes, truncates, unchanged TOAST, columns added and dropped, and
half of them with the key definition changed mid-stream: `(k)` becomes `(k, a)`, then maybe
dropped), delivered with duplicates, in a random order, split into batches that are folded
into the history one after another as the sink does (`stored_after`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.history.versions import (
    CURRENT,
    EVENT_KEY,
    FROM_LSN,
    HOP,
    TO_LSN,
    TO_OP,
    Tracking,
    as_of,
    as_of_sql,
    at_lsn,
    clashing,
    event_key,
    identity,
    key_label,
    shared_key,
    valid_from,
    valid_to,
    versions,
)
from spark_jobs.rules.changes import IDX, LSN, OP, TOAST, TS, Position
from spark_jobs.rules.fold import key_of, position

KEY = ["k"]
WIDE = ["k", "a"]  # the key once the key definition changes mid-stream
COLUMNS = ["k", "a", "b", "big", "late"]  # `late` is added mid-way, `b` dropped mid-way


def event(k: Any, op: str, lsn: int, idx: int = 0, toast: tuple[str, ...] = (),
          key: Sequence[str] | None = None, **cols: Any) -> dict[str, Any]:
    """An event; `key`: the key columns it was written with (None: names none, `KEY`)."""
    e = {"k": k, **cols, OP: op, LSN: lsn, IDX: idx, TS: lsn * 1000, TOAST: list(toast)}
    if key is not None:
        e[EVENT_KEY] = key_label(key)
    return e


def fold(events: list[dict[str, Any]], at: Position) -> list[dict[str, Any]]:
    """The model: the mirror's rows at `at`, applying the events in position order, each to
    the rows equal to it in its own key's columns (an event without a key: a row of its
    own)."""
    rows: list[dict[str, Any]] = []
    seen = {}
    for e in events:  # a key change's delete and create share a position: the delete first
        seen.setdefault((e[LSN], e[IDX], e[OP] != "d"), e)
    for p in sorted(seen):
        if p[:2] > at:
            break
        e = seen[p]
        if e[OP] == "t":
            rows.clear()
            continue
        own = event_key(e, KEY)
        same = [r for r in rows if own and all(r[c] == e[c] for c in own)]
        rows = [r for r in rows if not any(r is s for s in same)]
        if e[OP] != "d":
            old = same[0] if same else {}
            rows.append({c: old.get(c) if c in e[TOAST] else e.get(c) for c in COLUMNS})
    return rows


def table(rows: list[dict[str, Any]]) -> list[str]:
    """Rows as a comparable multiset (their row columns only)."""
    return sorted(repr({c: r[c] for c in COLUMNS}) for r in rows)


def stored_after(batches: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The versions as the sink keeps them: per batch, those of the parts (values of the
    `shared_key` of every event's key) the batch touches or that have a version open at one
    of its truncates are recomputed from every event so far; all of them when some event
    has no key."""
    seen: list[dict[str, Any]] = []
    stored: list[dict[str, Any]] = []
    for batch in batches:
        seen += batch
        shared = shared_key({event_key(e, KEY) for e in seen if e[OP] != "t"})
        truncates = [position(e) for e in batch if e[OP] == "t"]
        touched = {key_of(e, shared) for e in batch if e[OP] != "t"} | {
            key_of(v, shared) for v in stored
            if any(valid_from(v) < t < valid_to(v) for t in truncates)}
        if not shared:
            touched = {()}
        relevant = [e for e in seen if e[OP] == "t" or key_of(e, shared) in touched]
        stored = [v for v in stored if key_of(v, shared) not in touched]
        stored += versions(relevant, KEY, COLUMNS)
    return stored


@st.composite
def workloads(draw: st.DrawFn, rekeying: bool | None = None) -> list[dict[str, Any]]:
    """A source history as the producer publishes it: one event per position, but for a key
    change's delete and create, which share the update's position. With `rekeying`
    (drawn when None) the key definition changes from `(k)` to `(k, a)` at some step (the
    producer emits nothing then; the events after it carry the new key, and can change `a`
    only by a delete and an insert), and maybe is dropped later (only inserts, each a row of
    its own, and truncates follow), and every event names its key."""
    if rekeying is None:
        rekeying = draw(st.booleans())
    live: dict[tuple[Any, ...], dict[str, Any]] = {}  # the rows now, by their key's values
    out = []
    lsn = 100
    key: list[str] = KEY
    added = draw(st.integers(0, 30))
    dropped = draw(st.integers(0, 30))
    widened = draw(st.integers(0, 30)) if rekeying else None
    keyless = draw(st.integers(0, 40)) if rekeying else None

    def add(k: Any, op: str, idx: int, toast: tuple[str, ...] = (), **cols: Any) -> None:
        out.append(event(k, op, lsn, idx, toast, key if rekeying else None, **cols))
    for step in range(draw(st.integers(1, 30))):
        lsn += draw(st.integers(1, 3)) * 10
        idx = 0
        if step == widened:  # ALTER TABLE ... ADD PRIMARY KEY (k, a)
            key = WIDE
            live = {tuple(r[c] for c in key): r for r in live.values()}
        if step == keyless and key == WIDE:  # ... DROP CONSTRAINT: no replica identity
            key = []
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
            ident = tuple({"k": k, **cols}[c] for c in key)
            of_k = sorted((i for i in live if i[0] == k), key=repr)
            if kind == "truncate" and draw(st.booleans()):
                add(None, "t", idx)
                live.clear()
            elif not key:
                add(k, "c", idx, **cols)
            elif not of_k or kind == "insert":
                if ident in live:
                    add(k, "d", idx, **{c: live[ident][c] for c in key if c != "k"})
                    idx += 1
                add(k, draw(st.sampled_from(["c", "r"])), idx, **cols)
                live[ident] = {"k": k, **cols}
            else:
                old = live.pop(draw(st.sampled_from(of_k)))
                named = {c: old[c] for c in key if c != "k"}
                if kind == "delete":
                    add(k, "d", idx, **named)
                elif kind == "rekey":  # the producer's two events at the update's position
                    new = k + 10
                    moved = tuple({"k": new, **cols}[c] for c in key)
                    if moved in live:  # an earlier statement frees the new key
                        add(new, "d", idx, **{c: live[moved][c] for c in key if c != "k"})
                        idx += 1
                    add(k, "d", idx, **named)
                    row = {**old, **cols, "k": new}
                    add(new, "c", idx, **{c: v for c, v in row.items() if c != "k"})
                    live[moved] = row
                else:
                    cols.update(named)  # an update keeps the key's values
                    toast = ("big",) if kind == "toast" else ()
                    add(k, "u", idx, toast, **{**cols, "big": None} if toast else cols)
                    live[tuple({"k": k, **cols}[c] for c in key)] = {"k": k, **cols}
            idx += 1
    return out


@settings(max_examples=200, deadline=None)
@given(data=st.data(), source=workloads())
def test_as_of_any_position_is_the_fold_whatever_the_arrival(data: st.DataObject,
                                                             source: list[dict[str, Any]]) -> None:
    # delivery: duplicates (a truncate copy per partition, producer retries), any order,
    # in batches, folded as the sink folds them
    dup = data.draw(st.lists(st.sampled_from(source), max_size=8)) if source else []
    arrival = data.draw(st.permutations(source + dup))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(arrival)), max_size=4)))
    history = stored_after([arrival[lo:hi] for lo, hi in
                            zip([0, *cuts], [*cuts, len(arrival)], strict=True)])
    assert sorted(map(repr, history)) == sorted(map(repr, versions(source, KEY, COLUMNS)))
    assert len({valid_from(v) for v in history}) == len(history)  # one opening event each

    positions = sorted({(e[LSN], e[IDX]) for e in source}) + [(0, 0), (10**9, 0)]
    for p in [*positions, *[(lsn, 10**6) for lsn, _ in positions]]:
        at = Position(*p)
        assert table(as_of(history, at)) == table(fold(source, at)), p
    # one current version per row of the table now
    assert table([v for v in history if v[CURRENT]]) == table(fold(source, Position(10**9, 0)))


@settings(max_examples=100, deadline=None)
@given(source=workloads(rekeying=False))
def test_untracked_changes_update_the_version_in_place(source: list[dict[str, Any]]) -> None:
    tracked = Tracking.of(only=["a"])
    history = versions(source, KEY, COLUMNS, tracked)
    for lsn, idx in sorted({(e[LSN], e[IDX]) for e in source}):
        at = Position(lsn, idx)
        view = {v["k"]: v["a"] for v in as_of(history, at)}
        assert view == {r["k"]: r["a"] for r in fold(source, at)}
    # consecutive versions of a key differ in `a`, unless a delete or truncate ended one
    by_key: dict[Any, list[dict[str, Any]]] = {}
    for v in sorted(history, key=lambda v: (v[FROM_LSN], v["__valid_from_txn_index"])):
        by_key.setdefault(v["k"], []).append(v)
    for vs in by_key.values():
        for older, newer in zip(vs, vs[1:], strict=False):
            if older[TO_OP] not in ("d", "t"):
                assert older["a"] != newer["a"]


@settings(max_examples=200, deadline=None)
@given(data=st.data(), source=workloads(), only_a=st.booleans())
def test_extending_the_current_versions_is_versions_of_the_whole(
        data: st.DataObject, source: list[dict[str, Any]], only_a: bool) -> None:
    """The sink's fast path: the versions of the events before a position, extended by the
    events after it (with duplicates, in any order) from the earlier *current* versions
    alone, are the versions of the whole set: TOAST carried from a stored version, in-place
    updates of untracked columns, deletes, re-inserts, key changes, truncates, a key
    definition changed or dropped, on either side of the cut. Only the versions it opened
    or changed come back."""
    tracking = Tracking.of(only=["a"]) if only_a else Tracking()
    positions = sorted({position(e) for e in source})
    cut = data.draw(st.integers(0, len(positions)))
    before = set(positions[:cut])
    earlier = [e for e in source if position(e) in before]
    later = [e for e in source if position(e) not in before]
    later = data.draw(st.permutations(
        later + data.draw(st.lists(st.sampled_from(later), max_size=4)) if later else []))
    stored = versions(earlier, KEY, COLUMNS, tracking)
    extended = versions(later, KEY, COLUMNS, tracking,
                        current=[v for v in stored if v[CURRENT]])
    old = {identity(v): v for v in stored}
    assert all(old.get(identity(v)) != v for v in extended)
    assert len({identity(v) for v in extended}) == len(extended)
    merged = {**old, **{identity(v): v for v in extended}}
    assert sorted(map(repr, merged.values())) == sorted(
        map(repr, versions(source, KEY, COLUMNS, tracking)))


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

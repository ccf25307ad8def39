"""History tables (SCD type 2): the versions of each source row, computed from the set of its
change events. Pure: plain functions over Python rows (dicts), no Spark, no Delta.

A version is one state of one row over a span of source positions ``[valid_from, valid_to)``,
where a position is ``(commit_lsn, txn_index)``. The versions are a function of the *set* of
the table's events: events are ordered by their id (`changes.EventId`: the position, then
the delete of a primary-key change before the create at the same position), not by arrival,
and an event seen twice (same id) counts once, so late events, duplicates, restarts and
replays give the same versions (`versions` sorts and deduplicates first). The id, not the
position, names an event: a key change's two events share a position.

Which row an event changes: the one its own key names, as in the mirror (each event is
merged by the key it was written with). Every event carries the columns of its key schema
(`EVENT_KEY`; an event that names none has the table's key given to `versions`). Walking the
events in position order, an event *matches* the versions open at its position whose values
in the event's key columns equal the event's (Spark's equality: NULL = NULL, -0.0 = 0.0).
So a version is a row's state whichever key addressed it: a version opened by an event
keyed by ``(a)`` is found later by an event keyed by ``(a, b)`` through its ``a`` and ``b``.

When the key definition changes (``ALTER TABLE ... ADD PRIMARY KEY``, a replica identity
index changed or dropped) the producer emits no event: only the key schema of the events
after it changes. The key change therefore neither closes nor opens a version: a row's open
version spans it, and the row's next event (under the new key) continues its chain.
PostgreSQL keeps a key unique among the rows, so an event matches at most one version; if
several match (a key PostgreSQL did not enforce), the event closes them all and opens one.

Rules, per event in position order:

* an insert, update or snapshot read (`c`, `u`, `r`) gives the row image: its columns, where a
  column named in the event's unchanged-TOAST list takes the matched version's value (NULL
  when none matches). When no version matches, the image opens one. When one matches and the
  image differs from it in a *tracked* column, the matched version closes at the event's
  position and the image opens the next one; when it differs in untracked columns only (or
  in none: a snapshot re-read, an update that set the same values), the matched version
  takes the image **in place** (its `valid_from` and `__op` stay). Tracked columns: every
  column not in the event's key, or those `Tracking` names.
* a delete closes the matched version at its position (no delete-marker row: a deleted row
  is a version with `__valid_to_op = 'd'` and no successor).
* a truncate closes every version open at its position (`__valid_to_op = 't'`), whichever
  batch brought it: a late event older than the truncate is closed by it.
* a primary-key *value* change arrives as a delete of the old key and an insert of the new
  one, both at the update's position, the delete first: the old key's version closes at
  that position, the new key's opens there (as of it, the new key's row is visible, the old
  one's not, as after the update in PostgreSQL).
* an event without a key (no replica identity: the key was dropped) matches nothing: it is a
  row of its own, as in the mirror (merged by its position), closed only by a truncate.

Each event opens at most one version and a delete opens none, so (one non-delete event per
position) a version is named by where it starts (`identity`). Events that differ in the
columns every key has (`shared_key`) never change the same row: the versions can be
recomputed apart per value of those columns.

The columns of a version are the table's row columns (all the events' columns: one added
later is NULL in older versions, one dropped upstream is NULL in versions opened after the
drop), plus `HISTORY_COLUMNS`. `as_of` is the point-in-time rule: the versions whose span
holds a position."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..rules.changes import IDX, LSN, OP, TOAST, TS, EventId, Position
from ..rules.fold import event_id, key_of

Row = dict[str, Any]

FROM_LSN, FROM_IDX = "__valid_from_lsn", "__valid_from_txn_index"
TO_LSN, TO_IDX = "__valid_to_lsn", "__valid_to_txn_index"
FROM_TS, TO_TS = "__valid_from", "__valid_to"  # commit times (epoch ms here; timestamps in Delta)
CURRENT, HOP, TO_OP = "__is_current", "__op", "__valid_to_op"
HISTORY_COLUMNS = (FROM_LSN, FROM_IDX, TO_LSN, TO_IDX, FROM_TS, TO_TS, CURRENT, HOP, TO_OP)
# In the history's event log: the key columns the event was written with, a JSON list
# (`[]`: no key). NULL (events logged before it was kept): the key given to `versions`.
EVENT_KEY = "__event_key"
_INF = 1 << 63


class HistoryError(ValueError):
    """A table whose history cannot be kept as asked (one line, names the table)."""


@dataclass(frozen=True)
class Tracking:
    """Which columns open a new version when they change (`--history-columns` /
    `--history-except-columns`): `only` (when not None) or every column but `excluded`.
    Names are the table's column names, compared ignoring case; key columns never count
    (they do not change within a key's history)."""

    only: frozenset[str] | None = None
    excluded: frozenset[str] = frozenset()

    @classmethod
    def of(cls, only: Iterable[str] = (), excluded: Iterable[str] = ()) -> Tracking:
        only_, excluded_ = frozenset(c.lower() for c in only), frozenset(
            c.lower() for c in excluded)
        if only_ and excluded_:
            raise ValueError("give --history-columns or --history-except-columns, not both")
        return cls(only_ or None, excluded_)

    def tracked(self, columns: Iterable[str], key: Sequence[str]) -> list[str]:
        keys = {k.lower() for k in key}
        return [c for c in columns if c.lower() not in keys and c.lower() not in self.excluded
                and (self.only is None or c.lower() in self.only)]


ALL = Tracking()


def dedupe(events: Iterable[Row]) -> list[Row]:
    """The events once each, in their order (`changes.EventId`: copies of one event, such
    as a truncate's, one per Kafka partition, share its id; the two events of a key change
    do not)."""
    seen: dict[EventId, Row] = {}
    for e in events:
        seen.setdefault(event_id(e), e)
    return [seen[i] for i in sorted(seen)]


def key_label(key: Sequence[str] | None) -> str:
    """`EVENT_KEY`'s value for events written with these key columns (None: no key)."""
    return json.dumps(list(key or []))


def event_key(event: Row, default: Sequence[str]) -> tuple[str, ...]:
    """The key columns `event` was written with (empty: none); `default` when it names none."""
    label = event.get(EVENT_KEY)
    return tuple(default) if label is None else tuple(json.loads(label))


def shared_key(keys: Iterable[Sequence[str]]) -> list[str]:
    """The columns every non-empty one of `keys` has (sorted): events differing in them never
    match the same version, so the versions can be recomputed apart per value of them (see
    the module doc). An event without a key matches nothing, and the version it opens is
    matched later only by keyed events, through those columns: it belongs to its values in
    them too. Empty when the keys share no column (or there is none): the whole table is one
    part."""
    common: set[str] | None = None
    for k in keys:
        if k:
            common = set(k) if common is None else common & set(k)
    return sorted(common or ())


def versions(events: Iterable[Row], key: Sequence[str], columns: Sequence[str],
             tracking: Tracking = ALL, current: Iterable[Row] = ()) -> list[Row]:
    """Every version the events determine (see the module doc for the rules).
    `events`: flattened changes (row columns + `_cdc_op`, position, `_cdc_ts_ms`,
    `_cdc_toast`, `EVENT_KEY`), in any order, duplicates allowed; they must include every
    event that can match the versions concerned (all events with the same `shared_key`
    values) and every truncate of the table. `key`: the key of events that name none.
    `columns`: the row columns the versions get (an event lacking one has NULL there).

    Extending (`current`): the versions open after some *earlier* events (what
    `versions(earlier)` leaves current, of the parts concerned), when every one of `events`
    comes after every earlier event. The walk then starts with them open instead of
    walking the earlier events, which it need not be given (`events` holds only the later
    events of those parts and the later truncates), and returns the versions it opened
    plus copies of those of `current` it changed (closed, or updated in place to other
    values); the others are left as they were. The invariant: the earlier versions with
    these replacing theirs (`identity`) and these added are `versions(earlier + events)`
    (tests/unit/spark_jobs/test_spark_jobs_history.py, `test_extending_...`)."""
    ordered = dedupe(events)
    keys = {event_key(e, key) for e in ordered if e[OP] != "t"}
    tracked = {k: tracking.tracked(columns, k) for k in keys}
    live = _OpenVersions(keys)
    given = list(current)
    started = [dict(v) for v in given]  # walked (changed in place); `given` stays as it was
    for v in started:
        live.add(v)
    out: list[Row] = []
    for e in ordered:
        if e[OP] == "t":
            for v in live.clear():
                _close(v, e)
            continue
        own = event_key(e, key)
        matched = live.matching(own, e)
        if e[OP] == "d":
            for v in matched:
                live.remove(v)
                _close(v, e)
            continue
        before = max(matched, key=valid_from, default=None)
        toast = set(e.get(TOAST) or ())
        new = {c: (before.get(c) if before is not None else None) if c in toast else e.get(c)
               for c in columns}
        if len(matched) == 1 and before is not None and all(
                key_of(new, [c]) == key_of(before, [c]) for c in tracked[own]):
            live.remove(before)
            before.update(new)  # in place: untracked columns only
            live.add(before)
            continue
        for v in matched:
            live.remove(v)
            _close(v, e)
        opened = {**new, FROM_LSN: e[LSN], FROM_IDX: e[IDX], TO_LSN: None, TO_IDX: None,
                  FROM_TS: e[TS], TO_TS: None, CURRENT: True, HOP: e[OP], TO_OP: None}
        live.add(opened)
        out.append(opened)
    return out + [v for v, was in zip(started, given, strict=True) if v != was]


class _OpenVersions:
    """The versions open at the walk's position, found by their values in the columns of
    any of `keys` (one index per key; an in-place update is a remove and an add)."""

    def __init__(self, keys: Iterable[tuple[str, ...]]) -> None:
        self._all: dict[int, Row] = {}
        self._by: dict[tuple[str, ...], dict[tuple[Any, ...], dict[int, Row]]] = {
            k: {} for k in keys if k}

    def matching(self, key: tuple[str, ...], event: Row) -> list[Row]:
        """The open versions whose `key` columns equal the event's (none for no key)."""
        if not key:
            return []
        return list(self._by[key].get(key_of(event, key), {}).values())

    def add(self, version: Row) -> None:
        self._all[id(version)] = version
        for k, index in self._by.items():
            index.setdefault(key_of(version, k), {})[id(version)] = version

    def remove(self, version: Row) -> None:
        del self._all[id(version)]
        for k, index in self._by.items():
            values = key_of(version, k)
            del index[values][id(version)]
            if not index[values]:
                del index[values]

    def clear(self) -> list[Row]:
        """Every open version, none open any more."""
        every = list(self._all.values())
        self._all.clear()
        for index in self._by.values():
            index.clear()
        return every


def _close(version: Row, event: Row) -> None:
    version.update({TO_LSN: event[LSN], TO_IDX: event[IDX], TO_TS: event[TS], CURRENT: False,
                    TO_OP: event[OP]})


def valid_from(version: Row) -> Position:
    return Position(version[FROM_LSN], version[FROM_IDX])


def valid_to(version: Row) -> Position:
    """The end of a version's span; beyond every position while it is current."""
    if version[TO_LSN] is None:
        return Position(_INF, _INF)
    return Position(version[TO_LSN], version[TO_IDX])


def as_of(history: Iterable[Row], at: Position) -> list[Row]:
    """The versions valid at position `at`: ``valid_from <= at < valid_to``. As of an LSN
    (every transaction committed at or before it): ``at = (lsn, 2**63 - 1)``."""
    return [v for v in history if valid_from(v) <= at < valid_to(v)]


def at_lsn(lsn: int) -> Position:
    """The position that ends commit LSN `lsn`: as of it, every change of transactions
    committed at or before `lsn` is visible, none of a later one."""
    return Position(lsn, _INF - 1)


def as_of_sql(lsn: int, txn_index: int | None = None) -> str:
    """SQL predicate (Spark and DataFusion) selecting the versions valid at an LSN (every
    transaction committed at or before it) or at an exact position (lsn, txn_index)."""
    if txn_index is None:
        return f"{FROM_LSN} <= {int(lsn)} AND ({TO_LSN} IS NULL OR {TO_LSN} > {int(lsn)})"
    lsn, idx = int(lsn), int(txn_index)
    return (f"({FROM_LSN} < {lsn} OR ({FROM_LSN} = {lsn} AND {FROM_IDX} <= {idx})) AND "
            f"({TO_LSN} IS NULL OR {TO_LSN} > {lsn} OR ({TO_LSN} = {lsn} AND {TO_IDX} > {idx}))")


def as_of_time_sql(timestamp: str) -> str:
    """SQL predicate selecting the versions valid at a commit time (a timestamp literal such
    as ``'2026-03-03 00:00:00'`` or an expression): opened at or before it, closed after."""
    return f"{FROM_TS} <= {timestamp} AND ({TO_TS} IS NULL OR {TO_TS} > {timestamp})"


def identity(version: Row) -> Position:
    """What names a version in the history table: where it starts (the position of the event
    that opened it: each event opens at most one version, a delete none, and a position
    holds one event that is not a delete)."""
    return valid_from(version)


def clashing(columns: Iterable[str]) -> list[str]:
    """Row columns whose names the history columns or the log's `EVENT_KEY` take (ignoring
    case)."""
    taken = {h.lower() for h in (*HISTORY_COLUMNS, EVENT_KEY)}
    return [c for c in columns if c.lower() in taken]
